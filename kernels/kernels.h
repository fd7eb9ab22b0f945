/* kernels.h — the real operations of a LLaMA decoder layer over a paged KV
 * cache, on a compute backend chosen by name at run time ("cpu", "cuda").
 *
 * A step runs a batch that mixes prefills and decodes: each sequence brings
 * q new tokens on top of c tokens already in the cache, and owns a block
 * table (block ids into the KV pools; token t of the sequence lives in block
 * table[t / block_size], slot t % block_size).  Per layer (activations
 * row-major [tokens][width]):
 *     xn  = rmsnorm(x) * attn_norm           [T][hidden]
 *     qkv = xn @ Wqkv^T                      [T][(heads + 2 kv_heads) head_dim]
 *     rope(q, k) at each token's position    (rotate-half pairs (i, i+hd/2))
 *     k, v -> paged pools                    (slot of position c + j)
 *     ao  = attention(q, paged K, V)         causal; GQA: head h reads kv head
 *                                            h / (heads / kv_heads)
 *     x  += ao @ Wo^T
 *     xn  = rmsnorm(x) * mlp_norm
 *     gu  = xn @ Wgu^T                       [T][2 intermediate] (gate | up)
 *     a   = silu(gate) * up                  [T][intermediate]
 *     x  += a @ Wd^T
 * and once per step the LM head on each sequence's last token:
 *     logits = rmsnorm(x[last]) * final_norm @ Wlm^T   [n_seqs][vocab].
 * Weights are random (seeded); one layer's weights serve every layer.
 *
 * Storage: a backend stores activations, weights and KV in one element type
 * (`kernels_backend_storage`): the CPU reference stores fp32 (clear and fast
 * enough on a CPU, math in fp32), the CUDA backend stores fp16 and
 * accumulates in fp32 (cuBLAS tensor-core GEMMs).  Callers exchange data as
 * fp32 host arrays (kernels_buf_write/read convert), so tests feed the same
 * inputs to both.  Integer metadata (positions, slots, block tables) is int32.
 *
 * Layers: the backend interface (kernels_backend_vt, raw pointers, no shape
 * checks) is what a backend implements; everything else here is the checked
 * public API over it.  No CUDA type appears in this header.
 */
#ifndef KERNELS_H
#define KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "../models/model.h"
#include "../base/kvs.h"

/* ------------------------------------------------------------ backend */

typedef struct kernels_device_info {
    char name[256];            /* "NVIDIA H100 80GB HBM3", or the CPU model */
    char driver_version[32];   /* "12.4" (CUDA driver), "" on CPU */
    char runtime_version[32];  /* "12.4" (CUDA runtime), "" on CPU */
    int64_t mem_total_bytes;   /* device (or host) memory, bytes */
    int64_t mem_free_bytes;    /* free now, bytes */
    double peak_mem_Bps;       /* peak memory bandwidth, bytes/s; 0 = unknown */
    char props_json[1024];     /* device properties as a JSON object */
} kernels_device_info;

/* Arguments of an attention call: which sequences it serves and where their
 * tokens and cached keys live.  Device arrays are in backend memory; the
 * host_ copies are the same values in host memory (for backends that loop on
 * the host).  */
typedef struct kernels_attn_args {
    const void *qkv;            /* [tokens][(heads + 2 kv_heads) head_dim], q read */
    const void *k_pool;         /* [num_blocks][block_size][kv_heads][head_dim] */
    const void *v_pool;         /* same layout as k_pool */
    void *out;                  /* [tokens][heads head_dim] */
    const int32_t *seq_idx;     /* [n] device: sequences served, batch indices */
    const int32_t *seq_qstart;  /* [n_seqs + 1] device: first token row per seq */
    const int32_t *seq_ctx;     /* [n_seqs] device: context after step, c + q */
    const int32_t *seq_bt;      /* [n_seqs] device: offset into block_tables */
    const int32_t *block_tables;/* [sum of table lengths] device: block ids */
    const int32_t *host_seq_idx;    /* [n] host copy */
    const int32_t *host_seq_qstart; /* [n_seqs + 1] host copy */
    const int32_t *host_seq_ctx;    /* [n_seqs] host copy */
    int64_t n;                  /* sequences served (entries of seq_idx) */
    int64_t max_q;              /* max new tokens over served seqs */
    int64_t max_ctx;            /* max context (c + q) over served seqs, tokens */
    int64_t heads, kv_heads, head_dim; /* per model, kv_heads divides heads */
    int64_t block_size;         /* tokens per block */
    float scale;                /* softmax scale, 1/sqrt(head_dim) */
} kernels_attn_args;

