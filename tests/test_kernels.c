/* test_kernels.c — the kernel backends against a naive, UNPAGED reference
 * written here in double precision: every op, MHA / GQA / MQA, ragged
 * batches mixing prefills and decodes, block tables of shuffled scattered
 * blocks; then CUDA against CPU on the same inputs when a GPU is present.
 *
 * Error measure: NMSE = sum (got - ref)^2 / sum ref^2.
 * - CPU (fp32 storage and math) vs double: fp32 unit roundoff is 6e-8; a dot
 *   product of K <= 1024 terms has a typical relative error ~ sqrt(K) * 6e-8
 *   ~ 2e-6, so NMSE ~ 4e-12 per op and a few times that through a 2-layer
 *   step.  Bound 1e-8 keeps a 1000x margin, while any indexing mistake (a
 *   wrong block, head, position or causal limit) gives NMSE ~ 0.1 .. 1.
 * - CUDA (fp16 storage, fp32 accumulation) vs CPU: each fp16 rounding has
 *   relative error <= 2^-11, i.e. NMSE ~ (2^-11)^2 / 3 ~ 8e-8; an op stores a
 *   few roundings (inputs, output, P of the prefill), a step a few dozen
 *   (which random weights amplify a bit): ~1e-7 per op and ~1e-6 per step
 *   is what fp32 accumulation gives.  Bounds 1e-5 (op) and 1e-4 (whole
 *   step) keep a ~100x margin, while an fp16 accumulator (NMSE ~1e-4 ..
 *   1e-3 over long sums), a dropped tile or a wrong row (NMSE ~1e-3 .. 1)
 *   fails them.  The CUDA checks cover GQA groups 2-12, block sizes 1-32,
 *   contexts around the kernels' tile edges (32, 64, 256), a 6,000-token
 *   split decode and prefill chunks of 2-5 tokens over a stored context;
 *   without a GPU each prints "SKIP: no CUDA device ...". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kernels.h"
#include "../base/rng.h"
#include "testutil.h"

#define CPU_NMSE 1e-8
#define GPU_OP_NMSE 1e-5
#define GPU_STEP_NMSE 1e-4
#define MAXS 8    /* sequences per fixture */
#define MAXB 1024 /* blocks per sequence table */

static double nmse(const float *got, const double *ref, int64_t n)
{
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        s += ref[i] * ref[i];
    }
    return s > 0 ? e / s : e;
}

static double nmse_f(const float *got, const float *ref, int64_t n)
{
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        e += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        s += (double)ref[i] * ref[i];
    }
    return s > 0 ? e / s : e;
}

static model_spec shape(int64_t heads, int64_t kv_heads)
{
    model_spec m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "test-%lldq-%lldkv", (long long)heads, (long long)kv_heads);
    m.head_dim = 32; /* a size the CUDA decode kernel supports */
    m.heads = heads;
    m.kv_heads = kv_heads;
    m.hidden = 128;
    m.layers = 2;
    m.intermediate = 176;
    m.vocab = 97;
    m.max_ctx = 8192;
    m.dtype_bytes = 2;
    return m;
}

static float *randv(rng *r, int64_t n, float a)
{
    float *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = a * (float)(2 * rng_uniform(r) - 1);
    return v;
}

static float *readback(const kernels_buf *b, int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    kvs_err err = {{0}};
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(kernels_buf_read(b, 0, v, n, &err), KVS_OK);
    return v;
}

static kernels_buf *upload(kernels_backend *be, const float *v, int64_t n)
{
    kernels_buf *b;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_buf_alloc(be, KERNELS_ELEM_ACT, n, &b, &err), KVS_OK);
    ck_assert_int_eq(kernels_buf_write(b, 0, v, n, &err), KVS_OK);
    return b;
}

/* ------------------------------------------------------------ fixture
 * A ragged batch over pools of shuffled blocks, and the same K/V kept
 * contiguous per (layer, sequence): kc[l][s][pos][kv_head][d]. */
typedef struct fixture {
    model_spec m;
    int64_t n, bs, nb, layers;
    kernels_seq seqs[MAXS];
    int32_t tables[MAXS][MAXB];
    float *kc[2][MAXS], *vc[2][MAXS]; /* [c + q][kv_heads][head_dim] */
} fixture;

static void fx_init(fixture *f, const model_spec *m, const int64_t *q, const int64_t *c,
                    int64_t n, int64_t bs, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->m = *m;
    f->n = n;
    f->bs = bs;
    f->layers = 2;
    int64_t need = 0;
    for (int64_t i = 0; i < n; i++)
        need += (c[i] + q[i] + bs - 1) / bs;
    f->nb = need + 7; /* spare blocks nobody uses */
    int32_t *perm = malloc((size_t)f->nb * sizeof *perm);
    ck_assert_ptr_nonnull(perm);
    rng r;
    rng_init(&r, seed);
    for (int64_t i = 0; i < f->nb; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = f->nb - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)rng_below(&r, (uint64_t)i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int64_t next = 0, row = m->kv_heads * m->head_dim;
    for (int64_t i = 0; i < n; i++) {
        int64_t nbk = (c[i] + q[i] + bs - 1) / bs;
        ck_assert_int_le(nbk, MAXB);
        for (int64_t k = 0; k < nbk; k++)
            f->tables[i][k] = perm[next++];
        f->seqs[i] = (kernels_seq){.q = q[i], .c = c[i], .blocks = f->tables[i], .n_blocks = nbk};
        for (int l = 0; l < 2; l++) {
            f->kc[l][i] = randv(&r, (c[i] + q[i]) * row, 1.0f);
            f->vc[l][i] = randv(&r, (c[i] + q[i]) * row, 1.0f);
        }
    }
    free(perm);
}

static void fx_free(fixture *f)
{
    for (int l = 0; l < 2; l++)
        for (int64_t i = 0; i < f->n; i++) {
            free(f->kc[l][i]);
            free(f->vc[l][i]);
        }
}

static int64_t fx_tokens(const fixture *f)
{
    int64_t t = 0;
    for (int64_t i = 0; i < f->n; i++)
        t += f->seqs[i].q;
    return t;
}

/* Write the cached positions (< c) of every sequence into the pools. */
static void fx_fill_pools(const fixture *f, kernels_kv *kv)
{
    kvs_err err = {{0}};
    int64_t row = f->m.kv_heads * f->m.head_dim;
    for (int64_t l = 0; l < kv->layers; l++)
        for (int64_t i = 0; i < f->n; i++)
            for (int64_t p = 0; p < f->seqs[i].c; p++) {
                int64_t slot = (int64_t)f->tables[i][p / f->bs] * f->bs + p % f->bs;
                ck_assert_int_eq(kernels_buf_write(kv->k[l], slot * row, f->kc[l][i] + p * row, row, &err), KVS_OK);
                ck_assert_int_eq(kernels_buf_write(kv->v[l], slot * row, f->vc[l][i] + p * row, row, &err), KVS_OK);
            }
}

/* ------------------------------------------------------- naive reference */

static void ref_rmsnorm(const double *x, const float *w, double *out, int64_t rows, int64_t dim)
{
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < dim; i++)
            ss += x[r * dim + i] * x[r * dim + i];
        double inv = 1.0 / sqrt(ss / (double)dim + KERNELS_RMS_EPS);
        for (int64_t i = 0; i < dim; i++)
            out[r * dim + i] = x[r * dim + i] * inv * w[i];
    }
}

