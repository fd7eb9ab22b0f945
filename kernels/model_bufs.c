/* model_bufs.c — the buffers of a model on a backend: random weights of one
 * layer plus LM head, paged KV pools, and step activations; with their byte
 * counts so callers can refuse a shape before allocating. */
#include "kernels_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t qkv_width(const model_spec *m) { return (m->heads + 2 * m->kv_heads) * m->head_dim; }

static int check_model(const model_spec *m, kvs_err *err)
{
    if (m->hidden < 1 || m->layers < 1 || m->heads < 1 || m->kv_heads < 1 ||
        m->head_dim < 2 || m->intermediate < 1 || m->vocab < 1)
        return kvs_errf(err, KVS_EINVAL, "model %s: every dimension must be >= 1", m->name);
    if (m->heads % m->kv_heads)
        return kvs_errf(err, KVS_EINVAL, "model %s: heads %lld not a multiple of kv_heads %lld",
                        m->name, (long long)m->heads, (long long)m->kv_heads);
    if (m->head_dim % 2)
        return kvs_errf(err, KVS_EINVAL, "model %s: head_dim %lld must be even (RoPE pairs)",
                        m->name, (long long)m->head_dim);
    return KVS_OK;
}

int64_t kernels_weights_bytes(const kernels_backend *be, const model_spec *m)
{
    int64_t H = m->hidden, I = m->intermediate;
    int64_t n = 3 * H + qkv_width(m) * H + H * m->heads * m->head_dim + 2 * I * H + H * I +
                m->vocab * H;
    return n * (int64_t)be->vt->act_bytes;
}

int kernels_weights_init(kernels_backend *be, const model_spec *m, uint64_t seed,
                         kernels_weights *w, kvs_err *err)
{
    memset(w, 0, sizeof *w);
    int rc = check_model(m, err);
    if (rc != KVS_OK)
        return rc;
    int64_t H = m->hidden, I = m->intermediate, A = m->heads * m->head_dim;
    struct {
        kernels_buf **b;
        int64_t rows, cols; /* cols = fan_in */
        int norm;
    } t[] = {
        {&w->attn_norm, 1, H, 1}, {&w->wqkv, qkv_width(m), H, 0}, {&w->wo, H, A, 0},
        {&w->mlp_norm, 1, H, 1},  {&w->wgu, 2 * I, H, 0},         {&w->wd, H, I, 0},
        {&w->final_norm, 1, H, 1}, {&w->lm_head, m->vocab, H, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        rc = kernels_buf_alloc(be, KERNELS_ELEM_ACT, t[i].rows * t[i].cols, t[i].b, err);
        if (rc != KVS_OK)
            goto fail;
        /* variance 1/fan_in keeps activations O(1); norms 1 +- 0.1 */
        float a = t[i].norm ? 0.1f : (float)sqrt(3.0 / (double)t[i].cols);
        rc = kernels_buf_fill_uniform(*t[i].b, seed * 16 + i, a, t[i].norm ? 1.0f : 0.0f, err);
        if (rc != KVS_OK)
            goto fail;
    }
    return KVS_OK;
fail:
    kernels_weights_free(w);
    return rc;
}

void kernels_weights_free(kernels_weights *w)
{
    kernels_buf *all[] = {w->attn_norm, w->wqkv,     w->wo,         w->mlp_norm,
                          w->wgu,       w->wd,       w->final_norm, w->lm_head};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        kernels_buf_free(all[i]);
    memset(w, 0, sizeof *w);
}

int64_t kernels_kv_bytes(const kernels_backend *be, const model_spec *m, int64_t layers,
                         int64_t num_blocks, int64_t block_size)
{
    /* saturates at INT64_MAX (a size no device has), so that sizes read
     * from a tampered database cannot wrap around to a small one */
    const int64_t f[] = {layers, num_blocks, block_size, m->kv_heads, m->head_dim,
                         (int64_t)be->vt->act_bytes};
    int64_t n = 2;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i] < 0 || __builtin_mul_overflow(n, f[i], &n))
            return INT64_MAX;
    return n;
}

