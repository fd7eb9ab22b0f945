/* cmd_models.c — `kvsim models`, `kvsim gpus`, `kvsim capacity`: list the
 * built-in shapes and GPUs, and print the KV memory arithmetic of
 * models/model.h for one configuration. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../models/model.h"
#include "cli.h"

#define GIB_F 1073741824.0

/* Print s as a JSON string literal. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static const char *attn_kind(const model_spec *m)
{
    return m->kv_heads == m->heads ? "MHA" : m->kv_heads == 1 ? "MQA" : "GQA";
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

int cmd_models(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        printf("usage: kvsim models [--json]\n\n"
               "List the built-in models (released LLaMA configs) with their shapes,\n"
               "parameter counts and KV bytes per token at tp 1.  Any model flag also\n"
               "takes a path to a .conf file (see models/tiny.conf).\n\n"
               "  --json   one JSON object {\"models\": [...]} instead of a table (default: off)\n"
               "  --help   this text\n");
        return CLI_EXIT_OK;
    }
    int json;
    if (parse_json_only("models", argc, argv, &json))
        return CLI_EXIT_ERR;
    size_t n = model_builtin_count();
    if (json) {
        printf("{\"models\": [");
        for (size_t i = 0; i < n; i++) {
            const model_spec *m = model_builtin_at(i);
            printf("%s\n  {\"name\": ", i ? "," : "");
            json_str(stdout, m->name);
            printf(", \"hidden\": %" PRId64 ", \"layers\": %" PRId64 ", \"heads\": %" PRId64
                   ", \"kv_heads\": %" PRId64 ", \"head_dim\": %" PRId64
                   ", \"intermediate\": %" PRId64 ", \"vocab\": %" PRId64
                   ", \"max_ctx\": %" PRId64 ", \"dtype_bytes\": %" PRId64
                   ", \"attention\": \"%s\", \"params\": %" PRId64
                   ", \"weight_bytes\": %" PRId64 ", \"kv_bytes_per_token\": %" PRId64
                   ", \"note\": ",
                   m->hidden, m->layers, m->heads, m->kv_heads, m->head_dim,
                   m->intermediate, m->vocab, m->max_ctx, m->dtype_bytes, attn_kind(m),
                   model_param_count(m), model_weight_bytes(m, 1),
                   model_kv_bytes_per_token(m, 1));
            json_str(stdout, model_builtin_note(i));
            printf("}");
        }
        printf("\n]}\n");
        return CLI_EXIT_OK;
    }
    printf("%-13s %6s %6s %5s %5s %8s %6s %6s %6s %5s %9s %10s  %s\n", "model", "hidden",
           "layers", "heads", "kv", "head_dim", "inter", "vocab", "ctx", "attn", "params",
           "KV B/token", "note");
    for (size_t i = 0; i < n; i++) {
        const model_spec *m = model_builtin_at(i);
        printf("%-13s %6" PRId64 " %6" PRId64 " %5" PRId64 " %5" PRId64 " %8" PRId64
               " %6" PRId64 " %6" PRId64 " %6" PRId64 " %5s %8.2fB %10" PRId64 "  %s\n",
               m->name, m->hidden, m->layers, m->heads, m->kv_heads, m->head_dim,
               m->intermediate, m->vocab, m->max_ctx, attn_kind(m),
               (double)model_param_count(m) / 1e9, model_kv_bytes_per_token(m, 1),
               model_builtin_note(i));
    }
    printf("\nparams counts embedding, layers, norms and the untied LM head; KV bytes\n"
           "per token = 2 * layers * kv_heads * head_dim * dtype_bytes (tp 1, fp16).\n");
    return CLI_EXIT_OK;
}

int cmd_gpus(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        printf("usage: kvsim gpus [--json]\n\n"
               "List the built-in GPUs with their datasheet figures (see models/gpu.c\n"
               "for the sources): HBM bytes, peak HBM bandwidth, dense FP16 tensor\n"
               "FLOP/s, host link (PCIe) and NVLink bandwidth per direction.\n\n"
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
            json_str(stdout, g->name);
            printf(", \"mem_bytes\": %" PRId64 ", \"hbm_Bps\": %.17g, \"fp16_flops\": %.17g"
                   ", \"host_link_Bps\": %.17g, \"nvlink_Bps\": %.17g}",
                   g->mem_bytes, g->hbm_Bps, g->fp16_flops, g->host_link_Bps,
                   g->nvlink_Bps);
        }
        printf("\n]}\n");
        return CLI_EXIT_OK;
    }
    printf("%-10s %16s %9s %8s %11s %11s %12s\n", "gpu", "mem bytes", "mem GiB",
           "HBM TB/s", "FP16 TFLOP/s", "PCIe GB/s", "NVLink GB/s");
    for (size_t i = 0; i < n; i++) {
        const gpu_spec *g = gpu_builtin_at(i);
        printf("%-10s %16" PRId64 " %9.1f %8.3f %12.0f %11.0f %12.0f\n", g->name,
               g->mem_bytes, (double)g->mem_bytes / GIB_F, g->hbm_Bps / 1e12,
               g->fp16_flops / 1e12, g->host_link_Bps / 1e9, g->nvlink_Bps / 1e9);
    }
    printf("\nFLOP/s are dense (no sparsity); link figures are per direction.\n");
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------- capacity */

