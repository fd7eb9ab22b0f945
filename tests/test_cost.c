/* test_cost.c — cost model selection, the affine model's exactness and
 * parsing, and the roofline model: monotonicity, the memory-bound decode and
 * compute-bound prefill regimes against hand formulas, and tensor
 * parallelism. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"
#include "testutil.h"

static model_spec M(const char *name)
{
    model_spec m;
    ck_assert_int_eq(model_lookup(name, &m, NULL), KVS_OK);
    return m;
}

static gpu_spec G(const char *name)
{
    gpu_spec g;
    ck_assert_int_eq(gpu_lookup(name, &g, NULL), KVS_OK);
    return g;
}

static cost_model roof(const char *model, const char *gpu, int64_t tp)
{
    model_spec m = M(model);
    gpu_spec g = G(gpu);
    cost_model c;
    kvs_err err;
    int rc = cost_model_create("roofline", &m, &g, tp, &c, &err);
    ck_assert_msg(rc == KVS_OK, "%s", err.msg);
    return c;
}

/* ------------------------------------------------------------- affine */

START_TEST(test_affine_exact)
{
    cost_model c;
    kvs_err err;
    /* Powers of two make every product and sum exact:
     * 0.5 + 0.25*10 + 0.125*8 + 0.0625*16 = 0.5 + 2.5 + 1 + 1 = 5. */
    ck_assert_int_eq(cost_model_create("affine:0.5,0.25,0.125,0.0625", NULL, NULL, 1, &c, &err),
                     KVS_OK);
    cost_batch b = {10, 8, 16, 1, 0, 0, 0};
    ck_assert(cost_step_s(&c, &b) == 5.0);
    /* An empty batch costs c0 (the formula, exactly). */
    cost_batch z = {0, 0, 0, 0, 0, 0, 0};
    ck_assert(cost_step_s(&c, &z) == 0.5);
    char d[256];
    cost_model_describe(&c, d, sizeof d);
    ck_assert_str_eq(d, "affine c0=0.5 c1=0.25 c2=0.125 c3=0.0625");
    cost_model_free(&c);
    ck_assert_ptr_null(c.vt);

    /* Decimal coefficients: the same expression in the same order gives the
     * same double; decode step of 32 requests at context 1000 each:
     * 0.004 + 2e-5*32 + 1e-7*32000 + 0 = 0.004 + 0.00064 + 0.0032 = 0.00784. */
    ck_assert_int_eq(cost_affine_create("0.004,2e-5,1e-7,3e-10", &c, &err), KVS_OK);
    cost_batch dec = {32, 32000, 0, 0, 32, 0, 0};
    ck_assert(cost_step_s(&c, &dec) == 0.004 + 2e-5 * 32.0 + 1e-7 * 32000.0 + 3e-10 * 0.0);
    ck_assert_double_eq_tol(cost_step_s(&c, &dec), 0.00784, 1e-15);
    /* Prefill of two prompts, 100 and 300 tokens: tokens 400, prefill_sq
     * 100^2 + 300^2 = 100,000: 0.004 + 0.008 + 0 + 3e-5 = 0.01203. */
    cost_batch pre = {400, 0, 100000, 2, 0, 0, 0};
    ck_assert(cost_step_s(&c, &pre) == 0.004 + 2e-5 * 400.0 + 1e-7 * 0.0 + 3e-10 * 100000.0);
    ck_assert_double_eq_tol(cost_step_s(&c, &pre), 0.01203, 1e-15);
    cost_model_describe(&c, d, sizeof d);
    ck_assert_str_eq(d, "affine c0=0.004 c1=2e-05 c2=1e-07 c3=3e-10");
    cost_model_free(&c);
}
END_TEST

START_TEST(test_affine_parse_errors)
{
    static const char *bad[] = {
        "affine:",         "affine:1,2,3",     "affine:1,2,3,4,5", "affine:1,,3,4",
        "affine:-1,0,0,0", "affine:nan,0,0,0", "affine:inf,0,0,0", "affine:1e400,0,0,0",
        "affine: 1,2,3,4", "affine:1,2,3,4 ",  "affine:a,b,c,d",   "affine:1,2,3,4,",
        "affine:0x,0,0,0", "affine:1;2;3;4",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cost_model c = {0};
        kvs_err err;
        ck_assert_msg(cost_model_create(bad[i], NULL, NULL, 1, &c, &err) == KVS_EINVAL, "%s",
                      bad[i]);
        ck_assert_msg(strstr(err.msg, "--cost") != NULL, "%s: %s", bad[i], err.msg);
        ck_assert_ptr_null(c.vt);
    }
    /* Zero is allowed: an all-zero affine model is legal (if useless). */
    cost_model c;
    ck_assert_int_eq(cost_model_create("affine:0,0,0,0", NULL, NULL, 1, &c, NULL), KVS_OK);
    cost_model_free(&c);
}
END_TEST

