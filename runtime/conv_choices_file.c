/* conv_choices_file.c: see conv_choices_file.h. */
#include "conv_choices_file.h"
#include "conv_choices.h"  // ddp_conv_choices_parse: a record's text checked as it is read
#include "dirs.h"          // ddp_output_check, ddp_output_open, ddp_output_commit

#include <errno.h>
#include <fcntl.h>     // open, O_*
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>  // fstat
#include <unistd.h>    // read, close

DdpStatus ddp_conv_choices_read_file(const char *flag, const char *path, char *text, size_t len, int *found)
{
    *found = 0;
    if (len)
        text[0] = '\0';
    /* O_NONBLOCK: a FIFO must be refused, not waited on for a writer */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return ddp_output_check(flag, path);
    if (fd < 0)
        return DDP_ERR(DDP_BAD_INPUT, "--%s %s: cannot open: %s", flag, path, strerror(errno));
    struct stat sb;
    DdpStatus st = DDP_OK;
    size_t got = 0;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = DDP_ERR(DDP_BAD_INPUT, "--%s %s: not a regular file", flag, path);
    else if ((size_t)sb.st_size >= len)
        st = DDP_ERR(DDP_BAD_INPUT, "--%s %s: %lld bytes, longer than any record of cuDNN's algorithms (at most %zu)",
                     flag, path, (long long)sb.st_size, len - 1);
    while (st == DDP_OK && got < len - 1) {
        const ssize_t n = read(fd, text + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            st = DDP_ERR(DDP_BAD_INPUT, "--%s %s: read error: %s", flag, path, strerror(errno));
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (st != DDP_OK) {
        text[0] = '\0';
        return st;
    }
    text[got] = '\0';
    if (got && text[got - 1] == '\n') /* as written, and as an editor leaves it */
        text[--got] = '\0';
    if (got == 0) /* an empty file, made to be filled: as none */
        return ddp_output_check(flag, path);
    DdpConvChoices record;
    if (strlen(text) != got || ddp_conv_choices_parse(text, &record) != DDP_OK) {
        char why[DDP_ERROR_MESSAGE_LEN];
        snprintf(why, sizeof why, "%s", strlen(text) != got ? "not a record of cuDNN's algorithms: it holds a NUL byte" : ddp_error_message());
        text[0] = '\0';
        return DDP_ERR(DDP_BAD_INPUT, "--%s %s: %s", flag, path, why);
    }
    ddp_conv_choices_free(&record);
    *found = 1;
    return DDP_OK;
}

DdpStatus ddp_conv_choices_write_file(const char *flag, const char *path, const char *text)
{
    DdpOutput out;
    DDP_CHECK(ddp_output_open(flag, path, &out));
    if (fprintf(out.f, "%s\n", text) < 0) {
        const int e = errno;
        ddp_output_abort(&out);
        return DDP_ERR(DDP_FAIL, "--%s %s: cannot write: %s", flag, path, strerror(e));
    }
    return ddp_output_commit(&out);
}