static void ref_gemm(const double *a, const float *w, double *c, int64_t m, int64_t n, int64_t k,
                     int accumulate)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t t = 0; t < k; t++)
                s += a[i * k + t] * w[j * k + t];
            c[i * n + j] = accumulate ? c[i * n + j] + s : s;
        }
}

/* Rotate-half RoPE of head vector v (hd) at position p. */
static void ref_rope_vec(double *v, int64_t hd, int64_t p)
{
    for (int64_t i = 0; i < hd / 2; i++) {
        double ang = (double)p * pow(KERNELS_ROPE_THETA, -2.0 * (double)i / (double)hd);
        double x1 = v[i], x2 = v[i + hd / 2];
        v[i] = x1 * cos(ang) - x2 * sin(ang);
        v[i + hd / 2] = x2 * cos(ang) + x1 * sin(ang);
    }
}

/* Attention of token row `row` (position pos of sequence i) for head h over
 * the contiguous K/V (double copies) kd/vd [ctx][kvh][hd]. */
static void ref_attend(const model_spec *m, const double *qv, const double *kd, const double *vd,
                       int64_t keys, int64_t h, double *out)
{
    int64_t hd = m->head_dim, g = h / (m->heads / m->kv_heads), row = m->kv_heads * hd;
    double *s = malloc((size_t)keys * sizeof *s), mx = -INFINITY, sum = 0;
    ck_assert_ptr_nonnull(s);
    for (int64_t t = 0; t < keys; t++) {
        double d = 0;
        for (int64_t e = 0; e < hd; e++)
            d += qv[e] * kd[t * row + g * hd + e];
        s[t] = d / sqrt((double)hd);
        mx = s[t] > mx ? s[t] : mx;
    }
    for (int64_t t = 0; t < keys; t++)
        sum += s[t] = exp(s[t] - mx);
    for (int64_t e = 0; e < hd; e++) {
        double o = 0;
        for (int64_t t = 0; t < keys; t++)
            o += s[t] * vd[t * row + g * hd + e];
        out[e] = o / sum;
    }
    free(s);
}

/* Attention part of a layer over the whole batch: qkv (T rows, rope done)
 * appended into the contiguous caches of layer l, then every new token
 * attends causally. */
static void ref_attention(fixture *f, int l, const double *qkv, double *ao)
{
    const model_spec *m = &f->m;
    int64_t hd = m->head_dim, W = (m->heads + 2 * m->kv_heads) * hd, row = m->kv_heads * hd;
    int64_t r0 = 0;
    for (int64_t i = 0; i < f->n; i++) {
        int64_t c = f->seqs[i].c, q = f->seqs[i].q, ctx = c + q;
        double *kd = malloc((size_t)(ctx * row) * sizeof *kd), *vd = malloc((size_t)(ctx * row) * sizeof *vd);
        ck_assert_ptr_nonnull(kd);
        ck_assert_ptr_nonnull(vd);
        for (int64_t e = 0; e < c * row; e++) {
            kd[e] = f->kc[l][i][e];
            vd[e] = f->vc[l][i][e];
        }
        for (int64_t j = 0; j < q; j++)
            for (int64_t e = 0; e < row; e++) {
                kd[(c + j) * row + e] = qkv[(r0 + j) * W + m->heads * hd + e];
                vd[(c + j) * row + e] = qkv[(r0 + j) * W + m->heads * hd + row + e];
            }
        for (int64_t j = 0; j < q; j++)
            for (int64_t h = 0; h < m->heads; h++)
                ref_attend(m, qkv + (r0 + j) * W + h * hd, kd, vd, c + j + 1, h,
                           ao + (r0 + j) * m->heads * hd + h * hd);
        free(kd);
        free(vd);
        r0 += q;
    }
}

typedef struct host_weights {
    float *attn_norm, *wqkv, *wo, *mlp_norm, *wgu, *wd, *final_norm, *lm_head;
} host_weights;

static void hw_read(const model_spec *m, const kernels_weights *w, host_weights *h)
{
    int64_t H = m->hidden, I = m->intermediate, A = m->heads * m->head_dim;
    int64_t W = (m->heads + 2 * m->kv_heads) * m->head_dim;
    h->attn_norm = readback(w->attn_norm, H);
    h->wqkv = readback(w->wqkv, W * H);
    h->wo = readback(w->wo, H * A);
    h->mlp_norm = readback(w->mlp_norm, H);
    h->wgu = readback(w->wgu, 2 * I * H);
    h->wd = readback(w->wd, H * I);
    h->final_norm = readback(w->final_norm, H);
    h->lm_head = readback(w->lm_head, m->vocab * H);
}