START_TEST(test_create_dispatch)
{
    cost_model c = {0};
    kvs_err err;
    ck_assert_int_eq(cost_model_create("bogus", NULL, NULL, 1, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "affine:c0,c1,c2,c3"));
    ck_assert_ptr_nonnull(strstr(err.msg, "roofline"));
    ck_assert_ptr_nonnull(strstr(err.msg, "calibrated"));
    ck_assert_int_eq(cost_model_create("calibrated:3", NULL, NULL, 1, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "store"));
    ck_assert_int_eq(cost_model_create("calibrated", NULL, NULL, 1, &c, &err), KVS_EINVAL);
    /* roofline needs a model and a GPU, and a valid tp. */
    ck_assert_int_eq(cost_model_create("roofline", NULL, NULL, 1, &c, &err), KVS_EINVAL);
    model_spec m = M("llama-2-70b");
    gpu_spec g = G("a100-80g");
    ck_assert_int_eq(cost_model_create("roofline", &m, &g, 3, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--tp"));
    ck_assert_int_eq(cost_model_create("roofline:x", &m, &g, 1, &c, &err), KVS_EINVAL);
    ck_assert_int_eq(cost_model_create(NULL, &m, &g, 1, &c, &err), KVS_EINVAL);
    /* breakdown refuses a non-roofline model. */
    ck_assert_int_eq(cost_model_create("affine:1,0,0,0", NULL, NULL, 1, &c, &err), KVS_OK);
    double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT];
    cost_batch b = {1, 1, 0, 0, 1, 0, 0};
    ck_assert_int_eq(cost_roofline_breakdown(&c, &b, cs, ms), KVS_EINVAL);
    cost_model_free(&c);
    /* Bad constants are refused. */
    cost_roofline_consts k;
    cost_roofline_consts_default(&k);
    k.eff_hbm = 1.5;
    ck_assert_int_eq(cost_roofline_create_with(&m, &g, 8, &k, &c, &err), KVS_EINVAL);
    cost_model_free(NULL); /* no-op */
}
END_TEST

/* ------------------------------------------------------------ roofline */

START_TEST(test_roofline_describe_and_sum)
{
    cost_model c = roof("llama-2-70b", "h100-sxm", 4);
    char d[512];
    cost_model_describe(&c, d, sizeof d);
    ck_assert_ptr_nonnull(strstr(d, "roofline model=llama-2-70b gpu=h100-sxm tp=4"));
    ck_assert_ptr_nonnull(strstr(d, "eff_hbm=0.8"));
    /* step_s is the overhead plus the sum of per-op maxima. */
    cost_roofline_consts k;
    cost_roofline_consts_default(&k);
    cost_batch b = {1200, 50000, 1000000, 1, 200, 0, 0};
    double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT], sum = k.step_overhead_s;
    ck_assert_int_eq(cost_roofline_breakdown(&c, &b, cs, ms), KVS_OK);
    for (int i = 0; i < MODEL_OP_COUNT; i++)
        sum += fmax(cs[i], ms[i]);
    /* step_s evaluates precomputed affine coefficients (fast path); the
     * breakdown computes every op directly (the simple model of it). */
    ck_assert(fabs(cost_step_s(&c, &b) - sum) <= 1e-12 * sum);
    /* An empty step takes no time. */
    cost_batch z = {0, 0, 0, 0, 0, 0, 0};
    ck_assert(cost_step_s(&c, &z) == 0.0);
    cost_model_free(&c);
}
END_TEST

/* The fast path of step_s against the direct per-op sum on many batches,
 * models, GPUs and tp degrees (prefill only, decode only, mixed). */
START_TEST(test_roofline_fast_path_matches_direct)
{
    static const struct {
        const char *m, *g;
        int64_t tp;
    } cfg[] = {{"llama-7b", "a100-80g", 1}, {"llama-2-70b", "h100-sxm", 8},
               {"llama-3-8b", "h200", 2},   {"llama-7b-mqa", "a100-40g", 4}};
    cost_roofline_consts k;
    cost_roofline_consts_default(&k);
    uint64_t x = 777;
    for (size_t j = 0; j < sizeof cfg / sizeof cfg[0]; j++) {
        cost_model c = roof(cfg[j].m, cfg[j].g, cfg[j].tp);
        for (int it = 0; it < 3000; it++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t nd = (it % 3 == 0) ? 0 : (int64_t)(x >> 33) % 400;
            int64_t np = (it % 3 == 1) ? 0 : 1 + (int64_t)(x >> 20) % 6;
            int64_t plen = 1 + (int64_t)(x >> 40) % 8000;
            cost_batch b = {np * plen + nd, nd * (1 + (int64_t)(x >> 12) % 8000),
                            np * plen * plen, np, nd, 0, 0};
            if (np + nd == 0)
                continue; /* empty steps take no time: checked above */
            double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT], want = k.step_overhead_s;
            ck_assert_int_eq(cost_roofline_breakdown(&c, &b, cs, ms), KVS_OK);
            for (int i = 0; i < MODEL_OP_COUNT; i++)
                want += fmax(cs[i], ms[i]);
            double got = cost_step_s(&c, &b);
            ck_assert_msg(fabs(got - want) <= 1e-9 * want, "%s it=%d: %.17g vs %.17g",
                          cfg[j].m, it, got, want);
        }
        cost_model_free(&c);
    }
}
END_TEST

