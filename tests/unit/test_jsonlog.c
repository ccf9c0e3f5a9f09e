/*
 * Tests of runtime/jsonlog.c: the exact text of a line, and what Python's
 * json module reads back from it (values bit for bit, through struct).
 */
#include <math.h>
#include <signal.h>        // SIGXFSZ
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>         // open: the reader of a FIFO
#include <sys/resource.h>  // setrlimit: a file size limit makes writes fail
#include <sys/stat.h>      // mkfifo
#include <unistd.h>

#include "jsonlog.h"  // ddp_jsonlog_open, ddp_jsonlog_write, ddp_jsonlog_close
#include "testutil.h"

static char tmpdir[64];

static void make_tmpdir(void) { test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_log_XXXXXX"); }

/* A python3 with the json module (any python3 has it), or NULL. */
static const char *python(void) { return test_python_with("PYTHON", "/usr/bin/python3", "json, struct"); }

/* PATH's text after --resume's opening of it appends one record, RECORD's
 * N fields (a fresh string, NULL if unreadable). */
static char *appended(const char *path, const DdpLogField *record, int n)
{
    DdpJsonLog *log;
    CU_ASSERT_EQUAL_FATAL(ddp_jsonlog_open(path, 1, &log), DDP_OK);
    CU_ASSERT_EQUAL(ddp_jsonlog_write(log, record, n), DDP_OK);
    CU_ASSERT_EQUAL(ddp_jsonlog_close(log), DDP_OK);
    return test_read_file(path, NULL);
}

static void test_exact_text(void)
{
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/log.jsonl", tmpdir);
    DdpJsonLog *log;
    CU_ASSERT_EQUAL_FATAL(ddp_jsonlog_open(path, 0, &log), DDP_OK);
    DdpLogField first[] = {
        DDP_LOG_S("event", "epoch"), /* first, as every record's: an earlier log is told by it (--log) */
        DDP_LOG_I("epoch", 3),
        DDP_LOG_I("step", INT64_MIN),
        DDP_LOG_F("loss", 0.1f),
        DDP_LOG_D("lr", 0.01),
        DDP_LOG_F("whole", 3.0f),
        DDP_LOG_D("tiny", 1e-300),
        DDP_LOG_F("big", 3e38f),
        DDP_LOG_D("third", 1.0 / 3.0),
        DDP_LOG_F("neg0", -0.0f),
    };
    CU_ASSERT_EQUAL(ddp_jsonlog_write(log, first, 10), DDP_OK);
    DdpLogField second[] = {
        DDP_LOG_D("nan", NAN),
        DDP_LOG_F("inf", INFINITY),
        DDP_LOG_F("overflows float", 1e300),
        DDP_LOG_S("s", "q\"b\\s\n\t\x01 \xc3\xa9 \xff end"),
        DDP_LOG_S("null", NULL),
    };
    CU_ASSERT_EQUAL(ddp_jsonlog_write(log, second, 5), DDP_OK);
    CU_ASSERT_EQUAL(ddp_jsonlog_write(log, NULL, 0), DDP_OK);
    CU_ASSERT_EQUAL(ddp_jsonlog_close(log), DDP_OK);
    char *text = test_read_file(path, NULL);
    CU_ASSERT_FATAL(text != NULL);
    CU_ASSERT_STRING_EQUAL(text,
        "{\"event\": \"epoch\", \"epoch\": 3, \"step\": -9223372036854775808, \"loss\": 0.1, \"lr\": 0.01, "
        "\"whole\": 3.0, \"tiny\": 1e-300, \"big\": 3e+38, \"third\": 0.3333333333333333, \"neg0\": -0.0}\n"
        "{\"nan\": null, \"inf\": null, \"overflows float\": null, "
        "\"s\": \"q\\\"b\\\\s\\n\\t\\u0001 \xc3\xa9 \\ufffd end\", \"null\": null}\n"
        "{}\n");
    free(text);

    /* Appending continues the file. */
    text = appended(path, first, 1);
    CU_ASSERT_FATAL(text != NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "{}\n{\"event\": \"epoch\"}\n"));
    free(text);

    /* A file cut short in a line (a crash, a full disk) is ended first: the
     * appended record is a line of its own, and the whole one before it
     * stays as it was. */
    FILE *cut = fopen(path, "w");
    CU_ASSERT_FATAL(cut != NULL);
    fputs("{\"event\": \"epoch\"}\n{\"event\": \"ep", cut);
    fclose(cut);
    text = appended(path, first, 1);
    CU_ASSERT_FATAL(text != NULL);
    CU_ASSERT_STRING_EQUAL(text, "{\"event\": \"epoch\"}\n{\"event\": \"ep\n{\"event\": \"epoch\"}\n");
    free(text);
    test_remove_tmpdir(tmpdir);
}

