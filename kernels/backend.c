/* backend.c — the backend registry (open by name) and the checked buffer
 * API over a backend's raw memory slots.  The CUDA backend is a module
 * (libkvsim_cuda.so, linked against libcudart and libcublas) loaded the
 * first time "cuda" is opened, so the processes that never ask for it, a
 * `kvsim run` among them, map neither library. */
#include "kernels_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/dynmod.h"
#include "../base/rng.h"

static const kernels_backend_vt *const registry[] = {
    &kernels_cpu_vt,
};
#define N_REGISTRY (sizeof registry / sizeof registry[0])

#ifdef KVSIM_HAVE_CUDA
/* The CUDA backend's table from its module (base/dynmod.h: $KVSIM_CUDA_MODULE,
 * the module this build made, libkvsim_cuda.so).  Loaded once and kept for
 * the process.  KVS_EDEVICE naming why not. */
static int cuda_vt_load(const kernels_backend_vt **out, kvs_err *err)
{
    static const kernels_backend_vt *vt;
    if (!vt) {
        char why[512];
        vt = dynmod_symbol("KVSIM_CUDA_MODULE", KVSIM_CUDA_MODULE, "libkvsim_cuda.so",
                           "kernels_cuda_vt", 0, why, sizeof why);
        if (!vt)
            return kvs_errf(err, KVS_EDEVICE, "CUDA backend: %s", why);
    }
    *out = vt;
    return KVS_OK;
}
#endif

const char *kernels_backend_names(void)
{
#ifdef KVSIM_HAVE_CUDA
    return "cpu, cuda";
#else
    return "cpu, cuda (not built: configure with -DKVSIM_CUDA=ON and nvcc)";
#endif
}

int kernels_backend_open(const char *name, kernels_backend **out, kvs_err *err)
{
    *out = NULL;
    if (!name)
        name = "";
    const kernels_backend_vt *vt = NULL;
    for (size_t i = 0; i < N_REGISTRY; i++)
        if (!strcmp(registry[i]->name, name))
            vt = registry[i];
#ifdef KVSIM_HAVE_CUDA
    if (!vt && !strcmp(name, "cuda")) {
        int rc = cuda_vt_load(&vt, err);
        if (rc != KVS_OK)
            return rc;
    }
#endif
    if (!vt) {
#ifndef KVSIM_HAVE_CUDA
        if (!strcmp(name, "cuda"))
            return kvs_errf(err, KVS_EDEVICE,
                            "no CUDA device: this kvsim was built without CUDA "
                            "(configure with -DKVSIM_CUDA=ON and nvcc)");
#endif
        return kvs_errf(err, KVS_EINVAL, "unknown kernel backend '%s' (choices: %s)",
                        name, kernels_backend_names());
    }
    kernels_backend *be = calloc(1, sizeof *be);
    if (!be)
        return kvs_errf(err, KVS_ENOMEM, "out of memory opening backend %s", name);
    be->vt = vt;
    int rc = vt->open(&be->self, err);
    if (rc != KVS_OK) {
        free(be);
        return rc;
    }
    *out = be;
    return KVS_OK;
}

void kernels_backend_close(kernels_backend *be)
{
    if (!be)
        return;
    be->vt->close(be->self);
    free(be);
}

const kernels_backend_vt *kernels_backend_vtable(const kernels_backend *be) { return be->vt; }
const char *kernels_backend_name(const kernels_backend *be) { return be->vt->name; }

int kernels_backend_info(kernels_backend *be, kernels_device_info *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    return be->vt->info(be->self, out, err);
}

