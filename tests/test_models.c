/* test_models.c — model shapes, parameter counts, weight/KV/activation
 * bytes, KV capacity, tp validity, config files, the per-op table, and the
 * `kvsim models|gpus|capacity` command line.  Every golden number is worked
 * out by hand in the comment next to it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"
#include "testutil.h"


/* ------------------------------------------------------------ shapes */

START_TEST(test_builtin_shapes)
{
    /* The released configs. */
    model_spec m = tu_model("llama-2-70b");
    ck_assert_int_eq(m.hidden, 8192);
    ck_assert_int_eq(m.layers, 80);
    ck_assert_int_eq(m.heads, 64);
    ck_assert_int_eq(m.kv_heads, 8);
    ck_assert_int_eq(m.intermediate, 28672);
    ck_assert_int_eq(m.max_ctx, 4096);
    m = tu_model("llama-2-13b");
    ck_assert_int_eq(m.hidden, 5120);
    ck_assert_int_eq(m.kv_heads, 40);
    ck_assert_int_eq(m.max_ctx, 4096);
    m = tu_model("llama-65b");
    ck_assert_int_eq(m.intermediate, 22016);
    ck_assert_int_eq(m.max_ctx, 2048);
    /* Every built-in: head_dim 128, fp16, kv_heads divides heads. */
    for (size_t i = 0; i < model_builtin_count(); i++) {
        const model_spec *b = model_builtin_at(i);
        ck_assert_int_eq(b->head_dim, 128);
        ck_assert_int_eq(b->dtype_bytes, 2);
        ck_assert_int_eq(b->heads % b->kv_heads, 0);
    }
    ck_assert_ptr_null(model_builtin_at(model_builtin_count()));
    /* The MQA variant is marked hypothetical. */
    m = tu_model("llama-7b-mqa");
    ck_assert_int_eq(m.kv_heads, 1);
    int found = 0;
    for (size_t i = 0; i < model_builtin_count(); i++)
        if (!strcmp(model_builtin_at(i)->name, "llama-7b-mqa"))
            found = strstr(model_builtin_note(i), "hypothetical") != NULL;
    ck_assert(found);
}
END_TEST

START_TEST(test_unknown_names)
{
    model_spec m;
    gpu_spec g;
    kvs_err err;
    ck_assert_int_eq(model_lookup("llama-4-8b", &m, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "llama-4-8b"));
    ck_assert_ptr_nonnull(strstr(err.msg, "llama-2-70b"));  /* lists known */
    ck_assert_int_eq(model_lookup("", &m, &err), KVS_EINVAL);
    /* llama-3-8b: GQA, 2 * 32 layers * 8 KV heads * 128 * 2 bytes = 131,072 */
    ck_assert_int_eq(model_lookup("llama-3-8b", &m, &err), 0);
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 1), 131072);
    ck_assert_int_eq(m.max_ctx, 8192);
    ck_assert_int_eq(gpu_lookup("v100", &g, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "h200"));
}
END_TEST

START_TEST(test_gpu_figures)
{
    /* A100/H100 80 GB = 80 GiB = 80 * 1073741824 = 85,899,345,920 bytes;
     * A100 40 GB = 42,949,672,960; H200 = 141e9 decimal. */
    ck_assert_int_eq(tu_gpu("a100-80g").mem_bytes, 85899345920LL);
    ck_assert_int_eq(tu_gpu("h100-sxm").mem_bytes, 85899345920LL);
    ck_assert_int_eq(tu_gpu("a100-40g").mem_bytes, 42949672960LL);
    ck_assert_int_eq(tu_gpu("h200").mem_bytes, 141000000000LL);
    ck_assert(tu_gpu("a100-80g").hbm_Bps == 2039e9);
    ck_assert(tu_gpu("a100-40g").hbm_Bps == 1555e9);
    ck_assert(tu_gpu("h100-sxm").fp16_flops == 989e12);
    ck_assert(tu_gpu("h200").hbm_Bps == 4.8e12);
    ck_assert(tu_gpu("a100-80g").nvlink_Bps == 300e9);
    ck_assert(tu_gpu("h100-sxm").host_link_Bps == 64e9);
}
END_TEST

START_TEST(test_usable_bytes)
{
    /* 80 GiB * 0.9 = 72 GiB = 77,309,411,328 exactly (a double product could
     * land one byte low). */
    ck_assert_int_eq(gpu_usable_bytes(85899345920LL, 0.9), 77309411328LL);
    ck_assert_int_eq(gpu_usable_bytes(85899345920LL, 1.0), 85899345920LL);
    /* 141e9 * 0.95 = 133,950,000,000. */
    ck_assert_int_eq(gpu_usable_bytes(141000000000LL, 0.95), 133950000000LL);
    /* floor: 1001 * 0.5 = 500.5 -> 500. */
    ck_assert_int_eq(gpu_usable_bytes(1001, 0.5), 500);
}
END_TEST

/* ------------------------------------------------------ parameter counts */

START_TEST(test_param_counts)
{
    /* llama-7b: embedding 32000*4096 = 131,072,000 (and the same again for
     * the untied LM head).  Per layer: q, k, v, o = 4 * 4096*4096 =
     * 67,108,864; MLP 3 * 4096*11008 = 135,266,304; 2 norms 8,192; total
     * 202,383,360; * 32 layers = 6,476,267,520.  Plus 2 * 131,072,000 and
     * the final norm 4,096: 6,738,415,616. */
    ck_assert_int_eq(6738415616LL,
                     2 * 131072000LL + 32 * (4 * 16777216LL + 135266304LL + 8192) + 4096);
    {
        model_spec m = tu_model("llama-7b");
        ck_assert_int_eq(model_param_count(&m), 6738415616LL);
    }
    /* llama-13b: embedding 32000*5120 = 163,840,000 (x2 with the head).
     * Per layer: 4 * 5120^2 = 104,857,600; MLP 3 * 5120*13824 = 212,336,640;
     * norms 10,240; total 317,204,480; * 40 = 12,688,179,200.
     * + 327,680,000 + 5,120 = 13,015,864,320. */
    {
        model_spec m = tu_model("llama-13b");
        ck_assert_int_eq(model_param_count(&m), 13015864320LL);
    }
    /* llama-65b: embedding 32000*8192 = 262,144,000 (x2).  Per layer:
     * 4 * 8192^2 = 268,435,456; MLP 3 * 8192*22016 = 541,065,216; norms
     * 16,384; total 809,517,056; * 80 = 64,761,364,480.
     * + 524,288,000 + 8,192 = 65,285,660,672. */
    {
        model_spec m = tu_model("llama-65b");
        ck_assert_int_eq(model_param_count(&m), 65285660672LL);
    }
    /* llama-2-70b (GQA): q and o 8192*8192 = 67,108,864 each; k and v
     * 8192*(8*128) = 8,388,608 each; attention 150,994,944.  MLP
     * 3 * 8192*28672 = 704,643,072; norms 16,384; per layer 855,654,400;
     * * 80 = 68,452,352,000.  + 524,288,000 + 8,192 = 68,976,648,192
     * (the "70B" of the name is ~68.98e9). */
    {
        model_spec m = tu_model("llama-2-70b");
        ck_assert_int_eq(model_param_count(&m), 68976648192LL);
    }
    /* llama-7b-mqa: k and v shrink from 2*4096*4096 to 2*4096*128 per
     * layer: 33,554,432 - 1,048,576 = 32,505,856 fewer, * 32 layers =
     * 1,040,187,392 fewer: 5,698,228,224. */
    {
        model_spec m = tu_model("llama-7b-mqa");
        ck_assert_int_eq(model_param_count(&m), 6738415616LL - 1040187392LL);
    }
}
END_TEST

