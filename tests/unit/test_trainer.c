/*
 * Tests of runtime/trainer.c (ddp_main) and runtime/weights.c, end to end:
 * the hand-written tiny net (tiny_net.c) trained on small IDX files written
 * here, ddp_main run in a forked child so that its output and exit status can
 * be checked and a crash cannot take the runner down. Then what a user relies
 * on: training works, --max-steps and --eval-every, --export/--init round
 * trips bit for bit, determinism, every kind of bad input refused with status 2
 * and a message naming it, a NaN loss with status 1; and the seeded
 * initialisation against PyTorch's own.
 */
#include <fcntl.h>  // open: a child's stderr to /dev/null
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>  // flock: a --save directory another run holds
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trainer.h"      // ddp_main, DdpNet
#include "rank_signals.h" // DDP_TEST_STOP_AFTER_ENV, DDP_EXIT_STOPPED: a stop asked at a chosen step
#include "json.h"         // ddp_json_skip_value: each line of --log - one JSON value
#include "safetensors.h"  // reading what --export wrote, writing bad --init files
#include "testutil.h"
#include "tiny_net.h"     // tiny_net, tiny_net_train
#include "trainer_harness.h"  // harness_run, harness_write_set, harness_has, ...
#include "weights.h"      // ddp_weights_init

enum { N_TRAIN = 200, N_TEST = 50 };

static char tmpdir[64];
static char data_dir[160], small_dir[160]; /* the data sets setup() writes */

static const char *tmp_path(const char *name)
{
    static char paths[8][160];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", tmpdir, name);
    return p;
}

/* tmpdir/data: 28x28 (N_TRAIN train, N_TEST test); tmpdir/small: 14x14. */
static void setup(void)
{
    strcpy(tmpdir, "/tmp/ddp_trainer_XXXXXX");
    CU_ASSERT_FATAL(mkdtemp(tmpdir) != NULL);
    snprintf(data_dir, sizeof data_dir, "%s/data", tmpdir);
    snprintf(small_dir, sizeof small_dir, "%s/small", tmpdir);
    mkdir(data_dir, 0755);
    mkdir(small_dir, 0755);
    harness_write_set(data_dir, "train", N_TRAIN, 28, 28, 1);
    harness_write_set(data_dir, "t10k", N_TEST, 28, 28, 2);
    harness_write_set(small_dir, "train", 30, 14, 14, 3);
    harness_write_set(small_dir, "t10k", 10, 14, 14, 4);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    test_run(cmd, NULL);
}

static const DdpNet *default_net(void)
{
    DdpTrainConfig train = tiny_net_train();
    return tiny_net(&train, 1, 10);
}

/* The number after "KEY": in a JSON line, or NAN. */
static double json_number(const char *line, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = strstr(line, pattern);
    return at ? strtod(at + strlen(pattern), NULL) : NAN;
}

/* The log's epoch and evaluation records, one a line: those lines of TEXT,
 * split in place (not the start, restart, stop or rank-times records);
 * returns the count. */
static int split_reports(char *text, char **lines, int max)
{
    int n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save))
        if (strstr(l, "\"event\": \"epoch\"") || strstr(l, "\"event\": \"eval\""))
            lines[n++] = l;
    return n;
}

static int64_t step_count(const char *path)
{
    DdpSafetensors *f;
    int64_t v = -1;
    if (ddp_safetensors_open(path, &f) != DDP_OK)
        return -1;
    const DdpTensor *t = ddp_safetensors_find(f, "norm.num_batches_tracked");
    if (t && t->dtype == DDP_DTYPE_I64 && t->ndim == 0)
        memcpy(&v, t->data, sizeof v);
    ddp_safetensors_close(f);
    return v;
}

/* ---- training --------------------------------------------------------------- */

static void test_trains(void)
{
    setup();
    char *out = NULL;
    int rc = harness_run(default_net(), &out, "--data %s --epochs 4 --log %s", data_dir,
                         tmp_path("log.jsonl"));
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(harness_has(out, "tiny: 200 train / 50 test samples of 1x28x28 IDX, batch 20 per rank (20 global), 10 steps per epoch, "
                               "4 epochs"));
    CU_ASSERT(harness_has(out, "epoch 1/4  step 10  loss "));
    CU_ASSERT(harness_has(out, "epoch 4/4  step 40  loss "));
    CU_ASSERT(harness_has(out, "test_acc "));
    CU_ASSERT(harness_has(out, "samples/s"));
    CU_ASSERT(harness_has(out, "done  40 steps  best test_acc"));
    CU_ASSERT(strchr(out, '\r') == NULL); /* piped: plain lines only */
    free(out);

    char *log = test_read_file(tmp_path("log.jsonl"), NULL);
    CU_ASSERT_FATAL(log != NULL);
    /* first, what the run is, its batch per rank and global, whether its
     * steps replay a graph (by default), and whether they are the same bits
     * at any world size (a CPU build: yes) */
    CU_ASSERT(strstr(log, "{\"event\": \"start\", \"net\": \"tiny\", \"data\": \"1x28x28 IDX\", \"world_size\": 1, "
                          "\"batch_per_rank\": 20, "
                          "\"global_batch\": 20, \"global_batch_set\": false, \"step_graphs\": true, "
                          "\"bit_invariant\": true}\n") == log);
    char *lines[16];
    int n = split_reports(log, lines, 16);
    CU_ASSERT_EQUAL(n, 4);
    static const char *const keys[] = {"\"event\": \"epoch\"", "\"epoch\":", "\"step\":", "\"loss\":", "\"lr\":",
                                       "\"samples_per_s\":", "\"test_loss\":", "\"test_acc\":", "\"time_s\":"};
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            CU_ASSERT(harness_has(lines[i], keys[k]));
    if (n == 4) {
        CU_ASSERT_EQUAL(json_number(lines[0], "epoch"), 1);
        CU_ASSERT_EQUAL(json_number(lines[3], "step"), 40);
        CU_ASSERT(json_number(lines[3], "loss") < json_number(lines[0], "loss"));
        CU_ASSERT(json_number(lines[3], "test_acc") > 0.5); /* chance is 0.1 */
        CU_ASSERT(json_number(lines[3], "test_loss") < 2.302585); /* below ln 10 */
        CU_ASSERT_DOUBLE_EQUAL(json_number(lines[0], "lr"), 0.1, 1e-7);
    }
    free(log);
    teardown();
}

/* harness_run with the child's stderr dropped: in *OUT what it wrote to
 * stdout alone, so that a test can tell the two apart. It runs in tmpdir,
 * where teardown removes whatever it makes. ARGS is split in place. */
static int run_stdout_only(const DdpNet *net, char **out, char *args)
{
    char *argv[64] = {"/some/dir/tiny_train"};
    int argc = test_split_args(args, argv, 1, 64);
    int fd;
    pid_t pid = test_fork_capturing(&fd);
    if (pid == 0) {
        int null_fd = open("/dev/null", O_WRONLY);
        if (null_fd < 0 || dup2(null_fd, STDERR_FILENO) < 0 || chdir(tmpdir) != 0)
            _exit(99);
        int rc = ddp_main(argc, argv, net);
        fflush(NULL);
        _exit(rc);
    }
    return test_child_output(pid, fd, out);
}

/* Whether LINE (LEN bytes) is one whole JSON value and nothing more. */
static int one_json_value(const char *line, size_t len)
{
    char *arena = malloc(len + 1);
    DdpJson j = {.path = "stdout", .text = (const unsigned char *)line, .p = (const unsigned char *)line,
                 .end = (const unsigned char *)line + len, .arena = arena};
    int ok = arena && ddp_json_skip_value(&j, 0) == DDP_OK;
    ddp_json_skip_ws(&j);
    free(arena);
    return ok && j.p == j.end;
}

/* --log -: the log's lines on standard output, the start record first; with
 * --quiet (the progress lines are stdout's too) nothing else is there, so a
 * pipe into jq reads it. Not a file named '-'. */
static void test_log_to_stdout(void)
{
    setup();
    char args[256], *out = NULL;
    snprintf(args, sizeof args, "--data %s --epochs 2 --quiet --log -", data_dir);
    CU_ASSERT_EQUAL(run_stdout_only(default_net(), &out, args), 0);
    CU_ASSERT_FATAL(out != NULL);
    static const char start[] = "{\"event\": \"start\", \"net\": \"tiny\", ", epoch[] = "{\"event\": \"epoch\", ";
    CU_ASSERT(strncmp(out, start, strlen(start)) == 0);
    int lines = 0, json = 0, epochs = 0;
    for (const char *l = out; *l;) {
        size_t len = strcspn(l, "\n");
        lines++;
        json += one_json_value(l, len);
        epochs += strncmp(l, epoch, strlen(epoch)) == 0;
        l += len + (l[len] == '\n');
    }
    CU_ASSERT(lines > 2);
    CU_ASSERT_EQUAL(json, lines);
    CU_ASSERT_EQUAL(epochs, 2);
    if (json != lines || epochs != 2)
        fprintf(stderr, "\nstdout:\n%s\n", out);
    CU_ASSERT(access(tmp_path("-"), F_OK) != 0);
    free(out);
    teardown();
}

