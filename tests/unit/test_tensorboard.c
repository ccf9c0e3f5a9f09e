/*
 * Tests of runtime/tensorboard.c: CRC-32C against RFC 3720's vectors; the
 * file read back by a decoder written here from the format's description
 * (TFRecord framing with both CRCs checked bit by bit, then the Event,
 * Summary and Value fields), so it shares no code with the writer; and, when
 * the tensorboard venv exists, what TensorBoard's own EventAccumulator reads
 * (tools/read_tensorboard.py), value for value.
 */
#include <dirent.h>    // opendir: find the event file
#include <float.h>     // FLT_MAX
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // stat: ddp_tensorboard_check makes nothing
#include <time.h>
#include <unistd.h>    // gethostname, getpid

#include "tensorboard.h"  // ddp_tensorboard_open, _check, _scalar, _close, _path, ddp_crc32c
#include "testutil.h"

static char tmpdir[64];

static void make_tmpdir(void) { test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_tb_XXXXXX"); }

// ---- an independent reader ---------------------------------------------------

/* CRC-32C bit by bit (the writer uses a table), and TFRecord's mask. */
static uint32_t ref_crc32c(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

static uint32_t ref_masked(const unsigned char *p, size_t n)
{
    uint32_t c = ref_crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

typedef struct {
    double wall_time;
    int64_t step;
    int has_version, has_summary, nvalues;
    char version[64];
    char tag[3 * DDP_TENSORBOARD_MAX_TAG + 1]; /* of the one Value a scalar event holds */
    float value;
} Event;

/* One protobuf field at *P: its number, wire type, and value (a varint or
 * fixed, or the span of a length-delimited one). 0 when malformed. */
typedef struct {
    unsigned field, wire;
    uint64_t u;
    const unsigned char *s;
    size_t len;
} Field;

static int get_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= end)
            return 0;
        unsigned char b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 1;
    }
    return 0;
}

static int get_field(const unsigned char **p, const unsigned char *end, Field *f)
{
    uint64_t key;
    if (!get_varint(p, end, &key))
        return 0;
    f->field = (unsigned)(key >> 3);
    f->wire = (unsigned)(key & 7);
    switch (f->wire) {
    case 0:
        return get_varint(p, end, &f->u);
    case 1:
    case 5: {
        int n = f->wire == 1 ? 8 : 4;
        if (end - *p < n)
            return 0;
        f->u = le(*p, n);
        *p += n;
        return 1;
    }
    case 2:
        if (!get_varint(p, end, &f->u) || f->u > (uint64_t)(end - *p))
            return 0;
        f->s = *p;
        f->len = (size_t)f->u;
        *p += f->len;
        return 1;
    default:
        return 0;
    }
}

/* Summary.Value: 1 tag, 2 simple_value; nothing else is expected. */
static int parse_value(const unsigned char *p, const unsigned char *end, Event *e)
{
    Field f;
    while (p < end) {
        if (!get_field(&p, end, &f))
            return 0;
        if (f.field == 1 && f.wire == 2 && f.len < sizeof e->tag) {
            memcpy(e->tag, f.s, f.len);
            e->tag[f.len] = '\0';
        } else if (f.field == 2 && f.wire == 5) {
            uint32_t bits = (uint32_t)f.u;
            memcpy(&e->value, &bits, sizeof bits);
        } else {
            return 0;
        }
    }
    return 1;
}