static void hw_free(host_weights *h)
{
    float *all[] = {h->attn_norm, h->wqkv, h->wo, h->mlp_norm, h->wgu, h->wd, h->final_norm, h->lm_head};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* A whole step, unpaged: x [T][H] in place, logits [n][vocab] out. */
static void ref_step(fixture *f, const host_weights *w, double *x, double *logits)
{
    const model_spec *m = &f->m;
    int64_t T = fx_tokens(f), H = m->hidden, I = m->intermediate, hd = m->head_dim;
    int64_t A = m->heads * hd, W = (m->heads + 2 * m->kv_heads) * hd;
    double *xn = calloc((size_t)(T * H), sizeof *xn), *qkv = calloc((size_t)(T * W), sizeof *qkv);
    double *ao = calloc((size_t)(T * A), sizeof *ao), *gu = calloc((size_t)(T * 2 * I), sizeof *gu);
    double *act = calloc((size_t)(T * I), sizeof *act);
    ck_assert(xn && qkv && ao && gu && act);
    for (int64_t l = 0; l < m->layers; l++) {
        ref_rmsnorm(x, w->attn_norm, xn, T, H);
        ref_gemm(xn, w->wqkv, qkv, T, W, H, 0);
        int64_t r = 0;
        for (int64_t i = 0; i < f->n; i++)
            for (int64_t j = 0; j < f->seqs[i].q; j++, r++)
                for (int64_t h = 0; h < m->heads + m->kv_heads; h++)
                    ref_rope_vec(qkv + r * W + h * hd, hd, f->seqs[i].c + j);
        ref_attention(f, (int)(l % f->layers), qkv, ao);
        ref_gemm(ao, w->wo, x, T, H, A, 1);
        ref_rmsnorm(x, w->mlp_norm, xn, T, H);
        ref_gemm(xn, w->wgu, gu, T, 2 * I, H, 0);
        for (int64_t t = 0; t < T; t++)
            for (int64_t e = 0; e < I; e++) {
                double g = gu[t * 2 * I + e], u = gu[t * 2 * I + I + e];
                act[t * I + e] = g / (1 + exp(-g)) * u;
            }
        ref_gemm(act, w->wd, x, T, H, I, 1);
    }
    double *hl = calloc((size_t)(f->n * H), sizeof *hl), *hn = calloc((size_t)(f->n * H), sizeof *hn);
    ck_assert(hl && hn);
    int64_t r = 0;
    for (int64_t i = 0; i < f->n; i++) {
        r += f->seqs[i].q;
        memcpy(hl + i * H, x + (r - 1) * H, (size_t)H * sizeof *hl);
    }
    ref_rmsnorm(hl, w->final_norm, hn, f->n, H);
    ref_gemm(hn, w->lm_head, logits, f->n, m->vocab, H, 0);
    free(xn), free(qkv), free(ao), free(gu), free(act), free(hl), free(hn);
}

/* ----------------------------------------------------------- bad input */

START_TEST(test_unknown_backend)
{
    kernels_backend *be = (kernels_backend *)1;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_backend_open("tpu", &be, &err), KVS_EINVAL);
    ck_assert_ptr_null(be);
    ck_assert_ptr_nonnull(strstr(err.msg, "unknown kernel backend 'tpu'"));
    ck_assert_ptr_nonnull(strstr(err.msg, "cpu"));
}
END_TEST

/* Without a GPU (or without CUDA in the build) "cuda" is a clean device
 * error; with one it opens. */
START_TEST(test_cuda_open_or_no_device)
{
    kernels_backend *be = NULL;
    kvs_err err = {{0}};
    int rc = kernels_backend_open("cuda", &be, &err);
    if (rc == KVS_OK) {
        kernels_device_info info;
        ck_assert_int_eq(kernels_backend_info(be, &info, &err), KVS_OK);
        ck_assert(info.mem_total_bytes > 0 && info.peak_mem_Bps > 0);
        printf("cuda device: %s (driver %s, runtime %s)\n", info.name, info.driver_version,
               info.runtime_version);
        kernels_backend_close(be);
    } else {
        ck_assert_int_eq(rc, KVS_EDEVICE);
        ck_assert_ptr_null(be);
        ck_assert_msg(!strncmp(err.msg, "no CUDA device: ", 16), "message: %s", err.msg);
        printf("SKIP: %s\n", err.msg);
    }
}
END_TEST

START_TEST(test_bad_shapes)
{
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    int32_t t1[2] = {0, 1}, t2[2] = {1, 9};
    kernels_batch *b = NULL;
    /* q = 0 */
    kernels_seq s = {.q = 0, .c = 3, .blocks = t1, .n_blocks = 2};
    ck_assert_int_eq(kernels_batch_create(be, &s, 1, 4, 8, &b, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "sequence 0"));
    /* 9 tokens need 3 blocks of 4 */
    s = (kernels_seq){.q = 2, .c = 7, .blocks = t1, .n_blocks = 2};
    ck_assert_int_eq(kernels_batch_create(be, &s, 1, 4, 8, &b, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "needs 3 blocks"));
    /* block id 9 outside 8 blocks, in sequence 1 */
    kernels_seq two[2] = {{.q = 1, .c = 0, .blocks = t1, .n_blocks = 2},
                          {.q = 5, .c = 0, .blocks = t2, .n_blocks = 2}};
    ck_assert_int_eq(kernels_batch_create(be, two, 2, 4, 8, &b, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "sequence 1 block table[1] = 9"));
    /* both sequences write position 0 of block 0 */
    two[1] = (kernels_seq){.q = 1, .c = 0, .blocks = t1, .n_blocks = 2};
    ck_assert_int_eq(kernels_batch_create(be, two, 2, 4, 8, &b, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "overlap"));
    ck_assert_ptr_null(b);

    /* gemm operand too small for 3 x 4 x 5 */
    kernels_buf *a, *w, *c, *ib;
    ck_assert_int_eq(kernels_buf_alloc(be, KERNELS_ELEM_ACT, 15, &a, &err), KVS_OK);
    ck_assert_int_eq(kernels_buf_alloc(be, KERNELS_ELEM_ACT, 19, &w, &err), KVS_OK);
    ck_assert_int_eq(kernels_buf_alloc(be, KERNELS_ELEM_ACT, 12, &c, &err), KVS_OK);
    ck_assert_int_eq(kernels_buf_alloc(be, KERNELS_ELEM_I32, 20, &ib, &err), KVS_OK);
    ck_assert_int_eq(kernels_op_gemm(be, a, w, c, 3, 4, 5, 0.0f, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "gemm weight"));
    ck_assert_int_eq(kernels_op_gemm(be, a, ib, c, 3, 4, 5, 0.0f, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "element type"));
    ck_assert_int_eq(kernels_op_gemm(be, a, ib, c, 3, 4, 0, 0.0f, &err), KVS_EINVAL);
    ck_assert_int_eq(kernels_op_rmsnorm(be, a, w, c, 3, 5, &err), KVS_EINVAL); /* out 12 < 15 */
    float v[4] = {0};
    ck_assert_int_eq(kernels_buf_write(c, 10, v, 4, &err), KVS_EINVAL);      /* 10 + 4 > 12 */
    ck_assert_int_eq(kernels_buf_write(ib, 0, v, 4, &err), KVS_EINVAL);      /* int32 buffer */

    /* heads not a multiple of kv_heads */
    model_spec m = shape(6, 4);
    kernels_weights wt;
    ck_assert_int_eq(kernels_weights_init(be, &m, 1, &wt, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "kv_heads"));

    /* a step larger than the activations; pools of another block size */
    m = shape(4, 2);
    kernels_acts acts;
    kernels_kv kv;
    ck_assert_int_eq(kernels_acts_init(be, &m, 4, 2, &acts, &err), KVS_OK);
    ck_assert_int_eq(kernels_kv_init(be, &m, 1, 8, 8, &kv, &err), KVS_OK);
    ck_assert_int_eq(kernels_weights_init(be, &m, 1, &wt, &err), KVS_OK);
    s = (kernels_seq){.q = 5, .c = 0, .blocks = t1, .n_blocks = 2};
    ck_assert_int_eq(kernels_batch_create(be, &s, 1, 4, 8, &b, &err), KVS_OK);
    ck_assert_int_eq(kernels_step_forward(be, &m, &wt, &kv, b, &acts, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "exceeds activations"));
    ck_assert_int_eq(kernels_op_kv_append(be, &m, acts.qkv, b, &kv, 0, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "blocks of 4 tokens"));

    kernels_batch_free(b);
    kernels_weights_free(&wt);
    kernels_kv_free(&kv);
    kernels_acts_free(&acts);
    kernels_buf_free(a), kernels_buf_free(w), kernels_buf_free(c), kernels_buf_free(ib);
    kernels_backend_close(be);
}
END_TEST

