/* status.c: the last failure's message, per thread (see status.h). */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char error_message[DDP_ERROR_MESSAGE_LEN];
static _Thread_local char error_origin[256];

/* Formatted aside first: an argument may be ddp_error_message() itself (a
 * failure that wraps the one below it), which vsnprintf must not write into
 * as it reads it. */
DdpStatus ddp_error_at(DdpStatus status, const char *file, int line, const char *fmt, ...)
{
    char message[DDP_ERROR_MESSAGE_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    memcpy(error_message, message, sizeof message);
    snprintf(error_origin, sizeof error_origin, "%s:%d", file, line);
    return status;
}

const char *ddp_error_message(void) { return error_message; }
const char *ddp_error_origin(void) { return error_origin; }

void ddp_error_clear(void)
{
    error_message[0] = '\0';
    error_origin[0] = '\0';
}

const char *ddp_strerror_lower(int err, char *buf, size_t len)
{
    snprintf(buf, len, "%s", strerror(err));
    /* "No such file" becomes "no such file"; an acronym ("ENOSPC"-like) stays */
    if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
        buf[0] = (char)(buf[0] - 'A' + 'a');
    return buf;
}