START_TEST(test_weight_bytes)
{
    /* tp 1: every parameter once, 2 bytes each. */
    for (size_t i = 0; i < model_builtin_count(); i++) {
        const model_spec *m = model_builtin_at(i);
        ck_assert_int_eq(model_weight_bytes(m, 1), 2 * model_param_count(m));
    }
    /* llama-65b: 2 * 65,285,660,672 = 130,571,321,344 B = 121.6 GiB. */
    model_spec m = tu_model("llama-65b");
    ck_assert_int_eq(model_weight_bytes(&m, 1), 130571321344LL);
    /* llama-2-70b at tp 8.  Split part: embedding + head 2*32000*8192 =
     * 524,288,000; per layer q+o 2*8192*8192 = 134,217,728 and MLP
     * 704,643,072, * 80 = 67,108,864,000; total 67,633,152,000 / 8 =
     * 8,454,144,000.  KV projections, 1 KV head per GPU: 80 * 2*8192*128 =
     * 167,772,160.  Norms replicated: (2*80+1)*8192 = 1,318,912.
     * Sum 8,623,235,072 params -> 17,246,470,144 bytes. */
    m = tu_model("llama-2-70b");
    ck_assert_int_eq(model_weight_bytes(&m, 8), 17246470144LL);
    /* tp 16: split 67,633,152,000/16 = 4,227,072,000; KV heads are
     * replicated so still one per GPU (167,772,160); norms 1,318,912; sum
     * 4,396,163,072 -> 8,792,326,144 bytes: the KV share does not shrink. */
    ck_assert_int_eq(model_weight_bytes(&m, 16), 8792326144LL);
    /* Sharding never loses weights: tp * per-GPU >= total. */
    ck_assert_int_ge(8 * model_weight_bytes(&m, 8), model_weight_bytes(&m, 1));
}
END_TEST

/* ------------------------------------------------------------ KV bytes */

START_TEST(test_kv_bytes_per_token)
{
    model_spec m = tu_model("llama-7b");
    /* 2 (K and V) * 32 layers * 32 heads * 128 * 2 bytes = 524,288. */
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 1), 524288);
    /* tp 2: 16 KV heads per GPU -> 262,144. */
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 2), 262144);
    m = tu_model("llama-13b");
    /* 2 * 40 * 40 * 128 * 2 = 819,200. */
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 1), 819200);
    m = tu_model("llama-65b");
    /* 2 * 80 * 64 * 128 * 2 = 2,621,440; tp 4: 16 heads -> 655,360. */
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 1), 2621440);
    ck_assert_int_eq(model_kv_heads_per_gpu(&m, 4), 16);
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 4), 655360);
    m = tu_model("llama-2-70b");
    /* 2 * 80 * 8 * 128 * 2 = 327,680: 8x less than llama-65b's 2,621,440
     * thanks to GQA (8 KV heads instead of 64). */
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 1), 327680);
    ck_assert_int_eq(2621440 / model_kv_bytes_per_token(&m, 1), 8);
    /* tp 8: 1 KV head per GPU = 2*80*1*128*2 = 40,960; tp 16 replicates it:
     * still 1 head, still 40,960 per GPU. */
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 8), 40960);
    ck_assert_int_eq(model_kv_heads_per_gpu(&m, 16), 1);
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 16), 40960);
    m = tu_model("llama-7b-mqa");
    /* MQA: 2 * 32 * 1 * 128 * 2 = 16,384, 32x less than llama-7b. */
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 1), 16384);
    ck_assert_int_eq(524288 / 16384, 32);
}
END_TEST

