/* job_run.c — preparing, simulating and storing one run (see job.h). */
#include "job.h"

#include "../sim/run_fields.h"

#include "../sim/cluster.h"
#include "../store/store_spool.h"
#include "job_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TRACE "traces/azure_llm_2023_conv.csv"

static int fail_static_preempt(const job_opts *o, kvs_err *err)
{
    const sched_config *s = &o->cfg.sched;
    if (s->policy == SCHED_POLICY_PRIORITY && s->batching == SCHED_BATCHING_STATIC &&
        s->priority_preemption)
        return kvs_errf(err, KVS_EINVAL,
                        "--priority-preemption: static batches are never preempted");
    return KVS_OK;
}

int job_model_lookup(const run_config *c, model_spec *m, gpu_spec *g, kvs_err *err)
{
    int rc;
    if ((rc = model_lookup(c->model, m, err)) || (rc = gpu_lookup(c->gpu, g, err)))
        return rc;
    return run_config_apply_dtypes(c, m, err);
}

/* --pd-tp TP_P:TP_D: tp becomes TP_P unless --tp was given (a mismatch is
 * cluster_config_check's error), and TP_D's layout must hold too. */
static int pd_tp_setup(job_opts *o, const model_spec *m, kvs_err *err)
{
    int64_t tp_p, tp_d;
    int rc = cluster_pd_tp_parse(o->cfg.pd_tp, &tp_p, &tp_d, err);
    if (rc || tp_p == 0)
        return rc;
    if (!job_param_given(o, "tp"))
        o->cfg.tp = tp_p;
    model_par par = {tp_d, o->cfg.ep, o->cfg.cp};
    kvs_err e;
    if ((rc = model_check_par(m, &par, &e)))
        return kvs_errf(err, rc, "--pd-tp %s: the decode pool: %s", o->cfg.pd_tp, e.msg);
    return KVS_OK;
}

int job_model_setup(job_opts *o, model_spec *m, gpu_spec *g, kvs_err *err)
{
    int rc;
    if ((rc = job_model_lookup(&o->cfg, m, g, err)) || (rc = pd_tp_setup(o, m, err)))
        return rc;
    model_par par = {o->cfg.tp, o->cfg.ep, o->cfg.cp};
    if ((rc = model_check_par(m, &par, err)))
        return rc;
    return job_engine_apply(o, m, g, err);
}

int job_kv_budget(job_opts *o, model_spec *m, gpu_spec *g, model_kv_budget *b, kvs_err *err)
{
    int rc = job_model_setup(o, m, g, err);
    if (rc)
        return rc;
    run_config *c = &o->cfg;
    run_config_resolve_budget(c, m);
    b->rule = (model_kv_rule)c->kv_rule;
    b->frac = c->gpu_mem_util;
    b->block_size = c->sched.block_size;
    b->max_batched_tokens = c->sched.max_batched_tokens;
    /* sglang's max_seqs is resolved from the pool later; its rule reads none */
    b->max_seqs = c->sched.max_seqs > 0 ? c->sched.max_seqs : 1;
    return KVS_OK;
}

int job_check(const job_opts *o, kvs_err *err)
{
    job_opts oc = *o; /* the profile's defaults land in this copy */
    run_config c;
    model_spec m;
    gpu_spec g;
    trace_synth_spec spec;
    int rc;
    if ((rc = job_model_setup(&oc, &m, &g, err)))
        return rc;
    c = oc.cfg;
    if (c.trace_path[0] && c.synthetic[0])
        return kvs_errf(err, KVS_EINVAL, "--trace and --synthetic: give one workload");
    if (c.synthetic[0] && (rc = trace_synth_parse(c.synthetic, &spec, err)))
        return rc;
    if (c.trace_path[0] && access(c.trace_path, R_OK) != 0)
        return kvs_errf(err, KVS_EIO, "--trace %s: cannot read it", c.trace_path);
    if ((rc = fail_static_preempt(o, err)) || (rc = cluster_config_check(&c, err)))
        return rc;
    if ((rc = run_config_resolve(&c, &m, &g, err)))
        return rc;
    return sched_config_check(&c.sched, 1, err);
}

