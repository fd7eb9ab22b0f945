/* cuda_emu.h — just enough of the CUDA runtime, fp16 and WMMA to run
 * kvsim's attention kernels (kernels/cuda_decode.cu, cuda_prefill.cu) on
 * the host, one block at a time with one std::thread per CUDA thread, so
 * their indexing, barriers, shuffles, cp.async pipeline and tensor-core
 * tiles can be checked without a GPU (tests/check_cuda_emu.sh).  Semantics kept strict where a
 * kernel could get them wrong:
 *   - __syncthreads / __syncwarp are real barriers of the block / warp;
 *   - __shfl_xor_sync exchanges through a per-warp buffer between barriers;
 *   - cp.async copies are queued per thread and land only when a
 *     cp.async.wait_group lets them (the latest N groups stay in flight), so
 *     reading a stage before its wait sees stale data;
 *   - a WMMA store is done by lane 0 alone: other lanes see it only after a
 *     __syncwarp, as on hardware (where each lane writes its own part);
 *   - ldmatrix.x4 (emu_ldsm_x4, plain and .trans) is a warp-wide exchange
 *     too: lane 8 j + r gives row r of matrix j, and each lane gets the
 *     elements the PTX ISA says it gets;
 *   - mma.sync.m16n8k16 (emu_mma_16816) is a warp-wide exchange: each lane
 *     holds only its own fragment registers, in the PTX ISA's layout, and
 *     gets its part of D from the others' A and B, so a kernel that puts a
 *     value in the wrong lane or register computes a wrong product.
 * Not a general emulator: no atomics, no streams, blocks run one by one. */
#ifndef CUDA_EMU_H
#define CUDA_EMU_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <type_traits>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint4 {
    uint32_t x, y, z, w;
};
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    return uint4{a, b, c, d};
}
struct float2 {
    float x, y;
};
struct float4 {
    float x, y, z, w;
};

/* ------------------------------------------------------------ fp16 */
struct __half {
    uint16_t x;
};
static inline float __half2float(__half h)
{
    uint32_t s = (uint32_t)(h.x >> 15) << 31, e = (h.x >> 10) & 31, m = h.x & 1023, f;
    if (e == 0) {
        if (m == 0) {
            f = s;
        } else { /* subnormal */
            int k = -1;
            do {
                k++;
                m <<= 1;
            } while (!(m & 1024));
            f = s | (uint32_t)(127 - 15 - k) << 23 | (m & 1023) << 13;
        }
    } else if (e == 31) {
        f = s | 0x7f800000u | m << 13;
    } else {
        f = s | (e - 15 + 127) << 23 | m << 13;
    }
    float r;
    memcpy(&r, &f, 4);
    return r;
}
static inline __half __float2half(float v) /* round to nearest even */
{
    uint32_t f;
    memcpy(&f, &v, 4);
    uint32_t s = (f >> 16) & 0x8000u, a = f & 0x7fffffffu;
    __half h;
    if (a >= 0x7f800000u) { /* inf / nan */
        h.x = (uint16_t)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
        return h;
    }
    if (a >= 0x477ff000u) { /* rounds to >= 65536: inf */
        h.x = (uint16_t)(s | 0x7c00u);
        return h;
    }
    if (a < 0x38800000u) { /* below the smallest normal: subnormal or 0 */
        float av;
        memcpy(&av, &a, 4);
        float q = av * 16777216.0f; /* / 2^-24 */
        uint32_t m = (uint32_t)std::nearbyint(q);
        h.x = (uint16_t)(s | m);
        return h;
    }
    uint32_t e = (a >> 23) - 127 + 15, m = a & 0x7fffffu;
    uint32_t r = (e << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1)))
        r++;
    h.x = (uint16_t)(s | r);
    return h;
}
static inline __half __float2half_rn(float v) { return __float2half(v); }
struct __half2 {
    __half x, y;
};
static inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
static inline __half2 __floats2half2_rn(float a, float b)
{
    return __half2{__float2half(a), __float2half(b)};
}
static inline float __low2float(__half2 h) { return __half2float(h.x); }
static inline float __high2float(__half2 h) { return __half2float(h.y); }
#define __expf emu_expf
static inline float emu_expf(float x) { return expf(x); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

/* ------------------------------------------------------- threads */
namespace emu {
struct block_ctx {
    pthread_barrier_t block_bar;
    pthread_barrier_t warp_bar[32];
    float shfl[32][32];
    uint32_t mma_a[32][32][4], mma_b[32][32][2]; /* [warp][lane]: fragments in flight */
    const uint16_t *ldsm[32][32];                /* [warp][lane]: ldmatrix row addresses */
    unsigned char *dyn_smem;
};
extern block_ctx *cur_block;
struct pending_copy {
    void *dst;
    const void *src;
    bool valid;
};
struct thread_ctx {
    unsigned tid;
    std::vector<std::vector<pending_copy>> groups; /* committed, oldest first */
    std::vector<pending_copy> open;                /* not yet committed */
};
extern thread_local thread_ctx *cur_thread;
void launch(dim3 grid, dim3 block, size_t smem, const std::function<void()> &kernel);
} // namespace emu

extern thread_local dim3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

static inline void __syncthreads() { pthread_barrier_wait(&emu::cur_block->block_bar); }
static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    (void)mask;
    pthread_barrier_wait(&emu::cur_block->warp_bar[threadIdx.x / 32]);
}
static inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask, int width = 32)
{
    (void)mask;
    const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    emu::cur_block->shfl[w][lane] = v;
    __syncwarp();
    unsigned src = lane ^ (unsigned)lane_mask;
    if (src / (unsigned)width != lane / (unsigned)width) /* outside the segment: own value */
        src = lane;
    float r = emu::cur_block->shfl[w][src];
    __syncwarp();
    return r;
}
template <class T> static inline T __ldg(const T *p) { return *p; }

