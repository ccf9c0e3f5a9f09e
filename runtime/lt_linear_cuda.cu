/*
 * lt_linear_cuda.cu: lt_linear.h on cuBLASLt.
 *
 * Row-major y (n x out) = x (n x in) . w^T, w being out x in, is column-major
 * y^T (out x n) = w' . x', where w' is w read column-major (in x out, ld in),
 * transposed, and x' is x read column-major (in x n, ld in): so A is w with
 * TRANSA = T, B is x, and D is y with ld out. Its rows are y's columns, the
 * out features, which is what cuBLASLt's bias vector runs along.
 */
#include "lt_linear.h"

#include <cublasLt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int n, in, out, tf32, alignment; /* the key; alignment: of x, w and y, in bytes (4..16) */
    int bias_alignment;              /* the key too: of the bias (4..256); under 16, never fused */
    DdpEpilogue epilogue;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    int usable; /* an algorithm was found, and cuBLASLt has not refused it */
} Plan;

struct DdpLtLinear {
    cublasLtHandle_t handle;
    cudaStream_t stream;
    void *workspace;
    size_t workspace_bytes;
    /* The plans made so far: a net has a few linear layers, each at its
     * batch, the epoch's last and evaluation's, so a short list searched in
     * order, grown as needed (host memory, on a shape's first call, which
     * is never inside a capture): never full, so that which calls are
     * fused depends on the call alone, not on the shapes seen before. */
    Plan *plans;
    int nplans, cap;
};

cublasStatus_t ddp_lt_linear_create(DdpLtLinear **out, cudaStream_t stream, void *workspace, size_t bytes)
{
    *out = NULL;
    DdpLtLinear *lt = (DdpLtLinear *)calloc(1, sizeof *lt);
    if (!lt)
        return CUBLAS_STATUS_ALLOC_FAILED;
    cublasStatus_t s = cublasLtCreate(&lt->handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(lt);
        return s;
    }
    lt->stream = stream;
    lt->workspace = workspace;
    lt->workspace_bytes = bytes;
    *out = lt;
    return CUBLAS_STATUS_SUCCESS;
}

static void plan_free(Plan *p)
{
    if (p->op)
        cublasLtMatmulDescDestroy(p->op);
    if (p->a)
        cublasLtMatrixLayoutDestroy(p->a);
    if (p->b)
        cublasLtMatrixLayoutDestroy(p->b);
    if (p->d)
        cublasLtMatrixLayoutDestroy(p->d);
}

void ddp_lt_linear_destroy(DdpLtLinear *lt)
{
    if (!lt)
        return;
    for (int i = 0; i < lt->nplans; i++)
        plan_free(&lt->plans[i]);
    free(lt->plans);
    cublasLtDestroy(lt->handle);
    free(lt);
}

/* The largest power of two up to MOST that every pointer is a multiple of:
 * cuBLASLt's heuristics pick only algorithms that load operands so aligned
 * (ddpc's arena places tensors on 128 bytes, but a hand-edited .cu may
 * place them anywhere). */
static int alignment_of(const void *const *p, int count, int most)
{
    int align = most;
    for (int i = 0; i < count; i++)
        while (align > 4 && (uintptr_t)p[i] % (uintptr_t)align)
            align /= 2;
    return align;
}

#define LT_TRY(call)                                                                                   \
    do {                                                                                               \
        cublasStatus_t s_ = (call);                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
            snprintf(why, why_len, "%s: %s", #call, cublasGetStatusName(s_));                          \
            return 0;                                                                                  \
        }                                                                                              \
    } while (0)

/* Makes P's descriptors and asks for its algorithm for a call with BIAS;
 * 0 with WHY on a failure. */