/* ---------------------------------------------------------- CPU vs naive */

START_TEST(test_cpu_dense_ops)
{
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    rng r;
    rng_init(&r, 11);
    const int64_t M = 13, N = 37, K = 67; /* odd sizes: tails of the unrolled dot */
    float *a = randv(&r, M * K, 1), *w = randv(&r, N * K, 1), *c0 = randv(&r, M * N, 1);
    kernels_buf *ba = upload(be, a, M * K), *bw = upload(be, w, N * K), *bc = upload(be, c0, M * N);
    double *ad = malloc((size_t)(M * K) * sizeof *ad), *ref = malloc((size_t)(M * N) * sizeof *ref);
    ck_assert(ad && ref);
    for (int64_t i = 0; i < M * K; i++)
        ad[i] = a[i];
    /* beta = 1 accumulates into c, beta = 0 overwrites */
    for (int64_t i = 0; i < M * N; i++)
        ref[i] = c0[i];
    ref_gemm(ad, w, ref, M, N, K, 1);
    ck_assert_int_eq(kernels_op_gemm(be, ba, bw, bc, M, N, K, 1.0f, &err), KVS_OK);
    float *got = readback(bc, M * N);
    ck_assert_double_lt(nmse(got, ref, M * N), CPU_NMSE);
    free(got);
    ref_gemm(ad, w, ref, M, N, K, 0);
    ck_assert_int_eq(kernels_op_gemm(be, ba, bw, bc, M, N, K, 0.0f, &err), KVS_OK);
    got = readback(bc, M * N);
    ck_assert_double_lt(nmse(got, ref, M * N), CPU_NMSE);
    free(got);

    /* rmsnorm over rows of K with weight w[0..K) */
    double *rn = malloc((size_t)(M * K) * sizeof *rn);
    ck_assert_ptr_nonnull(rn);
    ref_rmsnorm(ad, w, rn, M, K);
    kernels_buf *bo;
    ck_assert_int_eq(kernels_buf_alloc(be, KERNELS_ELEM_ACT, M * K, &bo, &err), KVS_OK);
    ck_assert_int_eq(kernels_op_rmsnorm(be, ba, bw, bo, M, K, &err), KVS_OK);
    got = readback(bo, M * K);
    ck_assert_double_lt(nmse(got, rn, M * K), CPU_NMSE);
    free(got);

    /* swiglu: rows of 2 * 33 from a (13 x 66 <= 13 x 67) */
    const int64_t I = 33;
    double *sw = malloc((size_t)(M * I) * sizeof *sw);
    ck_assert_ptr_nonnull(sw);
    for (int64_t i = 0; i < M; i++)
        for (int64_t e = 0; e < I; e++) {
            double g = a[i * 2 * I + e], u = a[i * 2 * I + I + e];
            sw[i * I + e] = g / (1 + exp(-g)) * u;
        }
    ck_assert_int_eq(kernels_op_swiglu(be, ba, bo, M, I, &err), KVS_OK);
    got = readback(bo, M * I);
    ck_assert_double_lt(nmse(got, sw, M * I), CPU_NMSE);
    free(got);

    free(a), free(w), free(c0), free(ad), free(ref), free(rn), free(sw);
    kernels_buf_free(ba), kernels_buf_free(bw), kernels_buf_free(bc), kernels_buf_free(bo);
    kernels_backend_close(be);
}
END_TEST

/* RoPE by hand: position 0 is the identity; position 1 rotates pair 0 by
 * exactly 1 radian (inv_freq_0 = theta^0 = 1). */
START_TEST(test_cpu_rope_by_hand)
{
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    model_spec m = shape(1, 1);
    m.head_dim = 4; /* qkv row: q(4) k(4) v(4) */
    int32_t tab[1] = {0};
    kernels_seq s = {.q = 2, .c = 0, .blocks = tab, .n_blocks = 1};
    kernels_batch *b;
    ck_assert_int_eq(kernels_batch_create(be, &s, 1, 4, 1, &b, &err), KVS_OK);
    float row[24] = {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, /* token 0, position 0 */
                     1, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9}; /* token 1, position 1 */
    kernels_buf *q = upload(be, row, 24);
    ck_assert_int_eq(kernels_op_rope(be, &m, q, b, &err), KVS_OK);
    float *got = readback(q, 24);
    for (int i = 0; i < 12; i++)
        ck_assert_float_eq_tol(got[i], row[i], 1e-6f);
    /* pair (0, 2) of q at position 1: (1, 0) -> (cos 1, sin 1) */
    ck_assert_float_eq_tol(got[12], (float)cos(1.0), 1e-6f);
    ck_assert_float_eq_tol(got[14], (float)sin(1.0), 1e-6f);
    ck_assert_float_eq(got[20], 9.0f); /* v untouched */
    free(got);
    kernels_buf_free(q);
    kernels_batch_free(b);
    kernels_backend_close(be);
}
END_TEST

/* rope + kv_append + decode and prefill attention of a ragged batch over
 * shuffled blocks, against the unpaged reference. */
