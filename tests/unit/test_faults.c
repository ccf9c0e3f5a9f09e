/*
 * The fault suite, end to end with generated programs (tests/fault/):
 *  - stopped and resumed = uninterrupted, bit for bit, for real nets (AdamW
 *    with dropout, batchnorm with Nesterov momentum), on 1 and 2 ranks;
 *  - one of two ranks killed (SIGKILL) or frozen (SIGSTOP, a silent hang):
 *    the other ends non-zero within its --timeout, saying why; a NaN loss
 *    ends both;
 *  - truncated data and a damaged --init file: status 2 and the file named;
 *    a batch too big for memory: status 2 at start-up, not a swap storm.
 *  - checkpoints never worse than what they replace (tests/fault/
 *    checkpoint_guard.sh): a run going NaN with --save-every 1 keeps its good
 *    checkpoints (on 1 and 2 ranks), mnist and mlp share a --save directory,
 *    a forgotten --resume is refused on 1 and 2 ranks.
 *  - ranks given different --eval-every, --data or --save (mpirun's MPMD
 *    form): every rank stops at start-up with status 2, naming the flag and
 *    both values, instead of a crash or a timeout;
 *  - a rank killed under --nproc-per-node, a launcher and a single rank
 *    given two signals together, and a second Ctrl-C to a rank whose peer
 *    hangs: README's words and status 1 (tests/fault/signal_faults.sh);
 *  - --predict killed part way: the lines it printed are whole; a reader of
 *    the output gone (`| head -1`): training goes on to its end;
 *  - --backend nccl on a CPU build with one rank, --lr 1e39, and
 *    OMP_NUM_THREADS=100000: status 2 with the cause named.
 * The kill -9 during checkpointing and damaged checkpoints are in
 * test_checkpoint.c, with the tiny net, where they can be repeated cheaply.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int have(const char *command) { return test_run(command, NULL) == 0; }

static int ready(int needs_mpirun)
{
    if (!have("test -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
        fputs("\n    (skipped: no Fashion-MNIST; make deps installs it)", stderr);
        return 0;
    }
    if (needs_mpirun && !have("command -v mpirun >/dev/null")) {
        fputs("\n    (skipped: no mpirun; make deps installs it)", stderr);
        return 0;
    }
    return 1;
}

/* Runs COMMAND (a tests/fault script and its arguments) with ddpc and
 * python set as make test sets them; its output in *OUT. */
static int run_script(const char *command, char **out)
{
    char *cmd;
    const char *py = test_python_with_torch() ? test_python_with_torch() : "/usr/bin/python3";
    CU_ASSERT_FATAL(asprintf(&cmd, "OMP_NUM_THREADS=1 DDPC=%s PYTHON=%s %s 2>&1", test_ddpc(), py, command) > 0);
    int rc = test_run(cmd, out);
    free(cmd);
    return rc;
}

