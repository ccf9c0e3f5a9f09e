/*
 * Data parallel on the CPU under mpirun, end to end (tests/distributed/).
 *
 * R ranks x batch B against 1 rank x batch R*B from the same weights: the same
 * global batches (DistributedSampler deals every R-th sample of one shuffled
 * order), so the same 20 steps, and the exported weights must be the same
 * bytes; the program itself checks at the end that all ranks hold identical
 * weights. Every example, B = 16, 32 and 64, R = 2 and 3; the ranks run one
 * OpenMP thread each, the single rank all the machine's; and once the ranks
 * on 8-float vectors, the single rank on 16 where the CPU has AVX-512.
 *
 * What makes it hold: each sample's forward and backward are the same floats
 * in any batch and on any thread count (the products of gemm_cpu.h), the
 * gradients are order-free sums, across ranks too, rounded once (ops.h:
 * DdpGrad, exact_sum.h), and the loss gradient is over the global batch, so no division by
 * the world size follows the sum. Without these, float summation order alone
 * moved resnet.net 1.3e-2 of the update away in 20 steps (relu kinks after
 * batchnorm, Adam's division by sqrt(v) + eps), as far as PyTorch's own
 * float32 is from float64 there.
 */
#include "image_decode.h"  // ddp_image_support: the image folder test needs libpng and libjpeg
#include "onednn_cpu.h"    // ddp_onednn_built_in: the mixed-kernels test needs oneDNN
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int have_mpirun(void) { return test_run("command -v mpirun", NULL) == 0; }

/* Every pair of NET's runs (tests/distributed/equivalence.sh) identical;
 * ENV (may be "") in the script's environment. */
static void equivalent(const char *env, const char *net, const char *batches, const char *ranks, const char *flags)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s DDPC=%s PYTHON=%s tests/distributed/equivalence.sh %s 20 '%s' '%s' %s", env,
                             test_ddpc(), test_python_with_torch() ? test_python_with_torch() : "/usr/bin/python3", net,
                             batches, ranks, flags) > 0);
    int rc = test_run(cmd, &out);
    char what[256];
    snprintf(what, sizeof what, "%s %s, batches %s, ranks %s: exit %d", net, flags, batches, ranks, rc);
    CU_assertImplementation(rc == 0 && out && !strstr(out, "DIFFERENT"), __LINE__, what, __FILE__, "", CU_FALSE);
    for (const char *line = out; line && *line;) { /* the script's verdict on each pair */
        size_t len = strcspn(line, "\n");
        if (memmem(line, len, " against 1 x ", strlen(" against 1 x ")))
            fprintf(stderr, "\n    %s%.*s", flags, (int)len, line);
        line += len + (line[len] == '\n');
    }
    if (rc != 0 && out)
        fprintf(stderr, "\n%s\n", out);
    free(out);
    free(cmd);
}

/* Runs the test script CMD: it passes with status 0 and no "DIFFERENT"
 * line; each line it prints is shown, under WHAT in a failure. */
static void script_passes(const char *cmd, const char *what)
{
    char *out = NULL, failure[512];
    int rc = test_run(cmd, &out);
    snprintf(failure, sizeof failure, "%s: exit %d", what, rc);
    CU_assertImplementation(rc == 0 && out && !strstr(out, "DIFFERENT"), __LINE__, failure, __FILE__, "", CU_FALSE);
    test_show_lines(out);
    free(out);
}

/* Runs `bash tests/distributed/SCRIPT` with DDPC set, as script_passes
 * checks it, where Debian's Fashion-MNIST is installed (and mpirun, with
 * NEEDS_MPIRUN); else says it is skipped. */
static void fashion_script_passes(const char *script, int needs_mpirun, const char *what)
{
    if ((needs_mpirun && !have_mpirun()) || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs(needs_mpirun ? "\n  (skipped: no mpirun or no Fashion-MNIST)" : "\n  (skipped: no Fashion-MNIST)", stderr);
        return;
    }
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s bash tests/distributed/%s", test_ddpc(), script) > 0);
    script_passes(cmd, what);
    free(cmd);
}

/* tests/distributed/global_batch.sh: --global-batch GLOBAL on each of RANKS
 * the same bytes; a rank count that does not divide it refused. */