/* What a backend implements.  Pointers are backend memory (device pointers
 * for CUDA; host pointers for CPU) and are valid arguments for pointer
 * arithmetic in elements of act_bytes.  Shapes are already checked by the
 * public wrappers.  Every slot returns kvs_status and fills err.
 * Optional slots may be NULL; the public API then falls back as noted. */
typedef struct kernels_backend_vt {
    const char *name;      /* "cpu", "cuda" */
    const char *storage;   /* element type of weights/activations/KV: "fp32", "fp16" */
    size_t act_bytes;      /* bytes per stored element: 4 (fp32), 2 (fp16) */

    int (*open)(void **self, kvs_err *err);          /* required */
    void (*close)(void *self);                       /* required */
    int (*info)(void *self, kernels_device_info *out, kvs_err *err); /* required */
    /* Zero-filled allocation of `bytes` (> 0). */
    int (*alloc)(void *self, size_t bytes, void **ptr, kvs_err *err);
    void (*free)(void *self, void *ptr);
    /* fp32 host <-> stored elements (converting); n elements. */
    int (*write_act)(void *self, void *dst, const float *src, int64_t n, kvs_err *err);
    int (*read_act)(void *self, const void *src, float *dst, int64_t n, kvs_err *err);
    /* Raw bytes host <-> backend (int32 metadata). */
    int (*write_bytes)(void *self, void *dst, const void *src, size_t n, kvs_err *err);
    int (*read_bytes)(void *self, const void *src, void *dst, size_t n, kvs_err *err);
    /* Wait until all queued work is done. */
    int (*sync)(void *self, kvs_err *err);

    /* out[r][:] = x[r][:] / sqrt(mean(x[r]^2) + eps) * w[:], rows x dim. */
    int (*rmsnorm)(void *self, const void *x, const void *w, void *out,
                   int64_t rows, int64_t dim, float eps, kvs_err *err);
    /* c[m][n] = sum_k a[m][k] w[n][k] + beta c[m][n]; beta is 0 or 1. */
    int (*gemm)(void *self, const void *a, const void *w, void *c, int64_t m,
                int64_t n, int64_t k, float beta, kvs_err *err);
    /* Rotate q and k of qkv in place at pos[t]; inv_freq_i = theta^(-2i/hd). */
    int (*rope)(void *self, void *qkv, const int32_t *pos, int64_t tokens,
                int64_t heads, int64_t kv_heads, int64_t head_dim, float theta,
                kvs_err *err);
    /* k_pool/v_pool[slot[t]][h][:] = k/v of token t; slot = block * bs + off. */
    int (*kv_append)(void *self, const void *qkv, const int32_t *slots,
                     int64_t tokens, int64_t heads, int64_t kv_heads,
                     int64_t head_dim, void *k_pool, void *v_pool, kvs_err *err);
    /* Attention of sequences with q == 1 (decode) / q >= 1 (prefill: causal
     * over the c cached and the q new tokens, all read from the pools). */
    int (*decode_attention)(void *self, const kernels_attn_args *a, kvs_err *err);
    int (*prefill_attention)(void *self, const kernels_attn_args *a, kvs_err *err);
    /* out[r][i] = silu(gu[r][i]) * gu[r][inter + i]. */
    int (*swiglu)(void *self, const void *gu, void *out, int64_t rows,
                  int64_t inter, kvs_err *err);
    /* out[i][:] = x[idx[i]][:], n rows of dim. */
    int (*gather_rows)(void *self, const void *x, const int32_t *idx, void *out,
                       int64_t n, int64_t dim, kvs_err *err);

    /* Optional: time queued work on the device's own clock (CUDA events;
     * the CPU backend's thread CPU clock).  NULL: sync +
     * clock_gettime(CLOCK_MONOTONIC). */
    int (*timer_start)(void *self, kvs_err *err);
    int (*timer_stop)(void *self, double *seconds, kvs_err *err);
    /* Optional: scratch bytes the attention calls need for this shape (the
     * backend grows its workspace when a call needs more than was reserved
     * with reserve_workspace).  NULL: 0. */
    int64_t (*attn_workspace_bytes)(void *self, int64_t n_decode,
                                    int64_t max_ctx, int64_t max_prefill_q,
                                    int64_t heads, int64_t kv_heads,
                                    int64_t head_dim);
    /* Optional: allocate the attention workspace now (at least `bytes`), so
     * timed regions never reallocate it.  NULL: nothing to reserve. */
    int (*reserve_workspace)(void *self, size_t bytes, kvs_err *err);
} kernels_backend_vt;

