/*
 * python_order.c: Python's order of file names (python_order.h).
 */
#include "python_order.h"

#include <stdint.h>

/* The code point at S (LEN bytes left, at least 1) as Python's strict
 * UTF-8 decoder reads it, *USED its bytes: a byte that starts no valid
 * character (a stray continuation, an overlong form, a surrogate, past
 * U+10FFFF, cut short) is U+DC80 + (byte - 0x80) alone. */
static uint32_t next_code(const unsigned char *s, size_t len, size_t *used)
{
    const unsigned b = s[0];
    *used = 1;
    if (b < 0x80)
        return b;
    /* the bytes that follow B, and the range of the first of them (the
     * others are 0x80 to 0xBF): what rules out overlong forms, surrogates
     * and code points past U+10FFFF */
    size_t more = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        more = 1;
    else if (b >= 0xE0 && b <= 0xEF) {
        more = 2;
        lo = b == 0xE0 ? 0xA0 : 0x80;
        hi = b == 0xED ? 0x9F : 0xBF;
    } else if (b >= 0xF0 && b <= 0xF4) {
        more = 3;
        lo = b == 0xF0 ? 0x90 : 0x80;
        hi = b == 0xF4 ? 0x8F : 0xBF;
    }
    int valid = more > 0 && len > more && s[1] >= lo && s[1] <= hi;
    for (size_t i = 2; valid && i <= more; i++)
        valid = s[i] >= 0x80 && s[i] <= 0xBF;
    if (!valid)
        return 0xDC00 + b;
    uint32_t code = b & (0x3F >> more);
    for (size_t i = 1; i <= more; i++)
        code = code << 6 | (s[i] & 0x3F);
    *used = more + 1;
    return code;
}

int ddp_python_order(const char *a, size_t a_len, const char *b, size_t b_len)
{
    const unsigned char *p = (const unsigned char *)a, *q = (const unsigned char *)b;
    size_t i = 0, j = 0;
    while (i < a_len && j < b_len) {
        size_t used_a, used_b;
        uint32_t x = next_code(p + i, a_len - i, &used_a), y = next_code(q + j, b_len - j, &used_b);
        if (x != y)
            return x < y ? -1 : 1;
        i += used_a;
        j += used_b;
    }
    return (i < a_len) - (j < b_len);
}