static void check_paged_attention(int64_t heads, int64_t kv_heads, int64_t bs)
{
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    model_spec m = shape(heads, kv_heads);
    /* decode c=37; prefill from empty; decode of a 1-token prompt (c=0);
     * chunked prefill on top of a cache (c=20); long decode; prefill that
     * ends exactly on a block boundary */
    int64_t q[] = {1, 5, 1, 7, 1, 16}, c[] = {37, 0, 0, 20, 300, 0};
    fixture f;
    fx_init(&f, &m, q, c, 6, bs, 100 + (uint64_t)heads * 10 + (uint64_t)kv_heads);
    kernels_kv kv;
    ck_assert_int_eq(kernels_kv_init(be, &m, 1, f.nb, bs, &kv, &err), KVS_OK);
    fx_fill_pools(&f, &kv);
    kernels_batch *b;
    ck_assert_int_eq(kernels_batch_create(be, f.seqs, f.n, bs, f.nb, &b, &err), KVS_OK);
    ck_assert_int_eq(kernels_batch_n_decode(b), 3);
    ck_assert_int_eq(kernels_batch_n_prefill(b), 3);
    int64_t T = fx_tokens(&f), hd = m.head_dim, W = (heads + 2 * kv_heads) * hd;
    int64_t row = kv_heads * hd;
    rng r;
    rng_init(&r, 5);
    float *qkv = randv(&r, T * W, 1);
    kernels_buf *bq = upload(be, qkv, T * W), *bo;
    ck_assert_int_eq(kernels_buf_alloc(be, KERNELS_ELEM_ACT, T * heads * hd, &bo, &err), KVS_OK);

    /* reference rope, in double */
    double *qd = malloc((size_t)(T * W) * sizeof *qd), *ao = calloc((size_t)(T * heads * hd), sizeof *ao);
    ck_assert(qd && ao);
    for (int64_t i = 0; i < T * W; i++)
        qd[i] = qkv[i];
    for (int64_t i = 0, t = 0; i < f.n; i++)
        for (int64_t j = 0; j < q[i]; j++, t++)
            for (int64_t h = 0; h < heads + kv_heads; h++)
                ref_rope_vec(qd + t * W + h * hd, hd, c[i] + j);
    ck_assert_int_eq(kernels_op_rope(be, &m, bq, b, &err), KVS_OK);
    float *got = readback(bq, T * W);
    ck_assert_double_lt(nmse(got, qd, T * W), CPU_NMSE);
    free(got);

    /* kv_append: the new tokens' k, v land in their slots */
    ck_assert_int_eq(kernels_op_kv_append(be, &m, bq, b, &kv, 0, &err), KVS_OK);
    float *kp = readback(kv.k[0], f.nb * bs * row), *vp = readback(kv.v[0], f.nb * bs * row);
    for (int64_t i = 0, t = 0; i < f.n; i++)
        for (int64_t j = 0; j < q[i]; j++, t++) {
            int64_t p = c[i] + j, slot = (int64_t)f.tables[i][p / bs] * bs + p % bs;
            for (int64_t e = 0; e < row; e++) {
                ck_assert_double_lt(fabs(kp[slot * row + e] - qd[t * W + heads * hd + e]), 1e-5);
                ck_assert_double_lt(fabs(vp[slot * row + e] - qd[t * W + heads * hd + row + e]), 1e-5);
            }
        }
    free(kp), free(vp);

    /* attention: decodes then prefills fill disjoint rows */
    ref_attention(&f, 0, qd, ao);
    ck_assert_int_eq(kernels_op_decode_attention(be, &m, bq, b, &kv, 0, bo, &err), KVS_OK);
    ck_assert_int_eq(kernels_op_prefill_attention(be, &m, bq, b, &kv, 0, bo, &err), KVS_OK);
    got = readback(bo, T * heads * hd);
    ck_assert_double_lt(nmse(got, ao, T * heads * hd), CPU_NMSE);
    /* the decode of sequence 4 (context 301) row alone */
    int64_t r4 = kernels_batch_row(b, 4, 0);
    ck_assert_double_lt(nmse(got + r4 * heads * hd, ao + r4 * heads * hd, heads * hd), CPU_NMSE);
    free(got);

    free(qkv), free(qd), free(ao);
    kernels_buf_free(bq), kernels_buf_free(bo);
    kernels_batch_free(b);
    kernels_kv_free(&kv);
    fx_free(&f);
    kernels_backend_close(be);
}

START_TEST(test_cpu_attention_mha) { check_paged_attention(4, 4, 16); }
END_TEST
START_TEST(test_cpu_attention_gqa) { check_paged_attention(8, 2, 8); }
END_TEST
START_TEST(test_cpu_attention_mqa) { check_paged_attention(4, 1, 4); }
END_TEST

/* A whole 2-layer step with its LM head against the unpaged reference. */
static void check_step(int64_t heads, int64_t kv_heads)
{
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    model_spec m = shape(heads, kv_heads);
    int64_t q[] = {3, 1, 1, 9}, c[] = {0, 50, 7, 12};
    fixture f;
    fx_init(&f, &m, q, c, 4, 8, 77);
    kernels_weights w;
    kernels_kv kv;
    kernels_acts acts;
    ck_assert_int_eq(kernels_weights_init(be, &m, 3, &w, &err), KVS_OK);
    ck_assert_int_eq(kernels_kv_init(be, &m, 2, f.nb, 8, &kv, &err), KVS_OK);
    ck_assert_int_eq(kernels_acts_init(be, &m, 32, 8, &acts, &err), KVS_OK);
    fx_fill_pools(&f, &kv);
    kernels_batch *b;
    ck_assert_int_eq(kernels_batch_create(be, f.seqs, f.n, 8, f.nb, &b, &err), KVS_OK);
    int64_t T = fx_tokens(&f), H = m.hidden;
    rng r;
    rng_init(&r, 9);
    float *x = randv(&r, T * H, 1);
    ck_assert_int_eq(kernels_buf_write(acts.x, 0, x, T * H, &err), KVS_OK);
    ck_assert_int_eq(kernels_step_forward(be, &m, &w, &kv, b, &acts, &err), KVS_OK);

    host_weights hw;
    hw_read(&m, &w, &hw);
    double *xd = malloc((size_t)(T * H) * sizeof *xd), *lg = malloc((size_t)(f.n * m.vocab) * sizeof *lg);
    ck_assert(xd && lg);
    for (int64_t i = 0; i < T * H; i++)
        xd[i] = x[i];
    ref_step(&f, &hw, xd, lg);
    float *gx = readback(acts.x, T * H), *gl = readback(acts.logits, f.n * m.vocab);
    ck_assert_double_lt(nmse(gx, xd, T * H), CPU_NMSE);
    ck_assert_double_lt(nmse(gl, lg, f.n * m.vocab), CPU_NMSE);
    free(gx), free(gl), free(x), free(xd), free(lg);
    hw_free(&hw);
    kernels_batch_free(b);
    kernels_weights_free(&w);
    kernels_kv_free(&kv);
    kernels_acts_free(&acts);
    fx_free(&f);
    kernels_backend_close(be);
}

