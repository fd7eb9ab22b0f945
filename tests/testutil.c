#include "testutil.h"

#include "base/rng.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dirs[64][512];
static int g_ndirs;

static void cleanup(void)
{
    for (int i = 0; i < g_ndirs; i++) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%.520s'", g_dirs[i]);
        if (system(cmd) != 0) { /* best effort */ }
    }
}

const char *tu_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    if (g_ndirs >= 64)
        abort();
    char *d = g_dirs[g_ndirs];
    snprintf(d, 512, "%s/kvsim-test-XXXXXX", base);
    if (!mkdtemp(d))
        abort();
    if (g_ndirs++ == 0)
        atexit(cleanup);
    return d;
}

char *tu_write_file(const char *dir, const char *name, const char *text)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p)
        abort();
    snprintf(p, n, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
    return p;
}

int tu_run(const char *cmd, char **out)
{
    char *full = malloc(strlen(cmd) + 16);
    if (!full)
        abort();
    sprintf(full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (!p)
        return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += k;
        if (cap - len < 2048) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    if (!buf)
        abort();
    buf[len] = 0;
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    if (st == -1)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *tu_kvsim(void)
{
#ifdef KVSIM_BIN
    return KVSIM_BIN;
#else
    return "./build/kvsim";
#endif
}

int tu_run_suites(Suite **suites, int n)
{
    SRunner *sr = srunner_create(suites[0]);
    for (int i = 1; i < n; i++)
        srunner_add_suite(sr, suites[i]);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

void golden_run(golden *g)
{
    kvs_err err;
    int rc = run_execute(&g->cfg, &g->tr, &g->cost, &g->res, &err);
    ck_assert_msg(rc == 0, "run failed: %s", err.msg);
}

void tu_golden_init(golden *g, const double *rows, int cols, int n, const char *cost)
{
    ck_assert(cols == 3 || cols == 4);
    memset(g, 0, sizeof *g);
    g->tr.n = n;
    g->tr.reqs = calloc((size_t)n, sizeof(trace_req));
    ck_assert_ptr_nonnull(g->tr.reqs);
    for (int i = 0; i < n; i++) {
        const double *r = rows + (size_t)i * (size_t)cols;
        g->tr.reqs[i].arrival_s = r[0];
        g->tr.reqs[i].prompt_tokens = (int64_t)r[1];
        g->tr.reqs[i].output_tokens = (int64_t)r[2];
        g->tr.reqs[i].priority = cols == 4 ? (int32_t)r[3] : 0;
    }
    run_config_defaults(&g->cfg);
    g->cfg.record_steps = 1;
    kvs_err err;
    int rc = cost_model_create(cost, NULL, NULL, 1, &g->cost, &err);
    ck_assert_msg(rc == 0, "%s: %s", cost, err.msg);
}

void tu_token_times(const golden *g, double *tt, int maxo, int64_t *ntok)
{
    memset(ntok, 0, (size_t)g->tr.n * sizeof *ntok);
    for (int64_t i = 0; i < g->res.n_steps; i++) {
        const run_step_rec *r = &g->res.steps[i];
        const int64_t nm = (i + 1 < g->res.n_steps ? g->res.steps[i + 1].member_off
                                                    : g->res.n_members) -
                           r->member_off;
        const double end = r->step.start_s + r->step.dur_s;
        for (int64_t k = 0; k < nm; k++) {
            const sched_member *m = &g->res.members[r->member_off + k];
            const int32_t id = m->req_id;
            if (m->context == g->tr.reqs[id].prompt_tokens + ntok[id]) {
                ck_assert_int_lt(ntok[id], maxo);
                tt[(size_t)id * (size_t)maxo + (size_t)ntok[id]++] = end;
            }
        }
    }
}

int64_t tu_sql_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "%s: no row (%s)", sql, sqlite3_errmsg(db));
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

void tu_sql_expect(sqlite3 *db, const tu_sql_want *q, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const int64_t v = tu_sql_int(db, q[i].sql);
        ck_assert_msg(v == q[i].want, "%s: %lld, want %lld", q[i].sql, (long long)v,
                      (long long)q[i].want);
    }
}

void golden_free(golden *g)
{
    run_result_free(&g->res);
    cost_model_free(&g->cost);
    trace_free(&g->tr);
}

void tu_random_trace(trace *t, int n, uint64_t seed, int64_t pmax, int64_t omax,
                     int with_prio)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->reqs = calloc((size_t)n, sizeof *t->reqs);
    ck_assert_ptr_nonnull(t->reqs);
    rng r;
    rng_init(&r, seed);
    double at = 0;
    for (int i = 0; i < n; i++) {
        at += rng_exponential(&r, 0.05);
        if (rng_uniform(&r) < 0.2 && i > 0)
            at = t->reqs[i - 1].arrival_s; /* simultaneous arrivals */
        t->reqs[i].arrival_s = at;
        t->reqs[i].prompt_tokens = 1 + (int64_t)rng_below(&r, (uint64_t)pmax);
        t->reqs[i].output_tokens = 1 + (int64_t)rng_below(&r, (uint64_t)omax);
        t->reqs[i].priority = with_prio ? (int32_t)rng_below(&r, 3) : 0;
    }
    t->has_priority = with_prio;
}

void tu_variant_config(run_config *cfg, const tu_variant *v, uint64_t seed)
{
    run_config_defaults(cfg);
    sched_config *s = &cfg->sched;
    s->batching = v->batching;
    s->policy = v->policy;
    s->priority_preemption = v->prio_pre;
    s->alloc = v->alloc;
    s->preemption = v->preempt;
    s->block_size = 1 + (int64_t)(seed % 8);
    s->max_model_len = 180;
    s->total_blocks = (s->max_model_len + s->block_size - 1) / s->block_size + (int64_t)(seed % 40);
    s->max_seqs = 2 + (int64_t)(seed % 30);
    s->max_batched_tokens = 130 + (int64_t)(seed % 200);
    s->watermark = (double)(seed % 3) * 0.01;
    s->swap_blocks = 1 + (int64_t)(seed % 25);
    s->swap_block_s = 0.0005;
    cfg->record_steps = 1;
}

model_spec tu_model(const char *name)
{
    model_spec m;
    kvs_err err;
    int rc = model_lookup(name, &m, &err);
    ck_assert_msg(rc == KVS_OK, "%s: %s", name, err.msg);
    return m;
}

gpu_spec tu_gpu(const char *name)
{
    gpu_spec g;
    kvs_err err;
    ck_assert_msg(gpu_lookup(name, &g, &err) == KVS_OK, "%s: %s", name, err.msg);
    return g;
}

void tu_cost_affine(cost_model *cost)
{
    kvs_err err = {{0}};
    ck_assert_msg(cost_model_create("affine:0.01,0.0001,0.00001,0.0000001", NULL, NULL, 1, cost,
                                    &err) == 0,
                  "%s", err.msg);
}

void tu_check_outcomes(const trace *tr, const run_result *res)
{
    int64_t fin = 0, rej = 0;
    for (int64_t i = 0; i < tr->n; i++) {
        const sched_req_result *r = &res->reqs[i];
        if (r->status == SCHED_REQ_FINISHED) {
            fin++;
            ck_assert(r->first_token_s > tr->reqs[i].arrival_s);
            ck_assert(r->first_token_s <= r->finish_s);
        } else {
            ck_assert_int_eq(r->status, SCHED_REQ_REJECTED);
            rej++;
        }
    }
    ck_assert_int_eq(fin + rej, tr->n);
    ck_assert_int_eq(fin, res->sum.n_finished);
}
