/* cpu_ops.c — the CPU reference operations: the definitions of kernels.h
 * written as directly as possible (fp32 storage and math; the GEMM keeps
 * eight partial sums so the compiler can vectorise it). */
#include "cpu_ops.h"

#include <math.h>
#include <string.h>

int cpu_rmsnorm(void *self, const void *x_, const void *w_, void *out_, int64_t rows,
                int64_t dim, float eps, kvs_err *err)
{
    (void)self, (void)err;
    const float *x = x_, *w = w_;
    float *out = out_;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        float ss = 0.0f;
        for (int64_t i = 0; i < dim; i++)
            ss += xr[i] * xr[i];
        float inv = 1.0f / sqrtf(ss / (float)dim + eps);
        for (int64_t i = 0; i < dim; i++)
            out[r * dim + i] = xr[i] * inv * w[i];
    }
    return KVS_OK;
}

static float dot(const float *a, const float *b, int64_t k)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= k; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[i + j] * b[i + j];
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < k; i++)
        s += a[i] * b[i];
    return s;
}

int cpu_gemm(void *self, const void *a_, const void *w_, void *c_, int64_t m, int64_t n,
             int64_t k, float beta, kvs_err *err)
{
    (void)self, (void)err;
    const float *a = a_, *w = w_;
    float *c = c_;
    /* Row blocks of A against each weight row: the weight row stays in L1. */
    enum { RB = 4 };
    for (int64_t i0 = 0; i0 < m; i0 += RB) {
        int64_t i1 = i0 + RB < m ? i0 + RB : m;
        for (int64_t j = 0; j < n; j++) {
            const float *wr = w + j * k;
            for (int64_t i = i0; i < i1; i++) {
                float s = dot(a + i * k, wr, k);
                float *ci = c + i * n + j;
                *ci = beta != 0.0f ? *ci + s : s;
            }
        }
    }
    return KVS_OK;
}

int cpu_rope(void *self, void *qkv_, const int32_t *pos, int64_t tokens, int64_t heads,
             int64_t kv_heads, int64_t head_dim, float theta, kvs_err *err)
{
    (void)self, (void)err;
    float *qkv = qkv_;
    int64_t width = (heads + 2 * kv_heads) * head_dim, half = head_dim / 2;
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t i = 0; i < half; i++) {
            float inv_freq = (float)pow((double)theta, -2.0 * (double)i / (double)head_dim);
            double ang = (double)pos[t] * (double)inv_freq;
            float cs = (float)cos(ang), sn = (float)sin(ang);
            /* q heads then k heads: the first heads + kv_heads head slots */
            for (int64_t h = 0; h < heads + kv_heads; h++) {
                float *v = qkv + t * width + h * head_dim;
                float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * cs - x2 * sn;
                v[i + half] = x2 * cs + x1 * sn;
            }
        }
    }
    return KVS_OK;
}

int cpu_kv_append(void *self, const void *qkv_, const int32_t *slots, int64_t tokens,
                  int64_t heads, int64_t kv_heads, int64_t head_dim, void *k_pool,
                  void *v_pool, kvs_err *err)
{
    (void)self, (void)err;
    const float *qkv = qkv_;
    int64_t width = (heads + 2 * kv_heads) * head_dim, row = kv_heads * head_dim;
    for (int64_t t = 0; t < tokens; t++) {
        const float *k = qkv + t * width + heads * head_dim;
        memcpy((float *)k_pool + (int64_t)slots[t] * row, k, (size_t)row * sizeof(float));
        memcpy((float *)v_pool + (int64_t)slots[t] * row, k + row, (size_t)row * sizeof(float));
    }
    return KVS_OK;
}

int cpu_attention(void *self, const kernels_attn_args *a, kvs_err *err)
{
    float *p = cpu_scratch(self, a->max_ctx);
    if (!p)
        return kvs_errf(err, KVS_ENOMEM, "cpu attention: out of memory (%lld scores)",
                        (long long)a->max_ctx);
    const float *qkv = a->qkv, *K = a->k_pool, *V = a->v_pool;
    float *out = a->out;
    int64_t hd = a->head_dim, group = a->heads / a->kv_heads, bs = a->block_size;
    int64_t width = (a->heads + 2 * a->kv_heads) * hd, row = a->kv_heads * hd;
    for (int64_t si = 0; si < a->n; si++) {
        int64_t s = a->seq_idx[si], q0 = a->seq_qstart[s];
        int64_t q = a->seq_qstart[s + 1] - q0, ctx = a->seq_ctx[s], c = ctx - q;
        const int32_t *bt = a->block_tables + a->seq_bt[s];
        for (int64_t j = 0; j < q; j++) {
            int64_t keys = c + j + 1; /* causal: positions 0 .. c + j */
            for (int64_t h = 0; h < a->heads; h++) {
                const float *qv = qkv + (q0 + j) * width + h * hd;
                int64_t g = h / group;
                float mx = -INFINITY, sum = 0.0f;
                for (int64_t t = 0; t < keys; t++) {
                    int64_t slot = (int64_t)bt[t / bs] * bs + t % bs;
                    p[t] = a->scale * dot(qv, K + slot * row + g * hd, hd);
                    mx = p[t] > mx ? p[t] : mx;
                }
                for (int64_t t = 0; t < keys; t++)
                    sum += p[t] = expf(p[t] - mx);
                float *o = out + (q0 + j) * a->heads * hd + h * hd;
                memset(o, 0, (size_t)hd * sizeof *o);
                for (int64_t t = 0; t < keys; t++) {
                    int64_t slot = (int64_t)bt[t / bs] * bs + t % bs;
                    const float *vv = V + slot * row + g * hd;
                    for (int64_t d = 0; d < hd; d++)
                        o[d] += p[t] * vv[d];
                }
                for (int64_t d = 0; d < hd; d++)
                    o[d] /= sum;
            }
        }
    }
    return KVS_OK;
}

int cpu_swiglu(void *self, const void *gu_, void *out_, int64_t rows, int64_t inter,
               kvs_err *err)
{
    (void)self, (void)err;
    const float *gu = gu_;
    float *out = out_;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < inter; i++) {
            float g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
            out[r * inter + i] = g / (1.0f + expf(-g)) * u;
        }
    return KVS_OK;
}

int cpu_gather_rows(void *self, const void *x, const int32_t *idx, void *out, int64_t n,
                    int64_t dim, kvs_err *err)
{
    (void)self, (void)err;
    for (int64_t i = 0; i < n; i++)
        memcpy((float *)out + i * dim, (const float *)x + (int64_t)idx[i] * dim,
               (size_t)dim * sizeof(float));
    return KVS_OK;
}
