/* cuda_attention.cu — attention over the paged KV cache on CUDA.
 *
 * Decode (q == 1) is written for memory bandwidth: a block serves one
 * sequence, one KV head and up to 8 of the query heads that share it (GQA:
 * the KV row is read once for the whole group), and one split-KV partition
 * of the context (flash-decoding: partitions are added when sequences are
 * few, so the GPU has enough blocks in flight; a second kernel merges the
 * partitions' softmax states).  head_dim / 8 threads read one token's K row
 * with 16-byte loads (8 fp16), so a row is one contiguous segment; each token
 * group keeps a one-pass online softmax (running max, sum, and the weighted
 * V accumulator), two tokens per iteration to keep loads in flight.
 *
 * Prefill (q > 1) uses cuBLAS: gather the sequence's K and V from the pools
 * into contiguous scratch, S = scale Q K^T (strided-batched over KV heads,
 * one call per query head of a group), a causal row softmax into fp16 P,
 * O = P V written straight into the output rows.  Scores stay fp32. */
#include "cuda_internal.cuh"

#include <math.h>

#define DEC_THREADS 128
#define PART_MIN 256                      /* tokens per split-KV partition, at least */
#define PREFILL_BUDGET ((int64_t)256 << 20) /* bytes of S + P per pass */

union pack8 {
    uint4 u;
    __half2 h[4];
};

template <int GCM>
__device__ static inline void dot8(const float (&q)[GCM][8], const pack8 &k, float (&s)[GCM])
{
    float kf[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __half22float2(k.h[i]);
        kf[2 * i] = f.x;
        kf[2 * i + 1] = f.y;
    }
#pragma unroll
    for (int g = 0; g < GCM; g++) {
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++)
            a += q[g][i] * kf[i];
        s[g] = a;
    }
}

template <int HD, int GCM>
__global__ static void __launch_bounds__(DEC_THREADS)
decode_k(const __half *__restrict__ qkv, const __half *__restrict__ kp,
         const __half *__restrict__ vp, __half *__restrict__ out, const int32_t *seq_idx,
         const int32_t *qstart, const int32_t *ctx_a, const int32_t *bt_off,
         const int32_t *tables, int z0, int64_t width, int heads, int kv_heads, int group,
         int chunks, int bs, int part_len, int parts, float scale, float *ws_acc, float *ws_ml)
{
    constexpr int TPT = HD / 8;           /* threads per token row */
    constexpr int NG = DEC_THREADS / TPT; /* tokens in flight per block step */
    __shared__ float sm_ml[NG][GCM][2];
    __shared__ float sm_acc[NG][GCM][HD];

    const int si = (int)blockIdx.z + z0, s = seq_idx[si], ctx = ctx_a[s];
    const int p = (int)blockIdx.x, t_begin = p * part_len;
    if (t_begin >= ctx)
        return; /* this sequence has fewer partitions */
    const int t_end = min(ctx, t_begin + part_len);
    const int kvh = (int)blockIdx.y / chunks, chunk = (int)blockIdx.y % chunks;
    const int h0 = kvh * group + chunk * GCM, gc = min(GCM, group - chunk * GCM);
    const int lane = (int)threadIdx.x % TPT, grp = (int)threadIdx.x / TPT;
    const int tok = qstart[s];
    const int32_t *bt = tables + bt_off[s];
    const size_t row = (size_t)kv_heads * HD;

    float q[GCM][8], m[GCM], l[GCM], acc[GCM][8];
#pragma unroll
    for (int g = 0; g < GCM; g++) {
        pack8 qv;
        qv.u = make_uint4(0, 0, 0, 0);
        if (g < gc)
            qv.u = *(const uint4 *)(qkv + (size_t)tok * width + (size_t)(h0 + g) * HD + lane * 8);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 f = __half22float2(qv.h[i]);
            q[g][2 * i] = f.x * scale;
            q[g][2 * i + 1] = f.y * scale;
        }
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[g][i] = 0.0f;
    }

    /* Every lane runs the same iterations (the shuffles need the whole
     * warp); out-of-range tokens load nothing and update nothing. */
    for (int base = t_begin; base < t_end; base += 2 * NG) {
        const int ta = base + grp, tb = base + NG + grp;
        const bool va = ta < t_end, vb = tb < t_end;
        pack8 ka, kb, xa, xb;
        ka.u = kb.u = xa.u = xb.u = make_uint4(0, 0, 0, 0);
        if (va) {
            size_t off = ((size_t)bt[ta / bs] * bs + ta % bs) * row + (size_t)kvh * HD + lane * 8;
            ka.u = __ldg((const uint4 *)(kp + off));
            xa.u = __ldg((const uint4 *)(vp + off));
        }
        if (vb) {
            size_t off = ((size_t)bt[tb / bs] * bs + tb % bs) * row + (size_t)kvh * HD + lane * 8;
            kb.u = __ldg((const uint4 *)(kp + off));
            xb.u = __ldg((const uint4 *)(vp + off));
        }
        float sa[GCM], sb[GCM];
        dot8<GCM>(q, ka, sa);
        dot8<GCM>(q, kb, sb);
#pragma unroll
        for (int o = TPT / 2; o > 0; o >>= 1)
#pragma unroll
            for (int g = 0; g < GCM; g++) {
                sa[g] += __shfl_xor_sync(0xffffffffu, sa[g], o, TPT);
                sb[g] += __shfl_xor_sync(0xffffffffu, sb[g], o, TPT);
            }
        if (!va)
            continue; /* vb implies va */
        float fa[8], fb[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 x = __half22float2(xa.h[i]), y = __half22float2(xb.h[i]);
            fa[2 * i] = x.x, fa[2 * i + 1] = x.y, fb[2 * i] = y.x, fb[2 * i + 1] = y.y;
        }
#pragma unroll
        for (int g = 0; g < GCM; g++) {
            float mx = fmaxf(m[g], vb ? fmaxf(sa[g], sb[g]) : sa[g]);
            float corr = __expf(m[g] - mx), pa = __expf(sa[g] - mx);
            float pb = vb ? __expf(sb[g] - mx) : 0.0f;
            l[g] = l[g] * corr + pa + pb;
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[g][i] = acc[g][i] * corr + pa * fa[i] + pb * fb[i];
            m[g] = mx;
        }
    }

    /* Merge the NG token groups of the block. */