START_TEST(test_cpu_step_mha) { check_step(4, 4); }
END_TEST
START_TEST(test_cpu_step_gqa) { check_step(4, 2); }
END_TEST

/* Same seed, same weights; another seed, other weights. */
START_TEST(test_weights_seeded)
{
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    model_spec m = shape(4, 2);
    kernels_weights a, b, c;
    ck_assert_int_eq(kernels_weights_init(be, &m, 42, &a, &err), KVS_OK);
    ck_assert_int_eq(kernels_weights_init(be, &m, 42, &b, &err), KVS_OK);
    ck_assert_int_eq(kernels_weights_init(be, &m, 43, &c, &err), KVS_OK);
    int64_t n = m.vocab * m.hidden;
    float *va = readback(a.lm_head, n), *vb = readback(b.lm_head, n), *vc = readback(c.lm_head, n);
    ck_assert_int_eq(memcmp(va, vb, (size_t)n * sizeof *va), 0);
    ck_assert_int_ne(memcmp(va, vc, (size_t)n * sizeof *va), 0);
    /* uniform in +- sqrt(3 / hidden): variance 1 / fan_in */
    double bound = sqrt(3.0 / (double)m.hidden);
    for (int64_t i = 0; i < n; i++)
        ck_assert_double_le(fabs(va[i]), bound);
    free(va), free(vb), free(vc);
    kernels_weights_free(&a), kernels_weights_free(&b), kernels_weights_free(&c);
    kernels_backend_close(be);
}
END_TEST

/* ---------------------------------------------------------- CUDA vs CPU */

/* Run rope, kv_append, both attentions and a whole step on one backend;
 * out_* receive the results (malloc'd). */
static void run_on(const char *name, const model_spec *m, fixture *f, const float *qkv,
                   const float *x, float **o_rope, float **o_attn, float **o_x,
                   float **o_logits)
{
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_msg(kernels_backend_open(name, &be, &err) == KVS_OK, "%s", err.msg);
    int64_t T = fx_tokens(f), hd = m->head_dim, W = (m->heads + 2 * m->kv_heads) * hd;
    kernels_kv kv;
    kernels_weights w;
    kernels_acts acts;
    kernels_batch *b;
    ck_assert_int_eq(kernels_kv_init(be, m, 2, f->nb, f->bs, &kv, &err), KVS_OK);
    ck_assert_int_eq(kernels_weights_init(be, m, 5, &w, &err), KVS_OK);
    ck_assert_int_eq(kernels_acts_init(be, m, T, f->n, &acts, &err), KVS_OK);
    ck_assert_int_eq(kernels_batch_create(be, f->seqs, f->n, f->bs, f->nb, &b, &err), KVS_OK);
    fx_fill_pools(f, &kv);
    kernels_buf *bq = upload(be, qkv, T * W);
    ck_assert_int_eq(kernels_op_rope(be, m, bq, b, &err), KVS_OK);
    *o_rope = readback(bq, T * W);
    ck_assert_int_eq(kernels_op_kv_append(be, m, bq, b, &kv, 1, &err), KVS_OK);
    ck_assert_msg(kernels_op_decode_attention(be, m, bq, b, &kv, 1, acts.ao, &err) == KVS_OK, "%s", err.msg);
    ck_assert_msg(kernels_op_prefill_attention(be, m, bq, b, &kv, 1, acts.ao, &err) == KVS_OK, "%s", err.msg);
    *o_attn = readback(acts.ao, T * m->heads * hd);
    fx_fill_pools(f, &kv); /* fresh caches for the step */
    ck_assert_int_eq(kernels_buf_write(acts.x, 0, x, T * m->hidden, &err), KVS_OK);
    ck_assert_msg(kernels_step_forward(be, m, &w, &kv, b, &acts, &err) == KVS_OK, "%s", err.msg);
    ck_assert_int_eq(kernels_backend_sync(be, &err), KVS_OK);
    *o_x = readback(acts.x, T * m->hidden);
    *o_logits = readback(acts.logits, f->n * m->vocab);
    kernels_buf_free(bq);
    kernels_batch_free(b);
    kernels_acts_free(&acts);
    kernels_weights_free(&w);
    kernels_kv_free(&kv);
    kernels_backend_close(be);
}

/* 1 when a CUDA device opens; else a visible SKIP line naming the check. */
static int have_cuda(const char *what)
{
    kernels_backend *probe = NULL;
    kvs_err err = {{0}};
    if (kernels_backend_open("cuda", &probe, &err) != KVS_OK) {
        printf("SKIP: %s [%s]\n", err.msg, what);
        return 0;
    }
    kernels_backend_close(probe);
    return 1;
}

/* NMSE over the rows of the sequences of one kind (decode: q == 1). */
static double nmse_rows(const fixture *f, const float *got, const float *ref, int64_t width,
                        int decode)
{
    double e = 0, s = 0;
    int64_t r0 = 0;
    for (int64_t i = 0; i < f->n; i++) {
        int64_t q = f->seqs[i].q;
        if ((q == 1) == decode)
            for (int64_t k = r0 * width; k < (r0 + q) * width; k++) {
                e += ((double)got[k] - ref[k]) * ((double)got[k] - ref[k]);
                s += (double)ref[k] * ref[k];
            }
        r0 += q;
    }
    return s > 0 ? e / s : e;
}

/* CUDA against CPU on one batch: RoPE, decode and prefill attention (per
 * op, 1e-5) and a whole 2-layer step with the LM head (1e-4). */
