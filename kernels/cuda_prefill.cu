/* cuda_prefill.cu — prefill attention over the paged KV cache on CUDA.
 *
 * Prefill (q >= 1, causal over c cached + q new tokens, all read from the
 * pools) is a FlashAttention-2-style kernel on tensor cores: a block takes
 * 64 query rows of one head (16 per warp), walks the KV tiles of 32 tokens
 * up to its last row's position (tiles past the causal limit are skipped;
 * the diagonal tile is masked) and keeps an online softmax per row.  K/V
 * tiles are copied with cp.async, double buffered (the next tile's copies
 * fly while this one is computed).  No score matrix is materialised, so
 * any prompt length runs in the same shared memory and no workspace.
 *
 * Two kernels do it.  prefill_mma_k (the default) keeps everything of a
 * warp's rows in registers: Q's fragments, S = Q K^T, the softmax, P (the
 * accumulator fragments of S become the A fragments of P V as they are)
 * and O, with mma.sync m16n8k16; shared memory holds Q's tile once and the
 * K/V stages (~52 KiB at head_dim 128).  prefill_k, the first one (WMMA
 * 16x16x16, whose fragment layout is opaque), goes through shared memory
 * for S, P and O (~98 KiB); KVSIM_CUDA_PREFILL=wmma selects it, so a GPU
 * run can time both (bench_attention) and check both against the CPU. */
#include "cuda_internal.cuh"
#include "cuda_kv_tile.cuh"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mma.h>

/* ------------------------------------------------------------ prefill */

#define PF_BQ 64      /* query rows per block (16 per warp) */
#define PF_BK KV_TILE /* keys per tile (32) */
#define PF_WARPS 4
#define PF_THREADS (32 * PF_WARPS)
static_assert(PF_THREADS == KV_TILE_THREADS, "the block copies its tiles");
#define PF_PAD_H 8    /* halves of padding per row (16 bytes: no bank conflicts) */
#define PF_PAD_F 4    /* floats of padding per row */

static size_t round128(size_t x) { return (x + 127) & ~(size_t)127; }

/* Shared-memory layout of the prefill kernel for head_dim hd (bytes). */
typedef struct pf_layout {
    size_t q, k, v, s, p, o, total;
} pf_layout;

static pf_layout pf_layout_for(int hd)
{
    pf_layout L;
    size_t lh = (size_t)hd + PF_PAD_H, lo = (size_t)hd + PF_PAD_F;
    L.q = 0;
    L.k = L.q + round128(PF_BQ * lh * sizeof(__half));
    L.v = L.k + 2 * round128(PF_BK * lh * sizeof(__half)); /* two stages each */
    L.s = L.v + 2 * round128(PF_BK * lh * sizeof(__half));
    L.p = L.s + round128(PF_BQ * (PF_BK + PF_PAD_F) * sizeof(float));
    L.o = L.p + round128(PF_BQ * (PF_BK + PF_PAD_H) * sizeof(__half));
    L.total = L.o + round128(PF_BQ * lo * sizeof(float));
    return L;
}

/* What a prefill block works on: grid (query tile, head, prefill sequence). */
typedef struct pf_block {
    int q0;            /* the sequence's first row in qkv and out */
    int q;             /* its prompt tokens in this step (query rows) */
    int ctx;           /* its context after the step, tokens */
    int c;             /* tokens stored before the step (ctx - q) */
    int r0;            /* the block's first query row, < q */
    int h, kvh;        /* query head, its KV head */
    const int32_t *bt; /* the sequence's block table */
} pf_block;

/* Fill b for this block; 0 when its query tile starts past the sequence's
 * rows (uniform per block: the block returns).  Both prefill kernels. */