void job_trace_path(const run_config *c, char *out, size_t cap)
{
    if (c->synthetic[0]) {
        snprintf(out, cap, "%s", "");
        return;
    }
    if (c->trace_path[0]) {
        snprintf(out, cap, "%s", c->trace_path);
        return;
    }
    snprintf(out, cap, "%s", DEFAULT_TRACE);
#ifdef KVSIM_SOURCE_DIR
    /* run from anywhere: fall back to the source tree's copy */
    if (access(out, R_OK) != 0)
        snprintf(out, cap, "%s/%s", KVSIM_SOURCE_DIR, DEFAULT_TRACE);
#endif
}

/* Load the trace file (the default one when none is named) or generate the
 * synthetic workload. */
static int load_workload(run_config *c, trace *tr, kvs_err *err)
{
    if (c->synthetic[0]) {
        trace_synth_spec spec;
        int rc = trace_synth_parse(c->synthetic, &spec, err);
        return rc ? rc : trace_synth_gen(&spec, c->synthetic, c->seed, tr, err);
    }
    if (!c->trace_path[0])
        job_trace_path(c, c->trace_path, sizeof c->trace_path);
    return trace_load(c->trace_path, tr, err);
}

/* --rate for a synthetic spec: its rate= becomes R (before generation). */
static int rate_into_spec(run_config *c, kvs_err *err)
{
    trace_synth_spec spec;
    int rc = trace_synth_parse(c->synthetic, &spec, err);
    if (rc)
        return rc;
    if (spec.arrival == TRACE_ARRIVAL_BURST)
        return kvs_errf(err, KVS_EINVAL, "--rate: arrival=burst has no rate (every request "
                                         "arrives at 0)");
    char v[64];
    snprintf(v, sizeof v, "%.17g", c->rate_rps);
    return sweep_spec_set(c->synthetic, sizeof c->synthetic, "rate", v, err);
}

double job_trace_rate(const trace *tr)
{
    double span = tr->n > 1 ? tr->reqs[tr->n - 1].arrival_s - tr->reqs[0].arrival_s : 0.0;
    return span > 0 ? (double)(tr->n - 1) / span : 0.0;
}

/* --rate for a trace file: the multiplier that brings its rate to R. */
static int rate_to_scale(run_config *c, const trace *tr, kvs_err *err)
{
    double native = job_trace_rate(tr);
    if (!(native > 0))
        return kvs_errf(err, KVS_EINVAL, "--rate: %s has no arrival rate to scale (fewer than "
                                         "two requests, or all arrive at once)", c->trace_path);
    c->rate_scale = c->rate_rps / native;
    return KVS_OK;
}

int job_workload_rate(const job_opts *o, double *rps, kvs_err *err)
{
    run_config c = o->cfg;
    trace tr;
    memset(&tr, 0, sizeof tr);
    if (c.synthetic[0])
        return kvs_errf(err, KVS_EINTERNAL, "job_workload_rate: a trace file only");
    int rc = load_workload(&c, &tr, err);
    if (rc)
        return rc;
    *rps = job_trace_rate(&tr);
    trace_free(&tr);
    if (!(*rps > 0))
        return kvs_errf(err, KVS_EINVAL, "--rate: %s has no arrival rate to scale (fewer than "
                                         "two requests, or all arrive at once)", c.trace_path);
    return KVS_OK;
}

int job_prepare(job_opts *o, model_spec *m, gpu_spec *g, trace *tr, kvs_err *err)
{
    run_config *c = &o->cfg;
    int rc;
    memset(tr, 0, sizeof *tr);
    if ((rc = job_model_setup(o, m, g, err)))
        return rc;
    if (c->trace_path[0] && c->synthetic[0])
        return kvs_errf(err, KVS_EINVAL, "--trace and --synthetic: give one workload, not both");
    if (!job_param_given(o, "router-seed"))
        c->router_seed = c->seed;
    if ((rc = fail_static_preempt(o, err)) || (rc = cluster_config_check(c, err)))
        return rc;
    if (c->rate_rps > 0 && c->synthetic[0] && (rc = rate_into_spec(c, err)))
        return rc;
    if ((rc = load_workload(c, tr, err)))
        return rc;
    if (c->rate_rps > 0 && !c->synthetic[0] && (rc = rate_to_scale(c, tr, err))) {
        trace_free(tr);
        return rc;
    }
    if (c->priorities[0]) {
        trace_synth_spec sp;
        if (c->synthetic[0] && trace_synth_parse(c->synthetic, &sp, err) == 0 && sp.n_classes > 0)
            rc = kvs_errf(err, KVS_EINVAL, "--priorities and the --synthetic spec's priorities=: "
                                           "give one");
        else
            rc = trace_assign_priorities(tr, c->priorities, c->seed, err);
        if (rc) {
            trace_free(tr);
            return rc;
        }
    }
    if (c->rate_scale != 1.0)
        trace_scale_rate(tr, c->rate_scale);
    if ((rc = run_config_resolve(c, m, g, err)) ||
        (rc = sched_config_check(&c->sched, tr->n, err))) {
        trace_free(tr);
        return rc;
    }
    if (c->sched.policy == SCHED_POLICY_PRIORITY && !tr->has_priority) {
        trace_free(tr);
        return kvs_errf(err, KVS_EINVAL,
                        "--policy priority: %s has no priorities (give the native CSV a "
                        "priority column, or the synthetic spec priorities=P:SHARE/...)",
                        c->synthetic[0] ? "the synthetic workload" : c->trace_path);
    }
    return KVS_OK;
}

