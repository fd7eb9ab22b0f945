/* bench_attention.c — a benchmark (not a test): decode attention bandwidth
 * and GEMM throughput of the kernel backends.
 *
 * CUDA: LLaMA-7B shapes; decode attention at batch {1,8,32,64,128} x context
 * {512,2048,4096} as achieved GB/s (K and V bytes read / time) against the
 * device's peak (memory clock x bus width x 2), and FP16 GEMM TFLOP/s of the
 * 7B projections at 4096 tokens against the built-in GPU's tensor peak.
 * Targets: decode attention >= 80% of peak at batch 64 x context 2048; GEMM
 * >= 70% of peak tensor throughput.  Without a GPU it says so and prints the
 * CPU backend's figures for a small shape.
 *
 * usage: bench_attention [cpu|cuda]   (default: cuda, falling back to cpu) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kernels.h"
#include "../models/model.h"

#define CHECK(x)                                                          \
    do {                                                                  \
        if ((x) != KVS_OK) {                                              \
            fprintf(stderr, "bench_attention: %s\n", err.msg);            \
            exit(2);                                                      \
        }                                                                 \
    } while (0)

static kvs_err err;

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of `reps` timed calls of fn after `warm` untimed ones. */
static double time_median(kernels_backend *be, int (*fn)(void *), void *ctx, int warm, int reps)
{
    double s[64];
    for (int i = 0; i < warm; i++)
        if (fn(ctx) != KVS_OK)
            CHECK(KVS_EINTERNAL);
    for (int i = 0; i < reps; i++) {
        CHECK(kernels_timer_start(be, &err));
        if (fn(ctx) != KVS_OK)
            CHECK(KVS_EINTERNAL);
        CHECK(kernels_timer_stop(be, &s[i], &err));
    }
    qsort(s, (size_t)reps, sizeof s[0], cmp_dbl);
    return s[reps / 2];
}

typedef struct dec_ctx {
    kernels_backend *be;
    const model_spec *m;
    kernels_buf *qkv, *out;
    kernels_batch *b;
    kernels_kv *kv;
} dec_ctx;

static int run_decode(void *p)
{
    dec_ctx *d = p;
    return kernels_op_decode_attention(d->be, d->m, d->qkv, d->b, d->kv, 0, d->out, &err);
}

static void bench_decode(kernels_backend *be, const model_spec *m, const int64_t *batches,
                         int nb, const int64_t *ctxs, int nc, double peak_Bps, int reps)
{
    const int64_t bs = 16, W = (m->heads + 2 * m->kv_heads) * m->head_dim;
    int64_t max_b = batches[nb - 1], max_c = ctxs[nc - 1], blocks = max_b * ((max_c + bs - 1) / bs);
    kernels_kv kv;
    kernels_buf *qkv, *out;
    CHECK(kernels_kv_init(be, m, 1, blocks, bs, &kv, &err));
    CHECK(kernels_buf_alloc(be, KERNELS_ELEM_ACT, max_b * W, &qkv, &err));
    CHECK(kernels_buf_alloc(be, KERNELS_ELEM_ACT, max_b * m->heads * m->head_dim, &out, &err));
    CHECK(kernels_buf_fill_uniform(qkv, 1, 1.0f, 0.0f, &err));
    int32_t *table = malloc((size_t)blocks * sizeof *table);
    kernels_seq *seqs = malloc((size_t)max_b * sizeof *seqs);
    if (!table || !seqs)
        exit(2);
    /* stride through the pool: 7919 is prime and does not divide the block
     * counts used here, so this is a permutation (no block shared) */
    for (int64_t i = 0; i < blocks; i++)
        table[i] = (int32_t)((i * 7919) % blocks);
    printf("decode attention, %s (%lld heads, %lld KV heads, head_dim %lld), block %lld, %s:\n",
           m->name, (long long)m->heads, (long long)m->kv_heads, (long long)m->head_dim,
           (long long)bs, kernels_backend_vtable(be)->storage);
    printf("  %6s %8s %12s %10s %8s\n", "batch", "context", "time (us)", "GB/s", "of peak");
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nc; j++) {
            int64_t B = batches[i], C = ctxs[j], nblk = (C + bs - 1) / bs;
            if (B * nblk > blocks)
                continue;
            for (int64_t s = 0; s < B; s++)
                seqs[s] = (kernels_seq){.q = 1, .c = C - 1, .blocks = table + s * nblk, .n_blocks = nblk};
            kernels_batch *b;
            CHECK(kernels_batch_create(be, seqs, B, bs, blocks, &b, &err));
            dec_ctx d = {be, m, qkv, out, b, &kv};
            double t = time_median(be, run_decode, &d, 3, reps);
            double bytes = (double)B * (double)C * 2.0 * (double)(m->kv_heads * m->head_dim) *
                           (double)kernels_backend_vtable(be)->act_bytes;
            double gbs = bytes / t / 1e9;
            if (peak_Bps > 0)
                printf("  %6lld %8lld %12.1f %10.1f %7.1f%%%s\n", (long long)B, (long long)C,
                       t * 1e6, gbs, 100 * bytes / t / peak_Bps,
                       B == 64 && C == 2048 ? "   <- target >= 80%" : "");
            else
                printf("  %6lld %8lld %12.1f %10.2f %8s\n", (long long)B, (long long)C, t * 1e6,
                       gbs, "-");
            kernels_batch_free(b);
        }
    free(table);
    free(seqs);
    kernels_buf_free(qkv);
    kernels_buf_free(out);
    kernels_kv_free(&kv);
}