__device__ static inline int pf_locate(pf_block *b, const int32_t *seq_idx,
                                       const int32_t *qstart, const int32_t *ctx_a,
                                       const int32_t *bt_off, const int32_t *tables, int z0,
                                       int heads, int kv_heads)
{
    const int s = seq_idx[(int)blockIdx.z + z0];
    b->q0 = qstart[s];
    b->q = qstart[s + 1] - b->q0;
    b->ctx = ctx_a[s];
    b->c = b->ctx - b->q;
    b->r0 = (int)blockIdx.x * PF_BQ;
    if (b->r0 >= b->q)
        return 0;
    b->h = (int)blockIdx.y;
    b->kvh = b->h / (heads / kv_heads);
    b->bt = tables + bt_off[s];
    return 1;
}

/* The block's Q tile in shared memory: rows r0 ... r0 + PF_BQ - 1 of the
 * sequence's q rows (from qkv row q0 on, head h), LH halves apart, zero
 * past q.  Both prefill kernels. */
template <int HD, int LH>
__device__ static inline void pf_load_q(__half *Qs, const __half *__restrict__ qkv, int q0, int r0,
                                        int q, int64_t width, int h)
{
    constexpr int CPR = HD / 8;
    for (int e = (int)threadIdx.x; e < PF_BQ * CPR; e += PF_THREADS) {
        const int r = e / CPR, part = e % CPR;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r0 + r < q)
            v = *(const uint4 *)(qkv + (size_t)(q0 + r0 + r) * width + (size_t)h * HD + part * 8);
        *(uint4 *)(Qs + r * LH + part * 8) = v;
    }
}

/* Tile kt of n_tiles (stage kt & 1) made ready, the next one's copies
 * issued into the other stage first (released by the barrier that ended
 * tile kt - 1): on return every thread's part of tile kt has landed.  Tile
 * 0's copies were issued and committed before the loop.  Both kernels. */
template <int HD, int LH>
__device__ static inline void pf_stage(__half (*Krow)[LH], __half (*Vrow)[LH],
                                       const __half *__restrict__ kp,
                                       const __half *__restrict__ vp, const int32_t *bt, int bs,
                                       size_t row, int kvh, int kt, int n_tiles, int ctx)
{
    const int cur = kt & 1;
    if (kt + 1 < n_tiles)
        kv_load_tile<HD, LH, 0>(Krow + (cur ^ 1) * PF_BK, Vrow + (cur ^ 1) * PF_BK, kp, vp, bt, bs,
                                row, kvh, (kt + 1) * PF_BK, ctx);
    cp_async_commit(); /* possibly empty: keeps the group count uniform */
    cp_async_wait<1>(); /* tile kt has landed (this thread's part) */
    __syncthreads();    /* ... every thread's part */
}

/* One warp's 16 query rows against one tile of keys at k0 (Kc, Vc: the
 * stage): S = Q K^T (WMMA), the online softmax of each row (lanes 2i and
 * 2i+1 own row wr, half of its keys and output columns each; m, l kept by
 * both), P rounded to fp16, O = O * corr + P V (O in shared memory; the
 * rescale is skipped when the row's max did not move, corr = 1). */
