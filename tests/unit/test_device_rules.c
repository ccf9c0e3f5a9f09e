/*
 * The GPU side's decisions (runtime/device_rules.c), run here without a GPU:
 * which GPU a rank drives, the math mode, which cuDNN algorithm a conv gets,
 * the start-up memory estimate for the libraries, whether launches wait, and
 * how a per-channel sum shares a channel among blocks and threads.
 * Plus one look at what DDP_LAUNCH becomes under nvcc: every generated
 * kernel's launch is checked and named (skipped without nvcc).
 */
#include "channel_split.h" // ddp_plane_lanes, ddp_channel_groups, ddp_group_first
#include "conv_choices.h"  // ddp_conv_choices_text, _parse
#include "conv_choices_file.h"  // ddp_conv_choices_read_file, _write_file
#include "device_rules.h"  // ddp_gpu_choose_device, ddp_math_settings, ddp_conv_choose, ddp_gpu_memory_estimate
#include "testutil.h"
#include "trainer_harness.h"  // harness_write_file

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // mkdir, mkfifo

/* ---- which GPU ---- */

static void test_one_visible_gpu_is_the_ranks(void)
{
    char why[160];
    /* srun --gpus-per-task=1: every rank sees one GPU, numbered 0 */
    for (int lr = 0; lr < 4; lr++)
        CU_ASSERT_EQUAL(ddp_gpu_choose_device(1, lr, 4, why, sizeof why), 0);
    /* torchrun on an 8-GPU node: GPU LOCAL_RANK */
    CU_ASSERT_EQUAL(ddp_gpu_choose_device(8, 5, 8, why, sizeof why), 5);
    CU_ASSERT_EQUAL(ddp_gpu_choose_device(2, 1, 2, why, sizeof why), 1);
    CU_ASSERT_EQUAL(ddp_gpu_choose_device(1, 0, 1, why, sizeof why), 0);
}

static void test_too_few_gpus_refused(void)
{
    char why[160];
    CU_ASSERT_EQUAL(ddp_gpu_choose_device(2, 3, 4, why, sizeof why), -1);
    CU_ASSERT_STRING_EQUAL(why, "local rank 3 has no GPU: this machine shows 2 (CUDA_VISIBLE_DEVICES decides which)");
    CU_ASSERT_EQUAL(ddp_gpu_choose_device(0, 0, 1, why, sizeof why), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "no GPU"));
    CU_ASSERT_EQUAL(ddp_gpu_choose_device(4, -1, 4, why, sizeof why), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "internal error"));
}

/* What a program no launcher started does: its own ranks or one. */
static void test_local_ranks_to_start(void)
{
    char why[192];
    /* the bare ./OUT: every GPU of several, else one rank here */
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 8, 0, 0, why, sizeof why), 8);
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 1, 0, 0, why, sizeof why), 0);
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(0, 0, 0, 0, why, sizeof why), 0);
    /* --predict classifies on one rank, GPUs or not */
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 8, 0, 1, why, sizeof why), 0);
    /* --nproc-per-node N: N, up to the GPUs (NCCL runs one rank per GPU of
     * a host, and these ranks all see the same ones); a CPU build's ranks
     * need none */
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 8, 2, 0, why, sizeof why), 2);
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 2, 2, 0, why, sizeof why), 2);
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 1, 1, 0, why, sizeof why), 1);
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(0, 0, 4, 0, why, sizeof why), 4);
    CU_ASSERT_STRING_EQUAL(why, "");
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 2, 4, 0, why, sizeof why), -1);
    CU_ASSERT_STRING_EQUAL(why, "--nproc-per-node 4: NCCL runs one rank per GPU, and this machine shows 2 "
                                "(CUDA_VISIBLE_DEVICES decides which)");
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 1, 4, 0, why, sizeof why), -1);
    CU_ASSERT_STRING_EQUAL(why, "--nproc-per-node 4: NCCL runs one rank per GPU, and this machine shows 1 "
                                "(CUDA_VISIBLE_DEVICES decides which)");
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 0, 0, 0, why, sizeof why), 0); /* it says so itself, as one rank */
    /* a GPU build that sees none: its ranks would each fail */
    CU_ASSERT_EQUAL(ddp_local_ranks_to_start(1, 0, 2, 0, why, sizeof why), -1);
    CU_ASSERT_STRING_EQUAL(why, "--nproc-per-node 2: no GPU is visible here");
}

