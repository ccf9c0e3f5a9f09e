/*
 * tensorboard.c: --tensorboard DIR, scalars in a TensorBoard event file.
 *
 * TensorBoard reads every file in DIR whose name holds "tfevents" as a stream
 * of TFRecords, each an Event protocol buffer. We write only scalars, so the
 * whole format is small enough to write by hand, with no protobuf library:
 *
 *   record  = uint64 length (LE), uint32 masked_crc32c(length bytes),
 *             data, uint32 masked_crc32c(data)
 *             masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, c a CRC-32C
 *   Event   = 1: wall_time double, 2: step int64, 3: file_version string,
 *             5: summary Summary, 7: session_log SessionLog
 *                                           (tensorboard/compat/proto/event.proto)
 *   SessionLog = 1: status enum, START = 1
 *   Summary = 1: repeated Value; Value = 1: tag string, 2: simple_value float
 *                                        (tensorboard/compat/proto/summary.proto)
 *
 * The first event of a file carries only file_version "brain.Event:2"; every
 * scalar is then one Event holding one Value. Choices that keep a reader
 * (TensorBoard polling the file while we train) and a crash safe:
 *
 *   - A record is built in memory and written with one fwrite and a flush,
 *     so a killed run leaves whole records, and at worst a cut last one,
 *     which TensorBoard skips (it waits for the rest).
 *   - The file is created with O_EXCL and a name that differs per host, pid
 *     and second (TensorFlow's own scheme); a clash still gets a new name,
 *     never another writer's file.
 *   - Tags are made valid UTF-8 (bad bytes become U+FFFD): protobuf rejects
 *     a string field that is not, and TensorBoard would then lose the event.
 */
#include "tensorboard.h"

#include <errno.h>
#include <fcntl.h>      // open, O_EXCL
#include <float.h>      // FLT_MAX
#include <math.h>       // isfinite, copysign
#include <pthread.h>    // pthread_once: the CRC table, built once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>   // mkdir, stat
#include <time.h>       // time, clock_gettime(CLOCK_REALTIME)
#include <unistd.h>     // gethostname, getpid, fsync

#include "dirs.h"       // ddp_make_dirs
#include "json.h"       // ddp_utf8_sequence

/* A tag of MAX_TAG bytes may triple as U+FFFD replaces each byte; the rest
 * of a record is at most 12 + 9 + 11 + 3 * (1 + 2) + 5 + 4 bytes. */
#define TAG_ROOM (3 * DDP_TENSORBOARD_MAX_TAG)
#define RECORD_ROOM (TAG_ROOM + 64)

struct DdpTensorboard {
    FILE *f;
    char *path;
    int failed; /* a write failed: the file lost data, and says so at close */
    unsigned char record[RECORD_ROOM];
};

/* ---- CRC-32C -------------------------------------------------------------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* The reflected Castagnoli polynomial, one byte at a time (RFC 3720 B.4). */
static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t ddp_crc32c(const void *data, size_t len)
{
    pthread_once(&crc_once, crc_table_init);
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++)
        c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static uint32_t masked_crc32c(const void *data, size_t len)
{
    uint32_t c = ddp_crc32c(data, len);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

/* ---- protobuf, the few wire types we need ---------------------------------- */

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static unsigned char *put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

static unsigned char *put_key(unsigned char *p, unsigned field, unsigned wire)
{
    return put_varint(p, (uint64_t)field << 3 | wire);
}

static unsigned char *put_bytes(unsigned char *p, unsigned field, const void *s, size_t n)
{
    p = put_key(p, field, WIRE_BYTES);
    p = put_varint(p, n);
    memcpy(p, s, n);
    return p + n;
}

/* Event fields 1 and 2: now on the wall clock (seconds since the epoch, as
 * TensorBoard plots "relative" and "wall" time), and STEP. */
static unsigned char *put_event_head(unsigned char *p, int64_t step)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double wall = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    uint64_t bits;
    memcpy(&bits, &wall, sizeof bits);
    p = put_key(p, 1, WIRE_FIXED64);
    p = put_le(p, bits, 8);
    p = put_key(p, 2, WIRE_VARINT);
    return put_varint(p, (uint64_t)step); /* int64: two's complement, 10 bytes if < 0 */
}

/* ---- the file ---------------------------------------------------------------- */

/* Frames the event at tb->record + 12 (LEN bytes) as one TFRecord and writes
 * it whole. */
static DdpStatus write_record(DdpTensorboard *tb, size_t len)
{
    unsigned char *r = tb->record;
    put_le(r, len, 8);
    put_le(r + 8, masked_crc32c(r, 8), 4);
    put_le(r + 12 + len, masked_crc32c(r + 12, len), 4);
    size_t total = 12 + len + 4;
    errno = 0;
    if (fwrite(r, 1, total, tb->f) != total || fflush(tb->f) != 0) {
        tb->failed = 1;
        return DDP_ERR(DDP_FAIL, "%s: cannot write the TensorBoard event file: %s", tb->path,
                       errno ? strerror(errno) : "write error");
    }
    return DDP_OK;
}