#pragma unroll
    for (int g = 0; g < GCM; g++) {
        if (lane == 0) {
            sm_ml[grp][g][0] = m[g];
            sm_ml[grp][g][1] = l[g];
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
            sm_acc[grp][g][lane * 8 + i] = acc[g][i];
    }
    __syncthreads();
    for (int e = (int)threadIdx.x; e < gc * HD; e += DEC_THREADS) {
        const int g = e / HD, d = e % HD, h = h0 + g;
        float M = -INFINITY, L = 0.0f, A = 0.0f;
        for (int k = 0; k < NG; k++)
            M = fmaxf(M, sm_ml[k][g][0]);
        for (int k = 0; k < NG; k++) {
            if (sm_ml[k][g][0] == -INFINITY)
                continue; /* group saw no token */
            float f = __expf(sm_ml[k][g][0] - M);
            L += sm_ml[k][g][1] * f;
            A += sm_acc[k][g][d] * f;
        }
        if (parts == 1) {
            out[(size_t)tok * heads * HD + (size_t)h * HD + d] = __float2half(A / L);
        } else {
            size_t b = ((size_t)si * heads + h) * parts + p;
            ws_acc[b * HD + d] = A;
            if (d == 0) {
                ws_ml[2 * b] = M;
                ws_ml[2 * b + 1] = L;
            }
        }
    }
}

