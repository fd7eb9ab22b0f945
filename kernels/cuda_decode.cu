/* cuda_decode.cu — decode attention (one query token per sequence) over the
 * paged KV cache on CUDA, and the workspace it plans.
 *
 * Decode (q == 1) is written for memory bandwidth.  A block (4 warps) serves
 * one sequence, one KV head, up to 8 of the query heads that share it, and
 * one split-KV partition of the context:
 *   - the partition length comes from the TOTAL decode tokens of the batch
 *     (FlashInfer's load-balanced plan): every block reads about the same
 *     number of tokens, so a long sequence gets more partitions instead of
 *     straggling; a second kernel merges the partitions' softmax states;
 *   - K/V tiles of 32 tokens are copied into shared memory with cp.async,
 *     double buffered (the next tile's copies are in flight while the
 *     current tile is computed; issuing them waits on their block-table
 *     entries in decode_k, which decode_gqa_k reads a tile earlier), so each
 *     KV row is read from HBM once for all the query heads of the block;
 *   - query heads are spread across warps (head slot = warp % HS), and when
 *     the block has fewer heads than warps the warps split the tile's tokens
 *     instead (token slice = warp / HS), merged through shared memory at the
 *     end; each lane owns head_dim / 32 dimensions, so a thread holds at
 *     most 2 heads x head_dim/32 accumulators (no register spills at 8
 *     heads per block, see docs/kernels.md for the counts);
 *   - groups of 4 query heads per KV head and more run decode_mma_k
 *     instead, where the block's heads are the rows of tensor-core tiles
 *     (mma.sync) and each warp takes a quarter of every K/V tile; or, with
 *     KVSIM_CUDA_DECODE=simt, decode_gqa_k, where a warp owns whole heads and
 *     does a tile in two phases (scores with lane = token, then P V with
 *     lane = dimensions), reading the block table one tile ahead. */
#include "cuda_internal.cuh"
#include "cuda_kv_tile.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEC_WARPS 4
#define DEC_THREADS (32 * DEC_WARPS)
static_assert(DEC_THREADS == KV_TILE_THREADS, "the block copies its tiles");
#define DEC_TILE KV_TILE     /* tokens per shared-memory KV tile (32) */
#define DEC_MAX_HEADS 8      /* query heads per block (decode_k, decode_gqa_k) */
#define DEC_MMA_MAX_HEADS 16 /* query heads per block of decode_mma_k: a tile's rows */
#define PART_MIN 256         /* tokens per split-KV partition, at least */
#define PART_MAX_SPLIT 64    /* partitions per sequence, at most */

/* ------------------------------------------------------------ decode */

/* K rows of a swizzled tile: token t's 16-byte chunk c lands at chunk
 * c ^ (t & DEC_SWZ(HD)), so the 8 lanes of a quarter warp that read chunk c
 * of 8 consecutive tokens hit 8 different bank groups (unswizzled, every
 * row starts at bank 0 and they would all hit the same 4 banks). */
#define DEC_SWZ(HD) ((HD) / 8 < 8 ? (HD) / 8 - 1 : 7)

/* What a decode block works on: grid (partition, KV head x chunk, sequence). */
typedef struct dec_block {
    int si;          /* index into seq_idx (the batch's decode sequences) */
    int p;           /* partition of the sequence's context */
    int t_begin;     /* first token of the partition */
    int t_end;       /* one past its last token */
    int kvh;         /* KV head */
    int h0;          /* first query head of the block */
    int gc;          /* query heads of the block (<= its capacity NH) */
    int tok;         /* the sequence's query row in qkv and out */
    const int32_t *bt; /* the sequence's block table */
} dec_block;

/* Locate this block; 0 when its partition starts past the sequence's end
 * (the sequence has fewer partitions; uniform per block: return). */
__device__ static inline int dec_locate(dec_block *b, const int32_t *seq_idx,
                                        const int32_t *qstart, const int32_t *ctx_a,
                                        const int32_t *bt_off, const int32_t *tables, int z0,
                                        int group, int chunks, int part_len, int nh)
{
    b->si = (int)blockIdx.z + z0;
    const int s = seq_idx[b->si], ctx = ctx_a[s];
    b->p = (int)blockIdx.x;
    b->t_begin = b->p * part_len;
    if (b->t_begin >= ctx)
        return 0;
    b->t_end = min(ctx, b->t_begin + part_len);
    b->kvh = (int)blockIdx.y / chunks;
    const int chunk = (int)blockIdx.y % chunks;
    b->h0 = b->kvh * group + chunk * nh;
    b->gc = min(nh, group - chunk * nh);
    b->tok = qstart[s];
    b->bt = tables + bt_off[s];
    return 1;
}

/* Dimension d of head h: the normalised output with one partition, else the
 * partition's unnormalised accumulator and (max, sum) for decode_reduce_k. */