/* More work is never cheaper: raise one count at a time over a
 * deterministic spread of batches, for several models, GPUs and tp. */
START_TEST(test_roofline_monotone)
{
    static const struct {
        const char *m, *g;
        int64_t tp;
    } cfg[] = {{"llama-7b", "a100-80g", 1},   {"llama-2-70b", "h100-sxm", 8},
               {"llama-65b", "a100-40g", 4},  {"llama-7b-mqa", "h200", 2}};
    uint64_t x = 12345;
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        cost_model c = roof(cfg[k].m, cfg[k].g, cfg[k].tp);
        for (int it = 0; it < 400; it++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t nd = (int64_t)(x >> 33) % 300, np = (int64_t)(x >> 20) % 4;
            int64_t plen = 1 + (int64_t)(x >> 40) % 4000;
            cost_batch b = {np * plen + nd, nd * (1 + (int64_t)(x >> 12) % 3000),
                            np * plen * plen, np, nd, 0, 0};
            double base = cost_step_s(&c, &b);
            ck_assert(base >= 0 && isfinite(base));
            cost_batch up[5] = {b, b, b, b, b};
            up[0].tokens += 1 + it;
            up[1].kv_read += 1 + 37 * it;
            up[2].prefill_sq += 1 + 1000 * it;
            up[3].n_decode += 1, up[3].tokens += 1, up[3].kv_read += 100;
            up[4].n_prefill += 1, up[4].tokens += 512, up[4].prefill_sq += 512 * 512;
            for (int j = 0; j < 5; j++)
                ck_assert_msg(cost_step_s(&c, &up[j]) >= base, "%s j=%d it=%d", cfg[k].m, j,
                              it);
        }
        cost_model_free(&c);
    }
}
END_TEST

/* Batch-1 decode of llama-7b on an A100-80GB is memory bound: every GEMM
 * weight is read once per step, so the step (less the fixed overhead) is
 * about weight_bytes / (2039e9 * 0.8) = 13,476,831,232 / 1.6312e12 =
 * 8.262 ms.  The model reads slightly less than the full weights (the
 * embedding table is gathered, not streamed: -262 MB, -1.9%) and a little
 * more (128 tokens of KV: 67 MB, +0.5%; activations), so within 3%. */
START_TEST(test_roofline_decode_memory_bound)
{
    cost_model c = roof("llama-7b", "a100-80g", 1);
    cost_roofline_consts k;
    cost_roofline_consts_default(&k);
    model_spec m = M("llama-7b");
    cost_batch b = {1, 128, 0, 0, 1, 0, 0};
    double t = cost_step_s(&c, &b) - k.step_overhead_s;
    double want = (double)model_weight_bytes(&m, 1) / (2039e9 * k.eff_hbm);
    ck_assert_double_eq_tol(want, 8.262e-3, 1e-5);
    ck_assert_msg(fabs(t / want - 1.0) < 0.03, "t=%g want=%g", t, want);
    /* Every op is memory bound. */
    double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT];
    cost_roofline_breakdown(&c, &b, cs, ms);
    for (int i = 0; i < MODEL_OP_COUNT; i++)
        ck_assert_msg(cs[i] <= ms[i], "%s", model_op_name((model_op)i));
    /* Batch 8 at the same context costs barely more: weights dominate. */
    cost_batch b8 = {8, 8 * 128, 0, 0, 8, 0, 0};
    ck_assert(cost_step_s(&c, &b8) < 1.1 * cost_step_s(&c, &b));
    cost_model_free(&c);
}
END_TEST

/* A 2048-token prefill of llama-7b on an A100-80GB is compute bound.
 * Linear-layer FLOPs: 2 * 2048 tokens * 6,476,267,520 - 32*8192 (the layer
 * weights, norms excluded: 6,476,005,376) = 2.6526e13, at 312e12 * 0.7 =
 * 218.4e12 FLOP/s: 121.5 ms.  Attention: 2 * 32 heads * 128 * 2048^2 *
 * 32 layers = 1.0995e12 FLOPs at 312e12 * 0.5: 7.05 ms.  LM head of one row:
 * negligible.  So ~128.5 ms of compute; memory-bound elementwise ops add a
 * few ms and the overhead 3 ms. */
