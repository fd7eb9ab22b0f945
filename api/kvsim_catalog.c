/* kvsim_catalog.c — the read-only tables of kvsim.h: the run flags (the job
 * layer's parameter table, so a flag added there appears here), the
 * built-in and shipped models and the built-in GPUs as JSON, and the
 * dataset importers of traces/. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "api_internal.h"

int64_t kvsim_flag_count(void) { return (int64_t)job_param_count(); }

static const char *kind_name(job_param_kind k)
{
    static const char *const names[] = {"text",   "int",    "uint", "number",
                                        "choice", "switch", "slo",  "off"};
    return k >= 0 && k < (int)(sizeof names / sizeof names[0]) ? names[k] : "text";
}

int kvsim_flag_at(int64_t i, kvsim_flag *out)
{
    if (i < 0 || i >= kvsim_flag_count())
        return KVSIM_EINVAL;
    const job_param *p = job_param_at((size_t)i);
    *out = (kvsim_flag){p->name, kind_name(p->kind), p->section, p->metavar, p->help,
                        job_param_negation(p->name), (p->vary & JOB_VARY_GRID) != 0};
    return KVSIM_OK;
}

/* One model as a JSON object: its shape and the derived sizes. */
static void model_json(str_buf *b, const char *name, const char *hub, const char *note,
                       const model_spec *m)
{
    str_buf_printf(b, "{\"name\": ");
    str_buf_json(b, name);
    str_buf_printf(b, ", \"alias\": %s, \"hub_path\": ", hub ? "true" : "false");
    if (hub)
        str_buf_json(b, hub);
    else
        str_buf_printf(b, "null");
    str_buf_printf(b, ", \"arch\": ");
    str_buf_json(b, m->arch[0] ? m->arch : "llama");
    str_buf_printf(b, ", \"attention\": ");
    str_buf_json(b, model_attn_kind(m));
    str_buf_printf(b,
                   ", \"hidden\": %" PRId64 ", \"layers\": %" PRId64 ", \"heads\": %" PRId64
                   ", \"kv_heads\": %" PRId64 ", \"head_dim\": %" PRId64
                   ", \"intermediate\": %" PRId64 ", \"vocab\": %" PRId64
                   ", \"max_ctx\": %" PRId64 ", \"context_limit\": %" PRId64
                   ", \"params_total\": %" PRId64 ", \"params_active\": %" PRId64
                   ", \"weight_bytes\": %" PRId64 ", \"kv_bytes_per_token\": %" PRId64
                   ", \"weight_dtype\": \"%s\", \"kv_dtype\": \"%s\", \"note\": ",
                   m->hidden, m->layers, m->heads, m->kv_heads, m->head_dim, m->intermediate,
                   m->vocab, m->max_ctx, model_context_limit(m), model_params_total(m),
                   model_params_active(m), model_weight_bytes(m, 1),
                   model_kv_bytes_per_token(m, 1), model_dtype_name(model_weight_dtype(m)),
                   model_dtype_name(model_kv_dtype(m)));
    str_buf_json(b, note ? note : "");
    str_buf_printf(b, "}");
}