/* A launcher's ranks on a node of more GPUs than ranks leave some idle. */
static void test_gpus_left_idle(void)
{
    /* srun --ntasks-per-node 1 --gpus-per-node 4: one rank, GPU 0 */
    CU_ASSERT_EQUAL(ddp_gpus_left_idle(DDP_LAUNCH_SRUN, 4, 1), 3);
    CU_ASSERT_EQUAL(ddp_gpus_left_idle(DDP_LAUNCH_TORCHRUN, 8, 2), 6);
    CU_ASSERT_EQUAL(ddp_gpus_left_idle(DDP_LAUNCH_MPIRUN, 2, 1), 1);
    /* one rank per GPU, or one GPU shown to each rank (--gpus-per-task=1) */
    CU_ASSERT_EQUAL(ddp_gpus_left_idle(DDP_LAUNCH_SRUN, 4, 4), 0);
    CU_ASSERT_EQUAL(ddp_gpus_left_idle(DDP_LAUNCH_SRUN, 1, 4), 0);
    /* the program's own ranks: their count was asked for, or is every GPU;
     * and a rank by hand, or one alone */
    CU_ASSERT_EQUAL(ddp_gpus_left_idle(DDP_LAUNCH_SPAWN, 8, 2), 0);
    CU_ASSERT_EQUAL(ddp_gpus_left_idle(DDP_LAUNCH_FLAGS, 8, 2), 0);
    CU_ASSERT_EQUAL(ddp_gpus_left_idle(DDP_LAUNCH_NONE, 8, 1), 0);
    /* a CPU build: no GPUs */
    CU_ASSERT_EQUAL(ddp_gpus_left_idle(DDP_LAUNCH_MPIRUN, 0, 2), 0);
}

/* ---- math ---- */

static void test_math_settings(void)
{
    DdpMathSettings m = ddp_math_settings(DDP_PRECISION_FP32, NULL);
    CU_ASSERT(!m.tf32 && m.conv == DDP_CONV_MATH_FMA && !m.cublas_tf32 && !m.note);
    /* NVIDIA_TF32_OVERRIDE=1 never turns TF32 on */
    m = ddp_math_settings(DDP_PRECISION_FP32, "1");
    CU_ASSERT(!m.tf32 && m.conv == DDP_CONV_MATH_FMA && !m.cublas_tf32 && !m.note);
    /* TF32 is TENSOR_OP_MATH, never ALLOW_CONVERSION (fp16) nor DEFAULT; bf16
     * operands, rounded first, are multiplied exactly by TF32's tensor cores */
    for (int p = DDP_PRECISION_TF32; p <= DDP_PRECISION_BF16; p++) {
        m = ddp_math_settings((DdpPrecision)p, NULL);
        CU_ASSERT(m.tf32 && m.conv == DDP_CONV_MATH_TENSOR_OP && m.cublas_tf32 && !m.note);
        m = ddp_math_settings((DdpPrecision)p, "1");
        CU_ASSERT(m.tf32 && m.conv == DDP_CONV_MATH_TENSOR_OP && m.cublas_tf32);
    }
    /* NVIDIA_TF32_OVERRIDE=0 wins inside the libraries: say FP32 */
    m = ddp_math_settings(DDP_PRECISION_TF32, "0");
    CU_ASSERT(!m.tf32 && m.conv == DDP_CONV_MATH_FMA && !m.cublas_tf32);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m.note);
    CU_ASSERT_PTR_NOT_NULL(strstr(m.note, "NVIDIA_TF32_OVERRIDE=0"));
}

/* ---- cuDNN algorithm ---- */

/* A list as cuDNN's heuristics might give it: fastest-looking first. */
static const DdpConvCandidate LIST[] = {
    {.algo = 1, .ok = 1, .workspace = 0, .deterministic = 0, .math = DDP_CONV_MATH_FMA},          /* atomics */
    {.algo = 5, .ok = 1, .workspace = (size_t)2 << 30, .deterministic = 1, .math = DDP_CONV_MATH_FMA}, /* too big */
    {.algo = 6, .ok = 0, .workspace = 0, .deterministic = 1, .math = DDP_CONV_MATH_FMA},          /* not supported */
    {.algo = 7, .ok = 1, .workspace = 1 << 20, .deterministic = 1, .math = DDP_CONV_MATH_TENSOR_OP_CONV},
    {.algo = 2, .ok = 1, .workspace = 1 << 20, .deterministic = 1, .math = DDP_CONV_MATH_TENSOR_OP},
    {.algo = 3, .ok = 1, .workspace = 1 << 10, .deterministic = 1, .math = DDP_CONV_MATH_FMA},
    {.algo = 0, .ok = 1, .workspace = 0, .deterministic = 1, .math = DDP_CONV_MATH_FMA},
};
enum { NLIST = sizeof LIST / sizeof *LIST };

