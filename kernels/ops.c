/* ops.c — the checked per-op entry points (operand kinds and lengths against
 * the shapes) and the composition of a decoder layer, the LM head and a
 * whole step from them. */
#include "kernels_internal.h"

#include <math.h>

static int need(const kernels_buf *b, const char *what, kernels_elem elem, int64_t n,
                kvs_err *err)
{
    if (!b)
        return kvs_errf(err, KVS_EINVAL, "%s: missing buffer", what);
    if (b->elem != elem)
        return kvs_errf(err, KVS_EINVAL, "%s: wrong element type", what);
    if (b->n < n)
        return kvs_errf(err, KVS_EINVAL, "%s: buffer of %lld elements, shape needs %lld", what,
                        (long long)b->n, (long long)n);
    return KVS_OK;
}

static int need_dims(const char *op, int64_t a, int64_t b, int64_t c, kvs_err *err)
{
    if (a < 1 || b < 1 || c < 1)
        return kvs_errf(err, KVS_EINVAL, "%s: dimensions %lld x %lld x %lld must be >= 1", op,
                        (long long)a, (long long)b, (long long)c);
    return KVS_OK;
}

#define TRY(x)                  \
    do {                        \
        int rc_ = (x);          \
        if (rc_ != KVS_OK)      \
            return rc_;         \
    } while (0)

static int64_t qkv_width(const model_spec *m) { return (m->heads + 2 * m->kv_heads) * m->head_dim; }

static int check_heads(const char *op, const model_spec *m, kvs_err *err)
{
    if (m->heads < 1 || m->kv_heads < 1 || m->heads % m->kv_heads || m->head_dim < 2 ||
        m->head_dim % 2)
        return kvs_errf(err, KVS_EINVAL,
                        "%s: heads %lld / kv_heads %lld / head_dim %lld inconsistent", op,
                        (long long)m->heads, (long long)m->kv_heads, (long long)m->head_dim);
    return KVS_OK;
}

int kernels_op_rmsnorm(kernels_backend *be, const kernels_buf *x, const kernels_buf *w,
                       kernels_buf *out, int64_t rows, int64_t dim, kvs_err *err)
{
    TRY(need_dims("rmsnorm", rows, dim, 1, err));
    TRY(need(x, "rmsnorm x", KERNELS_ELEM_ACT, rows * dim, err));
    TRY(need(w, "rmsnorm weight", KERNELS_ELEM_ACT, dim, err));
    TRY(need(out, "rmsnorm out", KERNELS_ELEM_ACT, rows * dim, err));
    return be->vt->rmsnorm(be->self, x->ptr, w->ptr, out->ptr, rows, dim, KERNELS_RMS_EPS, err);
}

int kernels_op_gemm(kernels_backend *be, const kernels_buf *a, const kernels_buf *w,
                    kernels_buf *c, int64_t m, int64_t n, int64_t k, float beta, kvs_err *err)
{
    TRY(need_dims("gemm", m, n, k, err));
    if (beta != 0.0f && beta != 1.0f)
        return kvs_errf(err, KVS_EINVAL, "gemm: beta %g must be 0 or 1", (double)beta);
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return kvs_errf(err, KVS_EINVAL, "gemm: dimension exceeds int32");
    TRY(need(a, "gemm a", KERNELS_ELEM_ACT, m * k, err));
    TRY(need(w, "gemm weight", KERNELS_ELEM_ACT, n * k, err));
    TRY(need(c, "gemm c", KERNELS_ELEM_ACT, m * n, err));
    return be->vt->gemm(be->self, a->ptr, w->ptr, c->ptr, m, n, k, beta, err);
}

int kernels_op_rope(kernels_backend *be, const model_spec *m, kernels_buf *qkv,
                    const kernels_batch *b, kvs_err *err)
{
    TRY(check_heads("rope", m, err));
    TRY(need(qkv, "rope qkv", KERNELS_ELEM_ACT, b->tokens * qkv_width(m), err));
    return be->vt->rope(be->self, qkv->ptr, kernels_batch_dev(b, b->off_pos), b->tokens,
                        m->heads, m->kv_heads, m->head_dim, KERNELS_ROPE_THETA, err);
}

