/*
 * jsonlog.c: the --log file, JSON lines (one object per line).
 *
 * The log is read by programs (pandas.read_json(lines=True), jq, a dashboard
 * tailing the file), so every line must be valid JSON on its own, complete,
 * and carry the numbers exactly:
 *
 *   - A line is built in memory and written with one write(2), however long
 *     (an --eval-only confusion matrix can take megabytes), at the file's
 *     end (O_APPEND, also when the run empties the file first): a reader
 *     tailing the file, or a crash, sees whole lines only, and another
 *     process appending to the same log (--eval-only --resume of a
 *     checkpoint of this run, as it trains) is neither overwritten nor cut
 *     into.
 *   - Numbers are printed with the fewest digits that read back to the same
 *     value: a float loss of 0.1f prints as 0.1, not 0.100000001490116, yet
 *     still parses to the same float; a double learning rate gets up to 17
 *     digits. Real-valued fields always show a '.' or an exponent, so a parser
 *     types the column the same way on every line (3.0, not 3).
 *   - NaN and infinities, which JSON cannot spell, are written as null: a
 *     diverged run must still leave a readable log.
 *   - Strings (file names, messages) are escaped, and bytes that are not
 *     UTF-8 replaced, since JSON text must be UTF-8 and paths need not be.
 */
#include "jsonlog.h"

#include <errno.h>
#include <fcntl.h>  // F_DUPFD_CLOEXEC: the log on our own stdout or stderr
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // stat: only a regular file is read
#include <unistd.h>    // close, pread, write

#include "dirs.h"  // ddp_output_in_place_check: which paths a log may be written in
#include "json.h"  // ddp_json_put_string

struct DdpJsonLog {
    FILE *f;
    char *path;
};

/* How every log line begins: its record's event first (progress.c). */
static const char LINE_START[] = "{\"event\": ";

/* The descriptor, 1 or 2, when PATH is this process's own standard output
 * or error (--log /dev/stderr, with the job's output in a file); else -1.
 * That stream is never emptied or read: the log writes through a copy of
 * its descriptor, at its place in the file (opening PATH again would start
 * a place of its own, which the stream's writes would then overwrite). */
static int own_stream(const char *path)
{
    struct stat p, s;
    if (stat(path, &p) != 0)
        return -1;
    /* stderr first where named so (`>f 2>f` opens f twice, at two places) */
    int err_first = strcmp(path, "/dev/stderr") == 0 || strcmp(path, "/dev/fd/2") == 0 ||
                    strcmp(path, "/proc/self/fd/2") == 0;
    for (int i = 0; i < 2; i++) {
        int fd = err_first ? 2 - i : 1 + i;
        if (fstat(fd, &s) == 0 && s.st_dev == p.st_dev && s.st_ino == p.st_ino)
            return fd;
    }
    return -1;
}

DdpStatus ddp_jsonlog_check(const char *path)
{
    if (strcmp(path, "-") == 0)
        return DDP_OK;
    DDP_CHECK(ddp_output_in_place_check("log", path));
    if (own_stream(path) >= 0)
        return DDP_OK;
    /* a pipe or terminal is not read (opening a pipe would wait for its
     * writer, reading would take its bytes), nor is nothing there yet */
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0)
        return DDP_OK;
    FILE *f = fopen(path, "rb");
    if (!f)
        return DDP_ERR(DDP_BAD_INPUT, "--log %s: cannot read the file there to tell whether it is a log (%s): name "
                       "another file (or remove this one first)", path, strerror(errno));
    char start[sizeof LINE_START - 1];
    size_t got = fread(start, 1, sizeof start, f);
    fclose(f);
    /* an earlier log is what --log is for, even one cut short (a full disk) */
    if (got > 0 && memcmp(start, LINE_START, got) == 0)
        return DDP_OK;
    return DDP_ERR(DDP_BAD_INPUT, "--log %s: the file there is not a log of this program's, which --log would write "
                   "into: name another file (or remove this one first)", path);
}

/* Whether the regular file PATH is empty or ends in a newline (anything
 * else, or a file that cannot be read, is taken to). A log cut short in a
 * line (a crash, a full disk) would have a resumed run's first record glued
 * to its last: the caller ends that line first, so that every record after
 * it is a line of its own. Read through a read-only descriptor of its own:
 * the log's is opened to append alone, as a pipe's must be. */
static int ends_a_line(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    char last = '\n';
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        pread(fd, &last, 1, sb.st_size - 1) != 1)
        last = '\n';
    if (fd >= 0)
        close(fd);
    return last == '\n';
}

/* PATH opened to write the log at its end (emptied first, or not when
 * APPEND); -1 with errno.
 * O_NONBLOCK: a FIFO that no process reads is refused (*UNREAD set), where
 * the open would wait for a reader, start-up stuck deaf to a stop (which
 * waits for a step); cleared after, so that writes wait as they should. */
