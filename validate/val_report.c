/* val_report.c — a stored validation printed as tables, read back from its
 * summary_json with SQLite's JSON functions (the stored text is the single
 * source, so a report printed later shows exactly what was stored). */
#include "validate.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

typedef struct jreader {
    sqlite3 *db;
    sqlite3_stmt *st;   /* SELECT json_extract(?1, ?2) */
    const char *json;
    int rc;             /* first SQLite failure */
} jreader;

/* The value at path as a double (NAN for null or missing). */
static double jd(jreader *j, const char *path)
{
    double v = NAN;
    if (j->rc != SQLITE_OK)
        return v;
    sqlite3_reset(j->st);
    if (sqlite3_bind_text(j->st, 1, j->json, -1, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_text(j->st, 2, path, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
        j->rc = SQLITE_ERROR;
        return v;
    }
    int s = sqlite3_step(j->st);
    if (s == SQLITE_ROW) {
        if (sqlite3_column_type(j->st, 0) != SQLITE_NULL)
            v = sqlite3_column_double(j->st, 0);
    } else {
        j->rc = s;
    }
    return v;
}

static void js(jreader *j, const char *path, char *out, size_t n)
{
    out[0] = 0;
    if (j->rc != SQLITE_OK)
        return;
    sqlite3_reset(j->st);
    if (sqlite3_bind_text(j->st, 1, j->json, -1, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_text(j->st, 2, path, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
        j->rc = SQLITE_ERROR;
        return;
    }
    int s = sqlite3_step(j->st);
    if (s == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(j->st, 0);
        snprintf(out, n, "%s", t ? (const char *)t : "");
    } else {
        j->rc = s;
    }
}

static void pct(FILE *f, double v)
{
    if (isnan(v))
        fprintf(f, " %8s", "-");
    else
        fprintf(f, " %+7.1f%%", 100.0 * v);
}

static void upct(FILE *f, double v)
{
    if (isnan(v))
        fprintf(f, " %8s", "-");
    else
        fprintf(f, " %7.1f%%", 100.0 * v);
}

static void num(FILE *f, double v)
{
    if (isnan(v))
        fprintf(f, " %12s", "-");
    else
        fprintf(f, " %12.6g", v);
}

static void group_row(FILE *f, jreader *j, const char *label, const char *path)
{
    char p[160];
    snprintf(p, sizeof p, "%s.n", path);
    double n = jd(j, p);
    fprintf(f, "  %-14s %6.0f", label, isnan(n) ? 0.0 : n);
    static const char *const keys[] = {"mean_signed", "p50_signed", "p90_signed", "p99_signed",
                                       "mean_abs",    "p50_abs",    "p90_abs",    "p99_abs"};
    for (size_t k = 0; k < 8; k++) {
        snprintf(p, sizeof p, "%s.%s", path, keys[k]);
        if (k < 4)
            pct(f, jd(j, p));
        else
            upct(f, jd(j, p));
        if (k == 3)
            fprintf(f, " |");
    }
    snprintf(p, sizeof p, "%s.mape_pct", path);
    double m = jd(j, p);
    if (isnan(m))
        fprintf(f, " %8s\n", "-");
    else
        fprintf(f, " %8.1f\n", m);
}

static void e2e_table(FILE *f, jreader *j, const char *sec, const char *title)
{
    char p[160];
    snprintf(p, sizeof p, "$.e2e.%s.n_requests", sec);
    double nr = jd(j, p);
    snprintf(p, sizeof p, "$.e2e.%s.n_finished", sec);
    double nf = jd(j, p);
    fprintf(f, "\nend-to-end, %s: %.0f requests, %.0f finished\n", title, isnan(nr) ? 0 : nr,
            isnan(nf) ? 0 : nf);
    fprintf(f, "  %-22s %12s %12s %9s\n", "metric", "simulated", "measured", "error");
    static const char *const keys[] = {"ttft_p50_s", "ttft_p99_s", "tpot_p50_s",      "tpot_p99_s",
                                       "e2e_p50_s",  "e2e_p99_s",  "throughput_tok_s"};
    static const char *const names[] = {"TTFT p50 (s)", "TTFT p99 (s)", "TPOT p50 (s/token)",
                                        "TPOT p99 (s/token)", "E2E p50 (s)", "E2E p99 (s)",
                                        "throughput (tok/s)"};
    const size_t rows = strncmp(sec, "local", 5) ? 7 : 6; /* no throughput on own clocks */
    for (size_t k = 0; k < rows; k++) {
        fprintf(f, "  %-22s", names[k]);
        snprintf(p, sizeof p, "$.e2e.%s.simulated.%s", sec, keys[k]);
        num(f, jd(j, p));
        snprintf(p, sizeof p, "$.e2e.%s.measured.%s", sec, keys[k]);
        num(f, jd(j, p));
        snprintf(p, sizeof p, "$.e2e.%s.error.%s", sec, keys[k]);
        pct(f, jd(j, p));
        fprintf(f, "\n");
    }
}

/* The replayed steps and their step-time error table, by kind and batch
 * size, then the request latencies (e2e_table). */
static void print_steps(FILE *f, jreader *j, const char *sampling)
{
    double ms = jd(j, "$.max_steps");
    fprintf(f, "steps: %.0f of %.0f replayed (%s, --start %.0f, --max-steps %.0f%s; steps "
               "%.0f..%.0f), repeats %.0f, warmup %.0f",
            jd(j, "$.steps_replayed"), jd(j, "$.steps_in_run"), sampling, jd(j, "$.start"),
            ms, ms == 0 ? " = all" : "", jd(j, "$.first_step"), jd(j, "$.last_step"),
            jd(j, "$.repeats"), jd(j, "$.warmup"));
    double ex = jd(j, "$.steps_excluded");
    if (ex > 0)
        fprintf(f, "; %.0f steps without a measurement left out", ex);
    fprintf(f, "\n\nstep time error = (predicted - measured) / measured\n");
    fprintf(f, "  %-14s %6s %8s %8s %8s %8s | %8s %8s %8s %8s %8s\n", "steps", "n",
            "mean", "p50", "p90", "p99", "|mean|", "|p50|", "|p90|", "|p99|", "MAPE%");
    group_row(f, j, "all", "$.step_error.all");
    static const char *const kinds[] = {"prefill", "decode", "mixed"};
    for (int k = 0; k < 3; k++) {
        char p[64], label[32];
        snprintf(p, sizeof p, "$.step_error.by_kind.%s", kinds[k]);
        snprintf(label, sizeof label, "%s", kinds[k]);
        group_row(f, j, label, p);
    }
    static const char *const bins[] = {"1", "2-8", "9-32", "33-128", ">128"};
    for (int k = 0; k < 5; k++) {
        char p[64], label[32];
        snprintf(p, sizeof p, "$.step_error.by_batch.\"%s\"", bins[k]);
        snprintf(label, sizeof label, "batch %s", bins[k]);
        group_row(f, j, label, p);
    }
    /* the replay's first step of a token count, and the others (absent from
     * validations stored before the split: rows of 0) */
    group_row(f, j, "tokens new", "$.step_error.by_shape.new");
    group_row(f, j, "tokens repeat", "$.step_error.by_shape.repeat");
    if (!isnan(jd(j, "$.step_error.by_shape_decode.new.n"))) {
        group_row(f, j, "decode new", "$.step_error.by_shape_decode.new");
        group_row(f, j, "decode repeat", "$.step_error.by_shape_decode.repeat");
    }
    fprintf(f, "  mean absolute error %.6g s per step; total predicted %.6g s, measured %.6g s\n",
            jd(j, "$.step_error.all.mae_s"), jd(j, "$.step_error.all.predicted_total_s"),
            jd(j, "$.step_error.all.measured_total_s"));
    e2e_table(f, j, "all", "all requests (unreplayed steps at predicted times)");
    e2e_table(f, j, "covered", "requests whose every step was replayed");
    if (!isnan(jd(j, "$.e2e.local.covered.n_requests")))
        e2e_table(f, j, "local.covered", "the same requests, each on its own clock (drift-free)");
}

/* The checks: KV memory at the peak, block tables, KV contents. */
static void print_checks(FILE *f, jreader *j)
{
    char note[512], kvnote[256];
    js(j, "$.memory.note", note, sizeof note);
    double bm = jd(j, "$.memory.bytes_match");
    fprintf(f, "\nKV memory at the peak: device %.0f blocks x %.0f B = %.0f B; simulator %.0f "
               "blocks x %.0f B = %.0f B: %s%s%s\n",
            jd(j, "$.memory.peak_blocks_replay"), jd(j, "$.memory.block_bytes_device"),
            jd(j, "$.memory.kv_bytes_device"), jd(j, "$.memory.peak_blocks_sim"),
            jd(j, "$.memory.block_bytes_sim"), jd(j, "$.memory.kv_bytes_sim"),
            bm == 1 ? "match" : "MISMATCH", note[0] ? " - " : "", note);
    double sm = jd(j, "$.checks.schedule_mismatch_steps");
    fprintf(f, "block tables: derived count equals steps.kv_blocks_used in %.0f of %.0f steps",
            jd(j, "$.checks.schedule_steps") - sm, jd(j, "$.checks.schedule_steps"));
    if (sm > 0)
        fprintf(f, " (first mismatch at step %.0f)", jd(j, "$.checks.schedule_first_mismatch"));
    fprintf(f, "\n");
    double kr = jd(j, "$.checks.kv_requests"), ks = jd(j, "$.checks.kv_stale_requests");
    js(j, "$.checks.kv_note", kvnote, sizeof kvnote);
    if (isnan(kr))
        fprintf(f, "KV contents: not checked (%s)\n", kvnote);
    else if (kr == 0)
        fprintf(f, "KV contents: no request held fully replayed KV at the end (%.0f held KV "
                   "computed only in part)\n", isnan(ks) ? 0.0 : ks);
    else
        fprintf(f, "KV contents vs a from-scratch prefill: %.0f requests checked (%.0f skipped: "
                   "KV computed only in part), max NMSE %.3g (bound %.0e): %s\n",
                kr, isnan(ks) ? 0.0 : ks, jd(j, "$.checks.kv_max_nmse"),
                jd(j, "$.checks.kv_nmse_bound"), jd(j, "$.checks.kv_ok") == 1 ? "ok" : "FAILED");
}

int val_report_print(FILE *f, sqlite3 *db, int64_t validation_id, kvs_err *err)
{
    sqlite3_stmt *row = NULL;
    jreader j = {db, NULL, NULL, SQLITE_OK};
    int rc = KVS_OK;
    const char *path = sqlite3_db_filename(db, "main");
    if (sqlite3_prepare_v2(db,
                           "SELECT run_id, device, profile_id, created_at, max_steps, sampling, "
                           "summary_json FROM validations WHERE validation_id = ?",
                           -1, &row, NULL) != SQLITE_OK ||
        sqlite3_bind_int64(row, 1, validation_id) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT json_extract(?1, ?2)", -1, &j.st, NULL) != SQLITE_OK) {
        rc = kvs_errf(err, KVS_EDB, "%s: reading validations: %s", path ? path : "",
                      sqlite3_errmsg(db));
        goto done;
    }
    int s = sqlite3_step(row);
    if (s == SQLITE_DONE) {
        rc = kvs_errf(err, KVS_EINVAL, "--report %lld: no such validation",
                      (long long)validation_id);
        goto done;
    }
    if (s != SQLITE_ROW || sqlite3_column_type(row, 6) != SQLITE_TEXT) {
        rc = kvs_errf(err, KVS_EDB, "%s: reading validation %lld: %s", path ? path : "",
                      (long long)validation_id, sqlite3_errmsg(db));
        goto done;
    }
    j.json = (const char *)sqlite3_column_text(row, 6);
    char dev_name[256], storage[16], model[256], predictor[16], cost[256], sampling[16];
    js(&j, "$.device_name", dev_name, sizeof dev_name);
    js(&j, "$.storage", storage, sizeof storage);
    js(&j, "$.model", model, sizeof model);
    js(&j, "$.predictor", predictor, sizeof predictor);
    js(&j, "$.cost", cost, sizeof cost);
    js(&j, "$.sampling", sampling, sizeof sampling);
    const char *created = (const char *)sqlite3_column_text(row, 3);
    fprintf(f, "validation %lld: run %lld (%s) on %s, %s [%s storage], %s\n",
            (long long)validation_id, (long long)sqlite3_column_int64(row, 0), model,
            (const char *)sqlite3_column_text(row, 1), dev_name, storage,
            created ? created : "");
    double pid = jd(&j, "$.profile_id");
    if (!strcmp(predictor, "profile"))
        fprintf(f, "predictions: profile %.0f (--profile)\n", pid);
    else if (!isnan(pid))
        fprintf(f, "predictions: the run's step times (cost %s, profile %.0f)\n", cost, pid);
    else
        fprintf(f, "predictions: the run's step times (cost %s)\n", cost);
    print_steps(f, &j, sampling);
    print_checks(f, &j);
    if (j.rc != SQLITE_OK && j.rc != SQLITE_DONE)
        rc = kvs_errf(err, KVS_EDB, "%s: reading validation %lld: %s", path ? path : "",
                      (long long)validation_id, sqlite3_errmsg(db));
done:
    sqlite3_finalize(row);
    sqlite3_finalize(j.st);
    return rc;
}
