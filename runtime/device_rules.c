/*
 * device_rules.c: the GPU side's decisions as plain functions (device_rules.h).
 *
 * Why here and not in the .cu files: the machines that build and test this
 * project mostly have no GPU, and a rule that only runs on a GPU is a rule
 * nobody has run. The .cu files gather the inputs (a device count, cuDNN's
 * list of algorithms, an environment variable) and apply the answer.
 */
#include "device_rules.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- which GPU a rank drives ---- */

int ddp_gpu_choose_device(int visible, int local_rank, int local_world_size, char *why, size_t len)
{
    if (why && len)
        why[0] = '\0';
    if (visible < 1) {
        if (why && len)
            snprintf(why, len, "no GPU is visible here");
        return -1;
    }
    if (local_rank < 0 || (local_world_size > 0 && local_rank >= local_world_size)) {
        if (why && len)
            snprintf(why, len, "internal error: local rank %d of %d", local_rank, local_world_size);
        return -1;
    }
    /* One GPU shown: the launcher chose it for this rank (or the node has one). */
    if (visible == 1)
        return 0;
    if (local_rank < visible)
        return local_rank;
    if (why && len)
        snprintf(why, len, "local rank %d has no GPU: this machine shows %d (CUDA_VISIBLE_DEVICES decides which)",
                 local_rank, visible);
    return -1;
}

int ddp_local_ranks_to_start(int is_gpu, int gpus, int64_t asked, int predict, char *why, size_t len)
{
    if (why && len)
        why[0] = '\0';
    /* a GPU each (a CPU build's ranks need none): the ranks started here all
     * see the same GPUs, and NCCL refuses two ranks of a host on one GPU
     * ("Duplicate GPU detected") once every rank has started */
    if (asked > 0 && is_gpu && gpus == 0) {
        if (why && len)
            snprintf(why, len, "--nproc-per-node %lld: no GPU is visible here", (long long)asked);
        return -1;
    }
    if (asked > gpus && is_gpu) {
        if (why && len)
            snprintf(why, len, "--nproc-per-node %lld: NCCL runs one rank per GPU, and this machine shows %d "
                     "(CUDA_VISIBLE_DEVICES decides which)", (long long)asked, gpus);
        return -1;
    }
    if (asked > 0)
        return (int)asked;
    return is_gpu && !predict && gpus > 1 ? gpus : 0;
}

int ddp_gpus_left_idle(DdpLaunch launch, int visible, int local_world_size)
{
    const int by_launcher = launch == DDP_LAUNCH_TORCHRUN || launch == DDP_LAUNCH_MPIRUN || launch == DDP_LAUNCH_SRUN;
    return by_launcher && visible > 1 && local_world_size >= 1 && visible > local_world_size
               ? visible - local_world_size : 0;
}

/* ---- math mode ---- */

static int set_and_not_zero(const char *v) { return v && *v && strcmp(v, "0") != 0; }

DdpMathSettings ddp_math_settings(DdpPrecision precision, const char *tf32_override)
{
    DdpMathSettings m = {.tf32 = 0, .conv = DDP_CONV_MATH_FMA, .cublas_tf32 = 0, .note = NULL};
    if (precision == DDP_PRECISION_FP32)
        return m;
    if (tf32_override && strcmp(tf32_override, "0") == 0) {
        m.note = "NVIDIA_TF32_OVERRIDE=0 turns TF32 tensor cores off in cuDNN and cuBLAS: FP32 math";
        return m;
    }
    /* TENSOR_OP, not DEFAULT (which leaves the choice to cuDNN) and never
     * ALLOW_CONVERSION (which lets cuDNN convert float data to fp16). */
    m.tf32 = 1;
    m.conv = DDP_CONV_MATH_TENSOR_OP;
    m.cublas_tf32 = 1;
    return m;
}

/* ---- cuDNN algorithm choice ---- */

/* Tensor cores only where the run's precision rounds the operands (tf32 =
 * 1) and the algorithm multiplies them as they are: an FFT's or Winograd's
 * transformed operands would be rounded to TF32 once more, an error the
 * precision does not promise. */
static int math_allowed(const DdpConvCandidate *c, int tf32)
{
    switch (c->math) {
    case DDP_CONV_MATH_FMA: return 1;
    case DDP_CONV_MATH_DEFAULT:
    case DDP_CONV_MATH_TENSOR_OP: return tf32 && !c->transforms;
    case DDP_CONV_MATH_TENSOR_OP_CONV: return 0;
    }
    return 0;
}