__device__ static inline void dec_store(const dec_block &b, __half *out, float *ws_acc,
                                        float *ws_ml, int heads, int hd, int max_parts, int h,
                                        int d, float acc, float m, float l)
{
    if (max_parts == 1) {
        out[(size_t)b.tok * heads * hd + (size_t)h * hd + d] = __float2half(acc / l);
        return;
    }
    const size_t i = ((size_t)b.si * heads + h) * max_parts + b.p;
    ws_acc[i * hd + d] = acc;
    if (d == 0) {
        ws_ml[2 * i] = m;
        ws_ml[2 * i + 1] = l;
    }
}

/* Merge n token slices of one head's (max, sum, accumulator) state, slice
 * j at ml[j * ml_step] (max, then sum) and acc[j * acc_step] (dimension d):
 * a slice that saw no token (max -inf) is skipped.  Into *M, *L, *A, as
 * dec_store takes them.  decode_k and decode_mma_k. */
__device__ static inline void dec_merge_slices(const float *ml, int ml_step, const float *acc,
                                               int acc_step, int n, float *M, float *L,
                                               float *A)
{
    float mx = -INFINITY, sum = 0.0f, a = 0.0f;
    for (int j = 0; j < n; j++)
        mx = fmaxf(mx, ml[j * ml_step]);
    for (int j = 0; j < n; j++) {
        const float mj = ml[j * ml_step];
        if (mj == -INFINITY)
            continue; /* this slice saw no token */
        const float f = __expf(mj - mx);
        sum += ml[j * ml_step + 1] * f;
        a += acc[j * acc_step] * f;
    }
    *M = mx;
    *L = sum;
    *A = a;
}

/* HS head slots x (DEC_WARPS / HS) token slices; HPW heads per warp. */
template <int HD, int HS, int HPW>
__global__ static void __launch_bounds__(DEC_THREADS)
decode_k(const __half *__restrict__ qkv, const __half *__restrict__ kp,
         const __half *__restrict__ vp, __half *__restrict__ out, const int32_t *seq_idx,
         const int32_t *qstart, const int32_t *ctx_a, const int32_t *bt_off,
         const int32_t *tables, int z0, int64_t width, int heads, int kv_heads, int group,
         int chunks, int bs, int part_len, int max_parts, float scale, float *ws_acc,
         float *ws_ml)
{
    constexpr int TS = DEC_WARPS / HS; /* token slices */
    constexpr int DPL = HD / 32;       /* dimensions per lane */
    constexpr int NH = HS * HPW;       /* head capacity of the block */
    __shared__ __align__(16) __half ks[2][DEC_TILE][HD];
    __shared__ __align__(16) __half vs[2][DEC_TILE][HD];
    __shared__ float sm_ml[DEC_WARPS][HPW][2];
    __shared__ float sm_acc[DEC_WARPS][HPW][HD];

    dec_block b;
    if (!dec_locate(&b, seq_idx, qstart, ctx_a, bt_off, tables, z0, group, chunks, part_len, NH))
        return;
    const int t_begin = b.t_begin, t_end = b.t_end, kvh = b.kvh, h0 = b.h0, gc = b.gc;
    const int tok = b.tok;
    const int32_t *bt = b.bt;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int hs = warp % HS, ts = warp / HS;
    const size_t row = (size_t)kv_heads * HD;

    /* this warp's heads: slot hs + HS k, k < HPW (a head past gc is idle) */
    float q[HPW][DPL], m[HPW], l[HPW], acc[HPW][DPL];
#pragma unroll
    for (int k = 0; k < HPW; k++) {
        const int g = hs + HS * k;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            q[k][i] = g < gc ? __half2float(qkv[(size_t)tok * width + (size_t)(h0 + g) * HD +
                                                lane * DPL + i]) * scale
                             : 0.0f;
            acc[k][i] = 0.0f;
        }
        m[k] = -INFINITY;
        l[k] = 0.0f;
    }

    const int n_tiles = (t_end - t_begin + DEC_TILE - 1) / DEC_TILE;
    kv_load_tile_rolled<HD, HD>(ks[0], vs[0], kp, vp, bt, bs, row, kvh, t_begin, t_end);
    cp_async_commit();
    for (int it = 0; it < n_tiles; it++) {
        const int cur = it & 1, t0 = t_begin + it * DEC_TILE;
        if (it + 1 < n_tiles) /* the other stage was released by the barrier below */
            kv_load_tile_rolled<HD, HD>(ks[cur ^ 1], vs[cur ^ 1], kp, vp, bt, bs, row, kvh,
                                        t0 + DEC_TILE, t_end);
        cp_async_commit(); /* possibly empty: keeps the group count uniform */
        cp_async_wait<1>(); /* the current tile has landed (this thread's part) */
        __syncthreads();    /* ... and every thread's part */
        const int nt = min(DEC_TILE, t_end - t0);
        for (int t = ts; t < nt; t += TS) {
            float kf[DPL], vf[DPL];
#pragma unroll
            for (int i = 0; i < DPL; i++) {
                kf[i] = __half2float(ks[cur][t][lane * DPL + i]);
                vf[i] = __half2float(vs[cur][t][lane * DPL + i]);
            }
#pragma unroll
            for (int k = 0; k < HPW; k++) {
                float sc = 0.0f;
#pragma unroll
                for (int i = 0; i < DPL; i++)
                    sc += q[k][i] * kf[i];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1)
                    sc += __shfl_xor_sync(0xffffffffu, sc, o);
                const float mx = fmaxf(m[k], sc);
                const float corr = __expf(m[k] - mx), pr = __expf(sc - mx);
                l[k] = l[k] * corr + pr;
#pragma unroll
                for (int i = 0; i < DPL; i++)
                    acc[k][i] = acc[k][i] * corr + pr * vf[i];
                m[k] = mx;
            }
        }
        __syncthreads(); /* everyone is done with stage cur before it is refilled */
    }

    /* Merge the token slices (warps hs, hs + HS, ...) of each head. */