static void test_conv_choice(void)
{
    DdpConvRule fp32 = {.workspace_limit = DDP_CONV_WORKSPACE_LIMIT, .tf32 = 0, .allow_nondeterministic = 0};
    CU_ASSERT_EQUAL(LIST[ddp_conv_choose(LIST, NLIST, &fp32)].algo, 3);
    DdpConvRule tf32 = fp32;
    tf32.tf32 = 1;
    CU_ASSERT_EQUAL(LIST[ddp_conv_choose(LIST, NLIST, &tf32)].algo, 2); /* never 7: ALLOW_CONVERSION */
    /* a Winograd or FFT algorithm on tensor cores would round its transformed
     * operands again: passed over in tf32, taken on FP32 math */
    const DdpConvCandidate winograd[] = {
        {.algo = 6, .ok = 1, .workspace = 0, .deterministic = 1, .math = DDP_CONV_MATH_TENSOR_OP, .transforms = 1},
        {.algo = 6, .ok = 1, .workspace = 0, .deterministic = 1, .math = DDP_CONV_MATH_FMA, .transforms = 1},
        {.algo = 1, .ok = 1, .workspace = 0, .deterministic = 1, .math = DDP_CONV_MATH_TENSOR_OP},
    };
    CU_ASSERT_EQUAL(ddp_conv_choose(winograd, 3, &tf32), 1);
    CU_ASSERT_EQUAL(ddp_conv_choose(winograd + 2, 1, &tf32), 0);
    DdpConvRule none = fp32;
    none.zero_workspace = 1;
    CU_ASSERT_EQUAL(LIST[ddp_conv_choose(LIST, NLIST, &none)].algo, 0);
    DdpConvRule fast = fp32;
    fast.allow_nondeterministic = 1;
    CU_ASSERT_EQUAL(LIST[ddp_conv_choose(LIST, NLIST, &fast)].algo, 1);
    DdpConvRule big = fp32;
    big.workspace_limit = (size_t)4 << 30;
    CU_ASSERT_EQUAL(LIST[ddp_conv_choose(LIST, NLIST, &big)].algo, 5);
    /* nothing that passes: -1, never a guess */
    CU_ASSERT_EQUAL(ddp_conv_choose(LIST, 3, &fp32), -1);
    CU_ASSERT_EQUAL(ddp_conv_choose(LIST, 0, &fp32), -1);
}

/* The choice depends on the list and the rule only: the same list, in a
 * first run and in a resumed one, gives the same algorithm. */
static void test_conv_choice_is_the_lists_order(void)
{
    DdpConvRule fp32 = {.workspace_limit = DDP_CONV_WORKSPACE_LIMIT};
    DdpConvCandidate swapped[NLIST];
    memcpy(swapped, LIST, sizeof LIST);
    DdpConvCandidate t = swapped[5];
    swapped[5] = swapped[6];
    swapped[6] = t;
    CU_ASSERT_EQUAL(swapped[ddp_conv_choose(swapped, NLIST, &fp32)].algo, 0);
    CU_ASSERT_EQUAL(LIST[ddp_conv_choose(LIST, NLIST, &fp32)].algo, 3);
    /* the limit is a constant, not a share of whatever memory is free */
    CU_ASSERT_EQUAL((size_t)DDP_CONV_WORKSPACE_LIMIT, (size_t)512 << 20);
}

/* ---- memory ---- */

static void test_memory_estimate(void)
{
    const size_t MiB = 1 << 20;
    DdpGpuMemoryInput one = {.sm_major = 9, .world_size = 1, .nccl = 0};
    DdpGpuMemory m = ddp_gpu_memory_estimate(&one);
    CU_ASSERT_EQUAL(m.cublas_workspace, 32 * MiB);
    CU_ASSERT_EQUAL(m.cudnn_workspace, (size_t)DDP_CONV_WORKSPACE_LIMIT);
    CU_ASSERT_EQUAL(m.nccl_buffers, 0);
    CU_ASSERT(m.libraries > 0);
    CU_ASSERT_EQUAL(m.total, m.cudnn_workspace + m.cublas_workspace + m.nccl_buffers + m.libraries);
    CU_ASSERT_EQUAL(ddp_cublas_workspace_bytes(8), 4 * MiB);
    CU_ASSERT_EQUAL(ddp_cublas_workspace_bytes(10), 32 * MiB);

    /* 8 ranks, NCCL's defaults: 32 channels x 2 peers x (Simple 4 MiB + LL128 + LL) */
    DdpGpuMemoryInput eight = {.sm_major = 9, .world_size = 8, .nccl = 1};
    m = ddp_gpu_memory_estimate(&eight);
    CU_ASSERT_EQUAL(m.nccl_buffers, (size_t)32 * 2 * (4 * MiB + 4915200 + 512 * 1024));
    CU_ASSERT_EQUAL(m.total, m.cudnn_workspace + m.cublas_workspace + m.nccl_buffers + m.libraries);
    /* NCCL_BUFFSIZE and NCCL_MAX_NCHANNELS as NCCL reads them */
    eight.nccl_buffsize = "1048576";
    eight.nccl_max_nchannels = "4";
    CU_ASSERT_EQUAL(ddp_gpu_memory_estimate(&eight).nccl_buffers, (size_t)4 * 2 * (MiB + 4915200 + 512 * 1024));
    eight.nccl_buffsize = "0x100000";
    CU_ASSERT_EQUAL(ddp_gpu_memory_estimate(&eight).nccl_buffers, (size_t)4 * 2 * (MiB + 4915200 + 512 * 1024));
    /* nonsense is NCCL's default */
    eight.nccl_buffsize = "lots";
    eight.nccl_max_nchannels = "-3";
    CU_ASSERT_EQUAL(ddp_gpu_memory_estimate(&eight).nccl_buffers, (size_t)32 * 2 * (4 * MiB + 4915200 + 512 * 1024));
    /* two ranks: one peer */
    DdpGpuMemoryInput two = {.sm_major = 8, .world_size = 2, .nccl = 1};
    CU_ASSERT_EQUAL(ddp_gpu_memory_estimate(&two).nccl_buffers, (size_t)32 * 1 * (4 * MiB + 4915200 + 512 * 1024));
}

