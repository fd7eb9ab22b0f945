/* batch.c — a step's metadata: checks the sequences against the pools, lays
 * out positions, KV slots, block tables and the decode/prefill lists in one
 * int32 array and uploads it. */
#include "kernels_internal.h"

#include <stdlib.h>
#include <string.h>

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sizes and per-sequence checks; fills the counts of b. */
static int batch_check(const kernels_seq *seqs, int64_t n, int64_t bs, int64_t nb,
                       struct kernels_batch *b, int64_t *n_tables, kvs_err *err)
{
    if (n < 1)
        return kvs_errf(err, KVS_EINVAL, "batch: no sequences");
    if (bs < 1 || nb < 1)
        return kvs_errf(err, KVS_EINVAL, "batch: block_size %lld and num_blocks %lld must be >= 1",
                        (long long)bs, (long long)nb);
    if (nb > INT32_MAX / bs)
        return kvs_errf(err, KVS_EINVAL, "batch: %lld blocks of %lld tokens exceed int32 slots",
                        (long long)nb, (long long)bs);
    int64_t tokens = 0, tables = 0;
    for (int64_t i = 0; i < n; i++) {
        const kernels_seq *s = &seqs[i];
        if (s->q < 1 || s->c < 0)
            return kvs_errf(err, KVS_EINVAL, "batch: sequence %lld has q=%lld c=%lld (need q >= 1, c >= 0)",
                            (long long)i, (long long)s->q, (long long)s->c);
        if (s->q > INT32_MAX || s->c > INT32_MAX - s->q)
            return kvs_errf(err, KVS_EINVAL, "batch: sequence %lld context exceeds int32", (long long)i);
        int64_t need = (s->c + s->q + bs - 1) / bs;
        if (s->n_blocks < need || !s->blocks)
            return kvs_errf(err, KVS_EINVAL,
                            "batch: sequence %lld needs %lld blocks for %lld tokens, table has %lld",
                            (long long)i, (long long)need, (long long)(s->c + s->q),
                            (long long)s->n_blocks);
        for (int64_t k = 0; k < need; k++)
            if (s->blocks[k] < 0 || s->blocks[k] >= nb)
                return kvs_errf(err, KVS_EINVAL,
                                "batch: sequence %lld block table[%lld] = %d is outside [0, %lld)",
                                (long long)i, (long long)k, s->blocks[k], (long long)nb);
        tokens += s->q;
        tables += need;
        if (tokens > INT32_MAX || tables > INT32_MAX)
            return kvs_errf(err, KVS_EINVAL, "batch: more than 2^31 tokens or blocks");
        if (s->q == 1) {
            b->n_decode++;
            if (s->c + 1 > b->max_ctx_decode)
                b->max_ctx_decode = s->c + 1;
        } else {
            b->n_prefill++;
            if (s->c + s->q > b->max_ctx_prefill)
                b->max_ctx_prefill = s->c + s->q;
            if (s->q > b->max_q_prefill)
                b->max_q_prefill = s->q;
        }
    }
    b->n = n;
    b->tokens = tokens;
    b->block_size = bs;
    b->num_blocks = nb;
    *n_tables = tables;
    return KVS_OK;
}