static void global_batch_same(const char *net, int steps, int global, const char *ranks)
{
    char *cmd, what[256];
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s tests/distributed/global_batch.sh %s %d %d '%s'", test_ddpc(), net, steps,
                             global, ranks) > 0);
    snprintf(what, sizeof what, "%s --global-batch %d on %s ranks", net, global, ranks);
    script_passes(cmd, what);
    free(cmd);
}

static void test_global_batch_any_world_size(void)
{
    if (!have_mpirun() || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs("\n  (skipped: no mpirun or no Fashion-MNIST)", stderr);
        return;
    }
    /* dropout (drawn per sample), then batchnorm (statistics of the global batch) */
    global_batch_same("examples/mlp.net", 10, 48, "1 2 4");
    global_batch_same("examples/resnet.net", 4, 24, "1 3");
    /* data { }: crops and flips drawn per sample */
    global_batch_same("examples/fashion_resnet.net", 4, 32, "1 2");
    /* the net's own `batch 48 global`, no flag */
    char dir[] = "/tmp/ddp_global_net_XXXXXX", *cmd, net[64];
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    snprintf(net, sizeof net, "%s/mlp.net", dir);
    CU_ASSERT_FATAL(asprintf(&cmd, "sed 's/^  batch 128$/  batch 48 global/' examples/mlp.net > %s && "
                             "grep -q 'batch 48 global' %s", net, net) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, NULL), 0);
    free(cmd);
    global_batch_same(net, 5, 48, "1 3");
    CU_ASSERT_FATAL(asprintf(&cmd, "rm -rf %s", dir) > 0);
    test_run(cmd, NULL);
    free(cmd);
}

/* tests/distributed/straggler.sh: each rank's time per step in the log; a
 * rank slowed on purpose named as the straggler, whichever it is. */
static void test_straggler_named(void)
{
    fashion_script_passes("straggler.sh", 1, "a rank slowed in its data phase");
}

/* tests/distributed/eval_only.sh: --eval-only on 1, 2 and 3 ranks counts
 * every test sample once (3 does not divide 10,000) and logs one matrix,
 * with the accuracy and loss training gave the same weights, as does --predict's
 * first class (a net ending in a linear layer, and one in log_softmax); a
 * 2-rank checkpoint evaluates on 1 rank; --predict under mpirun is refused. */
static void test_eval_only_on_ranks(void)
{
    fashion_script_passes("eval_only.sh", 1, "--eval-only on several ranks");
}

/* tests/distributed/cifar_data.sh: CIFAR-10 and CIFAR-100 binary files
 * written by the script, trained on at 1 and 2 ranks (the same bytes), the
 * format stated, and each mismatch refused with status 2. */
static void test_cifar_files_end_to_end(void)
{
    if (!have_mpirun()) {
        fputs("\n  (skipped: no mpirun)", stderr);
        return;
    }
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s bash tests/distributed/cifar_data.sh", test_ddpc()) > 0);
    script_passes(cmd, "CIFAR's binary files, end to end");
    free(cmd);
}

/* tests/distributed/npy_data.sh: arrays saved by NumPy itself, trained on
 * at 1 and 2 ranks (the same bytes); uint8 and float32 channels-last arrays
 * of the same images train alike. */
static void test_npy_files_end_to_end(void)
{
    if (!have_mpirun()) {
        fputs("\n  (skipped: no mpirun)", stderr);
        return;
    }
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s PYTHON=/usr/bin/python3 bash tests/distributed/npy_data.sh", test_ddpc()) >
                    0);
    script_passes(cmd, "NumPy arrays, end to end");
    free(cmd);
}

/* tests/distributed/image_folder.sh: PNG and JPEG files of many sizes
 * written by PIL, resized and center-cropped, trained on at 1 and 2 ranks
 * and with 0 and 2 workers (the same bytes); --predict of a JPEG; a file cut
 * short and a .webp refused with status 2. */
static void test_image_folder_end_to_end(void)
{
    const char *py = test_python_with("PYTHON", "/usr/bin/python3", "PIL, numpy");
    if (!have_mpirun() || !py || !ddp_image_support()) {
        fputs("\n  (skipped: no mpirun, no python3 with PIL and numpy, or built without libpng and libjpeg)", stderr);
        return;
    }
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s PYTHON=%s bash tests/distributed/image_folder.sh", test_ddpc(), py) > 0);
    script_passes(cmd, "an image folder, end to end");
    free(cmd);
}