int ddp_conv_choose(const DdpConvCandidate *c, int count, const DdpConvRule *rule)
{
    for (int i = 0; i < count; i++) {
        if (!c[i].ok || c[i].workspace > rule->workspace_limit || (rule->zero_workspace && c[i].workspace != 0) ||
            !math_allowed(&c[i], rule->tf32) || (!c[i].deterministic && !rule->allow_nondeterministic))
            continue;
        return i;
    }
    return -1;
}

/* ---- device memory the libraries take ---- */

int64_t ddp_cudnn_most_batch(int64_t in_values, int64_t out_values)
{
    int64_t larger = in_values > out_values ? in_values : out_values;
    return larger > 0 ? DDP_CUDNN_MOST_VALUES / larger : DDP_CUDNN_MOST_VALUES;
}

DdpStatus ddp_cudnn_conv_check(int id, int n, int64_t in_values, int64_t out_values)
{
    const int64_t most = ddp_cudnn_most_batch(in_values, out_values);
    if (n <= most)
        return DDP_OK;
    const int64_t larger = in_values > out_values ? in_values : out_values;
    return DDP_ERR(DDP_BAD_INPUT, "the net's conv number %d (%lld values a sample in, %lld out) would hold %lld values "
                   "in one tensor at %d samples a step, more than the %lld (2^31-1) cuDNN indexes: use a smaller batch "
                   "(at most %lld samples a step on each GPU)", id + 1, (long long)in_values, (long long)out_values,
                   (long long)larger * n, n, (long long)DDP_CUDNN_MOST_VALUES, (long long)most);
}

size_t ddp_cublas_workspace_bytes(int sm_major) { return sm_major >= 9 ? (size_t)32 << 20 : (size_t)4 << 20; }

/* NCCL's buffers, from its source (src/init.cc): per channel and per peer it
 * connects to, one receive buffer per protocol: Simple NCCL_BUFFSIZE (4 MiB
 * by default), LL128 4,915,200 bytes, LL 512 KiB. A ring connects each rank
 * to 2 peers and a tree to up to 3 more; counted here as 2, with
 * NCCL_MAX_NCHANNELS channels, 32 (NCCL's MAXCHANNELS) when unset. An upper
 * estimate for one node: NCCL opens fewer channels on slower links. */
enum { NCCL_LL128_BYTES = 4915200, NCCL_LL_BYTES = 512 << 10, NCCL_PEERS = 2, NCCL_CHANNELS = 32 };
static const size_t NCCL_SIMPLE_BYTES = (size_t)4 << 20;

/* The modules cuDNN and cuBLAS load and their handles' own allocations: NVIDIA
 * publishes no figure. With lazy loading (CUDA_MODULE_LOADING=LAZY, the
 * default since CUDA 12.2) only the kernels used are loaded; this allowance
 * is a margin, to be replaced by a figure measured on a GPU: each run says
 * what it took of the GPU beside the whole estimate, and tests/gpu/run.sh
 * checks that the estimate covers it. */
static const size_t LIBRARY_ALLOWANCE = (size_t)256 << 20;

static long long positive_or(const char *v, long long fallback)
{
    if (!v || !*v)
        return fallback;
    char *end = NULL;
    long long x = strtoll(v, &end, 0);
    return end && *end == '\0' && x > 0 ? x : fallback;
}

DdpGpuMemory ddp_gpu_memory_estimate(const DdpGpuMemoryInput *in)
{
    DdpGpuMemory m;
    memset(&m, 0, sizeof m);
    m.cudnn_workspace = DDP_CONV_WORKSPACE_LIMIT;
    m.cublas_workspace = ddp_cublas_workspace_bytes(in->sm_major);
    m.libraries = LIBRARY_ALLOWANCE;
    if (in->nccl) {
        long long channels = positive_or(in->nccl_max_nchannels, NCCL_CHANNELS);
        long long simple = positive_or(in->nccl_buffsize, (long long)NCCL_SIMPLE_BYTES);
        int peers = in->world_size - 1 < NCCL_PEERS ? (in->world_size > 1 ? in->world_size - 1 : 1) : NCCL_PEERS;
        if (channels > 64)
            channels = 64;
        m.nccl_buffers = (size_t)channels * (size_t)peers *
                         ((size_t)simple + (size_t)NCCL_LL128_BYTES + (size_t)NCCL_LL_BYTES);
    }
    m.total = m.cudnn_workspace + m.cublas_workspace + m.nccl_buffers + m.libraries;
    return m;
}

/* ---- kernel launches ---- */

int ddp_sync_launches(const char *value) { return set_and_not_zero(value); }
int ddp_debug_mode(const char *value) { return set_and_not_zero(value); }