template <int HD>
__device__ static inline void pf_tile(const __half *Qs, const __half *Kc, const __half *Vc,
                                      float *S, __half *P, float *O, int warp, int lane, int k0,
                                      int limit, float scale, float *m, float *l)
{
    using namespace nvcuda;
    constexpr int LH = HD + PF_PAD_H, LO = HD + PF_PAD_F, LS = PF_BK + PF_PAD_F,
                  LP = PF_BK + PF_PAD_H;
    const int wr = warp * 16 + lane / 2, half_ = lane & 1;
    float *Sw = S + warp * 16 * LS;
#pragma unroll
    for (int j = 0; j < PF_BK / 16; j++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
        wmma::fill_fragment(sf, 0.0f);
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> af;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> bf;
            wmma::load_matrix_sync(af, Qs + warp * 16 * LH + kk * 16, LH);
            wmma::load_matrix_sync(bf, Kc + j * 16 * LH + kk * 16, LH);
            wmma::mma_sync(sf, af, bf, sf);
        }
        wmma::store_matrix_sync(Sw + j * 16, sf, LS, wmma::mem_row_major);
    }
    __syncwarp();

    /* online softmax of row wr over this tile (16 keys per lane) */
    const float *sr = Sw + (lane / 2) * LS + half_ * 16;
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 16; j++)
        if (k0 + half_ * 16 + j <= limit)
            mx = fmaxf(mx, sr[j] * scale);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float mn = fmaxf(*m, mx); /* finite: key 0 <= limit is in tile 0 */
    const float corr = __expf(*m - mn);
    float sum = 0.0f;
    __half *pr = P + wr * LP + half_ * 16;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        float pv = k0 + half_ * 16 + j <= limit ? __expf(sr[j] * scale - mn) : 0.0f;
        __half ph = __float2half(pv);
        pr[j] = ph;
        sum += __half2float(ph); /* the sum of what P V adds */
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    *l = *l * corr + sum;
    *m = mn;
    if (corr != 1.0f) { /* exp(0) is exactly 1: the row's max did not move */
        float *orow = O + wr * LO + half_ * (HD / 2);
#pragma unroll 8
        for (int d = 0; d < HD / 2; d++)
            orow[d] *= corr;
    }
    __syncwarp();

    /* O[16 rows][HD] += P[16][32] V[32][HD] */
#pragma unroll
    for (int j = 0; j < HD / 16; j++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
        wmma::load_matrix_sync(of, O + warp * 16 * LO + j * 16, LO, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < PF_BK / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> af;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> bf;
            wmma::load_matrix_sync(af, P + warp * 16 * LP + kk * 16, LP);
            wmma::load_matrix_sync(bf, Vc + kk * 16 * LH + j * 16, LH);
            wmma::mma_sync(of, af, bf, of);
        }
        wmma::store_matrix_sync(O + warp * 16 * LO + j * 16, of, LO, wmma::mem_row_major);
    }
    __syncwarp();
}