START_TEST(test_check_tp)
{
    kvs_err err;
    model_spec m = tu_model("llama-2-70b");
    /* 64 heads, 8 KV heads, MLP 28672 = 2^12 * 7. */
    int64_t ok[] = {1, 2, 4, 8, 16, 32, 64};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ck_assert_int_eq(model_check_tp(&m, ok[i], &err), KVS_OK);
    ck_assert_int_eq(model_check_tp(&m, 0, &err), KVS_EINVAL);
    ck_assert_int_eq(model_check_tp(&m, 3, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--tp"));
    ck_assert_ptr_nonnull(strstr(err.msg, "heads"));
    ck_assert_int_eq(model_check_tp(&m, 128, &err), KVS_EINVAL);
    /* 12 heads, 6 KV heads: tp 4 divides the heads but 4 neither divides 6
     * nor is a multiple of it; tp 3 (shard 2 each) and tp 12 (replicate
     * each KV head twice) are fine. */
    model_spec h = {.name = "h12", .hidden = 768, .layers = 2, .heads = 12, .kv_heads = 6,
                    .head_dim = 64, .intermediate = 3072, .vocab = 1000, .max_ctx = 512,
                    .dtype_bytes = 2};
    ck_assert_int_eq(model_check_tp(&h, 4, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "KV heads"));
    ck_assert_int_eq(model_check_tp(&h, 3, &err), KVS_OK);
    ck_assert_int_eq(model_check_tp(&h, 12, &err), KVS_OK);
    ck_assert_int_eq(model_kv_heads_per_gpu(&h, 3), 2);
    ck_assert_int_eq(model_kv_heads_per_gpu(&h, 12), 1);
    /* MQA: any tp dividing the heads replicates the single KV head. */
    m = tu_model("llama-7b-mqa");
    ck_assert_int_eq(model_check_tp(&m, 8, &err), KVS_OK);
    ck_assert_int_eq(model_kv_heads_per_gpu(&m, 8), 1);
    /* The MLP must split evenly: 1000 % 16 != 0. */
    model_spec odd = {.name = "odd", .hidden = 1024, .layers = 2, .heads = 16, .kv_heads = 16,
                      .head_dim = 64, .intermediate = 1000, .vocab = 1000, .max_ctx = 512,
                      .dtype_bytes = 2};
    ck_assert_int_eq(model_check_tp(&odd, 16, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "MLP"));
}
END_TEST

/* ------------------------------------------------------ capacity */

START_TEST(test_activation_reserve)
{
    model_spec m = tu_model("llama-7b");
    /* 2048 tokens * (4*4096 + 3*11008) * 2 B = 2048 * 49,408 * 2 =
     * 202,375,168; logits 256 * 32000 * 4 = 32,768,000; sum 235,143,168. */
    ck_assert_int_eq(model_activation_reserve(&m, 1, 2048, 256), 235143168LL);
    /* tp 2: 2048 * (16384 + 3*5504) * 2 = 2048 * 32,896 * 2 = 134,742,016,
     * + 32,768,000 = 167,510,016. */
    ck_assert_int_eq(model_activation_reserve(&m, 2, 2048, 256), 167510016LL);
    /* Saturates instead of overflowing. */
    ck_assert_int_eq(model_activation_reserve(&m, 1, INT64_MAX / 2, 1), INT64_MAX);
}
END_TEST

START_TEST(test_capacity_llama7b_a100)
{
    model_spec m = tu_model("llama-7b");
    gpu_spec g = tu_gpu("a100-80g");
    kv_capacity c;
    kvs_err err;
    ck_assert_int_eq(model_kv_capacity(&m, &g, 1, 0.9, 16, 2048, 256, &c, &err), KVS_OK);
    /* usable = 80 GiB * 0.9 = 72 GiB = 77,309,411,328
     * weights = 2 * 6,738,415,616 = 13,476,831,232
     * activations = 235,143,168 (test_activation_reserve)
     * KV = 77,309,411,328 - 13,476,831,232 - 235,143,168 = 63,597,436,928
     * block = 16 * 524,288 = 8,388,608
     * blocks = floor(63,597,436,928 / 8,388,608) = 7,581 (7,581 blocks are
     * 63,594,037,248 bytes; 3,399,680 left, under one block)
     * tokens = 7,581 * 16 = 121,296. */
    ck_assert_int_eq(c.usable_bytes, 77309411328LL);
    ck_assert_int_eq(c.weight_bytes, 13476831232LL);
    ck_assert_int_eq(c.activation_bytes, 235143168LL);
    ck_assert_int_eq(c.kv_bytes, 63597436928LL);
    ck_assert_int_eq(c.block_bytes, 8388608);
    ck_assert_int_eq(c.kv_blocks, 7581);
    ck_assert_int_eq(c.kv_tokens, 121296);
    ck_assert_int_eq(c.kv_bytes_per_token, 524288);
    /* The same against the formula, as a cross-check of the struct. */
    ck_assert_int_eq(c.kv_blocks,
                     (c.usable_bytes - c.weight_bytes - c.activation_bytes) / c.block_bytes);
}
END_TEST

START_TEST(test_capacity_gqa_mqa_savings)
{
    gpu_spec g = tu_gpu("a100-80g");
    kv_capacity a, b;
    kvs_err err;
    model_spec m = tu_model("llama-7b"), q = tu_model("llama-7b-mqa");
    ck_assert_int_eq(model_kv_capacity(&m, &g, 1, 0.9, 16, 2048, 256, &a, &err), KVS_OK);
    ck_assert_int_eq(model_kv_capacity(&q, &g, 1, 0.9, 16, 2048, 256, &b, &err), KVS_OK);
    /* MQA: 32x smaller blocks and ~1 GiB fewer weights -> more than 32x the
     * tokens. */
    ck_assert_int_gt(b.kv_tokens, 32 * a.kv_tokens);
    /* llama-2-70b at tp 8 vs llama-65b at tp 8: 40,960 vs 327,680 KV bytes
     * per token per GPU. */
    model_spec l2 = tu_model("llama-2-70b"), l1 = tu_model("llama-65b");
    ck_assert_int_eq(model_kv_capacity(&l2, &g, 8, 0.9, 16, 4096, 256, &a, &err), KVS_OK);
    ck_assert_int_eq(model_kv_capacity(&l1, &g, 8, 0.9, 16, 4096, 256, &b, &err), KVS_OK);
    ck_assert_int_eq(a.kv_bytes_per_token, 40960);
    ck_assert_int_eq(b.kv_bytes_per_token, 327680);
    ck_assert_int_gt(a.kv_tokens, 7 * b.kv_tokens);
}
END_TEST

START_TEST(test_capacity_errors)
{
    model_spec m = tu_model("llama-65b");
    gpu_spec g = tu_gpu("a100-80g");
    kv_capacity c;
    kvs_err err;
    /* 121.6 GiB of weights do not fit in 72 GiB. */
    ck_assert_int_eq(model_kv_capacity(&m, &g, 1, 0.9, 16, 2048, 256, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "121.6 GiB"));
    ck_assert_ptr_nonnull(strstr(err.msg, "72.0 GiB"));
    ck_assert_ptr_nonnull(strstr(err.msg, "raise --tp"));
    /* tp 2: ~60.8 GiB each, fits. */
    ck_assert_int_eq(model_kv_capacity(&m, &g, 2, 0.9, 16, 2048, 256, &c, &err), KVS_OK);
    ck_assert_int_gt(c.kv_blocks, 0);
    /* Weights fit but a huge activation reserve does not:
     * 1,048,576 tokens * 49,408 * 2 B = 103.6 GB > 36 GiB - 12.6 GiB. */
    m = tu_model("llama-7b");
    g = tu_gpu("a100-40g");
    ck_assert_int_eq(model_kv_capacity(&m, &g, 1, 0.9, 16, 1048576, 256, &c, &err),
                     KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "activation reserve"));
    ck_assert_int_eq(model_kv_capacity(&m, &g, 3, 0.9, 16, 2048, 256, &c, &err), KVS_EINVAL);
    ck_assert_int_eq(model_kv_capacity(&m, &g, 1, 0.0, 16, 2048, 256, &c, &err), KVS_EINVAL);
    ck_assert_int_eq(model_kv_capacity(&m, &g, 1, 1.5, 16, 2048, 256, &c, &err), KVS_EINVAL);
    ck_assert_int_eq(model_kv_capacity(&m, &g, 1, 0.9, 0, 2048, 256, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--block-size"));
}
END_TEST

/* ------------------------------------------------------ config files */

static int conf(const char *text, model_spec *m, kvs_err *err)
{
    char *p = tu_write_file(tu_tmpdir(), "m.conf", text);
    int rc = model_lookup(p, m, err);
    free(p);
    return rc;
}

#define GOOD_BODY \
    "hidden = 256\nlayers = 4\nheads = 8\nkv_heads = 2\nhead_dim = 32\n" \
    "intermediate = 688\nvocab = 1024\nmax_ctx = 2048\ndtype_bytes = 2\n"

START_TEST(test_conf_files)
{
    model_spec m, b;
    kvs_err err;
    /* The shipped tiny model. */
    ck_assert_int_eq(model_lookup(KVSIM_SOURCE_DIR "/models/tiny.conf", &m, &err), KVS_OK);
    ck_assert_str_eq(m.name, "tiny");
    ck_assert_int_eq(m.hidden, 256);
    ck_assert_int_eq(m.kv_heads, 2);
    ck_assert_int_eq(m.intermediate, 688);
    /* 2 * 4 layers * 2 KV heads * 32 * 2 B = 1,024 bytes per token. */
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 1), 1024);
    /* The MQA example equals the built-in. */
    ck_assert_int_eq(model_lookup(KVSIM_SOURCE_DIR "/models/llama-7b-mqa.conf", &m, &err),
                     KVS_OK);
    b = tu_model("llama-7b-mqa");
    ck_assert_int_eq(memcmp(&m, &b, sizeof m), 0);
    /* name defaults to the file's base name; comments, blank lines and
     * trailing comments are fine; hidden != heads*head_dim is allowed. */
    ck_assert_int_eq(conf("# a comment\n\nname = my model # trailing\n" GOOD_BODY, &m, &err),
                     KVS_OK);
    ck_assert_str_eq(m.name, "my model");
    ck_assert_int_eq(conf("# c\n\nhidden = 300 # odd width\nlayers=4\nheads=8\nkv_heads=2\n"
                          "head_dim=32\nintermediate=688\nvocab=1024\nmax_ctx=2048\n"
                          "dtype_bytes=2\n",
                          &m, &err),
                     KVS_OK);
    ck_assert_str_eq(m.name, "m");
    ck_assert_int_eq(m.hidden, 300);
}
END_TEST

/* Each bad file and the "path:line:" its error must name. */
START_TEST(test_conf_errors)
{
    static const struct {
        const char *text;
        const char *want; /* substring of the error after the path */
    } cases[] = {
        {"name = x\nhidden = 256\nwidth = 3\n", ":3: unknown key 'width'"},
        {GOOD_BODY "hidden = 512\n", ":10: hidden: repeated (first set on line 1)"},
        {"hidden = 0\n", ":1: hidden: 0 is out of range"},
        {"\nlayers = -4\n", ":2: layers: -4 is out of range"},
        {"heads = 8x\n", ":1: heads: '8x' is not an integer"},
        {"heads =\n", ":1: heads: missing value"},
        {"just words\n", ":1: expected key=value"},
        {"dtype_bytes = 3\n", ":1: dtype_bytes: must be 1, 2 or 4"},
        {"vocab = 99999999999\n", ":1: vocab: 99999999999 is out of range"},
        /* kv_heads 3 does not divide heads 8: reported at the kv_heads line. */
        {"hidden = 256\nlayers = 4\nheads = 8\nkv_heads = 3\nhead_dim = 32\n"
         "intermediate = 688\nvocab = 1024\nmax_ctx = 2048\ndtype_bytes = 2\n",
         ":4: kv_heads: 3 does not divide heads 8"},
        /* Missing key: named, at the end of the file. */
        {"hidden = 256\nlayers = 4\nheads = 8\nkv_heads = 2\nhead_dim = 32\n"
         "intermediate = 688\nvocab = 1024\ndtype_bytes = 2\n",
         ":8: end of file: missing key 'max_ctx'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_spec m;
        kvs_err err;
        char *p = tu_write_file(tu_tmpdir(), "bad.conf", cases[i].text);
        ck_assert_int_eq(model_lookup(p, &m, &err), KVS_EINVAL);
        char want[512];
        snprintf(want, sizeof want, "%s%s", p, cases[i].want);
        ck_assert_msg(!strncmp(err.msg, want, strlen(want)), "case %zu: got '%s', want '%s'",
                      i, err.msg, want);
        free(p);
    }
    model_spec m;
    kvs_err err;
    ck_assert_int_eq(model_lookup("/nonexistent/x.conf", &m, &err), KVS_EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/x.conf"));
}
END_TEST

/* ------------------------------------------------------ per-op table */

START_TEST(test_ops_match_params)
{
    /* A simple model of the op table: at tp 1 one step reads every GEMM
     * weight once, so the weight bytes of QKV, O, gate/up, down (per layer,
     * times layers) plus the LM head equal (params - embedding - norms) * 2;
     * and the GEMM FLOPs of T tokens are 2*T per layer weight plus 2*R per
     * LM-head weight.  Weight bytes are isolated as bytes(T=0 rows). */
    const char *names[] = {"llama-7b", "llama-2-70b", "llama-7b-mqa"};
    for (size_t k = 0; k < 3; k++) {
        model_spec m = tu_model(names[k]);
        model_op gemms[] = {MODEL_OP_QKV, MODEL_OP_O_PROJ, MODEL_OP_MLP_GATE_UP,
                            MODEL_OP_MLP_DOWN};
        model_op_counts none = {0, 0, 0, 0, 0}, c = {100, 0, 10000, 1, 0};
        double wbytes = 0, flops = 0, f, y;
        for (int i = 0; i < 4; i++) {
            model_op_cost(&m, 1, gemms[i], &none, &f, &y);
            wbytes += y * (double)m.layers;
            model_op_cost(&m, 1, gemms[i], &c, &f, &y);
            flops += f * (double)m.layers;
        }
        model_op_cost(&m, 1, MODEL_OP_LM_HEAD, &none, &f, &y);
        wbytes += y;
        int64_t layer_w = model_param_count(&m) - 2 * m.vocab * m.hidden -
                          (2 * m.layers + 1) * m.hidden;
        ck_assert(wbytes == 2.0 * (double)(layer_w + m.vocab * m.hidden));
        ck_assert(flops == 2.0 * 100.0 * (double)(layer_w - 0));
    }
    /* Collectives only exist under tp > 1. */
    model_spec m = tu_model("llama-7b");
    ck_assert_int_eq(model_op_repeats(&m, 1, MODEL_OP_ALLREDUCE), 0);
    ck_assert_int_eq(model_op_repeats(&m, 2, MODEL_OP_ALLREDUCE), 64);
    ck_assert_int_eq(model_op_repeats(&m, 2, MODEL_OP_QKV), 32);
    ck_assert_str_eq(model_op_name(MODEL_OP_ATTN_DECODE), "attn_decode");
    ck_assert_str_eq(model_op_name(MODEL_OP_COUNT), "?");
    /* Ring all-reduce at tp 4 of 10 tokens: 2 * 3/4 * 10 * 4096 * 2 B =
     * 122,880 bytes. */
    model_op_counts c = {10, 0, 0, 0, 10};
    double f, y;
    model_op_cost(&m, 4, MODEL_OP_ALLREDUCE, &c, &f, &y);
    ck_assert(y == 122880.0);
    /* Decode attention of 1000 context tokens, llama-7b tp 1: K and V of 32
     * heads * 128 * 2 B per token = 16,384 B/token/layer -> 16,384,000 B,
     * plus Q and O of one decode 2 * 4096 * 2 = 16,384: 16,400,384 B.
     * FLOPs 4 * 1000 * 32 * 128 = 16,384,000. */
    model_op_counts d = {1, 1000, 0, 0, 1};
    model_op_cost(&m, 1, MODEL_OP_ATTN_DECODE, &d, &f, &y);
    ck_assert(y == 16400384.0);
    ck_assert(f == 16384000.0);
}
END_TEST

/* ------------------------------------------------ fit under engine rules */

/* model_fit_check_rule, model_kv_capacity_rule (built on it for the
 * engine rules, on model_kv_capacity_par for kvsim's) and model_kv_plan_eval
 * agree: over every built-in model and GPU, tp 1..8 and the three rules,
 * the layout fits exactly when the capacity rule leaves KV memory, and then
 * free_bytes is that KV memory; the plan's max batch is the blocks over a
 * request's blocks.  By hand: llama-3.1-70b on an A100-80GB
 * at tp 2 holds 65.7 GiB of weights per GPU; vLLM's rule at util 0.9
 * (0.9 x 79.57 = 71.6 GiB usable) less a 2048-token activation peak
 * (~0.6 GiB) and 2 x 1.79 GiB outside the tensors leaves ~1.9 GiB: it
 * fits, so the smallest tp is 2; kvsim's rule with a 131072-token budget
 * reserves ~15 GiB of activations at tp 2 and needs tp 4. */
START_TEST(test_fit_rule_matches_capacity)
{
    static const model_kv_rule rules[] = {MODEL_KV_RULE_KVSIM, MODEL_KV_RULE_VLLM,
                                          MODEL_KV_RULE_TRTLLM};
    kvs_err err;
    int n_fit = 0, n_unfit = 0;
    for (size_t i = 0; i < model_builtin_count(); i++)
        for (size_t j = 0; j < gpu_builtin_count(); j++)
            for (int64_t tp = 1; tp <= 8; tp *= 2)
                for (int r = 0; r < 3; r++) {
                    const model_spec *m = model_builtin_at(i);
                    const gpu_spec *g = gpu_builtin_at(j);
                    model_par p = {tp, 1, 1};
                    if (model_check_par(m, &p, NULL))
                        continue;
                    model_fit f;
                    kv_capacity c;
                    ck_assert_int_eq(model_fit_check_rule(m, g, &p, rules[r], 0.9, 2048, 256,
                                                          &f, &err), KVS_OK);
                    int rc = model_kv_capacity_rule(m, g, &p, rules[r], 0.9, 16, 2048, 256,
                                                    &c, &err);
                    ck_assert_msg(f.fits == (rc == KVS_OK), "%s on %s tp %lld rule %d",
                                  m->name, g->name, (long long)tp, r);
                    if (!f.fits) {
                        ck_assert_int_gt(f.missing_bytes, 0);
                        n_unfit++;
                        continue;
                    }
                    n_fit++;
                    ck_assert_int_eq(f.free_bytes, c.kv_bytes);
                    ck_assert_int_eq(f.nontorch_bytes, c.nontorch_bytes);
                    model_kv_budget b = {rules[r], 0.9, 16, 2048, 256};
                    model_kv_plan e;
                    ck_assert_int_eq(model_kv_plan_eval(m, g, &p, &b, 1000, &e, &err), KVS_OK);
                    ck_assert_int_eq(e.c.kv_blocks, c.kv_blocks);
                    ck_assert_int_eq(e.blocks_per_req, 63); /* ceil(1000 / 16) */
                    if (m->window_layers == 0)
                        ck_assert_int_eq(e.max_batch, c.kv_blocks / 63);
                }
    ck_assert_int_gt(n_fit, 100);
    ck_assert_int_gt(n_unfit, 10);

    model_spec m = tu_model("llama-3.1-70b");
    gpu_spec g = tu_gpu("a100-80g");
    model_par p1 = {1, 1, 1}, best;
    model_fit f;
    ck_assert_int_eq(model_fit_min_par_rule(&m, &g, &p1, MODEL_KV_RULE_VLLM, 0.9, 2048, 256,
                                            8, &best, &f, &err), KVS_OK);
    ck_assert_int_eq(best.tp, 2);
    ck_assert(f.free_bytes > (int64_t)1 << 30 && f.free_bytes < (int64_t)3 << 30);
    ck_assert_int_eq(model_fit_min_par_rule(&m, &g, &p1, MODEL_KV_RULE_KVSIM, 0.9, 131072, 256,
                                            8, &best, &f, &err), KVS_OK);
    ck_assert_int_eq(best.tp, 4);
}
END_TEST

/* ------------------------------------------------------ command line */

static int64_t json_i64(const char *json, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    ck_assert_msg(p != NULL, "key %s missing in %s", key, json);
    return strtoll(p + strlen(pat), NULL, 10);
}

START_TEST(test_cli_capacity_json)
{
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd,
             "%s capacity --engine vllm-v0 --model llama-2-70b --gpu h100-sxm --tp 4 "
             "--gpu-mem-util 0.85 --block-size 32 --seq-len 3000 --batch 7 --max-seqs 128 "
             "--json",
             tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    /* Exactly one JSON object on one line. */
    ck_assert_int_eq(out[0], '{');
    ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);
    ck_assert_ptr_eq(strchr(out, '}'), out + strlen(out) - 2);
    model_spec m = tu_model("llama-2-70b");
    gpu_spec g = tu_gpu("h100-sxm");
    kv_capacity c;
    kvs_err err;
    /* default --max-batched-tokens = max(2048, 4096) = 4096 */
    ck_assert_int_eq(model_kv_capacity(&m, &g, 4, 0.85, 32, 4096, 128, &c, &err), KVS_OK);
    ck_assert_int_eq(json_i64(out, "kv_bytes_per_token"), c.kv_bytes_per_token);
    ck_assert_int_eq(json_i64(out, "weight_bytes"), c.weight_bytes);
    ck_assert_int_eq(json_i64(out, "activation_bytes"), c.activation_bytes);
    ck_assert_int_eq(json_i64(out, "kv_bytes"), c.kv_bytes);
    ck_assert_int_eq(json_i64(out, "kv_blocks"), c.kv_blocks);
    ck_assert_int_eq(json_i64(out, "kv_tokens"), c.kv_tokens);
    ck_assert_int_eq(json_i64(out, "max_batched_tokens"), 4096);
    ck_assert_int_eq(json_i64(out, "tp"), 4);
    ck_assert_int_eq(json_i64(out, "seq_len"), 3000);
    ck_assert_int_eq(json_i64(out, "batch"), 7);
    /* 2 KV heads per GPU: 2*80*2*128*2 = 81,920 B/token; block 32 ->
     * 2,621,440 B.  3000 tokens = ceil(3000/32) = 94 blocks; 7 requests:
     * 7 * 94 * 2,621,440 = 1,724,907,520 B (block-rounded) vs
     * 7 * 3000 * 81,920 = 1,720,320,000 B exact. */
    ck_assert_int_eq(json_i64(out, "kv_bytes_per_token"), 81920);
    ck_assert_int_eq(json_i64(out, "request_kv_bytes"), 1724907520LL);
    ck_assert_int_eq(json_i64(out, "request_kv_bytes_exact"), 1720320000LL);
    ck_assert_int_eq(json_i64(out, "max_batch"), c.kv_blocks / 94);
    ck_assert_ptr_nonnull(strstr(out, "\"fits\": true"));
    free(out);

    /* The default engine, vllm-v1, sizes the cache by vLLM's rule with its
     * defaults on an H100 (>= 70 GiB, not an A100): token budget 8192 (it
     * sizes the activation peak) and the --max-seqs given; the JSON is
     * exactly model_kv_capacity_rule's figures, the blocks `kvsim run` gets. */
    snprintf(cmd, sizeof cmd,
             "%s capacity --model llama-2-70b --gpu h100-sxm --tp 4 --gpu-mem-util 0.85 "
             "--block-size 32 --seq-len 3000 --max-seqs 128 --json",
             tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    model_par p4 = {4, 1, 1};
    ck_assert_int_eq(model_kv_capacity_rule(&m, &g, &p4, MODEL_KV_RULE_VLLM, 0.85, 32, 8192,
                                            128, &c, &err), KVS_OK);
    ck_assert_ptr_nonnull(strstr(out, "\"engine\": \"vllm-v1\", \"kv_rule\": \"vllm\""));
    ck_assert_int_eq(json_i64(out, "max_batched_tokens"), 8192);
    ck_assert_int_eq(json_i64(out, "activation_bytes"), c.activation_bytes);
    ck_assert_int_eq(json_i64(out, "nontorch_bytes"), c.nontorch_bytes);
    ck_assert_int_eq(json_i64(out, "usable_bytes"), c.usable_bytes);
    ck_assert_int_eq(json_i64(out, "kv_bytes"), c.kv_bytes);
    ck_assert_int_eq(json_i64(out, "kv_blocks"), c.kv_blocks);
    /* usable - weights - activations - non-torch = the KV bytes */
    ck_assert_int_eq(c.usable_bytes - c.weight_bytes - c.activation_bytes - c.nontorch_bytes,
                     c.kv_bytes);
    ck_assert_int_eq(json_i64(out, "max_batch"), c.kv_blocks / 94);
    free(out);

    /* Defaults: seq-len = max_ctx 2048, batch 1; llama-7b on a100-80g gives
     * the 7,581 blocks of test_capacity_llama7b_a100 under kvsim's own rule
     * (vllm-v0); 2048/16 = 128 blocks per request -> max batch
     * floor(7581/128) = 59. */
    snprintf(cmd, sizeof cmd, "%s capacity --engine vllm-v0 --model llama-7b --gpu a100-80g "
             "--json", tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_int_eq(json_i64(out, "kv_blocks"), 7581);
    ck_assert_int_eq(json_i64(out, "max_batch"), 59);
    ck_assert_int_eq(json_i64(out, "seq_len"), 2048);
    free(out);

    /* A model that does not fit is reported too (fits: false, the GiB
     * missing, the smallest tp that fits), not an error (issue 13). */
    snprintf(cmd, sizeof cmd, "%s capacity --model llama-65b --gpu a100-80g", tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "fits: false"));
    ck_assert_ptr_nonnull(strstr(out, "raise --tp"));
    free(out);

    /* A batch that does not fit is reported, not an error. */
    snprintf(cmd, sizeof cmd,
             "%s capacity --engine vllm-v0 --model llama-7b --gpu a100-80g --batch=60 --json",
             tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"fits\": false"));
    free(out);
}
END_TEST

START_TEST(test_cli_bad_flags)
{
    static const struct {
        const char *args;
        const char *want;
    } cases[] = {
        {"capacity --model nope --gpu a100-80g", "llama-2-70b"},
        {"capacity --model llama-7b --gpu v100", "a100-80g"},
        {"capacity --model llama-2-70b --gpu a100-80g --tp 3", "--tp"},
        {"capacity --model llama-7b --gpu a100-80g --gpu-mem-util 1.5", "--gpu-mem-util"},
        {"capacity --model llama-7b --gpu a100-80g --block-size 0", "--block-size"},
        {"capacity --model llama-7b --gpu a100-80g --seq-len x", "--seq-len"},
        {"capacity --model llama-7b --gpu a100-80g --batch", "--batch"},
        {"capacity --model llama-7b --gpu a100-80g --frobnicate", "--frobnicate"},
        {"capacity --gpu a100-80g", "--model"},
        {"models --bogus", "--bogus"},
        {"gpus extra", "extra"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[512], *out;
        snprintf(cmd, sizeof cmd, "%s %s", tu_kvsim(), cases[i].args);
        ck_assert_int_eq(tu_run(cmd, &out), 2);
        ck_assert_msg(strstr(out, cases[i].want) != NULL, "%s: '%s'", cases[i].args, out);
        /* one line */
        ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);
        free(out);
    }
}
END_TEST

START_TEST(test_cli_lists_and_help)
{
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd, "%s models --json", tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    for (size_t i = 0; i < model_builtin_count(); i++) {
        char pat[300];
        snprintf(pat, sizeof pat, "\"name\": \"%s\"", model_builtin_at(i)->name);
        ck_assert_ptr_nonnull(strstr(out, pat));
    }
    ck_assert_ptr_nonnull(strstr(out, "\"params\": 6738415616"));
    ck_assert_ptr_nonnull(strstr(out, "hypothetical"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s models", tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "hypothetical"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s gpus --json", tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"name\": \"h200\", \"mem_bytes\": 141000000000"));
    free(out);
    const char *help[] = {"models", "gpus", "capacity"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "%s %s --help", tu_kvsim(), help[i]);
        ck_assert_int_eq(tu_run(cmd, &out), 0);
        ck_assert_ptr_nonnull(strstr(out, "usage: kvsim"));
        ck_assert_ptr_nonnull(strstr(out, "--json"));
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s capacity --help", tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    const char *flags[] = {"--model", "--gpu ", "--tp", "--gpu-mem-util", "--block-size",
                           "--seq-len", "--batch", "--max-batched-tokens", "--max-seqs"};
    for (int i = 0; i < 9; i++)
        ck_assert_msg(strstr(out, flags[i]) != NULL, "%s not in help", flags[i]);
    free(out);
    /* A config file works on the command line, human table included. */
    snprintf(cmd, sizeof cmd, "%s capacity --model %s/models/tiny.conf --gpu a100-40g",
             tu_kvsim(), KVSIM_SOURCE_DIR);
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "KV bytes per token"));
    free(out);
}
END_TEST


