/* cmd_capacity_compare.c — the side-by-side tables of `kvsim capacity`:
 * one row per TP degree (--compare-tp) or per attention variant of the
 * model (--compare-attn: MHA, GQA-8, its own, MQA), each the plan
 * model_kv_plan_eval gives under the engine's KV budget. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../base/str.h"
#include "capacity_kv.h"

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
    model_kv_plan e;
    model_par p = {r->tp, a->ep, a->cp};
    r->ok = 0;
    r->missing = 0;
    if (model_kv_plan_eval(&r->m, g, &p, &a->budget, a->seq_len, &e, &err)) {
        snprintf(r->why, sizeof r->why, "%s", err.msg);
        return;
    }
    if (!e.fit.fits) {
        r->missing = e.fit.missing_bytes;
        snprintf(r->why, sizeof r->why,
                 "weights %.2f GiB + activation reserve %.2f GiB%s exceed the usable %.2f GiB "
                 "per GPU by %.2f GiB; raise --tp%s",
                 (double)e.fit.weight_bytes / GIB_F, (double)e.fit.activation_bytes / GIB_F,
                 a->budget.rule == MODEL_KV_RULE_KVSIM ? "" : " + memory outside the tensors",
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

void capacity_print_compare(const cap_args *a, const model_spec *m, const gpu_spec *g)
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