/* tests/distributed/augment.sh: a data { } block with a reflect-padded crop
 * and both flips: 2 ranks of 8 take the steps 1 rank of 16 takes, bit for
 * bit, over 7 epochs; 7 steps over 3 epochs agree with PyTorch's float64 run
 * through the emitted module's transform; the first line names the block. */
static void test_augmentation_on_ranks(void)
{
    if (!have_mpirun() || !test_python_with_torch()) {
        fputs("\n  (skipped: no mpirun or no python3 with torch)", stderr);
        return;
    }
    char *cmd;
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s PYTHON=%s bash tests/distributed/augment.sh", test_ddpc(),
                             test_python_with_torch()) > 0);
    script_passes(cmd, "data { } on 1 and 2 ranks, and against PyTorch");
    free(cmd);
}

/* tests/distributed/scaling_on_paper.sh: `ddpc --emit plan --world N`'s
 * CPU figures within the factor the script states of measured runs at 1 and
 * 2 ranks (mnist, resnet, mlp). */
static void test_scaling_on_paper_against_measured_runs(void)
{
    fashion_script_passes("scaling_on_paper.sh", 1, "scaling on paper against measured runs");
}

/* tests/distributed/steady_step.sh: from a run's third step on, each step
 * makes no device synchronisation and no allocation, counted as on a GPU
 * (mnist and resnet on 1 rank, resnet on 2 with --no-sync-every, mlp on 2
 * with a short last batch). */
static void test_steady_steps_neither_wait_nor_allocate(void)
{
    fashion_script_passes("steady_step.sh", 0, "steady steps: no sync, no allocation");
}

/* tests/distributed/step_graphs.sh: steps replayed from their graphs (the
 * CPU's twin of a CUDA graph, which replays what its capture saw) train to
 * the bytes of steps run call by call (--no-cuda-graph): mlp.net over 3
 * epochs with a short last batch, adam_mse.net (a new lr every step), mlp.net
 * on 2 ranks with --no-sync-every 2. */
static void test_step_graphs_same_bytes(void)
{
    fashion_script_passes("step_graphs.sh", 0, "steps from graphs = call by call");
}

/* tests/distributed/resident.sh: the training set held on the device
 * (DDP_DATA_RESIDENT=1, the input made there) trains to the bytes of
 * batches copied from the host: mnist.net over 2 epochs, fashion_resnet.net's
 * crops and flips, mlp.net on 2 ranks with --no-sync-every 2. */
static void test_resident_same_bytes(void)
{
    fashion_script_passes("resident.sh", 0, "the resident set = the host's batches");
}

/* tests/distributed/resume_world.sh: NET stopped at step 13 (mid-epoch: 10
 * steps an epoch) on one world size and resumed to 25 on another, each pair
 * of PAIRS, the bytes of a run that never stopped. */
static void resumed_on_other_world_sizes(const char *net, const char *pairs)
{
    char *cmd, what[256];
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s PYTHON=%s tests/distributed/resume_world.sh %s 24 13 25 '%s'", test_ddpc(),
                             test_python_with_torch() ? test_python_with_torch() : "/usr/bin/python3", net, pairs) > 0);
    snprintf(what, sizeof what, "%s resumed on other world sizes (%s)", net, pairs);
    script_passes(cmd, what);
    free(cmd);
}

static void test_checkpoints_move_between_world_sizes(void)
{
    if (!have_mpirun() || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs("\n  (skipped: no mpirun or no Fashion-MNIST)", stderr);
        return;
    }
    /* dropout (drawn per sample), then batchnorm (statistics of the global batch) */
    resumed_on_other_world_sizes("examples/mlp.net", "2:1 1:3 3:2");
    resumed_on_other_world_sizes("examples/resnet.net", "2:1 1:3 3:2");
}

