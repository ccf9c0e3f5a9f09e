/*
 * Tests of the GPU kit (make gpu-kit, .gpu/) and of tests/gpu/run.sh
 * --dry-run, which checks it without a GPU: the kit a GPU node receives must
 * pass the dry run, and a kit that would fail there must fail it here, each
 * break named by its own check.
 *
 * The kit is built (make gpu-kit, a minute or two on two cores) when .gpu/
 * is missing or was built from other sources (tests/gpu/digest.sh), so a
 * clean clone tests what it would ship. Skipped, with a note, where nvcc,
 * cuDNN or NCCL are missing (make gpu-kit says so) or Fashion-MNIST is.
 * The broken kits are copies, in a directory of their own.
 *
 * The kit's compare tool (tests/gpu/compare.c) is tested on its own, without
 * the kit: built here as kit.sh builds it, on weights made up to sit on
 * either side of each of its rules. So is run.sh's timing part
 * (tests/gpu/timing.sh), through tests/gpu/timing_stubs.sh, whose stub
 * programs print made-up rates.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"  // ddp_safetensors_write: the made-up weights
#include "testutil.h"     // test_run, test_make_tmpdir, test_tmp_path

static int kit_state; /* 0: not tried; 1: ready; -1: cannot be built here (said why) */

/* Whether .gpu/ is built from these sources, building it if not. */
static int kit_ready(void)
{
    if (kit_state)
        return kit_state > 0;
    kit_state = -1;
    if (test_run("test -d /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs("\n    (skipped: no Fashion-MNIST; make deps installs it)", stderr);
        return 0;
    }
    if (test_run("test \"$(sed -n 's/^digest //p' .gpu/kit.txt 2>/dev/null)\" = \"$(bash tests/gpu/digest.sh)\"",
                 NULL) != 0) {
        char *out = NULL;
        int rc = test_run("make -s gpu-kit 2>&1", &out);
        if (rc != 0 && out && strstr(out, "make gpu-kit needs")) {
            fputs("\n    (skipped: make gpu-kit needs nvcc, cuDNN and NCCL)", stderr);
            free(out);
            return 0;
        }
        if (rc != 0)
            fprintf(stderr, "\n$ make gpu-kit\nexit %d:\n%s", rc, out ? out : "");
        free(out);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
    }
    kit_state = 1;
    return 1;
}

/* Runs the dry run on KIT (NULL: .gpu/) with its output folder in DIR;
 * returns its exit status and, in *SUMMARY, its summary.txt (malloc'd).
 * Shows the output of a failure unless EXPECT_FAILURE. */
static int dry_run(const char *kit, const char *dir, char **summary, int expect_failure)
{
    char command[1024];
    snprintf(command, sizeof command, "bash tests/gpu/run.sh --dry-run --out %s/out%s%s", dir, kit ? " --kit " : "",
             kit ? kit : "");
    char *out = NULL;
    int rc = test_run(command, &out);
    *summary = test_read_file(test_tmp_path(dir, "out/summary.txt"), NULL);
    if (!*summary)
        *summary = strdup("");
    if (rc != 0 && !expect_failure)
        fprintf(stderr, "\n$ %s\nexit %d:\n%s", command, rc, out ? out : "");
    free(out);
    char rm[512];
    snprintf(rm, sizeof rm, "rm -rf %s/out", dir);
    test_run(rm, NULL);
    return rc;
}

static void test_kit_passes_dry_run(void)
{
    if (!kit_ready())
        return;
    char dir[64], *summary = NULL;
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddp_gpukit_XXXXXX");
    CU_ASSERT_EQUAL(dry_run(NULL, dir, &summary, 0), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(summary, " 0 failed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(summary, "OK       kit binaries need no MPI"));
    CU_ASSERT_PTR_NOT_NULL(strstr(summary, "OK       fallback: mnist rebuilt here"));
    CU_ASSERT_PTR_NOT_NULL(strstr(summary, "OK       the channels-last sources build here"));
    CU_ASSERT_PTR_NULL(strstr(summary, "FAILED"));
    free(summary);
    test_remove_tmpdir(dir);
}

/* A copy of the kit in DIR/kit, broken by BREAK_IT (a shell command run in
 * the copy); the dry run must fail, the summary saying "FAILED   CHECK" and,
 * unless NULL, DETAIL. */
static void expect_broken(const char *dir, const char *break_it, const char *check, const char *detail)
{
    char command[2048];
    snprintf(command, sizeof command, "rm -rf %s/kit && cp -a .gpu %s/kit && cd %s/kit && %s", dir, dir, dir, break_it);
    CU_ASSERT_EQUAL_FATAL(test_run(command, NULL), 0);
    char *summary = NULL;
    char expected[256];
    snprintf(expected, sizeof expected, "FAILED   %s", check);
    int rc = dry_run(test_tmp_path(dir, "kit"), dir, &summary, 1);
    CU_ASSERT_NOT_EQUAL(rc, 0);
    const char *line = strstr(summary, expected);
    const char *end = line ? strchr(line, '\n') : NULL;
    if (!line || (detail && (!strstr(line, detail) || (end && strstr(line, detail) > end)))) {
        fprintf(stderr, "\nafter %s: no '%s'%s%s in the summary:\n%s", break_it, expected, detail ? " naming " : "",
                detail ? detail : "", summary);
        CU_FAIL("the break is not named by its check");
    }
    free(summary);
}

static void test_broken_kits_fail_dry_run(void)
{
    if (!kit_ready())
        return;
    char dir[64], *summary = NULL;
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddp_gpukit_XXXXXX");
    /* the intact copy passes, elsewhere than where it was built */
    char command[512];
    snprintf(command, sizeof command, "cp -a .gpu %s/kit", dir);
    CU_ASSERT_EQUAL_FATAL(test_run(command, NULL), 0);
    CU_ASSERT_EQUAL(dry_run(test_tmp_path(dir, "kit"), dir, &summary, 0), 0);
    free(summary);

    /* a program that needs libmpi (a stub of that name) */
    char evil[1024];
    snprintf(evil, sizeof evil,
             "echo 'int MPI_Init(int *c, char ***v) { (void)c; (void)v; return 0; }' > %s/mpi.c && "
             "cc -shared -fPIC -Wl,-soname,libmpi.so.40 -o %s/libmpi.so.40 %s/mpi.c && "
             "echo 'int MPI_Init(int *, char ***); int main(int c, char **v) { return MPI_Init(&c, &v); }' > %s/evil.c && "
             "cc -o bin/evil %s/evil.c -L%s -l:libmpi.so.40",
             dir, dir, dir, dir, dir, dir);
    expect_broken(dir, evil, "kit binaries need no MPI", "bin/evil needs libmpi.so.40");
    /* over 48 MiB (a sparse file: its size is what counts) */
    expect_broken(dir, "truncate -s 40M data/extra && truncate -s 9M gpu/extra", "kit size", NULL);
    /* a program missing */
    expect_broken(dir, "rm gpu/resnet", "kit complete", "missing: gpu/resnet");
    /* the three-channel net's data */
    expect_broken(dir, "rm data_channels_last/t10k-labels-idx1-ubyte.gz", "kit complete",
                  "missing: data_channels_last/t10k-labels-idx1-ubyte.gz");
    /* its training labels the test set's: 128 labels for 512 images */
    expect_broken(dir, "cd data_channels_last && cp t10k-labels-idx1-ubyte.gz train-labels-idx1-ubyte.gz",
                  "a net's own data and references read",
                  "data_channels_last/train: images header 0000080400000200, labels count 00000080");
    /* a channels-last source that is not (--layout did not take) */
    expect_broken(dir, "sed -i '/stored channels-last (NHWC)/d' gpu/mnist_nhwc.cu", "kit complete",
                  "missing: gpu/mnist_nhwc.cu (channels-last");
    /* built from other sources */
    expect_broken(dir, "sed -i 's/^digest .*/digest 0000000000000000/' kit.txt", "kit built from these sources", NULL);
    /* a program whose recorded build line is gone: the fallback cannot rebuild it */
    expect_broken(dir, "sed -i '/^\\/\\/ ddpc-build: /d' gpu/mnist.cu", "fallback: mnist rebuilt here", NULL);
    test_remove_tmpdir(dir);
}

/* ---- tests/gpu/compare.c ------------------------------------------------------ */

/* The made-up net: an 18,432-element conv weight whose update is up to 2e-5
 * an element (as fashion_resnet's convs after one step), a batchnorm bias of 64
 * whose update, 1e-7 to 3e-7, hardly counts in the global norms, a weight
 * the step left alone, and a batchnorm's step count. */
enum { CONV = 32 * 64 * 3 * 3, BIAS = 64, FROZEN = 64 };
typedef struct {
    float conv[CONV], bias[BIAS], frozen[FROZEN];
    int64_t count;
} MadeUp;

static void made_up_initial(MadeUp *w)
{
    for (int i = 0; i < CONV; i++) /* |w| in [0.05, 0.1) */
        w->conv[i] = (i % 2 ? -1.0f : 1.0f) * (0.05f + 0.05f * (float)((i * 7919) % 1000) / 1000.0f);
    for (int i = 0; i < BIAS; i++)
        w->bias[i] = 0.01f + 0.002f * (float)(i % 4);
    for (int i = 0; i < FROZEN; i++) /* in [0.6, 0.9): one ulp (2^-24) is under 2^-23 of each */
        w->frozen[i] = 0.6f + 0.3f * (float)i / FROZEN;
    w->count = 0;
}

/* The CPU's step: W0 plus an update. */
static void made_up_step(const MadeUp *w0, MadeUp *w)
{
    *w = *w0;
    for (int i = 0; i < CONV; i++)
        w->conv[i] += 2e-5f * (float)((i * 37) % 21 - 10) / 10.0f;
    for (int i = 0; i < BIAS; i++)
        w->bias[i] += 1e-7f * (float)(1 + i % 3);
    w->count = 1;
}

static void write_made_up(const char *dir, const char *name, const MadeUp *w)
{
    DdpTensor t[4] = {
        {.name = "conv.weight", .dtype = DDP_DTYPE_F32, .ndim = 4, .shape = {32, 64, 3, 3}, .data = w->conv},
        {.name = "bn.bias", .dtype = DDP_DTYPE_F32, .ndim = 1, .shape = {BIAS}, .data = w->bias},
        {.name = "frozen.weight", .dtype = DDP_DTYPE_F32, .ndim = 1, .shape = {FROZEN}, .data = w->frozen},
        {.name = "bn.num_batches_tracked", .dtype = DDP_DTYPE_I64, .ndim = 0, .data = &w->count},
    };
    CU_ASSERT_EQUAL_FATAL(ddp_safetensors_write(test_tmp_path(dir, name), t, 4, NULL, 0), DDP_OK);
}

/* Runs DIR/compare w0 cpu NAME 1e-3 (the FP32 tolerance); its status, and
 * its output in *OUT (malloc'd). */
static int run_compare(const char *dir, const char *name, char **out)
{
    char command[1024];
    snprintf(command, sizeof command, "%s/compare %s/w0 %s/cpu %s/%s 1e-3", dir, dir, dir, dir, name);
    *out = NULL;
    int rc = test_run(command, out);
    if (!*out)
        *out = strdup("");
    return rc;
}

/* Whether OUT's line starting with NAME (a tensor's, or "all float
 * tensors") is marked over its limit; -1 if there is no such line. */
static int over(const char *out, const char *name)
{
    size_t len = strlen(name);
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, name, len) != 0 || line[len] != ' ')
            continue;
        const char *end = strchr(line, '\n'), *mark = strstr(line, "<-- over");
        return mark && (!end || mark < end);
    }
    return -1;
}

