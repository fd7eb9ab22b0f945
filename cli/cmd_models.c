/* cmd_models.c — `kvsim models`, `kvsim gpus`, `kvsim capacity`: list the
 * built-in shapes, the shipped Hugging Face configs (aliases) and GPUs, and
 * print the KV memory arithmetic of models/model.h for one configuration
 * (weight and KV dtypes, tensor, expert and context parallelism, whether
 * the model fits at all), optionally side by side over TP degrees
 * (--compare-tp) and attention variants (--compare-attn: MHA, the model's
 * own GQA, MQA).  `kvsim capacity --search` (load and TP capacity against
 * SLOs, by simulation) is cmd_capacity_search.c. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../base/str.h"
#include "../models/model.h"
#include "capacity_search.h"
#include "cli.h"

#define GIB_F 1073741824.0

/* "MHA", "GQA", "MQA" or "MLA" (model_attn_kind, upper case). */
static const char *attn_kind(const model_spec *m)
{
    const char *k = model_attn_kind(m);
    return !strcmp(k, "mla") ? "MLA" : !strcmp(k, "mha") ? "MHA" : !strcmp(k, "mqa") ? "MQA"
                                                                                        : "GQA";
}

/* KV bytes per token at tp 1 with the KV cache in dt (0 if m cannot take it). */
static int64_t kv_bpt_as(const model_spec *m, model_dtype dt)
{
    model_spec v = *m;
    if (model_set_kv_dtype(&v, dt, NULL))
        return 0;
    return model_kv_bytes_per_token(&v, 1);
}

/* Only --json is accepted; returns 0/1 in *json, or exit status 2. */
static int parse_json_only(const char *cmd, int argc, char **argv, int *json)
{
    *json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            *json = 1;
        else
            return cli_fail(cmd, "unknown argument '%s' (try --help)", argv[i]);
    }
    return 0;
}

/* One entry of `kvsim models`: built-in i (alias NULL) or a shipped alias. */
typedef struct models_entry {
    model_spec m;
    const char *alias, *hub, *note;
    int ok;              /* 0: the alias's config.json could not be read */
    char why[1024];
} models_entry;

static void models_entry_json(const models_entry *e, int first)
{
    const model_spec *m = &e->m;
    printf("%s\n  {\"name\": ", first ? "" : ",");
    str_json_write(stdout, e->alias ? e->alias : m->name);
    if (!e->ok) {
        printf(", \"alias\": true, \"hub_path\": ");
        str_json_write(stdout, e->hub);
        printf(", \"error\": ");
        str_json_write(stdout, e->why);
        printf("}");
        return;
    }
    printf(", \"hidden\": %" PRId64 ", \"layers\": %" PRId64 ", \"heads\": %" PRId64
           ", \"kv_heads\": %" PRId64 ", \"head_dim\": %" PRId64
           ", \"intermediate\": %" PRId64 ", \"vocab\": %" PRId64
           ", \"max_ctx\": %" PRId64 ", \"dtype_bytes\": %" PRId64
           ", \"attention\": \"%s\", \"params\": %" PRId64
           ", \"weight_bytes\": %" PRId64 ", \"kv_bytes_per_token\": %" PRId64
           ", \"note\": ",
           m->hidden, m->layers, m->heads, m->kv_heads, m->head_dim, m->intermediate,
           m->vocab, m->max_ctx, m->dtype_bytes, attn_kind(m), model_param_count(m),
           model_weight_bytes(m, 1), model_kv_bytes_per_token(m, 1));
    str_json_write(stdout, e->note);
    printf(", \"alias\": %s, \"hub_path\": ", e->alias ? "true" : "false");
    if (e->hub)
        str_json_write(stdout, e->hub);
    else
        printf("null");
    printf(", \"arch\": ");
    str_json_write(stdout, m->arch[0] ? m->arch : "llama");
    printf(", \"params_total\": %" PRId64 ", \"params_active\": %" PRId64
           ", \"experts\": %" PRId64 ", \"experts_per_tok\": %" PRId64
           ", \"weight_dtype\": \"%s\", \"kv_dtype\": \"%s\""
           ", \"kv_bytes_per_token_fp16\": %" PRId64 ", \"kv_bytes_per_token_fp8\": %" PRId64
           ", \"window_layers\": %" PRId64 ", \"window\": %" PRId64
           ", \"context_limit\": %" PRId64 "}",
           model_params_total(m), model_params_active(m), m->experts, m->experts_per_tok,
           model_dtype_name(model_weight_dtype(m)), model_dtype_name(model_kv_dtype(m)),
           kv_bpt_as(m, MODEL_DTYPE_FP16), kv_bpt_as(m, MODEL_DTYPE_FP8), m->window_layers,
           m->window, model_context_limit(m));
}

static void models_entry_text(const models_entry *e)
{
    const model_spec *m = &e->m;
    const char *name = e->alias ? e->alias : m->name;
    if (!e->ok) {
        printf("%-18s (%s: %s)\n", name, e->hub, e->why);
        return;
    }
    char ctx[48];
    int64_t lim = model_context_limit(m);
    if (lim > m->max_ctx)
        snprintf(ctx, sizeof ctx, "%" PRId64 "/%" PRId64, m->max_ctx, lim);
    else
        snprintf(ctx, sizeof ctx, "%" PRId64, m->max_ctx);
    printf("%-18s %-11.11s %6" PRId64 " %6" PRId64 " %5" PRId64 " %5" PRId64 " %8" PRId64
           " %6" PRId64 " %6" PRId64 " %14s %5s %8.2fB %8.2fB %10" PRId64 " %9" PRId64
           " %5s  %s%s%s\n",
           name, m->arch[0] ? m->arch : "llama", m->hidden, m->layers, m->heads, m->kv_heads,
           m->head_dim, m->intermediate, m->vocab, ctx, attn_kind(m),
           (double)model_params_total(m) / 1e9, (double)model_params_active(m) / 1e9,
           kv_bpt_as(m, MODEL_DTYPE_FP16), kv_bpt_as(m, MODEL_DTYPE_FP8),
           model_dtype_name(model_weight_dtype(m)), e->hub ? e->hub : "",
           e->hub && e->note[0] ? "; " : "", e->note);
}

