/* store_read.c — one `runs` row back as a config and a summary (see
 * store_read.h).  Columns are read by name, so the row's column order is
 * free. */
#include "store_read.h"

#include <math.h>
#include <string.h>

#include <sqlite3.h>

typedef struct row {
    sqlite3_stmt *st;
} row;

static int col(const row *r, const char *name)
{
    int n = sqlite3_column_count(r->st);
    for (int i = 0; i < n; i++)
        if (!strcmp(sqlite3_column_name(r->st, i), name))
            return i;
    return -1;
}

static int is_null(const row *r, int i) { return i < 0 || sqlite3_column_type(r->st, i) == SQLITE_NULL; }

static void text(const row *r, const char *name, char *dst, size_t n)
{
    int i = col(r, name);
    const unsigned char *t = is_null(r, i) ? NULL : sqlite3_column_text(r->st, i);
    snprintf(dst, n, "%s", t ? (const char *)t : "");
}

static int64_t i64(const row *r, const char *name)
{
    int i = col(r, name);
    return is_null(r, i) ? 0 : sqlite3_column_int64(r->st, i);
}

static double f64(const row *r, const char *name)
{
    int i = col(r, name);
    return is_null(r, i) ? NAN : sqlite3_column_double(r->st, i);
}

static void dist(const row *r, const char *prefix, run_dist *d)
{
    char k[64];
    snprintf(k, sizeof k, "%s_p50_s", prefix);
    d->p50 = f64(r, k);
    snprintf(k, sizeof k, "%s_p90_s", prefix);
    d->p90 = f64(r, k);
    snprintf(k, sizeof k, "%s_p99_s", prefix);
    d->p99 = f64(r, k);
    snprintf(k, sizeof k, "%s_mean_s", prefix);
    d->mean = f64(r, k);
}

static void read_config(const row *r, run_config *c)
{
    char name[64];
    run_config_defaults(c);
    text(r, "label", c->label, sizeof c->label);
    text(r, "model", c->model, sizeof c->model);
    text(r, "gpu", c->gpu, sizeof c->gpu);
    c->tp = i64(r, "tp");
    text(r, "trace_path", c->trace_path, sizeof c->trace_path);
    text(r, "synthetic", c->synthetic, sizeof c->synthetic);
    c->rate_scale = f64(r, "rate_scale");
    c->seed = (uint64_t)i64(r, "seed");
    sched_config *k = &c->sched;
    text(r, "batching", name, sizeof name);
    k->batching = sched_batching_parse(name);
    text(r, "policy", name, sizeof name);
    k->policy = sched_policy_parse(name);
    k->priority_preemption = (int)i64(r, "priority_preemption");
    text(r, "alloc", name, sizeof name);
    k->alloc = sched_alloc_parse(name);
    text(r, "preemption", name, sizeof name);
    k->preemption = sched_preempt_parse(name);
    k->block_size = i64(r, "block_size");
    k->total_blocks = i64(r, "kv_blocks");
    c->kv_blocks_flag = i64(r, "kv_blocks_flag");
    k->max_seqs = i64(r, "max_seqs");
    k->max_batched_tokens = i64(r, "max_batched_tokens");
    k->max_model_len = i64(r, "max_model_len");
    k->watermark = f64(r, "watermark");
    c->gpu_mem_util = f64(r, "gpu_mem_util");
    c->swap_gib = f64(r, "swap_gib");
    k->swap_blocks = i64(r, "swap_blocks");
    k->swap_block_s = f64(r, "swap_block_s");
    k->batch_timeout_s = f64(r, "batch_timeout_s");
    k->chunked_prefill = (int)i64(r, "chunked_prefill");
    k->prefix_caching = (int)i64(r, "prefix_caching");
    text(r, "cost", c->cost, sizeof c->cost);
    text(r, "cost_desc", c->cost_desc, sizeof c->cost_desc);
    c->slo_ttft_s = f64(r, "slo_ttft_s");
    c->slo_tpot_s = f64(r, "slo_tpot_s");
    c->slo_e2e_s = f64(r, "slo_e2e_s");
    c->record_steps = (int)i64(r, "record_steps");
    c->compare_id = i64(r, "compare_id");
    c->sweep_id = i64(r, "sweep_id");
}

static void read_summary(const row *r, run_summary *s)
{
    memset(s, 0, sizeof *s);
    s->n_requests = i64(r, "n_requests");
    s->n_finished = i64(r, "n_finished");
    s->n_rejected = i64(r, "n_rejected");
    dist(r, "ttft", &s->ttft);
    dist(r, "tpot", &s->tpot);
    dist(r, "e2e", &s->e2e);
    dist(r, "norm_latency", &s->norm_latency);
    s->throughput_tok_s = f64(r, "throughput_tok_s");
    s->throughput_req_s = f64(r, "throughput_req_s");
    s->preemptions = i64(r, "preemptions");
    s->preempt_recompute = i64(r, "preempt_recompute");
    s->preempt_swap = i64(r, "preempt_swap");
    s->preempt_priority = i64(r, "preempt_priority");
    s->total_kv_blocks = i64(r, "kv_blocks");
    s->peak_kv_blocks = i64(r, "peak_kv_blocks");
    s->mean_kv_blocks = f64(r, "mean_kv_blocks");
    s->mean_batch = f64(r, "mean_batch");
    s->makespan_s = f64(r, "makespan_s");
    s->n_steps = i64(r, "n_steps");
    s->slo_attainment = f64(r, "slo_attainment");
    s->goodput_req_s = f64(r, "goodput_req_s");
    s->prefix_hit_rate = f64(r, "prefix_hit_rate");
    s->prefix_block_hit_rate = f64(r, "prefix_block_hit_rate");
    s->prefix_hit_tokens = i64(r, "prefix_hit_tokens");
    s->prefix_saved_tokens = i64(r, "prefix_saved_tokens");
    s->prefix_evictions = i64(r, "prefix_evictions");
    s->prefill_chunks = i64(r, "prefill_chunks");
}

int store_read_run(store *s, int64_t run_id, store_run_row *out, kvs_err *err)
{
    row r = {NULL};
    memset(out, 0, sizeof *out);
    if (sqlite3_prepare_v2(store_db(s), "SELECT * FROM runs WHERE run_id = ?1", -1, &r.st,
                           NULL) != SQLITE_OK)
        return kvs_errf(err, KVS_EDB, "%s: reading runs: %s", store_path(s),
                        sqlite3_errmsg(store_db(s)));
    sqlite3_bind_int64(r.st, 1, run_id);
    int rc = sqlite3_step(r.st);
    if (rc == SQLITE_DONE) {
        sqlite3_finalize(r.st);
        return kvs_errf(err, KVS_EINVAL, "run %lld: no such run", (long long)run_id);
    }
    if (rc != SQLITE_ROW) {
        int st = kvs_errf(err, KVS_EDB, "%s: reading run %lld: %s", store_path(s),
                          (long long)run_id, sqlite3_errmsg(store_db(s)));
        sqlite3_finalize(r.st);
        return st;
    }
    char status[16];
    out->run_id = run_id;
    text(&r, "status", status, sizeof status);
    out->finished = !strcmp(status, "finished");
    text(&r, "error", out->error, sizeof out->error);
    text(&r, "started_at", out->started_at, sizeof out->started_at);
    out->wall_s = f64(&r, "wall_s");
    read_config(&r, &out->cfg);
    read_summary(&r, &out->sum);
    sqlite3_finalize(r.st);
    return KVS_OK;
}