int kernels_kv_init(kernels_backend *be, const model_spec *m, int64_t layers,
                    int64_t num_blocks, int64_t block_size, kernels_kv *kv, kvs_err *err)
{
    memset(kv, 0, sizeof *kv);
    int rc = check_model(m, err);
    if (rc != KVS_OK)
        return rc;
    if (layers < 1 || num_blocks < 1 || block_size < 1)
        return kvs_errf(err, KVS_EINVAL, "kv cache: layers %lld, blocks %lld, block_size %lld must be >= 1",
                        (long long)layers, (long long)num_blocks, (long long)block_size);
    kv->layers = layers;
    kv->num_blocks = num_blocks;
    kv->block_size = block_size;
    kv->kv_heads = m->kv_heads;
    kv->head_dim = m->head_dim;
    kv->k = calloc((size_t)layers, sizeof *kv->k);
    kv->v = calloc((size_t)layers, sizeof *kv->v);
    if (!kv->k || !kv->v) {
        rc = kvs_errf(err, KVS_ENOMEM, "out of memory (kv cache)");
        goto fail;
    }
    int64_t n = num_blocks * block_size * m->kv_heads * m->head_dim;
    for (int64_t l = 0; l < layers; l++) {
        rc = kernels_buf_alloc(be, KERNELS_ELEM_ACT, n, &kv->k[l], err);
        if (rc == KVS_OK)
            rc = kernels_buf_alloc(be, KERNELS_ELEM_ACT, n, &kv->v[l], err);
        if (rc != KVS_OK)
            goto fail;
    }
    return KVS_OK;
fail:
    kernels_kv_free(kv);
    return rc;
}

void kernels_kv_free(kernels_kv *kv)
{
    for (int64_t l = 0; kv->k && l < kv->layers; l++)
        kernels_buf_free(kv->k[l]);
    for (int64_t l = 0; kv->v && l < kv->layers; l++)
        kernels_buf_free(kv->v[l]);
    free(kv->k);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}

int64_t kernels_acts_bytes(const kernels_backend *be, const model_spec *m,
                           int64_t max_tokens, int64_t max_seqs)
{
    int64_t H = m->hidden, I = m->intermediate;
    int64_t per_tok = 2 * H + qkv_width(m) + m->heads * m->head_dim + 3 * I;
    int64_t per_seq = 2 * H + m->vocab;
    return (max_tokens * per_tok + max_seqs * per_seq) * (int64_t)be->vt->act_bytes;
}

int kernels_acts_init(kernels_backend *be, const model_spec *m, int64_t max_tokens,
                      int64_t max_seqs, kernels_acts *a, kvs_err *err)
{
    memset(a, 0, sizeof *a);
    int rc = check_model(m, err);
    if (rc != KVS_OK)
        return rc;
    if (max_tokens < 1 || max_seqs < 1 || max_seqs > max_tokens)
        return kvs_errf(err, KVS_EINVAL, "activations: max_tokens %lld, max_seqs %lld (need 1 <= seqs <= tokens)",
                        (long long)max_tokens, (long long)max_seqs);
    a->max_tokens = max_tokens;
    a->max_seqs = max_seqs;
    int64_t H = m->hidden, I = m->intermediate, T = max_tokens, S = max_seqs;
    struct {
        kernels_buf **b;
        int64_t n;
    } t[] = {
        {&a->x, T * H},        {&a->xn, T * H},  {&a->qkv, T * qkv_width(m)},
        {&a->ao, T * m->heads * m->head_dim},    {&a->gu, T * 2 * I},
        {&a->act, T * I},      {&a->hl, S * H},  {&a->hn, S * H},
        {&a->logits, S * m->vocab},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        rc = kernels_buf_alloc(be, KERNELS_ELEM_ACT, t[i].n, t[i].b, err);
        if (rc != KVS_OK) {
            kernels_acts_free(a);
            return rc;
        }
    }
    return KVS_OK;
}

void kernels_acts_free(kernels_acts *a)
{
    kernels_buf *all[] = {a->x, a->xn, a->qkv, a->ao, a->gu, a->act, a->hl, a->hn, a->logits};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        kernels_buf_free(all[i]);
    memset(a, 0, sizeof *a);
}

int64_t kernels_attn_workspace_bytes(const kernels_backend *be, const model_spec *m,
                                     int64_t n_decode, int64_t max_ctx,
                                     int64_t max_prefill_q)
{
    if (!be->vt->attn_workspace_bytes)
        return 0;
    return be->vt->attn_workspace_bytes(be->self, n_decode, max_ctx, max_prefill_q,
                                        m->heads, m->kv_heads, m->head_dim);
}

int kernels_reserve_workspace(kernels_backend *be, int64_t bytes, kvs_err *err)
{
    if (bytes <= 0 || !be->vt->reserve_workspace)
        return KVS_OK;
    return be->vt->reserve_workspace(be->self, (size_t)bytes, err);
}