/* ------------------------------------------------------------ 2026 */

START_TEST(test_gpus_2026)
{
    /* The four original parts keep their figures (test_gpu_figures) and
     * gain per-precision peaks: A100 has no FP8 units, Hopper 2x FP16. */
    ck_assert(tu_gpu("a100-80g").fp8_flops == 0 && tu_gpu("a100-80g").int8_ops == 624e12);
    ck_assert(tu_gpu("h100-sxm").fp8_flops == 1979e12 && tu_gpu("h200").fp8_flops == 1979e12);
    ck_assert_int_eq(tu_gpu("h100-sxm").mem_runtime_bytes, 81559LL << 20);
    /* The eleven added: every figure positive, bf16 = fp16, FP4 on Blackwell only. */
    const char *added[] = {"h100-pcie", "h100-nvl", "h20", "gh200", "l40s", "l4", "a10g",
                           "b200", "gb200", "mi300x", "mi325x"};
    for (size_t i = 0; i < sizeof added / sizeof added[0]; i++) {
        gpu_spec g = tu_gpu(added[i]);
        ck_assert(g.mem_bytes > 0 && g.hbm_Bps > 0 && g.fp16_flops > 0 && g.nvlink_Bps > 0 &&
                  g.host_link_Bps > 0 && g.int8_ops > 0);
        ck_assert(g.bf16_flops == g.fp16_flops);
        int blackwell = !strcmp(added[i], "b200") || !strcmp(added[i], "gb200");
        ck_assert(blackwell ? g.fp4_flops == 2 * g.fp8_flops : g.fp4_flops == 0);
        ck_assert(strcmp(added[i], "a10g") ? g.fp8_flops > 0 : g.fp8_flops == 0);
        ck_assert(g.mem_runtime_bytes == 0 || g.mem_runtime_bytes == g.mem_bytes);
    }
    /* Datasheet figures (models/gpu.c cites each source). */
    ck_assert(tu_gpu("b200").fp8_flops == 4500e12 && tu_gpu("b200").hbm_Bps == 8e12);
    ck_assert(tu_gpu("mi300x").fp16_flops == 1307.4e12 && tu_gpu("mi300x").mem_bytes == 192000000000LL);
    ck_assert(tu_gpu("mi325x").mem_bytes == 256000000000LL && tu_gpu("mi325x").hbm_Bps == 6.0e12);
    ck_assert(tu_gpu("l40s").fp8_flops == 733e12 && tu_gpu("l4").hbm_Bps == 300e9);
    ck_assert(tu_gpu("h20").fp16_flops == 148e12 && tu_gpu("h100-nvl").hbm_Bps == 3.9e12);
    /* GH200: the H100's compute beside 96 GB HBM3 at 4 TB/s and a 450 GB/s
     * NVLink-C2C host link (its swap and offload run at that rate). */
    ck_assert(tu_gpu("gh200").fp8_flops == tu_gpu("h100-sxm").fp8_flops &&
              tu_gpu("gh200").hbm_Bps == 4.0e12 && tu_gpu("gh200").host_link_Bps == 450e9);
    ck_assert_uint_eq(gpu_builtin_count(), 15);
}
END_TEST

