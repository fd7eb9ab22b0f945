/* gpu.c — built-in GPU datasheet figures, gpu_lookup, gpu_usable_bytes.
 *
 * Sources (NVIDIA datasheets, SXM parts, dense = without 2:4 sparsity):
 * - A100: "NVIDIA A100 Tensor Core GPU" datasheet (2021): FP16/BF16 tensor
 *   312 TFLOPS dense; HBM2 40 GB at 1,555 GB/s, HBM2e 80 GB at 2,039 GB/s;
 *   NVLink 600 GB/s total = 300 GB/s per direction; PCIe Gen4 x16 64 GB/s
 *   bidirectional = 32 GB/s per direction.
 * - H100 SXM: "NVIDIA H100 Tensor Core GPU" datasheet (2023): FP16/BF16
 *   tensor 1,979 TFLOPS with sparsity = 989 TFLOPS dense; 80 GB HBM3 at
 *   3.35 TB/s; NVLink 900 GB/s total = 450 GB/s per direction; PCIe Gen5
 *   128 GB/s bidirectional = 64 GB/s per direction.
 * - H200 SXM: "NVIDIA H200 Tensor Core GPU" datasheet (2024): same compute
 *   and links as H100 SXM; 141 GB HBM3e at 4.8 TB/s.
 *
 * Memory units: the A100 and H100 "40 GB"/"80 GB" parts carry 40 and 80 GiB
 * of HBM (binary gigabytes; nvidia-smi reports totals near 40960 and 81920
 * MiB, less what the driver reserves), so they are n * 2^30 bytes here.  The H200's "141 GB" is taken as 141e9 decimal bytes,
 * the conservative reading of the datasheet figure.  Bandwidths and FLOP/s
 * are decimal (GB/s = 1e9 B/s) as NVIDIA quotes them.
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GIB ((int64_t)1 << 30)

static const gpu_spec gpus[] = {
    /* name       mem_bytes   hbm_Bps    fp16_flops host_link nvlink */
    {"a100-40g", 40 * GIB, 1555e9, 312e12, 32e9, 300e9},
    {"a100-80g", 80 * GIB, 2039e9, 312e12, 32e9, 300e9},
    {"h100-sxm", 80 * GIB, 3.35e12, 989e12, 64e9, 450e9},
    {"h200", 141000000000LL, 4.8e12, 989e12, 64e9, 450e9},
};

#define N_GPU (sizeof gpus / sizeof gpus[0])

size_t gpu_builtin_count(void) { return N_GPU; }

const gpu_spec *gpu_builtin_at(size_t i) { return i < N_GPU ? &gpus[i] : NULL; }

const gpu_spec *gpu_builtin_guess(const char *device_name, int64_t mem_bytes)
{
    const gpu_spec *best = NULL;
    double best_d = -1;
    for (size_t i = 0; i < N_GPU; i++) {
        size_t fl = strcspn(gpus[i].name, "-"); /* the family: "a100", "h100" */
        int hit = 0;
        for (const char *s = device_name; *s && !hit; s++)
            hit = !strncasecmp(s, gpus[i].name, fl);
        double d = (double)gpus[i].mem_bytes - (double)mem_bytes;
        d = d < 0 ? -d : d;
        if (hit && (best_d < 0 || d < best_d)) {
            best_d = d;
            best = &gpus[i];
        }
    }
    return best;
}

int gpu_lookup(const char *name, gpu_spec *out, kvs_err *err)
{
    for (size_t i = 0; name && i < N_GPU; i++) {
        if (!strcmp(name, gpus[i].name)) {
            *out = gpus[i];
            return KVS_OK;
        }
    }
    char known[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < N_GPU && len < sizeof known; i++)
        len += (size_t)snprintf(known + len, sizeof known - len, "%s%s",
                                i ? ", " : "", gpus[i].name);
    return kvs_errf(err, KVS_EINVAL, "--gpu: unknown GPU '%s' (known: %s)",
                    name ? name : "", known);
}

int64_t gpu_usable_bytes(int64_t mem_bytes, double util)
{
    if (mem_bytes <= 0 || !(util > 0))
        return 0;
    if (util >= 1.0)
        return mem_bytes;
    /* util in millionths; mem_bytes < 2^43 keeps the product < 2^63. */
    int64_t ppm = (int64_t)llround(util * 1e6);
    if (mem_bytes < ((int64_t)1 << 43))
        return mem_bytes * ppm / 1000000;
    return (int64_t)floor((double)mem_bytes * ((double)ppm / 1e6));
}