static void test_max_steps(void)
{
    setup();
    char *out = NULL;
    /* Step 17 is in the middle of epoch 2: it ends there, evaluated. */
    int rc = harness_run(default_net(), &out, "--data %s --max-steps 17 --log %s --export %s", data_dir,
                         tmp_path("log.jsonl"), tmp_path("w.safetensors"));
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(harness_has(out, "epoch 2/3  step 17  "));
    CU_ASSERT(harness_has(out, "done  17 steps"));
    free(out);
    char *log = test_read_file(tmp_path("log.jsonl"), NULL);
    CU_ASSERT_FATAL(log != NULL);
    char *lines[8];
    int n = split_reports(log, lines, 8);
    CU_ASSERT_EQUAL(n, 2);
    if (n == 2)
        CU_ASSERT_EQUAL(json_number(lines[1], "step"), 17);
    free(log);
    CU_ASSERT_EQUAL(step_count(tmp_path("w.safetensors")), 17);

    /* --batch-size and --epochs override the net's; --quiet prints nothing. */
    rc = harness_run(default_net(), &out, "--data %s --batch-size 64 --epochs 1 --quiet --export %s",
                     data_dir, tmp_path("w.safetensors"));
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(out, "");
    CU_ASSERT_EQUAL(step_count(tmp_path("w.safetensors")), 4); /* 200 / 64: 3 full batches and one of 8 */
    free(out);
    teardown();
}

static void test_eval_every(void)
{
    setup();
    char *out = NULL;
    int rc = harness_run(default_net(), &out, "--data %s --epochs 2 --eval-every 4 --log %s", data_dir,
                         tmp_path("log.jsonl"));
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(harness_has(out, "\n  step 4  loss "));
    free(out);
    char *log = test_read_file(tmp_path("log.jsonl"), NULL);
    CU_ASSERT_FATAL(log != NULL);
    char *lines[16];
    int n = split_reports(log, lines, 16);
    /* evaluations at steps 4, 8, (10 ends epoch 1), 12, 16, (20 ends epoch 2) */
    static const int64_t steps[] = {4, 8, 10, 12, 16, 20};
    static const int epoch_end[] = {0, 0, 1, 0, 0, 1};
    CU_ASSERT_EQUAL_FATAL(n, 6);
    for (int i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(json_number(lines[i], "step"), steps[i]);
        CU_ASSERT(harness_has(lines[i], epoch_end[i] ? "\"event\": \"epoch\"" : "\"event\": \"eval\""));
        CU_ASSERT(harness_has(lines[i], "\"test_acc\":"));
        CU_ASSERT(harness_has(lines[i], "\"loss\":"));
    }
    CU_ASSERT_EQUAL(json_number(lines[3], "epoch"), 2);
    free(log);
    teardown();
}

/* The value TensorBoard's reader printed for TAG at STEP (read_tensorboard.py
 * lines: "TAG" STEP VALUE), or NAN. */
static double plotted(const char *points, const char *tag, int64_t step)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\" %lld ", tag, (long long)step);
    for (const char *at = points; (at = strstr(at, key)); at++)
        if (at == points || at[-1] == '\n')
            return strtod(at + strlen(key), NULL);
    return NAN;
}

/* --tensorboard: TensorBoard's own reader (tools/read_tensorboard.py, in the
 * venv `make deps` makes) finds every number --log has, at the same steps;
 * a resumed run adds a file whose steps continue. */
static void test_tensorboard(void)
{
    setup();
    const char *tb = tmp_path("tb");
    CU_ASSERT_EQUAL(harness_run(default_net(), NULL, "--data %s --epochs 2 --eval-every 4 --log %s --tensorboard %s "
                                "--save %s", data_dir, tmp_path("log.jsonl"), tb, tmp_path("ck")), 0);
    CU_ASSERT_EQUAL(harness_run(default_net(), NULL, "--data %s --epochs 3 --log %s --tensorboard %s --save %s --resume",
                                data_dir, tmp_path("log.jsonl"), tb, tmp_path("ck")), 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^events.out.tfevents.'", tb);
    char *files = NULL;
    CU_ASSERT_EQUAL(test_run(cmd, &files), 0);
    CU_ASSERT(files && atoi(files) == 2);
    free(files);

    const char *py = test_python_with("TB_PYTHON", "/opt/ddpc-tb/bin/python", "tensorboard");
    if (!py) {
        fputs("\n    (TensorBoard's reader not run: no tensorboard python; `make deps` makes one)", stderr);
        teardown();
        return;
    }
    char *points = NULL;
    snprintf(cmd, sizeof cmd, "'%s' tools/read_tensorboard.py '%s'", py, tb);
    CU_ASSERT_EQUAL_FATAL(test_run(cmd, &points), 0);
    char *log = test_read_file(tmp_path("log.jsonl"), NULL);
    CU_ASSERT_FATAL(log != NULL);
    char *lines[16];
    int n = split_reports(log, lines, 16);
    CU_ASSERT_EQUAL(n, 7); /* steps 4, 8, 10, 12, 16, 20, then the resumed 30 */
    static const char *const keys[] = {"loss", "lr", "samples_per_s", "test_loss", "test_acc"};
    /* TensorBoard's loss is the mean since the previous point; an epoch
     * record's is the epoch's: less its evaluations' spans, its last span's
     * (every step here a full batch, so steps weigh alike) */
    int64_t since = 0, epoch_start = 0;
    double evaluated = 0;
    for (int i = 0; i < n; i++) {
        int64_t step = (int64_t)json_number(lines[i], "step");
        int is_epoch = strstr(lines[i], "\"event\": \"epoch\"") != NULL;
        double loss = json_number(lines[i], "loss");
        double span_loss = is_epoch ? (loss * (double)(step - epoch_start) - evaluated) / (double)(step - since) : loss;
        evaluated = is_epoch ? 0 : evaluated + loss * (double)(step - since);
        if (is_epoch)
            epoch_start = step;
        since = step;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            double want = (float)(k == 0 ? span_loss : json_number(lines[i], keys[k]));
            double got = plotted(points, keys[k], step);
            if (!(fabs(got - want) <= 1e-6 * fabs(want)))
                fprintf(stderr, "\n    step %lld %s: log %.9g, TensorBoard %.9g", (long long)step, keys[k], want, got);
            CU_ASSERT(fabs(got - want) <= 1e-6 * fabs(want));
        }
    }
    CU_ASSERT(!isnan(plotted(points, "test_acc", 30)));
    /* the rank's times, at each epoch's end (no --log-every) */
    CU_ASSERT(plotted(points, "rank0/forward_ms", 10) > 0);
    CU_ASSERT(plotted(points, "rank0/samples_per_s", 20) > 0);
    free(log);
    free(points);
    teardown();
}

/* How resumed_reports_match's run stops. */
typedef enum {
    BY_MAX_STEPS,  /* --max-steps: an epoch's end reports, also where the epoch goes on */
    AFTER_CRASH,   /* --max-steps, then resumed from the checkpoint before, as a restart after a crash */
    BY_SIGNAL,     /* a stop asked for (DDP_TEST_STOP_AFTER): every report until then, none after */
} StopKind;

/* Stopped after step STOP with FLAGS (2 epochs of 10 steps), resumed, and
 * compared with the run that never stopped: the resumed run's every report
 * gives the very same loss and evaluation as that run's report at its
 * step, from the first past the step resumed from (or at it, an epoch's
 * report that a stop there left out). Stopped BY_SIGNAL, the two runs'
 * reports together are the uninterrupted run's, each once. */