static void resumed(const char *net, int steps, int stop, int ranks)
{
    char cmd[256], *out = NULL;
    snprintf(cmd, sizeof cmd, "tests/fault/resume.sh %s %d %d %d", net, steps, stop, ranks);
    int rc = run_script(cmd, &out);
    CU_ASSERT_EQUAL(rc, 0);
    const char *verdict = out ? strstr(out, "resume: ") : NULL;
    CU_ASSERT_PTR_NOT_NULL(verdict && strstr(verdict, "resume: identical"));
    fprintf(stderr, "\n    %.*s", verdict ? (int)strcspn(verdict, "\n") : 0, verdict ? verdict : "");
    if (rc != 0)
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

static void test_resume_real_nets(void)
{
    if (!ready(1))
        return;
    /* 1024 samples in batches of 16: 64 steps an epoch on one rank, 32 on
     * two; each resumed part crosses an epoch boundary (a reshuffle) */
    resumed("examples/mlp.net", 50, 23, 2);
    resumed("examples/resnet.net", 40, 19, 2);
    resumed("examples/mnist.net", 75, 45, 1);
}

/* --max-restarts (tests/fault/restarts.sh): rank 1 of two killed twice; with
 * 2 restarts the run ends as one never killed (though its file was replaced
 * before the second), with 1 it gives up; bad
 * input and a stop asked for (SIGTERM: status 75) are not restarted; mpirun
 * killed: its ranks too, and the restart ends as the reference; a SIGTERM
 * as mpirun starts stops the run (75). */
static void test_restarts(void)
{
    if (!ready(1))
        return;
    char *out = NULL;
    int rc = run_script("tests/fault/restarts.sh examples/mlp.net 200", &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--max-restarts 2, the file replaced before the second: finished, "
                                              "identical to the reference"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--max-restarts 1: gave up after one restart"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "bad --data under --max-restarts 2: status 2, not restarted"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "SIGTERM under --max-restarts 2: status 75, not restarted"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "mpirun killed, --max-restarts 1: finished, identical to the reference"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "SIGTERM as mpirun starts: status 75"));
    test_show_lines(out);
    free(out);
}

/* A stop asked for (tests/fault/graceful_stop.sh): one process by SIGTERM,
 * one by SIGHUP, --nproc-per-node 2 by SIGINT, the user's mpirun by SIGUSR1, rank 1 of two
 * alone by SIGUSR1, and by a SIGTERM not from its launcher; each exits 75
 * with a checkpoint and the command that resumes it, which ends bit for bit
 * as the run never stopped. Without --save, one process by SIGTERM: still
 * 75, saying nothing was kept. */
static void test_graceful_stop(void)
{
    if (!ready(1))
        return;
    static const char *const modes[] = {"single", "hup", "nproc", "mpirun", "rank1", "term1"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char cmd[96], *out = NULL;
        snprintf(cmd, sizeof cmd, "tests/fault/graceful_stop.sh %s", modes[i]);
        CU_ASSERT_EQUAL(run_script(cmd, &out), 0);
        char verdict[128];
        snprintf(verdict, sizeof verdict, "graceful_stop: %s: ends bit for bit as the run never stopped: ok", modes[i]);
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, verdict));
        test_show_lines(out);
        free(out);
    }
    char *out = NULL;
    CU_ASSERT_EQUAL(run_script("tests/fault/graceful_stop.sh nosave", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "graceful_stop: nosave: exit status 75 (got 75): ok"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "graceful_stop: nosave: says it kept nothing: ok"));
    test_show_lines(out);
    free(out);
}

/* A hang named (tests/fault/hang_named.sh): one of 2 and of 3 ranks
 * stopped (SIGSTOP) or killed (SIGKILL), under --nproc-per-node and the
 * user's mpirun; the others name it, and where it was. Under mpirun, which
 * ends the job when the first rank's timeout ends that rank and wakes the
 * victim to end it, another rank may instead say the launcher ended it, or,
 * once the victim has spoken, that every other rank is where it is; one
 * rank at least must name it, and none another rank (the script says why). */
static void test_hang_named(void)
{
    if (!ready(1))
        return;
    static const char *const cases[] = {"stop nproc 2 1", "stop mpirun 3 2", "stop nproc 3 0", "kill mpirun 3 1",
                                        "kill nproc 2 1"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[96], *out = NULL;
        snprintf(cmd, sizeof cmd, "tests/fault/hang_named.sh %s", cases[i]);
        int rc = run_script(cmd, &out);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc != 0 && out)
            fprintf(stderr, "\n%s\n", out);
        else
            test_show_lines(out ? strstr(out, "hang_named: ") : NULL);
        free(out);
    }
}

/* The ranks' whereabouts store unusable under the user's mpirun
 * (tests/fault/store_unusable.sh says how): the run trains to its end
 * with --timeout 4, the ranks given an address, or half of one, noting what
 * they lack. */
static void test_store_unusable(void)
{
    if (!ready(1))
        return;
    static const char *const modes[] = {"taken", "rank0", "rank1", "ports", "half"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char cmd[96], verdict[128], *out = NULL;
        snprintf(cmd, sizeof cmd, "tests/fault/store_unusable.sh %s", modes[i]);
        int rc = run_script(cmd, &out);
        CU_ASSERT_EQUAL(rc, 0);
        snprintf(verdict, sizeof verdict, "store_unusable: %s: trained to the end, status 0, the note said: ok",
                 modes[i]);
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, verdict));
        if (rc != 0 && out)
            fprintf(stderr, "\n%s\n", out);
        else
            test_show_lines(out ? strstr(out, "store_unusable: ") : NULL);
        free(out);
    }
}

/* The surviving rank's run: non-zero, within the timeout plus a few
 * seconds, with WHY and WHY_TOO in its output. */