START_TEST(test_dtypes)
{
    kvs_err err;
    ck_assert_int_eq(model_dtype_parse("bfloat16"), MODEL_DTYPE_BF16);
    ck_assert_int_eq(model_dtype_parse("fp8"), MODEL_DTYPE_FP8);
    ck_assert_int_eq(model_dtype_parse("mxfp4"), MODEL_DTYPE_FP4);
    ck_assert_int_eq(model_dtype_parse("fp6"), -1);
    ck_assert_str_eq(model_dtype_name(MODEL_DTYPE_INT4), "int4");
    ck_assert_int_eq(model_dtype_bits(MODEL_DTYPE_FP8), 8);
    model_spec m = tu_model("llama-7b");
    ck_assert_int_eq(model_weight_dtype(&m), MODEL_DTYPE_FP16);
    ck_assert_int_eq(model_kv_dtype(&m), MODEL_DTYPE_FP16);
    /* fp32 weights: 4 bytes of everything (activations follow) */
    ck_assert_int_eq(model_set_weight_dtype(&m, MODEL_DTYPE_FP32, &err), KVS_OK);
    ck_assert_int_eq(model_weight_bytes(&m, 1), 4 * model_param_count(&m));
    /* fp8 weights: 1 byte per linear weight, embeddings and norms 2 */
    m = tu_model("llama-7b");
    ck_assert_int_eq(model_set_weight_dtype(&m, MODEL_DTYPE_FP8, &err), KVS_OK);
    int64_t linear = 32LL * (4 * 4096 * 4096 + 3 * 4096 * 11008);
    ck_assert_int_eq(model_weight_bytes(&m, 1), linear + 2 * (model_param_count(&m) - linear));
    ck_assert_int_eq(model_kv_bytes_per_token(&m, 1), 524288);
    ck_assert_int_eq(model_set_weight_dtype(&m, MODEL_DTYPE_AUTO, &err), KVS_OK);
    ck_assert_int_eq(model_weight_bytes(&m, 1), 2 * model_param_count(&m));
}
END_TEST