static void resumed_reports_match(const char *flags, int stop, StopKind how)
{
    const DdpNet *net = default_net();
    const char *ck = "ck";
    char newest[64], *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 %s --save %s --log %s", data_dir, flags,
                                tmp_path("ck_whole"), tmp_path("whole.jsonl")), 0);
    if (how == BY_SIGNAL) {
        char at[16];
        snprintf(at, sizeof at, "%d", stop);
        setenv(DDP_TEST_STOP_AFTER_ENV, at, 1);
        CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 %s --save %s --log %s", data_dir, flags,
                                    tmp_path(ck), tmp_path("resumed.jsonl")), DDP_EXIT_STOPPED);
        unsetenv(DDP_TEST_STOP_AFTER_ENV);
    } else {
        CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 %s --max-steps %d --save %s", data_dir, flags,
                                    stop, tmp_path(ck)), 0);
    }
    int from = stop;
    const int drop_newest = how == AFTER_CRASH;
    if (drop_newest) {
        snprintf(newest, sizeof newest, "%s/checkpoint-tiny-%09d.safetensors", ck, stop);
        CU_ASSERT_EQUAL(remove(tmp_path(newest)), 0);
        from = stop - 1; /* --save-every 3 below */
    }
    /* a signal's run logs into resumed.jsonl too, which the resumed run appends to */
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --epochs 2 %s --save %s --resume --log %s", data_dir, flags,
                                tmp_path(ck), tmp_path("resumed.jsonl")), 0);
    char *whole = test_read_file(tmp_path("whole.jsonl"), NULL), *resumed = test_read_file(tmp_path("resumed.jsonl"),
                                                                                          NULL);
    CU_ASSERT_FATAL(whole && resumed);
    char *all[16], *again[16];
    const int n = split_reports(whole, all, 16), m = split_reports(resumed, again, 16);
    /* the uninterrupted run's first report the log has again: under
     * --max-steps, the first the resumed run makes (the run it resumed
     * reported its step in any case, as an epoch's end); after a signal,
     * the stopped run's first */
    int first = 0;
    while (how != BY_SIGNAL && first < n && json_number(all[first], "step") <= from)
        first++;
    CU_ASSERT_EQUAL(m, n - first);
    static const char *const keys[] = {"step", "epoch", "loss", "test_loss", "test_acc"};
    for (int i = 0; i < m && first + i < n; i++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const double got = json_number(again[i], keys[k]), want = json_number(all[first + i], keys[k]);
            if (got != want)
                fprintf(stderr, "\n    %s, stopped after step %d: report %d: %s %.17g resumed, %.17g uninterrupted",
                        flags, stop, i, keys[k], got, want);
            CU_ASSERT(got == want);
        }
    /* an epoch whose report the stop left out: said untimed, by the resumed run */
    if (how == BY_SIGNAL && stop % 10 == 0) {
        char line[64];
        snprintf(line, sizeof line, "epoch %d/2  step %d  loss ", stop / 10, stop);
        CU_ASSERT(harness_has(out, line));
        CU_ASSERT(harness_has(out, "(trained before the stop)\n"));
    }
    free(out);
    free(whole);
    free(resumed);
    remove(tmp_path("whole.jsonl"));
    remove(tmp_path("resumed.jsonl"));
    test_remove_tmpdir(tmp_path("ck_whole"));
    test_remove_tmpdir(tmp_path(ck));
}

/* A checkpoint inside an epoch keeps the epoch's training loss so far, and
 * the part since its last --eval-every report as the run that never stops
 * has it: a run resumed from one logs that run's very losses. Bit for bit
 * where both take the sums at the same steps (the first two cases, which
 * save alike); the last two stop where the other run does not save, and
 * hold bit for bit here because this net's losses add up exactly in
 * double. */
static void test_resumed_reports(void)
{
    setup();
    /* back to step 6's, past the report at step 4 */
    resumed_reports_match("--eval-every 4 --save-every 3", 7, AFTER_CRASH);
    /* saved at a step that reports: after the report, its span none */
    resumed_reports_match("--eval-every 4 --save-every 4", 12, BY_MAX_STEPS);
    /* ended by --max-steps inside an epoch, between two reports: the span kept */
    resumed_reports_match("--eval-every 4", 7, BY_MAX_STEPS);
    resumed_reports_match("", 13, BY_MAX_STEPS);
    /* stopped on an epoch's last step, before its report: the resumed run makes it */
    resumed_reports_match("--eval-every 4", 10, BY_SIGNAL);
    resumed_reports_match("--eval-every 3 --save-every 5", 10, BY_SIGNAL);
    /* stopped inside an epoch at a step that reports: the resumed run makes
     * that report, then the next of the epoch's from the steps after it */
    resumed_reports_match("--eval-every 3", 6, BY_SIGNAL);
    resumed_reports_match("--eval-every 4", 8, BY_SIGNAL);
    /* --save-every saves an epoch's end after its report: resumed, none again */
    resumed_reports_match("--save-every 5", 10, BY_MAX_STEPS);
    teardown();
}

/* A checkpoint's metadata KEY, or "" (static). */
static const char *checkpoint_meta(const char *path, const char *key)
{
    static char value[64];
    DdpSafetensors *f;
    value[0] = '\0';
    if (ddp_safetensors_open_header(path, &f) != DDP_OK)
        return value;
    const char *v = ddp_safetensors_meta(f, key);
    snprintf(value, sizeof value, "%s", v ? v : "");
    ddp_safetensors_close(f);
    return value;
}

/* A report left out is made once, and only where a stop left it out: not
 * by a run resumed from a checkpoint that --max-steps ended, whose step an
 * --eval-every of the resumed run divides; not again by a second resume of
 * a run that trained no step. A stop's checkpoint at an --eval-every point
 * keeps the span where versions before it read none. */
static void test_left_out_reported_once(void)
{
    setup();
    const DdpNet *net = default_net();
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --eval-every 4 --max-steps 6 --save %s", data_dir,
                                tmp_path("ck")), 0);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --epochs 2 --eval-every 3 --max-steps 9 --save %s --resume",
                                data_dir, tmp_path("ck")), 0);
    CU_ASSERT(out && !strstr(out, "(trained before the stop)") && harness_has(out, "  step 9  loss "));
    free(out);
    test_remove_tmpdir(tmp_path("ck"));

    setenv(DDP_TEST_STOP_AFTER_ENV, "8", 1);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --eval-every 4 --save %s", data_dir, tmp_path("ck")),
                    DDP_EXIT_STOPPED);
    unsetenv(DDP_TEST_STOP_AFTER_ENV);
    char stopped[256];
    snprintf(stopped, sizeof stopped, "%s", tmp_path("ck/checkpoint-tiny-000000008.safetensors"));
    CU_ASSERT_STRING_EQUAL(checkpoint_meta(stopped, "left_out_report"), "eval");
    CU_ASSERT_STRING_EQUAL(checkpoint_meta(stopped, "span_loss_samples"), "0");
    CU_ASSERT_STRING_EQUAL(checkpoint_meta(stopped, "left_out_loss_samples"), "80"); /* 4 steps of 20 */
    /* resumed from the file named, saving elsewhere: nothing written there at its step */
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --epochs 2 --eval-every 4 --max-steps 8 --save %s --resume %s",
                                data_dir, tmp_path("ck_other"), stopped), 0);
    CU_ASSERT(harness_has(out, "(trained before the stop)"));
    CU_ASSERT(access(tmp_path("ck_other/checkpoint-tiny-000000008.safetensors"), F_OK) != 0);
    free(out);
    /* resumed with another --lr: the report says the step's */
    for (int again = 0; again < 2; again++) {
        CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --epochs 2 --eval-every 4 --max-steps 8 --lr 0.05 --save %s "
                                    "--resume", data_dir, tmp_path("ck")), 0);
        CU_ASSERT(out && (strstr(out, "  step 8  loss ") != NULL) == !again);
        CU_ASSERT(out && (strstr(out, "  lr 0.1  (trained before the stop)") != NULL) == !again);
        free(out);
    }
    CU_ASSERT_STRING_EQUAL(checkpoint_meta(stopped, "left_out_report"), "");
    CU_ASSERT_STRING_EQUAL(checkpoint_meta(stopped, "epoch_loss_samples"), "160");
    test_remove_tmpdir(tmp_path("ck"));
    teardown();
}

/* --epochs may grow on resume: one epoch with --save, then --resume with
 * --epochs 2 goes on from step 10 through epoch 2, and (the tiny net's
 * learning rate is constant) ends with the weights of two epochs in one go. */
static void test_resume_more_epochs(void)
{
    setup();
    const DdpNet *net = default_net();
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --export %s", data_dir, tmp_path("whole.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 1 --save %s", data_dir, tmp_path("ck")), 0);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --epochs 2 --save %s --resume --export %s", data_dir,
                                tmp_path("ck"), tmp_path("resumed.st")), 0);
    CU_ASSERT(harness_has(out, "checkpoint-tiny-000000010.safetensors: step 10\n"));
    CU_ASSERT(harness_has(out, "epoch 2/2  step 20  loss "));
    CU_ASSERT(harness_has(out, "done  20 steps"));
    CU_ASSERT(harness_same_tensors(tmp_path("whole.st"), tmp_path("resumed.st")));
    free(out);
    teardown();
}

/* ---- weights files --------------------------------------------------------------- */

