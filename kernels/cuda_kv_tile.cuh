/* cuda_kv_tile.cuh — copying a tile of KV_TILE tokens of one KV head from
 * the paged K and V pools into shared memory with cp.async, as the decode
 * and prefill attention kernels do (CUDA C++; include it after
 * cuda_internal.cuh, or after the host emulation's twin of it, which
 * supplies cp_async16).
 *
 * KV_TILE_THREADS threads share a tile: thread x copies the 16-byte chunks
 * e = x + k * KV_TILE_THREADS, k < KV_TILE_EPT(HD), i.e. chunk e % (HD / 8)
 * of token e / (HD / 8).  A copy is two steps: kv_tile_blocks reads the
 * block numbers of the thread's tokens from the block table, kv_issue_tile
 * issues the copies.  Reading the numbers one tile ahead keeps the issue
 * from waiting on the block table (decode_gqa_k, decode_mma_k);
 * kv_load_tile does both at once (the prefill kernels), kv_load_tile_rolled
 * the same in a rolled loop (decode_k, where it measured faster).  Tokens
 * at or past the end are zero-filled (nothing read).  Rows are LD halves
 * apart in shared memory; K's chunk c of token t can be stored
 * at c ^ (t & SWZ) (SWZ + 1 a power of two <= HD / 8, 0 = unswizzled). */
#ifndef CUDA_KV_TILE_CUH
#define CUDA_KV_TILE_CUH

#define KV_TILE 32          /* tokens per tile */
#define KV_TILE_THREADS 128 /* threads that copy a tile */
#define KV_TILE_EPT(HD) (KV_TILE * ((HD) / 8) / KV_TILE_THREADS) /* chunks per thread */

/* Block numbers of this thread's tokens of the tile at t0 (-1 at or past
 * t_end); bt: the sequence's block table, bs tokens per block. */
template <int HD>
__device__ static inline void kv_tile_blocks(int (&blk)[KV_TILE_EPT(HD)],
                                             const int32_t *__restrict__ bt, int bs, int t0,
                                             int t_end)
{
    static_assert(KV_TILE_EPT(HD) >= 1 && KV_TILE * (HD / 8) % KV_TILE_THREADS == 0,
                  "whole 16-byte chunks per thread");
    constexpr int CPR = HD / 8; /* 16-byte chunks per token row */
#pragma unroll
    for (int k = 0; k < KV_TILE_EPT(HD); k++) {
        const int tok = t0 + ((int)threadIdx.x + k * KV_TILE_THREADS) / CPR;
        blk[k] = tok < t_end ? bt[tok / bs] : -1;
    }
}

/* Copy the tile at t0 whose block numbers kv_tile_blocks read into ks / vs
 * (rows LD halves apart); row: one token's K (or V) elements in the pool,
 * all KV heads; kvh: the head copied. */
template <int HD, int LD, int SWZ>
__device__ static inline void kv_issue_tile(__half (*ks)[LD], __half (*vs)[LD],
                                            const __half *__restrict__ kp,
                                            const __half *__restrict__ vp,
                                            const int (&blk)[KV_TILE_EPT(HD)], int bs,
                                            size_t row, int kvh, int t0)
{
    constexpr int CPR = HD / 8;
    static_assert(SWZ >= 0 && SWZ < CPR && (SWZ & (SWZ + 1)) == 0, "swizzle mask");
#pragma unroll
    for (int k = 0; k < KV_TILE_EPT(HD); k++) {
        const int e = (int)threadIdx.x + k * KV_TILE_THREADS, t = e / CPR, part = e % CPR;
        const int tok = t0 + t;
        const bool ok = blk[k] >= 0;
        const size_t off = ok ? ((size_t)blk[k] * bs + tok % bs) * row + (size_t)kvh * HD + part * 8
                              : 0;
        cp_async16(&ks[t][(part ^ (t & SWZ)) * 8], kp + off, ok);
        cp_async16(&vs[t][part * 8], vp + off, ok);
    }
}

/* kv_tile_blocks then kv_issue_tile: the copies wait on the table reads. */
template <int HD, int LD, int SWZ>
__device__ static inline void kv_load_tile(__half (*ks)[LD], __half (*vs)[LD],
                                           const __half *__restrict__ kp,
                                           const __half *__restrict__ vp,
                                           const int32_t *__restrict__ bt, int bs, size_t row,
                                           int kvh, int t0, int t_end)
{
    int blk[KV_TILE_EPT(HD)];
    kv_tile_blocks<HD>(blk, bt, bs, t0, t_end);
    kv_issue_tile<HD, LD, SWZ>(ks, vs, kp, vp, blk, bs, row, kvh, t0);
}

/* The same copy as kv_load_tile, but each chunk's table read and its two
 * copies one after another in a loop the compiler keeps rolled.  decode_k
 * (MHA) reads 85.4% of an H200's HBM at 64 x 2048 with it and 80.2% with
 * kv_load_tile (the same machine and run, builds before and after 6e8a972,
 * which gave decode_k kv_load_tile; bench/gpu/h200-2026-12-04/run4).  The
 * prefill kernels keep kv_load_tile, with which they were measured. */
template <int HD, int LD>
__device__ static inline void kv_load_tile_rolled(__half (*ks)[LD], __half (*vs)[LD],
                                                  const __half *__restrict__ kp,
                                                  const __half *__restrict__ vp,
                                                  const int32_t *__restrict__ bt, int bs,
                                                  size_t row, int kvh, int t0, int t_end)
{
    constexpr int CPR = HD / 8; /* 16-byte chunks per token row */
    for (int e = (int)threadIdx.x; e < KV_TILE * CPR; e += KV_TILE_THREADS) {
        const int t = e / CPR, part = e % CPR, tok = t0 + t;
        const bool ok = tok < t_end;
        size_t off = 0;
        if (ok)
            off = ((size_t)bt[tok / bs] * bs + tok % bs) * row + (size_t)kvh * HD + part * 8;
        cp_async16(&ks[t][part * 8], kp + off, ok);
        cp_async16(&vs[t][part * 8], vp + off, ok);
    }
}

#endif