/* Runs compare on GPU (written to DIR/NAME): EXPECT its exit status, and
 * each tensor of OVER (NULL-ended; "all float tensors" for the global rule)
 * marked over its limit and each of UNDER not. */
static void expect_compare(const char *dir, const char *name, const MadeUp *gpu, int expect, const char *const *over_,
                           const char *const *under)
{
    if (gpu)
        write_made_up(dir, name, gpu);
    char *out;
    int rc = run_compare(dir, name, &out);
    int good = rc == expect;
    for (; over_ && *over_; over_++)
        good &= over(out, *over_) == 1;
    for (; under && *under; under++)
        good &= over(out, *under) == 0;
    if (!good)
        fprintf(stderr, "\ncompare on %s: exit %d (expected %d):\n%s", name, rc, expect, out);
    CU_ASSERT(good);
    free(out);
}

static void test_compare_rules(void)
{
    if (test_run("test -f build/libddprt.a && command -v cc", NULL) != 0) {
        fputs("\n    (skipped: no build/libddprt.a or cc)", stderr);
        return;
    }
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddp_compare_XXXXXX");
    char build[1024], *out = NULL;
    snprintf(build, sizeof build,
             "cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Iruntime tests/gpu/compare.c -o %s/compare "
             "build/libddprt.a -lz -lm -fopenmp",
             dir);
    int rc = test_run(build, &out);
    if (rc != 0)
        fprintf(stderr, "\n$ %s\nexit %d:\n%s", build, rc, out ? out : "");
    free(out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);

    static MadeUp w0, cpu, gpu;
    made_up_initial(&w0);
    made_up_step(&w0, &cpu);
    write_made_up(dir, "w0", &w0);
    write_made_up(dir, "cpu", &cpu);
    static const char *const all[] = {"all float tensors", NULL};
    static const char *const none_over[] = {"conv.weight", "bn.bias", "frozen.weight", "all float tensors", NULL};

    /* the same weights */
    expect_compare(dir, "cpu", NULL, 0, NULL, none_over);
    /* a ReLU flip's trace: one element of the conv 3e-7 off, 1.5e-2 of the
     * largest update (over 1e-3 element by element), ~2e-4 of its norm */
    gpu = cpu;
    gpu.conv[1000] += 3e-7f;
    expect_compare(dir, "flip", &gpu, 0, NULL, none_over);
    /* one float32 rounding of each weight the step left alone (one ulp,
     * 2^-24 of [0.6, 0.9)): within the ulp term, though the update is 0 */
    gpu = cpu;
    for (int i = 0; i < FROZEN; i++)
        gpu.frozen[i] = nextafterf(gpu.frozen[i], 1.0f);
    expect_compare(dir, "ulp", &gpu, 0, NULL, none_over);
    /* three ulps: over it */
    for (int i = 0; i < FROZEN; i++)
        gpu.frozen[i] = nextafterf(nextafterf(gpu.frozen[i], 1.0f), 1.0f);
    static const char *const frozen[] = {"frozen.weight", NULL};
    expect_compare(dir, "ulps", &gpu, 1, frozen, NULL);
    /* a broken kernel in a small tensor: every element of the bias off by
     * half its update. Its share of the global norm is under the global
     * limit (~1/3 of it): only the tensor's own limit catches it */
    gpu = cpu;
    for (int i = 0; i < BIAS; i++)
        gpu.bias[i] += 0.5f * (cpu.bias[i] - w0.bias[i]);
    static const char *const bias[] = {"bn.bias", NULL};
    expect_compare(dir, "half", &gpu, 1, bias, all);
    /* the same off by 5e-2 of its update: over the tensor's limit (1e-2,
     * 1.8e-2 with the ulp term of so small an update), under ten times it */
    gpu = cpu;
    for (int i = 0; i < BIAS; i++)
        gpu.bias[i] += 0.05f * (cpu.bias[i] - w0.bias[i]);
    expect_compare(dir, "twentieth", &gpu, 1, bias, all);
    /* every element of the conv off by 6e-3 of its update: under the
     * tensor's limit (1e-2, a little more with the ulp term), ~3 times over
     * the global one (1e-3, plus the ulp term's ~0.9e-3 here) */
    gpu = cpu;
    for (int i = 0; i < CONV; i++)
        gpu.conv[i] += 6e-3f * (cpu.conv[i] - w0.conv[i]);
    static const char *const conv[] = {"conv.weight", NULL};
    expect_compare(dir, "spread", &gpu, 1, all, conv);
    /* a step count that differs */
    gpu = cpu;
    gpu.count = 2;
    expect_compare(dir, "count", &gpu, 1, NULL, none_over);
    CU_ASSERT_EQUAL(run_compare(dir, "count", &out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "bn.num_batches_tracked       DIFFERENT"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "compare: FAILED worst-tensor "));
    free(out);
    /* a file that is not there */
    expect_compare(dir, "missing", NULL, 2, NULL, NULL);
    test_remove_tmpdir(dir);
}

