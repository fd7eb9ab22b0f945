/* val_store.c — validation's side of the store: reading a run with its
 * requests and recorded steps (members blobs decoded, docs/schema.md), and
 * writing a validation with its steps in one transaction. */
#include "validate.h"

#include "../job/job.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MEMBER_BYTES 24 /* int32 req_id, int32 kind, int64 tokens, int64 context */

static int db_err(sqlite3 *db, kvs_err *err, const char *what)
{
    const char *path = sqlite3_db_filename(db, "main");
    return kvs_errf(err, KVS_EDB, "%s: %s: %s", path && *path ? path : "database", what,
                    sqlite3_errmsg(db));
}

static double col_f64(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static void col_str(sqlite3_stmt *st, int i, char *dst, size_t n)
{
    const unsigned char *v = sqlite3_column_text(st, i);
    snprintf(dst, n, "%s", v ? (const char *)v : "");
}

static int64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = v << 8 | p[k];
    return (int64_t)v;
}

static int32_t le32(const unsigned char *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return (int32_t)v;
}

const sched_member *val_run_step_members(const val_run *r, int64_t i, int64_t *n)
{
    int64_t off = r->steps[i].member_off;
    int64_t end = i + 1 < r->n_steps ? r->steps[i + 1].member_off : r->n_members;
    *n = end - off;
    return r->members + off;
}

double val_step_swap_s(const val_run *r, int64_t i)
{
    const sched_step *s = &r->steps[i].step;
    return (double)(s->swap_out_blocks + s->swap_in_blocks) * r->cfg.sched.swap_block_s;
}

static int64_t parse_id(const char *p)
{
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    return errno || end == p || v < 1 ? 0 : (int64_t)v;
}

int64_t val_profile_id_parse(const char *cost, const char *cost_desc)
{
    if (cost && !strncmp(cost, "calibrated:", 11)) {
        int64_t id = parse_id(cost + 11);
        if (id)
            return id;
    }
    static const char key[] = "calibrated: profile ";
    if (cost_desc && !strncmp(cost_desc, key, sizeof key - 1))
        return parse_id(cost_desc + sizeof key - 1);
    return 0;
}

void val_run_free(val_run *r)
{
    trace_free(&r->tr);
    free(r->reqs);
    free(r->steps);
    free(r->members);
    r->reqs = NULL;
    r->steps = NULL;
    r->members = NULL;
    r->n_steps = r->n_members = 0;
}

/* ------------------------------------------------------------ the run row */

static int load_config(sqlite3 *db, int64_t id, val_run *r, int64_t *n_req, kvs_err *err)
{
    store_run_row *row = malloc(sizeof *row);
    if (!row)
        return kvs_errf(err, KVS_ENOMEM, "--run %lld: out of memory", (long long)id);
    kvs_err why;
    int rc = store_read_run(db, id, row, &why);
    if (rc == KVS_EINVAL && !strncmp(why.msg, "no such run", 11))
        rc = kvs_errf(err, KVS_EINVAL, "--run %lld: no such run", (long long)id);
    else if (rc == KVS_EINVAL)
        rc = kvs_errf(err, KVS_EINVAL, "--run %lld: the stored configuration is malformed (%s)",
                      (long long)id, why.msg);
    else if (rc)
        rc = kvs_errf(err, rc, "%s", why.msg);
    else if (job_run_check_stored(row, &why)) /* the ranges their flags accept */
        rc = kvs_errf(err, KVS_EINVAL, "--run %lld: %s", (long long)id, why.msg);
    else if (strcmp(row->status, "finished"))
        rc = kvs_errf(err, KVS_EINVAL, "--run %lld: the run %s (%.200s); nothing to validate",
                      (long long)id, row->status, row->error);
    if (rc)
        goto done;
    r->cfg = row->cfg;
    *n_req = row->sum.n_requests;
    const sched_config *k = &r->cfg.sched;
    if (k->block_size < 1 || k->total_blocks < 1 || *n_req < 0 || *n_req > INT32_MAX) {
        rc = kvs_errf(err, KVS_EINVAL, "--run %lld: the stored configuration is malformed",
                      (long long)id);
        goto done;
    }
    kvs_err why2;
    if (sched_config_check(k, *n_req, &why2)) {
        rc = kvs_errf(err, KVS_EINVAL, "--run %lld: the stored configuration is malformed (%s)",
                      (long long)id, why2.msg);
        goto done;
    }
    if (r->cfg.tp != 1 || r->cfg.ep != 1 || r->cfg.cp != 1)
        rc = kvs_errf(err, KVS_EINVAL,
                      "--run %lld: the run used --tp %lld --ep %lld --cp %lld; validation "
                      "replays one device, so only single-GPU runs can be validated",
                      (long long)id, (long long)r->cfg.tp, (long long)r->cfg.ep,
                      (long long)r->cfg.cp);
done:
    free(row);
    return rc;
}