typedef struct kernels_backend kernels_backend; /* an opened backend */

/* Open a backend by name.  Unknown name: KVS_EINVAL listing the choices;
 * "cuda" in a build without CUDA or with no device: KVS_EDEVICE
 * "no CUDA device: <reason>".  Cost: device initialisation (CUDA: ~1 s). */
int kernels_backend_open(const char *name, kernels_backend **out, kvs_err *err);
void kernels_backend_close(kernels_backend *be);
/* Comma-separated names compiled in, e.g. "cpu, cuda". */
const char *kernels_backend_names(void);
const kernels_backend_vt *kernels_backend_vtable(const kernels_backend *be);
const char *kernels_backend_name(const kernels_backend *be);
int kernels_backend_info(kernels_backend *be, kernels_device_info *out, kvs_err *err);
int kernels_backend_sync(kernels_backend *be, kvs_err *err);
/* Timer around queued work: start, enqueue, stop -> seconds. */
int kernels_timer_start(kernels_backend *be, kvs_err *err);
int kernels_timer_stop(kernels_backend *be, double *seconds, kvs_err *err);

/* ------------------------------------------------------------ buffers */

typedef enum kernels_elem {
    KERNELS_ELEM_ACT = 0, /* the backend's storage element (fp32 or fp16) */
    KERNELS_ELEM_I32 = 1  /* int32 metadata */
} kernels_elem;

typedef struct kernels_buf kernels_buf; /* backend memory of n elements */

/* Allocate n (> 0) zeroed elements. */
int kernels_buf_alloc(kernels_backend *be, kernels_elem elem, int64_t n,
                      kernels_buf **out, kvs_err *err);
void kernels_buf_free(kernels_buf *b);
int64_t kernels_buf_len(const kernels_buf *b);
/* Copy n values at element offset off (bounds checked).  write/read convert
 * fp32 <-> storage for ACT buffers; the _i32 forms need I32 buffers. */
int kernels_buf_write(kernels_buf *b, int64_t off, const float *src, int64_t n, kvs_err *err);
int kernels_buf_read(const kernels_buf *b, int64_t off, float *dst, int64_t n, kvs_err *err);
int kernels_buf_write_i32(kernels_buf *b, int64_t off, const int32_t *src, int64_t n, kvs_err *err);
/* Fill an ACT buffer with uniform values in [-a, a] from a seeded stream
 * (deterministic per seed); `bias` is added (1 for norm weights).  Cost:
 * O(n) host RNG plus the upload. */
int kernels_buf_fill_uniform(kernels_buf *b, uint64_t seed, float a, float bias, kvs_err *err);

/* ------------------------------------------------------------ batches */

/* One sequence of a step. */
typedef struct kernels_seq {
    int64_t q;               /* new tokens this step, >= 1 (1 = decode) */
    int64_t c;               /* tokens already cached before the step, >= 0 */
    const int32_t *blocks;   /* block table (host): >= ceil((c+q)/block_size) ids */
    int64_t n_blocks;        /* entries in blocks */
} kernels_seq;

typedef struct kernels_batch kernels_batch; /* metadata in backend memory */