START_TEST(test_roofline_prefill_compute_bound)
{
    cost_model c = roof("llama-7b", "a100-80g", 1);
    cost_roofline_consts k;
    cost_roofline_consts_default(&k);
    cost_batch b = {2048, 0, 2048LL * 2048, 1, 0, 0, 0};
    double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT];
    cost_roofline_breakdown(&c, &b, cs, ms);
    model_op gemms[] = {MODEL_OP_QKV, MODEL_OP_O_PROJ, MODEL_OP_MLP_GATE_UP,
                        MODEL_OP_MLP_DOWN, MODEL_OP_ATTN_PREFILL};
    double compute = 0;
    for (int i = 0; i < 5; i++) {
        ck_assert_msg(cs[gemms[i]] > 2 * ms[gemms[i]], "%s", model_op_name(gemms[i]));
        compute += cs[gemms[i]];
    }
    double lin = 2.0 * 2048 * 6476005376.0 / (312e12 * 0.7);
    double attn = 2.0 * 32 * 128 * 2048.0 * 2048.0 * 32 / (312e12 * 0.5);
    ck_assert_double_eq_tol(lin, 0.12146, 1e-4);
    ck_assert_double_eq_tol(attn, 0.00705, 1e-4);
    ck_assert_double_eq_tol(compute, lin + attn, 1e-9);
    double t = cost_step_s(&c, &b);
    ck_assert(t > lin + attn + k.step_overhead_s);
    ck_assert_msg(t < 1.1 * (lin + attn), "t=%g", t);
    cost_model_free(&c);
}
END_TEST

/* Tensor parallelism cuts per-GPU time (llama-65b, NVLink A100s): decode of
 * 32 requests at context 1024 and a 2048-token prefill both get faster from
 * tp 2 to 4 to 8, though less than linearly (collectives, overhead). */
START_TEST(test_roofline_tp_scaling)
{
    cost_batch dec = {32, 32 * 1024, 0, 0, 32, 0, 0};
    cost_batch pre = {2048, 0, 2048LL * 2048, 1, 0, 0, 0};
    double last_d = INFINITY, last_p = INFINITY;
    int64_t tps[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        cost_model c = roof("llama-65b", "a100-80g", tps[i]);
        double d = cost_step_s(&c, &dec), p = cost_step_s(&c, &pre);
        ck_assert_msg(d < last_d && p < last_p, "tp %lld", (long long)tps[i]);
        if (i > 0) {
            ck_assert(d > last_d / 2); /* sublinear */
            ck_assert(p > last_p / 2);
        }
        last_d = d;
        last_p = p;
        /* Collectives appear only with tp > 1. */
        double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT];
        cost_roofline_breakdown(&c, &dec, cs, ms);
        ck_assert(tps[i] == 1 ? ms[MODEL_OP_ALLREDUCE] == 0 : ms[MODEL_OP_ALLREDUCE] > 0);
        cost_model_free(&c);
    }
    /* A faster GPU is faster: h100-sxm vs a100-80g, same work. */
    cost_model a = roof("llama-7b", "a100-80g", 1), h = roof("llama-7b", "h100-sxm", 1);
    ck_assert(cost_step_s(&h, &dec) < cost_step_s(&a, &dec));
    ck_assert(cost_step_s(&h, &pre) < cost_step_s(&a, &pre));
    cost_model_free(&a);
    cost_model_free(&h);
}
END_TEST

/* Decode attention grows with context: at batch 64, 4096 tokens of context
 * each read 64*4096*524,288 B = 137 GB of KV per step on llama-7b, 10x the
 * weights, so KV reads dominate and the GQA model (8x less KV per token
 * per layer-head share) is far cheaper per context token. */
START_TEST(test_roofline_kv_dominates_long_decode)
{
    cost_model c = roof("llama-7b", "a100-80g", 1);
    cost_batch b = {64, 64 * 4096, 0, 0, 64, 0, 0};
    double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT];
    cost_roofline_breakdown(&c, &b, cs, ms);
    /* 32 layers * 2*4096 width * 2 B * 262,144 tokens = 137,438,953,472 B of
     * K and V (+ Q and O of 64 decodes) at 1.6312e12 B/s = 84.3 ms. */
    ck_assert_double_eq_tol(ms[MODEL_OP_ATTN_DECODE], 137438953472.0 / 1.6312e12, 2e-4);
    ck_assert(ms[MODEL_OP_ATTN_DECODE] > ms[MODEL_OP_MLP_GATE_UP] + ms[MODEL_OP_QKV]);
    cost_model q = roof("llama-7b-mqa", "a100-80g", 1);
    ck_assert(cost_step_s(&q, &b) < cost_step_s(&c, &b) / 3);
    cost_model_free(&c);
    cost_model_free(&q);
}
END_TEST