/* Merge a sequence's partitions: one block per (decode sequence, head). */
__global__ static void decode_reduce_k(const float *ws_acc, const float *ws_ml, __half *out,
                                       const int32_t *seq_idx, const int32_t *qstart,
                                       const int32_t *ctx_a, int heads, int hd, int part_len,
                                       int parts, int z0)
{
    const int si = (int)blockIdx.x + z0, h = (int)blockIdx.y, s = seq_idx[si];
    const int np = (ctx_a[s] + part_len - 1) / part_len;
    const size_t b = ((size_t)si * heads + h) * parts;
    float M = -INFINITY;
    for (int k = 0; k < np; k++)
        M = fmaxf(M, ws_ml[2 * (b + k)]);
    for (int d = (int)threadIdx.x; d < hd; d += (int)blockDim.x) {
        float L = 0.0f, A = 0.0f;
        for (int k = 0; k < np; k++) {
            float f = __expf(ws_ml[2 * (b + k)] - M);
            L += ws_ml[2 * (b + k) + 1] * f;
            A += ws_acc[(b + k) * hd + d] * f;
        }
        out[(size_t)qstart[s] * heads * hd + (size_t)h * hd + d] = __float2half(A / L);
    }
}

typedef struct decode_plan {
    int gcm, chunks, parts, part_len;
} decode_plan;

static decode_plan plan_decode(const cuda_state *st, int64_t n, int64_t max_ctx,
                               int64_t heads, int64_t kv_heads)
{
    decode_plan pl;
    int64_t group = heads / kv_heads, g = group < 8 ? group : 8;
    pl.gcm = g <= 1 ? 1 : g <= 2 ? 2 : g <= 4 ? 4 : 8;
    pl.chunks = (int)((group + pl.gcm - 1) / pl.gcm);
    int64_t blocks = n * kv_heads * pl.chunks, target = 4 * (int64_t)(st ? st->sm_count : 132);
    int64_t max_parts = (max_ctx + PART_MIN - 1) / PART_MIN;
    int64_t parts = (target + blocks - 1) / blocks;
    parts = parts < 1 ? 1 : parts > max_parts ? max_parts : parts;
    pl.part_len = (int)((max_ctx + parts - 1) / parts);
    pl.parts = (int)((max_ctx + pl.part_len - 1) / pl.part_len);
    return pl;
}

int cu_decode_attention(void *self, const kernels_attn_args *a, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    const int hd = (int)a->head_dim;
    if (hd != 32 && hd != 64 && hd != 128)
        return cu_errf(err, KVS_EINVAL, "cuda decode attention: head_dim %d not supported "
                                        "(32, 64 or 128)", hd);
    decode_plan pl = plan_decode(st, a->n, a->max_ctx, a->heads, a->kv_heads);
    if (a->kv_heads * pl.chunks > 65535 || a->heads > 65535)
        return cu_errf(err, KVS_EINVAL, "cuda decode attention: %lld heads exceed the grid",
                       (long long)a->heads);
    float *ws_acc = NULL, *ws_ml = NULL;
    if (pl.parts > 1) {
        size_t cells = (size_t)a->n * a->heads * pl.parts;
        void *ws;
        int rc = cu_scratch(st, cells * (hd + 2) * sizeof(float), &ws, err);
        if (rc != KVS_OK)
            return rc;
        ws_acc = (float *)ws;
        ws_ml = ws_acc + cells * hd;
    }
    const int64_t width = (a->heads + 2 * a->kv_heads) * hd;
    const __half *qkv = (const __half *)a->qkv, *kp = (const __half *)a->k_pool,
                 *vp = (const __half *)a->v_pool;
    __half *out = (__half *)a->out;
    for (int64_t z0 = 0; z0 < a->n; z0 += 65535) {
        int64_t nz = a->n - z0 < 65535 ? a->n - z0 : 65535;
        dim3 grid((unsigned)pl.parts, (unsigned)(a->kv_heads * pl.chunks), (unsigned)nz);
#define DEC_CASE(HD_, G_)                                                                     \
    else if (hd == HD_ && pl.gcm == G_) decode_k<HD_, G_><<<grid, DEC_THREADS, 0, st->stream>>>( \
        qkv, kp, vp, out, a->seq_idx, a->seq_qstart, a->seq_ctx, a->seq_bt, a->block_tables,  \
        (int)z0, width, (int)a->heads, (int)a->kv_heads, (int)(a->heads / a->kv_heads),       \
        pl.chunks, (int)a->block_size, pl.part_len, pl.parts, a->scale, ws_acc, ws_ml);
        if (0) {
        }
        DEC_CASE(32, 1) DEC_CASE(32, 2) DEC_CASE(32, 4) DEC_CASE(32, 8)
        DEC_CASE(64, 1) DEC_CASE(64, 2) DEC_CASE(64, 4) DEC_CASE(64, 8)
        DEC_CASE(128, 1) DEC_CASE(128, 2) DEC_CASE(128, 4) DEC_CASE(128, 8)
#undef DEC_CASE
        int rc = cu_check_launch("decode attention kernel", err);
        if (rc == KVS_OK && pl.parts > 1) {
            decode_reduce_k<<<dim3((unsigned)nz, (unsigned)a->heads), 128, 0, st->stream>>>(
                ws_acc, ws_ml, out, a->seq_idx, a->seq_qstart, a->seq_ctx, (int)a->heads, hd,
                pl.part_len, pl.parts, (int)z0);
            rc = cu_check_launch("decode reduce kernel", err);
        }
        if (rc != KVS_OK)
            return rc;
    }
    return KVS_OK;
}