/* Check and upload a step's metadata: positions, KV slots of the new tokens,
 * block tables, decode (q == 1) and prefill (q > 1) lists.  Fails with
 * KVS_EINVAL naming the sequence when q < 1, c < 0, a table is too short, a
 * block id is outside [0, num_blocks), two new tokens map to one slot, or a
 * size exceeds int32.  Cost: O(T log T + blocks) host + one upload. */
int kernels_batch_create(kernels_backend *be, const kernels_seq *seqs, int64_t n,
                         int64_t block_size, int64_t num_blocks,
                         kernels_batch **out, kvs_err *err);
void kernels_batch_free(kernels_batch *b);
int64_t kernels_batch_tokens(const kernels_batch *b);   /* sum of q */
int64_t kernels_batch_seqs(const kernels_batch *b);     /* n */
int64_t kernels_batch_n_decode(const kernels_batch *b); /* seqs with q == 1 */
int64_t kernels_batch_n_prefill(const kernels_batch *b);/* seqs with q > 1 */
/* Row of token j of sequence i in the [T][...] activations. */
int64_t kernels_batch_row(const kernels_batch *b, int64_t i, int64_t j);

/* ------------------------------------------------- weights, KV, activations */

/* One layer's weights (reused by every layer) plus the final norm and LM
 * head, uniform with variance 1/fan_in; norm weights 1 +- 0.1. */
typedef struct kernels_weights {
    kernels_buf *attn_norm;  /* [hidden] */
    kernels_buf *wqkv;       /* [(heads + 2 kv_heads) head_dim][hidden] */
    kernels_buf *wo;         /* [hidden][heads head_dim] */
    kernels_buf *mlp_norm;   /* [hidden] */
    kernels_buf *wgu;        /* [2 intermediate][hidden]: gate rows, then up */
    kernels_buf *wd;         /* [hidden][intermediate] */
    kernels_buf *final_norm; /* [hidden] */
    kernels_buf *lm_head;    /* [vocab][hidden] */
} kernels_weights;

int kernels_weights_init(kernels_backend *be, const model_spec *m, uint64_t seed,
                         kernels_weights *w, kvs_err *err);
void kernels_weights_free(kernels_weights *w);
/* Bytes the weights take on the backend. */
int64_t kernels_weights_bytes(const kernels_backend *be, const model_spec *m);

/* Paged KV pools for `layers` layers (layer l of a step uses pool
 * l % layers, so 1 pool may stand for all layers when timing). */
typedef struct kernels_kv {
    int64_t layers;          /* pools held */
    int64_t num_blocks;      /* blocks per pool */
    int64_t block_size;      /* tokens per block */
    int64_t kv_heads, head_dim;
    kernels_buf **k;         /* [layers] each [num_blocks][block_size][kv_heads][head_dim] */
    kernels_buf **v;         /* [layers] same */
} kernels_kv;

int kernels_kv_init(kernels_backend *be, const model_spec *m, int64_t layers,
                    int64_t num_blocks, int64_t block_size, kernels_kv *kv,
                    kvs_err *err);
void kernels_kv_free(kernels_kv *kv);
int64_t kernels_kv_bytes(const kernels_backend *be, const model_spec *m,
                         int64_t layers, int64_t num_blocks, int64_t block_size);

/* Activations and scratch for steps of up to max_tokens tokens and max_seqs
 * sequences. */
typedef struct kernels_acts {
    int64_t max_tokens, max_seqs;
    kernels_buf *x;       /* [max_tokens][hidden] residual stream, in/out */
    kernels_buf *xn;      /* [max_tokens][hidden] */
    kernels_buf *qkv;     /* [max_tokens][(heads + 2 kv_heads) head_dim] */
    kernels_buf *ao;      /* [max_tokens][heads head_dim] */
    kernels_buf *gu;      /* [max_tokens][2 intermediate] */
    kernels_buf *act;     /* [max_tokens][intermediate] */
    kernels_buf *hl;      /* [max_seqs][hidden] last-token rows */
    kernels_buf *hn;      /* [max_seqs][hidden] */
    kernels_buf *logits;  /* [max_seqs][vocab] */
} kernels_acts;