#pragma unroll
    for (int k = 0; k < HPW; k++) {
        if (lane == 0) {
            sm_ml[warp][k][0] = m[k];
            sm_ml[warp][k][1] = l[k];
        }
#pragma unroll
        for (int i = 0; i < DPL; i++)
            sm_acc[warp][k][lane * DPL + i] = acc[k][i];
    }
    __syncthreads();
    for (int e = (int)threadIdx.x; e < gc * HD; e += DEC_THREADS) {
        const int g = e / HD, d = e % HD, k = g / HS, slot = g % HS, h = h0 + g;
        float M, L, A; /* slices: warps slot, slot + HS, ... */
        dec_merge_slices(&sm_ml[slot][k][0], HS * HPW * 2, &sm_acc[slot][k][d], HS * HPW * HD, TS,
                         &M, &L, &A);
        dec_store(b, out, ws_acc, ws_ml, heads, HD, max_parts, h, d, A, M, L);
    }
}

/* Decode for GQA groups of 4 or more (4 head slots, HPW heads per warp):
 * a warp owns whole heads, so it walks every token of the tile itself.  The
 * kernel above would then spend, per token and head, a 5-step shuffle
 * reduction and two exponentials on one lane's worth of work (measured on an
 * H200: Llama-3-8B at batch 64 x 2048 ran at 24% of HBM against 87% for
 * MHA).  Here each tile is done in two phases per warp:
 *   scores:  lane t computes the whole q.k dot product of token t of the tile
 *            (K rows swizzled in shared memory, q broadcast from shared
 *            memory), then one max and one sum reduction per tile and head;
 *   values:  each lane owns head_dim / 32 dimensions and accumulates the 32
 *            tokens' probabilities (read back from shared memory) times V.
 * Same plan, grid, workspace and partition merge as decode_k. */
