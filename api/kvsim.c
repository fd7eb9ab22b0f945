/* kvsim.c — the public C API (kvsim.h) over the job layer: a run's flags
 * by name (job_param_set), its execution (job_prepare, job_cost_select,
 * run_execute, store_write_run as job_execute does) and its results. */
#include "kvsim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../job/job.h"
#include "../store/store_spool.h"
#include "../sim/run_fields.h"

struct kvsim_db {
    store *st;       /* owned */
};

struct kvsim_run {
    job_opts opts;   /* the flags, then the resolved configuration */
    run_result res;  /* after execute; res.tr points at tr */
    trace tr;        /* the requests simulated (owned) */
    int executed;    /* 1 after a successful execute */
    int64_t run_id;  /* 0 until stored */
    kvs_err err;     /* the last error */
};

/* kvs_status and kvsim_status are the same numbers. */
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
    cost_model cost = {0};
    kvs_err e;
    int rc = job_prepare(&r->opts, &m, &g, &r->tr, &r->err);
    if (rc)
        return rc;
    if ((rc = job_cost_select(&r->opts.cfg, &m, &g, db ? db->st : NULL, r->opts.force_profile,
                              &cost, &e))) {
        kvs_errf(&r->err, rc, "%s", e.msg);
        return rc;
    }
    rc = run_execute(&r->opts.cfg, &r->tr, &cost, &r->res, &r->err);
    cost_model_free(&cost);
    if (rc)
        return rc;
    if (db && (rc = store_save_run(db->st, &r->opts.cfg, &r->res, &r->run_id, &e))) {
        kvs_errf(&r->err, rc, "--db: %s", e.msg);
        return rc;
    }
    r->executed = 1;
    return KVSIM_OK;
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
    out->swaps = s->swaps;
    out->swapped_s = s->swapped_s;
    return KVSIM_OK;
}
