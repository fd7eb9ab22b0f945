/* test_memory.c — the engines' KV capacity rules (models/memory.c,
 * docs/engine-memory.md), each figure worked out by hand below. */
#include <stdlib.h>
#include <string.h>

#include "models/model.h"
#include "testutil.h"

#define GIB ((int64_t)1 << 30)

/* Llama-3-8B (H 4096, 32 layers, 32 heads, 8 KV heads of 128, I 14336,
 * vocab 128256) in 16-bit on an H100-SXM (81559 MiB runtime total):
 *   weights  = (2*V*H + L*(2*H*32*128 + 3*H*I) + L*2*H*8*128 + (2L+1)*H) * 2
 *            = 16,060,522,496 B
 *   act      = (4H + 3I) * 2 B * 8192 + 256 * V * 4 B = 1,104,412,672 B
 *   non-torch at TP 1 = (int)(1.79 GiB) = 1,921,997,864 B
 *   CUDA total = 81559 MiB - (int)(0.43 GiB) = 85,059,101,000 B
 * vLLM:   usable = (int)(0.9 * total) = 76,553,190,900;
 *         KV = usable - weights - act - non-torch = 57,466,257,868 B,
 *         / (16 tokens * 128 KiB) = 27402 blocks (vLLM logged 53.29 GiB,
 *         27284 such blocks, with its own activation figure). */
START_TEST(test_vllm_rule)
{
    model_spec m = tu_model("llama-3-8b");
    gpu_spec g = tu_gpu("h100-sxm");
    model_par p = {1, 1, 1};
    kv_capacity c;
    kvs_err err;
    ck_assert_int_eq(model_cuda_total_bytes(&g), 85059101000LL);
    ck_assert_int_eq(model_nontorch_bytes(1), 1921997864LL);
    ck_assert_int_eq(model_kv_capacity_rule(&m, &g, &p, MODEL_KV_RULE_VLLM, 0.9, 16, 8192, 256,
                                            &c, &err), 0);
    ck_assert_int_eq(c.weight_bytes, 16060522496LL);
    ck_assert_int_eq(c.activation_bytes, 1104412672LL);
    ck_assert_int_eq(c.usable_bytes, 76553190900LL);
    ck_assert_int_eq(c.kv_bytes, 57466257868LL);
    ck_assert_int_eq(c.kv_blocks, 27402);
    ck_assert_int_eq(c.kv_tokens, 27402 * 16);
}
END_TEST

/* Non-torch memory grows by one base figure per further TP peer:
 * (int)(1.79 * 4 GiB) at TP 4; TP 0 counts as 1. */
START_TEST(test_nontorch_by_tp)
{
    ck_assert_int_eq(model_nontorch_bytes(4), (int64_t)(7.16 * 1073741824.0));
    ck_assert_int_eq(model_nontorch_bytes(0), model_nontorch_bytes(1));
    ck_assert(model_nontorch_bytes(8) > model_nontorch_bytes(4));
}
END_TEST

/* TensorRT-LLM takes 0.9 of what is free and rounds its token count UP to
 * whole blocks: free = total - weights - act - non-torch = 65,972,167,968 B
 * (the figures above), KV = (int)(0.9 * free) = 59,374,951,171 B,
 * tokens = floor(KV / 128 KiB) = 452,994 = 7078 * 64 + 2, blocks =
 * ceil(452,994 / 64) = 7079 (flooring would give 7078). */
START_TEST(test_trtllm_rule)
{
    model_spec m = tu_model("llama-3-8b");
    gpu_spec g = tu_gpu("h100-sxm");
    model_par p = {1, 1, 1};
    kv_capacity c;
    kvs_err err;
    ck_assert_int_eq(model_kv_capacity_rule(&m, &g, &p, MODEL_KV_RULE_TRTLLM, 0.9, 64, 8192, 256,
                                            &c, &err), 0);
    ck_assert_int_eq(c.kv_bytes, 59374951171LL);
    ck_assert_int_eq(c.kv_bytes / c.kv_bytes_per_token, 452994);
    ck_assert_int_eq(c.kv_blocks, 7079);
}
END_TEST

/* The kvsim rule is model_kv_capacity_par itself; a model that leaves no
 * room is one error naming the terms and the flag to change. */
START_TEST(test_kvsim_rule_and_errors)
{
    model_spec m = tu_model("llama-2-70b");
    gpu_spec g = tu_gpu("a100-80g");
    model_par p = {4, 1, 1};
    kv_capacity a, b;
    kvs_err err;
    ck_assert_int_eq(model_kv_capacity_rule(&m, &g, &p, MODEL_KV_RULE_KVSIM, 0.9, 16, 4096, 256,
                                            &a, &err), 0);
    ck_assert_int_eq(model_kv_capacity_par(&m, &g, &p, 0.9, 16, 4096, 256, &b, &err), 0);
    ck_assert_int_eq(a.kv_blocks, b.kv_blocks);
    p.tp = 1; /* 128 GiB of weights on one 80 GB GPU */
    ck_assert_int_eq(model_kv_capacity_rule(&m, &g, &p, MODEL_KV_RULE_VLLM, 0.9, 16, 4096, 256, &a,
                                            &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, "needs") && strstr(err.msg, "raise --tp"), "%s", err.msg);
    p.tp = 4;
    ck_assert_int_eq(model_kv_capacity_rule(&m, &g, &p, MODEL_KV_RULE_TRTLLM, 1.5, 16, 4096, 256,
                                            &a, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, "--gpu-mem-util"), "%s", err.msg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_vllm_rule);
    tcase_add_test(tc, test_nontorch_by_tp);
    tcase_add_test(tc, test_trtllm_rule);
    tcase_add_test(tc, test_kvsim_rule_and_errors);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