int cmd_models(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        printf("usage: kvsim models [--json]\n\n"
               "List the built-in models (released LLaMA configs) and the shipped Hugging\n"
               "Face configs (aliases such as llama-3.1-8b, deepseek-v3, under models/hf/)\n"
               "with their architecture, shapes, total and active parameters, attention\n"
               "kind, KV bytes per token at tp 1 with an fp16 and an fp8 KV cache, and\n"
               "context (max_position_embeddings / the limit rope scaling allows).  Any\n"
               "model flag also takes a .conf file (see models/tiny.conf) or a config.json.\n\n"
               "  --json   one JSON object {\"models\": [...]} instead of a table (default: off)\n"
               "  --help   this text\n");
        return CLI_EXIT_OK;
    }
    int json;
    if (parse_json_only("models", argc, argv, &json))
        return CLI_EXIT_ERR;
    size_t nb = model_builtin_count(), na = model_alias_count();
    if (json)
        printf("{\"models\": [");
    else
        printf("%-18s %-11s %6s %6s %5s %5s %8s %6s %6s %14s %5s %9s %9s %10s %9s %5s  %s\n",
               "model", "arch", "hidden", "layers", "heads", "kv", "head_dim", "inter", "vocab",
               "ctx", "attn", "params", "active", "KV B/token", "KV B fp8", "wt", "note");
    for (size_t i = 0; i < nb + na; i++) {
        models_entry e;
        memset(&e, 0, sizeof e);
        e.ok = 1;
        e.note = "";
        if (i < nb) {
            e.m = *model_builtin_at(i);
            e.note = model_builtin_note(i);
        } else {
            kvs_err err;
            e.alias = model_alias_at(i - nb, &e.hub);
            if (model_lookup(e.alias, &e.m, &err)) {
                e.ok = 0;
                snprintf(e.why, sizeof e.why, "%s", err.msg);
            }
        }
        if (json)
            models_entry_json(&e, i == 0);
        else
            models_entry_text(&e);
    }
    if (json) {
        printf("\n]}\n");
        return CLI_EXIT_OK;
    }
    printf("\nparams counts embedding, layers, norms and the untied LM head (all experts;\n"
           "active: the experts one token uses); KV bytes per token at tp 1 = 2 * layers *\n"
           "kv_heads * head_dim * bytes (MLA: layers * (kv_lora_rank + rope dim) * bytes),\n"
           "with an fp16 and an fp8 KV cache; ctx is max_position_embeddings, /N the limit\n"
           "rope scaling allows; wt the weight dtype of the checkpoint.\n");
    return CLI_EXIT_OK;
}

int cmd_gpus(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        printf("usage: kvsim gpus [--json]\n\n"
               "List the built-in GPUs with their datasheet figures (see models/gpu.c\n"
               "for the sources): HBM bytes and the memory the runtime reports, peak HBM\n"
               "bandwidth, dense tensor peaks per precision (FP16/BF16, FP8, INT8, FP4;\n"
               "'-' where the GPU has no such units), host link (PCIe) and NVLink\n"
               "bandwidth per direction.\n\n"
               "  --json   one JSON object {\"gpus\": [...]} instead of a table (default: off)\n"
               "  --help   this text\n");
        return CLI_EXIT_OK;
    }
    int json;
    if (parse_json_only("gpus", argc, argv, &json))
        return CLI_EXIT_ERR;
    size_t n = gpu_builtin_count();
    if (json) {
        printf("{\"gpus\": [");
        for (size_t i = 0; i < n; i++) {
            const gpu_spec *g = gpu_builtin_at(i);
            printf("%s\n  {\"name\": ", i ? "," : "");
            str_json_write(stdout, g->name);
            printf(", \"mem_bytes\": %" PRId64 ", \"hbm_Bps\": %.17g, \"fp16_flops\": %.17g"
                   ", \"host_link_Bps\": %.17g, \"nvlink_Bps\": %.17g"
                   ", \"bf16_flops\": %.17g, \"fp8_flops\": %.17g, \"int8_ops\": %.17g"
                   ", \"fp4_flops\": %.17g, \"mem_runtime_bytes\": %" PRId64 "}",
                   g->mem_bytes, g->hbm_Bps, g->fp16_flops, g->host_link_Bps, g->nvlink_Bps,
                   g->bf16_flops, g->fp8_flops, g->int8_ops, g->fp4_flops,
                   g->mem_runtime_bytes ? g->mem_runtime_bytes : g->mem_bytes);
        }
        printf("\n]}\n");
        return CLI_EXIT_OK;
    }
    printf("%-10s %16s %9s %11s %8s %8s %12s %8s %8s %8s %11s %12s\n", "gpu", "mem bytes",
           "mem GiB", "runtime GiB", "HBM TB/s", "HBM GB/s", "FP16 TFLOP/s", "FP8", "INT8",
           "FP4", "PCIe GB/s", "NVLink GB/s");
    for (size_t i = 0; i < n; i++) {
        const gpu_spec *g = gpu_builtin_at(i);
        int64_t rt = g->mem_runtime_bytes ? g->mem_runtime_bytes : g->mem_bytes;
        char pk[3][16];
        double v[3] = {g->fp8_flops, g->int8_ops, g->fp4_flops};
        for (int k = 0; k < 3; k++) {
            if (v[k] > 0)
                snprintf(pk[k], sizeof pk[k], "%.0f", v[k] / 1e12);
            else
                snprintf(pk[k], sizeof pk[k], "-");
        }
        printf("%-10s %16" PRId64 " %9.1f %11.1f %8.3f %8.0f %12.0f %8s %8s %8s %11.0f %12.0f\n",
               g->name, g->mem_bytes, (double)g->mem_bytes / GIB_F, (double)rt / GIB_F,
               g->hbm_Bps / 1e12, g->hbm_Bps / 1e9, g->fp16_flops / 1e12, pk[0], pk[1], pk[2],
               g->host_link_Bps / 1e9, g->nvlink_Bps / 1e9);
    }
    printf("\nTFLOP/s (INT8: TOP/s) are dense (no sparsity); FP16 is also BF16; link\n"
           "figures are per direction; runtime GiB is the total nvidia-smi / rocm-smi\n"
           "reports (the datasheet figure where none is recorded).\n");
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------- capacity */