/* ------------------------------------------------------------ requests */

static int load_requests(sqlite3 *db, val_run *r, int64_t n, kvs_err *err)
{
    static const char sql[] =
        "SELECT req_id, arrival_s, prompt_tokens, output_tokens, priority, status, "
        "first_token_s, finish_s, preemptions FROM requests "
        "WHERE run_id = ? ORDER BY req_id";
    /* the stored count sizes the arrays: it must be the rows there are */
    sqlite3_stmt *cq = NULL;
    int64_t rows = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM requests WHERE run_id = ?1", -1, &cq,
                           NULL) == SQLITE_OK &&
        sqlite3_bind_int64(cq, 1, r->run_id) == SQLITE_OK && sqlite3_step(cq) == SQLITE_ROW)
        rows = sqlite3_column_int64(cq, 0);
    sqlite3_finalize(cq);
    if (rows != n)
        return kvs_errf(err, KVS_EINVAL, "--run %lld: runs.n_requests is %lld but %lld requests "
                        "rows are stored", (long long)r->run_id, (long long)n, (long long)rows);
    size_t nn = (size_t)(n > 0 ? n : 1);
    r->tr.reqs = calloc(nn, sizeof *r->tr.reqs);
    r->reqs = calloc(nn, sizeof *r->reqs);
    if (!r->tr.reqs || !r->reqs)
        return kvs_errf(err, KVS_ENOMEM, "out of memory for %lld requests", (long long)n);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK ||
        sqlite3_bind_int64(st, 1, r->run_id) != SQLITE_OK) {
        sqlite3_finalize(st);
        return db_err(db, err, "reading requests");
    }
    int64_t i = 0;
    int s, rc = KVS_OK;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (i >= n || sqlite3_column_int64(st, 0) != i) {
            rc = kvs_errf(err, KVS_EINVAL, "--run %lld: requests table: req_id %lld out of order "
                          "or beyond n_requests %lld", (long long)r->run_id,
                          (long long)sqlite3_column_int64(st, 0), (long long)n);
            goto done;
        }
        trace_req *t = &r->tr.reqs[i];
        sched_req_result *q = &r->reqs[i];
        t->arrival_s = sqlite3_column_double(st, 1);
        const int64_t P = sqlite3_column_int64(st, 2), O = sqlite3_column_int64(st, 3);
        if (P < 1 || P > TRACE_MAX_TOKENS || O < 1 || O > TRACE_MAX_TOKENS) {
            rc = kvs_errf(err, KVS_EINVAL, "--run %lld: requests table: req_id %lld: "
                          "prompt_tokens %lld, output_tokens %lld outside [1, %lld]",
                          (long long)r->run_id, (long long)i, (long long)P, (long long)O,
                          (long long)TRACE_MAX_TOKENS);
            goto done;
        }
        t->prompt_tokens = (int32_t)P;
        t->output_tokens = (int32_t)O;
        t->priority = sqlite3_column_int(st, 4);
        char status[16];
        col_str(st, 5, status, sizeof status);
        q->status = !strcmp(status, "finished") ? SCHED_REQ_FINISHED : SCHED_REQ_REJECTED;
        q->first_token_s = col_f64(st, 6);
        q->finish_s = col_f64(st, 7);
        q->preemptions = sqlite3_column_int(st, 8);
        i++;
    }
    if (s != SQLITE_DONE) {
        rc = db_err(db, err, "reading requests");
        goto done;
    }
    if (i != n)
        rc = kvs_errf(err, KVS_EINVAL, "--run %lld: %lld requests stored, the run says %lld",
                      (long long)r->run_id, (long long)i, (long long)n);
    r->tr.n = n;