/* grid (query tiles, heads, prefill sequences); smem laid out as pf_layout. */
template <int HD>
__global__ static void __launch_bounds__(PF_THREADS)
prefill_k(const __half *__restrict__ qkv, const __half *__restrict__ kp,
          const __half *__restrict__ vp, __half *__restrict__ out, const int32_t *seq_idx,
          const int32_t *qstart, const int32_t *ctx_a, const int32_t *bt_off,
          const int32_t *tables, int z0, int64_t width, int heads, int kv_heads, int bs,
          float scale, size_t off_k, size_t off_v, size_t off_s, size_t off_p, size_t off_o)
{
    constexpr int LH = HD + PF_PAD_H, LO = HD + PF_PAD_F;
    constexpr int KST = PF_BK * LH; /* halves per K (or V) stage: pf_layout's stage */
    static_assert(KST * sizeof(__half) % 128 == 0, "a stage is a whole number of 128 bytes");
    extern __shared__ __align__(128) unsigned char smem[];
    __half *Qs = (__half *)smem, *Ks = (__half *)(smem + off_k), *Vs = (__half *)(smem + off_v);
    float *S = (float *)(smem + off_s), *O = (float *)(smem + off_o);
    __half *P = (__half *)(smem + off_p);

    pf_block b;
    if (!pf_locate(&b, seq_idx, qstart, ctx_a, bt_off, tables, z0, heads, kv_heads))
        return; /* uniform per block */
    const int q0 = b.q0, q = b.q, ctx = b.ctx, c = b.c, r0 = b.r0, h = b.h, kvh = b.kvh;
    const int32_t *bt = b.bt;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const size_t row = (size_t)kv_heads * HD;

    /* Q rows of the tile (zero past q), O = 0 */
    pf_load_q<HD, LH>(Qs, qkv, q0, r0, q, width, h);
    for (int e = (int)threadIdx.x; e < PF_BQ * LO; e += PF_THREADS)
        O[e] = 0.0f;

    /* lanes 2i and 2i+1 own row wr = 16 warp + i: half of its keys and of
     * its output columns each; (m, l) are kept by both */
    const int wr = warp * 16 + lane / 2, half_ = lane & 1;
    const int qi = min(r0 + wr, q - 1); /* rows past q mirror the last row */
    const int limit = c + qi;           /* last key position this row sees */
    const int warp_last = c + min(r0 + warp * 16 + 15, q - 1);
    float m = -INFINITY, l = 0.0f;

    const int block_last = c + min(r0 + PF_BQ - 1, q - 1);
    const int n_tiles = block_last / PF_BK + 1; /* tiles past it: causally masked, skipped */
    /* K/V tiles double buffered: tile kt + 1's copies fly while tile kt is
     * computed (stages of PF_BK rows of LH halves) */
    __half(*Krow)[LH] = (__half(*)[LH])Ks, (*Vrow)[LH] = (__half(*)[LH])Vs;
    kv_load_tile<HD, LH, 0>(Krow, Vrow, kp, vp, bt, bs, row, kvh, 0, ctx);
    cp_async_commit();
    for (int kt = 0; kt < n_tiles; kt++) {
        const int k0 = kt * PF_BK, cur = kt & 1;
        /* (Q and O are ready too after the barrier of tile 0) */
        pf_stage<HD, LH>(Krow, Vrow, kp, vp, bt, bs, row, kvh, kt, n_tiles, ctx);
        if (k0 <= warp_last) /* else the whole tile is after this warp's rows */
            pf_tile<HD>(Qs, Ks + cur * KST, Vs + cur * KST, S, P, O, warp, lane, k0, limit, scale,
                        &m, &l);
        __syncthreads(); /* stage cur is consumed before it is refilled */
    }
    __syncwarp();
    if (r0 + wr < q) {
        const float inv = 1.0f / l;
        const float *orow = O + wr * LO + half_ * (HD / 2);
        __half *dst = out + (size_t)(q0 + r0 + wr) * heads * HD + (size_t)h * HD + half_ * (HD / 2);
        for (int d = 0; d < HD / 2; d++)
            dst[d] = __float2half(orow[d] * inv);
    }
}

/* ------------------------------------------------- prefill, mma.sync */

/* Shared-memory layout of prefill_mma_k: Q's 64 rows, then two stages of
 * K and of V (bytes). */
static pf_layout pm_layout_for(int hd)
{
    pf_layout L;
    const size_t lh = (size_t)hd + PF_PAD_H;
    L.q = 0;
    L.k = L.q + round128(PF_BQ * lh * sizeof(__half));
    L.v = L.k + 2 * round128(PF_BK * lh * sizeof(__half));
    L.s = L.p = L.o = 0; /* none: S, P and O stay in registers */
    L.total = L.v + 2 * round128(PF_BK * lh * sizeof(__half));
    return L;
}

/* One warp's 16 query rows (lane = 4 g + t holds rows g and g + 8, "lo"
 * and "hi") against one tile of PF_BK keys at k0 (Kc, Vc: the stage, rows
 * LH halves apart): S = Q K^T from Q's fragments qf, scaled into log2
 * units (sl2 = scale x log2 e) and masked past each row's last key
 * (lim_lo, lim_hi); the online softmax (the quad of lanes sharing a row
 * meets through two shuffles; m, l per row); P rounded to fp16, its row
 * sums taken from the rounded values (what P V adds); O = O x corr + P V.
 * The accumulator fragments of two adjacent key n-tiles of S are the A
 * fragment of one 16-key step of P V, so P never leaves the registers.
 * K's and V's B fragments come from shared memory through ldmatrix (V's
 * transposed: a fragment pairs two keys of one dimension). */