#define CAP_MAX_TP 16
#define CAP_FIT_MAX_TP 1024 /* largest tp (x ep) model_fit_min_par tries */

typedef struct cap_args {
    const char *model, *gpu;
    int64_t tp, ep, cp, block_size, seq_len, batch, max_batched_tokens, max_seqs;
    int64_t max_model_len;      /* --max-model-len; 0 = the model's max_ctx */
    double util;
    int json;
    int64_t cmp_tp[CAP_MAX_TP]; /* --compare-tp degrees, [n_cmp_tp] */
    int n_cmp_tp;
    int cmp_attn;               /* --compare-attn */
} cap_args;

static void capacity_usage(void)
{
    printf("usage: kvsim capacity --model M --gpu G [options]\n\n"
           "KV memory arithmetic for one model on one GPU (per GPU under tensor, expert\n"
           "and context parallelism): KV bytes per token, weights, activation reserve, KV\n"
           "blocks and tokens, the largest batch of --seq-len requests and the longest\n"
           "single request that fit.  A model that does not fit is reported (fits: false,\n"
           "the GiB missing per GPU, the smallest TP, or TP x EP for MoE, that fits), not\n"
           "an error.\n\n"
           "  --model M                built-in name or alias (kvsim models), a .conf path or\n"
           "                           a Hugging Face config.json (required)\n"
           "  --gpu G                  built-in GPU (kvsim gpus) (required)\n"
           "  --tp N                   tensor-parallel degree (default 1)\n"
           "  --ep N                   expert-parallel degree, MoE models only (default 1)\n"
           "  --cp N                   context-parallel degree: each of N groups of tp GPUs\n"
           "                           holds ceil(context/N) tokens of every request (default 1)\n"
           "  --dtype D                weight dtype: fp32 fp16 bf16 fp8 int8 int4 fp4\n"
           "                           (default: the checkpoint's)\n"
           "  --kv-cache-dtype D       KV-cache dtype: fp32 fp16 bf16 fp8 (default: the model's)\n"
           "  --gpu-mem-util F         fraction of HBM kvsim may use, (0, 1] (default 0.9)\n"
           "  --block-size N           tokens per KV block (default 16)\n"
           "  --max-model-len N        longest context served; at most the model's context\n"
           "                           limit (rope scaling included) (default: its max_ctx)\n"
           "  --seq-len L              tokens per request (default: --max-model-len)\n"
           "  --batch B                requests of --seq-len to check (default 1)\n"
           "  --max-batched-tokens N   tokens per step, sizes the activation reserve\n"
           "                           (default max(2048, max_ctx))\n"
           "  --max-seqs N             sequences per step, sizes the logits reserve and caps\n"
           "                           the batch (default 256)\n"
           "  --compare-tp N,...       also a table over these TP degrees: per-GPU KV bytes\n"
           "                           per token, weights, KV blocks and max batch; degrees\n"
           "                           that do not fit are rows with fits false (default: off)\n"
           "  --compare-attn           also a table over attention variants of the model at\n"
           "                           --tp: MHA (kv_heads = heads), its own GQA, MQA\n"
           "                           (kv_heads = 1), with the KV saving vs MHA (default: off)\n"
           "  --json                   print one JSON object instead of a table (default: off)\n"
           "  --help                   this text\n\n"
           "Load and hardware planning by simulation against SLOs (the highest arrival rate,\n"
           "the smallest TP): kvsim capacity --search rate|tp --slo ... (see\n"
           "kvsim capacity --search rate --help).\n\n"
           "request_kv_bytes = batch * paged KV bytes of one request per GPU (whole blocks\n"
           "of each layer group, ceil(seq_len/cp) tokens; sliding-window layers at most\n"
           "their window); request_kv_bytes_exact = the same without block rounding.\n"
           "max_batch = the requests of --seq-len the KV blocks hold, ignoring the\n"
           "scheduler's watermark; max_batch_effective = min(max_batch, --max-seqs).\n");
}

/* --compare-tp "1,2,4,8": distinct degrees in [1, 1024]. */
static int parse_tp_list(const char *C, const char *arg, cap_args *a)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return cli_fail(C, "--compare-tp: too long");
    strcpy(buf, arg);
    a->n_cmp_tp = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (cli_parse_i64(C, "--compare-tp", t, 1, 1024, &v))
            return CLI_EXIT_ERR;
        for (int i = 0; i < a->n_cmp_tp; i++)
            if (a->cmp_tp[i] == v)
                return cli_fail(C, "--compare-tp: %lld given twice", (long long)v);
        if (a->n_cmp_tp == CAP_MAX_TP)
            return cli_fail(C, "--compare-tp: at most %d degrees", CAP_MAX_TP);
        a->cmp_tp[a->n_cmp_tp++] = v;
    }
    if (a->n_cmp_tp == 0)
        return cli_fail(C, "--compare-tp: empty list");
    return 0;
}