static void test_ranks_equal_one_rank_bit_for_bit(void)
{
    if (!have_mpirun() || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs("\n  (skipped: no mpirun or no Fashion-MNIST)", stderr);
        return;
    }
    equivalent("", "examples/mnist.net", "16 32 64", "2 3", "");
    equivalent("", "examples/mlp.net", "16 32 64", "2 3", "");
    equivalent("", "examples/resnet.net", "16 32 64", "2 3", "");
    /* no_sync: each rank accumulates 2 batches, the sum is all-reduced once,
     * as one rank accumulating 2 double batches; several buckets this time */
    equivalent("", "examples/mnist.net", "16", "2", "--no-sync-every 2 --bucket-cap-mb 0.1 ");
    /* the ranks on 8-float vectors, the single rank on 16 where the CPU has
     * AVX-512 (gemm_cpu.h): the same steps on either kind of machine, with
     * the runtime's own convs (oneDNN's follow the instruction set) */
    equivalent("RANKS_VECTOR=8 DDP_CPU_CONV=own", "examples/mnist.net", "16", "2", "");
    /* bf16: every product's operands rounded, element by element, so the
     * promise holds as in fp32 (convs on the own kernels and oneDNN's) */
    equivalent("", "examples/resnet.net", "16", "2 3", "--precision bf16 ");
    /* every epoch ends with a short batch (200 samples in global batches of
     * 48: four of 48, then one of 8), whose parts are 6 times larger and
     * whose step has windows of its own (exact_sum.h); 20 steps, 4 epochs */
    char dir[] = "/tmp/ddp_short_batch_XXXXXX", *make = NULL, flags[128];
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    CU_ASSERT_FATAL(asprintf(&make, "python3 tests/fault/small_data.py %s 200 64", dir) > 0);
    CU_ASSERT_EQUAL(test_run(make, NULL), 0);
    snprintf(flags, sizeof flags, "--data %s ", dir);
    equivalent("", "examples/resnet.net", "24", "2", flags);
    free(make);
    CU_ASSERT_FATAL(asprintf(&make, "rm -rf %s", dir) > 0);
    test_run(make, NULL);
    free(make);
}