/* Lines another process appends to the log (--eval-only --resume of a
 * checkpoint of the run that writes it) stay, whole, between the run's own,
 * also when the run began by emptying the log, and a line longer than
 * stdio's buffer is one line among them. (That such a line goes out in one
 * write(2), which only another writer racing it could tell, is seen with
 * strace -e write: one write of 100014 bytes.) */
static void test_shared_with_another_writer(void)
{
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/log.jsonl", tmpdir);
    DdpJsonLog *log;
    CU_ASSERT_EQUAL_FATAL(ddp_jsonlog_open(path, 0, &log), DDP_OK);
    DdpLogField first[] = {DDP_LOG_S("event", "epoch")};
    CU_ASSERT_EQUAL(ddp_jsonlog_write(log, first, 1), DDP_OK);
    int other = open(path, O_WRONLY | O_APPEND);
    CU_ASSERT_FATAL(other >= 0);
    static const char eval_line[] = "{\"event\": \"eval_only\"}\n";
    CU_ASSERT_EQUAL(write(other, eval_line, strlen(eval_line)), (ssize_t)strlen(eval_line));
    close(other);
    size_t long_len = 100000;
    char *long_text = malloc(long_len + 1);
    CU_ASSERT_FATAL(long_text != NULL);
    memset(long_text, 'x', long_len);
    long_text[long_len] = '\0';
    DdpLogField second[] = {DDP_LOG_S("event", long_text)};
    CU_ASSERT_EQUAL(ddp_jsonlog_write(log, second, 1), DDP_OK);
    CU_ASSERT_EQUAL(ddp_jsonlog_close(log), DDP_OK);
    char *text = test_read_file(path, NULL);
    CU_ASSERT_FATAL(text != NULL);
    const char *after = text ? strstr(text, "{\"event\": \"epoch\"}\n{\"event\": \"eval_only\"}\n{\"event\": \"xxx") : NULL;
    CU_ASSERT_PTR_NOT_NULL(after);
    CU_ASSERT(text && after == text && strlen(text) == 19 + strlen(eval_line) + 11 + long_len + 3);
    free(text);
    free(long_text);
    test_remove_tmpdir(tmpdir);
}

/* Python reads every line; its floats, packed by struct, must be the values
 * we logged, bit for bit. */
static void test_python_reads_back(void)
{
    const char *py = python();
    if (!py) {
        fprintf(stderr, "\n(skipped: no python3)");
        return;
    }
    enum { LINES = 500 };
    make_tmpdir();
    char path[128], bin[128];
    snprintf(path, sizeof path, "%s/log.jsonl", tmpdir);
    snprintf(bin, sizeof bin, "%s/values.bin", tmpdir);
    DdpJsonLog *log;
    CU_ASSERT_EQUAL_FATAL(ddp_jsonlog_open(path, 0, &log), DDP_OK);
    double f32[LINES], f64[LINES];
    uint64_t state = 88172645463325252u;
    for (int i = 0; i < LINES; i++) {
        /* xorshift64: spread over many magnitudes and signs */
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        double mant = (double)(state >> 11) / 9007199254740992.0;
        int exp = (int)(state % 80) - 40;
        double v = ldexp(mant, exp) * (state & 1 ? -1 : 1);
        f32[i] = (double)(float)v;
        f64[i] = v;
        char name[32];
        snprintf(name, sizeof name, "line %d \xe2\x82\xac", i);
        DdpLogField fields[] = {
            DDP_LOG_I("i", i), DDP_LOG_F("f32", v), DDP_LOG_D("f64", v), DDP_LOG_S("name", name),
        };
        CU_ASSERT_EQUAL(ddp_jsonlog_write(log, fields, 4), DDP_OK);
    }
    CU_ASSERT_EQUAL(ddp_jsonlog_close(log), DDP_OK);

    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s -c 'import json, struct, sys\n"
             "out = open(sys.argv[2], \"wb\")\n"
             "for n, line in enumerate(open(sys.argv[1], encoding=\"utf-8\")):\n"
             "    o = json.loads(line)\n"
             "    assert o[\"i\"] == n and o[\"name\"] == \"line %%d \\u20ac\" %% n, line\n"
             "    assert type(o[\"f32\"]) is float and type(o[\"f64\"]) is float, line\n"
             "    out.write(struct.pack(\"<dd\", struct.unpack(\"<f\", struct.pack(\"<f\", o[\"f32\"]))[0], o[\"f64\"]))\n"
             "' '%s' '%s'", py, path, bin);
    char *out = NULL;
    int rc = test_run(cmd, &out);
    if (rc != 0)
        fprintf(stderr, "\n%s", out ? out : "");
    CU_ASSERT_EQUAL(rc, 0);
    free(out);
    size_t len = 0;
    char *data = test_read_file(bin, &len);
    CU_ASSERT_FATAL(data != NULL);
    CU_ASSERT_EQUAL_FATAL(len, sizeof(double) * 2 * LINES);
    int bad = 0;
    for (int i = 0; i < LINES; i++) {
        double back[2];
        memcpy(back, data + i * sizeof back, sizeof back);
        bad += memcmp(&back[0], &f32[i], sizeof(double)) != 0 || memcmp(&back[1], &f64[i], sizeof(double)) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(data);
    test_remove_tmpdir(tmpdir);
}