/* Apply --dtype / --kv-cache-dtype value s to m. */
static int apply_dtype(const char *C, const char *flag, const char *s, int kv, model_spec *m)
{
    int dt = model_dtype_parse(s);
    if (dt <= MODEL_DTYPE_AUTO)
        return cli_fail(C, "%s: unknown dtype '%s' (%s)", flag, s,
                        kv ? "fp32, fp16, bf16, fp8" : "fp32, fp16, bf16, fp8, int8, int4, fp4");
    kvs_err err;
    int rc = kv ? model_set_kv_dtype(m, (model_dtype)dt, &err)
                : model_set_weight_dtype(m, (model_dtype)dt, &err);
    if (rc)
        return strstr(err.msg, flag) ? cli_fail(C, "%s", err.msg)
                                     : cli_fail(C, "%s: %s", flag, err.msg);
    return 0;
}

static int capacity_parse(int argc, char **argv, cap_args *a, model_spec *m, gpu_spec *g)
{
    const char *C = "capacity";
    const char *s_tp = NULL, *s_util = NULL, *s_block = NULL, *s_seq = NULL,
               *s_batch = NULL, *s_mbt = NULL, *s_seqs = NULL, *s_ctp = NULL, *s_ep = NULL,
               *s_cp = NULL, *s_dtype = NULL, *s_kvdt = NULL, *s_mml = NULL;
    struct { const char *flag; const char **dst; } flags[] = {
        {"--compare-tp", &s_ctp},
        {"--model", &a->model},       {"--gpu", &a->gpu},
        {"--tp", &s_tp},              {"--gpu-mem-util", &s_util},
        {"--block-size", &s_block},   {"--seq-len", &s_seq},
        {"--batch", &s_batch},        {"--max-batched-tokens", &s_mbt},
        {"--max-seqs", &s_seqs},      {"--ep", &s_ep},
        {"--cp", &s_cp},              {"--dtype", &s_dtype},
        {"--kv-cache-dtype", &s_kvdt}, {"--max-model-len", &s_mml},
    };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            a->json = 1;
            continue;
        }
        if (!strcmp(argv[i], "--compare-attn")) {
            a->cmp_attn = 1;
            continue;
        }
        size_t k = 0;
        const char *v = NULL;
        int missing = 0;
        for (; k < sizeof flags / sizeof flags[0]; k++)
            if (cli_take_value(argc, argv, &i, flags[k].flag, &v, &missing))
                break;
        if (missing)
            return cli_fail(C, "%s: missing value", argv[i]);
        if (k == sizeof flags / sizeof flags[0])
            return cli_fail(C, "unknown argument '%s' (try --help)", argv[i]);
        *flags[k].dst = v;
    }
    kvs_err err;
    if (!a->model)
        return cli_fail(C, "--model is required (see kvsim models)");
    if (!a->gpu)
        return cli_fail(C, "--gpu is required (see kvsim gpus)");
    if (model_lookup(a->model, m, &err) || gpu_lookup(a->gpu, g, &err))
        return cli_fail(C, "%s", err.msg);
    if ((s_dtype && apply_dtype(C, "--dtype", s_dtype, 0, m)) ||
        (s_kvdt && apply_dtype(C, "--kv-cache-dtype", s_kvdt, 1, m)))
        return CLI_EXIT_ERR;
    a->tp = 1;
    a->ep = 1;
    a->cp = 1;
    a->util = 0.9;
    a->block_size = 16;
    a->batch = 1;
    a->max_batched_tokens = m->max_ctx > 2048 ? m->max_ctx : 2048;
    a->max_seqs = 256;
    if ((s_tp && cli_parse_i64(C, "--tp", s_tp, 1, 1024, &a->tp)) ||
        (s_ep && cli_parse_i64(C, "--ep", s_ep, 1, 1024, &a->ep)) ||
        (s_cp && cli_parse_i64(C, "--cp", s_cp, 1, 1024, &a->cp)) ||
        (s_util && cli_parse_f64(C, "--gpu-mem-util", s_util, 1e-6, 1.0, &a->util)) ||
        (s_block && cli_parse_i64(C, "--block-size", s_block, 1, 65536, &a->block_size)) ||
        (s_mml && cli_parse_i64(C, "--max-model-len", s_mml, 1, 16777216, &a->max_model_len)) ||
        (s_seq && cli_parse_i64(C, "--seq-len", s_seq, 1, 16777216, &a->seq_len)) ||
        (s_batch && cli_parse_i64(C, "--batch", s_batch, 1, 1048576, &a->batch)) ||
        (s_mbt && cli_parse_i64(C, "--max-batched-tokens", s_mbt, 1, 16777216,
                                &a->max_batched_tokens)) ||
        (s_seqs && cli_parse_i64(C, "--max-seqs", s_seqs, 1, 1048576, &a->max_seqs)))
        return CLI_EXIT_ERR;
    int64_t limit = model_context_limit(m);
    if (a->max_model_len > limit)
        return cli_fail(C, "--max-model-len: %" PRId64 " exceeds %s's context limit of %"
                        PRId64 " tokens (max_position_embeddings %" PRId64 "%s)",
                        a->max_model_len, m->name, limit, m->max_ctx,
                        limit > m->max_ctx ? ", extended by rope scaling" : "");
    if (!s_seq)
        a->seq_len = a->max_model_len ? a->max_model_len : m->max_ctx;
    model_par p = {a->tp, a->ep, a->cp};
    if (model_check_par(m, &p, &err))
        return cli_fail(C, "%s", err.msg);
    if (s_ctp && parse_tp_list(C, s_ctp, a))
        return CLI_EXIT_ERR;
    return 0;
}

/* The figures of one layout: whether it fits, the capacity (zeros but the
 * per-token and weight figures when it does not), max batch and context. */
