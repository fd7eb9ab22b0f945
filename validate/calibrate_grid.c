/* calibrate_grid.c — the calibration grids (quick/full per backend), the
 * default whole steps, and the memory plan of a grid (see calibrate.h). */
#include "calibrate.h"

#include <stdio.h>
#include <string.h>

#define SET(arr, cnt, ...)                                                  \
    do {                                                                    \
        static const int64_t v_[] = {__VA_ARGS__};                          \
        memcpy((arr), v_, sizeof v_);                                       \
        (cnt) = sizeof v_ / sizeof v_[0];                                   \
    } while (0)

/* Drop values above `limit`; if any were dropped, end with limit itself. */
static void clip(int64_t *v, size_t *n, int64_t limit)
{
    size_t k = 0;
    int dropped = 0;
    for (size_t i = 0; i < *n; i++) {
        if (v[i] <= limit)
            v[k++] = v[i];
        else
            dropped = 1;
    }
    if (dropped && (k == 0 || v[k - 1] < limit))
        v[k++] = limit;
    *n = k;
}

int calib_grid_preset(const char *name, const char *device, const model_spec *m,
                      calib_grid *g, kvs_err *err)
{
    memset(g, 0, sizeof *g);
    int full = !strcmp(name, "full"), cpu = !strcmp(device, "cpu");
    if (!full && strcmp(name, "quick"))
        return kvs_errf(err, KVS_EINVAL, "--grid: unknown grid '%s' (choices: quick, full)", name);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->block_size = 16;
    if (cpu && !full) {
        SET(g->tokens, g->n_tokens, 1, 4, 16, 64, 128, 256);
        SET(g->dec_batch, g->n_dec_batch, 1, 4, 16, 32);
        SET(g->dec_ctx, g->n_dec_ctx, 64, 256, 1024);
        SET(g->pre_len, g->n_pre_len, 16, 64, 256);
        SET(g->pre_batch, g->n_pre_batch, 1, 2);
        SET(g->pre_cached, g->n_pre_cached, 0, 128);
        SET(g->lm_seqs, g->n_lm_seqs, 1, 4, 16, 32);
        g->max_pre_tokens = 512;
    } else if (cpu) {
        SET(g->tokens, g->n_tokens, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024);
        SET(g->dec_batch, g->n_dec_batch, 1, 2, 4, 8, 16, 32, 64);
        SET(g->dec_ctx, g->n_dec_ctx, 32, 64, 128, 256, 512, 1024, 2048);
        SET(g->pre_len, g->n_pre_len, 8, 16, 32, 64, 128, 256, 512, 1024);
        SET(g->pre_batch, g->n_pre_batch, 1, 2, 4);
        SET(g->pre_cached, g->n_pre_cached, 0, 64, 512);
        SET(g->lm_seqs, g->n_lm_seqs, 1, 2, 4, 8, 16, 32, 64);
        g->max_pre_tokens = 2048;
    } else if (!full) {
        SET(g->tokens, g->n_tokens, 1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096);
        SET(g->dec_batch, g->n_dec_batch, 1, 8, 32, 64, 128);
        SET(g->dec_ctx, g->n_dec_ctx, 128, 512, 1024, 2048, 4096);
        SET(g->pre_len, g->n_pre_len, 64, 256, 512, 1024, 2048);
        SET(g->pre_batch, g->n_pre_batch, 1, 4);
        SET(g->pre_cached, g->n_pre_cached, 0, 1024);
        SET(g->lm_seqs, g->n_lm_seqs, 1, 8, 32, 128, 256);
        g->max_pre_tokens = 8192;
    } else {
        SET(g->tokens, g->n_tokens, 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512,
            768, 1024, 1536, 2048, 3072, 4096, 6144, 8192);
        SET(g->dec_batch, g->n_dec_batch, 1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256);
        SET(g->dec_ctx, g->n_dec_ctx, 64, 128, 256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192);
        SET(g->pre_len, g->n_pre_len, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192);
        SET(g->pre_batch, g->n_pre_batch, 1, 2, 4, 8);
        SET(g->pre_cached, g->n_pre_cached, 0, 256, 1024, 4096);
        SET(g->lm_seqs, g->n_lm_seqs, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512);
        g->max_pre_tokens = 16384;
    }
    int64_t max_ctx = m->max_ctx > 0 ? m->max_ctx : 2048;
    clip(g->dec_ctx, &g->n_dec_ctx, max_ctx);
    clip(g->pre_len, &g->n_pre_len, max_ctx);
    return KVS_OK;
}

int calib_prefill_point_ok(const calib_grid *g, const model_spec *m, int64_t b, int64_t l,
                           int64_t c)
{
    int64_t max_ctx = m->max_ctx > 0 ? m->max_ctx : 2048;
    return (b == 1 || b * l <= g->max_pre_tokens) && c + l <= max_ctx;
}