/* Runs tests/gpu/timing_stubs.sh ARGS; its output (malloc'd), or NULL with
 * the output shown where it failed. */
static char *timing_stubs(const char *args)
{
    char command[256], *out = NULL;
    snprintf(command, sizeof command, "bash tests/gpu/timing_stubs.sh %s 2>&1", args);
    int rc = test_run(command, &out);
    if (rc != 0)
        fprintf(stderr, "\n$ %s\nexit %d:\n%s", command, rc, out ? out : "");
    CU_ASSERT_EQUAL(rc, 0);
    return out;
}

/* Each of LINES (up to a NULL or the 4th) must be one of OUT's lines, whole. */
static void expect_lines(const char *out, const char *const lines[4])
{
    for (const char *const *end = lines + 4; lines < end && *lines; lines++) {
        const char *at = out;
        size_t n = strlen(*lines);
        while ((at = strstr(at, *lines)) && ((at != out && at[-1] != '\n') || (at[n] != '\n' && at[n] != '\0')))
            at++;
        if (!at) {
            fprintf(stderr, "\nno line\n  %s\nin:\n%s", *lines, out);
            CU_FAIL("a line of timing.sh is not as expected");
        }
    }
}

/* timing.sh's arithmetic and bookkeeping, on the stubs' made-up rates
 * (timing_stubs.sh lists them, each mode's its own): each round's line; the
 * medians of three rounds (ddpc's fp32 120000, 300000, 95000: not the mean,
 * the last or a text sort's) and of two (the middle two's mean); the best
 * PyTorch of each precision, each candidate the best somewhere (eager FP32
 * with cudnn.benchmark or plain FP32's median; reduce-overhead, compiled
 * or eager), and the ratios; every run's arguments and environment its
 * mode's (the stubs fail a run otherwise); a compile mode failing (one
 * SKIPPED line, the other mode still run); no PyTorch, or its probe out of
 * time (each said as such); time running out
 * (SKIPPED runs, then one line ending the rounds, the medians of the rounds
 * that ran); ncu's table of a CSV. */