/* ------------------------------------------------------------ prefill */

/* Contiguous copy of a sequence's first ctx tokens of K and V. */
__global__ static void gather_kv_k(const __half *kp, const __half *vp, const int32_t *tables,
                                   const int32_t *bt_off, int s, int bs, int64_t row, int64_t n,
                                   __half *kc, __half *vc)
{
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    int64_t t = idx / row, e = idx % row;
    int64_t src = ((int64_t)tables[bt_off[s] + t / bs] * bs + t % bs) * row + e;
    kc[idx] = kp[src];
    vc[idx] = vp[src];
}

__device__ static float block_reduce(float v, bool is_max)
{
    __shared__ float part[32];
    __syncthreads(); /* part[] may still be read by a previous call */
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = part[0];
    for (int i = 1; i < (int)(blockDim.x >> 5); i++)
        r = is_max ? fmaxf(r, part[i]) : r + part[i];
    return r;
}

/* Row r of S (query i = r % q at position c + i) keeps keys 0 .. c + i. */
__global__ static void causal_softmax_k(const float *S, __half *P, int q, int ctx, int c)
{
    const int64_t r = blockIdx.x;
    const int valid = min(ctx, c + (int)(r % q) + 1);
    const float *sr = S + r * ctx;
    __half *pr = P + r * ctx;
    float mx = -INFINITY;
    for (int t = (int)threadIdx.x; t < valid; t += (int)blockDim.x)
        mx = fmaxf(mx, sr[t]);
    mx = block_reduce(mx, true);
    float sum = 0.0f;
    for (int t = (int)threadIdx.x; t < valid; t += (int)blockDim.x)
        sum += __expf(sr[t] - mx);
    float inv = 1.0f / block_reduce(sum, false);
    for (int t = (int)threadIdx.x; t < ctx; t += (int)blockDim.x)
        pr[t] = __float2half(t < valid ? __expf(sr[t] - mx) * inv : 0.0f);
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* KV heads per pass so that S (fp32) + P (fp16) fit the budget. */
static int64_t prefill_kv_chunk(int64_t q, int64_t ctx, int64_t kv_heads)
{
    int64_t per = q * ctx * 6, kb = PREFILL_BUDGET / (per > 0 ? per : 1);
    return kb < 1 ? 1 : kb > kv_heads ? kv_heads : kb;
}

static size_t prefill_bytes(int64_t q, int64_t ctx, int64_t kv_heads, int64_t hd)
{
    size_t kvc = align256((size_t)ctx * kv_heads * hd * sizeof(__half));
    size_t sp = (size_t)prefill_kv_chunk(q, ctx, kv_heads) * q * ctx;
    return 2 * kvc + align256(sp * sizeof(float)) + align256(sp * sizeof(__half));
}

int64_t cu_attn_workspace_bytes(void *self, int64_t n_decode, int64_t max_ctx,
                                int64_t max_prefill_q, int64_t heads, int64_t kv_heads,
                                int64_t head_dim)
{
    decode_plan pl = plan_decode((const cuda_state *)self, n_decode > 0 ? n_decode : 1,
                                 max_ctx > 0 ? max_ctx : 1, heads, kv_heads);
    int64_t dec = pl.parts > 1 ? n_decode * heads * pl.parts * (head_dim + 2) * 4 : 0;
    int64_t pre = max_prefill_q > 0
                      ? (int64_t)prefill_bytes(max_prefill_q, max_ctx, kv_heads, head_dim)
                      : 0;
    return dec > pre ? dec : pre;
}

static int prefill_one(cuda_state *st, const kernels_attn_args *a, int s, kvs_err *err)
{
    const int64_t hd = a->head_dim, nh = a->heads, kvh = a->kv_heads, G = nh / kvh;
    const int64_t width = (nh + 2 * kvh) * hd, row = kvh * hd;
    const int64_t q0 = a->host_seq_qstart[s], q = a->host_seq_qstart[s + 1] - q0;
    const int64_t ctx = a->host_seq_ctx[s], c = ctx - q;
    const int64_t kb = prefill_kv_chunk(q, ctx, kvh);
    void *ws;
    int rc = cu_scratch(st, prefill_bytes(q, ctx, kvh, hd), &ws, err);
    if (rc != KVS_OK)
        return rc;
    size_t kvc = align256((size_t)ctx * row * sizeof(__half));
    __half *kc = (__half *)ws, *vc = (__half *)((char *)ws + kvc);
    float *S = (float *)((char *)ws + 2 * kvc);
    __half *P = (__half *)((char *)S + align256((size_t)kb * q * ctx * sizeof(float)));

    int64_t n = ctx * row;
    gather_kv_k<<<(unsigned)((n + CU_THREADS - 1) / CU_THREADS), CU_THREADS, 0, st->stream>>>(
        (const __half *)a->k_pool, (const __half *)a->v_pool, a->block_tables, a->seq_bt, s,
        (int)a->block_size, row, n, kc, vc);
    if ((rc = cu_check_launch("prefill gather kernel", err)) != KVS_OK)
        return rc;
    const __half *qkv = (const __half *)a->qkv;
    __half *out = (__half *)a->out;
    const float scale = a->scale, one = 1.0f, zero = 0.0f;
    for (int64_t j0 = 0; j0 < kvh; j0 += kb) {
        const int64_t nb = kvh - j0 < kb ? kvh - j0 : kb;
        for (int64_t g = 0; g < G; g++) {
            const int64_t h = j0 * G + g; /* first query head of the pass */
            /* S^T (ctx x q, col-major) = K_j (ctx x hd) * Q_h^T (hd x q) */
            rc = cu_check_blas(cublasGemmStridedBatchedEx(
                                   st->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)ctx, (int)q, (int)hd,
                                   &scale, kc + j0 * hd, CUDA_R_16F, (int)row, hd,
                                   qkv + q0 * width + h * hd, CUDA_R_16F, (int)width, G * hd,
                                   &zero, S, CUDA_R_32F, (int)ctx, q * ctx, (int)nb,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                               "prefill QK^T", err);
            if (rc != KVS_OK)
                return rc;
            causal_softmax_k<<<(unsigned)(nb * q), CU_THREADS, 0, st->stream>>>(S, P, (int)q,
                                                                               (int)ctx, (int)c);
            if ((rc = cu_check_launch("prefill softmax kernel", err)) != KVS_OK)
                return rc;
            /* O^T (hd x q) = V_j^T (hd x ctx) * P^T (ctx x q) */
            rc = cu_check_blas(cublasGemmStridedBatchedEx(
                                   st->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)hd, (int)q, (int)ctx,
                                   &one, vc + j0 * hd, CUDA_R_16F, (int)row, hd, P, CUDA_R_16F,
                                   (int)ctx, q * ctx, &zero, out + q0 * nh * hd + h * hd,
                                   CUDA_R_16F, (int)(nh * hd), G * hd, (int)nb,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                               "prefill PV", err);
            if (rc != KVS_OK)
                return rc;
        }
    }
    return KVS_OK;
}

int cu_prefill_attention(void *self, const kernels_attn_args *a, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    for (int64_t i = 0; i < a->n; i++) {
        int rc = prefill_one(st, a, a->host_seq_idx[i], err);
        if (rc != KVS_OK)
            return rc;
    }
    return KVS_OK;
}
