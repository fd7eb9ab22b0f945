/* cuda_internal_emu.h — kernels/cuda_internal.cuh for the host emulation
 * (tests/emu/cuda_emu.h): the same state and helpers, host memory only. */
#ifndef CUDA_INTERNAL_EMU_H
#define CUDA_INTERNAL_EMU_H

#include "cuda_emu.h"

extern "C" {
#include "kernels/kernels.h"
}

typedef struct cuda_state {
    int device, sm_count, cc_major, cc_minor, prefill_ready;
    cudaStream_t stream;
    void *scratch;
    size_t scratch_bytes;
} cuda_state;

#define CU_THREADS 256

/* cp.async, emulated (tests/emu/cuda_emu.h): queued, landing at the wait */
__device__ static inline void cp_async16(void *smem, const void *gmem, bool valid)
{
    emu_cp_async16(smem, gmem, valid);
}
__device__ static inline void cp_async_commit() { emu_cp_commit(); }
template <int N> __device__ static inline void cp_async_wait() { emu_cp_wait(N); }

/* mma.sync m16n8k16 and fp16 pairs, emulated (tests/emu/cuda_emu.h) */
__device__ static inline void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2])
{
    emu_mma_16816(d, a, b);
}
__device__ static inline void ldsm_x4(uint32_t (&r)[4], const __half *row)
{
    emu_ldsm_x4(r, row, false);
}
__device__ static inline void ldsm_x4_trans(uint32_t (&r)[4], const __half *row)
{
    emu_ldsm_x4(r, row, true);
}
__device__ static inline uint32_t h2_bits(__half2 h)
{
    uint32_t v;
    memcpy(&v, &h, 4);
    return v;
}

int cu_errf(kvs_err *err, int status, const char *fmt, ...);
int cu_check(cudaError_t e, const char *what, kvs_err *err);
int cu_check_launch(const char *what, kvs_err *err);
int cu_scratch(cuda_state *st, size_t bytes, void **out, kvs_err *err);
int cu_decode_attention(void *self, const kernels_attn_args *a, kvs_err *err);
int cu_prefill_attention(void *self, const kernels_attn_args *a, kvs_err *err);
int64_t cu_attn_workspace_bytes(void *self, int64_t n_decode, int64_t max_ctx,
                                int64_t max_prefill_q, int64_t heads, int64_t kv_heads,
                                int64_t head_dim);
#endif