typedef struct cap_eval {
    model_fit fit;
    kv_capacity c;
    int64_t req_bytes;       /* paged KV bytes of one request of seq_len, per GPU */
    int64_t req_exact;       /* the same without block rounding */
    int64_t blocks_per_req;  /* ceil(ceil(seq_len/cp)/block) */
    int64_t max_batch;       /* requests of seq_len the KV blocks hold */
    int64_t max_context;     /* longest single request the KV blocks hold (cp included) */
} cap_eval;

/* KVS_OK with e filled (fit.fits 0 when the layout does not fit), or the
 * error of a bad layout. */
static int cap_evaluate(const model_spec *m, const gpu_spec *g, const model_par *p,
                        const cap_args *a, cap_eval *e, kvs_err *err)
{
    memset(e, 0, sizeof *e);
    int rc = model_check_par(m, p, err);
    if (!rc)
        rc = model_fit_check(m, g, p, a->util, a->max_batched_tokens, a->max_seqs, &e->fit,
                             err);
    if (rc)
        return rc;
    int64_t per_rank = (a->seq_len + p->cp - 1) / p->cp;
    e->blocks_per_req = (per_rank + a->block_size - 1) / a->block_size;
    e->req_bytes = model_kv_request_block_bytes(m, p, a->seq_len, a->block_size);
    e->req_exact = model_kv_request_bytes(m, p, a->seq_len);
    if (!e->fit.fits) {
        e->c.kv_bytes_per_token = model_kv_bytes_per_token(m, p->tp);
        e->c.weight_bytes = e->fit.weight_bytes;
        e->c.activation_bytes = e->fit.activation_bytes;
        e->c.usable_bytes = e->fit.usable_bytes;
        e->c.block_bytes = a->block_size * e->c.kv_bytes_per_token;
        return KVS_OK;
    }
    rc = model_kv_capacity_par(m, g, p, a->util, a->block_size, a->max_batched_tokens,
                               a->max_seqs, &e->c, err);
    if (rc)
        return rc;
    int64_t avail = e->c.kv_blocks * e->c.block_bytes;
    e->max_batch = e->req_bytes > 0 ? avail / e->req_bytes : 0;
    /* Longest ctx whose paged bytes fit in avail: bisection on a monotone
     * function, capped at 2^40 tokens. */
    int64_t lo = 0, hi = (int64_t)1 << 40;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (model_kv_request_block_bytes(m, p, mid, a->block_size) <= avail)
            lo = mid;
        else
            hi = mid - 1;
    }
    e->max_context = lo;
    return KVS_OK;
}

/* One row of a comparison table: a model variant at a TP degree. */
typedef struct cap_row {
    char label[32];       /* "tp 4", "MHA", "GQA-8", "MQA" */
    int own;              /* the model's own attention (compare-attn) */
    model_spec m;         /* the variant */
    int64_t tp;
    int ok;               /* 0: invalid or does not fit (why) */
    int64_t missing;      /* bytes per GPU missing when it does not fit, else 0 */
    char why[1024];
    kv_capacity c;
    int64_t max_batch;    /* requests of seq_len that fit */
} cap_row;

static void row_eval(cap_row *r, const cap_args *a, const gpu_spec *g)
{
    kvs_err err;
    cap_eval e;
    model_par p = {r->tp, a->ep, a->cp};
    r->ok = 0;
    r->missing = 0;
    if (cap_evaluate(&r->m, g, &p, a, &e, &err)) {
        snprintf(r->why, sizeof r->why, "%s", err.msg);
        return;
    }
    if (!e.fit.fits) {
        r->missing = e.fit.missing_bytes;
        snprintf(r->why, sizeof r->why,
                 "weights %.2f GiB + activation reserve %.2f GiB exceed the usable %.2f GiB "
                 "per GPU by %.2f GiB; raise --tp%s",
                 (double)e.fit.weight_bytes / GIB_F, (double)e.fit.activation_bytes / GIB_F,
                 (double)e.fit.usable_bytes / GIB_F, (double)e.fit.missing_bytes / GIB_F,
                 r->m.experts > 0 ? " or --ep" : "");
        return;
    }
    r->c = e.c;
    r->max_batch = e.max_batch;
    r->ok = 1;
}

/* The attention variants of m: MHA, GQA-8 (when m has more than 8 heads and
 * is not GQA-8 itself), m's own GQA, MQA; in decreasing KV heads. */
static int attn_rows(const model_spec *m, int64_t tp, cap_row *rows)
{
    int64_t kv[4];
    int n = 0;
    kv[n++] = m->heads;
    if (m->heads > 8 && m->heads % 8 == 0 && m->kv_heads != 8)
        kv[n++] = 8;
    if (m->kv_heads != m->heads && m->kv_heads != 1)
        kv[n++] = m->kv_heads;
    if (m->heads > 1)
        kv[n++] = 1;
    /* sort descending (at most 4 entries) */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (kv[j] > kv[i]) {
                int64_t t = kv[i];
                kv[i] = kv[j];
                kv[j] = t;
            }
    for (int i = 0; i < n; i++) {
        cap_row *r = &rows[i];
        memset(r, 0, sizeof *r);
        r->m = *m;
        r->m.kv_heads = kv[i];
        r->tp = tp;
        r->own = kv[i] == m->kv_heads;
        if (kv[i] == m->heads)
            snprintf(r->label, sizeof r->label, "MHA");
        else if (kv[i] == 1)
            snprintf(r->label, sizeof r->label, "MQA");
        else
            snprintf(r->label, sizeof r->label, "GQA-%lld", (long long)kv[i]);
    }
    return n;
}