template <int HD, int HPW>
__global__ static void __launch_bounds__(DEC_THREADS)
decode_gqa_k(const __half *__restrict__ qkv, const __half *__restrict__ kp,
             const __half *__restrict__ vp, __half *__restrict__ out, const int32_t *seq_idx,
             const int32_t *qstart, const int32_t *ctx_a, const int32_t *bt_off,
             const int32_t *tables, int z0, int64_t width, int heads, int kv_heads, int group,
             int chunks, int bs, int part_len, int max_parts, float scale, float *ws_acc,
             float *ws_ml)
{
    constexpr int HS = DEC_WARPS;  /* head slots: one per warp */
    constexpr int NH = HS * HPW;   /* head capacity of the block */
    constexpr int DPL = HD / 32;   /* dimensions per lane in the value phase */
    constexpr int CPR = HD / 8;    /* 16-byte chunks per K row */
    static_assert(DEC_TILE == 32, "one lane per token of a tile");
    __shared__ __align__(16) __half ks[2][DEC_TILE][HD];
    __shared__ __align__(16) __half vs[2][DEC_TILE][HD];
    __shared__ __align__(16) float qs[NH][HD];              /* scaled q of the block's heads */
    __shared__ float ps[DEC_WARPS][HPW][DEC_TILE];           /* a tile's probabilities */

    dec_block b;
    if (!dec_locate(&b, seq_idx, qstart, ctx_a, bt_off, tables, z0, group, chunks, part_len, NH))
        return;
    const int t_begin = b.t_begin, t_end = b.t_end, kvh = b.kvh, h0 = b.h0, gc = b.gc;
    const int tok = b.tok;
    const int32_t *bt = b.bt;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const size_t row = (size_t)kv_heads * HD;

    const int n_tiles = (t_end - t_begin + DEC_TILE - 1) / DEC_TILE;
    int blk[KV_TILE_EPT(HD)]; /* block numbers of the next tile to issue */
    kv_tile_blocks<HD>(blk, bt, bs, t_begin, t_end);
    kv_issue_tile<HD, HD, DEC_SWZ(HD)>(ks[0], vs[0], kp, vp, blk, bs, row, kvh, t_begin);
    cp_async_commit();
    kv_tile_blocks<HD>(blk, bt, bs, t_begin + DEC_TILE, t_end); /* tile 1's, if any */
    for (int e = (int)threadIdx.x; e < NH * HD; e += DEC_THREADS) {
        const int g = e / HD, d = e % HD;
        qs[g][d] = g < gc ? __half2float(qkv[(size_t)tok * width + (size_t)(h0 + g) * HD + d]) *
                                scale
                          : 0.0f;
    }
    /* this warp's heads: slot warp + HS k, k < HPW (a head past gc is idle) */
    float m[HPW], l[HPW], acc[HPW][DPL];
#pragma unroll
    for (int k = 0; k < HPW; k++) {
        m[k] = -INFINITY;
        l[k] = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++)
            acc[k][i] = 0.0f;
    }
    const int sw = lane & DEC_SWZ(HD); /* this lane's token row swizzle */
    for (int it = 0; it < n_tiles; it++) {
        const int cur = it & 1, t0 = t_begin + it * DEC_TILE;
        if (it + 1 < n_tiles) { /* the other stage was released by the barrier below */
            kv_issue_tile<HD, HD, DEC_SWZ(HD)>(ks[cur ^ 1], vs[cur ^ 1], kp, vp, blk, bs,
                                               row, kvh, t0 + DEC_TILE);
            /* tile it + 2's table entries: in flight while this tile is computed */
            kv_tile_blocks<HD>(blk, bt, bs, t0 + 2 * DEC_TILE, t_end);
        }
        cp_async_commit(); /* possibly empty: keeps the group count uniform */
        cp_async_wait<1>(); /* the current tile has landed (this thread's part) */
        __syncthreads();    /* ... and every thread's part (and qs, at it == 0) */
        const int nt = min(DEC_TILE, t_end - t0);

        /* scores: lane = token of the tile (two partial sums per head: two
         * dependent FMA chains of head_dim / 2 instead of one of head_dim) */
        float sc[HPW], sc2[HPW];
#pragma unroll
        for (int k = 0; k < HPW; k++)
            sc[k] = sc2[k] = 0.0f;
#pragma unroll 4
        for (int c = 0; c < CPR; c++) {
            const uint4 raw = *(const uint4 *)&ks[cur][lane][(c ^ sw) * 8];
            const __half2 *h2 = (const __half2 *)&raw;
            float kf[8];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 f = __half22float2(h2[j]);
                kf[2 * j] = f.x;
                kf[2 * j + 1] = f.y;
            }
#pragma unroll
            for (int k = 0; k < HPW; k++) {
                const float4 qa = *(const float4 *)&qs[warp + HS * k][c * 8];
                const float4 qb = *(const float4 *)&qs[warp + HS * k][c * 8 + 4];
                sc[k] = fmaf(qa.x, kf[0], fmaf(qa.y, kf[1], fmaf(qa.z, kf[2], fmaf(qa.w, kf[3], sc[k]))));
                sc2[k] = fmaf(qb.x, kf[4], fmaf(qb.y, kf[5], fmaf(qb.z, kf[6], fmaf(qb.w, kf[7], sc2[k]))));
            }
        }
#pragma unroll
        for (int k = 0; k < HPW; k++)
            sc[k] += sc2[k];
        /* online softmax, one reduction per tile and head */
#pragma unroll
        for (int k = 0; k < HPW; k++) {
            const float sk = lane < nt ? sc[k] : -INFINITY;
            float tmax = sk;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o));
            const float mx = fmaxf(m[k], tmax); /* finite: nt >= 1 */
            const float pr = lane < nt ? __expf(sk - mx) : 0.0f;
            float tsum = pr;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                tsum += __shfl_xor_sync(0xffffffffu, tsum, o);
            const float corr = __expf(m[k] - mx);
            l[k] = l[k] * corr + tsum;
            m[k] = mx;
            ps[warp][k][lane] = pr;
#pragma unroll
            for (int i = 0; i < DPL; i++)
                acc[k][i] *= corr;
        }
        __syncwarp();
        /* values: lane = dimensions lane * DPL ... */
        for (int t = 0; t < nt; t++) {
            float vf[DPL];
#pragma unroll
            for (int i = 0; i < DPL; i++)
                vf[i] = __half2float(vs[cur][t][lane * DPL + i]);
#pragma unroll
            for (int k = 0; k < HPW; k++) {
                const float pt = ps[warp][k][t];
#pragma unroll
                for (int i = 0; i < DPL; i++)
                    acc[k][i] += pt * vf[i];
            }
        }
        __syncthreads(); /* everyone is done with stage cur (and ps) before reuse */
    }