template <int HD>
__device__ static inline void pm_tile(const uint32_t (&qf)[HD / 16][4], const __half *Kc,
                                      const __half *Vc, float (&o)[HD / 8][4], int g, int t,
                                      int k0, int lim_lo, int lim_hi, float sl2, float (&m)[2],
                                      float (&l)[2])
{
    constexpr int LH = HD + PF_PAD_H, NT = PF_BK / 8, DT = HD / 8;
    float sc[NT][4];
    /* K's B fragments (k = dim, n = key): one ldmatrix.x4 reads two
     * 16-dim steps of an 8-key n-tile (lane 8 j + r: key r, dims 8 j on) */
    const int lane = 4 * g + t, lr = lane & 7, lj = lane >> 3;
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
        const __half *kr = Kc + (nt * 8 + lr) * LH + lj * 8;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk += 2) {
            uint32_t b4[4];
            ldsm_x4(b4, kr + kk * 16);
            const uint32_t b0[2] = {b4[0], b4[1]}, b1[2] = {b4[2], b4[3]};
            mma_16816(sc[nt], qf[kk], b0);
            mma_16816(sc[nt], qf[kk + 1], b1);
        }
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int key = k0 + nt * 8 + 2 * t + e;
            sc[nt][e] = key <= lim_lo ? sc[nt][e] * sl2 : -INFINITY;
            sc[nt][2 + e] = key <= lim_hi ? sc[nt][2 + e] * sl2 : -INFINITY;
            mx[0] = fmaxf(mx[0], sc[nt][e]);
            mx[1] = fmaxf(mx[1], sc[nt][2 + e]);
        }
    float corr[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float mn = fmaxf(m[r], mx[r]); /* finite: key 0 <= limit is in tile 0 */
        corr[r] = exp2f(m[r] - mn);          /* 0 at the first tile (m = -inf) */
        m[r] = mn;
    }
    uint32_t pf[NT / 2][4]; /* P's A fragments, one per 16-key step */
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const __half2 lo = __floats2half2_rn(exp2f(sc[nt][0] - m[0]), exp2f(sc[nt][1] - m[0]));
        const __half2 hi = __floats2half2_rn(exp2f(sc[nt][2] - m[1]), exp2f(sc[nt][3] - m[1]));
        const float2 fl = __half22float2(lo), fh = __half22float2(hi);
        sum[0] += fl.x + fl.y;
        sum[1] += fh.x + fh.y;
        pf[nt / 2][(nt & 1) * 2] = h2_bits(lo);
        pf[nt / 2][(nt & 1) * 2 + 1] = h2_bits(hi);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
        l[r] = l[r] * corr[r] + sum[r];
    }
#pragma unroll
    for (int dt = 0; dt < DT; dt++) {
        o[dt][0] *= corr[0];
        o[dt][1] *= corr[0];
        o[dt][2] *= corr[1];
        o[dt][3] *= corr[1];
    }
    /* V's B fragments (k = key, n = dim): one ldmatrix.x4.trans reads a
     * 16-key step of two 8-dim n-tiles (lane 8 j + r: key 8 (j & 1) + r,
     * dims 8 (j >> 1) on) */
    const __half *vr = Vc + ((lj & 1) * 8 + lr) * LH + (lj >> 1) * 8;
#pragma unroll
    for (int dt = 0; dt < DT; dt += 2) {
#pragma unroll
        for (int kk = 0; kk < NT / 2; kk++) {
            uint32_t b4[4];
            ldsm_x4_trans(b4, vr + kk * 16 * LH + dt * 8);
            const uint32_t b0[2] = {b4[0], b4[1]}, b1[2] = {b4[2], b4[3]};
            mma_16816(o[dt], pf[kk], b0);
            mma_16816(o[dt + 1], pf[kk], b1);
        }
    }
}

/* grid (query tiles, heads, prefill sequences); smem laid out as
 * pm_layout_for; the arguments are prefill_k's. */