char *kvsim_models_json(void)
{
    str_buf b = {0};
    size_t nb = model_builtin_count(), na = model_alias_count();
    str_buf_printf(&b, "[");
    for (size_t i = 0; i < nb + na; i++) {
        str_buf_printf(&b, "%s", i ? ",\n " : "");
        if (i < nb) {
            const model_spec *m = model_builtin_at(i);
            model_json(&b, m->name, NULL, model_builtin_note(i), m);
            continue;
        }
        const char *hub = NULL;
        const char *alias = model_alias_at(i - nb, &hub);
        model_spec m;
        kvs_err e;
        if (model_lookup(alias, &m, &e)) {
            str_buf_printf(&b, "{\"name\": ");
            str_buf_json(&b, alias);
            str_buf_printf(&b, ", \"alias\": true, \"error\": ");
            str_buf_json(&b, e.msg);
            str_buf_printf(&b, "}");
        } else {
            model_json(&b, alias, hub, "", &m);
        }
    }
    str_buf_printf(&b, "]");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *kvsim_gpus_json(void)
{
    str_buf b = {0};
    str_buf_printf(&b, "[");
    for (size_t i = 0; i < gpu_builtin_count(); i++) {
        const gpu_spec *g = gpu_builtin_at(i);
        str_buf_printf(&b, "%s{\"name\": ", i ? ",\n " : "");
        str_buf_json(&b, g->name);
        str_buf_printf(&b,
                       ", \"mem_bytes\": %" PRId64 ", \"mem_runtime_bytes\": %" PRId64
                       ", \"hbm_Bps\": %.17g, \"fp16_flops\": %.17g, \"bf16_flops\": %.17g"
                       ", \"fp8_flops\": %.17g, \"int8_ops\": %.17g, \"fp4_flops\": %.17g"
                       ", \"host_link_Bps\": %.17g, \"nvlink_Bps\": %.17g}",
                       g->mem_bytes, g->mem_runtime_bytes ? g->mem_runtime_bytes : g->mem_bytes,
                       g->hbm_Bps, g->fp16_flops, g->bf16_flops, g->fp8_flops, g->int8_ops,
                       g->fp4_flops, g->host_link_Bps, g->nvlink_Bps);
    }
    str_buf_printf(&b, "]");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *kvsim_cost_constants_json(const char *engine, const char *cost, char err[1024])
{
    cost_roofline_consts k;
    cost_const_origin *origin = malloc(COST_MAX_CONSTS * sizeof *origin);
    kvs_err e;
    if (!origin) {
        snprintf(err, 1024, "out of memory");
        return NULL;
    }
    if (job_cost_constants(engine ? engine : "vllm-v1", cost ? cost : "roofline", &k, origin,
                           &e)) {
        snprintf(err, 1024, "%s", e.msg);
        free(origin);
        return NULL;
    }
    str_buf b = {0};
    str_buf_printf(&b, "[");
    for (size_t i = 0; i < cost_roofline_const_count(); i++) {
        const cost_const_info *c = cost_roofline_const_at(i);
        double v = cost_roofline_const_value(&k, c);
        str_buf_printf(&b, "%s{\"name\": ", i ? ",\n " : "");
        str_buf_json(&b, c->name);
        str_buf_printf(&b, ", \"value\": %.17g, \"unit\": ", v);
        str_buf_json(&b, c->unit);
        str_buf_printf(&b, ", \"from\": ");
        str_buf_json(&b, origin[i]);
        str_buf_printf(&b, ", \"source\": ");
        str_buf_json(&b, c->source);
        str_buf_printf(&b, "}");
    }
    str_buf_printf(&b, "]");
    free(origin);
    if (b.oom) {
        free(b.s);
        snprintf(err, 1024, "out of memory");
        return NULL;
    }
    return b.s;
}

/* ------------------------------------------------------------ datasets */

int kvsim_trace_import(const char *format, const char *in, const char *out, const char *opts,
                       int64_t counts[3], char err[1024])
{
    trace_import_opts o;
    trace_import_info info;
    kvs_err e;
    trace_import_opts_init(&o);
    char line[256];
    for (const char *s = opts ? opts : ""; *s;) {
        size_t n = strcspn(s, "\n");
        if (n >= sizeof line)
            return api_err_out(err, KVSIM_EINVAL, "import option too long");
        memcpy(line, s, n);
        line[n] = 0;
        s += n + (s[n] == '\n');
        if (!n)
            continue;
        char *eq = strchr(line, '=');
        if (eq)
            *eq = 0;
        if (trace_import_opt_set(&o, line, eq ? eq + 1 : NULL, &e))
            return api_err_out(err, KVSIM_EINVAL, e.msg);
    }
    int rc = trace_import(format, in, out, &o, &info, &e);
    if (rc)
        return api_err_out(err, rc, e.msg);
    if (counts) {
        counts[0] = info.records;
        counts[1] = info.requests;
        counts[2] = info.skipped;
    }
    return KVSIM_OK;
}

static char formats_text[1024];

static void fill_formats(void)
{
    size_t len = 0;
    for (size_t i = 0; i < trace_importer_count() && len < sizeof formats_text; i++)
        len += (size_t)snprintf(formats_text + len, sizeof formats_text - len, "%s\t%s\n",
                                trace_importer_at(i)->name, trace_importer_at(i)->doc);
}

const char *kvsim_trace_formats(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_formats);
    return formats_text;
}