#pragma unroll
    for (int k = 0; k < HPW; k++) {
        const int g = warp + HS * k, h = h0 + g;
        if (g >= gc)
            continue;
#pragma unroll
        for (int i = 0; i < DPL; i++)
            dec_store(b, out, ws_acc, ws_ml, heads, HD, max_parts, h, lane * DPL + i, acc[k][i],
                      m[k], l[k]);
    }
}

/* Decode for GQA groups of 4 or more on tensor cores (the default; the
 * kernel above runs with KVSIM_CUDA_DECODE=simt).  The block's query heads
 * are the 16 rows of an mma.sync m16n8k16 tile (rows past gc are zero), so
 * q . k of every head and token is one tensor-core product, as in
 * TensorRT-LLM's XQA: per 32-token tile, warp w takes tokens 8w ... 8w + 7
 * (one 8-key n-tile): S = Q K^T (HD / 16 mma), its own online softmax per
 * row (the quad of lanes sharing a row meets through two shuffles), then
 * O += P V, where P's A fragment has those 8 keys in its low half and
 * zeros in its high half (HD / 8 mma).  Each warp keeps (m, l, O) of its
 * token slice in registers; at the end the four slices are merged through
 * shared memory (the stages' space) and stored as decode_k's (dec_store).
 * K/V rows are padded (HD + 8 halves) so that ldmatrix reads them without
 * bank conflicts.  Same plan (but up to 16 heads a block: groups up to 16
 * read each KV head once), grid, workspace and partition merge as
 * decode_k; nh = the block's head capacity (4, 8, 12 or 16). */