static void test_timing_lines(void)
{
    static const struct {
        const char *args;
        const char *const lines[4];
        const char *counted; /* a line start that must occur exactly once, or NULL */
    } cases[] = {
        {"3",
         {"TIMING  round 2/3  resnet b64  samples/s: ddpc fp32 300000, tf32 180000, bf16 160000, fp32 timed algorithms "
          "400000, fp32 nondeterministic 200000, fp32 without CUDA graph 110000; torch eager 50000 (tf32 convs), fp32 "
          "70000, fp32 cudnn.benchmark 45000",
          "TIMING  median of 3 rounds  mnist b64  samples/s: ddpc fp32 120000, tf32 180000, bf16 160000, fp32 timed "
          "algorithms 400000, fp32 nondeterministic 200000, fp32 without CUDA graph 110000; torch eager 50000 (tf32 "
          "convs), fp32 40000, fp32 cudnn.benchmark 45000; compiled (one run) 60000, reduce-overhead 75000",
          "TIMING  ratios  mnist b64: FP32 against the best PyTorch FP32, 45000 (eager FP32 cudnn.benchmark): ddpc "
          "2.67, timed algorithms 8.89, nondeterministic 4.44; tf32 against the best PyTorch at its defaults (TF32 "
          "convs), 75000 (compiled reduce-overhead): 2.40, against eager 3.60",
          "  conv1_forward(int, const float *)                                          2       15.0      7.50"},
         "ncu: resnet.net, kernel launches 1001-1300 of 30 steps"},
        {"2",
         {"TIMING  ratios  resnet b64: FP32 against the best PyTorch FP32, 55000 (eager FP32): ddpc 3.82, timed "
          "algorithms 7.27, nondeterministic 3.64; tf32 against the best PyTorch at its defaults (TF32 convs), 75000 "
          "(compiled reduce-overhead): 2.40, against eager 3.60",
          "  sgemm_nn                                                                   1        2.5      2.50"},
         NULL},
        {"1 fail-compile=reduce-overhead",
         {"TIMING  ratios  mnist b512: FP32 against the best PyTorch FP32, 45000 (eager FP32 cudnn.benchmark): ddpc "
          "2.67, timed algorithms 8.89, nondeterministic 4.44; tf32 against the best PyTorch at its defaults (TF32 "
          "convs), 60000 (compiled): 3.00, against eager 3.60"},
         "SKIPPED  timing: PyTorch compiled (reduce-overhead)  (torch.compile on mnist.net, batch 64: stub: no "
         "reduce-overhead here)"},
        {"1 fail-compile=default", /* the one mode's failure ends that mode alone */
         {"TIMING  median of 1 round  resnet b64  samples/s: ddpc fp32 120000, tf32 180000, bf16 160000, fp32 timed "
          "algorithms 400000, fp32 nondeterministic 200000, fp32 without CUDA graph 110000; torch eager 50000 (tf32 "
          "convs), fp32 40000, fp32 cudnn.benchmark 45000; compiled (one run) ?, reduce-overhead 75000"},
         "SKIPPED  timing: PyTorch compiled (default)"},
        {"1 no-torch",
         {"TIMING  ratios  mnist b512: FP32 against the best PyTorch FP32, ? (none): ddpc ?, timed algorithms ?, "
          "nondeterministic ?; tf32 against the best PyTorch at its defaults (TF32 convs), ? (none): ?, against eager ?"},
         "SKIPPED  timing: PyTorch  (no python3 with torch, numpy and CUDA here: stub: no torch)"},
        {"1 torch-timeout",
         {"TIMING  median of 1 round  resnet b64  samples/s: ddpc fp32 120000, tf32 180000, bf16 160000, fp32 timed "
          "algorithms 400000, fp32 nondeterministic 200000, fp32 without CUDA graph 110000; torch eager ? (tf32 "
          "convs), fp32 ?, fp32 cudnn.benchmark ?; compiled (one run) ?, reduce-overhead ?"},
         "SKIPPED  timing: PyTorch  (its probe ran out of time: stub: no torch)"},
        {"3 limit=120", /* each stubbed run 10 s: mnist b64's nine runs, b512's first three, then no time */
         {"SKIPPED  timing: ddpc mnist.net, batch 512, bench, 2 epochs on the GPU (round 1)  (out of time: run.sh: no "
          "time left for this step)",
          "TIMING  ratios  mnist b64: FP32 against the best PyTorch FP32, 45000 (eager FP32 cudnn.benchmark): ddpc "
          "2.67, timed algorithms 8.89, nondeterministic 4.44; tf32 against the best PyTorch at its defaults (TF32 "
          "convs), 50000 (eager): 3.60, against eager 3.60",
          "TIMING  median of 0 rounds  resnet b64  samples/s: ddpc fp32 ?, tf32 ?, bf16 ?, fp32 timed algorithms ?, "
          "fp32 nondeterministic ?, fp32 without CUDA graph ?; torch eager ? (tf32 convs), fp32 ?, fp32 cudnn.benchmark "
          "?; compiled (one run) ?, reduce-overhead ?"},
         "SKIPPED  timing: round "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out = timing_stubs(cases[i].args);
        if (!out)
            continue;
        expect_lines(out, cases[i].lines);
        if (cases[i].counted) {
            int n = 0;
            for (const char *at = out; (at = strstr(at, cases[i].counted)); at++)
                n += at == out || at[-1] == '\n';
            if (n != 1)
                fprintf(stderr, "\n%s: %d lines starting '%s', not 1:\n%s", cases[i].args, n, cases[i].counted, out);
            CU_ASSERT_EQUAL(n, 1);
        }
        /* a run whose arguments or environment are not its mode's is FAILED */
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "0 passed, 0 failed, "));
        free(out);
    }
}

void suite_gpu_kit(void)
{
    static const TestCase cases[] = {
        {"make gpu-kit's .gpu/ passes tests/gpu/run.sh --dry-run", test_kit_passes_dry_run},
        {"a kit with a libmpi program, over 48 MiB, incomplete or stale fails the dry run", test_broken_kits_fail_dry_run},
        {"the kit's compare: a ReLU flip's trace and one ulp pass; a tensor or all tensors over their limit fail",
         test_compare_rules},
        {"run.sh's timing (timing.sh, stub programs): each round's line, the medians, the best PyTorch, the ratios",
         test_timing_lines},
        {NULL, NULL},
    };
    test_add_suite("gpu_kit [bash, nvcc]", cases);
}