static void check_cuda_vs_cpu_batch(const char *label, int64_t heads, int64_t kv_heads,
                                    int64_t head_dim, int64_t bs, const int64_t *q,
                                    const int64_t *c, int64_t n)
{
    char what[160];
    snprintf(what, sizeof what, "cuda vs cpu: %s; its fixture ran on the CPU twice", label);
    /* without a GPU the fixture still runs (CPU against itself), so a
     * broken shape shows here rather than on a GPU's short lease */
    const char *other = have_cuda(what) ? "cuda" : "cpu";
    model_spec m = shape(heads, kv_heads);
    m.head_dim = head_dim;
    fixture f;
    fx_init(&f, &m, q, c, n, bs, 31 + (uint64_t)bs);
    int64_t T = fx_tokens(&f), W = (heads + 2 * kv_heads) * m.head_dim, A = heads * head_dim;
    rng r;
    rng_init(&r, 8);
    float *qkv = randv(&r, T * W, 1), *x = randv(&r, T * m.hidden, 1);
    float *cr, *ca, *cx, *cl, *gr, *ga, *gx, *gl;
    run_on("cpu", &m, &f, qkv, x, &cr, &ca, &cx, &cl);
    run_on(other, &m, &f, qkv, x, &gr, &ga, &gx, &gl);
    double er = nmse_f(gr, cr, T * W), ed = nmse_rows(&f, ga, ca, A, 1);
    double ep = nmse_rows(&f, ga, ca, A, 0), ex = nmse_f(gx, cx, T * m.hidden);
    double el = nmse_f(gl, cl, f.n * m.vocab);
    printf("%s vs cpu (%s): NMSE rope %.2e, decode %.2e, prefill %.2e, step x %.2e, "
           "logits %.2e\n", other, label, er, ed, ep, ex, el);
    ck_assert_msg(er < GPU_OP_NMSE, "%s: rope NMSE %.3e", label, er);
    ck_assert_msg(ed < GPU_OP_NMSE, "%s: decode attention NMSE %.3e", label, ed);
    ck_assert_msg(ep < GPU_OP_NMSE, "%s: prefill attention NMSE %.3e", label, ep);
    ck_assert_msg(ex < GPU_STEP_NMSE, "%s: step NMSE %.3e", label, ex);
    ck_assert_msg(el < GPU_STEP_NMSE, "%s: logits NMSE %.3e", label, el);
    free(qkv), free(x), free(cr), free(ca), free(cx), free(cl);
    free(gr), free(ga), free(gx), free(gl);
    fx_free(&f);
}

static void check_cuda_vs_cpu(int64_t heads, int64_t kv_heads, int64_t head_dim)
{
    /* 4 decodes: few blocks, so the CUDA kernel splits the long contexts
     * into partitions and merges them; the short ones leave partitions
     * empty */
    int64_t q[] = {1, 1, 24, 1, 6, 1}, c[] = {1500, 3, 0, 700, 40, 0};
    char label[64];
    snprintf(label, sizeof label, "%lld/%lld heads, head_dim %lld", (long long)heads,
             (long long)kv_heads, (long long)head_dim);
    check_cuda_vs_cpu_batch(label, heads, kv_heads, head_dim, 16, q, c, 6);
}

/* The three head sizes the CUDA kernels are built for, and group sizes 1,
 * 4 and 16 (two blocks of 8 query heads per KV head). */
START_TEST(test_cuda_vs_cpu_mha) { check_cuda_vs_cpu(4, 4, 32); }
END_TEST
START_TEST(test_cuda_vs_cpu_gqa) { check_cuda_vs_cpu(8, 2, 128); }
END_TEST
START_TEST(test_cuda_vs_cpu_mqa) { check_cuda_vs_cpu(16, 1, 64); }
END_TEST

/* GQA groups 2-12 (head slots 1/2/4, 1 or 2 heads per warp, 2 blocks per
 * KV head at 12), contexts at the decode tile (32) and partition (256)
 * edges, prompts at the prefill query-tile (64) and key-tile (32) edges. */
START_TEST(test_cuda_vs_cpu_groups)
{
    static const int64_t groups[][3] = {{4, 2, 64},  {6, 2, 128}, {12, 3, 128}, {12, 2, 64},
                                        {10, 1, 32}, {16, 2, 128}, {24, 2, 128}};
    int64_t q[] = {1, 1, 1, 65, 1, 33, 64, 1}, c[] = {31, 32, 255, 0, 256, 31, 1, 512};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        char label[96];
        snprintf(label, sizeof label, "group %lld (%lld/%lld heads, head_dim %lld), edges",
                 (long long)(groups[i][0] / groups[i][1]), (long long)groups[i][0],
                 (long long)groups[i][1], (long long)groups[i][2]);
        check_cuda_vs_cpu_batch(label, groups[i][0], groups[i][1], groups[i][2], 16, q, c, 8);
    }
}
END_TEST

/* Block sizes 1-32: a token row per block up to a tile of blocks, with
 * contexts one short of, at and one past block and tile edges. */
START_TEST(test_cuda_vs_cpu_block_sizes)
{
    static const int64_t sizes[] = {1, 2, 3, 8, 16, 32};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t b = sizes[i];
        int64_t q[] = {1, 1, 1, 1, 7, 40}, c[] = {b - 1 > 0 ? b - 1 : 1, b, b + 1, 4 * b + 63, 2 * b, 3};
        char label[64];
        snprintf(label, sizeof label, "block size %lld", (long long)b);
        check_cuda_vs_cpu_batch(label, 8, 2, 64, b, q, c, 6);
    }
}
END_TEST

/* One long decode split into many partitions beside short ones, and
 * prefill chunks of 2-5 tokens over stored context (tiny token budgets). */
START_TEST(test_cuda_vs_cpu_long_split_and_chunks)
{
    int64_t q1[] = {1, 1, 1}, c1[] = {5999, 17, 300};
    check_cuda_vs_cpu_batch("6,000-token split decode", 8, 2, 128, 16, q1, c1, 3);
    int64_t q2[] = {2, 3, 5, 1, 4}, c2[] = {500, 63, 1023, 64, 0};
    check_cuda_vs_cpu_batch("prefill chunks of 2-5 tokens", 32, 8, 128, 16, q2, c2, 5);
}
END_TEST

/* check_cuda_vs_cpu_batch over shapes {heads, kv_heads, head_dim} with the
 * environment variable var set to value (the CUDA backend reads its kernel
 * choices at each launch); Check forks each test, so it stays in that one. */
static void check_variant(const char *var, const char *value, const char *what,
                          const int64_t (*shapes)[3], size_t n_shapes, const int64_t *q,
                          const int64_t *c, int64_t n)
{
    ck_assert_int_eq(setenv(var, value, 1), 0);
    for (size_t i = 0; i < n_shapes; i++) {
        char label[96];
        snprintf(label, sizeof label, "%s, %lld/%lld heads, head_dim %lld", what,
                 (long long)shapes[i][0], (long long)shapes[i][1], (long long)shapes[i][2]);
        check_cuda_vs_cpu_batch(label, shapes[i][0], shapes[i][1], shapes[i][2], 16, q, c, n);
    }
    ck_assert_int_eq(unsetenv(var), 0);
}