typedef struct cap_args {
    const char *model, *gpu;
    int64_t tp, block_size, seq_len, batch, max_batched_tokens, max_seqs;
    double util;
    int json;
} cap_args;

static void capacity_usage(void)
{
    printf("usage: kvsim capacity --model M --gpu G [options]\n\n"
           "KV memory arithmetic for one model on one GPU (per GPU under tensor\n"
           "parallelism): KV bytes per token, weights, activation reserve, KV blocks\n"
           "and tokens, and the largest batch of --seq-len requests that fits.\n\n"
           "  --model M                built-in name (kvsim models) or a .conf path (required)\n"
           "  --gpu G                  built-in GPU (kvsim gpus) (required)\n"
           "  --tp N                   tensor-parallel degree (default 1)\n"
           "  --gpu-mem-util F         fraction of HBM kvsim may use, (0, 1] (default 0.9)\n"
           "  --block-size N           tokens per KV block (default 16)\n"
           "  --seq-len L              tokens per request (default: the model's max_ctx)\n"
           "  --batch B                requests of --seq-len to check (default 1)\n"
           "  --max-batched-tokens N   tokens per step, sizes the activation reserve\n"
           "                           (default max(2048, max_ctx))\n"
           "  --max-seqs N             sequences per step, sizes the logits reserve (default 256)\n"
           "  --json                   print one JSON object instead of a table (default: off)\n"
           "  --help                   this text\n\n"
           "request_kv_bytes = batch * ceil(seq_len/block) * block_bytes (paged memory is\n"
           "allocated in whole blocks); request_kv_bytes_exact = batch * seq_len * KV bytes\n"
           "per token.  max_batch = floor(kv_blocks / ceil(seq_len/block)), ignoring the\n"
           "scheduler's watermark.\n");
}

/* Take the value of flag argv[*i] ("--f v" or "--f=v"); NULL if not flag. */
static const char *flag_val(int argc, char **argv, int *i, const char *flag, int *missing)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n))
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n])
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int capacity_parse(int argc, char **argv, cap_args *a, model_spec *m, gpu_spec *g)
{
    const char *C = "capacity";
    const char *s_tp = NULL, *s_util = NULL, *s_block = NULL, *s_seq = NULL,
               *s_batch = NULL, *s_mbt = NULL, *s_seqs = NULL;
    struct { const char *flag; const char **dst; } flags[] = {
        {"--model", &a->model},       {"--gpu", &a->gpu},
        {"--tp", &s_tp},              {"--gpu-mem-util", &s_util},
        {"--block-size", &s_block},   {"--seq-len", &s_seq},
        {"--batch", &s_batch},        {"--max-batched-tokens", &s_mbt},
        {"--max-seqs", &s_seqs},
    };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            a->json = 1;
            continue;
        }
        size_t k = 0;
        const char *v = NULL;
        int missing = 0;
        for (; k < sizeof flags / sizeof flags[0]; k++)
            if ((v = flag_val(argc, argv, &i, flags[k].flag, &missing)) || missing)
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
    a->tp = 1;
    a->util = 0.9;
    a->block_size = 16;
    a->seq_len = m->max_ctx;
    a->batch = 1;
    a->max_batched_tokens = m->max_ctx > 2048 ? m->max_ctx : 2048;
    a->max_seqs = 256;
    if ((s_tp && cli_parse_i64(C, "--tp", s_tp, 1, 1024, &a->tp)) ||
        (s_util && cli_parse_f64(C, "--gpu-mem-util", s_util, 1e-6, 1.0, &a->util)) ||
        (s_block && cli_parse_i64(C, "--block-size", s_block, 1, 65536, &a->block_size)) ||
        (s_seq && cli_parse_i64(C, "--seq-len", s_seq, 1, 16777216, &a->seq_len)) ||
        (s_batch && cli_parse_i64(C, "--batch", s_batch, 1, 1048576, &a->batch)) ||
        (s_mbt && cli_parse_i64(C, "--max-batched-tokens", s_mbt, 1, 16777216,
                                &a->max_batched_tokens)) ||
        (s_seqs && cli_parse_i64(C, "--max-seqs", s_seqs, 1, 1048576, &a->max_seqs)))
        return CLI_EXIT_ERR;
    if (model_check_tp(m, a->tp, &err))
        return cli_fail(C, "%s", err.msg);
    return 0;
}

