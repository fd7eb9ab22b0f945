/* job_compare.c — the variants of `kvsim compare` (see job.h): parsing
 * and applying one, the default set for a workload, the next compare id. */
#include "job.h"

#include <string.h>

#include <sqlite3.h>

/* The default sets, per the base's engine profile; a set's priority
 * variant is its last (it needs a workload with priorities). */
static const job_variant v0_variants[] = {
    {"continuous", ""},
    {"static", "batching=static"},
    {"reserved", "alloc=reserved"},
    {"no-kv-cache", "kv-cache=off"},
    {"multi-step-8", "num-scheduler-steps=8"}, /* vLLM 0.6's multi-step scheduling */
    {"priority", "policy=priority,priority-preemption"},
};
static const job_variant v1_variants[] = {
    {"vllm-v1", ""},
    {"no-chunked-prefill", "no-chunked-prefill"},
    {"vllm-v0", "engine=vllm-v0"},
    {"vllm-v0-static", "engine=vllm-v0,batching=static"},
    {"no-kv-cache", "engine=vllm-v0,kv-cache=off"},
    {"priority", "policy=priority"},
};

static const job_variant trt_variants[] = {
    {"trtllm", ""},
    {"max-utilization", "alloc=paged"},
    {"no-chunked-context", "no-chunked-prefill"},
    {"vllm-v1", "engine=vllm-v1"},
    {"vllm-v1-priority", "engine=vllm-v1,policy=priority"},
};

static const job_variant sgl_variants[] = {
    {"sglang", ""},
    {"no-overlap", "no-overlap-schedule"},
    {"no-chunked-prefill", "no-chunked-prefill"},
    {"vllm-v1", "engine=vllm-v1"},
    {"trtllm", "engine=trtllm"},
    {"vllm-v1-priority", "engine=vllm-v1,policy=priority"},
};

/* Added to the default set when the workload has prompt prefix hashes (a
 * Mooncake .jsonl trace, a CSV hash_ids column, or --synthetic with
 * system_prompt= or turns=). */
static const job_variant v0_prefix_variants[] = {
    {"prefix-cache", "prefix-caching"},
    {"lpm", "policy=lpm,prefix-caching"},
};
static const job_variant v1_prefix_variants[] = {
    {"no-prefix-cache", "no-prefix-caching"},
};
static const job_variant sgl_prefix_variants[] = {
    {"no-radix-cache", "no-prefix-caching"},
};

/* What the base workload carries: prompt prefix hashes, priorities.
 * Loads the trace once (a bad one is reported by the runs themselves). */
static void workload_features(const job_opts *o, int *prefixes, int *priorities)
{
    const run_config *c = &o->cfg;
    kvs_err err;
    *prefixes = *priorities = 0;
    if (c->priorities[0])
        *priorities = 1; /* --priorities gives any workload classes */
    if (c->synthetic[0]) {
        trace_synth_spec sp;
        if (trace_synth_parse(c->synthetic, &sp, &err) == 0) {
            *prefixes = sp.system_prompt > 0 || sp.turns > 1;
            *priorities |= sp.n_classes > 0;
        }
        return;
    }
    trace t;
    if (!c->trace_path[0] || trace_load(c->trace_path, &t, &err) != 0)
        return; /* the default trace has neither */
    *prefixes = t.hash_off != NULL;
    *priorities |= t.has_priority;
    trace_free(&t);
}

int job_compare_defaults(const job_opts *base, job_variant *vs, int *n, int *no_priorities)
{
    int v1 = base->cfg.sched.engine == SCHED_ENGINE_VLLM_V1;
    int trt = base->cfg.sched.engine == SCHED_ENGINE_TRTLLM;
    int sgl = base->cfg.sched.engine == SCHED_ENGINE_SGLANG;
    const job_variant *set = trt ? trt_variants : sgl ? sgl_variants : v1 ? v1_variants : v0_variants;
    const job_variant *pfx = sgl ? sgl_prefix_variants : v1 ? v1_prefix_variants : v0_prefix_variants;
    int nv = trt   ? (int)(sizeof trt_variants / sizeof *trt_variants)
             : sgl ? (int)(sizeof sgl_variants / sizeof *sgl_variants)
             : v1  ? (int)(sizeof v1_variants / sizeof *v1_variants)
                   : (int)(sizeof v0_variants / sizeof *v0_variants);
    int np = trt   ? 0 /* no block reuse under trtllm */
             : sgl ? (int)(sizeof sgl_prefix_variants / sizeof *sgl_prefix_variants)
             : v1  ? (int)(sizeof v1_prefix_variants / sizeof *v1_prefix_variants)
                   : (int)(sizeof v0_prefix_variants / sizeof *v0_prefix_variants);
    memcpy(vs, set, (size_t)nv * sizeof *vs);
    int has_prefixes = 0, has_priorities = 0;
    workload_features(base, &has_prefixes, &has_priorities);
    *no_priorities = !has_priorities;
    if (!has_priorities)
        nv--; /* the priority variant is last: it needs priorities */
    if (has_prefixes)
        for (int i = 0; i < np; i++)
            vs[nv++] = pfx[i];
    *n = nv;
    return KVS_OK;
}