template <int HD>
__global__ static void __launch_bounds__(PF_THREADS)
prefill_mma_k(const __half *__restrict__ qkv, const __half *__restrict__ kp,
              const __half *__restrict__ vp, __half *__restrict__ out, const int32_t *seq_idx,
              const int32_t *qstart, const int32_t *ctx_a, const int32_t *bt_off,
              const int32_t *tables, int z0, int64_t width, int heads, int kv_heads, int bs,
              float scale, size_t off_k, size_t off_v)
{
    constexpr int LH = HD + PF_PAD_H, KST = PF_BK * LH;
    static_assert(KST * sizeof(__half) % 128 == 0, "a stage is a whole number of 128 bytes");
    extern __shared__ __align__(128) unsigned char smem[];
    __half *Qs = (__half *)smem, *Ks = (__half *)(smem + off_k), *Vs = (__half *)(smem + off_v);

    pf_block b;
    if (!pf_locate(&b, seq_idx, qstart, ctx_a, bt_off, tables, z0, heads, kv_heads))
        return; /* uniform per block */
    const int q0 = b.q0, q = b.q, ctx = b.ctx, c = b.c, r0 = b.r0, h = b.h, kvh = b.kvh;
    const int32_t *bt = b.bt;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3, wr = warp * 16; /* rows wr + g, wr + g + 8 */
    const size_t row = (size_t)kv_heads * HD;

    __half(*Krow)[LH] = (__half(*)[LH])Ks, (*Vrow)[LH] = (__half(*)[LH])Vs;
    kv_load_tile<HD, LH, 0>(Krow, Vrow, kp, vp, bt, bs, row, kvh, 0, ctx); /* tile 0 flies */
    cp_async_commit();
    pf_load_q<HD, LH>(Qs, qkv, q0, r0, q, width, h);
    __syncthreads();
    uint32_t qf[HD / 16][4]; /* this warp's rows of Q as A fragments, k = dims */
    /* lane 8 j + r: row wr + 8 (j & 1) + r, dims 8 (j >> 1) on of each step */
    const __half *qr = Qs + (wr + (lane >> 3 & 1) * 8 + (lane & 7)) * LH + (lane >> 4) * 8;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++)
        ldsm_x4(qf[kk], qr + kk * 16);
    /* rows past q mirror the last row (their output is not written) */
    const int lim_lo = c + min(r0 + wr + g, q - 1), lim_hi = c + min(r0 + wr + g + 8, q - 1);
    const int warp_last = c + min(r0 + wr + 15, q - 1);
    const float sl2 = scale * 1.4426950408889634f; /* exp(x) = exp2(x log2 e) */
    float o[HD / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int dt = 0; dt < HD / 8; dt++)
        o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;

    const int block_last = c + min(r0 + PF_BQ - 1, q - 1);
    const int n_tiles = block_last / PF_BK + 1; /* tiles past it: causally masked, skipped */
    for (int kt = 0; kt < n_tiles; kt++) {
        const int k0 = kt * PF_BK, cur = kt & 1;
        pf_stage<HD, LH>(Krow, Vrow, kp, vp, bt, bs, row, kvh, kt, n_tiles, ctx);
        if (k0 <= warp_last) /* else the whole tile is after this warp's rows */
            pm_tile<HD>(qf, Ks + cur * KST, Vs + cur * KST, o, g, t, k0, lim_lo, lim_hi, sl2, m,
                        l);
        __syncthreads(); /* stage cur is consumed before it is refilled */
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int qi = r0 + wr + g + 8 * r;
        if (qi >= q)
            continue;
        const float inv = 1.0f / l[r];
        __half *dst = out + (size_t)(q0 + qi) * heads * HD + (size_t)h * HD + 2 * t;
#pragma unroll
        for (int dt = 0; dt < HD / 8; dt++)
            *(__half2 *)(dst + dt * 8) =
                __floats2half2_rn(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
    }
}

