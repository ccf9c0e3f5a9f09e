/*
 * device_rules.h: the decisions the GPU side (device_cuda.cu, ops_cuda.cu,
 * pg_nccl.cu) makes, written as plain C over plain values, so that the unit
 * tests run them on a machine with no GPU and the .cu files stay thin callers
 * that only ask CUDA, cuDNN or NCCL for the inputs and apply the answer.
 *
 * In both libraries (libddprt.a and libddprt_cuda.a): nothing here calls a
 * device library.
 */
#ifndef DDPRT_DEVICE_RULES_H
#define DDPRT_DEVICE_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "precision.h"  // DdpPrecision
#include "status.h"     // DdpStatus, DDP_ERR: ddp_cudnn_conv_check
#include "topology.h"   // DdpLaunch

#ifdef __cplusplus
extern "C" {
#endif

/* ---- which GPU a rank drives -------------------------------------------------
 *
 * VISIBLE GPUs (after CUDA_VISIBLE_DEVICES), this rank's LOCAL_RANK among
 * LOCAL_WORLD_SIZE ranks on its node. Exactly one visible GPU is this rank's
 * whatever its local rank: a launcher that gives each rank its own GPU
 * (srun --gpus-per-task=1, or a script setting CUDA_VISIBLE_DEVICES per rank)
 * shows each rank one GPU numbered 0. Otherwise GPU LOCAL_RANK, as torchrun's
 * torch.cuda.set_device(local_rank). Returns the device number, or -1 with
 * the reason in WHY. */
int ddp_gpu_choose_device(int visible, int local_rank, int local_world_size, char *why, size_t len);

/* How many local ranks a program that no launcher started starts itself
 * (0: it trains as the one rank): a GPU build (IS_GPU) that sees GPUS GPUs,
 * or a CPU build. ASKED is --nproc-per-node (0: not given); PREDICT, whether
 * the run is --predict, which classifies on one rank. Not asked, a GPU
 * build with several GPUs starts one rank on each, as the contract's bare
 * ./OUT does. Asked for more ranks than GPUs (they all see the same GPUs,
 * and NCCL runs one rank per GPU of a host), the ranks would fail once every
 * rank had started, as a failure (status 1) that --max-restarts would
 * restart in vain: -1 instead, with the reason in WHY. */
int ddp_local_ranks_to_start(int is_gpu, int gpus, int64_t asked, int predict, char *why, size_t len);

/* How many of the VISIBLE GPUs a node's LOCAL_WORLD_SIZE ranks leave idle,
 * where torchrun, mpirun or srun started them (LAUNCH): srun
 * --ntasks-per-node 1 on a node of 4 GPUs runs one rank on GPU 0, where a
 * bare ./OUT would have started four. 0 where each rank sees one GPU (srun
 * --gpus-per-task=1) or the ranks use them all, and for the program's own
 * ranks, whose count was asked for or is every GPU. */
int ddp_gpus_left_idle(DdpLaunch launch, int visible, int local_world_size);

/* ---- math mode -------------------------------------------------------------- */

/* The math a cuDNN convolution may use, as cuDNN's cudnnMathType_t names it;
 * ops_cuda.cu maps one to the other. */
typedef enum {
    DDP_CONV_MATH_DEFAULT,        /* CUDNN_DEFAULT_MATH: TF32 allowed on Ampere and later for float data */
    DDP_CONV_MATH_TENSOR_OP,      /* CUDNN_TENSOR_OP_MATH: with float data, TF32 tensor cores */
    DDP_CONV_MATH_TENSOR_OP_CONV, /* CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: may drop float data to fp16 */
    DDP_CONV_MATH_FMA,            /* CUDNN_FMA_MATH: plain FP32 FMA, never tensor cores */
} DdpConvMath;
#define DDP_CONV_MATH_LAST DDP_CONV_MATH_FMA /* for readers of a DdpConvMath's number (conv_choices.c) */

typedef struct {
    int tf32;             /* 1: TF32 tensor cores in cuDNN and cuBLAS */
    DdpConvMath conv;     /* set on every convolution descriptor */
    int cublas_tf32;      /* 1: CUBLAS_TF32_TENSOR_OP_MATH, 0: CUBLAS_DEFAULT_MATH (FP32 for cublasSgemm) */
    const char *note;     /* NULL, or one line why the asked mode is not the one in force */
} DdpMathSettings;

/* The libraries' math for a run's PRECISION, given NVIDIA_TF32_OVERRIDE's
 * value (NULL when unset). FP32 for fp32; TF32 tensor cores for tf32 and
 * bf16, whose operands ops_cuda.cu rounds first (a tf32 or bf16 value is
 * exact in TF32, so the tensor cores multiply it exactly). NVIDIA's
 * libraries read NVIDIA_TF32_OVERRIDE themselves: "0" turns TF32 off whatever
 * the program asks, any other value changes nothing (it never turns TF32 on);
 * so TF32 asked for under NVIDIA_TF32_OVERRIDE=0 is reported as FP32, with a
 * note. */
DdpMathSettings ddp_math_settings(DdpPrecision precision, const char *tf32_override);

/* ---- cuDNN algorithm choice -------------------------------------------------- */

/* One algorithm as cudnnGetConvolution*Algorithm_v7 lists it. */
typedef struct {
    int algo;
    int ok;               /* status == CUDNN_STATUS_SUCCESS */
    size_t workspace;     /* bytes */
    int deterministic;    /* determinism == CUDNN_DETERMINISTIC */
    DdpConvMath math;
    int transforms;       /* FFT or Winograd: transforms the operands before multiplying them */
} DdpConvCandidate;

typedef struct {
    size_t workspace_limit;
    int zero_workspace;          /* only algorithms needing no workspace */
    int tf32;                    /* DdpMathSettings.tf32 */
    int allow_nondeterministic;
} DdpConvRule;

/* The workspace cuDNN may take: a constant, not a share of the free memory,
 * so that every process, first run or resumed, lists the same candidates
 * and chooses the same algorithm. Also the start-up memory check's figure
 * for it. */
enum { DDP_CONV_WORKSPACE_LIMIT = 512 << 20 };

/* The index of the first of COUNT candidates, in the order given (cuDNN's
 * heuristic order: fixed for a GPU model, a cuDNN version and a shape; or,
 * with DDP_CUDNN_BENCHMARK=1, cuDNN's timings, fastest first), that ran, fits the rule's workspace, keeps to the run's math
 * (FP32: FMA only; TF32: not ALLOW_CONVERSION, which may compute in fp16, and
 * tensor-op math only for an algorithm that does not transform its operands)
 * and is deterministic unless that is waived. -1 if none. */
int ddp_conv_choose(const DdpConvCandidate *c, int count, const DdpConvRule *rule);

/* ---- cuDNN's sizes ----------------------------------------------------------- */

/* cuDNN's convolutions index a tensor in 32 bits: at most 2^31-1 values
 * (PyTorch splits a larger batch for them, as canUse32BitIndexMath says;
 * here a step that large is refused at start-up, named, where cuDNN would
 * fail or overflow mid-run). The most samples a step may hold through a
 * conv of IN_VALUES values a sample in and OUT_VALUES out (each at least 1). */
#define DDP_CUDNN_MOST_VALUES INT32_MAX
int64_t ddp_cudnn_most_batch(int64_t in_values, int64_t out_values);
/* DDP_BAD_INPUT, naming conv ID (the net's convs counted from 0, in the
 * file's order; said from 1) and the largest step it takes, where a step of
 * N samples through it passes DDP_CUDNN_MOST_VALUES a tensor: ops_cuda.cu's
 * plan calls it, before cuDNN sees the sizes. */
DdpStatus ddp_cudnn_conv_check(int id, int n, int64_t in_values, int64_t out_values);

/* ---- device memory the libraries take --------------------------------------- */

typedef struct {
    int sm_major;             /* compute capability's major number */
    int world_size;
    int nccl;                 /* 1 when a real NCCL communicator will be opened */
    const char *nccl_buffsize;     /* NCCL_BUFFSIZE's value, NULL if unset */
    const char *nccl_max_nchannels;/* NCCL_MAX_NCHANNELS's value, NULL if unset */
} DdpGpuMemoryInput;

typedef struct {
    size_t cudnn_workspace, cublas_workspace, nccl_buffers, libraries;
    size_t total;
} DdpGpuMemory;

/* cuBLAS's workspace: its documentation's recommended size, which
 * ops_cuda.cu allocates and hands it (cublasSetWorkspace): 32 MiB on Hopper
 * (sm_90) and later, 4 MiB before. */
size_t ddp_cublas_workspace_bytes(int sm_major);

/* What cuDNN, cuBLAS and NCCL will take of the device's memory beyond the
 * trainer's own buffers, estimated at start-up before any of them is opened.
 * The CUDA context is not in it: the device is open when the free memory is
 * read, so the context is already taken from it. See device_rules.c for the
 * sources of each figure. */
DdpGpuMemory ddp_gpu_memory_estimate(const DdpGpuMemoryInput *in);

/* ---- kernel launches ------------------------------------------------------- */

/* 1 when DDP_SYNC_LAUNCHES's VALUE (NULL when unset) asks to wait for every
 * generated kernel, so that a kernel that faults is named, at the cost of a
 * host synchronisation per launch (as CUDA_LAUNCH_BLOCKING=1, which also
 * works, but names nothing). */
int ddp_sync_launches(const char *value);
/* 1 when DDP_DEBUG's VALUE asks for the debug mode: every layer's work waited
 * for and checked, naming its layer and .net line (DDP_LAYER_DONE, kernel.h),
 * and every launch too, as DDP_SYNC_LAUNCHES=1. */
int ddp_debug_mode(const char *value);

#ifdef __cplusplus
}
#endif

#endif
