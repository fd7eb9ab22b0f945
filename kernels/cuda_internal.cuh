/* cuda_internal.cuh — state and launchers shared by the CUDA backend's .cu
 * files (internal to kernels/; CUDA C++ only).  Every launcher enqueues on
 * the backend's stream, checks the launch, and returns a kvs_status with the
 * CUDA error string in err. */
#ifndef CUDA_INTERNAL_CUH
#define CUDA_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

extern "C" {
#include "kernels.h"
}

typedef struct cuda_state {
    int device;             /* CUDA ordinal (0) */
    int sm_count;           /* streaming multiprocessors */
    int cc_major, cc_minor; /* compute capability */
    int prefill_ready;      /* prefill kernels opted into large shared memory */
    cudaStream_t stream;    /* every op is enqueued here */
    cublasHandle_t blas;    /* bound to stream */
    cudaEvent_t ev_start, ev_stop; /* timer */
    void *scratch;          /* attention workspace, grown on demand */
    size_t scratch_bytes;   /* bytes in scratch */
    __half *stage;          /* host staging for fp32 <-> fp16, CU_STAGE halves */
} cuda_state;

#define CU_STAGE ((int64_t)1 << 20)
#define CU_THREADS 256

/* Fill err with "<what>: <msg>" and return status (no kvsim_lib calls from
 * CUDA objects, so the static-library link order never matters). */
int cu_errf(kvs_err *err, int status, const char *fmt, ...);
int cu_check(cudaError_t e, const char *what, kvs_err *err);
int cu_check_blas(cublasStatus_t s, const char *what, kvs_err *err);
/* Check the last kernel launch. */
int cu_check_launch(const char *what, kvs_err *err);
/* Workspace of at least `bytes`: grows it (a cudaFree + cudaMalloc, which
 * synchronise the device) only when a call needs more than was reserved by
 * kernels_reserve_workspace; a failed allocation is reported as one (and
 * cleared, so no later launch is blamed for it). */
int cu_scratch(cuda_state *st, size_t bytes, void **out, kvs_err *err);

/* cp.async (sm_80+): 16-byte copies from global to shared memory that land
 * at a later wait, so a tile's loads can fly while the previous tile is
 * computed; plain loads on older parts.  (tests/emu/cuda_internal_emu.h has
 * their host emulation.) */

__device__ static inline void cp_async16(void *smem, const void *gmem, bool valid)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int n = valid ? 16 : 0; /* src-size 0: zero-fill, nothing read */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
#else
    *(uint4 *)smem = valid ? *(const uint4 *)gmem : make_uint4(0, 0, 0, 0);
#endif
}

__device__ static inline void cp_async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* Wait until at most N committed groups are still in flight. */
template <int N> __device__ static inline void cp_async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (sm_80+; the backend
 * refuses older parts): d += a b for one warp, fragments in the PTX ISA's
 * layout (lane = 4 g + t): A 16 x 16 in a[0] = (g, 2t..2t+1),
 * a[1] = (g + 8, 2t..), a[2] = (g, 2t + 8..), a[3] = (g + 8, 2t + 8..); B 16 x 8
 * in b[0] = (k = 2t..2t+1, n = g), b[1] = (k = 2t + 8.., n = g); D 16 x 8 in
 * d[0], d[1] = (g, 2t), (g, 2t + 1), d[2], d[3] = (g + 8, ...).  Pairs of fp16
 * hold the lower column (or k) in the low half.  (Emulated in
 * tests/emu/cuda_internal_emu.h.) */
__device__ static inline void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2])
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane 8 j + r passes
 * the address of row r (8 contiguous fp16, 16-byte aligned) of 8 x 8
 * matrix j; lane 4 g + t receives in r[j] elements (g, 2t), (g, 2t + 1) of
 * matrix j, or with .trans (2t, g), (2t + 1, g).  (Emulated in
 * tests/emu/cuda_internal_emu.h.) */
__device__ static inline void ldsm_x4(uint32_t (&r)[4], const __half *row)
{
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ static inline void ldsm_x4_trans(uint32_t (&r)[4], const __half *row)
{
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* A pair of fp16 as the 32 bits a fragment register holds. */
__device__ static inline uint32_t h2_bits(__half2 h) { return *(uint32_t *)&h; }

/* cuda_elementwise.cu */
int cu_rmsnorm(void *self, const void *x, const void *w, void *out, int64_t rows,
               int64_t dim, float eps, kvs_err *err);
int cu_rope(void *self, void *qkv, const int32_t *pos, int64_t tokens, int64_t heads,
            int64_t kv_heads, int64_t head_dim, float theta, kvs_err *err);
int cu_kv_append(void *self, const void *qkv, const int32_t *slots, int64_t tokens,
                 int64_t heads, int64_t kv_heads, int64_t head_dim, void *k_pool,
                 void *v_pool, kvs_err *err);
int cu_swiglu(void *self, const void *gu, void *out, int64_t rows, int64_t inter,
              kvs_err *err);
int cu_gather_rows(void *self, const void *x, const int32_t *idx, void *out, int64_t n,
                   int64_t dim, kvs_err *err);

/* cuda_decode.cu (decode attention and the workspace), cuda_prefill.cu */
int cu_decode_attention(void *self, const kernels_attn_args *a, kvs_err *err);
int cu_prefill_attention(void *self, const kernels_attn_args *a, kvs_err *err);
int64_t cu_attn_workspace_bytes(void *self, int64_t n_decode, int64_t max_ctx,
                                int64_t max_prefill_q, int64_t heads, int64_t kv_heads,
                                int64_t head_dim);

#endif
