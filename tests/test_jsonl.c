/* test_jsonl.c — Mooncake JSONL traces (docs/semantics-extensions.md, T1):
 * a small file read field by field, format detection, the shipped traces,
 * and every kind of bad input named by file:line (in the library, and as
 * one line with exit 2 from the CLI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/trace.h"
#include "testutil.h"

/* Three requests.  r0: 1000 tokens = 2 segments of 512 + 488; r1: 512
 * tokens = 1 full segment; r2: 1537 tokens = 4 segments (512 * 3 + 1). */
static const char small[] =
    "{\"timestamp\": 1500, \"input_length\": 1000, \"output_length\": 7, \"hash_ids\": [0, 1]}\n"
    "{\"timestamp\": 1500, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [0]}\n"
    "  {\"hash_ids\": [0, 1, 9, 18446744073709551615], \"output_length\": 3,\r\n"
    "   \"timestamp\": 4250, \"input_length\": 1537}";

START_TEST(test_small_file)
{
    const char *dir = tu_tmpdir();
    /* the last object spans two physical lines: not allowed (one per line) */
    char *bad = tu_write_file(dir, "t.jsonl", small);
    trace t;
    kvs_err err;
    ck_assert_int_eq(trace_load(bad, &t, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, "t.jsonl:3: not valid JSON") != NULL, "%s", err.msg);
    free(bad);
    /* the same on one line each, without a final newline, and detected by
     * its first '{' rather than the extension */
    static const char good[] =
        "{\"timestamp\": 1500, \"input_length\": 1000, \"output_length\": 7, \"hash_ids\": [0, 1]}\n"
        "{\"timestamp\": 1500, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [0]}\n"
        "  {\"hash_ids\": [0, 1, 9, 9223372036854775807], \"output_length\": 3, "
        "\"timestamp\": 4250, \"input_length\": 1537}\r\n";
    char *path = tu_write_file(dir, "t.txt", good);
    ck_assert_msg(trace_load(path, &t, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(t.n, 3);
    ck_assert_int_eq(t.format, TRACE_FORMAT_MOONCAKE);
    ck_assert_int_eq(t.hash_block, 512);
    ck_assert_int_eq(t.has_priority, 0);
    /* arrivals from the first timestamp, in seconds */
    ck_assert(t.reqs[0].arrival_s == 0.0 && t.reqs[1].arrival_s == 0.0);
    ck_assert(t.reqs[2].arrival_s == 2.75);
    ck_assert_int_eq(t.reqs[0].prompt_tokens, 1000);
    ck_assert_int_eq(t.reqs[0].output_tokens, 7);
    ck_assert_int_eq(t.reqs[2].prompt_tokens, 1537);
    ck_assert_int_eq(t.reqs[2].output_tokens, 3);
    const int64_t off[4] = {0, 2, 3, 7};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(t.hash_off[i], off[i]);
    const uint64_t ids[7] = {0, 1, 0, 0, 1, 9, UINT64_C(9223372036854775807)};
    const int32_t tok[7] = {512, 488, 512, 512, 512, 512, 1};
    for (int i = 0; i < 7; i++) {
        ck_assert(t.hash_ids[i] == ids[i]);
        ck_assert_int_eq(t.hash_tokens[i], tok[i]);
    }
    ck_assert_int_eq(strlen(t.sha256), 64);
    ck_assert_str_eq(t.source, path);
    trace_free(&t);
    ck_assert(t.hash_off == NULL && t.reqs == NULL);
    free(path);
}
END_TEST

/* The shipped traces load whole: 12,031 and 3,993 requests, and the
 * conversation trace's statistics from traces/README.md. */
START_TEST(test_shipped_traces)
{
    trace t;
    kvs_err err;
    ck_assert_msg(trace_load("traces/mooncake_fast25_conversation_trace.jsonl", &t, &err) == 0,
                  "%s", err.msg);
    ck_assert_int_eq(t.n, 12031);
    int64_t in = 0, maxp = 0;
    for (int64_t i = 0; i < t.n; i++) {
        in += t.reqs[i].prompt_tokens;
        if (t.reqs[i].prompt_tokens > maxp)
            maxp = t.reqs[i].prompt_tokens;
        ck_assert_int_eq(t.hash_off[i + 1] - t.hash_off[i],
                         (t.reqs[i].prompt_tokens + 511) / 512);
        ck_assert(t.hash_ids[t.hash_off[i]] == 0); /* every request starts with block 0 */
    }
    ck_assert_int_eq(in, 144793823);
    ck_assert_int_eq(maxp, 126195);
    ck_assert(t.reqs[t.n - 1].arrival_s > 3536 && t.reqs[t.n - 1].arrival_s < 3538);
    ck_assert_str_eq(t.sha256, "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df");
    trace_free(&t);
    ck_assert_msg(trace_load("traces/mooncake_fast25_synthetic_trace.jsonl", &t, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(t.n, 3993);
    ck_assert_str_eq(t.sha256, "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131");
    trace_free(&t);
}
END_TEST

typedef struct bad_case {
    const char *text;  /* file contents */
    const char *where; /* expected "file:line: ..." fragment */
} bad_case;

static const char ok_line[] =
    "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [5]}\n";

static const bad_case bad_cases[] = {
    {"[1, 2]\n", ":1: not a JSON object"},
    {"{\"timestamp\": 0, \"input_length\": 1025, \"output_length\": 2, \"hash_ids\": [1, 2]}\n",
     ":1: hash_ids: 2 ids for input_length 1025; expected ceil(1025 / 512) = 3"},
    {"%s{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": []}\n",
     ":2: hash_ids: 0 ids for input_length 10"},
    {"%s\n%s", ":2: blank line"},
    {"%s{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\n",
     ":2: missing key \"hash_ids\""},
    {"%s{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [5], "
     "\"priority\": 1}\n",
     ":2: unknown key \"priority\""},
    {"%s{\"timestamp\": 0, \"input_length\": 10.5, \"output_length\": 2, \"hash_ids\": [5]}\n",
     ":2: input_length: must be an integer"},
    {"%s{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": [5]}\n",
     ":2: output_length: must be in [1,"},
    {"{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [5]}\n%s",
     ":2: timestamp: 0 is earlier than the previous line's 9"},
    {"%s{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [-1]}\n",
     ":2: hash_ids[0]: must be in [0,"},
    {"%s{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [5]} x\n",
     ":2: not valid JSON"},
    {"%s{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [5]}{}\n",
     ":2: not valid JSON"},
    {"%s{\"timestamp\": 0, \"input_length\": 10,\n", ":2: not valid JSON: the line ends inside"},
    {"{}\n", ":1: missing key \"timestamp\""},
    {"%s{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": 5}\n",
     ":2: hash_ids: must be an array"},
    {"", ":1: empty file"},
};

/* Every bad input is an error naming file:line, in the library and as one
 * line with exit status 2 from kvsim run. */
START_TEST(test_bad_input)
{
    const char *dir = tu_tmpdir();
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        char text[1024], name[32];
        snprintf(text, sizeof text, bad_cases[i].text, ok_line, ok_line);
        snprintf(name, sizeof name, "bad%zu.jsonl", i);
        char *path = tu_write_file(dir, name, text);
        trace t;
        kvs_err err;
        ck_assert_msg(trace_load(path, &t, &err) == KVS_EINVAL, "case %zu loaded", i);
        char want[512];
        snprintf(want, sizeof want, "%s%s", path, bad_cases[i].where);
        ck_assert_msg(strstr(err.msg, want) != NULL, "case %zu: '%s' lacks '%s'", i, err.msg,
                      want);
        ck_assert(t.reqs == NULL && t.hash_off == NULL && t.n == 0);
        char cmd[2048], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s run --trace %s --db %s/x.db", tu_kvsim(), path, dir);
        int rc = tu_run(cmd, &out);
        ck_assert_msg(rc == 2, "case %zu: exit %d: %s", i, rc, out);
        ck_assert_msg(strstr(out, want) && strchr(out, '\n') == strrchr(out, '\n'),
                      "case %zu: %s", i, out);
        free(out);
        free(path);
    }
}
END_TEST