/* A GPU without NVLink all-reduces over PCIe at host_link_Bps * eff_pcie.
 * llama-2-70b at tp 4, one 2048-token prefill: each all-reduce moves
 * 2 * 3/4 * 2048 * 8192 * 2 B = 50,331,648 B per GPU.  On the l40s (PCIe
 * Gen4, 32e9 B/s per direction) at eff_pcie 0.5 that is 50,331,648 / 16e9
 * = 3.14573 ms, plus collective_lat_s 10 us, times 2*80 all-reduces =
 * 504.916 ms; at eff_pcie 0.25 the bandwidth part doubles: 160 * (6.29146 +
 * 0.01) ms = 1008.233 ms.  The a100-80g (NVLink 300e9 * eff_nvlink 0.75 =
 * 225e9 B/s) ignores eff_pcie: 160 * (0.223696 + 0.01) ms = 37.391 ms. */
START_TEST(test_roofline_pcie_allreduce)
{
    model_spec m = M("llama-2-70b");
    cost_batch pre = {2048, 0, 2048LL * 2048, 1, 0, 0, 0};
    const double per = 50331648.0;
    const char *gpus[] = {"l40s", "a100-80g"};
    const double effs[] = {0.5, 0.25};
    for (int gi = 0; gi < 2; gi++)
        for (int ei = 0; ei < 2; ei++) {
            gpu_spec g = G(gpus[gi]);
            cost_roofline_consts k;
            cost_roofline_consts_default(&k);
            ck_assert_double_eq(k.eff_pcie, 0.5);
            k.eff_pcie = effs[ei];
            cost_model c;
            kvs_err err;
            ck_assert_int_eq(cost_roofline_create_with(&m, &g, 4, &k, &c, &err), KVS_OK);
            double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT];
            cost_roofline_breakdown(&c, &pre, cs, ms);
            double want = gi == 0 ? 160.0 * (per / (32e9 * effs[ei]) + 10e-6)
                                  : 160.0 * (per / 225e9 + 10e-6);
            ck_assert_double_eq_tol(ms[MODEL_OP_ALLREDUCE], want, want * 1e-9);
            ck_assert_double_eq_tol(ms[MODEL_OP_ALLREDUCE],
                                    (gi == 0 ? (ei == 0 ? 0.504916 : 1.008233) : 0.037391), 1e-6);
            char d[512];
            cost_model_describe(&c, d, sizeof d);
            /* only the PCIe run names eff_pcie (NVLink descriptions unchanged) */
            ck_assert(gi == 0 ? strstr(d, " eff_pcie=") != NULL : strstr(d, "eff_pcie") == NULL);
            cost_model_free(&c);
        }
}
END_TEST

/* kv_reread: a per-query-head decode kernel reads each K/V once per query
 * head.  llama-2-70b at tp 4 on the h100-sxm: 16 query heads and 2 KV heads
 * per GPU, group 8.  One decode over 4096 tokens of context reads per layer
 * 2 * 256 * 4096 * 2 B = 4,194,304 B of K and V (+ 2 * 2048 * 2 = 8,192 B of
 * Q and O); kv_reread 1 adds (8 - 1) * 4,194,304 = 29,360,128 B, so 80
 * layers * 29,360,128 B / (3.35e12 * 0.8 B/s) = 0.876422 ms more memory
 * time.  llama-2-7b (MHA, group 1) is unchanged. */
START_TEST(test_roofline_kv_reread)
{
    cost_batch dec = {1, 4096, 0, 0, 1, 0, 0};
    const char *models[] = {"llama-2-70b", "llama-2-7b"};
    for (int mi = 0; mi < 2; mi++) {
        model_spec m = M(models[mi]);
        gpu_spec g = G("h100-sxm");
        double attn[2];
        for (int r = 0; r < 2; r++) {
            cost_roofline_consts k;
            cost_roofline_consts_default(&k);
            ck_assert_double_eq(k.kv_reread, 0.0);
            k.kv_reread = r;
            cost_model c;
            kvs_err err;
            ck_assert_int_eq(cost_roofline_create_with(&m, &g, 4, &k, &c, &err), KVS_OK);
            double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT];
            cost_roofline_breakdown(&c, &dec, cs, ms);
            attn[r] = ms[MODEL_OP_ATTN_DECODE];
            cost_model_free(&c);
        }
        if (mi == 0) {
            ck_assert_double_eq_tol(attn[0], 80.0 * 4202496.0 / 2.68e12, 1e-12);
            ck_assert_double_eq_tol((attn[1] - attn[0]), 0.876422e-3, 1e-9);
        } else {
            ck_assert_double_eq(attn[1], attn[0]);
        }
    }
}
END_TEST

