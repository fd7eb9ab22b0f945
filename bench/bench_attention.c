/* bench_attention.c — a benchmark (not a test): decode attention bandwidth,
 * prefill attention and GEMM throughput of the kernel backends.
 *
 * CUDA: decode attention of Llama-2-7B (MHA), Llama-3-8B (GQA, 4 query
 * heads per KV head) and Llama-2-70B at TP 1 (GQA 8: the two-heads-per-warp
 * path) at batch {1,8,32,64,128} x context {512,2048,4096},
 * plus an uneven batch of 64 (half at 512, half at 3584: the same tokens as
 * 64 x 2048), as achieved GB/s (K and V bytes read / time) against the
 * device's peak (memory clock x bus width x 2); prefill attention of 8
 * prompts of 2048 tokens (causal) in TFLOP/s; FP16 GEMM TFLOP/s of the 7B
 * projections at 4096 tokens against the built-in GPU's dense tensor peak.
 * Targets (issue 17): decode attention >= 85% of peak at batch 64 x 2048
 * for both shapes; GEMM >= 70% of dense peak; prefill within 2x of
 * FlashAttention-2's published figure for the GPU class.  The workspace is
 * reserved once before timing, and each timed sample enqueues calls back to
 * back (see time_median).  Lines "RESULT key value" are for scripts
 * (scripts/gpu_run.sh's summary).  Without a GPU it says so and prints the
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

/* Median seconds per call of `reps` timed samples after `warm` untimed
 * calls; a sample times enough calls back to back to last ~1 ms (at most
 * 64), so short kernels carry no lone-launch gap. */
static double time_median(kernels_backend *be, int (*fn)(void *), void *ctx, int warm, int reps)
{
    double s[64], t1 = 0;
    int n = 1;
    for (int i = 0; i < warm; i++)
        if (fn(ctx) != KVS_OK)
            CHECK(KVS_EINTERNAL);
    CHECK(kernels_timer_start(be, &err));
    if (fn(ctx) != KVS_OK)
        CHECK(KVS_EINTERNAL);
    CHECK(kernels_timer_stop(be, &t1, &err));
    if (t1 < 1e-3)
        n = t1 > 1e-3 / 64 ? (int)(1e-3 / t1 + 0.999) : 64;
    for (int i = 0; i < reps && i < 64; i++) {
        CHECK(kernels_timer_start(be, &err));
        for (int j = 0; j < n; j++)
            if (fn(ctx) != KVS_OK)
                CHECK(KVS_EINTERNAL);
        CHECK(kernels_timer_stop(be, &s[i], &err));
        s[i] /= n;
    }
    reps = reps < 64 ? reps : 64;
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

/* Time decode attention over seqs[0..B) and print a row; returns GB/s. */
static double decode_row(kernels_backend *be, const model_spec *m, kernels_kv *kv,
                         kernels_buf *qkv, kernels_buf *out, const kernels_seq *seqs, int64_t B,
                         int64_t blocks, const char *ctx_label, double peak_Bps, int reps,
                         const char *note)
{
    kernels_batch *b;
    CHECK(kernels_batch_create(be, seqs, B, kv->block_size, blocks, &b, &err));
    dec_ctx d = {be, m, qkv, out, b, kv};
    double t = time_median(be, run_decode, &d, 3, reps), tokens = 0;
    for (int64_t s = 0; s < B; s++)
        tokens += (double)(seqs[s].c + 1);
    double bytes = tokens * 2.0 * (double)(m->kv_heads * m->head_dim) *
                   (double)kernels_backend_vtable(be)->act_bytes;
    double gbs = bytes / t / 1e9;
    if (peak_Bps > 0)
        printf("  %6lld %8s %12.1f %10.1f %7.1f%%%s\n", (long long)B, ctx_label, t * 1e6, gbs,
               100 * bytes / t / peak_Bps, note);
    else
        printf("  %6lld %8s %12.1f %10.2f %8s\n", (long long)B, ctx_label, t * 1e6, gbs, "-");
    kernels_batch_free(b);
    return bytes / t;
}

static void bench_decode(kernels_backend *be, const model_spec *m, const int64_t *batches,
                         int nb, const int64_t *ctxs, int nc, double peak_Bps, int reps)
{
    const int64_t bs = 16, W = (m->heads + 2 * m->kv_heads) * m->head_dim;
    int64_t max_b = batches[nb - 1], max_c = ctxs[nc - 1], blocks = max_b * ((max_c + bs - 1) / bs);
    kernels_kv kv;
    kernels_buf *qkv, *out;
    CHECK(kernels_kv_init(be, m, 1, blocks, bs, &kv, &err));
    /* the workspace of the largest shape, once: no allocation while timing */
    CHECK(kernels_reserve_workspace(be, kernels_attn_workspace_bytes(be, m, max_b, max_c, 0), &err));
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
            char lab[24];
            snprintf(lab, sizeof lab, "%lld", (long long)C);
            int target = B == 64 && C == 2048;
            double Bps = decode_row(be, m, &kv, qkv, out, seqs, B, blocks, lab, peak_Bps, reps,
                                    target ? "   <- target >= 85%" : "");
            if (target && peak_Bps > 0)
                printf("RESULT decode_%s_pct_hbm %.1f\n", m->name, 100 * Bps / peak_Bps);
            /* GQA groups of 4 and more: also the SIMT kernel (decode_gqa_k,
             * KVSIM_CUDA_DECODE=simt, read at each launch) at the target */
            if (target && peak_Bps > 0 && m->heads / m->kv_heads >= 4) {
                if (setenv("KVSIM_CUDA_DECODE", "simt", 1) != 0)
                    exit(2);
                Bps = decode_row(be, m, &kv, qkv, out, seqs, B, blocks, lab, peak_Bps, reps,
                                 "   (the SIMT kernel, decode_gqa_k)");
                if (unsetenv("KVSIM_CUDA_DECODE") != 0)
                    exit(2);
                printf("RESULT decode_simt_%s_pct_hbm %.1f\n", m->name, 100 * Bps / peak_Bps);
            }
        }
    /* uneven: 32 at 512 and 32 at 3584 (the tokens of 64 x 2048) */
    int64_t B = 64, lo = 512, hi = 3584, nlo = (lo + bs - 1) / bs, nhi = (hi + bs - 1) / bs;
    if (B <= max_b && 32 * (nlo + nhi) <= blocks) {
        int64_t off = 0;
        for (int64_t s = 0; s < B; s++) {
            int64_t c = s % 2 ? hi : lo, nblk = s % 2 ? nhi : nlo;
            seqs[s] = (kernels_seq){.q = 1, .c = c - 1, .blocks = table + off, .n_blocks = nblk};
            off += nblk;
        }
        double Bps = decode_row(be, m, &kv, qkv, out, seqs, B, blocks, "512|3584", peak_Bps, reps,
                                "   (uneven: load balance)");
        if (peak_Bps > 0)
            printf("RESULT decode_%s_uneven_pct_hbm %.1f\n", m->name, 100 * Bps / peak_Bps);
    }
    free(table);
    free(seqs);
    kernels_buf_free(qkv);
    kernels_buf_free(out);
    kernels_kv_free(&kv);
}