/* ---- launches ---- */

static void test_sync_launches(void)
{
    CU_ASSERT_EQUAL(ddp_sync_launches(NULL), 0);
    CU_ASSERT_EQUAL(ddp_sync_launches(""), 0);
    CU_ASSERT_EQUAL(ddp_sync_launches("0"), 0);
    CU_ASSERT_EQUAL(ddp_sync_launches("1"), 1);
    CU_ASSERT_EQUAL(ddp_debug_mode(NULL), 0);
    CU_ASSERT_EQUAL(ddp_debug_mode("0"), 0);
    CU_ASSERT_EQUAL(ddp_debug_mode("1"), 1);
}

/* ---- per-channel sums (channel_sum.h) ---- */

/* Every block and thread of one channel, walked as the GPU's loops walk them
 * (DDP_FOR_SAMPLES, DDP_FOR_PIXELS): each (sample, pixel) must be visited
 * exactly once, or a bias gradient would miss or double a term. */
static void check_channel_covered(int64_t channels, int64_t pixels, int n, int block)
{
    int64_t groups = ddp_channel_groups(channels, pixels, n, block);
    int lanes = ddp_plane_lanes(pixels, block);
    CU_ASSERT_TRUE(groups >= 1 && (channels * groups <= DDP_CHANNEL_BLOCKS || groups == 1));
    CU_ASSERT_TRUE(lanes >= 1 && lanes <= block && block % lanes == 0);
    CU_ASSERT_TRUE(lanes >= pixels || lanes == block); /* no sample is left a lane short */
    unsigned char *seen = calloc((size_t)n * (size_t)pixels + 1, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seen);
    int64_t most_terms = 0; /* of any one thread: what the launch table reports */
    for (int64_t g = 0; g < groups; g++)
        for (int t = 0; t < block; t++) {
            int64_t terms = 0;
            for (int s = ddp_group_first(g, groups, n) + t / lanes; s < ddp_group_first(g + 1, groups, n);
                 s += block / lanes)
                for (int64_t j = t % lanes; j < pixels; j += lanes, terms++)
                    seen[(int64_t)s * pixels + j]++;
            most_terms = terms > most_terms ? terms : most_terms;
        }
    CU_ASSERT_EQUAL(ddp_channel_thread_terms(channels, pixels, n, block), most_terms);
    int64_t wrong = 0;
    for (int64_t i = 0; i < (int64_t)n * pixels; i++)
        wrong += seen[i] != 1;
    if (wrong)
        fprintf(stderr, "\n  %lld channels, %lld pixels, %d samples: %lld of %lld visited other than once",
                (long long)channels, (long long)pixels, n, (long long)wrong, (long long)n * pixels);
    CU_ASSERT_EQUAL(wrong, 0);
    free(seen);
}

static void test_channel_sum_covers_each_term_once(void)
{
    const int64_t channels[] = {1, 10, 16, 32, 64, 128, 1000, 70000};
    const int64_t pixels[] = {1, 3, 49, 64, 196, 255, 256, 257, 576, 784, 5000};
    const int batches[] = {1, 7, 16, 64, 128, 513};
    for (size_t c = 0; c < sizeof channels / sizeof *channels; c++)
        for (size_t p = 0; p < sizeof pixels / sizeof *pixels; p++)
            for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
                check_channel_covered(channels[c], pixels[p], batches[b], 256);
    check_channel_covered(32, 576, 64, 1024);
}

/* The shares the kernels were measured with (mnist.net's first bias, 32
 * channels of 576 pixels, batch 64: 16 blocks of 4 samples each), and the
 * bounds: one pass of samples at least, the partials' room at most. */
