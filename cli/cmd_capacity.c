/* cmd_capacity.c — `kvsim capacity`: the KV memory arithmetic of one
 * model on one GPU as an engine profile sizes it (--engine, default
 * vllm-v1, the same rule and defaults `kvsim run` uses: job_kv_budget,
 * model_kv_plan_eval): weights, activation peak, memory outside the
 * engine's tensors, KV blocks and tokens, the largest batch of --seq-len
 * requests and the longest single request; a layout that does not fit is
 * a report with the smallest one that does.  Optionally side by side over
 * TP degrees (--compare-tp) and attention variants (--compare-attn,
 * cmd_capacity_compare.c).
 * `kvsim capacity --search` (by simulation against SLOs) is
 * cmd_capacity_search.c.  This file parses and prints only. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "../job/job.h"
#include "../models/model.h"
#include "capacity_kv.h"
#include "capacity_search.h"
#include "cli.h"

/* model_attn_kind in upper case ("GQA") into buf[8]. */
static const char *attn_upper(const model_spec *m, char buf[8])
{
    const char *k = model_attn_kind(m);
    size_t i = 0;
    for (; k[i] && i < 7; i++)
        buf[i] = (char)toupper((unsigned char)k[i]);
    buf[i] = 0;
    return buf;
}
/* ------------------------------------------------------------- capacity */