static void test_export_initial(void)
{
    setup();
    const DdpNet *net = default_net();
    char *out = NULL;
    int rc = harness_run(net, &out, "--data %s --max-steps 0 --export %s", data_dir,
                         tmp_path("init.safetensors"));
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(harness_has(out, "done  0 steps"));
    free(out);

    /* What the seeded initialisation gives in-process, tensor by tensor. */
    float *params = calloc((size_t)net->n_param_floats, sizeof(float));
    float *buffers = calloc((size_t)net->n_buffer_floats, sizeof(float));
    int64_t counts[8];
    CU_ASSERT_FATAL(params && buffers);
    CU_ASSERT_EQUAL(ddp_weights_init(net, 7, params, buffers, counts), DDP_OK);
    DdpSafetensors *f;
    CU_ASSERT_FATAL(ddp_safetensors_open(tmp_path("init.safetensors"), &f) == DDP_OK);
    CU_ASSERT_EQUAL(ddp_safetensors_count(f), 5);
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(f, "net"), "tiny");
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(f, "hash"), "0123456789abcdef");
    CU_ASSERT_STRING_EQUAL(ddp_safetensors_meta(f, "format"), "ddpc");
    for (int i = 0; i < net->n_params; i++) {
        const DdpParamInfo *p = &net->params[i];
        const DdpTensor *t = ddp_safetensors_find(f, p->name);
        CU_ASSERT_FATAL(t != NULL);
        if (p->is_step_count) {
            CU_ASSERT_EQUAL(t->dtype, DDP_DTYPE_I64);
            CU_ASSERT_EQUAL(t->ndim, 0);
            CU_ASSERT_EQUAL(*(const int64_t *)t->data, 0);
            continue;
        }
        CU_ASSERT_EQUAL(t->dtype, DDP_DTYPE_F32);
        CU_ASSERT_EQUAL(t->ndim, p->ndim);
        const float *want = (p->trainable ? params : buffers) + p->offset;
        CU_ASSERT(memcmp(t->data, want, (size_t)p->numel * sizeof(float)) == 0);
    }
    /* The distribution: kaiming-uniform bounds, ones, zeros. */
    float bound = 1 / sqrtf(784), lo = 1, hi = -1;
    for (int64_t k = 0; k < 7850; k++) {
        lo = params[k] < lo ? params[k] : lo;
        hi = params[k] > hi ? params[k] : hi;
    }
    CU_ASSERT(lo >= -bound * 1.0001f && hi <= bound * 1.0001f && lo < -0.9f * bound && hi > 0.9f * bound);
    CU_ASSERT(buffers[0] == 0 && buffers[9] == 0 && buffers[10] == 1 && buffers[19] == 1);
    ddp_safetensors_close(f);
    free(params);
    free(buffers);
    teardown();
}

static void test_init_reproduces(void)
{
    setup();
    const DdpNet *net = default_net();
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --max-steps 0 --export %s", data_dir, tmp_path("init.st")), 0);
    /* A seeded run and a run from its exported initial weights take the same steps. */
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --max-steps 13 --export %s", data_dir, tmp_path("a.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --max-steps 13 --init %s --export %s", data_dir,
                                tmp_path("init.st"), tmp_path("b.st")), 0);
    CU_ASSERT(harness_same_tensors(tmp_path("a.st"), tmp_path("b.st")));
    /* --init then --export straight away gives the file back, step count included. */
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --max-steps 0 --init %s --export %s", data_dir, tmp_path("a.st"),
                                tmp_path("c.st")), 0);
    CU_ASSERT(harness_same_tensors(tmp_path("a.st"), tmp_path("c.st")));
    CU_ASSERT_EQUAL(step_count(tmp_path("c.st")), 13);
    teardown();
}

/* num_batches_tracked counts the training batches, a forward each, as
 * PyTorch's batchnorm does, also where --no-sync-every K takes K of them a
 * step (an epoch's last step the few left), from --init's count, and a
 * resume continues it. */
static void test_batch_counts(void)
{
    setup();
    const DdpNet *net = default_net();
    /* N_TRAIN / 20 batches an epoch, in steps of 3 (the last of fewer) */
    const int64_t batches = N_TRAIN / 20, steps_per_epoch = (batches + 2) / 3;
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --no-sync-every 3 --max-steps %lld --export %s", data_dir,
                                (long long)steps_per_epoch + 1, tmp_path("a.st")), 0);
    CU_ASSERT_EQUAL(step_count(tmp_path("a.st")), batches + 3);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --no-sync-every 3 --max-steps 2 --init %s --export %s",
                                data_dir, tmp_path("a.st"), tmp_path("b.st")), 0);
    CU_ASSERT_EQUAL(step_count(tmp_path("b.st")), batches + 3 + 6);
    /* stopped at step 2 and resumed to step_per_epoch + 1: the same as straight there */
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --no-sync-every 3 --max-steps 2 --save %s", data_dir,
                                tmp_path("ck")), 0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --no-sync-every 3 --max-steps %lld --save %s --resume "
                                "--export %s", data_dir, (long long)steps_per_epoch + 1, tmp_path("ck"),
                                tmp_path("c.st")), 0);
    CU_ASSERT_EQUAL(step_count(tmp_path("c.st")), batches + 3);
    teardown();
}

static void test_init_continues(void)
{
    setup();
    /* Without momentum and with a constant rate the optimizer has no state
     * beyond the weights, and without shuffling every epoch visits the same
     * batches: one epoch from an exported epoch is the second epoch. */
    DdpTrainConfig train = tiny_net_train();
    train.momentum = 0;
    const DdpNet *net = tiny_net(&train, 1, 10);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --no-shuffle --epochs 2 --export %s", data_dir,
                                tmp_path("two.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --no-shuffle --epochs 1 --export %s", data_dir,
                                tmp_path("one.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --no-shuffle --epochs 1 --init %s --export %s", data_dir,
                                tmp_path("one.st"), tmp_path("one_more.st")), 0);
    CU_ASSERT(harness_same_tensors(tmp_path("two.st"), tmp_path("one_more.st")));
    CU_ASSERT_EQUAL(step_count(tmp_path("one_more.st")), 20);
    teardown();
}

static void test_deterministic(void)
{
    setup();
    const DdpNet *net = default_net();
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --export %s", data_dir, tmp_path("a.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --export %s", data_dir, tmp_path("b.st")), 0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --seed 8 --export %s", data_dir, tmp_path("c.st")), 0);
    size_t la, lb;
    char *a = test_read_file(tmp_path("a.st"), &la), *b = test_read_file(tmp_path("b.st"), &lb);
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT(la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
    DdpSafetensors *fa, *fc;
    CU_ASSERT_FATAL(ddp_safetensors_open(tmp_path("a.st"), &fa) == DDP_OK);
    CU_ASSERT_FATAL(ddp_safetensors_open(tmp_path("c.st"), &fc) == DDP_OK);
    const DdpTensor *wa = ddp_safetensors_find(fa, "fc.weight"), *wc = ddp_safetensors_find(fc, "fc.weight");
    CU_ASSERT(wa && wc && memcmp(wa->data, wc->data, wa->nbytes) != 0);
    ddp_safetensors_close(fa);
    ddp_safetensors_close(fc);
    teardown();
}

/* Writes tensors named NAMES (fc.weight with COLS columns) as a --init file;
 * fc.weight[3] is AT_3, where that is not 0. */
static void write_weights(const char *path, int cols, int with_bias, int extra, DdpDtype dtype, double at_3)
{
    static double w[10 * 785];
    for (int i = 0; i < 10 * 785; i++)
        w[i] = 0.001 * (i % 7);
    if (at_3 != 0.0)
        w[3] = at_3;
    float wf[10 * 785];
    for (int i = 0; i < 10 * 785; i++)
        wf[i] = (float)w[i];
    int64_t zero = 0;
    const void *data = dtype == DDP_DTYPE_F64 ? (const void *)w : (const void *)wf;
    DdpTensor t[6];
    int n = 0;
    t[n++] = (DdpTensor){.name = "fc.weight", .dtype = dtype, .ndim = 2, .shape = {10, cols}, .data = data};
    if (with_bias)
        t[n++] = (DdpTensor){.name = "fc.bias", .dtype = dtype, .ndim = 1, .shape = {10}, .data = data};
    t[n++] = (DdpTensor){.name = "norm.running_mean", .dtype = dtype, .ndim = 1, .shape = {10}, .data = data};
    t[n++] = (DdpTensor){.name = "norm.running_var", .dtype = dtype, .ndim = 1, .shape = {10}, .data = data};
    t[n++] = (DdpTensor){.name = "norm.num_batches_tracked", .dtype = DDP_DTYPE_I64, .ndim = 0, .data = &zero};
    if (extra)
        t[n++] = (DdpTensor){.name = "fc2.weight", .dtype = dtype, .ndim = 1, .shape = {3}, .data = data};
    CU_ASSERT_FATAL(ddp_safetensors_write(path, t, n, NULL, 0) == DDP_OK);
}