/* Fill the host array; returns KVS_EINVAL if two new tokens share a slot. */
static int batch_layout(const kernels_seq *seqs, struct kernels_batch *b, kvs_err *err)
{
    int32_t *h = b->host;
    int64_t n = b->n, row = 0, tab = 0, nd = 0, np = 0, bs = b->block_size;
    for (int64_t i = 0; i < n; i++) {
        const kernels_seq *s = &seqs[i];
        int64_t need = (s->c + s->q + bs - 1) / bs;
        h[b->off_qstart + i] = (int32_t)row;
        h[b->off_ctx + i] = (int32_t)(s->c + s->q);
        h[b->off_bt + i] = (int32_t)tab;
        memcpy(h + b->off_tables + tab, s->blocks, (size_t)need * sizeof(int32_t));
        for (int64_t j = 0; j < s->q; j++, row++) {
            int64_t p = s->c + j;
            h[b->off_pos + row] = (int32_t)p;
            h[b->off_slot + row] = (int32_t)((int64_t)s->blocks[p / bs] * bs + p % bs);
        }
        h[b->off_last + i] = (int32_t)(row - 1);
        if (s->q == 1)
            h[b->off_dec + nd++] = (int32_t)i;
        else
            h[b->off_pre + np++] = (int32_t)i;
        tab += need;
    }
    h[b->off_qstart + n] = (int32_t)row;

    int32_t *sorted = malloc((size_t)b->tokens * sizeof *sorted);
    if (!sorted)
        return kvs_errf(err, KVS_ENOMEM, "out of memory (batch slots)");
    memcpy(sorted, h + b->off_slot, (size_t)b->tokens * sizeof *sorted);
    qsort(sorted, (size_t)b->tokens, sizeof *sorted, cmp_i32);
    int rc = KVS_OK;
    for (int64_t t = 1; t < b->tokens; t++)
        if (sorted[t] == sorted[t - 1]) {
            rc = kvs_errf(err, KVS_EINVAL,
                          "batch: two new tokens map to KV slot %d (block %lld, offset %lld): "
                          "block tables overlap",
                          sorted[t], (long long)(sorted[t] / bs), (long long)(sorted[t] % bs));
            break;
        }
    free(sorted);
    return rc;
}

int kernels_batch_create(kernels_backend *be, const kernels_seq *seqs, int64_t n,
                         int64_t block_size, int64_t num_blocks, kernels_batch **out,
                         kvs_err *err)
{
    *out = NULL;
    struct kernels_batch *b = calloc(1, sizeof *b);
    if (!b)
        return kvs_errf(err, KVS_ENOMEM, "out of memory (batch)");
    b->be = be;
    int64_t tables = 0;
    int rc = batch_check(seqs, n, block_size, num_blocks, b, &tables, err);
    if (rc != KVS_OK)
        goto fail;
    int64_t T = b->tokens;
    b->off_pos = 0;
    b->off_slot = T;
    b->off_qstart = 2 * T;
    b->off_ctx = b->off_qstart + n + 1;
    b->off_bt = b->off_ctx + n;
    b->off_dec = b->off_bt + n;
    b->off_pre = b->off_dec + b->n_decode;
    b->off_last = b->off_pre + b->n_prefill;
    b->off_tables = b->off_last + n;
    b->len = b->off_tables + tables;
    b->host = calloc((size_t)b->len, sizeof(int32_t));
    if (!b->host) {
        rc = kvs_errf(err, KVS_ENOMEM, "out of memory (batch metadata)");
        goto fail;
    }
    rc = batch_layout(seqs, b, err);
    if (rc != KVS_OK)
        goto fail;
    rc = kernels_buf_alloc(be, KERNELS_ELEM_I32, b->len, &b->dev, err);
    if (rc != KVS_OK)
        goto fail;
    rc = kernels_buf_write_i32(b->dev, 0, b->host, b->len, err);
    if (rc != KVS_OK)
        goto fail;
    *out = b;
    return KVS_OK;
fail:
    kernels_batch_free(b);
    return rc;
}

void kernels_batch_free(kernels_batch *b)
{
    if (!b)
        return;
    kernels_buf_free(b->dev);
    free(b->host);
    free(b);
}

int64_t kernels_batch_tokens(const kernels_batch *b) { return b->tokens; }
int64_t kernels_batch_seqs(const kernels_batch *b) { return b->n; }
int64_t kernels_batch_n_decode(const kernels_batch *b) { return b->n_decode; }
int64_t kernels_batch_n_prefill(const kernels_batch *b) { return b->n_prefill; }

int64_t kernels_batch_row(const kernels_batch *b, int64_t i, int64_t j)
{
    return (int64_t)b->host[b->off_qstart + i] + j;
}