static void test_nproc_per_node_and_mismatch(void)
{
    if (!have_mpirun() || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0)
        return;
    char *cmd, *out = NULL;
    /* --nproc-per-node 2 starts the ranks itself; ranks that disagree on
     * their settings stop with a message naming the rank. */
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; %s examples/mlp.net --target cpu -o $d/p; "
                             "$d/p --nproc-per-node 2 --max-steps 5; echo spawned=$?; set +e; "
                             "mpirun --allow-run-as-root --oversubscribe -np 1 $d/p --max-steps 5 --quiet --batch-size 8 : "
                             "-np 1 $d/p --max-steps 5 --quiet --batch-size 16; echo mismatch=$?; "
                             "mpirun --allow-run-as-root --oversubscribe -np 1 $d/p --max-steps 5 --quiet : "
                             "-np 1 $d/p --max-steps 5 --quiet --data /nonexistent; echo failed=$?; "
                             /* set-ups that cannot work, refused (exit 2): torchrun's variables
                              * left in mpirun's environment, Open MPI's without mpirun, and an
                              * address without a port or a port without an address, said once by
                              * the launcher (which would pass the half to every rank) */
                             "RANK=0 WORLD_SIZE=1 mpirun --allow-run-as-root --oversubscribe -np 2 $d/p --max-steps 1 "
                             "--quiet; echo stale=$?; "
                             "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 $d/p --max-steps 1 --quiet; echo faked=$?; "
                             "MASTER_ADDR=127.0.0.1 $d/p --nproc-per-node 2 --max-steps 1 --quiet; echo addr=$?; "
                             "MASTER_PORT=29500 $d/p --nproc-per-node 2 --max-steps 1 --quiet; echo port=$?; "
                             /* rank 0 alone writes --tensorboard, but every rank checks it first */
                             "$d/p --nproc-per-node 2 --max-steps 1 --quiet --tensorboard $d/p/tb; echo tb=$?",
                             test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "spawned=0"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "weights identical on all 2 ranks"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "rank 1 has --batch-size 16 where rank 0 has 8: every rank needs the "
                                              "same --batch-size"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "mismatch=2"));
    /* one rank fails: it says why, and the rank ended because of it says so too */
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: rank 1: error: /nonexistent"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: rank 0: stopping: the launcher ended this rank"));
    CU_ASSERT_PTR_NULL(out && strstr(out, "failed=0"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "error: RANK=0 and WORLD_SIZE=1 are set, as torchrun sets them, but "
                                              "mpirun started this process as rank 1 of 2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "stale=2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: rank 0: error: MPI sees rank 0 of 1 but this process is rank 0 of "
                                              "2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "faked=2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: error: MASTER_ADDR=127.0.0.1 is set but MASTER_PORT is not\naddr=2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: error: MASTER_PORT=29500 is set but MASTER_ADDR is not\nport=2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "/p/tb: cannot create the TensorBoard log directory: "));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "/p is not a directory\ntb=2"));
    if (!out || !strstr(out, "spawned=0"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

/* Ranks whose convs run different kernels (one on the runtime's own, by
 * DDP_CPU_CONV=own, the other on oneDNN, as ranks on different kinds of CPU
 * would) still take the same steps, and say at start-up and in the log that
 * those are not bit for bit one rank's. */
static void test_ranks_on_other_kernels_said(void)
{
    if (!have_mpirun() || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0 ||
        !ddp_onednn_built_in()) {
        fputs("\n  (skipped: no mpirun, no Fashion-MNIST or no oneDNN)", stderr);
        return;
    }
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; %s examples/resnet.net --target cpu -o $d/p; "
                             "OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS "
                             "-np 1 -x DDP_CPU_CONV=own $d/p --max-steps 2 --log $d/log : "
                             "-np 1 -x DDP_CPU_CONV= $d/p --max-steps 2 --log $d/log; head -1 $d/log",
                             test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "note: rank 1's convs run oneDNN "));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "where rank 0's run the runtime's own kernels"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"bit_invariant\": false"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "weights identical on all 2 ranks"));
    if (!out || !strstr(out, "note: rank 1"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

void suite_distributed(void)
{
    static const TestCase cases[] = {
        {"N ranks x B export the same bytes as 1 rank x N*B: every example, B 16/32/64, N 2/3, both vector widths, short last batches",
         test_ranks_equal_one_rank_bit_for_bit},
        {"a global batch (--global-batch, or the net's own): 1, 2, 3 and 4 ranks export the same bytes; a world size "
         "that does not divide it is refused",
         test_global_batch_any_world_size},
        {"a checkpoint resumed on another world size (2 to 1, 1 to 3, 3 to 2, mid-epoch): a run that never stopped",
         test_checkpoints_move_between_world_sizes},
        {"each rank's time per step logged; a rank slowed in its data phase named the straggler",
         test_straggler_named},
        {"CIFAR-10 and CIFAR-100 binary files: 1 and 2 ranks the same bytes, the format stated, mismatches refused",
         test_cifar_files_end_to_end},
        {"NumPy arrays: 1 and 2 ranks the same bytes; uint8 and float32 channels-last arrays of the same images alike",
         test_npy_files_end_to_end},
        {"an image folder: resize and center_crop, 1 and 2 ranks and 0 and 2 workers the same bytes, bad files refused",
         test_image_folder_end_to_end},
        {"--eval-only on 1, 2 and 3 ranks and --predict: each test sample once, one matrix, training's accuracy",
         test_eval_only_on_ranks},
        {"data { }: crops and flips alike on 1 and 2 ranks, any --workers, and as the emitted module's transform",
         test_augmentation_on_ranks},
        {"scaling on paper: its CPU figures within the stated factor of measured runs at 1 and 2 ranks",
         test_scaling_on_paper_against_measured_runs},
        {"a steady step makes no device synchronisation and no allocation (counted as a GPU build counts them)",
         test_steady_steps_neither_wait_nor_allocate},
        {"steps replayed from their graphs train to the bytes of steps run call by call",
         test_step_graphs_same_bytes},
        {"the training set held on the device trains to the bytes of batches copied from the host",
         test_resident_same_bytes},
        {"--nproc-per-node 2; other settings, and set-ups that cannot work, refused; a failing rank ends the others, "
         "each says why",
         test_nproc_per_node_and_mismatch},
        {"ranks whose convs run other kernels: the same steps, and a note that they are not one rank's",
         test_ranks_on_other_kernels_said},
        {NULL, NULL},
    };
    test_add_suite("distributed [mpirun, python, bash]", cases);
}