template <int HD>
__global__ static void __launch_bounds__(DEC_THREADS, 4) /* the plan's 4 blocks an SM */
decode_mma_k(const __half *__restrict__ qkv, const __half *__restrict__ kp,
             const __half *__restrict__ vp, __half *__restrict__ out, const int32_t *seq_idx,
             const int32_t *qstart, const int32_t *ctx_a, const int32_t *bt_off,
             const int32_t *tables, int z0, int64_t width, int heads, int kv_heads, int group,
             int chunks, int bs, int part_len, int max_parts, float scale, float *ws_acc,
             float *ws_ml, int nh)
{
    constexpr int LH = HD + 8, DT = HD / 8;
    static_assert(DEC_TILE == 8 * DEC_WARPS, "one 8-key n-tile per warp");
    /* [stage][K, V][token][LH]; after the loop, the slices' merge buffer */
    __shared__ __align__(128) __half kvs[2][2][DEC_TILE][LH];
    __shared__ __align__(128) __half qs[16][LH];
    static_assert(sizeof kvs >= (DEC_WARPS * 16 * HD + DEC_WARPS * 16 * 2) * sizeof(float),
                  "the merge buffer fits in the stages");

    dec_block b;
    if (!dec_locate(&b, seq_idx, qstart, ctx_a, bt_off, tables, z0, group, chunks, part_len, nh))
        return;
    const int t_begin = b.t_begin, t_end = b.t_end, kvh = b.kvh, h0 = b.h0, gc = b.gc;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3, lr = lane & 7, lj = lane >> 3;
    const size_t row = (size_t)kv_heads * HD;

    const int n_tiles = (t_end - t_begin + DEC_TILE - 1) / DEC_TILE;
    /* the block numbers of the tile after next are read while a tile is
     * computed (as in decode_gqa_k), so issuing copies never waits on the
     * block table: 65.9% of HBM against 64.6% at 64 x 2048 on Llama-3-8B
     * (H200, run 4; three stages instead of two gave 64.6%) */
    int blk[KV_TILE_EPT(HD)];
    kv_tile_blocks<HD>(blk, b.bt, bs, t_begin, t_end);
    kv_issue_tile<HD, LH, 0>(kvs[0][0], kvs[0][1], kp, vp, blk, bs, row, kvh, t_begin);
    cp_async_commit();
    kv_tile_blocks<HD>(blk, b.bt, bs, t_begin + DEC_TILE, t_end); /* tile 1's, if any */
    for (int e = (int)threadIdx.x; e < 16 * (HD / 8); e += DEC_THREADS) { /* Q rows, zero past gc */
        const int r = e / (HD / 8), part = e % (HD / 8);
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < gc)
            v = *(const uint4 *)(qkv + (size_t)b.tok * width + (size_t)(h0 + r) * HD + part * 8);
        *(uint4 *)&qs[r][part * 8] = v;
    }
    /* Q's A fragments are read from qs at each tile (ldmatrix; lane 8 j + r:
     * row 8 (j & 1) + r, dims 8 (j >> 1) on): held in registers they would
     * cost 32 more at head_dim 128 and spill at 4 blocks an SM */
    const __half *qr = &qs[(lj & 1) * 8 + lr][(lj >> 1) * 8];
    float o[DT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
        o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;

    for (int it = 0; it < n_tiles; it++) {
        const int cur = it & 1, t0 = t_begin + it * DEC_TILE;
        if (it + 1 < n_tiles) { /* the other stage was released by the barrier below */
            kv_issue_tile<HD, LH, 0>(kvs[cur ^ 1][0], kvs[cur ^ 1][1], kp, vp, blk, bs, row, kvh,
                                     t0 + DEC_TILE);
            /* tile it + 2's table entries: in flight while this tile is computed */
            kv_tile_blocks<HD>(blk, b.bt, bs, t0 + 2 * DEC_TILE, t_end);
        }
        cp_async_commit(); /* possibly empty: keeps the group count uniform */
        cp_async_wait<1>(); /* the current tile has landed (this thread's part) */
        __syncthreads();    /* ... and every thread's part (and qs, at it == 0) */
        const int k0 = t0 + warp * 8; /* this warp's 8 tokens */
        if (k0 < t_end) { /* else they are past the partition (zero-filled) */
            /* S (16 heads x 8 tokens): K's B fragments, two 16-dim steps per
             * ldmatrix (lane 8 j + r: token r, dims 8 j on) */
            float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const __half *kr = &kvs[cur][0][warp * 8 + lr][lj * 8];
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk += 2) {
                uint32_t b4[4], qa[4], qb[4];
                ldsm_x4(b4, kr + kk * 16);
                ldsm_x4(qa, qr + kk * 16);
                ldsm_x4(qb, qr + kk * 16 + 16);
                const uint32_t b0[2] = {b4[0], b4[1]}, b1[2] = {b4[2], b4[3]};
                mma_16816(sc, qa, b0);
                mma_16816(sc, qb, b1);
            }
            float corr[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float x0 = k0 + 2 * t < t_end ? sc[2 * r] * scale : -INFINITY;
                float x1 = k0 + 2 * t + 1 < t_end ? sc[2 * r + 1] * scale : -INFINITY;
                float mx = fmaxf(x0, x1);
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mn = fmaxf(m[r], mx); /* finite: token k0 < t_end */
                corr[r] = __expf(m[r] - mn);
                m[r] = mn;
                sc[2 * r] = __expf(x0 - mn);
                sc[2 * r + 1] = __expf(x1 - mn);
            }
            const __half2 plo = __floats2half2_rn(sc[0], sc[1]);
            const __half2 phi = __floats2half2_rn(sc[2], sc[3]);
            const uint32_t pa[4] = {h2_bits(plo), h2_bits(phi), 0u, 0u}; /* keys 8-15: none */
            float sum[2] = {__low2float(plo) + __high2float(plo),
                            __low2float(phi) + __high2float(phi)};
#pragma unroll
            for (int r = 0; r < 2; r++) {
                sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
                sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
                l[r] = l[r] * corr[r] + sum[r];
            }
            /* O += P V: V's B fragments, transposed, for 4 dim n-tiles per
             * ldmatrix (lane 8 j + r: token r, dims 8 j on of the four) */
            const __half *vr = &kvs[cur][1][warp * 8 + lr][lj * 8];
#pragma unroll
            for (int dt = 0; dt < DT; dt += 4) {
                uint32_t b4[4];
                ldsm_x4_trans(b4, vr + dt * 8);
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    o[dt + j][0] *= corr[0];
                    o[dt + j][1] *= corr[0];
                    o[dt + j][2] *= corr[1];
                    o[dt + j][3] *= corr[1];
                    const uint32_t bj[2] = {b4[j], 0u}; /* keys 8-15 of the step: P is 0 */
                    mma_16816(o[dt + j], pa, bj);
                }
            }
        }
        __syncthreads(); /* everyone is done with stage cur before it is refilled */
    }

    /* merge the four token slices of each head through the stages' space */
    float *acc_s = (float *)&kvs[0][0][0][0];        /* [warp][16][HD] */
    float *ml_s = acc_s + DEC_WARPS * 16 * HD;       /* [warp][16][2] */
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int hr = g + 8 * r;
        if (t == 0) {
            ml_s[(warp * 16 + hr) * 2] = m[r];
            ml_s[(warp * 16 + hr) * 2 + 1] = l[r];
        }
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            acc_s[(warp * 16 + hr) * HD + dt * 8 + 2 * t] = o[dt][2 * r];
            acc_s[(warp * 16 + hr) * HD + dt * 8 + 2 * t + 1] = o[dt][2 * r + 1];
        }
    }
    __syncthreads();
    for (int e = (int)threadIdx.x; e < gc * HD; e += DEC_THREADS) {
        const int hr = e / HD, d = e % HD;
        float M, L, A; /* slices: the four warps */
        dec_merge_slices(ml_s + hr * 2, 16 * 2, acc_s + hr * HD + d, 16 * HD, DEC_WARPS, &M, &L,
                         &A);
        dec_store(b, out, ws_acc, ws_ml, heads, HD, max_parts, h0 + hr, d, A, M, L);
    }
}

