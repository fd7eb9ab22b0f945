/* cuda_backend.cu — the "cuda" backend: device memory with fp16 storage,
 * fp32 <-> fp16 staging on the host, cuBLAS tensor-core GEMMs (fp16 in, fp32
 * accumulate), CUDA-event timing, device properties and versions.  The ops
 * themselves live in cuda_elementwise.cu, cuda_decode.cu and
 * cuda_prefill.cu. */
#include "cuda_internal.cuh"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cu_errf(kvs_err *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

int cu_check(cudaError_t e, const char *what, kvs_err *err)
{
    if (e == cudaSuccess)
        return KVS_OK;
    return cu_errf(err, KVS_EDEVICE, "cuda: %s: %s", what, cudaGetErrorString(e));
}

int cu_check_blas(cublasStatus_t s, const char *what, kvs_err *err)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return KVS_OK;
    return cu_errf(err, KVS_EDEVICE, "cublas: %s: %s", what, cublasGetStatusString(s));
}

int cu_check_launch(const char *what, kvs_err *err)
{
    return cu_check(cudaGetLastError(), what, err);
}

/* A failed allocation sets the runtime's last error too: clear it, so the
 * next cu_check_launch does not blame a kernel for it. */
static int cu_malloc(void **ptr, size_t bytes, const char *what, kvs_err *err)
{
    cudaError_t e = cudaMalloc(ptr, bytes);
    if (e == cudaSuccess)
        return KVS_OK;
    (void)cudaGetLastError();
    *ptr = NULL;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
        (void)cudaGetLastError();
    return cu_errf(err, KVS_EDEVICE, "cuda: cudaMalloc(%s, %zu bytes) failed: %s (%zu of %zu "
                   "bytes free)", what, bytes, cudaGetErrorString(e), free_b, total_b);
}

int cu_scratch(cuda_state *st, size_t bytes, void **out, kvs_err *err)
{
    if (bytes > st->scratch_bytes) {
        if (st->scratch) {
            int rc = cu_check(cudaFree(st->scratch), "cudaFree(scratch)", err);
            st->scratch = NULL;
            st->scratch_bytes = 0;
            if (rc != KVS_OK)
                return rc;
        }
        int rc = cu_malloc(&st->scratch, bytes, "attention workspace", err);
        if (rc != KVS_OK)
            return rc;
        st->scratch_bytes = bytes;
    }
    *out = st->scratch;
    return KVS_OK;
}

static int cuda_reserve(void *self, size_t bytes, kvs_err *err)
{
    void *ws;
    return cu_scratch((cuda_state *)self, bytes, &ws, err);
}

static void cuda_close(void *self)
{
    cuda_state *st = (cuda_state *)self;
    if (!st)
        return;
    /* teardown: errors cannot be reported and leave nothing to undo */
    if (st->scratch)
        (void)cudaFree(st->scratch);
    if (st->blas)
        (void)cublasDestroy(st->blas);
    if (st->ev_start)
        (void)cudaEventDestroy(st->ev_start);
    if (st->ev_stop)
        (void)cudaEventDestroy(st->ev_stop);
    if (st->stream)
        (void)cudaStreamDestroy(st->stream);
    free(st->stage);
    free(st);
}

__global__ static void probe_k(int *p)
{
    if (p)
        *p = 0;
}

/* The build carries sm_80 and sm_90 code plus compute_90 PTX (CMake's
 * CUDA_ARCHITECTURES "80-real;90"): sm_8x runs the sm_80 code, sm_9x the
 * sm_90 code, and newer parts JIT the PTX.  Below sm_80 there is no image
 * (and the kernels are written and checked for sm_80+: cp.async pipelines,
 * WMMA tiles), so say so instead of failing later with "no kernel image". */