/* ridge_loss a: each op takes max(compute, memory) + a * min(compute,
 * memory).  llama-7b on the a100-80g, one decode at context 128: the QKV
 * GEMM does 2 * 1 * 4096 * 12288 = 100,663,296 FLOPs per layer, at 312e12 *
 * 0.7 FLOP/s 0.460912 us, 14.7492 us over 32 layers, far below its memory
 * time (the weights), so it is that op's min.  The step with a = 0.5 is
 * then the plain step plus half the sum of every op's min (collectives have
 * no compute and add nothing), which the breakdown gives. */
START_TEST(test_roofline_ridge_loss)
{
    model_spec m = M("llama-7b");
    gpu_spec g = G("a100-80g");
    cost_batch batches[] = {{1, 128, 0, 0, 1, 0, 0}, {2048, 0, 2048LL * 2048, 1, 0, 0, 0},
                            {96, 64 * 900, 32LL * 32, 1, 64, 0, 0}};
    for (int bi = 0; bi < 3; bi++) {
        double step[2], mins = 0;
        for (int r = 0; r < 2; r++) {
            cost_roofline_consts k;
            cost_roofline_consts_default(&k);
            ck_assert_double_eq(k.ridge_loss, 0.0);
            k.ridge_loss = 0.5 * r;
            cost_model c;
            kvs_err err;
            ck_assert_int_eq(cost_roofline_create_with(&m, &g, 1, &k, &c, &err), KVS_OK);
            step[r] = cost_step_s(&c, &batches[bi]);
            if (r == 0) {
                double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT];
                cost_roofline_breakdown(&c, &batches[bi], cs, ms);
                for (int i = 0; i < MODEL_OP_COUNT; i++)
                    mins += fmin(cs[i], ms[i]);
                if (bi == 0) {
                    ck_assert_double_eq_tol(cs[MODEL_OP_QKV], 32 * 100663296.0 / 218.4e12, 1e-12);
                    ck_assert_double_eq_tol(cs[MODEL_OP_QKV], 14.7492e-6, 1e-10);
                    ck_assert(cs[MODEL_OP_QKV] < ms[MODEL_OP_QKV]);
                }
            }
            cost_model_free(&c);
        }
        ck_assert(mins > 0);
        ck_assert_double_eq_tol(step[1], step[0] + 0.5 * mins, 1e-12);
    }
}
END_TEST

/* eff_fp8: FP8 weights on an FP8 GPU run their math at fp8_flops *
 * eff_fp8.  llama-7b in FP8 on the h100-sxm, a 2048-token prefill: the
 * linear layers' 2 * 2048 * 6,476,005,376 = 2.6526e13 FLOPs at 1979e12 *
 * 0.9 * 0.7 = 1246.77e12 FLOP/s take 21.276 ms (19.149 ms at eff_fp8 1),
 * attention's 1.0995e12 at 1979e12 * 0.9 * 0.5 takes 1.2347 ms.  The same
 * model in BF16 runs at the FP16 peak and eff_fp8 changes none of its bits;
 * only a run with FP8 math names eff_fp8 in its description. */
START_TEST(test_roofline_eff_fp8)
{
    gpu_spec g = G("h100-sxm");
    cost_batch b = {2048, 0, 2048LL * 2048, 1, 0, 0, 0};
    model_op gemms[] = {MODEL_OP_QKV, MODEL_OP_O_PROJ, MODEL_OP_MLP_GATE_UP, MODEL_OP_MLP_DOWN};
    kvs_err err;
    for (int fp8 = 0; fp8 < 2; fp8++) {
        model_spec m = M("llama-7b");
        if (fp8)
            ck_assert_int_eq(model_set_weight_dtype(&m, MODEL_DTYPE_FP8, &err), KVS_OK);
        double step[2];
        for (int e = 0; e < 2; e++) {
            cost_roofline_consts k;
            cost_roofline_consts_default(&k);
            ck_assert_double_eq(k.eff_fp8, 0.9);
            if (e)
                k.eff_fp8 = 1.0;
            cost_model c;
            ck_assert_int_eq(cost_roofline_create_with(&m, &g, 1, &k, &c, &err), KVS_OK);
            double cs[MODEL_OP_COUNT], ms[MODEL_OP_COUNT], lin = 0;
            cost_roofline_breakdown(&c, &b, cs, ms);
            for (int i = 0; i < 4; i++)
                lin += cs[gemms[i]];
            double rate = fp8 ? 1979e12 * (e ? 1.0 : 0.9) : 989e12;
            ck_assert_double_eq_tol(lin, 2.0 * 2048 * 6476005376.0 / (rate * 0.7), 1e-9);
            ck_assert_double_eq_tol(cs[MODEL_OP_ATTN_PREFILL],
                                    2.0 * 32 * 128 * 2048.0 * 2048.0 * 32 / (rate * 0.5), 1e-9);
            if (fp8 && !e) {
                ck_assert_double_eq_tol(lin, 21.276e-3, 1e-6);
                ck_assert_double_eq_tol(cs[MODEL_OP_ATTN_PREFILL], 1.2347e-3, 1e-7);
            }
            step[e] = cost_step_s(&c, &b);
            char d[512];
            cost_model_describe(&c, d, sizeof d);
            ck_assert_msg((strstr(d, " eff_fp8=") != NULL) == fp8, "%s", d);
            cost_model_free(&c);
        }
        if (fp8)
            ck_assert(step[0] > step[1]);
        else
            ck_assert(step[0] == step[1]);
    }
}
END_TEST