typedef struct gemm_ctx {
    kernels_backend *be;
    kernels_buf *a, *w, *c;
    int64_t m, n, k;
} gemm_ctx;

static int run_gemm(void *p)
{
    gemm_ctx *g = p;
    return kernels_op_gemm(g->be, g->a, g->w, g->c, g->m, g->n, g->k, 0.0f, &err);
}

static void bench_gemm(kernels_backend *be, const model_spec *m, int64_t tokens, double peak_flops,
                       int reps)
{
    int64_t H = m->hidden, I = m->intermediate, A = m->heads * m->head_dim;
    struct {
        const char *name;
        int64_t n, k;
    } g[] = {{"qkv_proj", (m->heads + 2 * m->kv_heads) * m->head_dim, H},
             {"o_proj", H, A},
             {"gate_up_proj", 2 * I, H},
             {"down_proj", H, I}};
    printf("\nGEMM at %lld tokens (%s storage):\n", (long long)tokens,
           kernels_backend_vtable(be)->storage);
    printf("  %-13s %6s %6s %12s %10s %8s\n", "op", "N", "K", "time (us)", "TFLOP/s", "of peak");
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        gemm_ctx c = {be, NULL, NULL, NULL, tokens, g[i].n, g[i].k};
        CHECK(kernels_buf_alloc(be, KERNELS_ELEM_ACT, tokens * g[i].k, &c.a, &err));
        CHECK(kernels_buf_alloc(be, KERNELS_ELEM_ACT, g[i].n * g[i].k, &c.w, &err));
        CHECK(kernels_buf_alloc(be, KERNELS_ELEM_ACT, tokens * g[i].n, &c.c, &err));
        CHECK(kernels_buf_fill_uniform(c.a, 2, 1.0f, 0.0f, &err));
        CHECK(kernels_buf_fill_uniform(c.w, 3, 0.02f, 0.0f, &err));
        double t = time_median(be, run_gemm, &c, 3, reps);
        double fl = 2.0 * (double)tokens * (double)g[i].n * (double)g[i].k / t;
        if (peak_flops > 0)
            printf("  %-13s %6lld %6lld %12.1f %10.1f %7.1f%%   <- target >= 70%%\n", g[i].name,
                   (long long)g[i].n, (long long)g[i].k, t * 1e6, fl / 1e12, 100 * fl / peak_flops);
        else
            printf("  %-13s %6lld %6lld %12.1f %10.4f %8s\n", g[i].name, (long long)g[i].n,
                   (long long)g[i].k, t * 1e6, fl / 1e12, "-");
        kernels_buf_free(c.a), kernels_buf_free(c.w), kernels_buf_free(c.c);
    }
}

/* Tensor peak of the built-in GPU whose family is in the device name. */
static double tensor_peak(const kernels_device_info *info, char *which, size_t n)
{
    const gpu_spec *g = gpu_builtin_guess(info->name, info->mem_total_bytes);
    snprintf(which, n, "%s", g ? g->name : "unknown");
    return g ? g->fp16_flops : 0;
}

int main(int argc, char **argv)
{
    const char *want = argc > 1 ? argv[1] : "cuda";
    kernels_backend *be = NULL;
    if (kernels_backend_open(want, &be, &err) != KVS_OK) {
        if (strcmp(want, "cuda") || err.msg[0] == 0)
            CHECK(KVS_EINVAL);
        printf("SKIP cuda: %s\nCPU backend figures instead (small shape):\n\n", err.msg);
        want = "cpu";
        CHECK(kernels_backend_open("cpu", &be, &err));
    }
    kernels_device_info info;
    CHECK(kernels_backend_info(be, &info, &err));
    printf("device: %s", info.name);
    if (info.driver_version[0])
        printf(" (driver %s, runtime %s)", info.driver_version, info.runtime_version);
    model_spec m;
    if (!strcmp(want, "cuda")) {
        char which[32];
        double tpeak = tensor_peak(&info, which, sizeof which);
        printf("\npeak memory bandwidth %.0f GB/s (device); FP16 tensor peak %.0f TFLOP/s (%s)\n\n",
               info.peak_mem_Bps / 1e9, tpeak / 1e12, which);
        CHECK(model_lookup("llama-7b", &m, &err));
        const int64_t B[] = {1, 8, 32, 64, 128}, C[] = {512, 2048, 4096};
        bench_decode(be, &m, B, 5, C, 3, info.peak_mem_Bps, 20);
        bench_gemm(be, &m, 4096, tpeak, 10);
    } else {
        printf("\n\n");
        CHECK(model_lookup("models/tiny.conf", &m, &err));
        const int64_t B[] = {1, 8, 32}, C[] = {256, 1024};
        bench_decode(be, &m, B, 3, C, 2, 0.0, 5);
        bench_gemm(be, &m, 256, 0.0, 3);
    }
    kernels_backend_close(be);
    return 0;
}