static void rank_fault(const char *fault, const char *why, const char *why_too)
{
    char cmd[128], *out = NULL;
    snprintf(cmd, sizeof cmd, "tests/fault/rank_faults.sh %s", fault);
    CU_ASSERT_EQUAL(run_script(cmd, &out), 0);
    const char *verdict = out ? strstr(out, "rank_faults: ") : NULL;
    int status = -1;
    double took = 1e9, timeout = 0;
    if (verdict)
        sscanf(verdict, "rank_faults: %*s exit status %d after %lf s (timeout %lf s)", &status, &took, &timeout);
    fprintf(stderr, "\n    %.*s", verdict ? (int)strcspn(verdict, "\n") : 0, verdict ? verdict : "(no verdict)");
    CU_ASSERT(status > 0);
    CU_ASSERT(timeout > 0 && took <= timeout + 5);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, why));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, why_too));
    if (!(status > 0 && took <= timeout + 5) || !out || !strstr(out, why) || !strstr(out, why_too))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

static void test_rank_killed(void)
{
    if (!ready(1))
        return;
    rank_fault("kill", "prog: rank 0: stopping: the launcher ended this rank (another rank failed, or the job was "
               "stopped) while training at epoch ", "exited on signal 9");
}

static void test_rank_hangs(void)
{
    if (!ready(1))
        return;
    /* rank 0's collective waits for the frozen rank 1 until its deadline */
    rank_fault("stop", "prog: rank 0: error: ", "did not finish within 8 s");
}

/* A NaN loss: the ranks sum their statistics at each report, so every rank
 * sees it at the same report and stops, each saying so. */
static void test_nan_on_two_ranks(void)
{
    if (!ready(1))
        return;
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
        "d=$(mktemp -d); trap 'rm -rf $d' EXIT; python3 tests/fault/small_data.py $d/data 256 64; "
        "%s examples/mnist.net --target cpu -o $d/p >/dev/null || exit 9; "
        "OMP_NUM_THREADS=1 timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 $d/p --data $d/data "
        "--batch-size 16 --lr 1e30 --epochs 1 --timeout 8; echo nan=$?", test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: rank 0: error: loss is "));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: rank 1: error: loss is "));
    CU_ASSERT_PTR_NULL(out && (strstr(out, "nan=0") || strstr(out, "nan=124")));
    if (!out || !strstr(out, "p: rank 1: error: loss is "))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

/* A generated program given a truncated data file, a damaged --init file, or
 * a batch that cannot fit in memory: roomy.net's 400 MB of activations per
 * sample, 2048 samples of them. A --batch-size far above the data set's
 * size is not refused, as the run holds no more than the data at once
 * (largest_step in trainer.c): mnist.net at batch 1048576 (200 GiB of
 * activations) of 256 samples takes the same step as at batch 256, on one
 * rank and on two; nor does the CPU build's limit on a step's samples count
 * more than the data gives (check_sum_count): batch 600000 with
 * --no-sync-every 2 is a step of 1000000 samples of 1000000, not refused,
 * and of 1100000 of 1100000, refused. */