/* Opt the prefill kernels into more than 48 KiB of shared memory (once). */
static int prefill_setup(cuda_state *st, kvs_err *err)
{
    if (st->prefill_ready)
        return KVS_OK;
    const struct {
        const void *kernel;
        size_t bytes;
        const char *what;
    } k[] = {
        {(const void *)prefill_k<32>, pf_layout_for(32).total, "prefill 32"},
        {(const void *)prefill_k<64>, pf_layout_for(64).total, "prefill 64"},
        {(const void *)prefill_k<128>, pf_layout_for(128).total, "prefill 128"},
        {(const void *)prefill_mma_k<32>, pm_layout_for(32).total, "prefill mma 32"},
        {(const void *)prefill_mma_k<64>, pm_layout_for(64).total, "prefill mma 64"},
        {(const void *)prefill_mma_k<128>, pm_layout_for(128).total, "prefill mma 128"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "cudaFuncSetAttribute(%s)", k[i].what);
        const int rc = cu_check(cudaFuncSetAttribute(k[i].kernel,
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     (int)k[i].bytes),
                                what, err);
        if (rc != KVS_OK)
            return rc;
    }
    st->prefill_ready = 1;
    return KVS_OK;
}

/* Whether KVSIM_CUDA_PREFILL=wmma asks for the first (WMMA) kernel. */
static bool prefill_wmma(void)
{
    const char *e = getenv("KVSIM_CUDA_PREFILL");
    return e && !strcmp(e, "wmma");
}

int cu_prefill_attention(void *self, const kernels_attn_args *a, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    const int hd = (int)a->head_dim;
    if (hd != 32 && hd != 64 && hd != 128)
        return cu_errf(err, KVS_EINVAL, "cuda prefill attention: head_dim %d not supported "
                                        "(32, 64 or 128)", hd);
    if (a->heads > 65535)
        return cu_errf(err, KVS_EINVAL, "cuda prefill attention: %lld heads exceed the grid",
                       (long long)a->heads);
    int rc = prefill_setup(st, err);
    if (rc != KVS_OK)
        return rc;
    const bool wmma = prefill_wmma();
    const pf_layout L = wmma ? pf_layout_for(hd) : pm_layout_for(hd);
    const int64_t width = (a->heads + 2 * a->kv_heads) * hd;
    const unsigned qtiles = (unsigned)(((a->max_q > 0 ? a->max_q : 1) + PF_BQ - 1) / PF_BQ);
    for (int64_t z0 = 0; z0 < a->n; z0 += 65535) {
        const int64_t nz = a->n - z0 < 65535 ? a->n - z0 : 65535;
        dim3 grid(qtiles, (unsigned)a->heads, (unsigned)nz);
#define PF_ARGS                                                                                \
    (const __half *)a->qkv, (const __half *)a->k_pool, (const __half *)a->v_pool,              \
        (__half *)a->out, a->seq_idx, a->seq_qstart, a->seq_ctx, a->seq_bt, a->block_tables,   \
        (int)z0, width, (int)a->heads, (int)a->kv_heads, (int)a->block_size, a->scale, L.k, L.v
#define PF_CASE(HD_)                                                                          \
    else if (hd == HD_ && wmma) prefill_k<HD_><<<grid, PF_THREADS, L.total, st->stream>>>(     \
        PF_ARGS, L.s, L.p, L.o);                                                               \
    else if (hd == HD_) prefill_mma_k<HD_><<<grid, PF_THREADS, L.total, st->stream>>>(PF_ARGS);
        if (0) {
        }
        PF_CASE(32) PF_CASE(64) PF_CASE(128)
#undef PF_CASE
#undef PF_ARGS
        if ((rc = cu_check_launch("prefill attention kernel", err)) != KVS_OK)
            return rc;
    }
    return KVS_OK;
}