done:
    sqlite3_finalize(st);
    return rc;
}

/* ------------------------------------------------------------ steps */

static int step_kind(const char *s)
{
    return !strcmp(s, "prefill") ? SCHED_STEP_PREFILL
           : !strcmp(s, "decode") ? SCHED_STEP_DECODE
           : !strcmp(s, "mixed")  ? SCHED_STEP_MIXED
                                  : -1;
}

/* Decode and check one members blob into r->members at r->n_members. */
static int decode_members(val_run *r, int64_t step, const unsigned char *p, int64_t bytes,
                          int64_t *stamp, kvs_err *err)
{
    sched_step *s = &r->steps[step].step;
    int64_t n = bytes / MEMBER_BYTES, tokens = 0, np = 0, nd = 0;
    if (bytes % MEMBER_BYTES)
        return kvs_errf(err, KVS_EINVAL, "--run %lld step %lld: members blob of %lld bytes is "
                        "not a multiple of %d", (long long)r->run_id, (long long)step,
                        (long long)bytes, MEMBER_BYTES);
    for (int64_t j = 0; j < n; j++, p += MEMBER_BYTES) {
        sched_member *m = &r->members[r->n_members + j];
        m->req_id = le32(p);
        m->kind = le32(p + 4);
        m->tokens = le64(p + 8);
        m->context = le64(p + 16);
        const char *bad = NULL;
        if (m->req_id < 0 || m->req_id >= r->tr.n)
            bad = "req_id outside the run's requests";
        else if (m->kind < SCHED_MEMBER_PREFILL || m->kind > SCHED_MEMBER_SWAPIN)
            bad = "unknown member kind";
        else if (m->tokens < 1 || m->context < m->tokens ||
                 (m->kind != SCHED_MEMBER_PREFILL && m->tokens != 1))
            bad = "tokens / context out of range";
        else if (stamp[m->req_id] == step)
            bad = "request listed twice";
        if (bad)
            return kvs_errf(err, KVS_EINVAL, "--run %lld step %lld member %lld: %s",
                            (long long)r->run_id, (long long)step, (long long)j, bad);
        stamp[m->req_id] = step;
        tokens += m->tokens;
        if (m->kind == SCHED_MEMBER_PREFILL) {
            np++; /* a chunk over cached KV: the cost features the steps table lacks */
            s->batch.prefill_ctx += m->tokens * (m->context - m->tokens);
            s->batch.prefill_cached += m->context - m->tokens;
        } else {
            nd++;
        }
    }
    if (tokens != s->batch.tokens || np != s->batch.n_prefill || nd != s->batch.n_decode)
        return kvs_errf(err, KVS_EINVAL, "--run %lld step %lld: members (%lld tokens, %lld "
                        "prefills, %lld decodes) disagree with the step's columns",
                        (long long)r->run_id, (long long)step, (long long)tokens, (long long)np,
                        (long long)nd);
    r->n_members += n;
    return KVS_OK;
}