static void test_bad_init(void)
{
    setup();
    const DdpNet *net = default_net();
    const char *w = tmp_path("w.safetensors");
    char *out = NULL;

    write_weights(w, 783, 1, 0, DDP_DTYPE_F32, 0.0);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --init %s", data_dir, w), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: "));
    CU_ASSERT(harness_has(out, "w.safetensors: tensor 'fc.weight' has shape [10,783], the net expects [10,784]"));
    free(out);

    write_weights(w, 784, 0, 0, DDP_DTYPE_F32, 0.0);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --init %s", data_dir, w), 2);
    CU_ASSERT(harness_has(out, "w.safetensors: has no tensor 'fc.bias'"));
    free(out);

    write_weights(w, 784, 1, 1, DDP_DTYPE_F32, 0.0);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --init %s", data_dir, w), 2);
    CU_ASSERT(harness_has(out, "'fc2.weight'"));
    free(out);

    write_weights(w, 784, 1, 0, DDP_DTYPE_BF16, 0.0);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --init %s", data_dir, w), 2);
    CU_ASSERT(harness_has(out, "tensor 'fc.weight' has dtype BF16, the net expects F32"));
    free(out);

    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --init %s", data_dir, tmp_path("absent.safetensors")), 2);
    CU_ASSERT(harness_has(out, "absent.safetensors"));
    free(out);

    /* A file cut short. */
    write_weights(w, 784, 1, 0, DDP_DTYPE_F32, 0.0);
    CU_ASSERT_FATAL(truncate(w, 1000) == 0);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --init %s", data_dir, w), 2);
    CU_ASSERT(harness_has(out, "w.safetensors"));
    free(out);

    /* A NaN, an infinity, or a double beyond float's range: as --resume
     * refuses such a checkpoint. */
    const double not_finite[] = {NAN, -INFINITY, 1e39};
    for (int k = 0; k < 3; k++) {
        write_weights(w, 784, 1, 0, k < 2 ? DDP_DTYPE_F32 : DDP_DTYPE_F64, not_finite[k]);
        CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --init %s", data_dir, w), 2);
        CU_ASSERT(harness_has(out, "w.safetensors: tensor 'fc.weight' is not finite (nan or inf, or a double beyond "
                                   "float's range): weights of a diverged run"));
        free(out);
    }

    /* F64 is converted. */
    write_weights(w, 784, 1, 0, DDP_DTYPE_F64, 0.0);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --init %s --max-steps 0 --export %s", data_dir, w,
                                tmp_path("back.st")), 0);
    free(out);
    DdpSafetensors *f;
    CU_ASSERT_FATAL(ddp_safetensors_open(tmp_path("back.st"), &f) == DDP_OK);
    const DdpTensor *t = ddp_safetensors_find(f, "fc.weight");
    CU_ASSERT_FATAL(t && t->dtype == DDP_DTYPE_F32);
    CU_ASSERT_EQUAL(((const float *)t->data)[5], (float)0.005);
    ddp_safetensors_close(f);

    /* --export into a directory that does not exist fails before training. */
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --export %s/no/such/dir/w.st", data_dir, tmpdir), 2);
    CU_ASSERT(harness_has(out, "--export"));
    CU_ASSERT(!strstr(out, "epoch 1/"));
    free(out);
    teardown();
}

/* ---- bad input ---------------------------------------------------------------- */

/* A seed so close to 2^64 - 1 that seed + epoch passes it, which PyTorch's
 * DistributedSampler refuses, is refused where the run would get to that
 * epoch shuffling (10 steps an epoch here). */
static void test_seed_past_the_top(void)
{
    setup();
    const DdpNet *net = default_net();
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --epochs 2 --seed 18446744073709551615", data_dir), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: --seed 18446744073709551615: DistributedSampler shuffles each epoch "
                               "by the seed plus the epochs before it, which passes 2^64 - 1 at epoch 2, where PyTorch "
                               "refuses it; give a seed of at most 18446744073709551614 for 2 epochs"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --seed 18446744073709551615 --max-steps 11", data_dir),
                    2);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --seed 18446744073709551615 --max-steps 10", data_dir),
                    0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --seed 18446744073709551615 --no-shuffle", data_dir),
                    0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --seed 18446744073709551614", data_dir), 0);
    /* the seed of the net's train { } (ddpc held it to the net's epochs;
     * --epochs takes the run past them): named as the net's, not --seed */
    DdpTrainConfig train = tiny_net_train();
    train.seed = UINT64_MAX;
    CU_ASSERT_EQUAL(harness_run(tiny_net(&train, 1, 10), &out, "--data %s --epochs 2", data_dir), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: the net's seed 18446744073709551615: DistributedSampler shuffles "
                               "each epoch by the seed plus the epochs before it"));
    free(out);
    teardown();
}

/* A training batch in which a batchnorm would see one value per channel
 * (DdpNet.batchnorm_values_*, which ddpc writes; the tiny net has none) is
 * refused before training: a batch of one sample, or an epoch's last, where
 * the run gets there, from the step it resumes at; a synchronised batchnorm
 * sees all ranks' samples. */
static void test_batchnorm_single_value(void)
{
    setup();
    DdpNet net = *default_net();
    char *out = NULL;
    net.batchnorm_values_local = 1;
    CU_ASSERT_EQUAL(harness_run(&net, &out, "--data %s --batch-size 1", data_dir), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: a batchnorm of net 'tiny' whose input has one value per channel in "
                               "a sample (flat, or 1x1) would normalize a single value in a training batch of 1 sample; "
                               "PyTorch refuses such a batch (\"Expected more than 1 value per channel when "
                               "training\"): give a batch size (--batch-size or --global-batch) that leaves no batch "
                               "of one sample"));
    free(out);
    /* N_TRAIN = 200 = 199 + 1: the second of each epoch's batches of 199 */
    CU_ASSERT_EQUAL(harness_run(&net, &out, "--data %s --batch-size 199", data_dir), 2);
    CU_ASSERT(harness_has(out, "in an epoch's last training batch, which holds 1 sample (200 a rank an epoch, "
                               "batch 199)"));
    free(out);
    /* ... which a run of 1 step never reaches; 2 values a sample are enough */
    CU_ASSERT_EQUAL(harness_run(&net, NULL, "--data %s --batch-size 199 --max-steps 1", data_dir), 0);
    /* nor does a run resumed at step 2 that stops at step 3, whose batch is
     * full (its checkpoint made without the batchnorm, which would refuse the
     * run that trained step 2's last batch); one that goes on is refused */
    net.batchnorm_values_local = 0;
    CU_ASSERT_EQUAL(harness_run(&net, NULL, "--data %s --batch-size 199 --epochs 3 --max-steps 2 --save %s", data_dir,
                                tmp_path("ck")), 0);
    net.batchnorm_values_local = 1;
    CU_ASSERT_EQUAL(harness_run(&net, NULL, "--data %s --batch-size 199 --epochs 3 --max-steps 3 --save %s --resume",
                                data_dir, tmp_path("ck")), 0);
    CU_ASSERT_EQUAL(harness_run(&net, &out, "--data %s --batch-size 199 --epochs 3 --max-steps 4 --save %s --resume",
                                data_dir, tmp_path("ck")), 2);
    CU_ASSERT(harness_has(out, "in an epoch's last training batch, which holds 1 sample"));
    CU_ASSERT(!harness_has(out, "; or, as this run resumes")); /* its next batch is that one */
    free(out);
    /* resumed at step 2, a run refused for step 4's batch is told how to stop before it */
    CU_ASSERT_EQUAL(harness_run(&net, &out, "--data %s --batch-size 199 --epochs 3 --max-steps 4 --resume "
                                "%s/checkpoint-tiny-000000002.safetensors", data_dir, tmp_path("ck")), 2);
    CU_ASSERT(harness_has(out, "leaves no batch of one sample; or, as this run resumes after step 2, stop it before that "
                               "batch with --max-steps 3"));
    CU_ASSERT(!harness_has(out, "resuming from ")); /* refused: it did not */
    free(out);
    /* resumed past its last epoch, it trains nothing */
    CU_ASSERT_EQUAL(harness_run(&net, NULL, "--data %s --batch-size 199 --epochs 1 --save %s --resume", data_dir,
                                tmp_path("ck")), 0);
    net.batchnorm_values_local = 2;
    CU_ASSERT_EQUAL(harness_run(&net, NULL, "--data %s --batch-size 1 --max-steps 2", data_dir), 0);
    net.batchnorm_values_local = 0;
    net.batchnorm_values_synced = 1; /* one rank: the same */
    CU_ASSERT_EQUAL(harness_run(&net, &out, "--data %s --batch-size 1", data_dir), 2);
    CU_ASSERT(harness_has(out, "would normalize a single value in a training batch of 1 sample"));
    free(out);
    /* a run of no step (--max-steps 0, as for the initial weights) trains no batch */
    CU_ASSERT_EQUAL(harness_run(&net, NULL, "--data %s --batch-size 1 --max-steps 0", data_dir), 0);
    teardown();
}