/* mkdir -p DIR; an error names DIR and, if not the same, the part at fault. */
static DdpStatus make_dirs(const char *dir)
{
    char part[4096];
    if (ddp_make_dirs(dir, part, sizeof part) >= 0)
        return DDP_OK;
    int err = errno;
    if (err == ENOTDIR)
        return DDP_ERR(DDP_BAD_INPUT, "%s: cannot create the TensorBoard log directory: %s is not a directory", dir,
                       part);
    if (strcmp(part, dir) == 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s: cannot create the TensorBoard log directory: %s", dir, strerror(err));
    return DDP_ERR(DDP_BAD_INPUT, "%s: cannot create the TensorBoard log directory: %s: %s", dir, part,
                   strerror(err));
}

DdpStatus ddp_tensorboard_check(const char *dir)
{
    if (!dir || !*dir)
        return DDP_ERR(DDP_BAD_INPUT, "the TensorBoard log directory is an empty path");
    /* the deepest part of DIR that exists must be a directory we may write
     * in (DIR itself, or where its missing parts would be made) */
    size_t len = strlen(dir);
    char *part = malloc(len < 2 ? 2 : len + 1); /* room for "." */
    if (!part)
        return DDP_ERR(DDP_FAIL, "%s: out of memory", dir);
    memcpy(part, dir, len + 1);
    struct stat sb;
    DdpStatus st = DDP_OK;
    while (st == DDP_OK && stat(part, &sb) != 0) {
        int err = errno;
        /* missing, or under a file (found as the loop goes up): look higher */
        int higher = (err == ENOENT || err == ENOTDIR) && strcmp(part, ".") != 0 && strcmp(part, "/") != 0;
        char *slash = strrchr(part, '/');
        while (slash && slash > part && slash[-1] == '/') /* a//b */
            slash--;
        if (!higher)
            st = DDP_ERR(DDP_BAD_INPUT, "%s: cannot create the TensorBoard log directory: %s: %s", dir, part,
                         strerror(err));
        else if (!slash)
            strcpy(part, ".");
        else if (slash == part)
            strcpy(part, "/");
        else
            *slash = '\0';
    }
    if (st == DDP_OK && !S_ISDIR(sb.st_mode))
        st = DDP_ERR(DDP_BAD_INPUT, "%s: cannot create the TensorBoard log directory: %s is not a directory", dir,
                     part);
    else if (st == DDP_OK && access(part, W_OK | X_OK) != 0)
        st = strcmp(part, dir) == 0
                 ? DDP_ERR(DDP_BAD_INPUT, "%s: cannot write into the TensorBoard log directory: %s", dir,
                           strerror(errno))
                 : DDP_ERR(DDP_BAD_INPUT, "%s: cannot create the TensorBoard log directory: %s: %s", dir, part,
                           strerror(errno));
    free(part);
    return st;
}

DdpStatus ddp_tensorboard_open(const char *dir, DdpTensorboard **out)
{
    *out = NULL;
    if (!dir || !*dir)
        return DDP_ERR(DDP_BAD_INPUT, "the TensorBoard log directory is an empty path");
    DDP_CHECK(make_dirs(dir));

    char host[256];
    if (gethostname(host, sizeof host) != 0 || !host[0])
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *h = host; *h; h++)
        if (*h == '/')
            *h = '_';

    DdpTensorboard *tb = calloc(1, sizeof *tb);
    if (!tb)
        return DDP_ERR(DDP_FAIL, "%s: out of memory", dir);
    long long now = (long long)time(NULL);
    int fd = -1, err = 0;
    for (int n = 0; n < 100 && fd < 0; n++) {
        free(tb->path);
        /* zero-padded, so that a name sorts as its file was made within a
         * second too (pid 9998's before 10002's), the order TensorBoard
         * reads them in, which a resumed run's START needs */
        if (asprintf(&tb->path, "%s/events.out.tfevents.%010lld.%s.%010ld.%02d", dir, now, host,
                     (long)getpid(), n) < 0) {
            tb->path = NULL;
            free(tb);
            return DDP_ERR(DDP_FAIL, "%s: out of memory", dir);
        }
        fd = open(tb->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        err = errno;
        if (fd < 0 && err != EEXIST)
            break;
    }
    if (fd < 0 || !(tb->f = fdopen(fd, "wb"))) {
        if (fd >= 0) {
            err = errno;
            close(fd);
        }
        DdpStatus st = DDP_ERR(DDP_BAD_INPUT, "%s: cannot create the TensorBoard event file %s: %s",
                               dir, tb->path, strerror(err));
        free(tb->path);
        free(tb);
        return st;
    }

    static const char version[] = "brain.Event:2";
    unsigned char *p = put_event_head(tb->record + 12, 0);
    p = put_bytes(p, 3, version, sizeof version - 1);
    DdpStatus st = write_record(tb, (size_t)(p - (tb->record + 12)));
    if (st != DDP_OK) {
        fclose(tb->f);
        free(tb->path);
        free(tb);
        return st;
    }
    *out = tb;
    return DDP_OK;
}

DdpStatus ddp_tensorboard_resumed(DdpTensorboard *tb, int64_t step)
{
    if (!tb)
        return DDP_OK;
    static const unsigned char start[] = {1 << 3 | WIRE_VARINT, 1}; /* SessionLog{status: START} */
    unsigned char *p = put_event_head(tb->record + 12, step + 1);
    p = put_bytes(p, 7, start, sizeof start);
    return write_record(tb, (size_t)(p - (tb->record + 12)));
}

/* Copies TAG into OUT (TAG_ROOM bytes) as valid UTF-8; returns its length. */
static size_t clean_tag(const char *tag, size_t len, unsigned char *out)
{
    const unsigned char *s = (const unsigned char *)tag;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        int n = ddp_utf8_sequence(s + i, len - i);
        if (n == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, s + i, (size_t)n);
            o += (size_t)n;
            i += (size_t)n;
        }
    }
    return o;
}