START_TEST(test_fit_and_min_tp)
{
    kvs_err err;
    gpu_spec h = tu_gpu("h100-sxm");
    model_spec m = tu_model("llama-3.1-70b");
    model_par p = {1, 1, 1}, best;
    model_fit f;
    /* does not fit on one H100: fits 0, KVS_OK, the shortfall in bytes */
    ck_assert_int_eq(model_fit_check(&m, &h, &p, 0.9, 2048, 256, &f, &err), KVS_OK);
    ck_assert_int_eq(f.fits, 0);
    ck_assert_int_eq(f.free_bytes, 0);
    ck_assert_int_eq(f.missing_bytes, f.weight_bytes + f.activation_bytes - f.usable_bytes);
    ck_assert_int_eq(f.weight_bytes, model_weight_bytes(&m, 1));
    /* 141 GB of bf16 weights: tp 2 (70.6 GB + reserve in 72 GiB) fits */
    ck_assert_int_eq(model_fit_min_par(&m, &h, &p, 0.9, 2048, 256, 8, &best, &f, &err), KVS_OK);
    ck_assert_int_eq(best.tp, 2);
    ck_assert_int_eq(best.ep, 1);
    ck_assert_int_eq(f.fits, 1);
    ck_assert_int_eq(f.free_bytes, f.usable_bytes - f.weight_bytes - f.activation_bytes);
    /* DeepSeek-V3 in FP8 (~673 GB) needs 16 H100s; up to 8: none, and
     * the shortfall at tp 8 */
    model_spec d = tu_model("deepseek-v3");
    ck_assert_int_eq(model_fit_min_par(&d, &h, &p, 0.9, 2048, 256, 8, &best, &f, &err), KVS_OK);
    ck_assert_int_eq(best.tp, 0);
    ck_assert_int_eq(f.fits, 0);
    ck_assert_int_gt(f.missing_bytes, 0);
    ck_assert_int_eq(model_fit_min_par(&d, &h, &p, 0.9, 2048, 256, 16, &best, &f, &err), KVS_OK);
    ck_assert_int_eq(best.tp, 16);
    /* eight H200s hold it */
    gpu_spec h2 = tu_gpu("h200");
    ck_assert_int_eq(model_fit_min_par(&d, &h2, &p, 0.9, 2048, 256, 8, &best, &f, &err), KVS_OK);
    ck_assert_int_eq(best.tp, 8);
    /* errors stay errors */
    ck_assert_int_eq(model_fit_check(&m, &h, &p, 1.5, 2048, 256, &f, &err), KVS_EINVAL);
    model_par bad = {3, 1, 1};
    ck_assert_int_eq(model_fit_check(&m, &h, &bad, 0.9, 2048, 256, &f, &err), KVS_EINVAL);
}
END_TEST