static void test_bad_data(void)
{
    setup();
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(default_net(), &out, "--data %s", tmp_path("nowhere")), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: "));
    CU_ASSERT(harness_has(out, "nowhere"));
    free(out);

    /* 14x14 images for a net of 784 inputs, and for one of 1x28x28. */
    CU_ASSERT_EQUAL(harness_run(default_net(), &out, "--data %s", small_dir), 2);
    CU_ASSERT(harness_has(out, "small/train-images-idx3-ubyte: the images are 1x14x14 (channels x rows x columns), "
                               "but the net's input is 784"));
    free(out);
    DdpTrainConfig train = tiny_net_train();
    CU_ASSERT_EQUAL(harness_run(tiny_net(&train, 3, 10), &out, "--data %s", small_dir), 2);
    CU_ASSERT(harness_has(out, "the net's input is 1x28x28"));
    free(out);

    /* Labels 0..9 for a net of 5 classes. */
    CU_ASSERT_EQUAL(harness_run(tiny_net(&train, 1, 5), &out, "--data %s", data_dir), 2);
    CU_ASSERT(harness_has(out, "train-labels-idx1-ubyte: sample 5 has label 5, but the net has 5 classes"));
    free(out);
    teardown();
}

static void test_bad_flags(void)
{
    setup();
    const DdpNet *net = default_net();
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --epoch 3", data_dir), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: unknown option '--epoch'; did you mean '--epochs'?\n"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --batch-size 0", data_dir), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: --batch-size expects a whole number from 1 to 1048576, got '0'"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --resume", data_dir), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: --resume without a PATH takes the newest checkpoint in --save DIR"));
    free(out);
    /* Harmless with one rank. */
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 1 --nproc-per-node 1 --world-size 1 --timeout 5 "
                                "--bucket-cap-mb 4 --no-sync-every 1", data_dir), 0);
    free(out);
    /* A rank already, by flags or a launcher: --nproc-per-node asking for
     * other than this node's ranks, and --max-restarts, would be ignored. */
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 1 --nproc-per-node 2 --world-size 1", data_dir), 2);
    CU_ASSERT(harness_has(out, "tiny_train: error: --nproc-per-node 2 starts that many ranks itself, but "
                               "--rank/--world-size (or --init-method) made this process one rank, one of 1 on this "
                               "node: leave it out\n"));
    free(out);
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 1 --nproc-per-node 4", data_dir), 2);
    CU_ASSERT(harness_has(out, "--nproc-per-node 4 starts that many ranks itself, but torchrun (RANK and WORLD_SIZE "
                               "are set) started this rank, one of 1 on this node: leave it out"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 1 --nproc-per-node 1 --max-restarts 1 --save %s",
                                data_dir, tmp_path("refused")), 2);
    CU_ASSERT(harness_has(out, "--max-restarts restarts the ranks that --nproc-per-node starts, but torchrun (RANK "
                               "and WORLD_SIZE are set) started this rank: leave both out"));
    free(out);
    CU_ASSERT(access(tmp_path("refused"), F_OK) != 0); /* refused before --save's directory was made */
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    /* --rank/--world-size: each command is one rank, so only 1 restates it */
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "1", 1);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 1 --rank 0 --world-size 4 --nproc-per-node 4",
                                data_dir), 2);
    CU_ASSERT(harness_has(out, "--nproc-per-node 4 starts that many ranks itself, but --rank/--world-size (or "
                               "--init-method) made this process one rank, one of 1 on this node: leave it out"));
    free(out);
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    /* A Slurm batch script's own shell (SLURM_PROCID and the job's
     * SLURM_NTASKS, no SLURM_STEP_NUM_TASKS) is no srun task, not rank 0 of 4
     * waiting for 3 others: one process, as with no launcher. */
    unsetenv("SLURM_STEP_NUM_TASKS"); /* a step's, where the tests run in one (srun --pty bash) */
    unsetenv("SLURM_NNODES");
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_JOB_NUM_NODES", "1", 1);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 1", data_dir), 0);
    free(out);
    setenv("SLURM_JOB_NUM_NODES", "2", 1);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 1 --save %s", data_dir, tmp_path("batch")), 2);
    CU_ASSERT(harness_has(out, "this is a Slurm batch script's own shell, not a task srun started, and the job holds "
                               "2 nodes, of which this run would use one"));
    free(out);
    CU_ASSERT(access(tmp_path("batch"), F_OK) != 0);
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_NTASKS");
    unsetenv("SLURM_JOB_NUM_NODES");
    CU_ASSERT_EQUAL(harness_run(net, &out, "--help"), 0);
    CU_ASSERT(harness_has(out, "usage: tiny_train [options]"));
    CU_ASSERT(harness_has(out, "--epochs N"));
    CU_ASSERT(harness_has(out, "(default 3)"));
    free(out);
    teardown();
}

/* --conv-algorithms FILE on a CPU build: FILE is checked at start-up like
 * any input (a bad record, a directory, no such directory: status 2 naming
 * the flag and the path, before training), then neither taken nor written,
 * and the run says so; the training is the run's without it. */
static void test_conv_algorithms_on_cpu(void)
{
    setup();
    const DdpNet *net = default_net();
    char *out = NULL;
    const char *bad = tmp_path("bad");
    harness_write_file(bad, "cudnn=9|device=x\n", 17);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 2 --conv-algorithms %s", data_dir, bad), 2);
    CU_ASSERT(harness_has(out, "error: --conv-algorithms "));
    CU_ASSERT(harness_has(out, "bad: the convs' recorded cuDNN algorithms are not readable"));
    CU_ASSERT(!strstr(out, "epoch 1"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 2 --conv-algorithms %s", data_dir, data_dir), 2);
    CU_ASSERT(harness_has(out, "data: is a directory, not a regular file; name a file"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 2 --conv-algorithms %s", data_dir,
                                tmp_path("none/algos")), 2);
    CU_ASSERT(harness_has(out, "cannot write into"));
    free(out);

    const char *absent = tmp_path("algos");
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 2 --export %s", data_dir, tmp_path("plain.st")), 0);
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 2 --conv-algorithms %s --export %s", data_dir,
                                absent, tmp_path("with.st")), 0);
    CU_ASSERT(harness_has(out, "note: --conv-algorithms: a CPU build runs no cuDNN algorithms; "));
    CU_ASSERT(harness_has(out, "algos is neither taken nor written"));
    CU_ASSERT(access(absent, F_OK) != 0);
    CU_ASSERT(harness_same_tensors(tmp_path("plain.st"), tmp_path("with.st")));
    free(out);
    const char *record = "cudnn=91900|device=NVIDIA H200|workspace=0|0:1.3.1,1.3.1,1.3.1,1.3.1,1.3.1,1.3.1\n";
    harness_write_file(absent, record, strlen(record));
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --max-steps 2 --conv-algorithms %s", data_dir, absent), 0);
    CU_ASSERT(harness_has(out, "algos is neither taken nor written"));
    free(out);
    teardown();
}

/* --eval-only with exported weights gives the test accuracy training gave
 * them, a line per class, and the matrix in the log; it needs weights. */
