/* testutil.h — helpers shared by the Check test programs: temp files and
 * directories, running the kvsim binary, and a one-line main for a suite. */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <check.h>
#include <stddef.h>

/* Make a fresh temporary directory (under $TMPDIR or /tmp); returns a
 * static-lifetime path string owned by testutil (freed at exit). */
const char *tu_tmpdir(void);
/* Write `text` to dir/name and return the full path (malloc'd). */
char *tu_write_file(const char *dir, const char *name, const char *text);
/* Run a shell command; capture stdout+stderr into *out (malloc'd, may be
 * NULL); returns the exit status (or -1). */
int tu_run(const char *cmd, char **out);
/* Path of the kvsim binary built with the tests. */
const char *tu_kvsim(void);
/* A hand-worked scenario: a trace, a run config, a cost model and the
 * result (tests fill tr, cfg and cost, then call golden_run). */
#include "sim/run.h"
typedef struct golden {
    trace tr;
    run_config cfg;
    cost_model cost;
    run_result res;
} golden;
/* run_execute(cfg, tr, cost) into res; a failure fails the test. */
void golden_run(golden *g);
/* Free res, cost and the trace. */
void golden_free(golden *g);
/* Start a scenario: g zeroed; the trace of n rows of cols (3 or 4) values
 * {arrival s, prompt P, output O[, priority]} at rows[i * cols]; cfg at
 * run_config_defaults with record_steps on; the cost model `cost`
 * ("affine:..."); a bad one fails the test.  The test then sets the
 * engine's fields. */
void tu_golden_init(golden *g, const double *rows, int cols, int n, const char *cost);
/* Token times replayed from g's step records: a member yields a token when
 * its context after the step reaches P + (tokens so far), so
 * tt[id * maxo + k - 1] is request id's token k's time and ntok[id] its
 * token count (at most maxo, else the test fails). */
void tu_token_times(const golden *g, double *tt, int maxo, int64_t *ntok);

/* The property tests' step cost, affine:0.01,0.0001,0.00001,0.0000001: a
 * step takes 10 ms + 0.1 ms per token + 10 us per token of KV read + 0.1 us
 * per unit of prefill_sq + 2 * prefill_ctx (cost.h); a
 * failure fails the test.  The caller frees it. */
void tu_cost_affine(cost_model *cost);

/* Every request of res ends finished (its first token after its arrival and
 * no later than its finish) or rejected, and res's summary counts the
 * finished ones; a request in any other state fails the test. */
void tu_check_outcomes(const trace *tr, const run_result *res);

/* One query whose single integer value must be `want`. */
typedef struct sqlite3 sqlite3;
typedef struct tu_sql_want {
    const char *sql;
    long long want;
} tu_sql_want;
/* Run every q[i] on db; a failing query or a value other than want fails
 * the test, naming the query. */
void tu_sql_expect(sqlite3 *db, const tu_sql_want *q, size_t n);
/* The first column of sql's first row on db, as an integer; a query that
 * fails or returns no row fails the test, naming the query. */
int64_t tu_sql_int(sqlite3 *db, const char *sql);

/* A random trace for property tests: n requests, exponential gaps (mean
 * 0.05 s) with a fifth of them simultaneous, prompts in [1, pmax], outputs
 * in [1, omax], and priorities 0..2 when with_prio.  Deterministic per seed. */
void tu_random_trace(trace *t, int n, uint64_t seed, int64_t pmax, int64_t omax,
                     int with_prio);

/* An engine variant for property tests, and a small random-ish engine
 * config for it (block size, cache, limits and swap space vary with seed). */
typedef struct tu_variant {
    const char *name;
    sched_batching batching;
    sched_policy policy;
    int prio_pre;
    sched_alloc alloc;
    sched_preempt preempt;
} tu_variant;
void tu_variant_config(run_config *cfg, const tu_variant *v, uint64_t seed);

/* A built-in model or GPU by name (or path); a lookup failure fails the test. */
model_spec tu_model(const char *name);
gpu_spec tu_gpu(const char *name);

/* Run every suite given and return the process exit status. */
int tu_run_suites(Suite **suites, int n);

#endif
