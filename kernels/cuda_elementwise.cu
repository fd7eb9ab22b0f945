/* cuda_elementwise.cu — the memory-bound per-token ops of the CUDA backend:
 * RMSNorm (one block per row), RoPE, KV append into the paged pools, SwiGLU
 * and the last-token gather.  fp16 storage, fp32 math. */
#include "cuda_internal.cuh"

static unsigned int grid_for(int64_t n)
{
    return (unsigned int)((n + CU_THREADS - 1) / CU_THREADS);
}

static int check_grid(int64_t n, const char *what, kvs_err *err)
{
    if ((n + CU_THREADS - 1) / CU_THREADS > INT32_MAX)
        return cu_errf(err, KVS_EINVAL, "cuda %s: %lld elements exceed one grid", what,
                       (long long)n);
    return KVS_OK;
}

__device__ static float block_sum(float v)
{
    __shared__ float part[32];
    __syncthreads(); /* part[] may still be read by a previous call */
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++)
        s += part[i];
    return s;
}

__global__ static void rmsnorm_k(const __half *x, const __half *w, __half *out, int64_t dim,
                                 float eps)
{
    const __half *xr = x + (int64_t)blockIdx.x * dim;
    __half *orow = out + (int64_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float v = __half2float(xr[i]);
        ss += v * v;
    }
    float inv = rsqrtf(block_sum(ss) / (float)dim + eps);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
        orow[i] = __float2half(__half2float(xr[i]) * inv * __half2float(w[i]));
}

int cu_rmsnorm(void *self, const void *x, const void *w, void *out, int64_t rows, int64_t dim,
               float eps, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    if (rows > INT32_MAX)
        return cu_errf(err, KVS_EINVAL, "cuda rmsnorm: %lld rows exceed one grid", (long long)rows);
    rmsnorm_k<<<(unsigned int)rows, CU_THREADS, 0, st->stream>>>(
        (const __half *)x, (const __half *)w, (__half *)out, dim, eps);
    return cu_check_launch("rmsnorm kernel", err);
}

/* One thread per (token, q-or-k head, pair i): rotate (v[i], v[i + hd/2]).
 * The angle pos * inv_freq is formed and reduced to [-pi, pi] in double so
 * the fast float sincos stays accurate at long positions. */
__global__ static void rope_k(__half *qkv, const int32_t *pos, int64_t n, int64_t heads_qk,
                              int64_t width, int64_t hd, double log2_theta)
{
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    int64_t half = hd / 2, i = idx % half, h = idx / half % heads_qk, t = idx / half / heads_qk;
    float inv_freq = (float)exp2(-2.0 * (double)i / (double)hd * log2_theta);
    double ang = (double)pos[t] * (double)inv_freq;
    const double two_pi = 6.283185307179586476925;
    ang -= two_pi * rint(ang / two_pi);
    float sn, cs;
    sincosf((float)ang, &sn, &cs);
    __half *v = qkv + t * width + h * hd;
    float x1 = __half2float(v[i]), x2 = __half2float(v[i + half]);
    v[i] = __float2half(x1 * cs - x2 * sn);
    v[i + half] = __float2half(x2 * cs + x1 * sn);
}

int cu_rope(void *self, void *qkv, const int32_t *pos, int64_t tokens, int64_t heads,
            int64_t kv_heads, int64_t head_dim, float theta, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    int64_t n = tokens * (heads + kv_heads) * (head_dim / 2);
    int rc = check_grid(n, "rope", err);
    if (rc != KVS_OK)
        return rc;
    rope_k<<<grid_for(n), CU_THREADS, 0, st->stream>>>(
        (__half *)qkv, pos, n, heads + kv_heads, (heads + 2 * kv_heads) * head_dim, head_dim,
        log2((double)theta));
    return cu_check_launch("rope kernel", err);
}

/* One thread per (token, element of the K row): copies K and V. */
__global__ static void kv_append_k(const __half *qkv, const int32_t *slots, int64_t n,
                                   int64_t row, int64_t width, int64_t k_off, __half *kp,
                                   __half *vp)
{
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    int64_t t = idx / row, e = idx % row;
    const __half *src = qkv + t * width + k_off;
    int64_t dst = (int64_t)slots[t] * row + e;
    kp[dst] = src[e];
    vp[dst] = src[row + e];
}

int cu_kv_append(void *self, const void *qkv, const int32_t *slots, int64_t tokens,
                 int64_t heads, int64_t kv_heads, int64_t head_dim, void *k_pool, void *v_pool,
                 kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    int64_t row = kv_heads * head_dim, n = tokens * row;
    int rc = check_grid(n, "kv_append", err);
    if (rc != KVS_OK)
        return rc;
    kv_append_k<<<grid_for(n), CU_THREADS, 0, st->stream>>>(
        (const __half *)qkv, slots, n, row, (heads + 2 * kv_heads) * head_dim, heads * head_dim,
        (__half *)k_pool, (__half *)v_pool);
    return cu_check_launch("kv_append kernel", err);
}

__global__ static void swiglu_k(const __half *gu, __half *out, int64_t n, int64_t inter)
{
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    int64_t r = idx / inter, i = idx % inter;
    float g = __half2float(gu[r * 2 * inter + i]), u = __half2float(gu[r * 2 * inter + inter + i]);
    out[idx] = __float2half(g / (1.0f + __expf(-g)) * u);
}

int cu_swiglu(void *self, const void *gu, void *out, int64_t rows, int64_t inter, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    int64_t n = rows * inter;
    int rc = check_grid(n, "swiglu", err);
    if (rc != KVS_OK)
        return rc;
    swiglu_k<<<grid_for(n), CU_THREADS, 0, st->stream>>>((const __half *)gu, (__half *)out, n,
                                                         inter);
    return cu_check_launch("swiglu kernel", err);
}

__global__ static void gather_k(const __half *x, const int32_t *idx, __half *out, int64_t n,
                                int64_t dim)
{
    int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    out[k] = x[(int64_t)idx[k / dim] * dim + k % dim];
}

int cu_gather_rows(void *self, const void *x, const int32_t *idx, void *out, int64_t n,
                   int64_t dim, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    int64_t total = n * dim;
    int rc = check_grid(total, "gather_rows", err);
    if (rc != KVS_OK)
        return rc;
    gather_k<<<grid_for(total), CU_THREADS, 0, st->stream>>>((const __half *)x, idx,
                                                             (__half *)out, total, dim);
    return cu_check_launch("gather kernel", err);
}