static void test_failures(void)
{
    DdpJsonLog *log = (DdpJsonLog *)1;
    CU_ASSERT_EQUAL(ddp_jsonlog_open("/nonexistent/dir/log.jsonl", 0, &log), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NULL(log);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(),
                                  "--log /nonexistent/dir/log.jsonl: cannot write into /nonexistent/dir: No such"));
    /* a character device is written in place (runtime/dirs.h): /dev/full
     * takes the log, and the write's failure is reported */
    CU_ASSERT_EQUAL_FATAL(ddp_jsonlog_open("/dev/full", 0, &log), DDP_OK);
    DdpLogField field = DDP_LOG_I("epoch", 1);
    CU_ASSERT_EQUAL(ddp_jsonlog_write(log, &field, 1), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "/dev/full: cannot write the log: No space left on device"));
    ddp_jsonlog_close(log);
    /* A write that fails (here: past the file size limit, in a child) is reported. */
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddpc-jsonlog-XXXXXX");
    int fd;
    pid_t pid = test_fork_capturing(&fd);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit one_byte = {1, 1};
        DdpJsonLog *small = NULL;
        if (setrlimit(RLIMIT_FSIZE, &one_byte) != 0 ||
            ddp_jsonlog_open(test_tmp_path(tmpdir, "log.jsonl"), 0, &small) != DDP_OK)
            _exit(3);
        DdpLogField f = DDP_LOG_I("epoch", 1);
        DdpStatus st = ddp_jsonlog_write(small, &f, 1);
        fputs(ddp_error_message(), stdout);
        ddp_jsonlog_close(small);
        _exit(st == DDP_FAIL ? 0 : 4);
    }
    char *out = NULL;
    CU_ASSERT_EQUAL(test_child_output(pid, fd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "log.jsonl: cannot write the log: File too large"));
    free(out);
    /* A FIFO no process reads is refused at once, where the open waited
     * for a reader (in a child, which an alarm ends should it wait); one
     * with its reader takes the log. */
    const char *fifo = test_tmp_path(tmpdir, "fifo");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    pid = test_fork_capturing(&fd);
    if (pid == 0) {
        alarm(10);
        DdpJsonLog *unread = NULL;
        DdpStatus st = ddp_jsonlog_open(fifo, 0, &unread);
        fputs(ddp_error_message(), stdout);
        _exit(st == DDP_BAD_INPUT && !unread ? 0 : 5);
    }
    out = NULL;
    CU_ASSERT_EQUAL(test_child_output(pid, fd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "fifo: a FIFO that no process reads: start its reader first"));
    free(out);
    int reader = open(fifo, O_RDONLY | O_NONBLOCK);
    CU_ASSERT_FATAL(reader >= 0);
    CU_ASSERT_EQUAL_FATAL(ddp_jsonlog_open(fifo, 0, &log), DDP_OK);
    CU_ASSERT_EQUAL(ddp_jsonlog_write(log, &field, 1), DDP_OK);
    CU_ASSERT_EQUAL(ddp_jsonlog_close(log), DDP_OK);
    char line[32] = "";
    CU_ASSERT(read(reader, line, sizeof line - 1) > 0 && strcmp(line, "{\"epoch\": 1}\n") == 0);
    close(reader);
    test_remove_tmpdir(tmpdir);
    CU_ASSERT_EQUAL(ddp_jsonlog_close(NULL), DDP_OK);
}

void suite_jsonlog(void)
{
    static const TestCase cases[] = {
        {"exact text, escapes, null for NaN/Inf, append", test_exact_text},
        {"another process's lines appended between ours are kept", test_shared_with_another_writer},
        {"python's json reads the values back exactly", test_python_reads_back},
        {"open and write failures are reported", test_failures},
        {NULL, NULL},
    };
    test_add_suite("jsonlog [python]", cases);
}