/* Event: 1 wall_time, 2 step, 3 file_version, 5 summary {1: Value}. */
static int parse_event(const unsigned char *p, const unsigned char *end, Event *e)
{
    memset(e, 0, sizeof *e);
    Field f;
    while (p < end) {
        if (!get_field(&p, end, &f))
            return 0;
        if (f.field == 1 && f.wire == 1) {
            memcpy(&e->wall_time, &f.u, sizeof e->wall_time);
        } else if (f.field == 2 && f.wire == 0) {
            e->step = (int64_t)f.u;
        } else if (f.field == 3 && f.wire == 2 && f.len < sizeof e->version) {
            e->has_version = 1;
            memcpy(e->version, f.s, f.len);
            e->version[f.len] = '\0';
        } else if (f.field == 5 && f.wire == 2) {
            e->has_summary = 1;
            const unsigned char *q = f.s, *qend = f.s + f.len;
            Field v;
            while (q < qend) {
                if (!get_field(&q, qend, &v) || v.field != 1 || v.wire != 2)
                    return 0;
                e->nvalues++;
                if (!parse_value(v.s, v.s + v.len, e))
                    return 0;
            }
        } else {
            return 0;
        }
    }
    return 1;
}

/* Every record of the file at PATH, framing and both CRCs checked; the
 * number of events (*OUT malloc'd), or -1 (said why) if anything is off. */
static int read_events(const char *path, Event **out)
{
    size_t len = 0;
    unsigned char *data = (unsigned char *)test_read_file(path, &len);
    *out = NULL;
    if (!data) {
        fprintf(stderr, "\n%s: unreadable", path);
        return -1;
    }
    int n = 0, cap = 0;
    Event *ev = NULL;
    size_t at = 0;
    const char *bad = NULL;
    while (at < len && !bad) {
        if (len - at < 12) {
            bad = "a cut record header";
            break;
        }
        uint64_t size = le(data + at, 8);
        if ((uint32_t)le(data + at + 8, 4) != ref_masked(data + at, 8))
            bad = "the length's CRC";
        else if (size > len - at - 12 || len - at - 12 - size < 4)
            bad = "a cut record";
        else if ((uint32_t)le(data + at + 12 + size, 4) != ref_masked(data + at + 12, size))
            bad = "the data's CRC";
        if (bad)
            break;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            ev = realloc(ev, (size_t)cap * sizeof *ev);
        }
        if (!parse_event(data + at + 12, data + at + 12 + size, &ev[n]))
            bad = "an Event that does not parse";
        n++;
        at += 12 + size + 4;
    }
    free(data);
    if (bad) {
        fprintf(stderr, "\n%s: %s at byte %zu", path, bad, at);
        free(ev);
        return -1;
    }
    *out = ev;
    return n;
}

/* The one event file in DIR (its path in a static buffer), or NULL. */
static const char *event_file(const char *dir)
{
    static char path[512];
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, "tfevents")) {
            found++;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        }
    closedir(d);
    return found == 1 ? path : NULL;
}

