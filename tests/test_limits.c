/* test_limits.c — kvsim at the edges of its input: requests of tens of
 * millions of tokens up to TRACE_MAX_TOKENS, token counts above it, a trace
 * with no request, a single request, --rate-scale at both ends of its range,
 * block size 1 and the largest block size, and flag combinations whose
 * per-step products would leave int64_t.  Each is either simulated correctly
 * (checked against values worked out by hand) or refused with one line
 * naming the file:line or flag and exit 2; never a crash or an overflow (the
 * sanitizer build runs these same tests, and UBSan aborts on signed
 * overflow).  Runs go through the kvsim binary into a temporary database. */
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "traces/trace.h"

/* An affine cost (seconds = c0 + c1*tokens + c2*kv_read + c3*prefill_sq)
 * whose step times are easy to work out by hand. */
#define COST "affine:0.5,1e-6,0,1e-15"

static const char *g_dir;

static const char *dir(void)
{
    if (!g_dir)
        g_dir = tu_tmpdir();
    return g_dir;
}

/* Run `kvsim ARGS` (printf-style) with the output captured; returns the exit
 * status and the output in *out (malloc'd).  Runs use the V0 engine, whose
 * limits these cases were worked out for (under V1 a 10^9-token prompt is
 * half a million 2048-token chunks: exact, but minutes). */
static int kvsim(char **out, const char *fmt, ...)
{
    char args[4096], cmd[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    int run = !strncmp(args, "run ", 4);
    snprintf(cmd, sizeof cmd, "'%s' %s%s", tu_kvsim(), run ? "run --engine vllm-v0 " : "",
             run ? args + 4 : args);
    return tu_run(cmd, out);
}

/* The error output is exactly one line "kvsim run: ..." containing `part`. */
static void assert_one_line_err(const char *out, const char *part)
{
    ck_assert_msg(!strncmp(out, "kvsim run: ", 11), "not 'kvsim run: ...': %s", out);
    const char *nl = strchr(out, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "not one line: %s", out);
    ck_assert_msg(strstr(out, part) != NULL, "'%s' lacks '%s'", out, part);
}

static double q_dbl(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "%s: no row", sql);
    double v = sqlite3_column_type(st, 0) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static int64_t q_int(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    int64_t v = tu_sql_int(db, sql);
    sqlite3_close(db);
    return v;
}

static char *db(const char *name)
{
    static char buf[8][600];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 600, "%s/%s", dir(), name);
    return p;
}

/* ------------------------------------------------ huge requests */

/* One request of P = 50,000,000, O = 2 at t = 0 with room for it
 * (max-model-len 1e8, 1e7 blocks of 16 = 1.6e8 tokens of KV):
 *   prefill step: tokens 5e7, prefill_sq (5e7)^2 = 2.5e15 exactly;
 *     0.5 + 1e-6 * 5e7 + 1e-15 * 2.5e15 = 0.5 + 50 + 2.5 = 53 s = TTFT
 *   decode step: tokens 1: 0.5 + 1e-6 = 0.500001 s; E2E 53.500001 s. */
START_TEST(test_fifty_million_token_prompt)
{
    char *trace = tu_write_file(dir(), "p50m.csv",
                                "arrival_s,prompt_tokens,output_tokens\n0,50000000,2\n");
    char *out = NULL;
    const char *path = db("p50m.db");
    int rc = kvsim(&out,
                   "run --db '%s' --trace '%s' --cost " COST
                   " --max-model-len 100000000 --kv-blocks 10000000 --record-steps --quiet",
                   path, trace);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_int_eq(q_int(path, "SELECT n_finished FROM runs"), 1);
    ck_assert_int_eq(q_int(path, "SELECT tokens FROM steps WHERE step_id = 0"), 50000000);
    ck_assert_int_eq(q_int(path, "SELECT prefill_sq FROM steps WHERE step_id = 0"),
                     INT64_C(2500000000000000));
    ck_assert_double_eq_tol(q_dbl(path, "SELECT ttft_p50_s FROM runs"), 53.0, 1e-9);
    ck_assert_double_eq_tol(q_dbl(path, "SELECT e2e_p50_s FROM runs"), 53.500001, 1e-9);
    free(out);

    /* The default max-model-len (llama-3-8b: 8192) rejects it: a stored run
     * with the request rejected, not an error. */
    path = db("p50m-default.db");
    rc = kvsim(&out, "run --db '%s' --trace '%s' --cost " COST " --quiet", path, trace);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_int_eq(q_int(path, "SELECT n_rejected FROM runs"), 1);
    ck_assert_int_eq(q_int(path, "SELECT count(*) FROM requests WHERE status = 'rejected'"), 1);
    free(out);

    /* The roofline cost of such a step is finite and positive. */
    path = db("p50m-roofline.db");
    rc = kvsim(&out, "run --db '%s' --trace '%s' --max-model-len 100000000 "
                     "--kv-blocks 10000000 --quiet", path, trace);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    double ttft = q_dbl(path, "SELECT ttft_p50_s FROM runs");
    ck_assert_msg(isfinite(ttft) && ttft > 0, "roofline TTFT %g", ttft);
    free(out);
    free(trace);
}
END_TEST