/* The fp16 element of a packed pair (x in the low half, y in the high). */
static inline float emu_h16(uint32_t v, int hi)
{
    return __half2float(__half{(uint16_t)(hi ? v >> 16 : v & 0xffffu)});
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane 8 j + r gives the
 * address of row r (8 contiguous fp16) of 8 x 8 matrix j; lane i = 4 g + t
 * gets in r[j] elements (g, 2t) and (g, 2t + 1) of matrix j, or with .trans
 * (2t, g) and (2t + 1, g) (the first in the low half). */
static inline void emu_ldsm_x4(uint32_t (&r)[4], const void *row, bool trans)
{
    const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    auto *ctx = emu::cur_block;
    ctx->ldsm[w][lane] = (const uint16_t *)row;
    __syncwarp();
    const int g = (int)lane >> 2, t = (int)lane & 3;
    for (int j = 0; j < 4; j++) {
        uint16_t lo, hi;
        if (trans) {
            lo = ctx->ldsm[w][8 * j + 2 * t][g];
            hi = ctx->ldsm[w][8 * j + 2 * t + 1][g];
        } else {
            lo = ctx->ldsm[w][8 * j + g][2 * t];
            hi = ctx->ldsm[w][8 * j + g][2 * t + 1];
        }
        r[j] = (uint32_t)lo | (uint32_t)hi << 16;
    }
    __syncwarp();
}

/* mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, D = A B + D, as the
 * PTX ISA lays the fragments out over the warp (lane = 4 g + t):
 *   A 16 x 16: a[0] = (g, 2t..2t+1), a[1] = (g + 8, 2t..), a[2] = (g, 2t + 8..),
 *              a[3] = (g + 8, 2t + 8..), each a pair of fp16 (lower column low);
 *   B 16 x 8:  b[0] = (k = 2t..2t+1, n = g), b[1] = (k = 2t + 8.., n = g);
 *   D 16 x 8:  d[0], d[1] = (g, 2t), (g, 2t + 1); d[2], d[3] = (g + 8, 2t), (g + 8, 2t + 1).
 * Every lane publishes its A and B, the warp meets, each lane computes its
 * four elements of D from the others' registers, and the warp meets again
 * before the buffers are reused. */
static inline void emu_mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    auto *ctx = emu::cur_block;
    memcpy(ctx->mma_a[w][lane], a, sizeof a);
    memcpy(ctx->mma_b[w][lane], b, sizeof b);
    __syncwarp();
    const int g = (int)lane >> 2, t = (int)lane & 3;
    for (int i = 0; i < 4; i++) {
        const int r = g + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
        float acc = d[i];
        for (int k = 0; k < 16; k++) {
            /* A(r, k): lane 4 (r % 8) + (k % 8) / 2, register (r >= 8) + 2 (k >= 8) */
            const uint32_t av = ctx->mma_a[w][4 * (r % 8) + (k % 8) / 2][(r >= 8) + 2 * (k >= 8)];
            /* B(k, n): lane 4 n + (k % 8) / 2, register k >= 8 */
            const uint32_t bv = ctx->mma_b[w][4 * n + (k % 8) / 2][k >= 8];
            acc += emu_h16(av, k & 1) * emu_h16(bv, k & 1);
        }
        d[i] = acc;
    }
    __syncwarp();
}

