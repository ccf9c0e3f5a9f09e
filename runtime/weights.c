/*
 * weights.c: initial weights, --init and --export (see weights.h).
 *
 * The initialisation reproduces PyTorch's bit for bit, not just its
 * distribution: after torch.manual_seed(seed), nn.Conv2d and nn.Linear draw
 * their weight (kaiming_uniform_ with a=sqrt(5)) and then their bias
 * (uniform_(-1/sqrt(fan_in), 1/sqrt(fan_in))) from the default CPU generator,
 * an mt19937, one 32-bit draw per element. uniform_ on a float tensor keeps
 * the low 24 bits of a draw, scales them into [0, 1) and then into
 * [from, to) in float arithmetic, with from and to the bounds rounded to
 * float, as one fused multiply-add: torch's CPU kernels are compiled per
 * instruction set and the AVX2 and AVX-512 builds (any x86 CPU of the last
 * decade) fuse u * (to - from) + from; torch forced to its baseline kernels
 * (ATEN_CPU_CAPABILITY=default) would differ from us, and from itself, in
 * the last bit of some elements. Doing the same, in the same order, means a run started from the seed
 * and the PyTorch module `ddpc --emit torch` writes, seeded alike, start from
 * identical weights: a comparison needs no --init file. Both bounds are
 * computed in double exactly as torch.nn.init writes them (kaiming's is
 * sqrt(3) * gain / sqrt(fan_in), which is not always the same double as
 * 1/sqrt(fan_in)). Parameters of rank 2 and more are weights; rank 1, biases.
 *
 * Loading is strict, like load_state_dict(strict=True): every tensor the net
 * has, of exactly its shape, and no others. F64 is converted, so a state_dict
 * saved from a double-precision model loads too.
 */
#include "weights.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirs.h"         // ddp_output_check
#include "safetensors.h"  // ddp_safetensors_open, _expect, _check_unused, _write
#include "sampler.h"      // DdpMt19937: PyTorch's CPU generator

/* The parameter's storage, or NULL for a step count. */
static float *storage(const DdpParamInfo *p, float *params, float *buffers)
{
    if (p->is_step_count)
        return NULL;
    return (p->trainable ? params : buffers) + p->offset;
}

/* torch.Tensor.uniform_(from, to) on a float tensor of N elements. */
static void uniform(DdpMt19937 *mt, float *x, int64_t n, double from_d, double to_d)
{
    const float from = (float)from_d, to = (float)to_d;
    const float divisor = 1.0f / (float)(1u << 24);
    for (int64_t i = 0; i < n; i++) {
        float u = (float)(ddp_mt19937_next(mt) & ((1u << 24) - 1)) * divisor;
        x[i] = fmaf(u, to - from, from);
    }
}

DdpStatus ddp_weights_init(const DdpNet *net, uint64_t seed, float *params, float *buffers, int64_t *counts)
{
    DdpMt19937 mt;
    ddp_mt19937_seed(&mt, seed);
    for (int i = 0; i < net->n_params; i++) {
        const DdpParamInfo *p = &net->params[i];
        counts[i] = 0;
        float *x = storage(p, params, buffers);
        if (!x)
            continue;
        switch (p->init) {
        case DDP_INIT_KAIMING_UNIFORM: {
            double bound = 0;
            if (p->fan_in > 0 && p->ndim >= 2) {
                /* kaiming_uniform_(w, a=math.sqrt(5)): leaky_relu gain, then sqrt(3) * std */
                double a = sqrt(5.0);
                double gain = sqrt(2.0 / (1 + a * a));
                double std = gain / sqrt((double)p->fan_in);
                bound = sqrt(3.0) * std;
            } else if (p->fan_in > 0) {
                bound = 1 / sqrt((double)p->fan_in);
            }
            uniform(&mt, x, p->numel, -bound, bound);
            break;
        }
        case DDP_INIT_ONES:
            for (int64_t k = 0; k < p->numel; k++)
                x[k] = 1.0f;
            break;
        case DDP_INIT_ZEROS:
            memset(x, 0, (size_t)p->numel * sizeof *x);
            break;
        default:
            return DDP_ERR(DDP_FAIL, "internal error: parameter '%s' has unknown init %d", p->name, (int)p->init);
        }
    }
    return DDP_OK;
}

/* Loads parameter P from F into X (or *COUNT for a step count). */
static DdpStatus load_one(DdpSafetensors *f, const DdpParamInfo *p, float *x, int64_t *count)
{
    const void *data;
    if (p->is_step_count) {
        DDP_CHECK(ddp_safetensors_expect(f, p->name, DDP_DTYPE_I64, NULL, 0, &data));
        memcpy(count, data, sizeof *count);
        if (*count < 0 || *count > DDP_STEP_COUNT_MAX)
            return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' is %lld, not a step count", ddp_safetensors_path(f),
                           p->name, (long long)*count);
        return DDP_OK;
    }
    const DdpTensor *t = ddp_safetensors_find(f, p->name);
    if (t && t->dtype == DDP_DTYPE_F64) {
        DDP_CHECK(ddp_safetensors_expect(f, p->name, DDP_DTYPE_F64, p->shape, p->ndim, &data));
        const double *d = data;
        for (int64_t k = 0; k < p->numel; k++)
            x[k] = (float)d[k];
        return DDP_OK;
    }
    DDP_CHECK(ddp_safetensors_expect(f, p->name, DDP_DTYPE_F32, p->shape, p->ndim, &data));
    memcpy(x, data, (size_t)p->numel * sizeof *x);
    return DDP_OK;
}