static int check_capability(cuda_state *st, kvs_err *err)
{
    int rc;
    if ((rc = cu_check(cudaDeviceGetAttribute(&st->cc_major, cudaDevAttrComputeCapabilityMajor, 0),
                       "cudaDeviceGetAttribute(capability)", err)) != KVS_OK ||
        (rc = cu_check(cudaDeviceGetAttribute(&st->cc_minor, cudaDevAttrComputeCapabilityMinor, 0),
                       "cudaDeviceGetAttribute(capability)", err)) != KVS_OK)
        return rc;
    if (st->cc_major < 8)
        return cu_errf(err, KVS_EDEVICE,
                       "no CUDA device: compute capability %d.%d (sm_%d%d) is not supported: "
                       "this build carries sm_80 (A100) and sm_90 (H100/H200) code with "
                       "compute_90 PTX for newer parts, and the kernels are checked on sm_80 "
                       "or later only",
                       st->cc_major, st->cc_minor, st->cc_major, st->cc_minor);
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, probe_k);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return cu_errf(err, KVS_EDEVICE,
                       "no CUDA device: no kernel image for compute capability %d.%d in this "
                       "build (%s); rebuild with -DCMAKE_CUDA_ARCHITECTURES=%d%d",
                       st->cc_major, st->cc_minor, cudaGetErrorString(e), st->cc_major,
                       st->cc_minor);
    }
    return KVS_OK;
}

static int cuda_open(void **self, kvs_err *err)
{
    *self = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        int drv = 0, rt = 0;
        (void)cudaDriverGetVersion(&drv);
        (void)cudaRuntimeGetVersion(&rt);
        (void)cudaGetLastError();
        if (drv == 0) /* cudaDriverGetVersion gives 0 when no libcuda is loaded */
            return cu_errf(err, KVS_EDEVICE,
                           "no CUDA device: no NVIDIA driver is installed (libcuda.so not found; "
                           "%s)", cudaGetErrorString(e));
        if (e == cudaErrorInsufficientDriver || drv < rt)
            return cu_errf(err, KVS_EDEVICE,
                           "no CUDA device: the driver supports CUDA %d.%d but kvsim was built "
                           "with the CUDA %d.%d runtime (%s); install a newer driver (CUDA 13 "
                           "needs R580 or later) or build with an older toolkit",
                           drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10,
                           cudaGetErrorString(e));
        return cu_errf(err, KVS_EDEVICE, "no CUDA device: %s (driver CUDA %d.%d, runtime %d.%d)",
                       cudaGetErrorString(e), drv / 1000, drv % 1000 / 10, rt / 1000,
                       rt % 1000 / 10);
    }
    if (count < 1)
        return cu_errf(err, KVS_EDEVICE, "no CUDA device: %s",
                       cudaGetErrorString(cudaErrorNoDevice));
    cuda_state *st = (cuda_state *)calloc(1, sizeof *st);
    if (!st)
        return cu_errf(err, KVS_ENOMEM, "out of memory (cuda backend)");
    int rc = KVS_OK;
    st->stage = (__half *)malloc((size_t)CU_STAGE * sizeof(__half));
    if (!st->stage) {
        rc = cu_errf(err, KVS_ENOMEM, "out of memory (cuda staging)");
        goto fail;
    }
    if ((rc = cu_check(cudaSetDevice(0), "cudaSetDevice(0)", err)) != KVS_OK ||
        (rc = cu_check(cudaDeviceGetAttribute(&st->sm_count, cudaDevAttrMultiProcessorCount, 0),
                       "cudaDeviceGetAttribute(SM count)", err)) != KVS_OK ||
        (rc = cu_check(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking),
                       "cudaStreamCreate", err)) != KVS_OK ||
        (rc = cu_check(cudaEventCreate(&st->ev_start), "cudaEventCreate", err)) != KVS_OK ||
        (rc = cu_check(cudaEventCreate(&st->ev_stop), "cudaEventCreate", err)) != KVS_OK ||
        (rc = cu_check_blas(cublasCreate(&st->blas), "cublasCreate", err)) != KVS_OK ||
        (rc = cu_check_blas(cublasSetStream(st->blas, st->stream), "cublasSetStream", err)) !=
            KVS_OK)
        goto fail;
    if ((rc = check_capability(st, err)) != KVS_OK)
        goto fail;
    *self = st;
    return KVS_OK;
fail:
    cuda_close(st);
    return rc;
}

