/* conv_choices_file.c: see conv_choices_file.h. */
#include "conv_choices_file.h"
#include "conv_choices.h"  // ddp_conv_choices_parse: a record's text checked as it is read
#include "dirs.h"          // ddp_output_target, ddp_output_check, ddp_output_open, ddp_output_commit

#include <errno.h>
#include <fcntl.h>     // open, O_*
#include <stdio.h>
#include <stdlib.h>    // free
#include <string.h>
#include <sys/stat.h>  // fstat
#include <unistd.h>    // read, close

/* Reads FLAG's PATH (TARGET: the file its links lead to) into TEXT (LEN
 * bytes), NUL-terminated without the newline after the record, and its
 * length into *GOT: 0 where TARGET does not exist. A record of LEN - 1
 * characters is written with its newline, LEN bytes; more is too long. */
static DdpStatus read_record(const char *flag, const char *path, const char *target, char *text, size_t len,
                             size_t *got)
{
    *got = 0;
    /* O_NONBLOCK: a FIFO put there since ddp_output_target looked is refused, not waited on */
    const int fd = open(target, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return DDP_OK;
    if (fd < 0)
        return DDP_ERR(DDP_BAD_INPUT, "--%s %s: cannot open: %s", flag, path, strerror(errno));
    struct stat sb;
    DdpStatus st = DDP_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = DDP_ERR(DDP_BAD_INPUT, "--%s %s: not a regular file", flag, path);
    while (st == DDP_OK && (size_t)sb.st_size <= len && *got < len) {
        const ssize_t n = read(fd, text + *got, len - *got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            st = DDP_ERR(DDP_BAD_INPUT, "--%s %s: read error: %s", flag, path, strerror(errno));
        if (n <= 0)
            break;
        *got += (size_t)n;
    }
    close(fd);
    if (st == DDP_OK && *got && text[*got - 1] == '\n')
        --*got;
    if (st == DDP_OK && ((size_t)sb.st_size > len || *got == len))
        st = DDP_ERR(DDP_BAD_INPUT, "--%s %s: %lld bytes, longer than any record of cuDNN's algorithms (at most %zu)",
                     flag, path, (long long)sb.st_size, len - 1);
    if (st != DDP_OK)
        *got = 0;
    text[*got] = '\0';
    return st;
}

DdpStatus ddp_conv_choices_read_file(const char *flag, const char *path, char *text, size_t len, int *found)
{
    *found = 0;
    text[0] = '\0';
    /* what it is, links followed, worded as every output's (dirs.h) */
    char *target = NULL;
    DDP_CHECK(ddp_output_target(flag, path, &target));
    size_t got = 0;
    const DdpStatus st = read_record(flag, path, target, text, len, &got);
    free(target);
    if (st != DDP_OK)
        return st;
    if (got == 0) /* nothing there yet, or an empty file made to be filled */
        return ddp_output_check(flag, path);
    if (strlen(text) != got) {
        text[0] = '\0';
        return DDP_ERR(DDP_BAD_INPUT, "--%s %s: not a record of cuDNN's algorithms: it holds a NUL byte", flag, path);
    }
    DdpConvChoices record;
    if (ddp_conv_choices_parse(text, &record) != DDP_OK) {
        char why[DDP_ERROR_MESSAGE_LEN];
        snprintf(why, sizeof why, "%s", ddp_error_message());
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

int ddp_conv_file_times(int found, int eval_only, int rank)
{
    return !found && !eval_only && rank == 0;
}

DdpConvFileAction ddp_conv_file_action(const DdpConvFileRun *run)
{
    if (!run->gpu)
        return DDP_CONV_FILE_CPU;
    if (run->found) {
        if (run->offered)
            return run->taken ? DDP_CONV_FILE_TAKEN : DDP_CONV_FILE_NOT_TAKEN;
        /* a resumed checkpoint's record ran first: FILE's where they are the same */
        return run->runs_files ? DDP_CONV_FILE_TAKEN : DDP_CONV_FILE_CHECKPOINT_KEPT;
    }
    if (run->eval_only)
        return DDP_CONV_FILE_EVAL_ONLY;
    return run->record ? DDP_CONV_FILE_WRITE : DDP_CONV_FILE_NOTHING_TO_WRITE;
}