static int load_steps(sqlite3 *db, val_run *r, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int64_t *stamp = NULL;
    int rc = KVS_OK, s;
    if (sqlite3_prepare_v2(db, "SELECT count(*), total(length(members)) FROM steps "
                               "WHERE run_id = ?", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_bind_int64(st, 1, r->run_id) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
        rc = db_err(db, err, "reading steps");
        goto done;
    }
    int64_t n = sqlite3_column_int64(st, 0);
    int64_t nm = (int64_t)(sqlite3_column_double(st, 1) / MEMBER_BYTES) + 1;
    sqlite3_finalize(st);
    st = NULL;
    if (n == 0) {
        rc = kvs_errf(err, KVS_EINVAL, "--run %lld has no recorded steps: re-run with kvsim run "
                      "--record-steps", (long long)r->run_id);
        goto done;
    }
    r->steps = calloc((size_t)n, sizeof *r->steps);
    r->members = malloc((size_t)nm * sizeof *r->members);
    stamp = malloc((size_t)(r->tr.n > 0 ? r->tr.n : 1) * sizeof *stamp);
    if (!r->steps || !r->members || !stamp) {
        rc = kvs_errf(err, KVS_ENOMEM, "out of memory for %lld steps", (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < r->tr.n; i++)
        stamp[i] = -1;
    if (sqlite3_prepare_v2(db,
                           "SELECT step_id, start_s, dur_s, kind, n_prefill, n_decode, tokens, "
                           "kv_read, prefill_sq, kv_blocks_used, n_waiting, n_running, "
                           "n_preempted, swap_out_blocks, swap_in_blocks, members FROM steps "
                           "WHERE run_id = ? ORDER BY step_id", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_bind_int64(st, 1, r->run_id) != SQLITE_OK) {
        rc = db_err(db, err, "reading steps");
        goto done;
    }
    int64_t i = 0;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (i >= n || sqlite3_column_int64(st, 0) != i) {
            rc = kvs_errf(err, KVS_EINVAL, "--run %lld: steps table: step_id %lld where %lld "
                          "was expected", (long long)r->run_id,
                          (long long)sqlite3_column_int64(st, 0), (long long)i);
            goto done;
        }
        run_step_rec *rec = &r->steps[i];
        sched_step *x = &rec->step;
        char kind[16];
        col_str(st, 3, kind, sizeof kind);
        x->index = i;
        x->start_s = sqlite3_column_double(st, 1);
        x->dur_s = sqlite3_column_double(st, 2);
        x->kind = step_kind(kind);
        x->batch.n_prefill = sqlite3_column_int64(st, 4);
        x->batch.n_decode = sqlite3_column_int64(st, 5);
        x->batch.tokens = sqlite3_column_int64(st, 6);
        x->batch.kv_read = sqlite3_column_int64(st, 7);
        x->batch.prefill_sq = sqlite3_column_int64(st, 8);
        x->kv_blocks_used = sqlite3_column_int64(st, 9);
        x->n_waiting = sqlite3_column_int64(st, 10);
        x->n_running = sqlite3_column_int64(st, 11);
        x->n_preempted = (int32_t)sqlite3_column_int64(st, 12);
        x->swap_out_blocks = sqlite3_column_int64(st, 13);
        x->swap_in_blocks = sqlite3_column_int64(st, 14);
        rec->member_off = r->n_members;
        int64_t bytes = sqlite3_column_bytes(st, 15);
        const unsigned char *blob = sqlite3_column_blob(st, 15);
        if (x->kind < 0) {
            rc = kvs_errf(err, KVS_EINVAL, "--run %lld step %lld: unknown kind '%s'",
                          (long long)r->run_id, (long long)i, kind);
            goto done;
        }
        if (r->n_members + bytes / MEMBER_BYTES > nm) {
            rc = kvs_errf(err, KVS_EINTERNAL, "--run %lld: steps changed while being read",
                          (long long)r->run_id);
            goto done;
        }
        if ((rc = decode_members(r, i, blob, bytes, stamp, err)) != KVS_OK)
            goto done;
        i++;
    }
    if (s != SQLITE_DONE) {
        rc = db_err(db, err, "reading steps");
        goto done;
    }
    r->n_steps = i;
done:
    sqlite3_finalize(st);
    free(stamp);
    return rc;
}

int val_run_load(sqlite3 *db, int64_t run_id, val_run *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    out->run_id = run_id;
    int64_t n_req = 0;
    kvs_err merr;
    int rc = load_config(db, run_id, out, &n_req, err);
    if (rc != KVS_OK)
        goto fail;
    if (model_lookup_name(out->cfg.model, &out->model, &merr) != KVS_OK) {
        rc = kvs_errf(err, KVS_EINVAL, "--run %lld: runs.model: %s", (long long)run_id, merr.msg);
        goto fail;
    }
    if ((rc = load_requests(db, out, n_req, err)) != KVS_OK ||
        (rc = load_steps(db, out, err)) != KVS_OK)
        goto fail;
    out->tr.format = out->cfg.trace_path[0] ? TRACE_FORMAT_NATIVE : TRACE_FORMAT_SYNTHETIC;
    snprintf(out->tr.source, sizeof out->tr.source, "%s",
             out->cfg.trace_path[0] ? out->cfg.trace_path : out->cfg.synthetic);
    out->profile_id = val_profile_id_parse(out->cfg.cost, out->cfg.cost_desc);
    return KVS_OK;
fail:
    val_run_free(out);
    return rc;
}

/* ------------------------------------------------------------ writing */

int val_store_write(store *s, const val_record *rec, int64_t *validation_id, kvs_err *err)
{
    sqlite3 *db = store_db(s);
    sqlite3_stmt *st = NULL;
    int rc = store_begin(s, err);
    if (rc != KVS_OK)
        return rc;
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO validations(run_id, device, profile_id, created_at, "
                           "max_steps, sampling, summary_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_bind_int64(st, 1, rec->run_id) != SQLITE_OK ||
        sqlite3_bind_text(st, 2, rec->device, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
        (rec->profile_id > 0 ? sqlite3_bind_int64(st, 3, rec->profile_id)
                             : sqlite3_bind_null(st, 3)) != SQLITE_OK ||
        sqlite3_bind_text(st, 4, now, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
        sqlite3_bind_int64(st, 5, rec->max_steps) != SQLITE_OK ||
        sqlite3_bind_text(st, 6, rec->sampling, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
        sqlite3_bind_text(st, 7, rec->summary_json, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_DONE) {
        rc = db_err(db, err, "inserting into validations");
        goto fail;
    }
    sqlite3_finalize(st);
    st = NULL;
    int64_t id = sqlite3_last_insert_rowid(db);
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO validation_steps(validation_id, step_id, predicted_s, "
                           "measured_s, kind, batch) VALUES (?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_err(db, err, "inserting into validation_steps");
        goto fail;
    }
    for (int64_t k = 0; k < rec->n; k++) {
        if (sqlite3_reset(st) != SQLITE_OK || sqlite3_bind_int64(st, 1, id) != SQLITE_OK ||
            sqlite3_bind_int64(st, 2, rec->step_ids[k]) != SQLITE_OK ||
            sqlite3_bind_double(st, 3, rec->predicted_s[k]) != SQLITE_OK ||
            sqlite3_bind_double(st, 4, rec->measured_s[k]) != SQLITE_OK ||
            sqlite3_bind_text(st, 5, rec->kinds[k], -1, SQLITE_STATIC) != SQLITE_OK ||
            sqlite3_bind_int64(st, 6, rec->batch[k]) != SQLITE_OK ||
            sqlite3_step(st) != SQLITE_DONE) {
            rc = db_err(db, err, "inserting into validation_steps");
            goto fail;
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    if ((rc = store_commit(s, err)) != KVS_OK)
        goto fail;
    *validation_id = id;
    return KVS_OK;
fail:
    sqlite3_finalize(st);
    store_rollback(s);
    return rc;
}