/* The first prefill kernel (WMMA, KVSIM_CUDA_PREFILL=wmma; the mma.sync
 * kernel is the default the tests above check) against the CPU: the three
 * head sizes, GQA, query- and key-tile edges and short chunks over stored
 * context. */
START_TEST(test_cuda_vs_cpu_wmma_prefill)
{
    static const int64_t q[] = {1, 1, 65, 33, 64, 2, 5}, c[] = {31, 255, 0, 31, 1, 500, 1023};
    static const int64_t shapes[][3] = {{4, 4, 32}, {12, 2, 64}, {24, 2, 128}};
    check_variant("KVSIM_CUDA_PREFILL", "wmma", "WMMA prefill", shapes, 3, q, c, 7);
}
END_TEST

/* The SIMT decode kernel for GQA groups of 4 and more (decode_gqa_k,
 * KVSIM_CUDA_DECODE=simt; the tensor-core one is the default the tests
 * above check) against the CPU: groups 4, 6, 8 and 12 (two blocks per KV
 * head), contexts at tile and partition edges, a long split decode. */
START_TEST(test_cuda_vs_cpu_simt_decode)
{
    static const int64_t q[] = {1, 1, 1, 1, 1, 1, 9}, c[] = {31, 32, 255, 256, 5999, 0, 40};
    static const int64_t shapes[][3] = {{8, 2, 128}, {12, 2, 64}, {16, 2, 32}, {24, 2, 128}};
    check_variant("KVSIM_CUDA_DECODE", "simt", "SIMT GQA decode", shapes, 4, q, c, 7);
}
END_TEST

/* Dense ops (GEMM with beta 0 and 1, RMSNorm, SwiGLU) on one backend. */
static void dense_on(const char *name, const float *a, const float *w, const float *c0,
                     int64_t M, int64_t N, int64_t K, int64_t I, float **g0, float **g1,
                     float **rn, float **sw)
{
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_msg(kernels_backend_open(name, &be, &err) == KVS_OK, "%s", err.msg);
    kernels_buf *ba = upload(be, a, M * K), *bw = upload(be, w, N * K), *bc = upload(be, c0, M * N);
    kernels_buf *bo;
    ck_assert_int_eq(kernels_buf_alloc(be, KERNELS_ELEM_ACT, M * K, &bo, &err), KVS_OK);
    ck_assert_int_eq(kernels_op_gemm(be, ba, bw, bc, M, N, K, 1.0f, &err), KVS_OK);
    *g1 = readback(bc, M * N);
    ck_assert_int_eq(kernels_op_gemm(be, ba, bw, bc, M, N, K, 0.0f, &err), KVS_OK);
    *g0 = readback(bc, M * N);
    ck_assert_int_eq(kernels_op_rmsnorm(be, ba, bw, bo, M, K, &err), KVS_OK);
    *rn = readback(bo, M * K);
    ck_assert_int_eq(kernels_op_swiglu(be, ba, bo, M, I, &err), KVS_OK);
    *sw = readback(bo, M * I);
    kernels_buf_free(ba), kernels_buf_free(bw), kernels_buf_free(bc), kernels_buf_free(bo);
    kernels_backend_close(be);
}

START_TEST(test_cuda_vs_cpu_dense_ops)
{
    if (!have_cuda("cuda vs cpu: GEMM, RMSNorm, SwiGLU"))
        return;
    /* odd sizes (tails), then a projection-like shape */
    static const int64_t shapes[][3] = {{13, 37, 67}, {301, 96, 512}, {64, 1024, 4096}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2], I = K / 2 - 1;
        rng r;
        rng_init(&r, 70 + i);
        float *a = randv(&r, M * K, 1), *w = randv(&r, N * K, 1), *c0 = randv(&r, M * N, 1);
        float *c_g0, *c_g1, *c_rn, *c_sw, *g_g0, *g_g1, *g_rn, *g_sw;
        dense_on("cpu", a, w, c0, M, N, K, I, &c_g0, &c_g1, &c_rn, &c_sw);
        dense_on("cuda", a, w, c0, M, N, K, I, &g_g0, &g_g1, &g_rn, &g_sw);
        double e0 = nmse_f(g_g0, c_g0, M * N), e1 = nmse_f(g_g1, c_g1, M * N);
        double en = nmse_f(g_rn, c_rn, M * K), es = nmse_f(g_sw, c_sw, M * I);
        printf("cuda vs cpu (%lld x %lld x %lld): NMSE gemm %.2e, gemm+c %.2e, rmsnorm %.2e, "
               "swiglu %.2e\n", (long long)M, (long long)N, (long long)K, e0, e1, en, es);
        ck_assert_double_lt(e0, GPU_OP_NMSE);
        ck_assert_double_lt(e1, GPU_OP_NMSE);
        ck_assert_double_lt(en, GPU_OP_NMSE);
        ck_assert_double_lt(es, GPU_OP_NMSE);
        free(a), free(w), free(c0), free(c_g0), free(c_g1), free(c_rn), free(c_sw);
        free(g_g0), free(g_g1), free(g_rn), free(g_sw);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_unknown_backend);
    tcase_add_test(tc, test_cuda_open_or_no_device);
    tcase_add_test(tc, test_bad_shapes);
    tcase_add_test(tc, test_cpu_dense_ops);
    tcase_add_test(tc, test_cpu_rope_by_hand);
    tcase_add_test(tc, test_cpu_attention_mha);
    tcase_add_test(tc, test_cpu_attention_gqa);
    tcase_add_test(tc, test_cpu_attention_mqa);
    tcase_add_test(tc, test_cpu_step_mha);
    tcase_add_test(tc, test_cpu_step_gqa);
    tcase_add_test(tc, test_weights_seeded);
    tcase_add_test(tc, test_cuda_vs_cpu_mha);
    tcase_add_test(tc, test_cuda_vs_cpu_gqa);
    tcase_add_test(tc, test_cuda_vs_cpu_mqa);
    tcase_add_test(tc, test_cuda_vs_cpu_groups);
    tcase_add_test(tc, test_cuda_vs_cpu_block_sizes);
    tcase_add_test(tc, test_cuda_vs_cpu_long_split_and_chunks);
    tcase_add_test(tc, test_cuda_vs_cpu_wmma_prefill);
    tcase_add_test(tc, test_cuda_vs_cpu_simt_decode);
    tcase_add_test(tc, test_cuda_vs_cpu_dense_ops);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