/* c declines a cost_run for batches like b, and the run still prices b
 * reading kv tokens as cost_step_s does. */
static void check_declined(const cost_model *c, const cost_batch *b, int64_t kv)
{
    cost_run r;
    cost_run_init(&r, c, b);
    ck_assert_int_lt(r.n, 0);
    cost_batch k = *b;
    k.kv_read = kv;
    ck_assert(cost_run_s(&r, kv) == cost_step_s(c, &k));
}

/* cost_run (a leap's decode steps): cost_run_s equals cost_step_s bit for
 * bit on decode batches of random sizes and KV reads, for dense, GQA, MQA,
 * MoE, MLA and sliding-window models at several TP degrees and with every
 * constant that enters a term (ridge_loss, kernel latency, per-sequence
 * overhead, K/V re-reads, narrow GEMMs).  The dense models must take the
 * fast path (n >= 0); the others may decline it, and then still agree.  A
 * prefill batch and the affine model are declined. */
START_TEST(test_cost_run_matches_step)
{
    static const struct {
        const char *m, *g;
        int64_t tp;
        int fast; /* must take the fast path */
    } cfg[] = {{"llama-7b", "a100-80g", 1, 1},     {"llama-2-70b", "h100-sxm", 8, 1},
               {"llama-3-8b", "h200", 2, 1},       {"llama-7b-mqa", "a100-40g", 4, 1},
               {"mixtral-8x7b", "h100-sxm", 2, 0}, {"deepseek-v3", "h200", 8, 0},
               {"gemma-2-9b", "a100-80g", 1, 0},   {"qwen3-30b-a3b", "h100-sxm", 1, 0}};
    uint64_t x = 4242;
    for (size_t j = 0; j < sizeof cfg / sizeof cfg[0]; j++) {
        for (int variant = 0; variant < 2; variant++) {
            model_spec m = M(cfg[j].m);
            gpu_spec g = G(cfg[j].g);
            cost_roofline_consts k;
            cost_roofline_consts_default(&k);
            if (variant) {
                k.ridge_loss = 0.3;
                k.kernel_lat_s = 3e-6;
                k.step_overhead_seq_s = 5e-6;
                k.kv_reread = 0.5;
                k.gemm_dim_half = 512;
                k.collective_lat_peer_s = 2e-6;
            }
            cost_model c;
            kvs_err err;
            ck_assert_int_eq(cost_roofline_create_with(&m, &g, cfg[j].tp, &k, &c, &err), KVS_OK);
            for (int it = 0; it < 200; it++) {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                int64_t nd = 1 + (int64_t)(x >> 33) % 512;
                cost_batch b = {nd, 0, 0, 0, nd, 0, 0};
                cost_run r;
                cost_run_init(&r, &c, &b);
                if (cfg[j].fast && r.n < 0)
                    ck_abort_msg("%s: no fast path for a decode batch", cfg[j].m);
                for (int s = 0; s < 20; s++) {
                    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                    b.kv_read = nd * (1 + (int64_t)(x >> 20) % 32000);
                    double want = cost_step_s(&c, &b), got = cost_run_s(&r, b.kv_read);
                    if (memcmp(&want, &got, sizeof want) != 0)
                        ck_abort_msg("%s variant %d nd=%lld kv=%lld: %.17g vs %.17g", cfg[j].m,
                                     variant, (long long)nd, (long long)b.kv_read, got, want);
                }
            }
            const cost_batch pf = {512, 64, 512 * 512, 1, 64, 0, 0};
            check_declined(&c, &pf, 9000);
            cost_model_free(&c);
        }
    }
    cost_model a;
    kvs_err err;
    ck_assert_int_eq(cost_affine_create("0.01,1e-5,1e-8,1e-9", &a, &err), KVS_OK);
    const cost_batch b = {8, 0, 0, 0, 8, 0, 0};
    check_declined(&a, &b, 12345);
    cost_model_free(&a);
}
END_TEST

