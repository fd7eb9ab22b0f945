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
 *
 * Added in 2026 (docs/models.md repeats every figure with its source).
 * Peaks are dense: the datasheets' "with sparsity" figures halved.  For
 * the GPUs added in 2026 mem_bytes is the total the runtime reports
 * (nvidia-smi "memory.total", in MiB, as public logs of each part show it)
 * where known, else the datasheet figure in decimal bytes; the four older
 * parts keep their figures and get mem_runtime_bytes beside them.
 * - H100 PCIe: H100 datasheet (2022): FP16 1,513 TF*, FP8 3,026 TF*, INT8
 *   3,026 TOPS*; 80 GB HBM2e at 2.0 TB/s; PCIe Gen5 128 GB/s (the optional
 *   NVLink bridge joins pairs only, so collectives use PCIe here).
 * - H100 NVL: H100 datasheet (2024, NVL column): BF16 1,671 TF*, FP8 3,341
 *   TF*, INT8 3,341 TOPS*; 94 GB HBM3 at 3.9 TB/s; NVLink bridge 600 GB/s
 *   (pairs); PCIe Gen5 128 GB/s.
 * - H20: NVIDIA HGX H20 product brief (2024): BF16 148 TF, FP8 296 TF, INT8
 *   296 TOPS (dense); 96 GB HBM3 at 4.0 TB/s; NVLink 900 GB/s; PCIe Gen5.
 * - L40S: L40S datasheet (2023): BF16 362.05 TF (733 TF*), FP8 733 TF
 *   (1,466 TF*), INT8 733 TOPS; 48 GB GDDR6 at 864 GB/s; PCIe Gen4 x16
 *   64 GB/s, no NVLink.
 * - L4: L4 datasheet (2023): BF16 242 TF*, FP8 485 TF*, INT8 485 TOPS*;
 *   24 GB GDDR6 at 300 GB/s; PCIe Gen4 x16 64 GB/s.
 * - A10G (AWS G5): no NVIDIA datasheet; AWS gives 24 GB GDDR6 at 600 GB/s,
 *   Baseten's "NVIDIA A10 vs A10G" (2023) 70 TF FP16 tensor and 140 TOPS
 *   INT8 (dense); PCIe Gen4 x16.
 * - B200: HGX B200 datasheet (2025), per GPU of 8: FP4 18 PF*, FP8 9 PF*,
 *   INT8 9 POPS*, FP16/BF16 4.5 PF*; 180 GB HBM3e (1.44 TB / 8) at 8 TB/s;
 *   NVLink 5 1.8 TB/s; PCIe Gen5 host.
 * - GB200: GB200 NVL72 datasheet (2024), per GPU of 72: FP4 1,440 PF* / 72
 *   = 20 PF*, FP8 10 PF*, INT8 10 POPS*, FP16/BF16 5 PF*; 13.4 TB HBM3e / 72
 *   = 186 GB at 576 TB/s / 72 = 8 TB/s; NVLink 1.8 TB/s; host: NVLink-C2C
 *   900 GB/s per Grace shared by two GPUs = 225 GB/s per GPU per direction.
 * - GH200 (480GB, the 96 GB HBM3 part): NVIDIA GH200 Grace Hopper
 *   Superchip datasheet (2023): the H100's compute (FP8 3,958 TF*, INT8
 *   3,958 TOPS*, BF16 1,979 TF*); 96 GB HBM3 at 4 TB/s; NVLink-C2C to the
 *   Grace CPU 900 GB/s total = 450 GB/s per direction (the host link);
 *   NVLink 900 GB/s between superchips (NVL2/NVL32).  nvidia-smi shows
 *   "NVIDIA GH200 480GB ... 97871MiB" in public logs (the H20's total).
 * - MI300X: AMD Instinct MI300X data sheet (2023): FP16/BF16 1,307.4 TF,
 *   FP8 2,614.9 TF, INT8 2,614.9 TOPS (dense); 192 GB HBM3 at 5.3 TB/s;
 *   7 Infinity Fabric links of 128 GB/s (bidirectional) = 448 GB/s per
 *   direction to the 7 peers; PCIe Gen5 x16.
 * - MI325X: AMD Instinct MI325X data sheet (2024): compute as MI300X;
 *   256 GB HBM3E at 6.0 TB/s; links as MI300X.
 * (* = with 2:4 sparsity, halved here.)
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GIB ((int64_t)1 << 30)

#define MIB ((int64_t)1 << 20)

/* Designated fields: one row per GPU, peaks in FLOP/s, bandwidths in B/s. */
#define GPU(n, mem, hbm, f16, host, link, f8, i8, f4, rt)                                 \
    {                                                                                  \
        .name = n, .mem_bytes = mem, .hbm_Bps = hbm, .fp16_flops = f16,                 \
        .host_link_Bps = host, .nvlink_Bps = link, .bf16_flops = f16, .fp8_flops = f8,   \
        .int8_ops = i8, .fp4_flops = f4, .mem_runtime_bytes = rt                       \
    }

static const gpu_spec gpus[] = {
    /*   name        mem_bytes        hbm_Bps  fp16    host  link   fp8      int8     fp4     runtime */
    GPU("a100-40g", 40 * GIB, 1555e9, 312e12, 32e9, 300e9, 0, 624e12, 0, 40960 * MIB),
    GPU("a100-80g", 80 * GIB, 2039e9, 312e12, 32e9, 300e9, 0, 624e12, 0, 81920 * MIB),
    GPU("h100-sxm", 80 * GIB, 3.35e12, 989e12, 64e9, 450e9, 1979e12, 1979e12, 0, 81559 * MIB),
    GPU("h200", 141000000000LL, 4.8e12, 989e12, 64e9, 450e9, 1979e12, 1979e12, 0, 143771 * MIB),
    /* 2026 */
    GPU("h100-pcie", 81559 * MIB, 2.0e12, 756e12, 64e9, 64e9, 1513e12, 1513e12, 0, 81559 * MIB),
    GPU("h100-nvl", 95830 * MIB, 3.9e12, 835e12, 64e9, 300e9, 1670e12, 1670e12, 0, 95830 * MIB),
    GPU("h20", 97871 * MIB, 4.0e12, 148e12, 64e9, 450e9, 296e12, 296e12, 0, 97871 * MIB),
    GPU("gh200", 97871 * MIB, 4.0e12, 989e12, 450e9, 450e9, 1979e12, 1979e12, 0, 97871 * MIB),
    GPU("l40s", 46068 * MIB, 864e9, 362e12, 32e9, 32e9, 733e12, 733e12, 0, 46068 * MIB),
    GPU("l4", 23034 * MIB, 300e9, 121e12, 32e9, 32e9, 242e12, 242e12, 0, 23034 * MIB),
    GPU("a10g", 23028 * MIB, 600e9, 70e12, 32e9, 32e9, 0, 140e12, 0, 23028 * MIB),
    GPU("b200", 183359 * MIB, 8e12, 2250e12, 64e9, 900e9, 4500e12, 4500e12, 9000e12, 183359 * MIB),
    GPU("gb200", 186000000000LL, 8e12, 2500e12, 225e9, 900e9, 5000e12, 5000e12, 10000e12, 0),
    GPU("mi300x", 192000000000LL, 5.3e12, 1307.4e12, 64e9, 448e9, 2614.9e12, 2614.9e12, 0, 0),
    GPU("mi325x", 256000000000LL, 6.0e12, 1307.4e12, 64e9, 448e9, 2614.9e12, 2614.9e12, 0, 0),
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

static int gpu_is_path(const char *name)
{
    size_t n = strlen(name);
    return strchr(name, '/') != NULL || (n >= 4 && !strcmp(name + n - 4, ".gpu"));
}

int gpu_lookup(const char *name, gpu_spec *out, kvs_err *err)
{
    if (name && *name && gpu_is_path(name))
        return gpu_file_read(name, out, err);
    for (size_t i = 0; name && i < N_GPU; i++) {
        if (!strcmp(name, gpus[i].name)) {
            *out = gpus[i];
            return KVS_OK;
        }
    }
    char known[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < N_GPU && len < sizeof known; i++)
        len += (size_t)snprintf(known + len, sizeof known - len, "%s%s",
                                i ? ", " : "", gpus[i].name);
    return kvs_errf(err, KVS_EINVAL, "--gpu: unknown GPU '%s' (known: %s; or a path to a .gpu file)",
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

double gpu_peak_flops(const gpu_spec *g, model_dtype dt)
{
    switch (dt) {
    case MODEL_DTYPE_FP8:
        return g->fp8_flops > 0 ? g->fp8_flops : g->fp16_flops;
    case MODEL_DTYPE_INT8:
        return g->int8_ops > 0 ? g->int8_ops : g->fp16_flops;
    case MODEL_DTYPE_FP4:
        return g->fp4_flops > 0 ? g->fp4_flops : g->fp16_flops;
    case MODEL_DTYPE_BF16:
        return g->bf16_flops > 0 ? g->bf16_flops : g->fp16_flops;
    default: /* AUTO, FP32 (run as TF32/FP16 tensor math), FP16, INT4 (W4A16) */
        return g->fp16_flops;
    }
}