static int cuda_info(void *self, kernels_device_info *out, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    cudaDeviceProp p;
    int drv = 0, rt = 0, mem_khz = 0, bus_bits = 0, sm_khz = 0;
    size_t free_b = 0, total_b = 0;
    int rc;
    if ((rc = cu_check(cudaGetDeviceProperties(&p, st->device), "cudaGetDeviceProperties", err)) ||
        (rc = cu_check(cudaDriverGetVersion(&drv), "cudaDriverGetVersion", err)) ||
        (rc = cu_check(cudaRuntimeGetVersion(&rt), "cudaRuntimeGetVersion", err)) ||
        (rc = cu_check(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, st->device),
                       "cudaDeviceGetAttribute(memory clock)", err)) ||
        (rc = cu_check(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth,
                                              st->device),
                       "cudaDeviceGetAttribute(bus width)", err)) ||
        (rc = cu_check(cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, st->device),
                       "cudaDeviceGetAttribute(clock)", err)) ||
        (rc = cu_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo", err)))
        return rc;
    snprintf(out->name, sizeof out->name, "%s", p.name);
    snprintf(out->driver_version, sizeof out->driver_version, "%d.%d", drv / 1000, drv % 1000 / 10);
    snprintf(out->runtime_version, sizeof out->runtime_version, "%d.%d", rt / 1000, rt % 1000 / 10);
    out->mem_total_bytes = (int64_t)total_b;
    out->mem_free_bytes = (int64_t)free_b;
    /* DDR: two transfers per memory clock; kHz * 1e3 * 2 * bytes per transfer */
    out->peak_mem_Bps = (double)mem_khz * 1e3 * 2.0 * (double)bus_bits / 8.0;
    snprintf(out->props_json, sizeof out->props_json,
             "{\"name\":\"%s\",\"cc\":\"%d.%d\",\"sm_count\":%d,\"sm_clock_khz\":%d,"
             "\"mem_clock_khz\":%d,\"bus_width_bits\":%d,\"peak_mem_Bps\":%.6g,"
             "\"mem_total_bytes\":%lld,\"l2_bytes\":%d,\"smem_per_block_optin\":%zu,"
             "\"storage\":\"fp16\",\"driver\":%d,\"runtime\":%d}",
             p.name, p.major, p.minor, p.multiProcessorCount, sm_khz, mem_khz, bus_bits,
             out->peak_mem_Bps, (long long)total_b, p.l2CacheSize, p.sharedMemPerBlockOptin,
             drv, rt);
    return KVS_OK;
}

static int cuda_alloc(void *self, size_t bytes, void **ptr, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    int rc = cu_malloc(ptr, bytes, "buffer", err);
    if (rc != KVS_OK)
        return rc;
    cudaError_t e = cudaMemsetAsync(*ptr, 0, bytes, st->stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        (void)cudaFree(*ptr);
        *ptr = NULL;
        return cu_errf(err, KVS_EDEVICE, "cuda: cudaMemset(%zu bytes): %s", bytes,
                       cudaGetErrorString(e));
    }
    return KVS_OK;
}

static void cuda_free(void *self, void *ptr)
{
    (void)self;
    if (ptr)
        (void)cudaFree(ptr); /* teardown: nothing to report to */
}

static int cuda_write_act(void *self, void *dst, const float *src, int64_t n, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    for (int64_t off = 0; off < n; off += CU_STAGE) {
        int64_t m = n - off < CU_STAGE ? n - off : CU_STAGE;
        for (int64_t i = 0; i < m; i++)
            st->stage[i] = __float2half_rn(src[off + i]);
        int rc = cu_check(cudaMemcpyAsync((__half *)dst + off, st->stage, (size_t)m * sizeof(__half),
                                          cudaMemcpyHostToDevice, st->stream),
                          "cudaMemcpy(host to device)", err);
        if (rc == KVS_OK)
            rc = cu_check(cudaStreamSynchronize(st->stream), "cudaStreamSynchronize", err);
        if (rc != KVS_OK)
            return rc;
    }
    return KVS_OK;
}

