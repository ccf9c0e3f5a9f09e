/*
 * json.c: the JSON the runtime reads and writes (json.h).
 *
 * Reading is for safetensors headers: strict (RFC 8259 numbers, escapes,
 * UTF-8), bounded (every read checks the end, nesting is capped) and
 * allocation-free (strings decode into the caller's arena, never longer than
 * their JSON spelling). Writing is for the --log lines and safetensors
 * headers: strings escaped, bytes that are not UTF-8 replaced, since JSON
 * text must be UTF-8 and paths need not be.
 */
#include "json.h"

#include <stdint.h>
#include <string.h>

/* ---- reading ---------------------------------------------------------------- */

DdpStatus ddp_json_error(const DdpJson *j, const char *what)
{
    return DDP_ERR(DDP_BAD_INPUT, "%s: malformed header: %s at byte %lld of the header", j->path, what,
                   (long long)(j->p - j->text));
}

void ddp_json_skip_ws(DdpJson *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

/* Consumes C (after white space) or fails naming what was expected. */
DdpStatus ddp_json_expect(DdpJson *j, char c, const char *expected)
{
    ddp_json_skip_ws(j);
    if (j->p >= j->end || *j->p != (unsigned char)c)
        return ddp_json_error(j, expected);
    j->p++;
    return DDP_OK;
}

static int hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = p[k], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            return 0;
        v = v << 4 | d;
    }
    *out = v;
    return 1;
}

/* A string, decoded into the arena as UTF-8 and NUL-terminated (so \u0000 is
 * refused: names are C strings). */
DdpStatus ddp_json_string(DdpJson *j, const char **out)
{
    ddp_json_skip_ws(j);
    if (j->p >= j->end || *j->p != '"')
        return ddp_json_error(j, "expected a string");
    j->p++;
    char *dst = j->arena + j->arena_used, *start = dst;
    for (;;) {
        if (j->p >= j->end)
            return ddp_json_error(j, "unterminated string");
        unsigned c = *j->p;
        if (c == '"') {
            j->p++;
            break;
        }
        if (c < 0x20)
            return ddp_json_error(j, "control character in a string");
        if (c != '\\') {
            int len = ddp_utf8_sequence(j->p, (size_t)(j->end - j->p));
            if (len == 0)
                return ddp_json_error(j, "invalid UTF-8");
            memcpy(dst, j->p, (size_t)len);
            dst += len;
            j->p += len;
            continue;
        }
        if (j->end - j->p < 2)
            return ddp_json_error(j, "unterminated string");
        unsigned e = j->p[1];
        const char *simple = strchr("\"\\/bfnrt", (int)e);
        if (e && simple) {
            static const char decoded[] = "\"\\/\b\f\n\r\t";
            *dst++ = decoded[simple - "\"\\/bfnrt"];
            j->p += 2;
            continue;
        }
        unsigned cp;
        if (e != 'u' || j->end - j->p < 6 || !hex4(j->p + 2, &cp))
            return ddp_json_error(j, "bad escape in a string");
        j->p += 6;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            unsigned lo;
            if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || !hex4(j->p + 2, &lo) ||
                lo < 0xdc00 || lo > 0xdfff)
                return ddp_json_error(j, "unpaired surrogate in a string");
            j->p += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return ddp_json_error(j, "unpaired surrogate in a string");
        }
        if (cp == 0)
            return ddp_json_error(j, "NUL character in a string");
        /* 6 or 12 bytes of escape become at most 4 of UTF-8: the arena holds. */
        if (cp < 0x80) {
            *dst++ = (char)cp;
        } else if (cp < 0x800) {
            *dst++ = (char)(0xc0 | cp >> 6);
            *dst++ = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            *dst++ = (char)(0xe0 | cp >> 12);
            *dst++ = (char)(0x80 | (cp >> 6 & 0x3f));
            *dst++ = (char)(0x80 | (cp & 0x3f));
        } else {
            *dst++ = (char)(0xf0 | cp >> 18);
            *dst++ = (char)(0x80 | (cp >> 12 & 0x3f));
            *dst++ = (char)(0x80 | (cp >> 6 & 0x3f));
            *dst++ = (char)(0x80 | (cp & 0x3f));
        }
    }
    *dst++ = '\0';
    j->arena_used += (size_t)(dst - start);
    *out = start;
    return DDP_OK;
}