/* The largest request a trace may hold, P = TRACE_MAX_TOKENS = 1e9:
 * prefill_sq = 1e18 (inside int64_t); with c3 = 1e-18 its prefill is
 * 0.5 + 1e-6 * 1e9 + 1e-18 * 1e18 = 0.5 + 1000 + 1 = 1001.5 s.  The limits:
 * max-model-len 2e9, max-batched-tokens 2e9 (2e9 * 2e9 = 4e18), KV 7e7
 * blocks of 16 = 1.12e9 tokens (1.12e9 * 2e9 = 2.24e18). */
START_TEST(test_max_tokens_request)
{
    char *trace = tu_write_file(dir(), "p1e9.csv",
                                "arrival_s,prompt_tokens,output_tokens\n0,1000000000,1\n");
    char *out = NULL;
    const char *path = db("p1e9.db");
    int rc = kvsim(&out,
                   "run --db '%s' --trace '%s' --cost affine:0.5,1e-6,0,1e-18 "
                   "--max-model-len 2000000000 --max-batched-tokens 2000000000 "
                   "--kv-blocks 70000000 --record-steps --quiet",
                   path, trace);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_int_eq(q_int(path, "SELECT prefill_sq FROM steps WHERE step_id = 0"),
                     INT64_C(1000000000000000000));
    ck_assert_double_eq_tol(q_dbl(path, "SELECT ttft_p50_s FROM runs"), 1001.5, 1e-9);
    free(out);
    /* Static batching pads to the same prompt: the same first step. */
    path = db("p1e9-static.db");
    rc = kvsim(&out,
               "run --db '%s' --trace '%s' --cost affine:0.5,1e-6,0,1e-18 --batching static "
               "--max-model-len 2000000000 --kv-blocks 70000000 --record-steps --quiet",
               path, trace);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_int_eq(q_int(path, "SELECT prefill_sq FROM steps WHERE step_id = 0"),
                     INT64_C(1000000000000000000));
    free(out);
    free(trace);
}
END_TEST

/* One token more than the limit is refused, naming file:line and column;
 * in a synthetic spec, naming the key. */