static int open_log_file(const char *path, int append, int *unread)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_APPEND | (append ? 0 : O_TRUNC), 0666);
    if (fd >= 0) {
        (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        return fd;
    }
    const int err = errno;
    struct stat sb; /* ENXIO: a FIFO without a reader, or a socket, a device without its driver */
    *unread = err == ENXIO && stat(path, &sb) == 0 && S_ISFIFO(sb.st_mode);
    errno = err;
    return -1;
}

DdpStatus ddp_jsonlog_open(const char *path, int append, DdpJsonLog **out)
{
    *out = NULL;
    DdpJsonLog *log = calloc(1, sizeof *log);
    if (!log || !(log->path = strdup(path))) {
        free(log);
        return DDP_ERR(DDP_FAIL, "%s: out of memory", path);
    }
    if (strcmp(path, "-") == 0) {
        log->f = stdout;
    } else {
        /* the log is read while it grows and --resume appends to it, so it is
         * written in place, not renamed (dirs.h) */
        DdpStatus st = ddp_jsonlog_check(path);
        if (st != DDP_OK) {
            free(log->path);
            free(log);
            return st;
        }
        int own = own_stream(path), fifo_unread = 0;
        int copy = own >= 0 ? fcntl(own, F_DUPFD_CLOEXEC, 3) : open_log_file(path, append, &fifo_unread);
        /* fdopen neither empties nor moves the stream's file */
        log->f = copy >= 0 ? fdopen(copy, own < 0 && append ? "a" : "w") : NULL;
        if (!log->f) {
            int err = errno;
            if (copy >= 0)
                close(copy);
            if (fifo_unread)
                st = DDP_ERR(DDP_BAD_INPUT, "%s: a FIFO that no process reads: start its reader first", path);
            else
                st = DDP_ERR(DDP_BAD_INPUT, "%s: cannot open the log for writing: %s", path, strerror(err));
            free(log->path);
            free(log);
            return st;
        }
        if (append && own < 0 && !ends_a_line(path))
            fputc('\n', log->f);
    }
    *out = log;
    return DDP_OK;
}

/* Prints V with the fewest significant digits (from MIN to MAX) that read
 * back as the same value: as a float when AS_FLOAT, else as a double. */
static void put_real(FILE *f, double v, int as_float)
{
    if (!isfinite(v) || (as_float && !isfinite((float)v))) {
        fputs("null", f);
        return;
    }
    char buf[40];
    int prec = as_float ? 6 : 15, max = as_float ? 9 : 17;
    for (;; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, as_float ? (double)(float)v : v);
        if (prec == max)
            break;
        if (as_float ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
    if (!strpbrk(buf, ".e"))
        fputs(".0", f);
}

DdpStatus ddp_jsonlog_write(DdpJsonLog *log, const DdpLogField *fields, int n)
{
    char *line = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&line, &len);
    if (!m)
        return DDP_ERR(DDP_FAIL, "%s: out of memory for a log line", log->path);
    putc('{', m);
    for (int i = 0; i < n; i++) {
        const DdpLogField *fl = &fields[i];
        if (i)
            fputs(", ", m);
        ddp_json_put_string(m, fl->key);
        fputs(": ", m);
        switch (fl->kind) {
        case DDP_LOG_INT:
            fprintf(m, "%" PRId64, fl->i);
            break;
        case DDP_LOG_F32:
        case DDP_LOG_F64:
            put_real(m, fl->f, fl->kind == DDP_LOG_F32);
            break;
        case DDP_LOG_BOOL:
            fputs(fl->i ? "true" : "false", m);
            break;
        case DDP_LOG_STR:
            if (fl->s)
                ddp_json_put_string(m, fl->s);
            else
                fputs("null", m);
            break;
        case DDP_LOG_JSON:
            fputs(fl->s ? fl->s : "null", m);
            break;
        default:
            fputs("null", m);
            break;
        }
    }
    fputs("}\n", m);
    int failed = ferror(m);
    fclose(m);
    if (failed) {
        free(line);
        return DDP_ERR(DDP_FAIL, "%s: out of memory for a log line", log->path);
    }
    /* stdio would cut a line longer than its buffer into several writes;
     * what stdout ("-") already holds goes first */
    errno = 0;
    int ok = fflush(log->f) == 0;
    for (size_t done = 0; ok && done < len;) {
        ssize_t w = write(fileno(log->f), line + done, len - done);
        if (w > 0)
            done += (size_t)w;
        else if (w == 0 || errno != EINTR)
            ok = 0;
    }
    free(line);
    if (!ok)
        return DDP_ERR(DDP_FAIL, "%s: cannot write the log: %s", log->path,
                       errno ? strerror(errno) : "write error");
    return DDP_OK;
}

DdpStatus ddp_jsonlog_close(DdpJsonLog *log)
{
    if (!log)
        return DDP_OK;
    DdpStatus st = DDP_OK;
    if (log->f == stdout) {
        if (fflush(stdout) != 0)
            st = DDP_ERR(DDP_FAIL, "%s: cannot write the log: %s", log->path, strerror(errno));
    } else if (fclose(log->f) != 0) {
        st = DDP_ERR(DDP_FAIL, "%s: cannot write the log: %s", log->path, strerror(errno));
    }
    free(log->path);
    free(log);
    return st;
}