DdpStatus ddp_tensorboard_scalar(DdpTensorboard *tb, const char *tag, int64_t step, double value)
{
    if (!tb)
        return DDP_OK;
    if (!tag || !*tag)
        return DDP_ERR(DDP_BAD_INPUT, "%s: a TensorBoard scalar needs a tag", tb->path);
    size_t raw = strnlen(tag, DDP_TENSORBOARD_MAX_TAG + 1);
    if (raw > DDP_TENSORBOARD_MAX_TAG)
        return DDP_ERR(DDP_BAD_INPUT, "%s: a TensorBoard tag is longer than %d bytes (it starts \"%.32s\")",
                       tb->path, DDP_TENSORBOARD_MAX_TAG, tag);
    if (tb->failed)
        return DDP_ERR(DDP_FAIL, "%s: the TensorBoard event file lost data earlier", tb->path);

    /* simple_value is a float; keep a too-big double an infinity of its sign
     * rather than leave the conversion undefined. */
    float v = isfinite(value) && fabs(value) > FLT_MAX ? (float)copysign(INFINITY, value) : (float)value;
    uint32_t vbits;
    memcpy(&vbits, &v, sizeof vbits);

    unsigned char tagbuf[TAG_ROOM];
    size_t taglen = clean_tag(tag, raw, tagbuf);
    size_t value_len = 1 + varint_size(taglen) + taglen + 1 + 4;
    size_t summary_len = 1 + varint_size(value_len) + value_len;

    size_t event_max = 9 + 11 + 1 + varint_size(summary_len) + summary_len;
    if (12 + event_max + 4 > sizeof tb->record)
        return DDP_ERR(DDP_FAIL, "internal error (%s:%d): a TensorBoard record of %zu bytes "
                       "does not fit its buffer", __FILE__, __LINE__, event_max);
    unsigned char *start = tb->record + 12;
    unsigned char *p = put_event_head(start, step);
    p = put_key(p, 5, WIRE_BYTES); /* Event.summary */
    p = put_varint(p, summary_len);
    p = put_key(p, 1, WIRE_BYTES); /* Summary.value */
    p = put_varint(p, value_len);
    p = put_bytes(p, 1, tagbuf, taglen); /* Value.tag */
    p = put_key(p, 2, WIRE_FIXED32);     /* Value.simple_value */
    p = put_le(p, vbits, 4);
    return write_record(tb, (size_t)(p - start));
}

DdpStatus ddp_tensorboard_close(DdpTensorboard *tb)
{
    if (!tb)
        return DDP_OK;
    DdpStatus st = DDP_OK;
    errno = 0;
    /* EINVAL: a file system that cannot sync (some FUSE mounts) lost nothing */
    int flushed = fflush(tb->f) == 0 && (fsync(fileno(tb->f)) == 0 || errno == EINVAL);
    int err = errno;
    if (fclose(tb->f) != 0 && flushed) {
        flushed = 0;
        err = errno;
    }
    if (!flushed)
        st = DDP_ERR(DDP_FAIL, "%s: cannot write the TensorBoard event file: %s", tb->path,
                     err ? strerror(err) : "write error");
    else if (tb->failed)
        st = DDP_ERR(DDP_FAIL, "%s: the TensorBoard event file lost data (a write failed)", tb->path);
    free(tb->path);
    free(tb);
    return st;
}

const char *ddp_tensorboard_path(const DdpTensorboard *tb)
{
    return tb ? tb->path : NULL;
}