static int64_t blocks_for(int64_t tokens, int64_t bs) { return (tokens + bs - 1) / bs; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Append a step of nd decodes at contexts ctx(i) (after the step) and np
 * chunks of q tokens over c cached ones. */
static size_t add_step(calib_step *out, size_t k, size_t cap, int64_t np, int64_t q, int64_t c,
                       int64_t nd, int64_t c_lo, int64_t c_hi)
{
    if (k >= cap || k >= CALIB_MAX_STEPS || np + nd < 1 || np + nd > CALIB_STEP_MAX_SEQS)
        return k;
    calib_step *s = &out[k];
    memset(s, 0, sizeof *s);
    for (int64_t i = 0; i < np; i++)
        s->q[s->n] = q, s->c[s->n++] = c;
    for (int64_t i = 0; i < nd; i++) /* c_lo == c_hi: uniform; else alternating */
        s->q[s->n] = 1, s->c[s->n++] = (i % 2 ? c_hi : c_lo) - 1;
    return k + 1;
}

size_t calib_default_steps(const calib_grid *g, calib_step *out, size_t cap)
{
    size_t k = 0;
    int64_t b_mid = g->dec_batch[g->n_dec_batch / 2], c_mid = g->dec_ctx[g->n_dec_ctx / 2];
    int64_t c_lo = g->dec_ctx[0], c_hi = g->dec_ctx[g->n_dec_ctx - 1];
    int64_t l_mid = g->pre_len[g->n_pre_len / 2], l_lo = g->pre_len[0];
    int64_t cached = g->pre_cached[g->n_pre_cached - 1];
    /* decodes only, at every batch size of the grid: the overhead's range */
    for (size_t i = 0; i < g->n_dec_batch; i++)
        k = add_step(out, k, cap, 0, 0, 0, g->dec_batch[i], c_mid, c_mid);
    /* an uneven decode batch: half short, half long contexts */
    k = add_step(out, k, cap, 0, 0, 0, b_mid, c_lo, c_hi);
    /* one prompt; a prompt beside decodes (a mixed step) */
    k = add_step(out, k, cap, 1, l_mid, 0, 0, 0, 0);
    k = add_step(out, k, cap, 1, l_lo, 0, b_mid / 2 > 0 ? b_mid / 2 : 1, c_lo, c_lo);
    /* a chunk over stored context beside decodes (chunked prefill) */
    if (cached > 0)
        k = add_step(out, k, cap, 1, l_lo, cached, b_mid / 2 > 0 ? b_mid / 2 : 1, c_mid, c_mid);
    return k;
}

void calib_plan_grid(const kernels_backend *be, const model_spec *m, const calib_grid *g,
                     const calib_step *steps, size_t n_steps, calib_plan *p)
{
    memset(p, 0, sizeof *p);
    int64_t bs = g->block_size, max_dec_b = 0, max_dec_c = 0, max_pre_l = 0, max_pre_ctx = 0;
    p->max_seqs = 1;
    for (size_t i = 0; i < g->n_tokens; i++) {
        p->max_tokens = max64(p->max_tokens, g->tokens[i]);
        p->kv_blocks = max64(p->kv_blocks, blocks_for(g->tokens[i], bs));
    }
    for (size_t i = 0; i < g->n_dec_batch; i++)
        for (size_t j = 0; j < g->n_dec_ctx; j++) {
            int64_t b = g->dec_batch[i], c = g->dec_ctx[j];
            p->max_tokens = max64(p->max_tokens, b);
            p->max_seqs = max64(p->max_seqs, b);
            p->kv_blocks = max64(p->kv_blocks, b * blocks_for(c, bs));
            max_dec_b = max64(max_dec_b, b);
            max_dec_c = max64(max_dec_c, c);
        }
    for (size_t i = 0; i < g->n_pre_batch; i++)
        for (size_t j = 0; j < g->n_pre_len; j++)
            for (size_t k = 0; k < g->n_pre_cached; k++) {
                int64_t b = g->pre_batch[i], l = g->pre_len[j], c = g->pre_cached[k];
                if (!calib_prefill_point_ok(g, m, b, l, c))
                    continue;
                p->max_tokens = max64(p->max_tokens, b * l);
                p->max_seqs = max64(p->max_seqs, b);
                p->kv_blocks = max64(p->kv_blocks, b * blocks_for(c + l, bs));
                max_pre_l = max64(max_pre_l, l);
                max_pre_ctx = max64(max_pre_ctx, c + l);
            }
    for (size_t i = 0; i < g->n_lm_seqs; i++) {
        p->max_tokens = max64(p->max_tokens, g->lm_seqs[i]);
        p->max_seqs = max64(p->max_seqs, g->lm_seqs[i]);
        p->kv_blocks = max64(p->kv_blocks, g->lm_seqs[i]);
    }
    for (size_t s = 0; s < n_steps; s++) {
        int64_t t = 0, blocks = 0;
        for (int64_t i = 0; i < steps[s].n; i++) {
            t += steps[s].q[i];
            blocks += blocks_for(steps[s].c[i] + steps[s].q[i], bs);
            max_dec_c = max64(max_dec_c, steps[s].c[i] + steps[s].q[i]);
        }
        p->max_tokens = max64(p->max_tokens, t);
        p->max_seqs = max64(p->max_seqs, steps[s].n);
        p->kv_blocks = max64(p->kv_blocks, blocks);
    }
    p->weights_bytes = kernels_weights_bytes(be, m);
    p->kv_bytes = kernels_kv_bytes(be, m, 1, p->kv_blocks, bs);
    p->acts_bytes = kernels_acts_bytes(be, m, p->max_tokens, p->max_seqs);
    p->workspace_bytes =
        max64(kernels_attn_workspace_bytes(be, m, max_dec_b, max_dec_c, 0),
              kernels_attn_workspace_bytes(be, m, 0, max64(max_pre_ctx, max_dec_c), max_pre_l));
    p->total_bytes = p->weights_bytes + p->kv_bytes + p->acts_bytes + p->workspace_bytes;
}