typedef dec_ctx pre_ctx;

static int run_prefill(void *p)
{
    pre_ctx *d = p;
    return kernels_op_prefill_attention(d->be, d->m, d->qkv, d->b, d->kv, 0, d->out, &err);
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
        if (peak_flops > 0) {
            printf("  %-13s %6lld %6lld %12.1f %10.1f %7.1f%%   <- target >= 70%%\n", g[i].name,
                   (long long)g[i].n, (long long)g[i].k, t * 1e6, fl / 1e12, 100 * fl / peak_flops);
            printf("RESULT gemm_%s_pct_peak %.1f\n", g[i].name, 100 * fl / peak_flops);
        }
        else
            printf("  %-13s %6lld %6lld %12.1f %10.4f %8s\n", g[i].name, (long long)g[i].n,
                   (long long)g[i].k, t * 1e6, fl / 1e12, "-");
        kernels_buf_free(c.a), kernels_buf_free(c.w), kernels_buf_free(c.c);
    }
}

/* Prefill attention of B prompts of L tokens (causal, c = 0): TFLOP/s
 * counting the causal half, 4 B heads head_dim L^2 / 2. */
static void bench_prefill(kernels_backend *be, const model_spec *m, int64_t B, int64_t L, int reps)
{
    const int64_t bs = 16, W = (m->heads + 2 * m->kv_heads) * m->head_dim, nblk = (L + bs - 1) / bs;
    kernels_kv kv;
    kernels_buf *qkv, *out;
    CHECK(kernels_kv_init(be, m, 1, B * nblk, bs, &kv, &err));
    CHECK(kernels_buf_alloc(be, KERNELS_ELEM_ACT, B * L * W, &qkv, &err));
    CHECK(kernels_buf_alloc(be, KERNELS_ELEM_ACT, B * L * m->heads * m->head_dim, &out, &err));
    CHECK(kernels_buf_fill_uniform(qkv, 4, 1.0f, 0.0f, &err));
    CHECK(kernels_buf_fill_uniform(kv.k[0], 5, 1.0f, 0.0f, &err));
    CHECK(kernels_buf_fill_uniform(kv.v[0], 6, 1.0f, 0.0f, &err));
    CHECK(kernels_reserve_workspace(be, kernels_attn_workspace_bytes(be, m, 0, L, L), &err));
    int32_t *table = malloc((size_t)(B * nblk) * sizeof *table);
    kernels_seq *seqs = malloc((size_t)B * sizeof *seqs);
    if (!table || !seqs)
        exit(2);
    for (int64_t i = 0; i < B * nblk; i++)
        table[i] = (int32_t)i;
    for (int64_t s = 0; s < B; s++)
        seqs[s] = (kernels_seq){.q = L, .c = 0, .blocks = table + s * nblk, .n_blocks = nblk};
    kernels_batch *b;
    CHECK(kernels_batch_create(be, seqs, B, bs, B * nblk, &b, &err));
    pre_ctx p = {be, m, qkv, out, b, &kv};
    const double fl =
        4.0 * (double)B * (double)m->heads * (double)m->head_dim * (double)L * (double)L / 2;
    /* the CUDA backend's two kernels: mma.sync (its default) and WMMA
     * (KVSIM_CUDA_PREFILL=wmma, read at each launch); the CPU has one */
    const int both = !strcmp(kernels_backend_name(be), "cuda");
    for (int k = 0; k < 1 + both; k++) {
        if (both && setenv("KVSIM_CUDA_PREFILL", k ? "wmma" : "mma", 1) != 0)
            exit(2);
        const double t = time_median(be, run_prefill, &p, 2, reps);
        printf("\nprefill attention%s, %s, %lld x %lld tokens (causal): %.1f us, %.1f TFLOP/s\n",
               both ? (k ? " (WMMA kernel)" : " (mma.sync kernel)") : "", m->name, (long long)B,
               (long long)L, t * 1e6, fl / t / 1e12);
        printf("RESULT prefill%s_%s_%lldx%lld_tflops %.1f\n", k ? "_wmma" : "", m->name,
               (long long)B, (long long)L, fl / t / 1e12);
    }
    if (both && unsetenv("KVSIM_CUDA_PREFILL") != 0)
        exit(2);
    printf("  FlashAttention-2 published (forward, causal, head_dim 128, 2K): ~190 TFLOP/s on "
           "A100, ~330 on H100; target: within 2x\n");
    kernels_batch_free(b);
    free(table);
    free(seqs);
    kernels_buf_free(qkv);
    kernels_buf_free(out);
    kernels_kv_free(&kv);
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
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: bench_attention [cpu|cuda]   (default: cuda, falling back to cpu)\n"
               "Decode and prefill attention and GEMM throughput of a kernel backend.\n");
        return 0;
    }
    if (argc > 2 || (argc > 1 && strcmp(argv[1], "cpu") && strcmp(argv[1], "cuda"))) {
        fprintf(stderr, "bench_attention: unknown argument '%s' (usage: bench_attention [cpu|cuda])\n",
                argv[argc > 2 ? 2 : 1]);
        return 2;
    }
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
        printf("RESULT peak_hbm_GBps %.0f\nRESULT peak_fp16_dense_tflops %.0f\n",
               info.peak_mem_Bps / 1e9, tpeak / 1e12);
        const int64_t B[] = {1, 8, 32, 64, 128}, C[] = {512, 2048, 4096};
        CHECK(model_lookup("llama-2-7b", &m, &err));
        bench_decode(be, &m, B, 5, C, 3, info.peak_mem_Bps, 20);
        printf("\n");
        CHECK(model_lookup("llama-3-8b", &m, &err));
        bench_decode(be, &m, B, 5, C, 3, info.peak_mem_Bps, 20);
        printf("\n");
        CHECK(model_lookup("llama-2-70b", &m, &err));
        bench_decode(be, &m, B, 5, C, 3, info.peak_mem_Bps, 20);
        CHECK(model_lookup("llama-2-7b", &m, &err));
        bench_prefill(be, &m, 8, 2048, 10);
        bench_gemm(be, &m, 4096, tpeak, 10);
    } else {
        printf("\n\n");
        CHECK(model_lookup("models/tiny.conf", &m, &err));
        const int64_t B[] = {1, 8, 32}, C[] = {256, 1024};
        bench_decode(be, &m, B, 3, C, 2, 0.0, 5);
        bench_prefill(be, &m, 2, 256, 3);
        bench_gemm(be, &m, 256, 0.0, 3);
    }
    kernels_backend_close(be);
    return 0;
}