/* Merge a sequence's partitions: one block per (decode sequence, head). */
__global__ static void decode_reduce_k(const float *ws_acc, const float *ws_ml, __half *out,
                                       const int32_t *seq_idx, const int32_t *qstart,
                                       const int32_t *ctx_a, int heads, int hd, int part_len,
                                       int max_parts, int z0)
{
    const int si = (int)blockIdx.x + z0, h = (int)blockIdx.y, s = seq_idx[si];
    const int np = (ctx_a[s] + part_len - 1) / part_len;
    const size_t b = ((size_t)si * heads + h) * max_parts;
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
    int hs, hpw;      /* head slots, heads per warp */
    int chunks;       /* blocks per KV head (groups above 8 heads) */
    int part_len;     /* tokens per partition, a multiple of DEC_TILE */
    int max_parts;    /* partitions of the longest sequence */
} decode_plan;

static int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* total_ctx: sum of the decode contexts (the load to spread); max_ctx: the
 * longest.  Blocks: n x kv_heads x chunks per partition index; the plan aims
 * at 4 blocks per SM (resident: 4 x 128 threads, ~36 KiB shared each). */
static decode_plan plan_decode(const cuda_state *st, int64_t total_ctx,
                               int64_t max_ctx, int64_t heads, int64_t kv_heads, int max_heads)
{
    decode_plan pl;
    const int64_t group = heads / kv_heads, nh = group < max_heads ? group : max_heads;
    pl.hs = nh >= 4 ? 4 : nh >= 2 ? 2 : 1;
    pl.hpw = (int)ceil_div64(nh, pl.hs); /* 1 or 2 (up to 4: decode_mma_k's 16 rows) */
    pl.chunks = (int)ceil_div64(group, (int64_t)pl.hs * pl.hpw);
    const int64_t target = 4 * (int64_t)(st ? st->sm_count : 132);
    const int64_t per_tok = kv_heads * pl.chunks; /* blocks a token's partition spans */
    int64_t len = ceil_div64(total_ctx * per_tok, target);
    if (len < PART_MIN)
        len = PART_MIN;
    if (len < ceil_div64(max_ctx, PART_MAX_SPLIT))
        len = ceil_div64(max_ctx, PART_MAX_SPLIT);
    len = ceil_div64(len, DEC_TILE) * DEC_TILE;
    if (len >= max_ctx) /* one partition for everyone: no merge pass */
        len = ceil_div64(max_ctx > 0 ? max_ctx : 1, DEC_TILE) * DEC_TILE;
    /* the same number of partitions, of equal length: 2048 tokens at a
     * length of 2016 would be one block of 63 tiles and one of 1 */
    const int64_t parts = ceil_div64(max_ctx > 0 ? max_ctx : 1, len);
    len = ceil_div64(ceil_div64(max_ctx > 0 ? max_ctx : 1, parts), DEC_TILE) * DEC_TILE;
    pl.part_len = (int)len;
    pl.max_parts = (int)ceil_div64(max_ctx > 0 ? max_ctx : 1, len);
    return pl;
}

/* Workspace of a decode call: the partitions' accumulators and (max, sum). */
static size_t decode_ws_bytes(const decode_plan *pl, int64_t n, int64_t heads, int64_t hd)
{
    if (pl->max_parts <= 1)
        return 0;
    return (size_t)n * heads * pl->max_parts * (hd + 2) * sizeof(float);
}

