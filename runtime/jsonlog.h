/*
 * jsonlog.h: the --log file: one JSON object per line, one line per call.
 */
#ifndef DDPRT_JSONLOG_H
#define DDPRT_JSONLOG_H

#include <stdint.h>
#include <stdio.h>

#include "status.h"  // DdpStatus

typedef enum {
    DDP_LOG_INT,  /* printed exactly */
    DDP_LOG_F32,  /* a float's value: shortest text that reads back as the same float */
    DDP_LOG_F64,  /* a double's value: shortest text that reads back as the same double */
    DDP_LOG_STR,  /* a string, escaped */
    DDP_LOG_BOOL, /* true or false */
    DDP_LOG_JSON, /* JSON text made by the caller (an array), written as it is */
} DdpLogKind;

typedef struct {
    const char *key;
    DdpLogKind kind;
    union {
        int64_t i;
        double f;
        const char *s;
    };
} DdpLogField;

/* Field constructors: DdpLogField f[] = {DDP_LOG_I("epoch", e), DDP_LOG_F("loss", loss)}; */
#define DDP_LOG_I(k, v) ((DdpLogField){.key = (k), .kind = DDP_LOG_INT, .i = (v)})
#define DDP_LOG_F(k, v) ((DdpLogField){.key = (k), .kind = DDP_LOG_F32, .f = (v)})
#define DDP_LOG_D(k, v) ((DdpLogField){.key = (k), .kind = DDP_LOG_F64, .f = (v)})
#define DDP_LOG_S(k, v) ((DdpLogField){.key = (k), .kind = DDP_LOG_STR, .s = (v)})
#define DDP_LOG_B(k, v) ((DdpLogField){.key = (k), .kind = DDP_LOG_BOOL, .i = !!(v)})
#define DDP_LOG_J(k, v) ((DdpLogField){.key = (k), .kind = DDP_LOG_JSON, .s = (v)})

typedef struct DdpJsonLog DdpJsonLog;

/* Whether PATH may be the log: "-", nothing yet, this process's own
 * standard output or error (written into at that stream's place), or a
 * file written in place (dirs.h: not a directory) that is empty or begins
 * as a log's lines do, with {"event": . Anything else there, the weights
 * of --init, a checkpoint, the .net, is what a mistyped --log would empty
 * (or append lines to): DDP_BAD_INPUT naming --log, and the file left as it
 * is. */
DdpStatus ddp_jsonlog_check(const char *path);

/* Opens PATH for writing ("-" is stdout), truncating it, or appending to it
 * when APPEND (a resumed run continues its log), once ddp_jsonlog_check
 * allows it; else DDP_BAD_INPUT naming --log. */
DdpStatus ddp_jsonlog_open(const char *path, int append, DdpJsonLog **out);

/* Writes FIELDS[0..n) as one line {"key": value, ...} and flushes it, so a
 * reader tailing the file never sees half a line from us. NaN and infinities
 * are written as null: JSON has no spelling for them. */
DdpStatus ddp_jsonlog_write(DdpJsonLog *log, const DdpLogField *fields, int n);

/* Closes the log (NULL is fine); DDP_FAIL if buffered lines could not be written. */
DdpStatus ddp_jsonlog_close(DdpJsonLog *log);

#endif