static void test_eval_only(void)
{
    setup();
    const DdpNet *net = default_net();
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --epochs 2 --log %s --export %s", data_dir,
                                tmp_path("train.jsonl"), tmp_path("w.st")), 0);
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --init %s --log %s", data_dir, tmp_path("w.st"),
                                tmp_path("eval.jsonl")), 0);
    CU_ASSERT(harness_has(out, "the test set only (--eval-only)"));
    CU_ASSERT(harness_has(out, "class  samples  correct  accuracy  most often taken for\n"));
    CU_ASSERT(harness_has(out, "    9  "));
    CU_ASSERT(!strstr(out, "epoch 1/"));
    free(out);
    /* a test set of one sample is one sample */
    char one[4096];
    snprintf(one, sizeof one, "%s", tmp_path("one"));
    mkdir(one, 0755);
    harness_write_set(one, "train", 10, 28, 28, 1);
    harness_write_set(one, "t10k", 1, 28, 28, 2);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --init %s", one, tmp_path("w.st")), 0);
    CU_ASSERT(harness_has(out, "(1 sample)\n"));
    free(out);
    char *train = test_read_file(tmp_path("train.jsonl"), NULL), *eval = test_read_file(tmp_path("eval.jsonl"), NULL);
    CU_ASSERT_FATAL(train && eval);
    char *lines[16];
    int n = split_reports(train, lines, 16);
    const char *record = strstr(eval, "{\"event\": \"eval_only\"");
    CU_ASSERT_FATAL(n == 2 && record);
    CU_ASSERT_EQUAL(json_number(record, "samples"), N_TEST);
    CU_ASSERT_EQUAL(json_number(record, "test_acc"), json_number(lines[1], "test_acc"));
    CU_ASSERT_EQUAL(json_number(record, "test_loss"), json_number(lines[1], "test_loss"));
    /* the matrix's rows hold N_TEST samples in all */
    const char *m = strstr(record, "\"confusion\": [[");
    CU_ASSERT_FATAL(m != NULL);
    double total = 0;
    for (const char *c = m + strlen("\"confusion\": "); *c && *c != '}'; c++)
        if (*c >= '0' && *c <= '9' && (c[-1] == '[' || c[-1] == ' '))
            total += strtod(c, NULL);
    CU_ASSERT_EQUAL(total, N_TEST);
    free(train);
    free(eval);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only", data_dir), 2);
    CU_ASSERT(harness_has(out, "--eval-only evaluates given weights: add --init FILE.safetensors"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --init %s --save %s", data_dir, tmp_path("w.st"),
                                tmp_path("ck")), 2);
    CU_ASSERT(harness_has(out, "an evaluation writes no checkpoint; add --resume"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --init %s --tensorboard %s", data_dir,
                                tmp_path("w.st"), tmp_path("tb")), 2);
    CU_ASSERT(harness_has(out, "--eval-only draws no curves in --tensorboard"));
    free(out);
    /* a training's flags, brought along, which it would pass unread */
    static const char *const training[] = {"--epochs 3", "--lr 0.5", "--max-steps 4", "--eval-every 1",
                                           "--workers 2"};
    for (size_t i = 0; i < sizeof training / sizeof training[0]; i++) {
        CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --init %s %s", data_dir, tmp_path("w.st"),
                                    training[i]), 2);
        char said[128];
        snprintf(said, sizeof said, "--eval-only evaluates the weights given and trains nothing: leave out %.*s",
                 (int)strcspn(training[i], " "), training[i]);
        CU_ASSERT(harness_has(out, said));
        free(out);
    }
    /* a --save directory with no checkpoint: nothing to evaluate (training would start afresh) */
    mkdir(tmp_path("empty"), 0755);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --resume --save %s", data_dir, tmp_path("empty")), 2);
    CU_ASSERT(harness_has(out, "holds no checkpoint of net 'tiny' to evaluate"));
    free(out);
    /* --save DIR is read, not written: the newest of a run still training
     * there (which holds DIR's lock) is evaluated, and a DIR that does not
     * exist is not made */
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --max-steps 2 --save %s", data_dir, tmp_path("ck")), 0);
    char lock_path[4096];
    snprintf(lock_path, sizeof lock_path, "%s/checkpoint-tiny.lock", tmp_path("ck"));
    int lock = open(lock_path, O_RDWR);
    CU_ASSERT_FATAL(lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --resume --save %s", data_dir, tmp_path("ck")), 0);
    CU_ASSERT(harness_has(out, "000000002.safetensors: step 2"));
    free(out);
    close(lock);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --resume --save %s", data_dir, tmp_path("typo")),
                    2);
    CU_ASSERT(harness_has(out, "typo holds no checkpoint of net 'tiny' to evaluate"));
    CU_ASSERT_EQUAL(access(tmp_path("typo"), F_OK), -1);
    free(out);
    /* a stop asked as its third batch of 10 begins: it ends after that
     * batch, with the status of a stop, reporting and exporting nothing; the
     * log says so */
    setenv(DDP_TEST_STOP_AFTER_ENV, "3", 1);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --init %s --batch-size 10 --log %s --export %s",
                                data_dir, tmp_path("w.st"), tmp_path("stopped.jsonl"), tmp_path("not.st")),
                    DDP_EXIT_STOPPED);
    unsetenv(DDP_TEST_STOP_AFTER_ENV);
    CU_ASSERT_EQUAL(access(tmp_path("not.st"), F_OK), -1);
    CU_ASSERT(harness_has(out, "tiny_train: stopped the evaluation on SIGUSR1 after 30 of the 50 test samples: nothing is "
                               "reported of one cut short"));
    CU_ASSERT(!strstr(out ? out : "", "test_acc"));
    free(out);
    char *log = test_read_file(tmp_path("stopped.jsonl"), NULL);
    CU_ASSERT(log && strstr(log, "{\"event\": \"stop\", \"signal\": \"SIGUSR1\"") && !strstr(log, "eval_only"));
    free(log);
    /* one asked as the last batch begins: the evaluation ends as it would have */
    setenv(DDP_TEST_STOP_AFTER_ENV, "5", 1);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --eval-only --init %s --batch-size 10", data_dir,
                                tmp_path("w.st")), 0);
    unsetenv(DDP_TEST_STOP_AFTER_ENV);
    CU_ASSERT(harness_has(out, "(50 samples)"));
    free(out);
    teardown();
}

/* PATH: a NumPy file of N uint8 images of 28 x 28, PIXELS, as np.save
 * writes it (format 1.0: its header padded to a multiple of 64 bytes). */
static void write_npy_images(const char *path, int n, const char *pixels)
{
    char header[128];
    int text = snprintf(header + 10, sizeof header - 10,
                        "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, 28, 28), }", n);
    int padded = (10 + text + 1 + 63) / 64 * 64;
    memcpy(header, "\x93NUMPY\x01\x00", 8);
    header[8] = (char)((padded - 10) & 0xff);
    header[9] = (char)((padded - 10) >> 8);
    memset(header + 10 + text, ' ', (size_t)(padded - 10 - text - 1));
    header[padded - 1] = '\n';
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite(header, 1, (size_t)padded, f);
    if (n)
        fwrite(pixels, 784, (size_t)n, f);
    fclose(f);
}

/* --predict: each input's likeliest classes, in the file's order. The
 * first class of each of the test images, against its label, gives the
 * accuracy --eval-only gives; all ten probabilities sum to 1, largest
 * first; a NumPy array of the same images predicts the same; without --top,
 * 5 classes a line. */