int kernels_acts_init(kernels_backend *be, const model_spec *m, int64_t max_tokens,
                      int64_t max_seqs, kernels_acts *a, kvs_err *err);
void kernels_acts_free(kernels_acts *a);
int64_t kernels_acts_bytes(const kernels_backend *be, const model_spec *m,
                           int64_t max_tokens, int64_t max_seqs);
/* Attention scratch the backend will allocate for this shape, bytes. */
int64_t kernels_attn_workspace_bytes(const kernels_backend *be, const model_spec *m,
                                     int64_t n_decode, int64_t max_ctx,
                                     int64_t max_prefill_q);

/* Reserve the attention workspace of a shape up front (benches and
 * replays call it once when they open, with their plan's largest
 * kernels_attn_workspace_bytes).  0 bytes or no such slot: nothing to do. */
int kernels_reserve_workspace(kernels_backend *be, int64_t bytes, kvs_err *err);

/* ----------------------------------------------------- per-op entry points
 * Each checks buffer kinds and lengths against the shapes (KVS_EINVAL naming
 * the operand) and enqueues the op; call kernels_backend_sync to wait. */

#define KERNELS_RMS_EPS 1e-5f
#define KERNELS_ROPE_THETA 10000.0f

int kernels_op_rmsnorm(kernels_backend *be, const kernels_buf *x, const kernels_buf *w,
                       kernels_buf *out, int64_t rows, int64_t dim, kvs_err *err);
int kernels_op_gemm(kernels_backend *be, const kernels_buf *a, const kernels_buf *w,
                    kernels_buf *c, int64_t m, int64_t n, int64_t k, float beta,
                    kvs_err *err);
int kernels_op_rope(kernels_backend *be, const model_spec *m, kernels_buf *qkv,
                    const kernels_batch *b, kvs_err *err);
int kernels_op_kv_append(kernels_backend *be, const model_spec *m,
                         const kernels_buf *qkv, const kernels_batch *b,
                         kernels_kv *kv, int64_t layer, kvs_err *err);
/* Attention of the batch's decodes (q == 1) / prefills (q > 1) into out
 * [T][heads head_dim]; rows of the other kind are left untouched. */
int kernels_op_decode_attention(kernels_backend *be, const model_spec *m,
                                const kernels_buf *qkv, const kernels_batch *b,
                                const kernels_kv *kv, int64_t layer,
                                kernels_buf *out, kvs_err *err);
int kernels_op_prefill_attention(kernels_backend *be, const model_spec *m,
                                 const kernels_buf *qkv, const kernels_batch *b,
                                 const kernels_kv *kv, int64_t layer,
                                 kernels_buf *out, kvs_err *err);
int kernels_op_swiglu(kernels_backend *be, const kernels_buf *gu, kernels_buf *out,
                      int64_t rows, int64_t inter, kvs_err *err);
int kernels_op_gather_rows(kernels_backend *be, const kernels_buf *x,
                           const kernels_batch *b, kernels_buf *out, int64_t dim,
                           kvs_err *err); /* each sequence's last token */

/* ------------------------------------------------------------ whole step */

/* One decoder layer over the batch, acts->x in place, using KV pool
 * layer % kv->layers. */
int kernels_layer_forward(kernels_backend *be, const model_spec *m,
                          const kernels_weights *w, kernels_kv *kv, int64_t layer,
                          const kernels_batch *b, kernels_acts *a, kvs_err *err);
/* LM head on each sequence's last token: acts->logits [n_seqs][vocab]. */
int kernels_lm_head(kernels_backend *be, const model_spec *m,
                    const kernels_weights *w, const kernels_batch *b,
                    kernels_acts *a, kvs_err *err);
/* All m->layers layers, then the LM head; acts->x holds the input hidden
 * states [T][hidden] on entry.  Enqueued only: sync or time around it. */
int kernels_step_forward(kernels_backend *be, const model_spec *m,
                         const kernels_weights *w, kernels_kv *kv,
                         const kernels_batch *b, kernels_acts *a, kvs_err *err);

#endif