DdpStatus ddp_weights_read(const DdpNet *net, DdpSafetensors *f, float *params, float *buffers, int64_t *counts)
{
    for (int i = 0; i < net->n_params; i++) {
        const DdpParamInfo *p = &net->params[i];
        counts[i] = 0;
        DDP_CHECK(load_one(f, p, storage(p, params, buffers), &counts[i]));
    }
    return DDP_OK;
}

/* The first of NET's float tensors (in PARAMS and BUFFERS) holding a NaN or
 * an infinity; NULL if none. */
static const char *first_nonfinite(const DdpNet *net, float *params, float *buffers)
{
    for (int i = 0; i < net->n_params; i++) {
        const DdpParamInfo *p = &net->params[i];
        if (p->is_step_count)
            continue;
        const float *x = storage(p, params, buffers);
        for (int64_t k = 0; k < p->numel; k++)
            if (!isfinite(x[k]))
                return p->name;
    }
    return NULL;
}

DdpStatus ddp_weights_load(const DdpNet *net, const char *path, float *params, float *buffers, int64_t *counts)
{
    DdpSafetensors *f;
    DDP_CHECK(ddp_safetensors_open(path, &f));
    DdpStatus st = ddp_weights_read(net, f, params, buffers, counts);
    if (st == DDP_OK)
        st = ddp_safetensors_check_unused(f);
    /* as --resume refuses such a checkpoint: a NaN weight trains (or
     * predicts) nothing, and an F64 value beyond float's range is one too */
    const char *bad = st == DDP_OK ? first_nonfinite(net, params, buffers) : NULL;
    if (bad)
        st = DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' is not finite (nan or inf, or a double beyond float's range): "
                     "weights of a diverged run", path, bad);
    ddp_safetensors_close(f);
    return st;
}

void ddp_weights_tensors(const DdpNet *net, const float *params, const float *buffers, const int64_t *counts,
                         int64_t steps, DdpTensor *t, int64_t *steps_at)
{
    for (int i = 0; i < net->n_params; i++) {
        const DdpParamInfo *p = &net->params[i];
        t[i] = (DdpTensor){.name = p->name};
        if (p->is_step_count) {
            steps_at[i] = counts[i] + steps;
            t[i].dtype = DDP_DTYPE_I64;
            t[i].ndim = 0;
            t[i].data = &steps_at[i];
            continue;
        }
        t[i].dtype = DDP_DTYPE_F32;
        t[i].ndim = p->ndim;
        for (int d = 0; d < p->ndim; d++)
            t[i].shape[d] = p->shape[d];
        t[i].data = (p->trainable ? params : buffers) + p->offset;
    }
}

DdpStatus ddp_weights_export(const DdpNet *net, const char *path, const float *params, const float *buffers,
                             const int64_t *counts, int64_t steps)
{
    int n = net->n_params;
    DdpTensor *t = calloc((size_t)(n ? n : 1), sizeof *t);
    int64_t *steps_at = calloc((size_t)(n ? n : 1), sizeof *steps_at);
    if (!t || !steps_at) {
        free(t);
        free(steps_at);
        return DDP_ERR(DDP_FAIL, "%s: out of memory", path);
    }
    ddp_weights_tensors(net, params, buffers, counts, steps, t, steps_at);
    char step_text[24];
    snprintf(step_text, sizeof step_text, "%lld", (long long)steps);
    const DdpMeta meta[] = {
        {"net", net->name ? net->name : ""},
        {"hash", net->hash ? net->hash : ""},
        {"format", "ddpc"},
        {"step", step_text},
    };
    DdpStatus st = ddp_safetensors_write(path, t, n, meta, (int)(sizeof meta / sizeof meta[0]));
    free(t);
    free(steps_at);
    return st;
}

DdpStatus ddp_weights_check_writable(const char *flag, const char *path)
{
    DDP_CHECK(ddp_output_check(flag, path));
    /* What is there is replaced: weights already (an earlier export, the
     * --init file trained on), or else what a mistyped name would lose (the
     * .net, a log, the data). An empty file holds nothing to lose. */
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0)
        return DDP_OK;
    DdpSafetensors *f;
    if (ddp_safetensors_open_header(path, &f) == DDP_OK) {
        ddp_safetensors_close(f);
        return DDP_OK;
    }
    /* the reader's reason, less its "PATH: " */
    char why[DDP_ERROR_MESSAGE_LEN];
    const char *said = ddp_error_message();
    size_t len = strlen(path);
    snprintf(why, sizeof why, "%s", strncmp(said, path, len) == 0 && said[len] == ':' && said[len + 1] == ' ' ? said + len + 2 : said);
    ddp_error_clear();
    return DDP_ERR(DDP_BAD_INPUT, "--%s %s: the file there is not safetensors weights (%s), and --%s would replace "
                   "it: name another file (or remove this one first)", flag, path, why, flag);
}