static void test_bad_files(void)
{
    if (!ready(0))
        return;
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
        "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; python3 tests/fault/small_data.py $d/data 256 64; "
        "%s examples/mnist.net --target cpu -o $d/p; "
        "$d/p --data $d/data --max-steps 0 --export $d/w.safetensors --quiet; set +e; "
        "head -c 100000 $d/data/train-images-idx3-ubyte > $d/cut && mv $d/cut $d/data/train-images-idx3-ubyte; "
        "$d/p --data $d/data --max-steps 1; echo truncated=$?; "
        "python3 tests/fault/small_data.py $d/data 256 64; "
        "head -c 5000 $d/w.safetensors > $d/cut.safetensors; "
        "$d/p --data $d/data --max-steps 1 --init $d/cut.safetensors; echo cut_init=$?; "
        "printf 'garbage' | dd of=$d/w.safetensors bs=1 seek=3 conv=notrunc 2>/dev/null; "
        "$d/p --data $d/data --max-steps 1 --init $d/w.safetensors; echo bad_header=$?; "
        "$d/p --data $d/data --max-steps 1 --batch-size 1048576 --export $d/far.safetensors --quiet; "
        "echo far_above=$?; $d/p --data $d/data --max-steps 1 --batch-size 256 --export $d/whole.safetensors --quiet; "
        "cmp $d/far.safetensors $d/whole.safetensors && echo same_step_1; "
        "$d/p --data $d/data --max-steps 1 --batch-size 1048576 --nproc-per-node 2 --export $d/far2.safetensors "
        "--quiet; echo far_above_2=$?; cmp $d/far2.safetensors $d/whole.safetensors && echo same_step_2; "
        "printf 'net roomy\\ninput 1x28x28\\nconv 1->65536 k1\\nrelu\\nglobal_avgpool\\nflatten\\nlinear 10\\n"
        "loss cross_entropy\\n' > $d/roomy.net; %s $d/roomy.net --target cpu -o $d/roomy; "
        "python3 tests/fault/small_data.py $d/data 2048 64; "
        "$d/roomy --data $d/data --max-steps 1 --batch-size 2048; echo too_big=$?; "
        "printf 'net dot\\ninput 1x1x1\\nflatten\\nlinear 2\\nloss cross_entropy\\n' > $d/dot.net; "
        "%s $d/dot.net --target cpu -o $d/dot; "
        "for n in 1000000 1100000; do python3 tests/fault/blank_data.py $d/blank$n $n; "
        "$d/dot --data $d/blank$n --batch-size 600000 --no-sync-every 2 --max-steps 1 --quiet; echo sum_count_$n=$?; "
        "done",
        test_ddpc(), test_ddpc(), test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    static const char *const expected[] = {
        "train-images-idx3-ubyte: truncated: header says 256 images of 28x28",
        "truncated=2",
        "cut.safetensors: ",
        "cut_init=2",
        "w.safetensors: ",
        "bad_header=2",
        "far_above=0",
        "same_step_1",
        "far_above_2=0",
        "same_step_2",
        "roomy needs ",
        "GiB available: use a smaller --batch-size",
        "too_big=2",
        "sum_count_1000000=0",
        "a step of 1100000 samples (1100000 per rank x 1 rank) is more than the 1048576 the CPU build's exact "
        "gradient sums allow",
        "sum_count_1100000=2",
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, expected[i]));
    if (!out || !strstr(out, "bad_header=2") || !strstr(out, "truncated: header"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

/* --predict killed (SIGTERM) as its reader takes the first byte: what it
 * printed is whole lines, the first inputs' in order, each valid JSON, where
 * a full buffer would have been cut anywhere. The reader reads nothing more
 * until the kill, so the pipe holds the run back and it is cut short. */
/* A standard output whose reader ended (tests/fault/closed_stdout.sh): the
 * training goes on to its end, its weights those of a run never piped;
 * --predict ends as a filter does. */
static void test_closed_stdout(void)
{
    if (!ready(1))
        return;
    char *out = NULL;
    CU_ASSERT_EQUAL(run_script("tests/fault/closed_stdout.sh", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "closed_stdout: one process: the weights of a run never piped (cmp): ok"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "closed_stdout: --predict: said nothing: ok"));
    if (!out || strstr(out, "FAILED"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

static void test_predict_killed(void)
{
    if (!ready(0))
        return;
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
        "d=$(mktemp -d); trap 'rm -rf $d' EXIT; python3 tests/fault/small_data.py $d/data 256 8192; "
        "%s examples/mnist.net --target cpu -o $d/p >/dev/null || exit 9; "
        "$d/p --data $d/data --max-steps 0 --export $d/w.safetensors --quiet || exit 9; mkfifo $d/f; "
        "OMP_NUM_THREADS=1 $d/p --predict $d/data/t10k-images-idx3-ubyte --init $d/w.safetensors --top 10 --json "
        "> $d/f & pid=$!; { dd bs=1 count=1 2>/dev/null; kill -TERM $pid; cat; } < $d/f > $d/out; wait $pid; "
        "echo status=$?; python3 -c 'import json, sys\n"
        "text = open(sys.argv[1]).read()\n"
        "lines = text.splitlines()\n"
        "assert text.endswith(\"\\n\"), \"the last line is cut: %%r\" %% lines[-1][-60:]\n"
        "assert [json.loads(l)[\"input\"] for l in lines] == list(range(len(lines)))\n"
        "print(\"whole lines:\", 0 < len(lines) < 8192)' $d/out",
        test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "status=143\n"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "whole lines: True\n"));
    if (!out || !strstr(out, "whole lines: True\n"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

/* tests/fault/checkpoint_guard.sh: each of its cases must say "ok". */
static void test_checkpoint_guard(void)
{
    if (!ready(0))
        return;
    char *out = NULL;
    int rc = run_script("tests/fault/checkpoint_guard.sh", &out);
    CU_ASSERT_EQUAL(rc, 0);
    static const char *const cases[] = {"guard: nan ok", "guard: shared ok", "guard: forgot ok"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, cases[i]));
    if (have("command -v mpirun >/dev/null"))
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "guard: nan2 ok"));
    if (rc != 0)
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

/* Two ranks started by mpirun in its MPMD form, rank 0 with EXTRA0 and rank 1
 * with EXTRA1 (after the common flags): both must exit quickly with status 2,
 * each saying WHY. */
static void mpmd_mismatch(const char *extra0, const char *extra1, const char *why)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
        "d=$(mktemp -d); trap 'rm -rf $d' EXIT; python3 tests/fault/small_data.py $d/data 1024 128; "
        "python3 tests/fault/small_data.py $d/small 512 128; "
        "%s examples/mnist.net --target cpu -o $d/p >/dev/null || exit 9; cd $d; "
        "flags='--batch-size 16 --max-steps 6 --timeout 30'; "
        "OMP_NUM_THREADS=1 timeout 120 mpirun --allow-run-as-root --oversubscribe -np 1 ./p $flags %s : "
        "-np 1 ./p $flags %s; echo status=$?", test_ddpc(), extra0, extra1) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    char rank0[512], rank1[512];
    snprintf(rank0, sizeof rank0, "p: rank 0: error: %s", why);
    snprintf(rank1, sizeof rank1, "p: rank 1: error: %s", why);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, rank0));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, rank1));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "status=2"));
    if (!out || !strstr(out, rank0) || !strstr(out, rank1) || !strstr(out, "status=2"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

static void test_mpmd_mismatches(void)
{
    if (!ready(1))
        return;
    mpmd_mismatch("--data data --eval-every 2", "--data data",
                  "rank 1 has --eval-every 0 where rank 0 has 2: every rank needs the same --eval-every");
    mpmd_mismatch("--data data", "--data small",
                  "rank 1's training data differs from rank 0's (512 samples, digest ");
    mpmd_mismatch("--data data", "--data data --save ck",
                  "--save is given on rank 1 but not given on rank 0: give it to every rank or to none");
}

/* tests/fault/signal_faults.sh MODE: status 1 with WHY in the output, or
 * OR_WHY (NULL: none): two signals of two kinds, pending together, are taken
 * in the kernel's order. */
static void signal_fault(const char *mode, const char *why, const char *or_why)
{
    char cmd[128], *out = NULL;
    snprintf(cmd, sizeof cmd, "tests/fault/signal_faults.sh %s", mode);
    CU_ASSERT_EQUAL(run_script(cmd, &out), 0);
    char verdict[128];
    snprintf(verdict, sizeof verdict, "signal_faults: %s: exit status 1\n", mode);
    int said = out && (strstr(out, why) || (or_why && strstr(out, or_why)));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, verdict));
    CU_ASSERT(said);
    if (!out || !strstr(out, verdict) || !said)
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

static void test_signals(void)
{
    if (!ready(1))
        return;
    signal_fault("nproc-kill", "prog: error: rank 1 was killed by signal SIGKILL\n", NULL);
    signal_fault("nproc-term", "prog: error: stopped by SIGTERM\n", "prog: error: stopped by SIGINT\n");
    /* README's "should mpirun not end them": the third signal kills it. The
     * second prints nothing to wait for, so it may come with the third:
     * either may then be taken last, and named */
    signal_fault("nproc-stuck", "prog: SIGINT: mpirun has not ended the ranks: killing them and it (SIGKILL)\n"
                 "prog: error: stopped by SIGINT\n", "prog: SIGTERM: mpirun has not ended the ranks: killing them "
                 "and it (SIGKILL)\nprog: error: stopped by SIGINT\n");
    signal_fault("single-term", "prog: error: stopped at once by a second SIGTERM while training at epoch ",
                 "prog: error: stopped at once by a second SIGINT while training at epoch ");
    /* README's "a second Ctrl-C": one kind twice, so one name */
    signal_fault("pair-int", "prog: rank 0: error: stopped at once by a second SIGINT while ", NULL);
}

/* Settings a single CPU rank must refuse at start-up, naming the cause; a
 * launch a CPU build's MPI cannot use is refused before the data is read
 * (--data names no directory), one rank of each of mpirun's processes too;
 * RANK and WORLD_SIZE that repeat mpirun's own are taken as mpirun's;
 * --predict on several ranks says it runs on one. */
static void test_refused_settings(void)
{
    if (!ready(0))
        return;
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
        "d=$(mktemp -d); trap 'rm -rf $d' EXIT; python3 tests/fault/small_data.py $d/data 256 64; "
        "%s examples/mnist.net --target cpu -o $d/p >/dev/null || exit 9; "
        "$d/p --data $d/data --max-steps 1 --backend nccl; echo nccl=$?; "
        "$d/p --data $d/data --max-steps 1 --lr 1e39; echo lr=$?; "
        "OMP_NUM_THREADS=100000 $d/p --data $d/data --max-steps 1; echo threads=$?; "
        "$d/p --data $d/data --max-steps 1 --init-method tcp://host --rank 0 --world-size 2; echo tcp=$?; "
        "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 $d/p --data $d/none --max-steps 1; "
        "echo torchrun=$?; M='timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2'; "
        "OMP_NUM_THREADS=1 $M $d/p --data $d/none --max-steps 1 --rank 0 --world-size 1; echo one_each=$?; "
        "OMP_NUM_THREADS=1 $M bash -c 'export RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE; "
        "exec \"$0\" \"$@\"' $d/p --data $d/data --max-steps 1 --quiet; echo exported=$?; "
        "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 $d/p --predict $d/data/t10k-images-idx3-ubyte "
        "--init $d/none.safetensors; echo predict=$?",
        test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    static const char *const expected[] = {
        "p: error: this program was built for CPUs; NCCL needs --target cuda",
        "nccl=2",
        "p: error: --lr expects a number >= 0 that a float holds (0, or 1.4e-45 to 3.4e+38), got '1e39'",
        "lr=2",
        "p: error: OMP_NUM_THREADS=100000 asks for 100000 threads on ",
        "threads=2",
        "p: error: --init-method 'tcp://host' needs a host and a port: tcp://HOST:PORT",
        "tcp=2",
        "p: rank 0: error: this CPU build's 2 ranks talk through MPI: start them with mpirun -np 2 (or "
        "--nproc-per-node 2), not with torchrun or --rank/--world-size",
        "torchrun=2",
        "p: error: under mpirun, --rank, --world-size and --init-method tcp:// replace mpirun's own ranks",
        "one_each=2",
        "exported=0",
        "p: rank 0: error: --predict runs on one rank: start it without mpirun, srun or --nproc-per-node",
        "predict=2",
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, expected[i]));
        ok = ok && out && strstr(out, expected[i]);
    }
    if (!ok)
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

