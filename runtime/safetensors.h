/*
 * safetensors.h: weights and checkpoints in the safetensors format, the one
 * the safetensors library and Hugging Face tools read (--init, --export,
 * --save, --resume).
 */
#ifndef DDPRT_SAFETENSORS_H
#define DDPRT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"  // DdpStatus

typedef enum {
    DDP_DTYPE_F32,
    DDP_DTYPE_F64,
    DDP_DTYPE_F16,
    DDP_DTYPE_BF16,
    DDP_DTYPE_I64,
    DDP_DTYPE_I32,
    DDP_DTYPE_I16,
    DDP_DTYPE_I8,
    DDP_DTYPE_U8,
    DDP_DTYPE_BOOL,
    DDP_DTYPE_U64,
    DDP_DTYPE_U32,
    DDP_DTYPE_U16,
    DDP_DTYPE_COUNT
} DdpDtype;

#define DDP_TENSOR_MAX_DIMS 8

/* A named tensor: what the writer is given, and what the reader finds. */
typedef struct {
    const char *name;
    DdpDtype dtype;
    int ndim;
    int64_t shape[DDP_TENSOR_MAX_DIMS];
    const void *data;  /* little-endian, row-major, aligned to the element size */
    size_t nbytes;     /* element count * element size; filled in by the reader */
} DdpTensor;

/* One __metadata__ entry: both strings. */
typedef struct {
    const char *key;
    const char *value;
} DdpMeta;

/* "F32", "I64", ...: the format's names; NULL for an unknown dtype. */
const char *ddp_dtype_name(DdpDtype dtype);
/* Bytes per element; 0 for an unknown dtype. */
size_t ddp_dtype_size(DdpDtype dtype);

/* Writes TENSORS[0..n) and META[0..nmeta) to PATH atomically: into PATH.tmp,
 * synced, then renamed over PATH, so a crash leaves the old file or the new
 * one, never a torn one. PATH must name a regular file or nothing, links
 * followed (dirs.h, ddp_output_target; DDP_BAD_INPUT otherwise). Tensors are laid out largest element size first, then
 * by name, as the reference implementation orders them. DDP_FAIL on an I/O
 * error (PATH.tmp is then removed) or a malformed tensor (an internal error). */
DdpStatus ddp_safetensors_write(const char *path, const DdpTensor *tensors, int n,
                                const DdpMeta *meta, int nmeta);

typedef struct DdpSafetensors DdpSafetensors;

/* Reads and checks the file PATH; DDP_BAD_INPUT naming the file and the fault
 * (truncated, malformed header, offsets that overlap, leave gaps, or leave the
 * file, sizes that disagree with dtype and shape, duplicate names). */
DdpStatus ddp_safetensors_open(const char *path, DdpSafetensors **out);

/* The same checks of PATH's header (against the file's size), without
 * reading the data: for asking what a file is (its metadata, its tensors'
 * names, dtypes and shapes) without reading gigabytes. Its tensors' data
 * pointers are NULL, so ddp_safetensors_expect has nothing to give. */
DdpStatus ddp_safetensors_open_header(const char *path, DdpSafetensors **out);
void ddp_safetensors_close(DdpSafetensors *file);

const char *ddp_safetensors_path(const DdpSafetensors *file);
int ddp_safetensors_count(const DdpSafetensors *file);
/* The I'th tensor, in the file's data order. */
const DdpTensor *ddp_safetensors_tensor(const DdpSafetensors *file, int i);
/* The tensor called NAME, or NULL. */
const DdpTensor *ddp_safetensors_find(const DdpSafetensors *file, const char *name);
/* The __metadata__ value of KEY, or NULL. */
const char *ddp_safetensors_meta(const DdpSafetensors *file, const char *key);

/* Finds NAME and checks it has DTYPE and SHAPE[0..ndim): sets *DATA to its
 * bytes (valid until close) and marks it used; DDP_BAD_INPUT otherwise, e.g.
 * "w.safetensors: tensor 'conv1.weight' has shape [32,1,5,5], the net expects
 * [32,1,3,3]" or "w.safetensors: has no tensor 'conv1.weight'". */
DdpStatus ddp_safetensors_expect(DdpSafetensors *file, const char *name, DdpDtype dtype,
                                 const int64_t *shape, int ndim, const void **data);

/* DDP_BAD_INPUT listing the tensors no ddp_safetensors_expect asked for, so
 * loading weights of a different net is an error rather than a silent mix. */
DdpStatus ddp_safetensors_check_unused(const DdpSafetensors *file);

#endif