int cu_decode_attention(void *self, const kernels_attn_args *a, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    const int hd = (int)a->head_dim;
    if (hd != 32 && hd != 64 && hd != 128)
        return cu_errf(err, KVS_EINVAL, "cuda decode attention: head_dim %d not supported "
                                        "(32, 64 or 128)", hd);
    int64_t total = 0;
    for (int64_t i = 0; i < a->n; i++)
        total += a->host_seq_ctx[a->host_seq_idx[i]];
    const char *ek = getenv("KVSIM_CUDA_DECODE"); /* "simt": decode_gqa_k for groups >= 4 */
    const bool simt = ek && !strcmp(ek, "simt");
    /* decode_mma_k takes up to 16 heads a block (its tile's rows): one
     * block, one read of the KV head, for groups up to 16 */
    decode_plan pl = plan_decode(st, total, a->max_ctx, a->heads, a->kv_heads,
                                 simt ? DEC_MAX_HEADS : DEC_MMA_MAX_HEADS);
    if (a->kv_heads * pl.chunks > 65535 || a->heads > 65535)
        return cu_errf(err, KVS_EINVAL, "cuda decode attention: %lld heads exceed the grid",
                       (long long)a->heads);
    float *ws_acc = NULL, *ws_ml = NULL;
    if (pl.max_parts > 1) {
        const size_t cells = (size_t)a->n * a->heads * pl.max_parts;
        void *ws;
        int rc = cu_scratch(st, decode_ws_bytes(&pl, a->n, a->heads, hd), &ws, err);
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
        const int64_t nz = a->n - z0 < 65535 ? a->n - z0 : 65535;
        dim3 grid((unsigned)pl.max_parts, (unsigned)(a->kv_heads * pl.chunks), (unsigned)nz);
#define DEC_CASE(HD_, HS_, HPW_)                                                              \
    else if (hd == HD_ && pl.hs == HS_ && pl.hpw == HPW_)                                     \
        decode_k<HD_, HS_, HPW_><<<grid, DEC_THREADS, 0, st->stream>>>(                       \
            qkv, kp, vp, out, a->seq_idx, a->seq_qstart, a->seq_ctx, a->seq_bt,               \
            a->block_tables, (int)z0, width, (int)a->heads, (int)a->kv_heads,                 \
            (int)(a->heads / a->kv_heads), pl.chunks, (int)a->block_size, pl.part_len,        \
            pl.max_parts, a->scale, ws_acc, ws_ml);
#define DEC_GQA(HD_, HPW_)                                                                    \
    else if (hd == HD_ && pl.hs == DEC_WARPS && pl.hpw == HPW_ && simt)                       \
        decode_gqa_k<HD_, HPW_><<<grid, DEC_THREADS, 0, st->stream>>>(                        \
            qkv, kp, vp, out, a->seq_idx, a->seq_qstart, a->seq_ctx, a->seq_bt,               \
            a->block_tables, (int)z0, width, (int)a->heads, (int)a->kv_heads,                 \
            (int)(a->heads / a->kv_heads), pl.chunks, (int)a->block_size, pl.part_len,        \
            pl.max_parts, a->scale, ws_acc, ws_ml);
#define DEC_MMA(HD_)                                                                          \
    else if (hd == HD_ && pl.hs == DEC_WARPS)                                                 \
        decode_mma_k<HD_><<<grid, DEC_THREADS, 0, st->stream>>>(                              \
            qkv, kp, vp, out, a->seq_idx, a->seq_qstart, a->seq_ctx, a->seq_bt,               \
            a->block_tables, (int)z0, width, (int)a->heads, (int)a->kv_heads,                 \
            (int)(a->heads / a->kv_heads), pl.chunks, (int)a->block_size, pl.part_len,        \
            pl.max_parts, a->scale, ws_acc, ws_ml, pl.hs * pl.hpw);
#define DEC_HD(HD_) DEC_CASE(HD_, 1, 1) DEC_CASE(HD_, 2, 1) DEC_CASE(HD_, 2, 2)               \
                    DEC_GQA(HD_, 1) DEC_GQA(HD_, 2) DEC_MMA(HD_)
        if (0) {
        }
        DEC_HD(32) DEC_HD(64) DEC_HD(128)
        else return cu_errf(err, KVS_EINVAL, "cuda decode attention: no kernel for plan "
                                             "hs=%d hpw=%d", pl.hs, pl.hpw);
#undef DEC_HD
#undef DEC_MMA
#undef DEC_GQA
#undef DEC_CASE
        int rc = cu_check_launch("decode attention kernel", err);
        if (rc == KVS_OK && pl.max_parts > 1) {
            decode_reduce_k<<<dim3((unsigned)nz, (unsigned)a->heads), 128, 0, st->stream>>>(
                ws_acc, ws_ml, out, a->seq_idx, a->seq_qstart, a->seq_ctx, (int)a->heads, hd,
                pl.part_len, pl.max_parts, (int)z0);
            rc = cu_check_launch("decode reduce kernel", err);
        }
        if (rc != KVS_OK)
            return rc;
    }
    return KVS_OK;
}

/* ------------------------------------------------------------ planning */

int64_t cu_attn_workspace_bytes(void *self, int64_t n_decode, int64_t max_ctx,
                                int64_t max_prefill_q, int64_t heads, int64_t kv_heads,
                                int64_t head_dim)
{
    (void)max_prefill_q; /* the prefill kernel needs no workspace */
    if (n_decode <= 0)
        return 0;
    /* The worst case over batches of n_decode contexts <= max_ctx: the most
     * partitions per sequence come with the shortest partitions, i.e. the
     * least total load (PART_MIN or max_ctx / PART_MAX_SPLIT). */
    const cuda_state *st = (const cuda_state *)self;
    /* (the worst case does not depend on the heads a block takes) */
    decode_plan pl = plan_decode(st, 1, max_ctx > 0 ? max_ctx : 1, heads, kv_heads, DEC_MAX_HEADS);
    return (int64_t)decode_ws_bytes(&pl, n_decode, heads, head_dim);
}