static void json_row(const cap_row *r, int attn, int64_t mha_bytes)
{
    if (attn) {
        printf("{\"variant\": \"%s\", \"kv_heads\": %" PRId64 ", \"own\": %s, ", r->label,
               r->m.kv_heads, r->own ? "true" : "false");
    } else {
        printf("{");
    }
    printf("\"tp\": %" PRId64 ", \"fits\": %s", r->tp, r->ok ? "true" : "false");
    if (!r->ok) {
        if (r->missing > 0)
            printf(", \"missing_bytes\": %" PRId64 ", \"missing_gib\": %.3f", r->missing,
                   (double)r->missing / GIB_F);
        printf(", \"error\": ");
        str_json_write(stdout, r->why);
        printf("}");
        return;
    }
    printf(", \"kv_heads_per_gpu\": %" PRId64 ", \"kv_bytes_per_token\": %" PRId64
           ", \"weight_bytes\": %" PRId64 ", \"kv_bytes\": %" PRId64 ", \"kv_blocks\": %" PRId64
           ", \"kv_tokens\": %" PRId64 ", \"max_batch\": %" PRId64,
           model_kv_heads_per_gpu(&r->m, r->tp), r->c.kv_bytes_per_token, r->c.weight_bytes,
           r->c.kv_bytes, r->c.kv_blocks, r->c.kv_tokens, r->max_batch);
    if (attn && mha_bytes > 0)
        printf(", \"kv_saving_vs_mha\": %.6f",
               1.0 - (double)r->c.kv_bytes_per_token / (double)mha_bytes);
    printf("}");
}

static void text_row(const cap_row *r, int attn, int64_t mha_bytes)
{
    if (attn)
        printf("  %-8s%s %8" PRId64, r->label, r->own ? "*" : " ", r->m.kv_heads);
    else
        printf("  %6" PRId64 " %5" PRId64, r->tp, r->tp);
    if (!r->ok) {
        printf("  does not fit (fits false): %s\n", r->why);
        return;
    }
    printf(" %8" PRId64 " %11" PRId64 " %11.2f %8.2f %10" PRId64 " %11" PRId64 " %9" PRId64,
           model_kv_heads_per_gpu(&r->m, r->tp), r->c.kv_bytes_per_token,
           (double)r->c.weight_bytes / GIB_F, (double)r->c.kv_bytes / GIB_F, r->c.kv_blocks,
           r->c.kv_tokens, r->max_batch);
    if (attn && mha_bytes > 0)
        printf(" %9.1f%%", 100.0 * (1.0 - (double)r->c.kv_bytes_per_token / (double)mha_bytes));
    printf("\n");
}

/* The --compare-tp and --compare-attn tables (JSON: members of the open
 * object, each preceded by ", "). */
static void print_compare(const cap_args *a, const model_spec *m, const gpu_spec *g)
{
    cap_row rows[CAP_MAX_TP];
    if (a->n_cmp_tp) {
        for (int i = 0; i < a->n_cmp_tp; i++) {
            memset(&rows[i], 0, sizeof rows[i]);
            rows[i].m = *m;
            rows[i].tp = a->cmp_tp[i];
            snprintf(rows[i].label, sizeof rows[i].label, "tp %lld", (long long)a->cmp_tp[i]);
            row_eval(&rows[i], a, g);
        }
        if (a->json) {
            printf(", \"compare_tp\": [");
            for (int i = 0; i < a->n_cmp_tp; i++) {
                printf("%s\n  ", i ? "," : "");
                json_row(&rows[i], 0, 0);
            }
            printf("\n]");
        } else {
            printf("\nby tensor-parallel degree (per GPU; a request's KV is split over the tp "
                   "GPUs,\nso max batch is per tp group):\n");
            printf("  %6s %5s %8s %11s %11s %8s %10s %11s %9s\n", "tp", "GPUs", "KV heads",
                   "KV B/token", "weights GiB", "KV GiB", "KV blocks", "KV tokens", "max batch");
            for (int i = 0; i < a->n_cmp_tp; i++)
                text_row(&rows[i], 0, 0);
        }
    }
    if (a->cmp_attn) {
        int n = attn_rows(m, a->tp, rows);
        for (int i = 0; i < n; i++)
            row_eval(&rows[i], a, g);
        int64_t mha = rows[0].ok && rows[0].m.kv_heads == m->heads ? rows[0].c.kv_bytes_per_token
                                                                     : 0;
        if (a->json) {
            printf(", \"compare_attn\": [");
            for (int i = 0; i < n; i++) {
                printf("%s\n  ", i ? "," : "");
                json_row(&rows[i], 1, mha);
            }
            printf("\n]");
        } else {
            printf("\nby attention variant at tp %" PRId64 " (* = %s's own; the same model "
                   "with fewer KV heads):\n",
                   a->tp, m->name);
            printf("  %-9s %8s %8s %11s %11s %8s %10s %11s %9s %10s\n", "variant", "kv_heads",
                   "KV h/GPU", "KV B/token", "weights GiB", "KV GiB", "KV blocks", "KV tokens",
                   "max batch", "KV saving");
            for (int i = 0; i < n; i++)
                text_row(&rows[i], 1, mha);
        }
    }
}