static void test_channel_sum_shares(void)
{
    CU_ASSERT_EQUAL(ddp_plane_lanes(576, 256), 256);
    CU_ASSERT_EQUAL(ddp_plane_lanes(64, 256), 64);
    CU_ASSERT_EQUAL(ddp_plane_lanes(1, 256), 1);
    CU_ASSERT_EQUAL(ddp_channel_groups(32, 576, 64, 256), 16);
    CU_ASSERT_EQUAL(ddp_channel_groups(128, 1, 64, 256), 1);        /* 256 samples at once: one pass */
    CU_ASSERT_EQUAL(ddp_channel_groups(64, 64, 64, 256), 8);        /* 4 at once: 16 passes, 512 / 64 blocks */
    CU_ASSERT_EQUAL(ddp_channel_groups(1, 784, 4096, 256), DDP_CHANNEL_WANT);
    CU_ASSERT_EQUAL(ddp_channel_groups(70000, 1, 64, 256), 1);     /* beyond the room: one block a channel */
    CU_ASSERT_EQUAL(ddp_channel_groups(16, 784, 0, 256), 1);
    CU_ASSERT_EQUAL(ddp_group_first(3, 16, 64), 12);
}

/* Under nvcc, DDP_LAUNCH queues the kernel and then checks it by name. */
static void test_launch_is_checked_under_nvcc(void)
{
    if (test_run("command -v nvcc || test -x /usr/local/cuda/bin/nvcc", NULL) != 0) {
        fputs("\n  (skipped: no nvcc)", stderr);
        return;
    }
    char *out = NULL;
    int rc = test_run("set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; "
                      "printf '#include \"kernel.h\"\\nDDP_KERNEL relu1_forward(int n, float *y) { DDP_FOR(i, n) y[i] = 0; }\\n"
                      "void f(DdpCtx *ctx, int n, float *y) { DDP_LAUNCH(relu1_forward, n, n, y); }\\n' > $d/k.cu; "
                      "NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); "
                      "$NVCC -E -Iruntime $d/k.cu | tr -d ' \\n'",
                      &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "ctx->status=ddp_device_launched(\"relu1_forward\",ctx->stream)"));
    free(out);
}

/* cuDNN's timed algorithms as a line of text (conv_choices.h): written and
 * read back, a '|' in the GPU's name made '/', too small a buffer left "",
 * and every malformed line refused with status 2. */
static void test_conv_choices_text(void)
{
    const int fma = DDP_CONV_MATH_FMA, tensor = DDP_CONV_MATH_TENSOR_OP;
    DdpConvChoice convs[2] = {
        {0, {{1, fma, 1}, {1, fma, 1}, {0, fma, 0}, {0, fma, 1}, {0, fma, 1}, {1, fma, 1}}},
        {7, {{6, tensor, 1}, {5, fma, 1}, {63, 0, 1}, {1, tensor, 1}, {1, fma, 0}, {0, fma, 1}}}};
    DdpConvChoices c = {.library = 91900, .workspace = 1048576, .n = 2, .convs = convs};
    ddp_conv_choices_set_device(&c, "NVIDIA H200|x");
    const char *want = "cudnn=91900|device=NVIDIA H200/x|workspace=1048576|0:1.3.1,1.3.1,0.3.0,0.3.1,0.3.1,1.3.1|"
                       "7:6.1.1,5.3.1,63.0.1,1.1.1,1.3.0,0.3.1";
    char text[160];
    CU_ASSERT_EQUAL(ddp_conv_choices_text(&c, text, sizeof text), strlen(want));
    CU_ASSERT_STRING_EQUAL(text, want);
    char small[20] = "x";
    CU_ASSERT_EQUAL(ddp_conv_choices_text(&c, small, sizeof small), strlen(want));
    CU_ASSERT_STRING_EQUAL(small, "");

    DdpConvChoices back;
    CU_ASSERT_EQUAL_FATAL(ddp_conv_choices_parse(want, &back), DDP_OK);
    CU_ASSERT(back.library == 91900 && strcmp(back.device, "NVIDIA H200/x") == 0 && back.workspace == 1048576 &&
              back.n == 2);
    for (int i = 0; i < 2 && back.n == 2; i++) {
        CU_ASSERT_EQUAL(back.convs[i].id, convs[i].id);
        CU_ASSERT(memcmp(back.convs[i].algo, convs[i].algo, sizeof convs[i].algo) == 0);
    }
    ddp_conv_choices_free(&back);
    CU_ASSERT_EQUAL_FATAL(ddp_conv_choices_parse("cudnn=1|device=|workspace=9223372036854775807", &back), DDP_OK);
    CU_ASSERT(back.n == 0 && back.workspace == 9223372036854775807LL); /* no convs; the largest size */
    ddp_conv_choices_free(&back);

#define SIX "1.3.1,1.3.1,1.3.1,0.3.1,0.3.1,0.3.1"
    static const char *const malformed[] = {
        "",
        "cudnn=|device=x|workspace=0|0:" SIX,
        "cudnn=9|devise=x|workspace=0|0:" SIX,
        "cudnn=9|device=x|0:" SIX,                                    /* no workspace */
        "cudnn=9|device=x|workspace=-1|0:" SIX,
        "cudnn=9|device=x|workspace=9223372036854775808|0:" SIX,     /* 2^63 */
        "cudnn=9|device=x|workspace=0|0:1.3.1,1.3.1,1.3.1,0.3.1,0.3.1", /* five */
        "cudnn=9|device=x|workspace=0|0:" SIX ",1.3.1",               /* seven */
        "cudnn=9|device=x|workspace=0|0:64.3.1,1.3.1,1.3.1,0.3.1,0.3.1,0.3.1", /* no such algorithm */
        "cudnn=9|device=x|workspace=0|0:1.4.1,1.3.1,1.3.1,0.3.1,0.3.1,0.3.1",  /* no such math */
        "cudnn=9|device=x|workspace=0|0:1.3.2,1.3.1,1.3.1,0.3.1,0.3.1,0.3.1",
        "cudnn=9|device=x|workspace=0|-1:" SIX,
        "cudnn=9|device=x|workspace=0|0:" SIX "|0:" SIX,              /* conv 0 twice */
        "cudnn=9|device=x|workspace=0|0:" SIX "|",
        "cudnn=9|device=x|workspace=0|0:" SIX " ",
        "cudnn=99999999999|device=x|workspace=0",
    };
#undef SIX
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
        CU_ASSERT_EQUAL(ddp_conv_choices_parse(malformed[i], &back), DDP_BAD_INPUT);
        CU_ASSERT(back.convs == NULL && back.n == 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "recorded cuDNN algorithms are not readable"));
    }
}