/* job_simulate, and with js non-NULL the run's rows staged for cost_st
 * while it simulates (job_stream.h) when the run is one engine. */
static int simulate(job_opts *o, const model_spec *m, const gpu_spec *g, const trace *tr,
                    store *cost_st, job_stream *js, run_result *res, int *ran, kvs_err *err)
{
    cost_model cost = {0}, dcost = {0};
    kvs_err e;
    int rc;
    *ran = 0;
    memset(res, 0, sizeof *res);
    if ((rc = job_cost_select(&o->cfg, m, g, cost_st, o->force_profile, &cost, &e)) ||
        (rc = job_cost_select_decode(&o->cfg, m, g, &dcost, &e))) {
        kvs_errf(err, rc, "%s", e.msg);
        goto done;
    }
    *ran = 1;
    const run_row_sink *rows = js && !run_config_clustered(&o->cfg) &&
                                       job_stream_start(js, cost_st, tr)
                                   ? &js->sink
                                   : NULL;
    rc = run_execute_rows(&o->cfg, tr, &cost, dcost.vt ? &dcost : NULL, o->progress,
                          o->progress_ctx, rows, res, err);
done:
    if (cost.vt)
        cost_model_free(&cost);
    if (dcost.vt)
        cost_model_free(&dcost);
    return rc;
}

int job_simulate(job_opts *o, const model_spec *m, const gpu_spec *g, const trace *tr,
                 store *cost_st, run_result *res, int *ran, kvs_err *err)
{
    return simulate(o, m, g, tr, cost_st, NULL, res, ran, err);
}

/* A new database built privately (store_open_new) goes into place once its
 * run is in it; when another process created the database meanwhile, the
 * run is written there instead (its rows from memory). */
static int publish_run(store *st, job_opts *o, run_result *res, int64_t *run_id, kvs_err *err)
{
    int raced = 0, rc = store_publish(st, &raced, err);
    if (rc || !raced)
        return rc;
    res->rows_streamed = 0;
    return store_save_run(st, &o->cfg, res, run_id, err);
}

/* store_save_failed_run, then the same for a failed run. */
static int save_failed(store *st, job_opts *o, const trace *tr, const char *msg,
                       const run_result *res, int64_t *id, kvs_err *err)
{
    int raced = 0, rc = store_save_failed_run(st, &o->cfg, tr, msg, res->started_at, res->wall_s,
                                              id, err);
    if (!rc)
        rc = store_publish(st, &raced, err);
    if (!rc && raced)
        rc = store_save_failed_run(st, &o->cfg, tr, msg, res->started_at, res->wall_s, id, err);
    return rc;
}

int job_execute(job_opts *o, store *st, int64_t *run_id, run_result *res_out, kvs_err *err)
{
    model_spec m;
    gpu_spec g;
    trace tr;
    int rc, ran;
    if (o->result_json[0] && (rc = job_result_json_check(o->result_json, err)))
        return rc;
    if ((rc = job_prepare(o, &m, &g, &tr, err)))
        return rc;
    run_result res = {0};
    kvs_err e;
    job_stream js = {0};
    if ((rc = simulate(o, &m, &g, &tr, st, o->stream_rows ? &js : NULL, &res, &ran, &e))) {
        job_stream_end(&js);
        kvs_err e2;
        int64_t failed_id = 0;
        if (ran && save_failed(st, o, &tr, e.msg, &res, &failed_id, &e2) == 0)
            kvs_errf(err, rc, "%s (recorded as failed run %lld)", e.msg, (long long)failed_id);
        else
            kvs_errf(err, rc, "%s", e.msg);
        goto done;
    }
    if ((rc = job_stream_save(&js, st, &o->cfg, &res, run_id, &res.rows_streamed, &e)) ||
        (rc = publish_run(st, o, &res, run_id, &e))) {
        kvs_errf(err, rc, "--db: %s", e.msg);
        goto done;
    }
    if (o->result_json[0] &&
        (rc = job_result_json_write(o->result_json, &o->cfg, &res, o->result_json_detail, &e))) {
        kvs_errf(err, rc, "%s (run %lld is stored)", e.msg, (long long)*run_id);
        goto done;
    }
    if (res_out) {
        *res_out = res;
        res_out->tr = NULL; /* the trace is freed below */
        memset(&res, 0, sizeof res);
    }
done:
    run_result_free(&res);
    trace_free(&tr);
    return rc;
}