/* A non-negative integer without sign, fraction or exponent, up to INT64_MAX. */
DdpStatus ddp_json_count(DdpJson *j, const char *what, int64_t *out)
{
    ddp_json_skip_ws(j);
    const unsigned char *start = j->p;
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (v > (uint64_t)(INT64_MAX - 9) / 10)
            return ddp_json_error(j, "number too large");
        v = v * 10 + (uint64_t)(*j->p++ - '0');
    }
    if (j->p == start || (j->p - start > 1 && *start == '0') ||
        (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E')))
        return ddp_json_error(j, what);
    *out = (int64_t)v;
    return DDP_OK;
}

/* Skips any JSON value (of a field we do not know); DEPTH is how deep it
 * lies, and nothing deeper than DDP_JSON_MAX_DEPTH is followed. */
DdpStatus ddp_json_skip_value(DdpJson *j, int depth)
{
    if (depth > DDP_JSON_MAX_DEPTH)
        return ddp_json_error(j, "nesting too deep");
    ddp_json_skip_ws(j);
    if (j->p >= j->end)
        return ddp_json_error(j, "expected a value");
    unsigned c = *j->p;
    if (c == '"') {
        const char *ignored;
        size_t mark = j->arena_used;
        DdpStatus st = ddp_json_string(j, &ignored);
        j->arena_used = mark;
        return st;
    }
    if (c == '{' || c == '[') {
        unsigned close = c == '{' ? '}' : ']';
        j->p++;
        ddp_json_skip_ws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return DDP_OK;
        }
        for (;;) {
            if (c == '{') {
                const char *ignored;
                size_t mark = j->arena_used;
                DDP_CHECK(ddp_json_string(j, &ignored));
                j->arena_used = mark;
                DDP_CHECK(ddp_json_expect(j, ':', "expected ':'"));
            }
            DDP_CHECK(ddp_json_skip_value(j, depth + 1));
            ddp_json_skip_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            return ddp_json_expect(j, (char)close, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t len = strlen(words[w]);
        if ((size_t)(j->end - j->p) >= len && memcmp(j->p, words[w], len) == 0) {
            j->p += len;
            return DDP_OK;
        }
    }
    /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    const unsigned char *p = j->p;
    if (p < j->end && *p == '-')
        p++;
    const unsigned char *digits = p;
    while (p < j->end && *p >= '0' && *p <= '9')
        p++;
    if (p == digits || (p - digits > 1 && *digits == '0'))
        return ddp_json_error(j, "expected a value");
    if (p < j->end && *p == '.') {
        const unsigned char *frac = ++p;
        while (p < j->end && *p >= '0' && *p <= '9')
            p++;
        if (p == frac)
            return ddp_json_error(j, "bad number");
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < j->end && (*p == '+' || *p == '-'))
            p++;
        const unsigned char *exp = p;
        while (p < j->end && *p >= '0' && *p <= '9')
            p++;
        if (p == exp)
            return ddp_json_error(j, "bad number");
    }
    j->p = p;
    return DDP_OK;
}

/* ---- writing ---------------------------------------------------------------- */

int ddp_utf8_sequence(const unsigned char *s, size_t avail)
{
    if (avail == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    int len;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (avail < (size_t)len)
        return 0;
    unsigned cp = c & (0x7fu >> len);
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void ddp_json_put_string(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    putc('"', f);
    while (*s) {
        unsigned c = *s;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f" : NULL;
        if (esc) {
            fputs(esc, f);
            s++;
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            s++;
        } else {
            /* strnlen stops at the NUL, so a sequence cut short by it is caught */
            int len = ddp_utf8_sequence(s, strnlen((const char *)s, 4));
            if (len == 0) {
                fputs("\\ufffd", f);
                s++;
            } else {
                fwrite(s, 1, (size_t)len, f);
                s += len;
            }
        }
    }
    putc('"', f);
}