int kernels_backend_sync(kernels_backend *be, kvs_err *err)
{
    return be->vt->sync(be->self, err);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int kernels_timer_start(kernels_backend *be, kvs_err *err)
{
    if (be->vt->timer_start)
        return be->vt->timer_start(be->self, err);
    int rc = be->vt->sync(be->self, err);
    be->timer_t0 = now_s();
    return rc;
}

int kernels_timer_stop(kernels_backend *be, double *seconds, kvs_err *err)
{
    if (be->vt->timer_stop)
        return be->vt->timer_stop(be->self, seconds, err);
    int rc = be->vt->sync(be->self, err);
    *seconds = now_s() - be->timer_t0;
    return rc;
}

/* ------------------------------------------------------------ buffers */

static size_t elem_bytes(const kernels_backend *be, kernels_elem e)
{
    return e == KERNELS_ELEM_I32 ? sizeof(int32_t) : be->vt->act_bytes;
}

int kernels_buf_alloc(kernels_backend *be, kernels_elem elem, int64_t n,
                      kernels_buf **out, kvs_err *err)
{
    *out = NULL;
    if (n <= 0 || (uint64_t)n > SIZE_MAX / 8)
        return kvs_errf(err, KVS_EINVAL, "buffer of %lld elements", (long long)n);
    kernels_buf *b = calloc(1, sizeof *b);
    if (!b)
        return kvs_errf(err, KVS_ENOMEM, "out of memory (buffer header)");
    b->be = be;
    b->elem = elem;
    b->n = n;
    int rc = be->vt->alloc(be->self, (size_t)n * elem_bytes(be, elem), &b->ptr, err);
    if (rc != KVS_OK) {
        free(b);
        return rc;
    }
    *out = b;
    return KVS_OK;
}

void kernels_buf_free(kernels_buf *b)
{
    if (!b)
        return;
    b->be->vt->free(b->be->self, b->ptr);
    free(b);
}

int64_t kernels_buf_len(const kernels_buf *b) { return b->n; }

static int check_range(const kernels_buf *b, kernels_elem elem, int64_t off, int64_t n,
                       kvs_err *err)
{
    if (b->elem != elem)
        return kvs_errf(err, KVS_EINVAL, "buffer holds %s, not %s",
                        b->elem == KERNELS_ELEM_I32 ? "int32" : "activations",
                        elem == KERNELS_ELEM_I32 ? "int32" : "activations");
    if (off < 0 || n < 0 || off > b->n || n > b->n - off)
        return kvs_errf(err, KVS_EINVAL,
                        "range [%lld, +%lld) outside a buffer of %lld elements",
                        (long long)off, (long long)n, (long long)b->n);
    return KVS_OK;
}

int kernels_buf_write(kernels_buf *b, int64_t off, const float *src, int64_t n, kvs_err *err)
{
    int rc = check_range(b, KERNELS_ELEM_ACT, off, n, err);
    if (rc != KVS_OK || n == 0)
        return rc;
    char *dst = (char *)b->ptr + (size_t)off * b->be->vt->act_bytes;
    return b->be->vt->write_act(b->be->self, dst, src, n, err);
}

int kernels_buf_read(const kernels_buf *b, int64_t off, float *dst, int64_t n, kvs_err *err)
{
    int rc = check_range(b, KERNELS_ELEM_ACT, off, n, err);
    if (rc != KVS_OK || n == 0)
        return rc;
    const char *src = (const char *)b->ptr + (size_t)off * b->be->vt->act_bytes;
    return b->be->vt->read_act(b->be->self, src, dst, n, err);
}

int kernels_buf_write_i32(kernels_buf *b, int64_t off, const int32_t *src, int64_t n,
                          kvs_err *err)
{
    int rc = check_range(b, KERNELS_ELEM_I32, off, n, err);
    if (rc != KVS_OK || n == 0)
        return rc;
    return b->be->vt->write_bytes(b->be->self, (int32_t *)b->ptr + off, src,
                                  (size_t)n * sizeof(int32_t), err);
}

int kernels_buf_fill_uniform(kernels_buf *b, uint64_t seed, float a, float bias, kvs_err *err)
{
    enum { CHUNK = 1 << 16 };
    if (b->elem != KERNELS_ELEM_ACT)
        return kvs_errf(err, KVS_EINVAL, "fill_uniform on an int32 buffer");
    float *tmp = malloc(CHUNK * sizeof *tmp);
    if (!tmp)
        return kvs_errf(err, KVS_ENOMEM, "out of memory (fill buffer)");
    rng r;
    rng_init(&r, seed);
    int rc = KVS_OK;
    for (int64_t off = 0; off < b->n && rc == KVS_OK; off += CHUNK) {
        int64_t n = b->n - off < CHUNK ? b->n - off : CHUNK;
        for (int64_t i = 0; i < n; i++)
            tmp[i] = bias + a * (float)(2.0 * rng_uniform(&r) - 1.0);
        rc = kernels_buf_write(b, off, tmp, n, err);
    }
    free(tmp);
    return rc;
}