int job_variant_apply(job_opts *o, const job_variant *v, kvs_err *err)
{
    char buf[512];
    kvs_err e;
    strcpy(buf, v->flags);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *val = "";
        if (eq) {
            *eq = 0;
            val = eq + 1;
        }
        const job_param *p = job_param_find(tok);
        if (!p || !(p->vary & JOB_VARY_VARIANT))
            return kvs_errf(err, KVS_EINVAL, "--variant %s: unknown or disallowed flag '%s'",
                            v->name, tok);
        int sw = p->kind == JOB_PARAM_SWITCH || p->kind == JOB_PARAM_OFF;
        if (!sw && !eq)
            return kvs_errf(err, KVS_EINVAL, "--variant %s: flag '%s' needs a value", v->name,
                            tok);
        if (sw && eq)
            return kvs_errf(err, KVS_EINVAL, "--variant %s: flag '%s' takes no value", v->name,
                            tok);
        int rc = job_param_set(o, p->name, val, &e);
        if (rc)
            return kvs_errf(err, rc, "--variant %s: %s", v->name, e.msg);
    }
    return KVS_OK;
}

int job_variant_parse(const char *arg, job_variant *v, kvs_err *err)
{
    const char *colon = strchr(arg, ':');
    size_t nlen = colon ? (size_t)(colon - arg) : strlen(arg);
    if (nlen == 0 || nlen >= sizeof v->name)
        return kvs_errf(err, KVS_EINVAL, "--variant: '%s' needs a name of 1 to %zu characters",
                        arg, sizeof v->name - 1);
    memcpy(v->name, arg, nlen);
    v->name[nlen] = 0;
    const char *flags = colon ? colon + 1 : "";
    if (strlen(flags) >= sizeof v->flags)
        return kvs_errf(err, KVS_EINVAL, "--variant %s: flags too long", v->name);
    strcpy(v->flags, flags);
    return KVS_OK;
}

int job_compare_reserve(store *st, const job_variant *vs, int n, int64_t *id, kvs_err *err)
{
    char text[4096];
    size_t len = 0;
    text[0] = 0;
    for (int i = 0; i < n && len < sizeof text; i++) {
        int k = snprintf(text + len, sizeof text - len, "%s%s%s%s", i ? "\n" : "", vs[i].name,
                         vs[i].flags[0] ? ":" : "", vs[i].flags);
        len = k < 0 ? sizeof text : len + (size_t)k;
    }
    return store_compare_create(st, text, n, id, err);
}

/* ------------------------------------------------------------ resume */

/* "NAME[:FLAGS]" of each variant, one per line, into text[cap]. */
static void variants_text(const job_variant *vs, int n, char *text, size_t cap)
{
    size_t len = 0;
    text[0] = 0;
    for (int i = 0; i < n && len < cap; i++) {
        int k = snprintf(text + len, cap - len, "%s%s%s%s", i ? "\n" : "", vs[i].name,
                         vs[i].flags[0] ? ":" : "", vs[i].flags);
        len = k < 0 ? cap : len + (size_t)k;
    }
}

int job_compare_create(store *st, const job_opts *base, const char *base_args,
                       const job_variant *vs, int n, int64_t *id, kvs_err *err)
{
    char text[JOB_MAX_VARIANTS * 600];
    job_inputs in = {0, 0, NULL, NULL, NULL};
    kvs_err e;
    int rc = KVS_OK;
    for (int i = 0; i < n && !rc; i++) {
        job_opts o = *base;
        if (!(rc = job_variant_apply(&o, &vs[i], err)))
            rc = job_inputs_add_opts(&in, &o, err);
    }
    if (!rc) {
        variants_text(vs, n, text, sizeof text);
        store_compare_def d = {text, base_args, n, in.n, (const char *const *)in.path,
                               (const char *const *)in.abs, (const char *const *)in.sha};
        if ((rc = store_compare_create_def(st, &d, id, &e)))
            kvs_errf(err, rc, "--db: %s", e.msg);
    }
    job_inputs_free(&in);
    return rc;
}

int job_compare_load(store *st, int64_t id, char **base_args, job_variant *vs, int *n,
                     kvs_err *err)
{
    store_compare_info info;
    kvs_err e;
    *base_args = NULL;
    *n = 0;
    int rc = store_compare_get(st, id, &info, &e);
    if (rc)
        return kvs_errf(err, rc, "--resume: %s", e.msg);
    char *save = NULL;
    for (char *line = strtok_r(info.variants, "\n", &save); line && !rc;
         line = strtok_r(NULL, "\n", &save)) {
        if (*n == JOB_MAX_VARIANTS)
            rc = kvs_errf(err, KVS_EINVAL, "--resume: compare %lld: more than %d variants",
                          (long long)id, JOB_MAX_VARIANTS);
        else if (job_variant_parse(line, &vs[*n], &e))
            rc = kvs_errf(err, KVS_EINVAL, "--resume: compare %lld: compares.variants: %s",
                          (long long)id, e.msg);
        else
            ++*n;
    }
    if (!rc && (*n == 0 || *n != info.n_runs))
        rc = kvs_errf(err, KVS_EINVAL,
                      "--resume: compare %lld: compares.variants names %d variants, n_runs "
                      "says %lld",
                      (long long)id, *n, (long long)info.n_runs);
    if (!rc && !(*base_args = strdup(info.base_args)))
        rc = kvs_errf(err, KVS_ENOMEM, "out of memory");
    store_compare_info_free(&info);
    return rc;
}

int job_compare_check_same(const job_variant *a, int na, const job_variant *b, int nb,
                           int64_t id, kvs_err *err)
{
    char ta[JOB_MAX_VARIANTS * 600], tb[JOB_MAX_VARIANTS * 600];
    variants_text(a, na, ta, sizeof ta);
    variants_text(b, nb, tb, sizeof tb);
    if (strcmp(ta, tb)) {
        for (char *p = ta; *p; p++)
            *p = *p == '\n' ? ' ' : *p;
        for (char *p = tb; *p; p++)
            *p = *p == '\n' ? ' ' : *p;
        return kvs_errf(err, KVS_EINVAL,
                        "--resume: compare %lld ran the variants '%.300s', not '%.300s'",
                        (long long)id, ta, tb);
    }
    return KVS_OK;
}
