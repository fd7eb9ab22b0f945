/* cpu_ops.h — the CPU reference backend's operations (internal to kernels/):
 * plain loops over fp32 storage, fp32 math, one thread.  Signatures are the
 * kernels_backend_vt slots; `self` is the CPU backend state (scratch). */
#ifndef CPU_OPS_H
#define CPU_OPS_H

#include "kernels.h"

/* Scratch of at least n floats held by the CPU backend state (grown on
 * demand, freed at close); NULL when out of memory. */
float *cpu_scratch(void *self, int64_t n);

int cpu_rmsnorm(void *self, const void *x, const void *w, void *out, int64_t rows,
                int64_t dim, float eps, kvs_err *err);
int cpu_gemm(void *self, const void *a, const void *w, void *c, int64_t m, int64_t n,
             int64_t k, float beta, kvs_err *err);
int cpu_rope(void *self, void *qkv, const int32_t *pos, int64_t tokens, int64_t heads,
             int64_t kv_heads, int64_t head_dim, float theta, kvs_err *err);
int cpu_kv_append(void *self, const void *qkv, const int32_t *slots, int64_t tokens,
                  int64_t heads, int64_t kv_heads, int64_t head_dim, void *k_pool,
                  void *v_pool, kvs_err *err);
int cpu_attention(void *self, const kernels_attn_args *a, kvs_err *err);
int cpu_swiglu(void *self, const void *gu, void *out, int64_t rows, int64_t inter,
               kvs_err *err);
int cpu_gather_rows(void *self, const void *x, const int32_t *idx, void *out, int64_t n,
                    int64_t dim, kvs_err *err);

#endif