static int check_kv(const char *op, const model_spec *m, const kernels_batch *b,
                    const kernels_kv *kv, int64_t layer, kvs_err *err)
{
    TRY(check_heads(op, m, err));
    if (layer < 0)
        return kvs_errf(err, KVS_EINVAL, "%s: layer %lld < 0", op, (long long)layer);
    if (kv->kv_heads != m->kv_heads || kv->head_dim != m->head_dim)
        return kvs_errf(err, KVS_EINVAL, "%s: KV pools hold %lld heads x %lld, model has %lld x %lld",
                        op, (long long)kv->kv_heads, (long long)kv->head_dim,
                        (long long)m->kv_heads, (long long)m->head_dim);
    if (kv->block_size != b->block_size || kv->num_blocks < b->num_blocks)
        return kvs_errf(err, KVS_EINVAL,
                        "%s: batch built for %lld blocks of %lld tokens, pools have %lld of %lld",
                        op, (long long)b->num_blocks, (long long)b->block_size,
                        (long long)kv->num_blocks, (long long)kv->block_size);
    return KVS_OK;
}

int kernels_op_kv_append(kernels_backend *be, const model_spec *m, const kernels_buf *qkv,
                         const kernels_batch *b, kernels_kv *kv, int64_t layer, kvs_err *err)
{
    TRY(check_kv("kv_append", m, b, kv, layer, err));
    TRY(need(qkv, "kv_append qkv", KERNELS_ELEM_ACT, b->tokens * qkv_width(m), err));
    int64_t l = layer % kv->layers;
    return be->vt->kv_append(be->self, qkv->ptr, kernels_batch_dev(b, b->off_slot), b->tokens,
                             m->heads, m->kv_heads, m->head_dim, kv->k[l]->ptr, kv->v[l]->ptr,
                             err);
}

static int attention(kernels_backend *be, const model_spec *m, const kernels_buf *qkv,
                     const kernels_batch *b, const kernels_kv *kv, int64_t layer,
                     kernels_buf *out, int decode, kvs_err *err)
{
    const char *op = decode ? "decode_attention" : "prefill_attention";
    TRY(check_kv(op, m, b, kv, layer, err));
    TRY(need(qkv, "attention qkv", KERNELS_ELEM_ACT, b->tokens * qkv_width(m), err));
    TRY(need(out, "attention out", KERNELS_ELEM_ACT, b->tokens * m->heads * m->head_dim, err));
    int64_t n = decode ? b->n_decode : b->n_prefill;
    if (n == 0)
        return KVS_OK;
    int64_t l = layer % kv->layers, off = decode ? b->off_dec : b->off_pre;
    kernels_attn_args a = {
        .qkv = qkv->ptr,
        .k_pool = kv->k[l]->ptr,
        .v_pool = kv->v[l]->ptr,
        .out = out->ptr,
        .seq_idx = kernels_batch_dev(b, off),
        .seq_qstart = kernels_batch_dev(b, b->off_qstart),
        .seq_ctx = kernels_batch_dev(b, b->off_ctx),
        .seq_bt = kernels_batch_dev(b, b->off_bt),
        .block_tables = kernels_batch_dev(b, b->off_tables),
        .host_seq_idx = b->host + off,
        .host_seq_qstart = b->host + b->off_qstart,
        .host_seq_ctx = b->host + b->off_ctx,
        .n = n,
        .max_q = decode ? 1 : b->max_q_prefill,
        .max_ctx = decode ? b->max_ctx_decode : b->max_ctx_prefill,
        .heads = m->heads,
        .kv_heads = m->kv_heads,
        .head_dim = m->head_dim,
        .block_size = b->block_size,
        .scale = (float)(1.0 / sqrt((double)m->head_dim)),
    };
    return decode ? be->vt->decode_attention(be->self, &a, err)
                  : be->vt->prefill_attention(be->self, &a, err);
}

int kernels_op_decode_attention(kernels_backend *be, const model_spec *m,
                                const kernels_buf *qkv, const kernels_batch *b,
                                const kernels_kv *kv, int64_t layer, kernels_buf *out,
                                kvs_err *err)
{
    return attention(be, m, qkv, b, kv, layer, out, 1, err);
}

int kernels_op_prefill_attention(kernels_backend *be, const model_spec *m,
                                 const kernels_buf *qkv, const kernels_batch *b,
                                 const kernels_kv *kv, int64_t layer, kernels_buf *out,
                                 kvs_err *err)
{
    return attention(be, m, qkv, b, kv, layer, out, 0, err);
}