int cmd_capacity(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        capacity_usage();
        return CLI_EXIT_OK;
    }
    cap_args a = {0};
    model_spec m;
    gpu_spec g;
    kvs_err err;
    kv_capacity c;
    if (capacity_parse(argc, argv, &a, &m, &g))
        return CLI_EXIT_ERR;
    if (model_kv_capacity(&m, &g, a.tp, a.util, a.block_size, a.max_batched_tokens,
                          a.max_seqs, &c, &err))
        return cli_fail("capacity", "%s", err.msg);
    /* Bounds: seq_len <= 2^24, batch <= 2^20, KV bytes/token < 2^34 (model.h
     * limits), so blocks_per_req * block_bytes < 2^59 and the batch products
     * are done in double only for the over-2^63 check. */
    int64_t blocks_per_req = (a.seq_len + a.block_size - 1) / a.block_size;
    int64_t req_bytes = blocks_per_req * c.block_bytes;
    int64_t req_exact = a.seq_len * c.kv_bytes_per_token;
    if ((double)a.batch * (double)req_bytes >= 9.2e18)
        return cli_fail("capacity", "--batch: %" PRId64 " x %" PRId64
                        " bytes per request overflows a 64-bit byte count",
                        a.batch, req_bytes);
    int64_t request_kv = a.batch * req_bytes;
    int64_t request_kv_exact = a.batch * req_exact;
    int64_t max_batch = c.kv_blocks / blocks_per_req;
    int fits = a.batch <= max_batch;

    if (a.json) {
        printf("{\"model\": ");
        json_str(stdout, m.name);
        printf(", \"gpu\": ");
        json_str(stdout, g.name);
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
               ", \"max_batch\": %" PRId64 ", \"fits\": %s}\n",
               a.tp, a.util, a.block_size, a.seq_len, a.batch, a.max_batched_tokens,
               a.max_seqs, g.mem_bytes, model_param_count(&m),
               model_kv_heads_per_gpu(&m, a.tp), c.kv_bytes_per_token, c.weight_bytes,
               c.activation_bytes, c.usable_bytes, c.kv_bytes, c.block_bytes, c.kv_blocks,
               c.kv_tokens, blocks_per_req, request_kv, request_kv_exact, max_batch,
               fits ? "true" : "false");
        return CLI_EXIT_OK;
    }
    printf("model %s (%" PRId64 " layers, %" PRId64 " heads, %" PRId64 " KV heads, "
           "head_dim %" PRId64 ", %" PRId64 " bytes/element) on %s, tp %" PRId64
           ", gpu-mem-util %g, block %" PRId64 "\n\n",
           m.name, m.layers, m.heads, m.kv_heads, m.head_dim, m.dtype_bytes, g.name, a.tp,
           a.util, a.block_size);
    printf("%-34s %20s\n", "per GPU", "bytes");
    printf("%-34s %20" PRId64 "  (KV heads per GPU: %" PRId64 ")\n", "KV bytes per token",
           c.kv_bytes_per_token, model_kv_heads_per_gpu(&m, a.tp));
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
    printf("%-34s %20" PRId64 "  (%.2f GiB)\n", "usable KV memory", c.kv_bytes,
           (double)c.kv_bytes / GIB_F);
    printf("%-34s %20" PRId64 "\n", "KV blocks", c.kv_blocks);
    printf("%-34s %20" PRId64 "\n", "KV tokens", c.kv_tokens);
    printf("%-34s %20" PRId64 "  (seq-len %" PRId64 ")\n", "max batch at seq-len", max_batch,
           a.seq_len);
    printf("%-34s %20s  (needs %" PRId64 " of %" PRId64 " blocks)\n", "batch fits",
           fits ? "yes" : "no", a.batch * blocks_per_req, c.kv_blocks);
    if (a.seq_len > m.max_ctx)
        printf("\nnote: --seq-len %" PRId64 " exceeds %s's max_ctx %" PRId64 ".\n", a.seq_len,
               m.name, m.max_ctx);
    return CLI_EXIT_OK;
}
