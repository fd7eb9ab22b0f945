/* kvsim.c — the public C API (kvsim.h) over the job layer: a run's flags
 * by name (job_param_set), its execution (job_prepare and job_simulate,
 * the path job_execute takes, then store_save_run) and its results. */
#include "kvsim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "../job/job.h"
#include "../store/store_spool.h"
#include "../sim/run_fields.h"
#include "api_internal.h"

/* kvs_status and kvsim_status are the same numbers. */
/* kvsim_request.reject_reason holds sched_reject_reason's numbers. */
_Static_assert(SCHED_REJECT_CONTEXT == 1 && SCHED_REJECT_TOKEN_BUDGET == 2 &&
                   SCHED_REJECT_KV_CAPACITY == 3,
               "kvsim_request.reject_reason follows sched_reject_reason");
_Static_assert(KVSIM_EINTERNAL == (int)KVS_EINTERNAL && KVSIM_EDB == (int)KVS_EDB,
               "kvsim.h's statuses follow base/kvs.h");

const char *kvsim_version(void) { return KVSIM_VERSION; }

int kvsim_db_open(const char *path, kvsim_db **out, char err[1024])
{
    kvs_err e;
    *out = NULL;
    kvsim_db *db = calloc(1, sizeof *db);
    if (!db) {
        if (err)
            snprintf(err, 1024, "out of memory");
        return KVSIM_ENOMEM;
    }
    int rc = store_open_writable(path, &db->st, &e);
    if (rc) {
        if (err)
            snprintf(err, 1024, "%s", e.msg);
        free(db);
        return rc;
    }
    *out = db;
    return KVSIM_OK;
}

void kvsim_db_close(kvsim_db *db)
{
    if (!db)
        return;
    store_close(db->st);
    free(db);
}

kvsim_run *kvsim_run_new(void)
{
    kvsim_run *r = calloc(1, sizeof *r);
    if (r)
        job_opts_init(&r->opts);
    return r;
}

void kvsim_run_free(kvsim_run *r)
{
    if (!r)
        return;
    run_result_free(&r->res);
    trace_free(&r->tr);
    free(r);
}

int kvsim_run_set(kvsim_run *r, const char *name, const char *value)
{
    if (r->executed)
        return kvs_errf(&r->err, KVS_EINVAL, "--%s: the run was already executed", name);
    r->err.msg[0] = 0;
    return job_param_set(&r->opts, name, value && *value ? value : NULL, &r->err);
}

int kvsim_run_execute(kvsim_run *r, kvsim_db *db)
{
    if (r->executed)
        return kvs_errf(&r->err, KVS_EINVAL, "the run was already executed");
    r->err.msg[0] = 0;
    model_spec m;
    gpu_spec g;
    int ran;
    int rc = job_prepare(&r->opts, &m, &g, &r->tr, &r->err);
    if (rc)
        return rc;
    rc = job_simulate(&r->opts, &m, &g, &r->tr, db ? db->st : NULL, &r->res, &ran, &r->err);
    if (rc) {
        run_result_free(&r->res);
        return rc;
    }
    r->executed = 1;
    return db ? kvsim_run_store(r, db) : KVSIM_OK;
}

int kvsim_run_store(kvsim_run *r, kvsim_db *db)
{
    kvs_err e;
    if (!r->executed || r->run_id)
        return kvs_errf(&r->err, KVS_EINVAL, "--db: the run is %s",
                        r->executed ? "already stored" : "not executed");
    int rc = store_save_run(db->st, &r->opts.cfg, &r->res, &r->run_id, &e);
    if (rc)
        kvs_errf(&r->err, rc, "--db: %s", e.msg);
    return rc;
}

const char *kvsim_run_error(const kvsim_run *r) { return r->err.msg; }
int64_t kvsim_run_id(const kvsim_run *r) { return r->run_id; }

char *kvsim_run_summary_json(const kvsim_run *r)
{
    if (!r->executed)
        return NULL;
    size_t need = run_fields_json(&r->opts.cfg, &r->res.sum, NULL, 0);
    char *body = malloc(need + 1);
    if (!body)
        return NULL;
    run_fields_json(&r->opts.cfg, &r->res.sum, body, need + 1);
    size_t cap = need + 96;
    char *out = malloc(cap);
    if (out) {
        if (isfinite(r->res.wall_s))
            snprintf(out, cap, "{\"run_id\": %lld, %s\"wall_s\": %.17g}", (long long)r->run_id,
                     body, r->res.wall_s);
        else
            snprintf(out, cap, "{\"run_id\": %lld, %s\"wall_s\": null}", (long long)r->run_id,
                     body);
    }
    free(body);
    return out;
}

int64_t kvsim_run_request_count(const kvsim_run *r) { return r->executed ? r->tr.n : 0; }