static int plan_make(DdpLtLinear *lt, Plan *p, const float *bias, char *why, size_t why_len)
{
    const cublasComputeType_t compute = p->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue =
        p->epilogue == DDP_EPILOGUE_BIAS_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    LT_TRY(cublasLtMatmulDescCreate(&p->op, compute, CUDA_R_32F));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    /* The heuristics read no bias, but judge its alignment from the pointer
     * (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER): given none, they may
     * pick a kernel that assumes more than the call's bias has. So they see
     * the call's, and the plan's key holds its alignment. */
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_32F, (uint64_t)p->in, (uint64_t)p->out, p->in));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_32F, (uint64_t)p->in, (uint64_t)p->n, p->in));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, (uint64_t)p->out, (uint64_t)p->n, p->out));

    cublasLtMatmulPreference_t pref = NULL;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    const uint32_t align = (uint32_t)p->alignment;
    const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &lt->workspace_bytes, sizeof lt->workspace_bytes);
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
        s = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align);
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt->handle, p->op, p->a, p->b, p->d, p->d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    /* NOT_SUPPORTED: no heuristic for this configuration, which is "none found" */
    if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) {
        snprintf(why, why_len, "cublasLtMatmulAlgoGetHeuristic: %s", cublasGetStatusName(s));
        return 0;
    }
    p->usable = s == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (p->usable)
        p->algo = result.algo;
    return 1;
}

/* The plan for the key, made on first use; NULL with WHY on a failure. */
static Plan *plan_for(DdpLtLinear *lt, int tf32, int n, int in, int out, int alignment, const float *bias,
                      DdpEpilogue epilogue, char *why, size_t why_len)
{
    const void *bias_pointer[] = {bias};
    const int bias_alignment = alignment_of(bias_pointer, 1, 256);
    for (int i = 0; i < lt->nplans; i++) {
        Plan *p = &lt->plans[i];
        if (p->n == n && p->in == in && p->out == out && p->tf32 == tf32 && p->alignment == alignment &&
            p->bias_alignment == bias_alignment && p->epilogue == epilogue)
            return p;
    }
    if (lt->nplans == lt->cap) {
        int cap = lt->cap ? 2 * lt->cap : 16;
        Plan *grown = (Plan *)realloc(lt->plans, sizeof *grown * (size_t)cap);
        if (!grown) {
            snprintf(why, why_len, "out of memory for cuBLASLt's plans");
            return NULL;
        }
        lt->plans = grown;
        lt->cap = cap;
    }
    Plan *p = &lt->plans[lt->nplans++];
    *p = Plan{n, in, out, tf32, alignment, bias_alignment, epilogue, NULL, NULL, NULL, NULL, cublasLtMatmulAlgo_t{}, 0};
    /* cuBLASLt's alignment preferences cover A, B, C and D, not the bias: a
     * kernel it picks may load the bias 16 bytes at a time, and faults
     * (misaligned address, which ends the CUDA context) on one that is not
     * so aligned. ddpc puts every parameter on 16 bytes (buckets.h); a
     * hand-edited .cu might not, and that plan stays unfused. */
    if (bias_alignment < 16)
        return p;
    if (!plan_make(lt, p, bias, why, why_len)) {
        plan_free(p);
        lt->nplans--;
        return NULL;
    }
    return p;
}

void ddp_lt_linear_counts(const DdpLtLinear *lt, int *fused, int *refused)
{
    *fused = *refused = 0;
    for (int i = 0; lt && i < lt->nplans; i++)
        ++*(lt->plans[i].usable ? fused : refused);
}

int ddp_lt_linear_forward(DdpLtLinear *lt, int tf32, int n, int in, int out, const float *x, const float *w,
                          const float *bias, DdpEpilogue epilogue, float *y, char *why, size_t why_len)
{
    const void *pointers[] = {x, w, y};
    Plan *p = plan_for(lt, tf32, n, in, out, alignment_of(pointers, 3, 16), bias, epilogue, why, why_len);
    if (!p)
        return -1;
    if (!p->usable)
        return 0;
    /* the bias's address is the call's: a host-side attribute, read when the
     * matmul is queued (and so captured with it) */
    cublasStatus_t s =
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, why_len, "cublasLtMatmulDescSetAttribute(BIAS_POINTER): %s", cublasGetStatusName(s));
        return -1;
    }
    const float one = 1.0f, zero = 0.0f;
    s = cublasLtMatmul(lt->handle, p->op, &one, w, p->a, x, p->b, &zero, y, p->d, y, p->d, &p->algo, lt->workspace,
                       lt->workspace_bytes, lt->stream);
    /* refused before anything was queued (a bias it cannot load, say): the
     * caller's way from here on, for this plan */
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE) {
        p->usable = 0;
        return 0;
    }
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, why_len, "cublasLtMatmul: %s", cublasGetStatusName(s));
        return -1;
    }
    return 1;
}