START_TEST(test_tokens_above_limit_refused)
{
    ck_assert_int_eq(TRACE_MAX_TOKENS, 1000000000);
    char *trace = tu_write_file(dir(), "over.csv",
                                "arrival_s,prompt_tokens,output_tokens\n0,5,5\n"
                                "1,1000000001,1\n");
    char *out = NULL;
    int rc = kvsim(&out, "run --db '%s' --trace '%s' --quiet", db("over.db"), trace);
    ck_assert_int_eq(rc, 2);
    char want[700];
    snprintf(want, sizeof want, "%s:3: prompt_tokens: 1000000001 is above the limit of "
             "1000000000 tokens per request", trace);
    assert_one_line_err(out, want);
    free(out);
    rc = kvsim(&out, "run --db '%s' --synthetic 'rate=1,n=2,prompt=1,output=uniform:1:"
                     "9223372036854775807' --quiet", db("over.db"));
    ck_assert_int_eq(rc, 2);
    assert_one_line_err(out, "--synthetic: output:");
    assert_one_line_err(out, "above the limit of 1000000000 tokens");
    free(out);
    /* An Azure trace whose timestamps span more than TRACE_MAX_ARRIVAL_S. */
    char *azure = tu_write_file(dir(), "span.csv",
                                "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                "1990-01-01 00:00:00,5,5\n2023-01-01 00:00:00,5,5\n");
    rc = kvsim(&out, "run --db '%s' --trace '%s' --quiet", db("over.db"), azure);
    ck_assert_int_eq(rc, 2);
    snprintf(want, sizeof want, "%s:3: TIMESTAMP:", azure);
    assert_one_line_err(out, want);
    free(out);
    free(azure);
    free(trace);
}
END_TEST

/* Flags whose per-step product max-model-len x (prefill tokens) exceeds
 * 2^63: 10 requests of 1e9 tokens at t = 0 would make a prefill step with
 * prefill_sq = 10 * 1e18.  Refused before simulating, naming the flag;
 * within the bound (1e8 x 1e9-token KV) they run. */
START_TEST(test_overflowing_flags_refused)
{
    char buf[2048] = "arrival_s,prompt_tokens,output_tokens\n";
    for (int i = 0; i < 10; i++)
        strcat(buf, "0,1000000000,2\n");
    char *trace = tu_write_file(dir(), "ten.csv", buf);
    char *out = NULL;
    int rc = kvsim(&out, "run --db '%s' --trace '%s' --cost " COST
                         " --max-model-len 1099511627776 --max-batched-tokens 1099511627776"
                         " --kv-blocks 1099511627776 --quiet", db("ten.db"), trace);
    ck_assert_int_eq(rc, 2);
    assert_one_line_err(out, "--max-model-len: 1099511627776 times the tokens a step may "
                             "prefill");
    free(out);
    rc = kvsim(&out, "run --db '%s' --trace '%s' --cost " COST " --batching static"
                     " --max-model-len 2000000000 --kv-blocks 1000000000 --quiet",
               db("ten.db"), trace);
    ck_assert_int_eq(rc, 2);
    assert_one_line_err(out, "--max-model-len:");
    free(out);
    /* Every request is too long for max-model-len 1e8: all rejected. */
    const char *path = db("ten-ok.db");
    rc = kvsim(&out, "run --db '%s' --trace '%s' --cost " COST
                     " --max-model-len 100000000 --kv-blocks 60000000 --quiet", path, trace);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_int_eq(q_int(path, "SELECT n_rejected FROM runs"), 10);
    free(out);
    free(trace);
}
END_TEST

/* ------------------------------------------------ tiny traces */

/* A header alone is a trace of 0 requests: the run succeeds and is stored
 * with n_requests 0, no requests rows and NULL latencies. */
START_TEST(test_zero_requests)
{
    const char *headers[] = {"arrival_s,prompt_tokens,output_tokens\n",
                             "arrival_s,prompt_tokens,output_tokens,priority\n",
                             "TIMESTAMP,ContextTokens,GeneratedTokens\n"};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "empty%d.csv", i);
        char *trace = tu_write_file(dir(), name, headers[i]);
        snprintf(name, sizeof name, "empty%d.db", i);
        const char *path = db(name);
        char *out = NULL;
        int rc = kvsim(&out, "run --db '%s' --trace '%s' --cost " COST " --quiet", path,
                       trace);
        ck_assert_msg(rc == 0, "%s: exit %d: %s", headers[i], rc, out);
        ck_assert_str_eq(out, "1\n");
        ck_assert_int_eq(q_int(path, "SELECT count(*) FROM runs WHERE status = 'finished' "
                                     "AND n_requests = 0 AND n_finished = 0"), 1);
        ck_assert_int_eq(q_int(path, "SELECT count(*) FROM requests"), 0);
        ck_assert(isnan(q_dbl(path, "SELECT ttft_p50_s FROM runs")));
        free(out);
        /* and a trace's statistics */
        rc = kvsim(&out, "trace stats '%s'", trace);
        ck_assert_msg(rc == 0, "trace stats: exit %d: %s", rc, out);
        free(out);
        free(trace);
    }
}
END_TEST

/* One request P = 100, O = 3 at t = 0:
 *   prefill 0.5 + 1e-6 * 100 + 1e-15 * 1e4 = 0.50010000001 s = TTFT
 *   two decodes of 0.500001 s: E2E = 0.50010000001 + 1.000002
 * Every percentile of a single sample is that sample. */