/* --conv-algorithms FILE (conv_choices_file.h): a record written is read
 * back as it was, a newline after it or not; nothing there yet, or an empty
 * file, is "none" where it may be written; what is not a record, not a
 * regular file, too long or in no directory is refused with status 2,
 * naming the flag and the path. */
static void test_conv_choices_file(void)
{
    char dir[64];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddpc-conv-choices-XXXXXX");
    const char *record = "cudnn=91900|device=NVIDIA H200|workspace=1048576|0:1.3.1,1.3.1,0.3.1,0.3.1,0.3.1,1.3.1";
    char text[DDP_CONV_CHOICES_TEXT];
    int found = -1;

    const char *path = test_tmp_path(dir, "algos");
    CU_ASSERT_EQUAL(ddp_conv_choices_read_file("conv-algorithms", path, text, sizeof text, &found), DDP_OK);
    CU_ASSERT(found == 0 && text[0] == '\0');
    CU_ASSERT_EQUAL_FATAL(ddp_conv_choices_write_file("conv-algorithms", path, record), DDP_OK);
    size_t len = 0;
    char *bytes = test_read_file(path, &len);
    CU_ASSERT(bytes && len == strlen(record) + 1 && memcmp(bytes, record, len - 1) == 0 && bytes[len - 1] == '\n');
    free(bytes);
    CU_ASSERT_EQUAL(test_count_prefixed(dir, "algos.tmp"), 0);
    CU_ASSERT_EQUAL(ddp_conv_choices_read_file("conv-algorithms", path, text, sizeof text, &found), DDP_OK);
    CU_ASSERT(found == 1);
    CU_ASSERT_STRING_EQUAL(text, record);

    const char *bare = test_tmp_path(dir, "bare"); /* no newline: as a user may save it */
    harness_write_file(bare, record, strlen(record));
    CU_ASSERT_EQUAL(ddp_conv_choices_read_file("conv-algorithms", bare, text, sizeof text, &found), DDP_OK);
    CU_ASSERT(found == 1);
    CU_ASSERT_STRING_EQUAL(text, record);

    const char *empty = test_tmp_path(dir, "empty");
    harness_write_file(empty, "", 0);
    CU_ASSERT_EQUAL(ddp_conv_choices_read_file("conv-algorithms", empty, text, sizeof text, &found), DDP_OK);
    CU_ASSERT(found == 0 && text[0] == '\0');

    /* refused: each leaves nothing found and TEXT "" */
    static char xs[DDP_CONV_CHOICES_TEXT];
    memset(xs, 'x', sizeof xs);
    struct {
        const char *name, *content;
        size_t bytes; /* of content; without content the path is the directory or FIFO made below, or nothing */
        const char *says;
    } refused[] = {
        {"junk", "cudnn=9|device=x\n", 17, "recorded cuDNN algorithms are not readable"},
        {"two_lines", "cudnn=1|device=x|workspace=0\ncudnn=1|device=x|workspace=0\n", 58, "not readable"},
        {"nul", "cudnn=1|device=x|workspace=0\0|", 31, "it holds a NUL byte"},
        {"long", xs, sizeof xs, "longer than any record"},
        {"dir", NULL, 0, "not a regular file"},
        {"fifo", NULL, 0, "not a regular file"},
        {"none/algos", NULL, 0, "cannot write into"},
    };
    CU_ASSERT_FATAL(mkdir(test_tmp_path(dir, "dir"), 0755) == 0);
    CU_ASSERT_FATAL(mkfifo(test_tmp_path(dir, "fifo"), 0600) == 0); /* refused, not waited on */
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        const char *p = test_tmp_path(dir, refused[i].name);
        if (refused[i].content)
            harness_write_file(p, refused[i].content, refused[i].bytes);
        strcpy(text, "x");
        found = -1;
        CU_ASSERT_EQUAL(ddp_conv_choices_read_file("conv-algorithms", p, text, sizeof text, &found), DDP_BAD_INPUT);
        CU_ASSERT(found == 0 && text[0] == '\0');
        char start[200];
        snprintf(start, sizeof start, "--conv-algorithms %s: ", p);
        if (strncmp(ddp_error_message(), start, strlen(start)) != 0 || !strstr(ddp_error_message(), refused[i].says)) {
            fprintf(stderr, "\n%s: \"%s\"", refused[i].name, ddp_error_message());
            CU_FAIL("the message names the flag, the path and what is wrong");
        }
    }
    CU_ASSERT_EQUAL(ddp_conv_choices_write_file("conv-algorithms", test_tmp_path(dir, "dir"), record), DDP_BAD_INPUT);

    /* the longest record a run keeps (DDP_CONV_CHOICES_TEXT - 1 characters)
     * is written with its newline, a byte more, and read back; one byte more
     * is refused */
    char *longest = malloc(DDP_CONV_CHOICES_TEXT);
    CU_ASSERT_FATAL(longest != NULL);
    const size_t most = DDP_CONV_CHOICES_TEXT - 1, frame = strlen("cudnn=1|device=|workspace=0");
    size_t used = 0;
    char convs[DDP_CONV_CHOICES_TEXT];
    for (int id = 0;; id++) {
        char one[64];
        const int n = snprintf(one, sizeof one, "|%d:1.3.1,1.3.1,1.3.1,0.3.1,0.3.1,0.3.1", id);
        if (frame + used + (size_t)n > most)
            break;
        memcpy(convs + used, one, (size_t)n);
        used += (size_t)n;
    }
    convs[used] = '\0';
    const size_t pad = most - frame - used; /* the GPU's name fills the rest */
    CU_ASSERT_FATAL(pad < 200);
    size_t at = (size_t)sprintf(longest, "cudnn=1|device=");
    memset(longest + at, 'x', pad);
    at += pad;
    memcpy(longest + at, "|workspace=0", 12);
    memcpy(longest + at + 12, convs, used + 1);
    CU_ASSERT_EQUAL_FATAL(strlen(longest), most);
    const char *big = test_tmp_path(dir, "longest");
    CU_ASSERT_EQUAL(ddp_conv_choices_write_file("conv-algorithms", big, longest), DDP_OK);
    CU_ASSERT_EQUAL(ddp_conv_choices_read_file("conv-algorithms", big, text, sizeof text, &found), DDP_OK);
    CU_ASSERT(found == 1 && strcmp(text, longest) == 0);
    FILE *f = fopen(big, "a");
    CU_ASSERT_FATAL(f != NULL);
    fputc('\n', f);
    fclose(f);
    CU_ASSERT_EQUAL(ddp_conv_choices_read_file("conv-algorithms", big, text, sizeof text, &found), DDP_BAD_INPUT);
    CU_ASSERT(found == 0 && text[0] == '\0');
    free(longest);
    test_remove_tmpdir(dir);
}

