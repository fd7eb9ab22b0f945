/* cmd_models.c — `kvsim models` and `kvsim gpus`: list the
 * built-in shapes, the shipped Hugging Face configs (aliases) and GPUs,
 * with their KV bytes per token.  `kvsim capacity` is cmd_capacity.c. */
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