int kernels_op_swiglu(kernels_backend *be, const kernels_buf *gu, kernels_buf *out,
                      int64_t rows, int64_t inter, kvs_err *err)
{
    TRY(need_dims("swiglu", rows, inter, 1, err));
    TRY(need(gu, "swiglu gate_up", KERNELS_ELEM_ACT, rows * 2 * inter, err));
    TRY(need(out, "swiglu out", KERNELS_ELEM_ACT, rows * inter, err));
    return be->vt->swiglu(be->self, gu->ptr, out->ptr, rows, inter, err);
}

int kernels_op_gather_rows(kernels_backend *be, const kernels_buf *x, const kernels_batch *b,
                           kernels_buf *out, int64_t dim, kvs_err *err)
{
    TRY(need_dims("gather_rows", dim, 1, 1, err));
    TRY(need(x, "gather x", KERNELS_ELEM_ACT, b->tokens * dim, err));
    TRY(need(out, "gather out", KERNELS_ELEM_ACT, b->n * dim, err));
    return be->vt->gather_rows(be->self, x->ptr, kernels_batch_dev(b, b->off_last), out->ptr,
                               b->n, dim, err);
}

/* ------------------------------------------------------------ whole step */

static int check_acts(const kernels_acts *a, const kernels_batch *b, kvs_err *err)
{
    if (b->tokens > a->max_tokens || b->n > a->max_seqs)
        return kvs_errf(err, KVS_EINVAL,
                        "step of %lld tokens / %lld sequences exceeds activations for %lld / %lld",
                        (long long)b->tokens, (long long)b->n, (long long)a->max_tokens,
                        (long long)a->max_seqs);
    return KVS_OK;
}

int kernels_layer_forward(kernels_backend *be, const model_spec *m, const kernels_weights *w,
                          kernels_kv *kv, int64_t layer, const kernels_batch *b,
                          kernels_acts *a, kvs_err *err)
{
    TRY(check_acts(a, b, err));
    int64_t T = b->tokens, H = m->hidden, I = m->intermediate, A = m->heads * m->head_dim;
    TRY(kernels_op_rmsnorm(be, a->x, w->attn_norm, a->xn, T, H, err));
    TRY(kernels_op_gemm(be, a->xn, w->wqkv, a->qkv, T, qkv_width(m), H, 0.0f, err));
    TRY(kernels_op_rope(be, m, a->qkv, b, err));
    TRY(kernels_op_kv_append(be, m, a->qkv, b, kv, layer, err));
    TRY(kernels_op_decode_attention(be, m, a->qkv, b, kv, layer, a->ao, err));
    TRY(kernels_op_prefill_attention(be, m, a->qkv, b, kv, layer, a->ao, err));
    TRY(kernels_op_gemm(be, a->ao, w->wo, a->x, T, H, A, 1.0f, err));
    TRY(kernels_op_rmsnorm(be, a->x, w->mlp_norm, a->xn, T, H, err));
    TRY(kernels_op_gemm(be, a->xn, w->wgu, a->gu, T, 2 * I, H, 0.0f, err));
    TRY(kernels_op_swiglu(be, a->gu, a->act, T, I, err));
    return kernels_op_gemm(be, a->act, w->wd, a->x, T, H, I, 1.0f, err);
}

int kernels_lm_head(kernels_backend *be, const model_spec *m, const kernels_weights *w,
                    const kernels_batch *b, kernels_acts *a, kvs_err *err)
{
    TRY(check_acts(a, b, err));
    TRY(kernels_op_gather_rows(be, a->x, b, a->hl, m->hidden, err));
    TRY(kernels_op_rmsnorm(be, a->hl, w->final_norm, a->hn, b->n, m->hidden, err));
    return kernels_op_gemm(be, a->hn, w->lm_head, a->logits, b->n, m->vocab, m->hidden, 0.0f,
                           err);
}

int kernels_step_forward(kernels_backend *be, const model_spec *m, const kernels_weights *w,
                         kernels_kv *kv, const kernels_batch *b, kernels_acts *a, kvs_err *err)
{
    for (int64_t l = 0; l < m->layers; l++)
        TRY(kernels_layer_forward(be, m, w, kv, l, b, a, err));
    return kernels_lm_head(be, m, w, b, a, err);
}