static int same_float(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

// ---- the tests -------------------------------------------------------------------

static void test_crc32c_vectors(void)
{
    unsigned char buf[32];
    memset(buf, 0, sizeof buf);
    CU_ASSERT_EQUAL(ddp_crc32c(buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof buf);
    CU_ASSERT_EQUAL(ddp_crc32c(buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)i;
    CU_ASSERT_EQUAL(ddp_crc32c(buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)(31 - i);
    CU_ASSERT_EQUAL(ddp_crc32c(buf, 32), 0x113FDB5Cu);
    CU_ASSERT_EQUAL(ddp_crc32c("123456789", 9), 0xE3069283u); /* the usual check value */
    CU_ASSERT_EQUAL(ddp_crc32c("", 0), 0u);
    /* the test's own bitwise CRC agrees (it checks the file's records) */
    CU_ASSERT_EQUAL(ref_crc32c((const unsigned char *)"123456789", 9), 0xE3069283u);
}

static const struct {
    const char *tag;
    int64_t step;
    double value;
} written[] = {
    {"loss", 0, 2.302585092994046},
    {"lr", 0, 0.1},
    {"accuracy", 1, 0.9375},
    {"samples/s", 1, 123456.789},
    {"loss", 2, -0.0},
    {"loss", 3, NAN},
    {"loss", 4, INFINITY},
    {"loss", 5, 1e300},  /* too big for a float: +inf */
    {"loss", 6, -1e300}, /* -inf */
    {"loss", 7, 1e-42},  /* a float denormal */
    {"big step", INT64_C(1) << 40, 3.0},
    {"negative step", -5, 4.0},
    {"odd \xff bytes\x01 \xc3\xa9 \xe2\x82", 8, 5.0},
};
enum { WRITTEN = sizeof written / sizeof written[0] };

/* What a tag of `written` must read back as: bad bytes as U+FFFD. */
static const char *expected_tag(int i)
{
    return i == WRITTEN - 1 ? "odd \xef\xbf\xbd bytes\x01 \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd" : written[i].tag;
}

static float expected_value(int i)
{
    double v = written[i].value;
    return fabs(v) > FLT_MAX && isfinite(v) ? (float)copysign(INFINITY, v) : (float)v;
}

static void test_file_reads_back(void)
{
    make_tmpdir();
    char *dir = test_tmp_path(tmpdir, "a/b//c/"); /* made as mkdir -p would */
    time_t before = time(NULL);
    DdpTensorboard *tb;
    CU_ASSERT_EQUAL_FATAL(ddp_tensorboard_open(dir, &tb), DDP_OK);
    for (int i = 0; i < WRITTEN; i++)
        CU_ASSERT_EQUAL(ddp_tensorboard_scalar(tb, written[i].tag, written[i].step, written[i].value), DDP_OK);
    char path[512];
    snprintf(path, sizeof path, "%s", ddp_tensorboard_path(tb));
    CU_ASSERT_EQUAL(ddp_tensorboard_close(tb), DDP_OK);
    time_t after = time(NULL);

    /* The name TensorFlow's writers use: .<seconds>.<host>.<pid>.<n>, the
     * pid and n zero-padded, so that names sort as the files were made */
    const char *found = event_file(test_tmp_path(tmpdir, "a/b/c"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(found);
    CU_ASSERT_STRING_EQUAL(strrchr(found, '/'), strrchr(path, '/'));
    char host[256] = "";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    long long secs = 0;
    char rest[400] = "";
    CU_ASSERT_EQUAL(sscanf(strrchr(path, '/'), "/events.out.tfevents.%lld.%399s", &secs, rest), 2);
    CU_ASSERT(secs >= before && secs <= after);
    char tail[400];
    snprintf(tail, sizeof tail, "%s.%010ld.00", host, (long)getpid());
    CU_ASSERT_STRING_EQUAL(rest, tail);

    Event *ev;
    int n = read_events(path, &ev);
    CU_ASSERT_EQUAL_FATAL(n, WRITTEN + 1);
    CU_ASSERT(ev[0].has_version && !ev[0].has_summary);
    CU_ASSERT_STRING_EQUAL(ev[0].version, "brain.Event:2");
    for (int i = 0; i < n; i++)
        CU_ASSERT(ev[i].wall_time >= (double)before && ev[i].wall_time <= (double)after + 1);
    for (int i = 0; i < WRITTEN; i++) {
        const Event *e = &ev[i + 1];
        CU_ASSERT(!e->has_version && e->has_summary && e->nvalues == 1);
        CU_ASSERT_STRING_EQUAL(e->tag, expected_tag(i));
        CU_ASSERT_EQUAL(e->step, written[i].step);
        if (!same_float(e->value, expected_value(i))) {
            fprintf(stderr, "\n%s: wrote %.9g, read %.9g", written[i].tag, written[i].value, e->value);
            CU_FAIL("a value does not read back bit for bit");
        }
    }
    CU_ASSERT(isinf(ev[8].value) && ev[8].value > 0);
    CU_ASSERT(isinf(ev[9].value) && ev[9].value < 0);
    free(ev);
    test_remove_tmpdir(tmpdir);
}

/* Each scalar is on disk when the call returns (a killed run keeps it), and
 * two writers in one directory never share a file. */
static void test_flushed_and_separate(void)
{
    make_tmpdir();
    DdpTensorboard *a, *b;
    CU_ASSERT_EQUAL_FATAL(ddp_tensorboard_open(tmpdir, &a), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_tensorboard_open(tmpdir, &b), DDP_OK);
    CU_ASSERT_STRING_NOT_EQUAL(ddp_tensorboard_path(a), ddp_tensorboard_path(b));
    CU_ASSERT_EQUAL(ddp_tensorboard_scalar(a, "loss", 1, 0.5), DDP_OK);
    Event *ev;
    int n = read_events(ddp_tensorboard_path(a), &ev); /* before close */
    CU_ASSERT_EQUAL(n, 2);
    if (n == 2) {
        CU_ASSERT_STRING_EQUAL(ev[1].tag, "loss");
        CU_ASSERT_EQUAL(ev[1].value, 0.5f);
    }
    free(ev);
    n = read_events(ddp_tensorboard_path(b), &ev);
    CU_ASSERT_EQUAL(n, 1);
    free(ev);
    CU_ASSERT_EQUAL(ddp_tensorboard_close(a), DDP_OK);
    CU_ASSERT_EQUAL(ddp_tensorboard_close(b), DDP_OK);
    test_remove_tmpdir(tmpdir);
}

static void test_hostile_input(void)
{
    /* No writer: every call is a harmless no-op. */
    CU_ASSERT_EQUAL(ddp_tensorboard_scalar(NULL, "loss", 1, 1.0), DDP_OK);
    CU_ASSERT_EQUAL(ddp_tensorboard_scalar(NULL, NULL, 1, 1.0), DDP_OK);
    CU_ASSERT_EQUAL(ddp_tensorboard_close(NULL), DDP_OK);
    CU_ASSERT_PTR_NULL(ddp_tensorboard_path(NULL));

    make_tmpdir();
    DdpTensorboard *tb;
    CU_ASSERT_EQUAL_FATAL(ddp_tensorboard_open(tmpdir, &tb), DDP_OK);
    CU_ASSERT_EQUAL(ddp_tensorboard_scalar(tb, NULL, 1, 1.0), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "needs a tag"));
    CU_ASSERT_EQUAL(ddp_tensorboard_scalar(tb, "", 1, 1.0), DDP_BAD_INPUT);

    /* The longest tag, all bad bytes (it triples as U+FFFD), is written... */
    static char tag[DDP_TENSORBOARD_MAX_TAG + 2];
    memset(tag, 0xff, DDP_TENSORBOARD_MAX_TAG);
    CU_ASSERT_EQUAL(ddp_tensorboard_scalar(tb, tag, 1, 1.0), DDP_OK);
    /* ...one byte more is refused, and nothing is written. */
    memset(tag, 'x', DDP_TENSORBOARD_MAX_TAG + 1);
    CU_ASSERT_EQUAL(ddp_tensorboard_scalar(tb, tag, 2, 2.0), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "longer than 1024 bytes"));
    char path[512];
    snprintf(path, sizeof path, "%s", ddp_tensorboard_path(tb));
    CU_ASSERT_EQUAL(ddp_tensorboard_close(tb), DDP_OK);

    Event *ev;
    int n = read_events(path, &ev);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_EQUAL(strlen(ev[1].tag), 3 * DDP_TENSORBOARD_MAX_TAG);
    CU_ASSERT_EQUAL(memcmp(ev[1].tag, "\xef\xbf\xbd", 3), 0);
    CU_ASSERT_EQUAL(memcmp(ev[1].tag + 3 * DDP_TENSORBOARD_MAX_TAG - 3, "\xef\xbf\xbd", 3), 0);
    free(ev);
    test_remove_tmpdir(tmpdir);
}

static void test_bad_dir(void)
{
    make_tmpdir();
    FILE *f = fopen(test_tmp_path(tmpdir, "file"), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    DdpTensorboard *tb = (DdpTensorboard *)1;
    char *under = test_tmp_path(tmpdir, "file/sub");
    CU_ASSERT_EQUAL(ddp_tensorboard_open(under, &tb), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NULL(tb);
    char want[256];
    snprintf(want, sizeof want, "%s: cannot create the TensorBoard log directory: %s/file is not a directory",
             under, tmpdir);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), want));
    if (!strstr(ddp_error_message(), want))
        fprintf(stderr, "\nmessage: %s", ddp_error_message());

    /* ddp_tensorboard_check, at start-up, finds the same without making anything */
    CU_ASSERT_EQUAL(ddp_tensorboard_check(under), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), want));
    char *deep = test_tmp_path(tmpdir, "new/deeper//tb");
    CU_ASSERT_EQUAL(ddp_tensorboard_check(deep), DDP_OK);
    struct stat sb;
    CU_ASSERT_NOT_EQUAL(stat(test_tmp_path(tmpdir, "new"), &sb), 0); /* not made */
    CU_ASSERT_EQUAL(ddp_tensorboard_check(""), DDP_BAD_INPUT);

    /* The directory itself a file. */
    char *file = test_tmp_path(tmpdir, "file");
    CU_ASSERT_EQUAL(ddp_tensorboard_check(file), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "is not a directory"));
    CU_ASSERT_EQUAL(ddp_tensorboard_open(file, &tb), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "is not a directory"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), file));

    CU_ASSERT_EQUAL(ddp_tensorboard_open("", &tb), DDP_BAD_INPUT);
    CU_ASSERT_EQUAL(ddp_tensorboard_open(NULL, &tb), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NULL(tb);
    test_remove_tmpdir(tmpdir);
}