START_TEST(test_expert_parallel)
{
    kvs_err err;
    model_spec q = tu_model("qwen3-235b-a22b");
    model_par p1 = {8, 1, 1}, p2 = {8, 2, 1};
    /* ep 2 halves the routed experts on each GPU: 94 layers * 64 experts *
     * 3*4096*1536 weights / tp 8 fewer, * 2 bytes (to a byte of rounding) */
    int64_t saved = model_weight_bytes_par(&q, &p1) - model_weight_bytes_par(&q, &p2);
    int64_t want = 94LL * 64 * 3 * 4096 * 1536 / 8 * 2;
    ck_assert_int_le(llabs(saved - want), 2);
    ck_assert_int_eq(model_weight_bytes_par(&q, &p1), model_weight_bytes(&q, 8));
    /* capacity under ep: more room for KV than at ep 1 */
    gpu_spec h = tu_gpu("h200");
    kv_capacity a, b;
    ck_assert_int_eq(model_kv_capacity_par(&q, &h, &p1, 0.9, 16, 2048, 256, &a, &err), KVS_OK);
    ck_assert_int_eq(model_kv_capacity_par(&q, &h, &p2, 0.9, 16, 2048, 256, &b, &err), KVS_OK);
    ck_assert_int_gt(b.kv_blocks, a.kv_blocks);
    ck_assert_int_eq(b.kv_bytes, b.usable_bytes - b.weight_bytes - b.activation_bytes);
    /* ep needs experts; at most one per ep rank */
    model_spec l = tu_model("llama-3-8b");
    model_par bad = {1, 2, 1};
    ck_assert_int_eq(model_check_par(&l, &bad, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--ep"));
    model_spec mx = tu_model("mixtral-8x7b");
    model_par many = {1, 16, 1};
    ck_assert_int_eq(model_check_par(&mx, &many, &err), KVS_EINVAL);
    model_par cp0 = {1, 1, 0};
    ck_assert_int_eq(model_check_par(&mx, &cp0, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--cp"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("models");
    TCase *t = tcase_create("models");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_builtin_shapes);
    tcase_add_test(t, test_unknown_names);
    tcase_add_test(t, test_gpu_figures);
    tcase_add_test(t, test_usable_bytes);
    tcase_add_test(t, test_param_counts);
    tcase_add_test(t, test_weight_bytes);
    tcase_add_test(t, test_kv_bytes_per_token);
    tcase_add_test(t, test_check_tp);
    tcase_add_test(t, test_activation_reserve);
    tcase_add_test(t, test_capacity_llama7b_a100);
    tcase_add_test(t, test_capacity_gqa_mqa_savings);
    tcase_add_test(t, test_capacity_errors);
    tcase_add_test(t, test_conf_files);
    tcase_add_test(t, test_conf_errors);
    tcase_add_test(t, test_ops_match_params);
    tcase_add_test(t, test_cli_capacity_json);
    tcase_add_test(t, test_cli_bad_flags);
    tcase_add_test(t, test_cli_lists_and_help);
    tcase_add_test(t, test_gpus_2026);
    tcase_add_test(t, test_dtypes);
    tcase_add_test(t, test_fit_and_min_tp);
    tcase_add_test(t, test_fit_rule_matches_capacity);
    tcase_add_test(t, test_expert_parallel);
    suite_add_tcase(s, t);
    return tu_run_suites(&s, 1);
}