static void test_predict(void)
{
    setup();
    const DdpNet *net = default_net();
    const char *w = tmp_path("w.st"), *images = tmp_path("data/t10k-images-idx3-ubyte");
    CU_ASSERT_EQUAL_FATAL(harness_run(net, NULL, "--data %s --epochs 2 --export %s", data_dir, w), 0);
    CU_ASSERT_EQUAL(harness_run(net, NULL, "--data %s --eval-only --init %s --log %s", data_dir, w,
                                tmp_path("eval.jsonl")), 0);
    char *eval = test_read_file(tmp_path("eval.jsonl"), NULL);
    CU_ASSERT_FATAL(eval != NULL);
    double accuracy = json_number(strstr(eval, "\"eval_only\""), "test_acc");
    free(eval);

    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s --top 10 --json", images, w), 0);
    size_t len = 0;
    unsigned char *labels = (unsigned char *)test_read_file(tmp_path("data/t10k-labels-idx1-ubyte"), &len);
    CU_ASSERT_FATAL(out && labels && len == 8 + N_TEST);
    int lines = 0, right = 0, ordered = 1, sums_to_one = 1;
    for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        int input, first;
        if (sscanf(l, "{\"input\": %d, \"classes\": [%d", &input, &first) != 2 || input != lines)
            continue;
        right += first == labels[8 + input];
        const char *q = strstr(l, "\"probabilities\": [");
        double sum = 0, last = 2;
        for (char *end; q && (q = strpbrk(q, "[,")) != NULL; q = end) {
            double v = strtod(q + 1, &end);
            ordered &= v <= last;
            last = v;
            sum += v;
        }
        sums_to_one &= fabs(sum - 1.0) < 1e-4;
        lines++;
    }
    CU_ASSERT_EQUAL(lines, N_TEST);
    CU_ASSERT_EQUAL((double)right / N_TEST, accuracy);
    CU_ASSERT(ordered && sums_to_one);
    free(out);

    /* the same images as a NumPy uint8 array (N, 28, 28): the same lines */
    size_t image_len = 0;
    char *idx = test_read_file(images, &image_len);
    CU_ASSERT_FATAL(idx && image_len == 16 + (size_t)N_TEST * 784);
    write_npy_images(tmp_path("x.npy"), N_TEST, idx + 16);
    free(idx);
    char *from_idx = NULL, *from_npy = NULL;
    CU_ASSERT_EQUAL(harness_run(net, &from_idx, "--predict %s --init %s", images, w), 0);
    CU_ASSERT_EQUAL(harness_run(net, &from_npy, "--predict %s --init %s", tmp_path("x.npy"), w), 0);
    CU_ASSERT(harness_has(from_idx, "input 0: "));
    CU_ASSERT(harness_has(from_idx, "input 49: "));
    CU_ASSERT_STRING_EQUAL(from_idx, from_npy);
    /* one rank wherever it runs: a Slurm batch script of several nodes too */
    char *from_batch = NULL;
    unsetenv("SLURM_STEP_NUM_TASKS"); /* a step's, where the tests run in one (srun --pty bash) */
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_JOB_NUM_NODES", "2", 1);
    CU_ASSERT_EQUAL(harness_run(net, &from_batch, "--predict %s --init %s", images, w), 0);
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_JOB_NUM_NODES");
    CU_ASSERT(from_batch && strcmp(from_idx, from_batch) == 0);
    free(from_batch);
    /* without --top, 5 classes a line (of the tiny net's 10) */
    int five = 0;
    for (char *save = NULL, *l = strtok_r(from_idx, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        int input, used, pairs = 0, cls;
        double p;
        if (sscanf(l, "input %d: %n", &input, &used) != 1)
            continue;
        for (const char *q = l + used; sscanf(q, "%d %lf%n", &cls, &p, &used) == 2; q += used + (q[used] == ','))
            pairs++;
        five += pairs == 5;
    }
    CU_ASSERT_EQUAL(five, N_TEST);
    free(from_idx);
    free(from_npy);

    /* refusals, with status 2 */
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s", images), 2);
    CU_ASSERT(harness_has(out, "--predict classifies with given weights: add --init FILE.safetensors"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s", tmp_path("none"), w), 2);
    CU_ASSERT(harness_has(out, "not a file"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --top 3", data_dir), 2);
    CU_ASSERT(harness_has(out, "--top says how --predict prints: add --predict FILE"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--data %s --json", data_dir), 2);
    CU_ASSERT(harness_has(out, "--json says how --predict prints: add --predict FILE"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s --eval-only", images, w), 2);
    CU_ASSERT(harness_has(out, "--predict and --eval-only: give one"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s --log %s", images, w, tmp_path("p.jsonl")), 2);
    CU_ASSERT(harness_has(out, "--predict prints its lines and nothing else: leave out --log"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s --conv-algorithms %s", images, w,
                                tmp_path("algos")), 2);
    CU_ASSERT(harness_has(out, "--predict prints its lines and nothing else: leave out --conv-algorithms"));
    free(out);
    /* a training's flags, brought along: --data even where it names nothing */
    static const char *const training[] = {"--data /nonexistent", "--epochs 3", "--seed 7", "--no-augment",
                                           "--timeout 5"};
    for (size_t i = 0; i < sizeof training / sizeof training[0]; i++) {
        CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s %s", images, w, training[i]), 2);
        char said[96];
        snprintf(said, sizeof said, "trains nothing: leave out %.*s", (int)strcspn(training[i], " "), training[i]);
        CU_ASSERT(harness_has(out, "--predict classifies the inputs of its FILE and trains nothing: leave out --"));
        CU_ASSERT(harness_has(out, said));
        free(out);
    }
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s --top 11", images, w), 2);
    CU_ASSERT(harness_has(out, "--top 11: the net has 10 classes, so at most --top 10")); /* --top 10: above */
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s --nproc-per-node 2", images, w), 2);
    CU_ASSERT(harness_has(out, "--predict runs on one rank: leave out --nproc-per-node"));
    free(out);
    write_npy_images(tmp_path("empty.npy"), 0, NULL);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s", tmp_path("empty.npy"), w), 2);
    CU_ASSERT(harness_has(out, "images of shape (0, 28, 28): no data"));
    free(out);
    CU_ASSERT_EQUAL(harness_run(net, &out, "--predict %s --init %s", tmp_path("small/t10k-images-idx3-ubyte"), w), 2);
    CU_ASSERT(harness_has(out, "the images are 1x14x14"));
    free(out);
    free(labels);
    teardown();
}

static void test_nan_loss(void)
{
    setup();
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(default_net(), &out, "--data %s --lr 1e30 --log %s", data_dir,
                                tmp_path("log.jsonl")), 1);
    CU_ASSERT(harness_has(out, "tiny_train: error: loss is "));
    CU_ASSERT(harness_has(out, " at epoch 1 step 10\n"));
    free(out);
    teardown();
}

static void test_image_input(void)
{
    setup();
    DdpTrainConfig train = tiny_net_train();
    char *out = NULL;
    CU_ASSERT_EQUAL(harness_run(tiny_net(&train, 3, 10), &out, "--data %s --epochs 1", data_dir), 0);
    CU_ASSERT(harness_has(out, "epoch 1/1  step 10"));
    free(out);
    teardown();
}

/* ---- the seeded initialisation against PyTorch's --------------------------------- */

static void test_init_matches_torch(void)
{
    const char *py = test_python_with_torch();
    if (!py) {
        fprintf(stderr, "\n(skipped: no python3 with torch)");
        return;
    }
    setup();
    /* Conv2d(3, 8, 5), BatchNorm2d(8), Linear(200, 10), built in that order after manual_seed(3). */
    static const DdpParamInfo params[] = {
        {.name = "conv.weight", .ndim = 4, .shape = {8, 3, 5, 5}, .numel = 600, .trainable = 1, .offset = 0,
         .init = DDP_INIT_KAIMING_UNIFORM, .fan_in = 75},
        {.name = "conv.bias", .ndim = 1, .shape = {8}, .numel = 8, .trainable = 1, .offset = 600,
         .init = DDP_INIT_KAIMING_UNIFORM, .fan_in = 75},
        {.name = "bn.weight", .ndim = 1, .shape = {8}, .numel = 8, .trainable = 1, .offset = 608,
         .init = DDP_INIT_ONES},
        {.name = "bn.bias", .ndim = 1, .shape = {8}, .numel = 8, .trainable = 1, .offset = 616,
         .init = DDP_INIT_ZEROS},
        {.name = "fc.weight", .ndim = 2, .shape = {10, 200}, .numel = 2000, .trainable = 1, .offset = 624,
         .init = DDP_INIT_KAIMING_UNIFORM, .fan_in = 200},
        {.name = "fc.bias", .ndim = 1, .shape = {10}, .numel = 10, .trainable = 1, .offset = 2624,
         .init = DDP_INIT_KAIMING_UNIFORM, .fan_in = 200},
    };
    DdpNet net = {.name = "t", .params = params, .n_params = 6, .n_param_floats = 2634};
    static float mine[2634];
    int64_t counts[6];
    CU_ASSERT_EQUAL_FATAL(ddp_weights_init(&net, 3, mine, NULL, counts), DDP_OK);

    const char *script =
        "import torch\n"
        "torch.manual_seed(3)\n"
        "m = [torch.nn.Conv2d(3, 8, 5), torch.nn.BatchNorm2d(8), torch.nn.Linear(200, 10)]\n"
        "vals = [v for x in m for p in x.parameters() for v in p.detach().flatten().tolist()]\n"
        "print(' '.join(float(v).hex() for v in vals))\n";
    harness_write_file(tmp_path("init.py"), script, strlen(script));
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s %s", py, tmp_path("init.py"));
    CU_ASSERT_EQUAL_FATAL(test_run(cmd, &out), 0);
    char *p = out;
    int n = 0, differ = 0;
    for (; n < 2634; n++) {
        char *end;
        double v = strtod(p, &end);
        if (end == p)
            break;
        p = end;
        if ((float)v != mine[n] && differ++ < 3)
            fprintf(stderr, "\nelement %d: torch %.9g, ddpc %.9g", n, v, (double)mine[n]);
    }
    CU_ASSERT_EQUAL(n, 2634);
    CU_ASSERT_EQUAL(differ, 0);
    free(out);
    teardown();
}

void suite_trainer(void)
{
    static const TestCase cases[] = {
        {"trains: loss falls, accuracy above chance; lines and log", test_trains},
        {"--log -: the JSON lines on stdout, the start record first", test_log_to_stdout},
        {"--max-steps stops at a global step; flags override the net", test_max_steps},
        {"--eval-every adds evaluations between epochs", test_eval_every},
        {"--tensorboard: TensorBoard reads what --log holds; a resumed run continues", test_tensorboard},
        {"a resumed run reports the losses of the run that never stopped, bit for bit", test_resumed_reports},
        {"a report left out is made once, where a stop left it out", test_left_out_reported_once},
        {"--epochs may grow on resume: trains on into the new epochs, as one run would", test_resume_more_epochs},
        {"--max-steps 0 --export writes the seeded initial weights", test_export_initial},
        {"--init from exported initial weights reproduces a run bit for bit", test_init_reproduces},
        {"--init from an exported epoch continues bit for bit", test_init_continues},
        {"num_batches_tracked counts batches, K a step under --no-sync-every K, through --init and --resume",
         test_batch_counts},
        {"the same seed gives the same weights, another seed others", test_deterministic},
        {"bad --init files and --export paths: status 2, named", test_bad_init},
        {"bad data: missing, wrong image shape, too many classes", test_bad_data},
        {"a seed whose sum with an epoch passes 2^64 - 1: status 2 where the run gets there", test_seed_past_the_top},
        {"a batch in which a batchnorm would see one value per channel: status 2 before training",
         test_batchnorm_single_value},
        {"bad flags: status 2 and the message; --help", test_bad_flags},
        {"--conv-algorithms on a CPU build: checked at start-up, neither taken nor written", test_conv_algorithms_on_cpu},
        {"--eval-only: training's test accuracy again, a line per class, the matrix in the log", test_eval_only},
        {"--predict: top classes per input, --eval-only's accuracy from them, IDX and NumPy alike; refusals",
         test_predict},
        {"a NaN loss stops the run with status 1", test_nan_loss},
        {"a 1x28x28 input trains on 28x28 images", test_image_input},
        {"the seeded initialisation is PyTorch's, bit for bit", test_init_matches_torch},
        {NULL, NULL},
    };
    test_add_suite("trainer [python]", cases);
}
