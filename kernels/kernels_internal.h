/* kernels_internal.h — struct bodies shared by the kernels module's C files
 * (registry, buffers, batches, op wrappers).  Not part of the API: callers
 * use kernels.h.  No CUDA types. */
#ifndef KERNELS_INTERNAL_H
#define KERNELS_INTERNAL_H

#include "kernels.h"

struct kernels_backend {
    const kernels_backend_vt *vt; /* never NULL */
    void *self;                   /* backend state, owned */
    double timer_t0;              /* fallback timer start, seconds (monotonic) */
};

struct kernels_buf {
    kernels_backend *be; /* owner, borrowed */
    kernels_elem elem;   /* ACT or I32 */
    int64_t n;           /* elements */
    void *ptr;           /* backend memory, n * elem bytes */
};

/* The metadata of a step: one int32 array on the host, mirrored in one
 * backend buffer with the same layout (offsets below, in elements). */
struct kernels_batch {
    kernels_backend *be;
    int64_t n;           /* sequences */
    int64_t tokens;      /* T = sum of q */
    int64_t n_decode;    /* q == 1 */
    int64_t n_prefill;   /* q > 1 */
    int64_t block_size;  /* tokens per block */
    int64_t num_blocks;  /* blocks in the pools the tables index */
    int64_t max_ctx_decode, max_ctx_prefill; /* tokens */
    int64_t max_q_prefill;                   /* tokens */
    int64_t off_pos, off_slot, off_qstart, off_ctx, off_bt, off_dec, off_pre,
        off_last, off_tables; /* element offsets of each array */
    int64_t len;         /* total int32 elements */
    int32_t *host;       /* [len] */
    kernels_buf *dev;    /* [len] I32 */
};

/* Device pointer of array `off` of a batch. */
static inline const int32_t *kernels_batch_dev(const struct kernels_batch *b, int64_t off)
{
    return (const int32_t *)b->dev->ptr + off;
}

/* The backend vtable compiled in.  The CUDA one, kernels_cuda_vt, lives in
 * the module libkvsim_cuda.so that backend.c loads on first use. */
extern const kernels_backend_vt kernels_cpu_vt;

#endif