/* The python of the tensorboard venv (`make deps`), or NULL. */
static const char *tensorboard_python(void)
{
    return test_python_with("TB_PYTHON", "/opt/ddpc-tb/bin/python", "tensorboard.backend.event_processing.event_accumulator");
}

/* TensorBoard's own reader sees every point we wrote, with the same value. */
static void test_tensorboard_reads_it(void)
{
    const char *py = tensorboard_python();
    if (!py) {
        fprintf(stderr, "\n(skipped: no tensorboard python at %s; `make deps` makes the venv)",
                getenv("TB_PYTHON") && *getenv("TB_PYTHON") ? getenv("TB_PYTHON") : "/opt/ddpc-tb/bin/python");
        return;
    }
    static const char *const tags[] = {"loss", "lr", "accuracy", "samples/s", "odd \xff tag \"q\""};
    /* how read_tensorboard.py prints each (a JSON string, ASCII only) */
    static const char *const printed[] = {"\"loss\"", "\"lr\"", "\"accuracy\"", "\"samples/s\"",
                                          "\"odd \\ufffd tag \\\"q\\\"\""};
    enum { TAGS = 5, STEPS = 60 };
    make_tmpdir();
    char *logdir = test_tmp_path(tmpdir, "run");
    DdpTensorboard *tb;
    CU_ASSERT_EQUAL_FATAL(ddp_tensorboard_open(logdir, &tb), DDP_OK);
    float want[TAGS][STEPS];
    uint64_t state = 88172645463325252u;
    for (int s = 0; s < STEPS; s++) {
        for (int t = 0; t < TAGS; t++) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            double v = ldexp((double)(state >> 11) / 9007199254740992.0, (int)(state % 60) - 30);
            if (state & 1)
                v = -v;
            if (s == 7 && t == 0)
                v = NAN;
            if (s == 8 && t == 0)
                v = INFINITY;
            want[t][s] = (float)v;
            CU_ASSERT_EQUAL(ddp_tensorboard_scalar(tb, tags[t], 10 * s + 1, v), DDP_OK);
        }
    }
    CU_ASSERT_EQUAL(ddp_tensorboard_close(tb), DDP_OK);

    char *out_path = test_tmp_path(tmpdir, "scalars.txt");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' tools/read_tensorboard.py '%s' > '%s'", py, logdir, out_path);
    char *err = NULL;
    int rc = test_run(cmd, &err);
    if (rc != 0)
        fprintf(stderr, "\n%s", err ? err : "");
    free(err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);

    char *text = test_read_file(out_path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    int seen[TAGS][STEPS] = {{0}}, lines = 0, bad = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        lines++;
        int t = 0;
        while (t < TAGS && !(strncmp(line, printed[t], strlen(printed[t])) == 0 &&
                             line[strlen(printed[t])] == ' '))
            t++;
        long long step = -1;
        char value[64] = "";
        if (t == TAGS || sscanf(line + strlen(printed[t]), " %lld %63s", &step, value) != 2 ||
            step % 10 != 1 || step < 1 || step / 10 >= STEPS) {
            fprintf(stderr, "\nunexpected line: %s", line);
            bad++;
            continue;
        }
        int s = (int)(step / 10);
        seen[t][s]++;
        float got = (float)strtod(value, NULL);
        if (!(same_float(got, want[t][s]) || (isnan(got) && isnan(want[t][s])))) {
            fprintf(stderr, "\n%s step %lld: wrote %.9g, tensorboard read %s", printed[t], step,
                    want[t][s], value);
            bad++;
        }
    }
    free(text);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(lines, TAGS * STEPS);
    int missing = 0;
    for (int t = 0; t < TAGS; t++)
        for (int s = 0; s < STEPS; s++)
            missing += seen[t][s] != 1;
    CU_ASSERT_EQUAL(missing, 0);
    test_remove_tmpdir(tmpdir);
}