static void capacity_usage(void)
{
    printf("usage: kvsim capacity --model M --gpu G [options]\n\n"
           "KV memory arithmetic for one model on one GPU (per GPU under tensor, expert\n"
           "and context parallelism) as an engine sizes its cache: the same rule and\n"
           "defaults `kvsim run --engine E` uses, so the KV blocks here are the blocks a\n"
           "run gets.  KV bytes per token, weights, activation peak, memory outside the\n"
           "engine's tensors (engine rules), KV blocks and tokens, the largest batch of\n"
           "--seq-len requests and the longest single request that fit.  A model that\n"
           "does not fit is reported (fits: false, the GiB missing per GPU, the smallest\n"
           "TP, or TP x EP for MoE, that fits), not an error.\n\n"
           "  --engine NAME            vllm-v1 (default) | vllm-v0 | trtllm: whose KV rule\n"
           "                           and defaults (docs/engine-memory.md); vllm-v0 is\n"
           "                           kvsim's own rule (docs/semantics.md section 2)\n"
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
           "  --gpu-mem-util F         fraction of memory the engine may use (TensorRT-LLM:\n"
           "                           of the memory left free), (0, 1] (default 0.9)\n"
           "  --block-size N           tokens per KV block (default 16)\n"
           "  --max-model-len N        longest context served; at most the model's context\n"
           "                           limit (rope scaling included) (default: its max_ctx)\n"
           "  --seq-len L              tokens per request (default: --max-model-len)\n"
           "  --batch B                requests of --seq-len to check (default 1)\n"
           "  --max-batched-tokens N   tokens per step, sizes the activation reserve\n"
           "                           (default: the engine's, as kvsim run --help says)\n"
           "  --max-seqs N             sequences per step, sizes the logits reserve and caps\n"
           "                           the batch (default: the engine's)\n"
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

/* --compare-tp "1,2,4,8": ascending degrees in [1, 1024]. */
static int parse_tp_list(const char *C, const char *arg, cap_args *a)
{
    double tps[CLI_MAX_TPS];
    int n = 0;
    if (cli_parse_degrees(C, "--compare-tp", arg, tps, &n))
        return CLI_EXIT_ERR;
    for (int i = 0; i < n; i++)
        a->cmp_tp[i] = (int64_t)tps[i];
    a->n_cmp_tp = n;
    return 0;
}

/* The flags of `kvsim capacity` that are run flags: set on o by name, so
 * that the engine profile resolves the defaults `kvsim run` would use. */
static const char *const cap_run_flags[] = {
    "model", "gpu", "engine", "tp", "ep", "cp", "dtype", "kv-cache-dtype", "gpu-mem-util",
    "block-size", "max-model-len", "max-batched-tokens", "max-seqs",
};
#define N_CAP_RUN_FLAGS (sizeof cap_run_flags / sizeof cap_run_flags[0])

/* rest[*i] if it is one of cap_run_flags: its value set on o (*i moves past
 * it).  Prints its error; the exit status, or -1 when rest[*i] is none. */
static int take_run_flag(const char *C, int n, char **rest, int *i, job_opts *o)
{
    for (size_t k = 0; k < N_CAP_RUN_FLAGS; k++) {
        char flag[64];
        const char *v = NULL;
        int missing = 0;
        kvs_err err;
        snprintf(flag, sizeof flag, "--%s", cap_run_flags[k]);
        if (!cli_take_value(n, rest, i, flag, &v, &missing))
            continue;
        if (missing)
            return cli_fail(C, "%s: missing value", rest[*i]);
        return job_param_set(o, cap_run_flags[k], v, &err) ? cli_fail(C, "%s", err.msg) : 0;
    }
    return -1;
}

/* Own flags into their text (cli_split_own_flags), switches into a, run
 * flags into o. */
static int capacity_scan(int argc, char **argv, cap_args *a, job_opts *o, const char **s_seq,
                         const char **s_batch, const char **s_ctp)
{
    const char *C = "capacity";
    const cli_own_flag own[] = {
        {"--seq-len", s_seq}, {"--batch", s_batch}, {"--compare-tp", s_ctp},
    };
    char **rest = malloc((size_t)argc * sizeof *rest);
    int nrest = 0;
    if (!rest)
        return cli_fail(C, "out of memory");
    int rc = cli_split_own_flags(C, argc, argv, own, (int)(sizeof own / sizeof own[0]), rest,
                                 &nrest);
    for (int i = 1; !rc && i < nrest; i++) {
        if (!strcmp(rest[i], "--json"))
            a->json = 1;
        else if (!strcmp(rest[i], "--compare-attn"))
            a->cmp_attn = 1;
        else if ((rc = take_run_flag(C, nrest, rest, &i, o)) < 0)
            rc = cli_fail(C, "unknown argument '%s' (try --help)", rest[i]);
    }
    free(rest);
    if (rc)
        return rc;
    if (!job_param_given(o, "model"))
        return cli_fail(C, "--model is required (see kvsim models)");
    if (!job_param_given(o, "gpu"))
        return cli_fail(C, "--gpu is required (see kvsim gpus)");
    return 0;
}

static int capacity_parse(int argc, char **argv, cap_args *a, model_spec *m, gpu_spec *g)
{
    const char *C = "capacity";
    const char *s_seq = NULL, *s_batch = NULL, *s_ctp = NULL;
    job_opts o;
    job_opts_init(&o);
    if (capacity_scan(argc, argv, a, &o, &s_seq, &s_batch, &s_ctp))
        return CLI_EXIT_ERR;
    kvs_err err;
    if (job_kv_budget(&o, m, g, &a->budget, &err))
        return cli_fail(C, "%s", err.msg);
    const run_config *c = &o.cfg;
    a->engine = job_engine_of(c->sched.engine)->name;
    a->tp = c->tp;
    a->ep = c->ep > 0 ? c->ep : 1;
    a->cp = c->cp > 0 ? c->cp : 1;
    a->util = a->budget.frac;
    a->block_size = a->budget.block_size;
    a->max_batched_tokens = a->budget.max_batched_tokens;
    a->max_seqs = a->budget.max_seqs;
    a->max_model_len = job_param_given(&o, "max-model-len") ? c->sched.max_model_len : 0;
    a->batch = 1;
    if ((s_seq && cli_parse_i64(C, "--seq-len", s_seq, 1, 16777216, &a->seq_len)) ||
        (s_batch && cli_parse_i64(C, "--batch", s_batch, 1, 1048576, &a->batch)))
        return CLI_EXIT_ERR;
    int64_t limit = model_context_limit(m);
    if (a->max_model_len > limit)
        return cli_fail(C, "--max-model-len: %" PRId64 " exceeds %s's context limit of %"
                        PRId64 " tokens (max_position_embeddings %" PRId64 "%s)",
                        a->max_model_len, m->name, limit, m->max_ctx,
                        limit > m->max_ctx ? ", extended by rope scaling" : "");
    if (!s_seq)
        a->seq_len = a->max_model_len ? a->max_model_len : m->max_ctx;
    if (s_ctp && parse_tp_list(C, s_ctp, a))
        return CLI_EXIT_ERR;
    return 0;
}


/* The figures of the main report beside the plan. */
typedef struct cap_report {
    model_kv_plan e;         /* the layout's plan */
    model_par minp;          /* smallest layout that fits when e does not (tp 0: none) */
    int64_t request_kv;      /* bytes per GPU: batch x paged KV of one request */
    int64_t request_kv_exact;/* the same without block rounding */
    int64_t max_batch_eff;   /* min(max batch, max-seqs) */
    const char *bound;       /* "weights", "kv_blocks" or "max_seqs" */
    int fits;                /* the model fits and the batch's blocks do too */
    int64_t mml;             /* tokens: the max-model-len in force */
    int64_t limit;           /* tokens: the model's context limit */
    model_kv_groups grp;     /* full and sliding-window layer groups */
} cap_report;

static int cap_report_fill(const cap_args *a, const model_spec *m, const gpu_spec *g,
                           cap_report *r)
{
    kvs_err err;
    model_par p = {a->tp, a->ep, a->cp};
    memset(r, 0, sizeof *r);
    if (model_kv_plan_eval(m, g, &p, &a->budget, a->seq_len, &r->e, &err))
        return cli_fail("capacity", "%s", err.msg);
    const model_kv_budget *b = &a->budget;
    r->minp = (model_par){0, 0, a->cp};
    model_fit minf;
    if (!r->e.fit.fits &&
        model_fit_min_par_rule(m, g, &p, b->rule, b->frac, b->max_batched_tokens, b->max_seqs,
                               CAP_FIT_MAX_TP, &r->minp, &minf, &err))
        r->minp.tp = r->minp.ep = 0;
    /* Bounds: seq_len <= 2^24, batch <= 2^20, KV bytes/token < 2^34 (model.h
     * limits), so a request's bytes are < 2^59 and the batch products are
     * done in double only for the over-2^63 check. */
    if ((double)a->batch * (double)r->e.req_bytes >= 9.2e18)
        return cli_fail("capacity", "--batch: %" PRId64 " x %" PRId64
                        " bytes per request overflows a 64-bit byte count",
                        a->batch, r->e.req_bytes);
    r->request_kv = a->batch * r->e.req_bytes;
    r->request_kv_exact = a->batch * r->e.req_exact;
    int64_t mb = r->e.max_batch;
    r->max_batch_eff = mb < a->max_seqs ? mb : a->max_seqs;
    r->bound = !r->e.fit.fits ? "weights" : mb < a->max_seqs ? "kv_blocks" : "max_seqs";
    r->fits = r->e.fit.fits && a->batch <= mb;
    r->limit = model_context_limit(m);
    r->mml = a->max_model_len ? a->max_model_len : m->max_ctx;
    model_kv_layer_groups(m, a->tp, &r->grp);
    return 0;
}

static void cap_print_json(const cap_args *a, const model_spec *m, const gpu_spec *g,
                           const cap_report *r)
{
    const kv_capacity *c = &r->e.c;
    printf("{\"model\": ");
    str_json_write(stdout, m->name);
    printf(", \"gpu\": ");
    str_json_write(stdout, g->name);
    printf(", \"engine\": \"%s\", \"kv_rule\": \"%s\"", a->engine,
           model_kv_rule_name(a->budget.rule));
    printf(", \"tp\": %" PRId64 ", \"gpu_mem_util\": %.15g, \"block_size\": %" PRId64
           ", \"seq_len\": %" PRId64 ", \"batch\": %" PRId64
           ", \"max_batched_tokens\": %" PRId64 ", \"max_seqs\": %" PRId64
           ", \"gpu_mem_bytes\": %" PRId64 ", \"cuda_total_bytes\": %" PRId64
           ", \"param_count\": %" PRId64
           ", \"kv_heads_per_gpu\": %" PRId64 ", \"kv_bytes_per_token\": %" PRId64
           ", \"weight_bytes\": %" PRId64 ", \"activation_bytes\": %" PRId64
           ", \"nontorch_bytes\": %" PRId64
           ", \"usable_bytes\": %" PRId64 ", \"kv_bytes\": %" PRId64
           ", \"block_bytes\": %" PRId64 ", \"kv_blocks\": %" PRId64
           ", \"kv_tokens\": %" PRId64 ", \"blocks_per_request\": %" PRId64
           ", \"request_kv_bytes\": %" PRId64 ", \"request_kv_bytes_exact\": %" PRId64
           ", \"max_batch\": %" PRId64 ", \"fits\": %s",
           a->tp, a->util, a->block_size, a->seq_len, a->batch, a->max_batched_tokens,
           a->max_seqs, g->mem_bytes, model_cuda_total_bytes(g), model_param_count(m),
           model_kv_heads_per_gpu(m, a->tp), c->kv_bytes_per_token, c->weight_bytes,
           c->activation_bytes, c->nontorch_bytes, c->usable_bytes, c->kv_bytes,
           c->block_bytes, c->kv_blocks, c->kv_tokens, r->e.blocks_per_req, r->request_kv,
           r->request_kv_exact, r->e.max_batch, r->fits ? "true" : "false");
    printf(", \"ep\": %" PRId64 ", \"cp\": %" PRId64 ", \"gpus\": %" PRId64
           ", \"weight_dtype\": \"%s\", \"kv_dtype\": \"%s\", \"params_total\": %" PRId64
           ", \"params_active\": %" PRId64 ", \"attention\": \"%s\"",
           a->ep, a->cp, a->tp * a->ep * a->cp, model_dtype_name(model_weight_dtype(m)),
           model_dtype_name(model_kv_dtype(m)), model_params_total(m), model_params_active(m),
           model_attn_kind(m));
    printf(", \"kv_full_layers\": %" PRId64 ", \"kv_full_bytes_per_token\": %" PRId64
           ", \"kv_window_layers\": %" PRId64 ", \"kv_window_bytes_per_token\": %" PRId64
           ", \"kv_window\": %" PRId64,
           r->grp.full_layers, r->grp.full_bytes_per_token, r->grp.window_layers,
           r->grp.window_bytes_per_token, r->grp.window);
    printf(", \"model_fits\": %s, \"missing_bytes\": %" PRId64 ", \"missing_gib\": %.3f",
           r->e.fit.fits ? "true" : "false", r->e.fit.missing_bytes,
           (double)r->e.fit.missing_bytes / GIB_F);
    if (!r->e.fit.fits) {
        if (r->minp.tp)
            printf(", \"min_fit_tp\": %" PRId64 ", \"min_fit_ep\": %" PRId64
                   ", \"min_fit_gpus\": %" PRId64,
                   r->minp.tp, r->minp.ep, r->minp.tp * r->minp.ep * r->minp.cp);
        else
            printf(", \"min_fit_tp\": null, \"min_fit_ep\": null, \"min_fit_gpus\": null");
    }
    printf(", \"max_batch_kv\": %" PRId64 ", \"max_batch_effective\": %" PRId64
           ", \"batch_bound\": \"%s\", \"max_context_tokens\": %" PRId64
           ", \"max_model_len\": %" PRId64 ", \"context_limit\": %" PRId64,
           r->e.max_batch, r->max_batch_eff, r->bound, r->e.max_context, r->mml, r->limit);
    capacity_print_compare(a, m, g);
    printf("}\n");
}

/* The header and the per-GPU memory lines down to the activation peak. */
static void cap_print_memory(const cap_args *a, const model_spec *m, const gpu_spec *g,
                             const cap_report *r)
{
    const kv_capacity *c = &r->e.c;
    char kind[8];
    printf("model %s (%" PRId64 " layers, %" PRId64 " heads, %" PRId64 " KV heads, "
           "head_dim %" PRId64 ", %" PRId64 " bytes/element) on %s, tp %" PRId64
           ", gpu-mem-util %g, block %" PRId64 "\n",
           m->name, m->layers, m->heads, m->kv_heads, m->head_dim, m->dtype_bytes, g->name,
           a->tp, a->util, a->block_size);
    printf("  %s, %s attention, %.2fB parameters (%.2fB active), weights %s, KV cache %s;\n"
           "  tp %" PRId64 " x ep %" PRId64 " x cp %" PRId64 " = %" PRId64 " GPUs;\n"
           "  engine %s (KV rule %s), max-batched-tokens %" PRId64 ", max-seqs %" PRId64
           "\n\n",
           m->arch[0] ? m->arch : "llama", attn_upper(m, kind),
           (double)model_params_total(m) / 1e9, (double)model_params_active(m) / 1e9,
           model_dtype_name(model_weight_dtype(m)), model_dtype_name(model_kv_dtype(m)), a->tp,
           a->ep, a->cp, a->tp * a->ep * a->cp, a->engine, model_kv_rule_name(a->budget.rule),
           a->max_batched_tokens, a->max_seqs);
    printf("%-34s %20s\n", "per GPU", "bytes");
    if (m->attn_type == MODEL_ATTN_MLA)
        printf("%-34s %20" PRId64 "  (MLA latent %" PRId64 " + rope %" PRId64
               ", whole on every tp rank)\n",
               "KV bytes per token", c->kv_bytes_per_token, m->kv_lora_rank,
               m->qk_rope_head_dim);
    else
        printf("%-34s %20" PRId64 "  (KV heads per GPU: %" PRId64 ")\n", "KV bytes per token",
               c->kv_bytes_per_token, model_kv_heads_per_gpu(m, a->tp));
    if (r->grp.window_layers > 0)
        printf("%-34s %20" PRId64 "  (%" PRId64 " full layers %" PRId64 " B/token; %" PRId64
               " window layers keep %" PRId64 " tokens, %" PRId64 " B/token)\n",
               "  of which sliding-window layers", r->grp.window_bytes_per_token,
               r->grp.full_layers, r->grp.full_bytes_per_token, r->grp.window_layers,
               r->grp.window, r->grp.window_bytes_per_token);
    printf("%-34s %20" PRId64 "  (%" PRId64 " blocks of %" PRId64 " B)\n",
           "KV bytes per request at seq-len", r->e.req_bytes, r->e.blocks_per_req,
           c->block_bytes);
    printf("%-34s %20" PRId64 "  (%.2f GiB; exact %" PRId64 ")\n",
           "request KV bytes, seq-len x batch", r->request_kv, (double)r->request_kv / GIB_F,
           r->request_kv_exact);
    if (a->budget.rule == MODEL_KV_RULE_KVSIM)
        printf("%-34s %20" PRId64 "  (%.2f GiB of %.2f GiB HBM)\n", "usable (mem x util)",
               c->usable_bytes, (double)c->usable_bytes / GIB_F, (double)g->mem_bytes / GIB_F);
    else
        printf("%-34s %20" PRId64 "  (%.2f GiB; CUDA reports %.2f GiB of %.2f GiB HBM)\n",
               a->budget.rule == MODEL_KV_RULE_VLLM ? "usable (CUDA total x util)"
                                                    : "usable (CUDA total)",
               c->usable_bytes, (double)c->usable_bytes / GIB_F,
               (double)model_cuda_total_bytes(g) / GIB_F, (double)g->mem_bytes / GIB_F);
    printf("%-34s %20" PRId64 "  (%.2f GiB)\n", "weights", c->weight_bytes,
           (double)c->weight_bytes / GIB_F);
    printf("%-34s %20" PRId64 "  (%.2f GiB)\n", "activation reserve", c->activation_bytes,
           (double)c->activation_bytes / GIB_F);
    if (a->budget.rule != MODEL_KV_RULE_KVSIM)
        printf("%-34s %20" PRId64 "  (%.2f GiB: CUDA context, workspaces, %" PRId64
               " peer buffers)\n",
               "outside the engine's tensors", c->nontorch_bytes,
               (double)c->nontorch_bytes / GIB_F, a->tp - 1);
}

static void cap_print_unfit(const cap_args *a, const model_spec *m, const gpu_spec *g,
                            const cap_report *r)
{
    const model_par *mp = &r->minp;
    printf("%-34s %20" PRId64 "  (%.2f GiB per GPU)\n", "missing", r->e.fit.missing_bytes,
           (double)r->e.fit.missing_bytes / GIB_F);
    printf("\nfits: false: weights + activation reserve%s exceed the usable memory of %s by "
           "%.2f GiB per GPU at tp %" PRId64 " ep %" PRId64 ";\n",
           a->budget.rule == MODEL_KV_RULE_KVSIM ? "" : " + memory outside the tensors",
           g->name, (double)r->e.fit.missing_bytes / GIB_F, a->tp, a->ep);
    if (mp->tp && mp->ep > a->ep)
        printf("raise --tp/--ep: the smallest layout that fits on %s is tp %" PRId64
               " x ep %" PRId64 " (%" PRId64 " GPUs per cp group)\n",
               g->name, mp->tp, mp->ep, mp->tp * mp->ep);
    else if (mp->tp)
        printf("raise --tp: the smallest tp that fits on %s is %" PRId64 "\n", g->name, mp->tp);
    else
        printf("no tp%s up to %d fits on %s (lower --max-batched-tokens or --max-seqs, "
               "or a smaller --dtype)\n",
               m->experts > 0 ? " x ep" : "", CAP_FIT_MAX_TP, g->name);
}

static void cap_print_fit(const cap_args *a, const model_spec *m, const cap_report *r)
{
    const kv_capacity *c = &r->e.c;
    int64_t mb = r->e.max_batch;
    printf("%-34s %20" PRId64 "  (%.2f GiB)\n", "usable KV memory", c->kv_bytes,
           (double)c->kv_bytes / GIB_F);
    printf("%-34s %20" PRId64 "\n", "KV blocks", c->kv_blocks);
    printf("%-34s %20" PRId64 "\n", "KV tokens", c->kv_tokens);
    printf("%-34s %20" PRId64 "  (seq-len %" PRId64 ")\n", "max batch at seq-len", mb,
           a->seq_len);
    printf("%-34s %20" PRId64 "  (KV blocks allow %" PRId64 ", --max-seqs %" PRId64
           ": %s binds)\n",
           "max batch with --max-seqs", r->max_batch_eff, mb, a->max_seqs,
           mb < a->max_seqs ? "KV blocks" : "--max-seqs");
    printf("%-34s %20" PRId64 "  (tokens, cp %" PRId64 "; --max-model-len %" PRId64
           ", context limit %" PRId64 ")\n",
           "max context of one request", r->e.max_context, a->cp, r->mml, r->limit);
    printf("%-34s %20s  (needs %" PRId64 " of %" PRId64 " blocks)\n", "batch fits",
           r->fits ? "yes" : "no", a->batch * r->e.blocks_per_req, c->kv_blocks);
    printf("fits: true\n");
    (void)m;
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
    cap_report r;
    if (capacity_parse(argc, argv, &a, &m, &g) || cap_report_fill(&a, &m, &g, &r))
        return CLI_EXIT_ERR;
    if (a.json) {
        cap_print_json(&a, &m, &g, &r);
        return CLI_EXIT_OK;
    }
    cap_print_memory(&a, &m, &g, &r);
    if (!r.e.fit.fits) {
        cap_print_unfit(&a, &m, &g, &r);
    } else {
        cap_print_fit(&a, &m, &r);
    }
    capacity_print_compare(&a, &m, &g);
    if (r.e.fit.fits && a.seq_len > r.mml)
        printf("\nnote: --seq-len %" PRId64 " exceeds %s's %s %" PRId64 ".\n", a.seq_len,
               m.name, a.max_model_len ? "--max-model-len" : "max_ctx", r.mml);
    return CLI_EXIT_OK;
}