START_TEST(test_single_request)
{
    char *trace = tu_write_file(dir(), "one.csv",
                                "arrival_s,prompt_tokens,output_tokens\n0,100,3\n");
    const char *path = db("one.db");
    char *out = NULL;
    int rc = kvsim(&out, "run --db '%s' --trace '%s' --cost " COST " --quiet", path, trace);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    double ttft = 0.5 + 1e-4 + 1e-11;
    ck_assert_double_eq_tol(q_dbl(path, "SELECT ttft_p50_s FROM runs"), ttft, 1e-12);
    ck_assert_double_eq_tol(q_dbl(path, "SELECT ttft_p99_s FROM runs"), ttft, 1e-12);
    ck_assert_double_eq_tol(q_dbl(path, "SELECT ttft_mean_s FROM runs"), ttft, 1e-12);
    ck_assert_double_eq_tol(q_dbl(path, "SELECT e2e_p90_s FROM runs"), ttft + 1.000002, 1e-12);
    ck_assert_double_eq_tol(q_dbl(path, "SELECT tpot_p50_s FROM runs"), 0.500001, 1e-12);
    free(out);
    free(trace);
}
END_TEST

/* ------------------------------------------------ extreme flags */

/* --rate-scale at both ends of its range on the Azure conversation trace
 * (19366 requests over about an hour): every request is accounted for. */
START_TEST(test_rate_scale_extremes)
{
    const char *scales[] = {"1e6", "1e-6"};
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "rate%d.db", i);
        const char *path = db(name);
        char *out = NULL;
        int rc = kvsim(&out, "run --db '%s' --trace traces/azure_llm_2023_conv.csv "
                             "--rate-scale %s --cost " COST " --quiet", path, scales[i]);
        ck_assert_msg(rc == 0, "--rate-scale %s: exit %d: %s", scales[i], rc, out);
        ck_assert_int_eq(q_int(path, "SELECT n_finished + n_rejected = n_requests AND "
                                     "n_requests = 19366 FROM runs"), 1);
        double span = q_dbl(path, "SELECT max(arrival_s) FROM requests");
        ck_assert_msg(isfinite(span) && (i == 0 ? span < 0.01 : span > 3e9),
                      "--rate-scale %s: last arrival %g s", scales[i], span);
        free(out);
    }
}
END_TEST

/* Block size 1: a request holds exactly its context in blocks.  One request
 * P = 100, O = 3 at t = 0, paged: the prefill holds 100 blocks, each
 * decode step one more (101, then 102): peak 102.  The largest block size
 * the flag takes (2^20) is simulated or refused cleanly. */
START_TEST(test_block_size_extremes)
{
    char *trace = tu_write_file(dir(), "blk.csv",
                                "arrival_s,prompt_tokens,output_tokens\n0,100,3\n");
    const char *path = db("blk1.db");
    char *out = NULL;
    int rc = kvsim(&out, "run --db '%s' --trace '%s' --cost " COST " --block-size 1 --quiet",
                   path, trace);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_int_eq(q_int(path, "SELECT peak_kv_blocks FROM runs"), 102);
    free(out);
    rc = kvsim(&out, "run --db '%s' --synthetic 'rate=100,n=2000,prompt=uniform:1:4000,"
                     "output=uniform:1:200' --cost " COST " --block-size 1 --quiet",
               db("blk1-synth.db"), trace);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    rc = kvsim(&out, "run --db '%s' --trace '%s' --cost " COST " --block-size 1048576 --quiet",
               db("blkmax.db"), trace);
    ck_assert_msg(rc == 0 || rc == 2, "exit %d: %s", rc, out);
    if (rc == 2)
        assert_one_line_err(out, "--");
    free(out);
    free(trace);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fifty_million_token_prompt);
    tcase_add_test(tc, test_max_tokens_request);
    tcase_add_test(tc, test_tokens_above_limit_refused);
    tcase_add_test(tc, test_overflowing_flags_refused);
    tcase_add_test(tc, test_zero_requests);
    tcase_add_test(tc, test_single_request);
    tcase_add_test(tc, test_rate_scale_extremes);
    tcase_add_test(tc, test_block_size_extremes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    Suite *s = suite();
    return tu_run_suites(&s, 1);
}