/* A line with more values than the longest valid request has hash_ids
 * (ceil(10^9 / 512) = 1,953,125) is refused before json-c parses it, so
 * its memory stays bounded: 2,000,000 ids of "1" (4 MB) is one line
 * naming the count (the ids and the three keys before them). */
START_TEST(test_huge_line_refused_unparsed)
{
    enum { N = 2000000 };
    const char head[] = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, "
                        "\"hash_ids\": [";
    size_t cap = sizeof head + 2 * (size_t)N + 8, len = sizeof head - 1;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    memcpy(text, head, len);
    for (int i = 0; i < N; i++) {
        text[len++] = '1';
        text[len++] = i + 1 < N ? ',' : ']';
    }
    memcpy(text + len, "}\n", 3);
    char *path = tu_write_file(tu_tmpdir(), "huge.jsonl", text);
    free(text);
    trace t;
    kvs_err err;
    ck_assert_int_eq(trace_load(path, &t, &err), KVS_EINVAL);
    ck_assert_msg(strstr(err.msg, ":1: 2000003 comma-separated values on one line; a request has at most "
                                  "1953125 hash_ids"), "%s", err.msg);
    free(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jsonl");
    TCase *c = tcase_create("jsonl");
    tcase_set_timeout(c, 60);
    tcase_add_test(c, test_small_file);
    tcase_add_test(c, test_shipped_traces);
    tcase_add_test(c, test_bad_input);
    tcase_add_test(c, test_huge_line_refused_unparsed);
    suite_add_tcase(s, c);
    return tu_run_suites(&s, 1);
}