int cmd_capacity(int argc, char **argv)
{
    int search = 0;
    for (int i = 1; i < argc; i++)
        search |= !strcmp(argv[i], "--search") || !strncmp(argv[i], "--search=", 9) ||
                  !strcmp(argv[i], "--resume") || !strncmp(argv[i], "--resume=", 9);
    if (cli_wants_help(argc, argv)) {
        if (search)
            capacity_search_usage(stdout);
        else
            capacity_usage();
        return CLI_EXIT_OK;
    }
    if (search)
        return capacity_search_main(argc, argv);
    cap_args a = {0};
    model_spec m;
    gpu_spec g;
    kvs_err err;
    cap_eval e;
    if (capacity_parse(argc, argv, &a, &m, &g))
        return CLI_EXIT_ERR;
    model_par p = {a.tp, a.ep, a.cp};
    if (cap_evaluate(&m, &g, &p, &a, &e, &err))
        return cli_fail("capacity", "%s", err.msg);
    const kv_capacity c = e.c;
    int model_fits = e.fit.fits;
    /* The smallest layout that fits, when this one does not. */
    model_par minp = {0, 0, a.cp};
    model_fit minf;
    if (!model_fits &&
        model_fit_min_par(&m, &g, &p, a.util, a.max_batched_tokens, a.max_seqs,
                          CAP_FIT_MAX_TP, &minp, &minf, &err))
        minp.tp = minp.ep = 0;
    /* Bounds: seq_len <= 2^24, batch <= 2^20, KV bytes/token < 2^34 (model.h
     * limits), so a request's bytes are < 2^59 and the batch products are
     * done in double only for the over-2^63 check. */
    int64_t blocks_per_req = e.blocks_per_req;
    int64_t req_bytes = e.req_bytes;
    if ((double)a.batch * (double)req_bytes >= 9.2e18)
        return cli_fail("capacity", "--batch: %" PRId64 " x %" PRId64
                        " bytes per request overflows a 64-bit byte count",
                        a.batch, req_bytes);
    int64_t request_kv = a.batch * req_bytes;
    int64_t request_kv_exact = a.batch * e.req_exact;
    int64_t max_batch = e.max_batch;
    int64_t max_batch_eff = max_batch < a.max_seqs ? max_batch : a.max_seqs;
    const char *bound = !model_fits ? "weights" : max_batch < a.max_seqs ? "kv_blocks"
                                                                         : "max_seqs";
    int fits = model_fits && a.batch <= max_batch;
    int64_t limit = model_context_limit(&m);
    int64_t mml = a.max_model_len ? a.max_model_len : m.max_ctx;
    model_kv_groups grp;
    model_kv_layer_groups(&m, a.tp, &grp);

    if (a.json) {
        printf("{\"model\": ");
        str_json_write(stdout, m.name);
        printf(", \"gpu\": ");
        str_json_write(stdout, g.name);
        printf(", \"tp\": %" PRId64 ", \"gpu_mem_util\": %.15g, \"block_size\": %" PRId64
               ", \"seq_len\": %" PRId64 ", \"batch\": %" PRId64
               ", \"max_batched_tokens\": %" PRId64 ", \"max_seqs\": %" PRId64
               ", \"gpu_mem_bytes\": %" PRId64 ", \"param_count\": %" PRId64
               ", \"kv_heads_per_gpu\": %" PRId64 ", \"kv_bytes_per_token\": %" PRId64
               ", \"weight_bytes\": %" PRId64 ", \"activation_bytes\": %" PRId64
               ", \"usable_bytes\": %" PRId64 ", \"kv_bytes\": %" PRId64
               ", \"block_bytes\": %" PRId64 ", \"kv_blocks\": %" PRId64
               ", \"kv_tokens\": %" PRId64 ", \"blocks_per_request\": %" PRId64
               ", \"request_kv_bytes\": %" PRId64 ", \"request_kv_bytes_exact\": %" PRId64
               ", \"max_batch\": %" PRId64 ", \"fits\": %s",
               a.tp, a.util, a.block_size, a.seq_len, a.batch, a.max_batched_tokens,
               a.max_seqs, g.mem_bytes, model_param_count(&m),
               model_kv_heads_per_gpu(&m, a.tp), c.kv_bytes_per_token, c.weight_bytes,
               c.activation_bytes, c.usable_bytes, c.kv_bytes, c.block_bytes, c.kv_blocks,
               c.kv_tokens, blocks_per_req, request_kv, request_kv_exact, max_batch,
               fits ? "true" : "false");
        printf(", \"ep\": %" PRId64 ", \"cp\": %" PRId64 ", \"gpus\": %" PRId64
               ", \"weight_dtype\": \"%s\", \"kv_dtype\": \"%s\", \"params_total\": %" PRId64
               ", \"params_active\": %" PRId64 ", \"attention\": \"%s\"",
               a.ep, a.cp, a.tp * a.ep * a.cp, model_dtype_name(model_weight_dtype(&m)),
               model_dtype_name(model_kv_dtype(&m)), model_params_total(&m),
               model_params_active(&m), model_attn_kind(&m));
        printf(", \"kv_full_layers\": %" PRId64 ", \"kv_full_bytes_per_token\": %" PRId64
               ", \"kv_window_layers\": %" PRId64 ", \"kv_window_bytes_per_token\": %" PRId64
               ", \"kv_window\": %" PRId64,
               grp.full_layers, grp.full_bytes_per_token, grp.window_layers,
               grp.window_bytes_per_token, grp.window);
        printf(", \"model_fits\": %s, \"missing_bytes\": %" PRId64 ", \"missing_gib\": %.3f",
               model_fits ? "true" : "false", e.fit.missing_bytes,
               (double)e.fit.missing_bytes / GIB_F);
        if (!model_fits) {
            if (minp.tp)
                printf(", \"min_fit_tp\": %" PRId64 ", \"min_fit_ep\": %" PRId64
                       ", \"min_fit_gpus\": %" PRId64,
                       minp.tp, minp.ep, minp.tp * minp.ep * minp.cp);
            else
                printf(", \"min_fit_tp\": null, \"min_fit_ep\": null, \"min_fit_gpus\": null");
        }
        printf(", \"max_batch_kv\": %" PRId64 ", \"max_batch_effective\": %" PRId64
               ", \"batch_bound\": \"%s\", \"max_context_tokens\": %" PRId64
               ", \"max_model_len\": %" PRId64 ", \"context_limit\": %" PRId64,
               max_batch, max_batch_eff, bound, e.max_context, mml, limit);
        print_compare(&a, &m, &g);
        printf("}\n");
        return CLI_EXIT_OK;
    }
    printf("model %s (%" PRId64 " layers, %" PRId64 " heads, %" PRId64 " KV heads, "
           "head_dim %" PRId64 ", %" PRId64 " bytes/element) on %s, tp %" PRId64
           ", gpu-mem-util %g, block %" PRId64 "\n",
           m.name, m.layers, m.heads, m.kv_heads, m.head_dim, m.dtype_bytes, g.name, a.tp,
           a.util, a.block_size);
    printf("  %s, %s attention, %.2fB parameters (%.2fB active), weights %s, KV cache %s;\n"
           "  tp %" PRId64 " x ep %" PRId64 " x cp %" PRId64 " = %" PRId64 " GPUs\n\n",
           m.arch[0] ? m.arch : "llama", attn_kind(&m), (double)model_params_total(&m) / 1e9,
           (double)model_params_active(&m) / 1e9, model_dtype_name(model_weight_dtype(&m)),
           model_dtype_name(model_kv_dtype(&m)), a.tp, a.ep, a.cp, a.tp * a.ep * a.cp);
    printf("%-34s %20s\n", "per GPU", "bytes");
    if (m.attn_type == MODEL_ATTN_MLA)
        printf("%-34s %20" PRId64 "  (MLA latent %" PRId64 " + rope %" PRId64
               ", whole on every tp rank)\n",
               "KV bytes per token", c.kv_bytes_per_token, m.kv_lora_rank, m.qk_rope_head_dim);
    else
        printf("%-34s %20" PRId64 "  (KV heads per GPU: %" PRId64 ")\n", "KV bytes per token",
               c.kv_bytes_per_token, model_kv_heads_per_gpu(&m, a.tp));
    if (grp.window_layers > 0)
        printf("%-34s %20" PRId64 "  (%" PRId64 " full layers %" PRId64 " B/token; %" PRId64
               " window layers keep %" PRId64 " tokens, %" PRId64 " B/token)\n",
               "  of which sliding-window layers", grp.window_bytes_per_token,
               grp.full_layers, grp.full_bytes_per_token, grp.window_layers, grp.window,
               grp.window_bytes_per_token);
    printf("%-34s %20" PRId64 "  (%" PRId64 " blocks of %" PRId64 " B)\n",
           "KV bytes per request at seq-len", req_bytes, blocks_per_req, c.block_bytes);
    printf("%-34s %20" PRId64 "  (%.2f GiB; exact %" PRId64 ")\n",
           "request KV bytes, seq-len x batch", request_kv, (double)request_kv / GIB_F,
           request_kv_exact);
    printf("%-34s %20" PRId64 "  (%.2f GiB of %.2f GiB HBM)\n", "usable (mem x util)",
           c.usable_bytes, (double)c.usable_bytes / GIB_F, (double)g.mem_bytes / GIB_F);
    printf("%-34s %20" PRId64 "  (%.2f GiB)\n", "weights", c.weight_bytes,
           (double)c.weight_bytes / GIB_F);
    printf("%-34s %20" PRId64 "  (%.2f GiB)\n", "activation reserve", c.activation_bytes,
           (double)c.activation_bytes / GIB_F);
    if (!model_fits) {
        printf("%-34s %20" PRId64 "  (%.2f GiB per GPU)\n", "missing", e.fit.missing_bytes,
               (double)e.fit.missing_bytes / GIB_F);
        printf("\nfits: false: weights + activation reserve exceed the usable memory of %s by "
               "%.2f GiB per GPU at tp %" PRId64 " ep %" PRId64 ";\n",
               g.name, (double)e.fit.missing_bytes / GIB_F, a.tp, a.ep);
        if (minp.tp && minp.ep > a.ep)
            printf("raise --tp/--ep: the smallest layout that fits on %s is tp %" PRId64
                   " x ep %" PRId64 " (%" PRId64 " GPUs per cp group)\n",
                   g.name, minp.tp, minp.ep, minp.tp * minp.ep);
        else if (minp.tp)
            printf("raise --tp: the smallest tp that fits on %s is %" PRId64 "\n", g.name,
                   minp.tp);
        else
            printf("no tp%s up to %d fits on %s (lower --max-batched-tokens or --max-seqs, "
                   "or a smaller --dtype)\n",
                   m.experts > 0 ? " x ep" : "", CAP_FIT_MAX_TP, g.name);
        print_compare(&a, &m, &g);
        return CLI_EXIT_OK;
    }
    printf("%-34s %20" PRId64 "  (%.2f GiB)\n", "usable KV memory", c.kv_bytes,
           (double)c.kv_bytes / GIB_F);
    printf("%-34s %20" PRId64 "\n", "KV blocks", c.kv_blocks);
    printf("%-34s %20" PRId64 "\n", "KV tokens", c.kv_tokens);
    printf("%-34s %20" PRId64 "  (seq-len %" PRId64 ")\n", "max batch at seq-len", max_batch,
           a.seq_len);
    printf("%-34s %20" PRId64 "  (KV blocks allow %" PRId64 ", --max-seqs %" PRId64
           ": %s binds)\n",
           "max batch with --max-seqs", max_batch_eff, max_batch, a.max_seqs,
           max_batch < a.max_seqs ? "KV blocks" : "--max-seqs");
    printf("%-34s %20" PRId64 "  (tokens, cp %" PRId64 "; --max-model-len %" PRId64
           ", context limit %" PRId64 ")\n",
           "max context of one request", e.max_context, a.cp, mml, limit);
    printf("%-34s %20s  (needs %" PRId64 " of %" PRId64 " blocks)\n", "batch fits",
           fits ? "yes" : "no", a.batch * blocks_per_req, c.kv_blocks);
    printf("fits: true\n");
    print_compare(&a, &m, &g);
    if (a.seq_len > mml)
        printf("\nnote: --seq-len %" PRId64 " exceeds %s's %s %" PRId64 ".\n", a.seq_len,
               m.name, a.max_model_len ? "--max-model-len" : "max_ctx", mml);
    return CLI_EXIT_OK;
}