/* The `runs` columns that hold a run flag's value, checked against the
 * flag's range in the one flag table (job_param.c): a stored value is
 * trusted no more than a typed one.  zero_unset: 0 (NULL) means the flag
 * was not given. */
static const struct {
    const char *column, *flag;
    int zero_unset;
} stored_flags[] = {
    {"tp", "tp", 0},
    {"decode_tp", "tp", 1},
    {"ep", "ep", 0},
    {"cp", "cp", 0},
    {"rate_scale", "rate-scale", 0},
    {"rate_rps", "rate", 1},
    {"block_size", "block-size", 0},
    {"kv_blocks", "kv-blocks", 0},
    {"kv_blocks_flag", "kv-blocks", 1},
    {"max_seqs", "max-seqs", 0},
    {"max_batched_tokens", "max-batched-tokens", 0},
    {"max_model_len", "max-model-len", 0},
    {"watermark", "watermark", 0},
    {"gpu_mem_util", "gpu-mem-util", 0},
    {"swap_gib", "swap-gib", 0},
    {"batch_timeout_s", "batch-timeout", 0},
    {"long_prefill_threshold", "long-prefill-threshold", 0},
    {"segment_tokens", "segment-tokens", 1},
    {"replicas", "replicas", 0},
    {"affinity_cap", "affinity-cap", 0},
    {"frontend_ms", "frontend-ms", 0},
    {"max_prefill_tokens", "max-prefill-tokens", 1},
    {"conservativeness", "schedule-conservativeness", 1},
    {"num_scheduler_steps", "num-scheduler-steps", 0},
};

/* x in the fewest digits that read back as x (up to 17). */
static const char *num(char buf[32], double x)
{
    snprintf(buf, 32, "%.15g", x);
    if (strtod(buf, NULL) != x)
        snprintf(buf, 32, "%.17g", x);
    return buf;
}

int job_run_check_stored(const job_run_info *row, kvs_err *err)
{
    for (size_t i = 0; i < sizeof stored_flags / sizeof stored_flags[0]; i++) {
        const run_field *f = run_field_find(stored_flags[i].column);
        const job_param *p = job_param_find(stored_flags[i].flag);
        if (!f || !p || (p->kind != JOB_PARAM_I64 && p->kind != JOB_PARAM_F64))
            return kvs_errf(err, KVS_EINTERNAL, "job: runs.%s / --%s: not a numeric flag column",
                            stored_flags[i].column, stored_flags[i].flag);
        run_value v = run_field_get(f, &row->cfg, &row->sum);
        double x = v.kind == RUN_VALUE_INT ? (double)v.i : v.kind == RUN_VALUE_REAL ? v.d : 0.0;
        if (x == 0.0 && (stored_flags[i].zero_unset || v.kind == RUN_VALUE_NULL) &&
            (stored_flags[i].zero_unset || p->lo <= 0.0))
            continue;
        if (!(x >= p->lo && x <= p->hi)) {
            char val[32], lo[32], hi[32];
            if (v.kind == RUN_VALUE_INT)
                snprintf(val, sizeof val, "%lld", (long long)v.i);
            else
                num(val, x);
            return kvs_errf(err, KVS_EINVAL,
                            "run %lld: runs.%s = %s is outside [%s, %s], the range of --%s",
                            (long long)row->run_id, f->name, val, num(lo, p->lo), num(hi, p->hi),
                            p->name);
        }
    }
    return KVS_OK;
}

int job_read_run(store *st, int64_t run_id, job_run_info *out, kvs_err *err)
{
    int rc = store_read_run(store_db(st), run_id, out, err);
    return rc ? rc : job_run_check_stored(out, err);
}