int kvsim_run_request(const kvsim_run *r, int64_t i, kvsim_request *out)
{
    if (!r->executed || i < 0 || i >= r->tr.n)
        return KVSIM_EINVAL;
    const trace_req *q = &r->tr.reqs[i];
    const sched_req_result *s = &r->res.reqs[i];
    out->req_id = i;
    out->arrival_s = q->arrival_s;
    out->prompt_tokens = q->prompt_tokens;
    out->output_tokens = q->output_tokens;
    out->priority = q->priority;
    out->finished = s->status == SCHED_REQ_FINISHED;
    out->first_token_s = s->first_token_s;
    out->finish_s = s->finish_s;
    out->preemptions = s->preemptions;
    const sched_req_swap w = sched_swap_at(r->res.swaps, i);
    out->swaps = w.swaps;
    out->swapped_s = w.swapped_s;
    out->replica = r->res.replica ? r->res.replica[i] : 0;
    out->decode_replica = r->res.decode ? r->res.decode[i] : -1;
    out->kv_transfer_s = r->res.kv_transfer_s ? r->res.kv_transfer_s[i] : NAN;
    out->max_itl_s = r->res.max_itl_s ? r->res.max_itl_s[i] : NAN;
    out->reject_reason = s->reject_reason;
    out->pad_ = 0;
    return KVSIM_OK;
}

int64_t kvsim_run_step_count(const kvsim_run *r) { return r->executed ? r->res.n_steps : 0; }

static const char *step_kind(int32_t k)
{
    static const char *const names[] = {"prefill", "decode", "mixed"};
    return k >= 0 && k < 3 ? names[k] : "invalid";
}

int kvsim_run_step(const kvsim_run *r, int64_t i, kvsim_step *out)
{
    if (!r->executed || i < 0 || i >= r->res.n_steps)
        return KVSIM_EINVAL;
    const sched_step *p = &r->res.steps[i].step;
    *out = (kvsim_step){p->index, p->start_s, p->dur_s, {0},
                        p->batch.n_prefill, p->batch.n_decode, p->batch.tokens,
                        p->batch.kv_read, p->batch.prefill_sq, p->kv_blocks_used,
                        p->n_waiting, p->n_running, p->n_preempted,
                        p->swap_out_blocks, p->swap_in_blocks, r->res.steps[i].replica};
    snprintf(out->kind, sizeof out->kind, "%s", step_kind(p->kind));
    return KVSIM_OK;
}

int kvsim_run_steps(const kvsim_run *r, int64_t first, int64_t n, kvsim_step *out)
{
    if (first < 0 || n < 0 || first + n > kvsim_run_step_count(r))
        return KVSIM_EINVAL;
    for (int64_t i = 0; i < n; i++)
        kvsim_run_step(r, first + i, &out[i]);
    return KVSIM_OK;
}

int kvsim_run_requests(const kvsim_run *r, int64_t first, int64_t n, kvsim_request *out)
{
    if (first < 0 || n < 0 || first + n > kvsim_run_request_count(r))
        return KVSIM_EINVAL;
    for (int64_t i = 0; i < n; i++)
        kvsim_run_request(r, first + i, &out[i]);
    return KVSIM_OK;
}

int api_err_out(char *err, int rc, const char *msg)
{
    if (err)
        snprintf(err, 1024, "%s", msg);
    return rc;
}

char *kvsim_run_memory_json(kvsim_run *r)
{
    job_opts o = r->opts;
    model_spec m;
    gpu_spec g;
    kv_capacity c;
    r->err.msg[0] = 0;
    if (job_model_setup(&o, &m, &g, &r->err) || run_config_resolve(&o.cfg, &m, &g, &r->err))
        return NULL;
    const sched_config *sc = &o.cfg.sched;
    /* what run_config_resolve sized the cache with */
    if (run_config_kv_capacity(&o.cfg, &m, &g, &c, &r->err))
        return NULL;
    char name[600], gpu[80];
    str_json_escape(name, sizeof name, m.name);
    str_json_escape(gpu, sizeof gpu, g.name);
    char *out = malloc(2048);
    if (!out) {
        kvs_errf(&r->err, KVS_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(out, 2048,
             "{\"model\": \"%s\", \"gpu\": \"%s\", \"tp\": %lld, \"ep\": %lld, \"cp\": %lld, "
             "\"block_size\": %lld, "
             "\"max_batched_tokens\": %lld, \"max_seqs\": %lld, \"gpu_mem_bytes\": %lld, "
             "\"usable_bytes\": %lld, \"weight_bytes\": %lld, \"activation_bytes\": %lld, "
             "\"kv_bytes\": %lld, \"kv_bytes_per_token\": %lld, \"block_bytes\": %lld, "
             "\"kv_blocks\": %lld, \"kv_tokens\": %lld, \"total_blocks\": %lld}",
             name, gpu, (long long)o.cfg.tp, (long long)o.cfg.ep, (long long)o.cfg.cp,
             (long long)sc->block_size,
             (long long)sc->max_batched_tokens, (long long)sc->max_seqs, (long long)g.mem_bytes,
             (long long)c.usable_bytes, (long long)c.weight_bytes, (long long)c.activation_bytes,
             (long long)c.kv_bytes, (long long)c.kv_bytes_per_token, (long long)c.block_bytes,
             (long long)c.kv_blocks, (long long)c.kv_tokens, (long long)sc->total_blocks);
    return out;
}
