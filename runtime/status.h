/*
 * status.h: how the runtime reports failure.
 *
 * Library code never exits (nccl-tests' NCCLCHECK habit): a function that can
 * fail returns a DdpStatus and records one message saying what went wrong,
 * naming the file or flag at fault. Callers pass the status up with DDP_CHECK;
 * the program's main decides how to stop and prints the message. The values
 * are the program's exit statuses, so main can simply return one.
 */
#ifndef DDPRT_STATUS_H
#define DDPRT_STATUS_H

#include <stddef.h>  // size_t

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DDP_OK = 0,
    DDP_FAIL = 1,      /* a failure while running: I/O, a rank died, NaN, timeout */
    DDP_BAD_INPUT = 2, /* bad usage or bad input: a flag, a data or weights file */
} DdpStatus;

/* Records a printf-style message (and where in the runtime it was raised, for
 * --verbose) and returns STATUS, so `return DDP_ERR(DDP_BAD_INPUT, ...)` reads. */
DdpStatus ddp_error_at(DdpStatus status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define DDP_ERR(status, ...) ddp_error_at((status), __FILE__, __LINE__, __VA_ARGS__)

/* Passes a failed status up to the caller, keeping the first message. */
#define DDP_CHECK(call)                  \
    do {                                 \
        DdpStatus ddp_status_ = (call);  \
        if (ddp_status_ != DDP_OK)       \
            return ddp_status_;          \
    } while (0)

/* The message of the last failure ("" if none), and where it was raised. */
const char *ddp_error_message(void);
/* Room for a message, its terminating NUL included: longer ones are cut.
 * Three paths of PATH_MAX bytes and the words around them, so that a
 * message naming a long path or two still ends with its reason. */
#define DDP_ERROR_MESSAGE_LEN 16384
const char *ddp_error_origin(void);
void ddp_error_clear(void);

/* strerror(ERR) in BUF (LEN bytes) with a lower-case first letter, to sit
 * mid-sentence ("cannot serve the store on h:1: address already in use");
 * returns BUF. */
const char *ddp_strerror_lower(int err, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