/* cost_run_prepare reuses the terms only for the same model and batch
 * shape: one cost_run prepared for widths 8, 8, 9, 8 and for a second
 * model of the same width always prices like cost_step_s. */
START_TEST(test_cost_run_prepare_reuses)
{
    cost_model a = roof("llama-7b", "a100-80g", 1), b = roof("llama-2-70b", "h100-sxm", 4);
    cost_run r;
    memset(&r, 0, sizeof r);
    const struct {
        const cost_model *c;
        int64_t n;
    } seq[] = {{&a, 8}, {&a, 8}, {&a, 9}, {&a, 8}, {&b, 8}, {&a, 8}};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        cost_batch bt = {seq[i].n, 0, 0, 0, seq[i].n, 0, 0};
        cost_run_prepare(&r, seq[i].c, &bt);
        ck_assert_int_ge(r.n, 0);
        for (int64_t kv = 100; kv < 100000; kv += 7919) {
            bt.kv_read = kv * seq[i].n;
            double want = cost_step_s(seq[i].c, &bt), got = cost_run_s(&r, bt.kv_read);
            ck_assert_msg(memcmp(&want, &got, sizeof want) == 0, "case %zu: %.17g vs %.17g", i,
                          got, want);
        }
    }
    cost_model_free(&a);
    cost_model_free(&b);
}
END_TEST

/* cost_run_get: a run per width slot.  Widths 1..80 in a scrambled order,
 * twice, over two models: every run it returns prices each kv_read bit for
 * bit as cost_step_s does (a slot that held width w, the other model, or
 * w +- 32 was prepared again), asking twice in a row for one shape
 * returns the same run, and a decode batch's slot is its width mod 32. */
START_TEST(test_cost_run_get_cache)
{
    cost_model a = roof("llama-7b", "a100-80g", 1), b = roof("llama-2-70b", "h100-sxm", 4);
    cost_run_cache *cc = calloc(1, sizeof *cc);
    ck_assert_ptr_nonnull(cc);
    int hits = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 160; i++) {
            const cost_model *c = (i / 80 + round) % 2 ? &b : &a;
            int64_t n = 1 + (i * 37) % 80; /* 1..80, scrambled */
            cost_batch bt = {n, 0, 0, 0, n, 0, 0};
            const cost_run *r = cost_run_get(cc, c, &bt);
            const cost_run *again = cost_run_get(cc, c, &bt);
            ck_assert_ptr_eq(r, again);
            ck_assert(r->c == c && r->b.n_decode == n);
            hits += r == &cc->slot[n % COST_RUN_CACHE];
            for (int64_t kv = 100; kv < 50000; kv += 7919) {
                bt.kv_read = kv * n;
                double want = cost_step_s(c, &bt), got = cost_run_s(r, bt.kv_read);
                ck_assert_msg(memcmp(&want, &got, sizeof want) == 0,
                              "round %d n %lld: %.17g vs %.17g", round, (long long)n, got, want);
            }
        }
    }
    ck_assert_int_eq(hits, 320); /* a decode batch's slot is its width mod 32 */
    free(cc);
    cost_model_free(&a);
    cost_model_free(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cost");
    TCase *t = tcase_create("cost");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_affine_exact);
    tcase_add_test(t, test_affine_parse_errors);
    tcase_add_test(t, test_create_dispatch);
    tcase_add_test(t, test_roofline_describe_and_sum);
    tcase_add_test(t, test_roofline_monotone);
    tcase_add_test(t, test_roofline_fast_path_matches_direct);
    tcase_add_test(t, test_roofline_decode_memory_bound);
    tcase_add_test(t, test_roofline_prefill_compute_bound);
    tcase_add_test(t, test_roofline_tp_scaling);
    tcase_add_test(t, test_roofline_kv_dominates_long_decode);
    tcase_add_test(t, test_roofline_pcie_allreduce);
    tcase_add_test(t, test_roofline_kv_reread);
    tcase_add_test(t, test_roofline_ridge_loss);
    tcase_add_test(t, test_roofline_eff_fp8);
    tcase_add_test(t, test_cost_run_matches_step);
    tcase_add_test(t, test_cost_run_prepare_reuses);
    tcase_add_test(t, test_cost_run_get_cache);
    suite_add_tcase(s, t);
    return tu_run_suites(&s, 1);
}