void suite_faults(void)
{
    static const TestCase cases[] = {
        {"real nets stopped and resumed = uninterrupted, bit for bit (1 and 2 ranks)", test_resume_real_nets},
        {"one of two ranks killed: the other ends non-zero within its timeout", test_rank_killed},
        {"one of two ranks frozen: the other's deadline ends the run", test_rank_hangs},
        {"a NaN loss on two ranks: both stop, each saying so", test_nan_on_two_ranks},
        {"truncated data, a damaged --init, a batch too big: status 2, named", test_bad_files},
        {"NaN keeps the good checkpoints; nets share a --save dir; a forgotten --resume: refused",
         test_checkpoint_guard},
        {"ranks given different --eval-every, --data, --save: status 2 on every rank, named", test_mpmd_mismatches},
        {"--max-restarts 2: rank 1 killed twice, the run ends as one never killed; --max-restarts 1 gives up; "
         "a SIGTERM is not restarted", test_restarts},
        {"Ctrl-C, SIGTERM, SIGHUP, SIGUSR1 (to one process, the launcher, mpirun, one rank): status 75, resumed bit "
         "for bit; without --save: nothing kept, status 75", test_graceful_stop},
        {"a rank stopped or killed (1 of 2, 1 of 3; --nproc-per-node, mpirun): the others name it and where it was",
         test_hang_named},
        {"the whereabouts' store unusable under the user's mpirun (its port another program's; the variables given "
         "to one rank; different ports; half of the address): trained to the end, noted", test_store_unusable},
        {"a rank killed under --nproc-per-node; SIGTERM and SIGINT together to it and to one rank; "
         "two SIGINTs to a rank whose peer hangs: said, status 1",
         test_signals},
        {"--predict killed mid-run: whole lines, in order", test_predict_killed},
        {"stdout's reader gone (| head -1): trained to the end as never piped, on 1 and 2 ranks; --predict ends "
         "as a filter", test_closed_stdout},
        {"--backend nccl on one CPU rank, --lr 1e39, OMP_NUM_THREADS=100000, tcp:// without a port: status 2, named",
         test_refused_settings},
        {NULL, NULL},
    };
    test_add_suite("faults [mpirun, python, bash]", cases);
}