static int cuda_read_act(void *self, const void *src, float *dst, int64_t n, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    for (int64_t off = 0; off < n; off += CU_STAGE) {
        int64_t m = n - off < CU_STAGE ? n - off : CU_STAGE;
        int rc = cu_check(cudaMemcpyAsync(st->stage, (const __half *)src + off,
                                          (size_t)m * sizeof(__half), cudaMemcpyDeviceToHost,
                                          st->stream),
                          "cudaMemcpy(device to host)", err);
        if (rc == KVS_OK)
            rc = cu_check(cudaStreamSynchronize(st->stream), "cudaStreamSynchronize", err);
        if (rc != KVS_OK)
            return rc;
        for (int64_t i = 0; i < m; i++)
            dst[off + i] = __half2float(st->stage[i]);
    }
    return KVS_OK;
}

static int cuda_write_bytes(void *self, void *dst, const void *src, size_t n, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    int rc = cu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, st->stream),
                      "cudaMemcpy(host to device)", err);
    return rc ? rc : cu_check(cudaStreamSynchronize(st->stream), "cudaStreamSynchronize", err);
}

static int cuda_read_bytes(void *self, const void *src, void *dst, size_t n, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    int rc = cu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, st->stream),
                      "cudaMemcpy(device to host)", err);
    return rc ? rc : cu_check(cudaStreamSynchronize(st->stream), "cudaStreamSynchronize", err);
}

static int cuda_sync(void *self, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    return cu_check(cudaStreamSynchronize(st->stream), "cudaStreamSynchronize", err);
}

/* Row-major c[m][n] = a[m][k] w[n][k]^T (+ c): in cuBLAS's column-major view
 * c^T (n x m, ld n) = w (stored k x n, transposed) * a^T (stored k x m). */
static int cuda_gemm(void *self, const void *a, const void *w, void *c, int64_t m, int64_t n,
                     int64_t k, float beta, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    float alpha = 1.0f;
    return cu_check_blas(cublasGemmEx(st->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k,
                                      &alpha, w, CUDA_R_16F, (int)k, a, CUDA_R_16F, (int)k, &beta,
                                      c, CUDA_R_16F, (int)n, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT),
                         "cublasGemmEx", err);
}

static int cuda_timer_start(void *self, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    return cu_check(cudaEventRecord(st->ev_start, st->stream), "cudaEventRecord", err);
}

static int cuda_timer_stop(void *self, double *seconds, kvs_err *err)
{
    cuda_state *st = (cuda_state *)self;
    float ms = 0.0f;
    int rc;
    if ((rc = cu_check(cudaEventRecord(st->ev_stop, st->stream), "cudaEventRecord", err)) ||
        (rc = cu_check(cudaEventSynchronize(st->ev_stop), "cudaEventSynchronize", err)) ||
        (rc = cu_check(cudaEventElapsedTime(&ms, st->ev_start, st->ev_stop),
                       "cudaEventElapsedTime", err)))
        return rc;
    *seconds = 1e-3 * (double)ms;
    return KVS_OK;
}

/* Positional: C++17 has no designated initialisers; order of kernels.h. */
extern "C" const kernels_backend_vt kernels_cuda_vt = {
    "cuda",               /* name */
    "fp16",               /* storage */
    sizeof(__half),       /* act_bytes */
    cuda_open,            /* open */
    cuda_close,           /* close */
    cuda_info,            /* info */
    cuda_alloc,           /* alloc */
    cuda_free,            /* free */
    cuda_write_act,       /* write_act */
    cuda_read_act,        /* read_act */
    cuda_write_bytes,     /* write_bytes */
    cuda_read_bytes,      /* read_bytes */
    cuda_sync,            /* sync */
    cu_rmsnorm,           /* rmsnorm */
    cuda_gemm,            /* gemm */
    cu_rope,              /* rope */
    cu_kv_append,         /* kv_append */
    cu_decode_attention,  /* decode_attention */
    cu_prefill_attention, /* prefill_attention */
    cu_swiglu,            /* swiglu */
    cu_gather_rows,       /* gather_rows */
    cuda_timer_start,     /* timer_start */
    cuda_timer_stop,      /* timer_stop */
    cu_attn_workspace_bytes, /* attn_workspace_bytes */
    cuda_reserve,         /* reserve_workspace */
};