/* cp.async: queue, commit, wait (see the header comment) */
static inline void emu_cp_async16(void *smem, const void *gmem, bool valid)
{
    emu::cur_thread->open.push_back({smem, gmem, valid});
}
static inline void emu_cp_commit()
{
    emu::cur_thread->groups.push_back(emu::cur_thread->open);
    emu::cur_thread->open.clear();
}
static inline void emu_cp_wait(int n)
{
    auto &g = emu::cur_thread->groups;
    while ((int)g.size() > n) {
        for (auto &c : g.front()) {
            if (c.valid)
                memcpy(c.dst, c.src, 16);
            else
                memset(c.dst, 0, 16);
        }
        g.erase(g.begin());
    }
}

/* ------------------------------------------------------- runtime */
typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void *cublasHandle_t;
typedef void *cudaEvent_t;
typedef int cublasStatus_t;
#define cudaSuccess 0
#define cudaFuncAttributeMaxDynamicSharedMemorySize 8
template <class F> static inline cudaError_t cudaFuncSetAttribute(F, int, int) { return 0; }
static inline cudaError_t cudaGetLastError() { return 0; }
static inline const char *cudaGetErrorString(cudaError_t) { return "emulated"; }

/* ------------------------------------------------------- WMMA */
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
/* every lane holds the whole 16 x 16 tile, element (r, c) at x[16 r + c] */
template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    T x[256];
};
template <class Use, class T, class L>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ldm)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) /* matrix_a: (row r, col c); matrix_b: (k = r, n = c) */
            f.x[16 * r + c] = std::is_same<L, row_major>::value ? p[r * ldm + c] : p[c * ldm + r];
}
static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                                    unsigned ldm, layout_t l)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.x[16 * r + c] = l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                                     unsigned ldm, layout_t l)
{
    if (threadIdx.x % 32 != 0)
        return; /* lane 0 writes for the warp: the others must __syncwarp to see it */
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[16 * r + c];
}
static inline void fill_fragment(fragment<accumulator, 16, 16, 16, float> &f, float v)
{
    for (int i = 0; i < 256; i++)
        f.x[i] = v;
}
template <class LA, class LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                            const fragment<matrix_a, 16, 16, 16, __half, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, __half, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c)
{
    float t[256];
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) {
            float s = c.x[16 * r + n];
            for (int k = 0; k < 16; k++)
                s += __half2float(a.x[16 * r + k]) * __half2float(b.x[16 * k + n]);
            t[16 * r + n] = s;
        }
    memcpy(d.x, t, sizeof t);
}
} // namespace wmma
} // namespace nvcuda

#endif
