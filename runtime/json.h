/*
 * json.h: the JSON the runtime reads (safetensors headers) and writes (the
 * --log lines, safetensors headers).
 */
#ifndef DDPRT_JSON_H
#define DDPRT_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"  // DdpStatus

/* Nesting a reader follows when skipping values it does not know (a
 * safetensors tensor entry is 2 deep). */
#define DDP_JSON_MAX_DEPTH 16

/* A reader over TEXT..END, at P. Decoded strings go into ARENA (the caller
 * sizes it as the text: a decoded string is never longer than its JSON
 * spelling). PATH names the file in messages; the one document read is a
 * safetensors header, and the messages say so. */
typedef struct {
    const char *path;
    const unsigned char *text, *p, *end;
    char *arena;
    size_t arena_used;
} DdpJson;

/* DDP_BAD_INPUT: "PATH: malformed header: MESSAGE at byte N of the header". */
DdpStatus ddp_json_error(const DdpJson *j, const char *message);
/* Skips white space. */
void ddp_json_skip_ws(DdpJson *j);
/* Consumes C (after white space), or fails with EXPECTED as the message. */
DdpStatus ddp_json_expect(DdpJson *j, char c, const char *expected);
/* A string, decoded into the arena as UTF-8 and NUL-terminated (so \u0000
 * is refused: names are C strings). */
DdpStatus ddp_json_string(DdpJson *j, const char **out);
/* A non-negative integer without sign, fraction or exponent, up to
 * INT64_MAX; WHAT is the message when there is none. */
DdpStatus ddp_json_count(DdpJson *j, const char *what, int64_t *out);
/* Skips any JSON value that lies DEPTH deep; nothing deeper than
 * DDP_JSON_MAX_DEPTH is followed. */
DdpStatus ddp_json_skip_value(DdpJson *j, int depth);

/* Writes S as a JSON string literal, quotes included, to F; bytes that are
 * not UTF-8 become U+FFFD, so the output is always valid JSON. */
void ddp_json_put_string(FILE *f, const char *s);

/* The length (1 to 4) of the well-formed UTF-8 sequence at S, which holds
 * AVAIL bytes, or 0 if there is none (overlong, surrogate, cut short...). */
int ddp_utf8_sequence(const unsigned char *s, size_t avail);

#endif