/* What a run does about --conv-algorithms FILE (conv_choices_file.h), every
 * case: who times (a training run's rank 0 where FILE holds no record); what
 * rank 0 then does and says, FILE's record taken or not, a resumed
 * checkpoint's kept, a record written, none to write, an evaluation, a CPU. */
static void test_conv_file_decisions(void)
{
    CU_ASSERT(ddp_conv_file_times(0, 0, 0));
    CU_ASSERT(!ddp_conv_file_times(1, 0, 0)); /* FILE's record is taken instead */
    CU_ASSERT(!ddp_conv_file_times(0, 1, 0)); /* an evaluation */
    CU_ASSERT(!ddp_conv_file_times(0, 0, 1)); /* rank 1 takes rank 0's */

    static const struct {
        DdpConvFileRun run;
        DdpConvFileAction want;
    } cases[] = {
        {{.gpu = 0, .found = 1, .offered = 1, .taken = 0}, DDP_CONV_FILE_CPU},
        {{.gpu = 0, .found = 0, .record = 0}, DDP_CONV_FILE_CPU},
        {{.gpu = 1, .found = 1, .offered = 1, .taken = 1, .runs_files = 1}, DDP_CONV_FILE_TAKEN},
        {{.gpu = 1, .found = 1, .offered = 1, .taken = 0, .record = 1}, DDP_CONV_FILE_NOT_TAKEN},
        {{.gpu = 1, .found = 1, .offered = 1, .taken = 0, .eval_only = 1}, DDP_CONV_FILE_NOT_TAKEN},
        {{.gpu = 1, .found = 1, .offered = 0, .taken = 1, .runs_files = 0, .record = 1}, DDP_CONV_FILE_CHECKPOINT_KEPT},
        {{.gpu = 1, .found = 1, .offered = 0, .taken = 1, .runs_files = 1, .record = 1}, DDP_CONV_FILE_TAKEN},
        {{.gpu = 1, .found = 0, .record = 1}, DDP_CONV_FILE_WRITE},
        {{.gpu = 1, .found = 0, .record = 0}, DDP_CONV_FILE_NOTHING_TO_WRITE},
        {{.gpu = 1, .found = 0, .eval_only = 1, .record = 1}, DDP_CONV_FILE_EVAL_ONLY},
        {{.gpu = 1, .found = 0, .eval_only = 1, .record = 0}, DDP_CONV_FILE_EVAL_ONLY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const DdpConvFileAction got = ddp_conv_file_action(&cases[i].run);
        if (got != cases[i].want)
            fprintf(stderr, "\ncase %zu: action %d, not %d", i, (int)got, (int)cases[i].want);
        CU_ASSERT_EQUAL(got, cases[i].want);
    }
}

/* The largest step cuDNN's 32-bit indexing takes through a conv: the
 * larger side decides, and a step one more would pass 2^31-1 values
 * (cifar10.net's second conv, 64 channels of 32x32 out, at 32768 samples
 * makes 2^31: refused at 32768, taken at 32767). */
static void test_cudnn_most_batch(void)
{
    int64_t out = 64 * 32 * 32, in = 32 * 32 * 32;
    int64_t most = ddp_cudnn_most_batch(in, out);
    CU_ASSERT_EQUAL(most, 32767);
    CU_ASSERT(most * out <= INT32_MAX && (most + 1) * out > INT32_MAX);
    CU_ASSERT_EQUAL(ddp_cudnn_most_batch(out, in), most);
    CU_ASSERT_EQUAL(ddp_cudnn_most_batch(1, 1), INT32_MAX);
    CU_ASSERT_EQUAL(ddp_cudnn_most_batch((int64_t)INT32_MAX, 1), 1);
    CU_ASSERT_EQUAL(ddp_cudnn_most_batch((int64_t)INT32_MAX + 1, 1), 0); /* sema refuses such a sample first */
    /* the refusal ops_cuda.cu's plan makes: status 2, the conv counted from 1 */
    CU_ASSERT_EQUAL(ddp_cudnn_conv_check(1, 32767, in, out), DDP_OK);
    ddp_error_clear();
    CU_ASSERT_EQUAL(ddp_cudnn_conv_check(1, 32768, in, out), DDP_BAD_INPUT);
    CU_ASSERT_STRING_EQUAL(ddp_error_message(), "the net's conv number 2 (32768 values a sample in, 65536 out) would "
                           "hold 2147483648 values in one tensor at 32768 samples a step, more than the 2147483647 "
                           "(2^31-1) cuDNN indexes: use a smaller batch (at most 32767 samples a step on each GPU)");
}

void suite_device_rules(void)
{
    static const TestCase cases[] = {
        {"one visible GPU is the rank's (srun --gpus-per-task=1); else GPU LOCAL_RANK", test_one_visible_gpu_is_the_ranks},
        {"a local rank beyond the visible GPUs is refused, with the reason", test_too_few_gpus_refused},
        {"ranks started without a launcher: every GPU of several; one for --predict; --nproc-per-node up to the GPUs",
         test_local_ranks_to_start},
        {"a launcher's ranks fewer than their node's GPUs leave the rest idle, said", test_gpus_left_idle},
        {"FP32 is FMA and CUBLAS_DEFAULT_MATH; TF32 is TENSOR_OP; NVIDIA_TF32_OVERRIDE=0 wins", test_math_settings},
        {"cuDNN algorithm: first in the list that runs, fits, keeps the math, is deterministic", test_conv_choice},
        {"cuDNN algorithm: chosen by the list's order and a constant limit, never by timing",
         test_conv_choice_is_the_lists_order},
        {"memory for cuDNN, cuBLAS, NCCL: the documented defaults and NCCL's variables", test_memory_estimate},
        {"DDP_SYNC_LAUNCHES, DDP_DEBUG", test_sync_launches},
        {"cuDNN's 2^31-1 values a tensor: the largest step a conv's sizes allow", test_cudnn_most_batch},
        {"DDP_LAUNCH under nvcc checks each launch, naming the kernel", test_launch_is_checked_under_nvcc},
        {"per-channel sums on a GPU: every (sample, pixel) of a channel summed once", test_channel_sum_covers_each_term_once},
        {"per-channel sums on a GPU: blocks per channel and threads per sample", test_channel_sum_shares},
        {"cuDNN's timed algorithms as text: written, read back, malformed lines refused", test_conv_choices_text},
        {"cuDNN's algorithms in a file (--conv-algorithms): written, read back; none yet; bad files refused",
         test_conv_choices_file},
        {"--conv-algorithms: who times, and what rank 0 does about FILE, in every case", test_conv_file_decisions},
        {NULL, NULL},
    };
    test_add_suite("device_rules [gcc, nvcc]", cases);
}