/* A run that crashed after step 5, its checkpoint of step 2, and the run
 * resumed from it, which makes steps 3 and 4 again (other values: its
 * samples/s, say) in a file of its own: TensorBoard shows steps 1 and 2 of
 * the first, 3 and 4 of the second, and not the first's 5. */
static void test_resumed_run_replaces_points(void)
{
    const char *py = tensorboard_python();
    if (!py) {
        fputs("\n(skipped: no tensorboard python; `make deps` makes the venv)", stderr);
        return;
    }
    make_tmpdir();
    char *logdir = test_tmp_path(tmpdir, "run");
    DdpTensorboard *crashed, *resumed;
    CU_ASSERT_EQUAL_FATAL(ddp_tensorboard_open(logdir, &crashed), DDP_OK);
    for (int step = 1; step <= 5; step++)
        CU_ASSERT_EQUAL(ddp_tensorboard_scalar(crashed, "loss", step, step), DDP_OK);
    CU_ASSERT_EQUAL(ddp_tensorboard_close(crashed), DDP_OK);
    /* the same second and pid: its name takes the next number, and sorts after */
    CU_ASSERT_EQUAL_FATAL(ddp_tensorboard_open(logdir, &resumed), DDP_OK);
    CU_ASSERT_EQUAL(ddp_tensorboard_resumed(resumed, 2), DDP_OK);
    for (int step = 3; step <= 4; step++)
        CU_ASSERT_EQUAL(ddp_tensorboard_scalar(resumed, "loss", step, 10 * step), DDP_OK);
    CU_ASSERT_EQUAL(ddp_tensorboard_close(resumed), DDP_OK);
    CU_ASSERT_EQUAL(ddp_tensorboard_resumed(NULL, 2), DDP_OK);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' tools/read_tensorboard.py '%s' 2> /dev/null", py, logdir); /* not its purge's note */
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "", "\"loss\" 1 1.0\n\"loss\" 2 2.0\n\"loss\" 3 30.0\n\"loss\" 4 40.0\n");
    free(out);
    test_remove_tmpdir(tmpdir);
}

void suite_tensorboard(void)
{
    static const TestCase cases[] = {
        {"CRC-32C: RFC 3720 vectors", test_crc32c_vectors},
        {"records, CRCs and fields read back by an independent decoder", test_file_reads_back},
        {"each scalar flushed; two writers, two files", test_flushed_and_separate},
        {"NULL writer, bad and over-long tags", test_hostile_input},
        {"a directory that cannot be made is named", test_bad_dir},
        {"TensorBoard's EventAccumulator reads every value back", test_tensorboard_reads_it},
        {"a resumed run's file replaces the points past its checkpoint", test_resumed_run_replaces_points},
        {NULL, NULL},
    };
    test_add_suite("tensorboard [python]", cases);
}
