/* test_traces.c — loading native and Azure CSV traces, SHA-256, statistics,
 * writing and reading back, and the `kvsim trace` command line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "testutil.h"
#include "traces/trace.h"
#include "traces/trace_internal.h"

#define CONV "traces/azure_llm_2023_conv.csv"
#define CODE "traces/azure_llm_2023_code.csv"

/* Write `text` to a fresh temp file and load it; returns the status. */
static int load_text(const char *text, trace *t, kvs_err *err, char **path)
{
    *path = tu_write_file(tu_tmpdir(), "t.csv", text);
    return trace_load(*path, t, err);
}

/* ------------------------------------------------------------- SHA-256 */

/* The digest of s by trace_sha256 (libcrypto where built with it), which
 * must equal the built-in reference's. */
static void sha_str(const char *s, char hex[65])
{
    trace_sha256 c;
    trace_sha256_init(&c);
    trace_sha256_update(&c, s, strlen(s));
    trace_sha256_hex(&c, hex);
    trace_sha256_ref r;
    char ref[65];
    trace_sha256_ref_init(&r);
    trace_sha256_ref_update(&r, s, strlen(s));
    trace_sha256_ref_hex(&r, ref);
    ck_assert_str_eq(hex, ref);
}

/* trace_sha256 (libcrypto or built-in) against the built-in reference on
 * pseudo-random bytes of every length 0..300 and 100,003, each fed in
 * pseudo-random pieces of 0..130 bytes: the same digest every time. */
START_TEST(test_sha256_impls_agree)
{
    static unsigned char data[100003];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof data; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        data[i] = (unsigned char)x;
    }
    for (size_t n = 0; n <= 301; n++) {
        size_t len = n == 301 ? sizeof data : n;
        trace_sha256 c;
        trace_sha256_ref r;
        trace_sha256_init(&c);
        trace_sha256_ref_init(&r);
        for (size_t off = 0; off < len;) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t take = (size_t)(x % 131);
            if (take > len - off)
                take = len - off;
            trace_sha256_update(&c, data + off, take);
            trace_sha256_ref_update(&r, data + off, take);
            off += take;
        }
        char a[65], b[65];
        trace_sha256_hex(&c, a);
        trace_sha256_ref_hex(&r, b);
        ck_assert_msg(!strcmp(a, b), "length %zu: %s (%s) != %s (builtin)", len, a,
                      trace_sha256_impl(), b);
    }
}
END_TEST

/* FIPS 180-2 appendix B vectors, plus the empty message. */
START_TEST(test_sha256_vectors)
{
    char hex[65];
    sha_str("abc", hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha_str("", hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* 56 bytes: the padding no longer fits in the block, two blocks. */
    sha_str("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

/* One million 'a' fed in irregular pieces (1..97 bytes) exercises the
 * partial-block buffering; FIPS 180-2 B.3. */
START_TEST(test_sha256_million_a_chunked)
{
    static char a[97];
    memset(a, 'a', sizeof a);
    trace_sha256 c;
    trace_sha256_init(&c);
    size_t left = 1000000, k = 1;
    while (left) {
        size_t take = k < left ? k : left;
        trace_sha256_update(&c, a, take);
        left -= take;
        k = k % 97 + 1;
    }
    char hex[65];
    trace_sha256_hex(&c, hex);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* ------------------------------------------------- fast path vs libcsv */

typedef struct rec_log {
    char *s;    /* "line:field|field|...;" per record */
    size_t len, cap;
} rec_log;

static int log_row(void *ctx, int64_t line, char **fields, int nfields, kvs_err *err)
{
    (void)err;
    rec_log *l = ctx;
    char tmp[256];
    int k = snprintf(tmp, sizeof tmp, "%lld:", (long long)line);
    for (int i = 0; i < nfields; i++)
        k += snprintf(tmp + k, sizeof tmp - (size_t)k, "%s%s", i ? "|" : "", fields[i]);
    k += snprintf(tmp + k, sizeof tmp - (size_t)k, ";");
    if (l->len + (size_t)k + 1 > l->cap) {
        l->cap = 2 * (l->len + (size_t)k + 1);
        l->s = realloc(l->s, l->cap);
    }
    memcpy(l->s + l->len, tmp, (size_t)k + 1);
    l->len += (size_t)k;
    return KVS_OK;
}

/* Records and status of trace_csv_read on text, "status=N err" appended. */
static char *read_log(const char *name, const char *text)
{
    char *path = tu_write_file(tu_tmpdir(), name, text);
    rec_log l = {calloc(1, 1), 0, 1};
    kvs_err err = {{0}};
    char hex[65];
    int st = trace_csv_read(path, log_row, &l, hex, &err);
    char tail[1200];
    snprintf(tail, sizeof tail, "status=%d %s", st, st ? err.msg : hex);
    /* the two files differ in path and bytes: compare messages without the
     * path, digests not at all */
    char *m = strstr(tail, path);
    if (m)
        memmove(m, m + strlen(path), strlen(m + strlen(path)) + 1);
    if (!st)
        tail[9] = '\0';
    l.s = realloc(l.s, l.len + strlen(tail) + 1);
    strcpy(l.s + l.len, tail);
    free(path);
    return l.s;
}

/* Each text once with a bare field A (split by the tight loop) and once
 * with "A" quoted (which sends the whole file to libcsv): the same
 * records, the same physical lines, the same errors.  The cases: LF, CRLF
 * and CR-only lines, blanks around fields (libcsv trims them), a trailing
 * empty field, no final newline, blank lines (an error only before a
 * record) and lines of only spaces. */
START_TEST(test_csv_fast_path_matches_libcsv)
{
    static const char *const cases[] = {
        "a,b\n1,A\n2,3\n",
        "a,b\r\n1,A\r\n2,3\r\n",
        "a,b\r1,A\r2,3",
        "a , b\n 1,\tA \n2 ,3,\n",
        "a,b\n1,A\n\n2,3\n",
        "a,b\n1,A\n   \n",
        "a,b\n1,A\n\n \r\n",
        "a,b\n1,A\n\n\t\n2,3\n",
        "A",
        "x\r\n\r\nA\r\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char fast[256], slow[256];
        snprintf(fast, sizeof fast, "%s", cases[i]);
        char *a = strchr(fast, 'A');
        size_t at = (size_t)(a - fast);
        snprintf(slow, sizeof slow, "%.*s\"A\"%s", (int)at, fast, a + 1);
        char *x = read_log("fast.csv", fast), *y = read_log("slow.csv", slow);
        ck_assert_msg(!strcmp(x, y), "case %zu: fast %s, libcsv %s", i, x, y);
        free(x);
        free(y);
    }
    /* 30,000 CRLF lines (the last 29999,209993,8: 29999 = 13 * 2307 + 8):
     * records that straddle the 64 KiB chunks, and a CR
     * last in a chunk with its LF in the next */
    size_t cap = 30000 * 24 + 16, len = 0;
    char *big = malloc(cap), *bigq = malloc(cap + 2);
    for (int i = 0; i < 30000; i++)
        len += (size_t)snprintf(big + len, cap - len, "%d,%d,%d\r\n", i, 7 * i, i % 13);
    snprintf(bigq, cap + 2, "\"0\"%s", big + 1);
    char *x = read_log("fast.csv", big), *y = read_log("slow.csv", bigq);
    ck_assert_str_eq(x, y);
    ck_assert_ptr_nonnull(strstr(x, ";30000:29999|209993|8;status=0"));
    free(x);
    free(y);
    free(big);
    free(bigq);
}
END_TEST

/* trace_parse_f64 against its model, strtod: random decimals in the forms
 * traces write (%.6f times, integers, long fractions, signs, leading
 * zeros, a bare point) and ones past the fast path's reach (20 digits,
 * exponents, mantissas above 2^53), each compared bit for bit; malformed
 * ones must still be refused.  Dropping the fast path's 2^53 bound, or
 * rounding twice (w * 10^-f instead of w / 10^f), fails it. */
START_TEST(test_parse_f64_matches_strtod)
{
    rng r;
    rng_init(&r, 20261203);
    int64_t fast_like = 0;
    char buf[64];
    for (int i = 0; i < 400000; i++) {
        const int form = (int)rng_below(&r, 6);
        const uint64_t a = rng_next_u64(&r), b = rng_next_u64(&r);
        switch (form) {
        case 0: snprintf(buf, sizeof buf, "%.6f", (double)(a % 100000000000ULL) / 1e6); break;
        case 1: snprintf(buf, sizeof buf, "%llu", (unsigned long long)(a >> rng_below(&r, 64))); break;
        case 2: snprintf(buf, sizeof buf, "%s%llu.%0*llu", b & 1 ? "-" : (b & 2 ? "+" : ""),
                         (unsigned long long)(a % 1000000), (int)(1 + b % 18),
                         (unsigned long long)((b >> 8) % 1000000000000000000ULL)); break;
        case 3: snprintf(buf, sizeof buf, "%.17g", (double)a / (double)(b | 1)); break;
        case 4: snprintf(buf, sizeof buf, "%s.%llu", b & 1 ? "0" : "",
                         (unsigned long long)(a % 100000000000000000ULL)); break;
        default: snprintf(buf, sizeof buf, "%llu.%llue%d", (unsigned long long)(a % 100000),
                          (unsigned long long)(b % 1000), (int)(b % 40) - 20); break;
        }
        char *end;
        const double want = strtod(buf, &end);
        ck_assert_msg(*end == 0, "%s", buf);
        double got = -1.0;
        const char *why = NULL;
        ck_assert_msg(trace_parse_f64(buf, &got, &why) == 0, "%s: %s", buf, why);
        ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "%s: %.17g, strtod %.17g", buf, got,
                      want);
        fast_like += form == 0 || form == 2;
    }
    ck_assert_int_gt(fast_like, 100000);
    const char *bad[] = {"", "-", ".", "+.", "1.2.3", "1e", "0x10", "inf", " 1", "1 ", "--1", "1-"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double v;
        const char *why = NULL;
        ck_assert_msg(trace_parse_f64(bad[i], &v, &why) == -1 && why, "'%s' accepted", bad[i]);
    }
}
END_TEST

START_TEST(test_sha256_file)
{
    char hex[65];
    kvs_err err;
    char *p = tu_write_file(tu_tmpdir(), "abc.txt", "abc");
    ck_assert_int_eq(trace_sha256_file(p, hex, &err), KVS_OK);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* The shipped conv trace, digest from coreutils sha256sum. */
    ck_assert_int_eq(trace_sha256_file(CONV, hex, &err), KVS_OK);
    ck_assert_str_eq(hex, "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8");
    ck_assert_int_eq(trace_sha256_file("/nonexistent/x.csv", hex, &err), KVS_EIO);
    free(p);
}
END_TEST

/* ------------------------------------------------------------- loading */

START_TEST(test_native_golden)
{
    trace t;
    kvs_err err;
    char *p, hex[65];
    ck_assert_int_eq(load_text("arrival_s,prompt_tokens,output_tokens\n"
                               "0,10,5\n0.5,20,1\n0.5,3,7\n2.25,1,1\n",
                               &t, &err, &p),
                     KVS_OK);
    ck_assert_int_eq(t.n, 4);
    ck_assert_int_eq(t.format, TRACE_FORMAT_NATIVE);
    ck_assert_int_eq(t.has_priority, 0);
    ck_assert_str_eq(t.source, p);
    ck_assert_int_eq(trace_sha256_file(p, hex, &err), KVS_OK);
    ck_assert_str_eq(t.sha256, hex);
    const double arr[4] = {0, 0.5, 0.5, 2.25};
    const int64_t pr[4] = {10, 20, 3, 1}, out[4] = {5, 1, 7, 1};
    for (int i = 0; i < 4; i++) {
        ck_assert(t.reqs[i].arrival_s == arr[i]);
        ck_assert_int_eq(t.reqs[i].prompt_tokens, pr[i]);
        ck_assert_int_eq(t.reqs[i].output_tokens, out[i]);
        ck_assert_int_eq(t.reqs[i].priority, 0);
    }
    trace_free(&t);
    trace_free(&t); /* safe twice */
    free(p);
}
END_TEST

/* The optional hash_ids column: ids separated by spaces, empty for none;
 * 512-token segments, the prompt's last one holding its remainder. */
START_TEST(test_native_hash_ids)
{
    trace t;
    kvs_err err;
    char *p;
    ck_assert_int_eq(load_text("arrival_s,prompt_tokens,output_tokens,priority,hash_ids\n"
                               "0,1100,5,1,7 8 9\n"
                               "0.5,20,1,0,\n"
                               "1,1024,2,3,7 8\n"
                               "2,1100,1,0,7\n",
                               &t, &err, &p),
                     KVS_OK);
    ck_assert_int_eq(t.n, 4);
    ck_assert_int_eq(t.has_priority, 1);
    ck_assert_int_eq(t.reqs[2].priority, 3);
    ck_assert_int_eq(t.hash_block, 512);
    ck_assert_ptr_nonnull(t.hash_off);
    const int64_t off[5] = {0, 3, 3, 5, 6};
    const uint64_t ids[6] = {7, 8, 9, 7, 8, 7};
    /* 1100 = 512 + 512 + 76; 1024 = 512 + 512; a partial list: full segments */
    const int32_t tok[6] = {512, 512, 76, 512, 512, 512};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(t.hash_off[i], off[i]);
    for (int k = 0; k < 6; k++) {
        ck_assert_uint_eq(t.hash_ids[k], ids[k]);
        ck_assert_int_eq(t.hash_tokens[k], tok[k]);
    }
    trace_free(&t);
    free(p);
    /* without priority; extra spaces are separators */
    ck_assert_int_eq(load_text("arrival_s,prompt_tokens,output_tokens,hash_ids\n"
                               "0,600,5, 3  4 \n0,10,1,\n",
                               &t, &err, &p),
                     KVS_OK);
    ck_assert_int_eq(t.has_priority, 0);
    ck_assert_int_eq(t.hash_off[1], 2);
    ck_assert_int_eq(t.hash_off[2], 2);
    ck_assert_uint_eq(t.hash_ids[1], 4);
    ck_assert_int_eq(t.hash_tokens[1], 88);
    trace_free(&t);
    free(p);
    /* no column: no hashes */
    ck_assert_int_eq(load_text("arrival_s,prompt_tokens,output_tokens\n0,600,5\n", &t, &err, &p),
                     KVS_OK);
    ck_assert_ptr_null(t.hash_off);
    trace_free(&t);
    free(p);
}
END_TEST

/* CRLF line ends, a quoted field, no final newline, priority column. */
START_TEST(test_native_priority_crlf_quoted)
{
    trace t;
    kvs_err err;
    char *p;
    ck_assert_int_eq(load_text("arrival_s,prompt_tokens,output_tokens,priority\r\n"
                               "0.0,5,5,2\r\n1.5,\"6\",7,0\r\n3,8,9,10",
                               &t, &err, &p),
                     KVS_OK);
    ck_assert_int_eq(t.n, 3);
    ck_assert_int_eq(t.has_priority, 1);
    ck_assert(t.reqs[1].arrival_s == 1.5);
    ck_assert_int_eq(t.reqs[1].prompt_tokens, 6);
    ck_assert_int_eq(t.reqs[0].priority, 2);
    ck_assert_int_eq(t.reqs[1].priority, 0);
    ck_assert_int_eq(t.reqs[2].priority, 10);
    ck_assert(t.reqs[2].arrival_s == 3.0);
    trace_free(&t);
    free(p);
}
END_TEST

/* Three rows across a year boundary at midnight.  By hand:
 *   23:59:59.9999999 -> 0
 *   00:00:00.0000001 next day -> 0.0000001 + 0.0000001 = 0.0000002 s
 *   00:00:01.5000000 -> 1.5 + 0.0000001 = 1.5000001 s */
START_TEST(test_azure_midnight)
{
    trace t;
    kvs_err err;
    char *p;
    ck_assert_int_eq(load_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                               "2023-12-31 23:59:59.9999999,100,10\n"
                               "2024-01-01 00:00:00.0000001,200,20\n"
                               "2024-01-01 00:00:01.5000000,300,30\n",
                               &t, &err, &p),
                     KVS_OK);
    ck_assert_int_eq(t.format, TRACE_FORMAT_AZURE);
    ck_assert_int_eq(t.n, 3);
    ck_assert(t.reqs[0].arrival_s == 0.0);
    ck_assert_double_eq_tol(t.reqs[1].arrival_s, 2e-7, 1e-15);
    ck_assert_double_eq_tol(t.reqs[2].arrival_s, 1.5000001, 1e-15);
    ck_assert_int_eq(t.reqs[2].prompt_tokens, 300);
    ck_assert_int_eq(t.reqs[2].output_tokens, 30);
    ck_assert_int_eq(t.has_priority, 0);
    trace_free(&t);
    free(p);
}
END_TEST

/* Month ends, leap day and a fraction with fewer digits.  By hand:
 *   2024-02-28 23:59:59.5 -> 0
 *   2024-02-29 12:00:00   -> 0.5 + 12 h = 43200.5
 *   2024-03-01 00:00:00.25 -> 0.5 + 86400 + 0.25 = 86400.75 (2024 leap)
 *   2024-04-01 00:00:00.25 -> + 31 days of March = 86400.75 + 2678400 */
START_TEST(test_azure_leap_and_months)
{
    trace t;
    kvs_err err;
    char *p;
    ck_assert_int_eq(load_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                               "2024-02-28 23:59:59.5,1,1\n"
                               "2024-02-29 12:00:00,1,1\n"
                               "2024-03-01 00:00:00.25,1,1\n"
                               "2024-04-01 00:00:00.25,1,1\n",
                               &t, &err, &p),
                     KVS_OK);
    ck_assert(t.reqs[1].arrival_s == 43200.5);
    ck_assert(t.reqs[2].arrival_s == 86400.75);
    ck_assert(t.reqs[3].arrival_s == 86400.75 + 2678400.0);
    trace_free(&t);
    free(p);
    /* Not a leap year: 2023-02-28 23:00 -> 2023-03-01 01:00 is 2 h. */
    ck_assert_int_eq(load_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                               "2023-02-28 23:00:00.0000000,1,1\n"
                               "2023-03-01 01:00:00.0000000,1,1\n",
                               &t, &err, &p),
                     KVS_OK);
    ck_assert(t.reqs[1].arrival_s == 7200.0);
    trace_free(&t);
    free(p);
}
END_TEST

START_TEST(test_header_only_and_empty)
{
    trace t;
    kvs_err err;
    char *p;
    ck_assert_int_eq(load_text("arrival_s,prompt_tokens,output_tokens\n", &t, &err, &p), KVS_OK);
    ck_assert_int_eq(t.n, 0);
    trace_free(&t);
    free(p);
    ck_assert_int_eq(load_text("TIMESTAMP,ContextTokens,GeneratedTokens", &t, &err, &p), KVS_OK);
    ck_assert_int_eq(t.n, 0);
    ck_assert_int_eq(t.format, TRACE_FORMAT_AZURE);
    trace_free(&t);
    free(p);
    ck_assert_int_eq(load_text("", &t, &err, &p), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "empty file"));
    ck_assert_ptr_null(t.reqs);
    ck_assert_int_eq(t.n, 0);
    free(p);
}
END_TEST

START_TEST(test_missing_file)
{
    trace t;
    kvs_err err;
    ck_assert_int_eq(trace_load("/nonexistent/dir/x.csv", &t, &err), KVS_EIO);
    ck_assert_str_eq(err.msg, "/nonexistent/dir/x.csv: cannot open: No such file or directory");
    ck_assert_int_eq(t.n, 0);
}
END_TEST

#define NH "arrival_s,prompt_tokens,output_tokens\n"
#define PH "arrival_s,prompt_tokens,output_tokens,priority\n"
#define AH "TIMESTAMP,ContextTokens,GeneratedTokens\n"
#define HH "arrival_s,prompt_tokens,output_tokens,hash_ids\n"
#define PHH "arrival_s,prompt_tokens,output_tokens,priority,hash_ids\n"
#define TS "2023-11-16 18:17:03.9799600"

typedef struct bad_case {
    const char *text;
    int line;          /* line the message must name */
    const char *words; /* a phrase the message must contain */
} bad_case;

static const bad_case bad_cases[] = {
    {"foo,bar\n0,1,1\n", 1, "accepted: native"},
    {"arrival_s,prompt_tokens\n", 1, "unknown header"},
    {NH "0,1,1\n1,2\n", 3, "expected 3 fields, got 2"},
    {NH "0,1,1,1\n", 2, "expected 3 fields, got 4"},
    {NH "x,1,1\n", 2, "arrival_s: 'x' is not a number"},
    {NH "nan,1,1\n", 2, "arrival_s"},
    {NH "inf,1,1\n", 2, "arrival_s"},
    {NH "0x10,1,1\n", 2, "arrival_s"},
    {NH "0,abc,1\n", 2, "prompt_tokens: 'abc' is not an integer"},
    {NH "0,12.5,1\n", 2, "prompt_tokens: '12.5' is not an integer"},
    {NH "0,1e3,1\n", 2, "prompt_tokens: '1e3' is not an integer"},
    {NH "0,99999999999999999999,1\n", 2, "is out of range"},
    {NH "0,,1\n", 2, "prompt_tokens"},
    {NH "0,0,1\n", 2, "prompt_tokens: must be >= 1"},
    {NH "0,1,-3\n", 2, "output_tokens: must be >= 1"},
    {NH "0,1,0\n", 2, "output_tokens: must be >= 1"},
    {NH "-1,1,1\n", 2, "arrival_s: must be >= 0"},
    {NH "0,1,1\n2,1,1\n1.5,1,1\n", 4, "earlier than the previous"},
    {NH "0,1,1\n\n1,1,1\n", 3, "blank line"},
    {NH "0,1,1\r\n\r\n1,1,1\r\n", 3, "blank line"},
    {NH "0,\"1,1\n", 2, "malformed CSV"},
    {PH "0,1,1,-1\n", 2, "priority: must be in"},
    {PH "0,1,1,1.5\n", 2, "priority: '1.5' is not an integer"},
    {PH "0,1,1,4294967296\n", 2, "priority: must be in"},
    {"arrival_s,prompt_tokens,output_tokens,hash_ids,priority\n0,1,1,,0\n", 1,
     "unknown header"},
    {HH "0,512,1,1 2\n", 2, "hash_ids: more than ceil(512 / 512) = 1 ids"},
    {HH "0,10,1,1\n0,513,1,1 2 3\n", 3, "hash_ids: more than ceil(513 / 512) = 2 ids"},
    {HH "0,10,1,x\n", 2, "hash_ids: id 1 'x' is not an integer"},
    {HH "0,10,1,-4\n", 2, "hash_ids: id 1 '-4' must be >= 0"},
    {PHH "0,600,1,0,5 1.5\n", 2, "hash_ids: id 2 '1.5' is not an integer"},
    {HH "0,10,1\n", 2, "expected 4 fields, got 3"},
    {AH TS ",1,1\n2023-11-16T18:17:04.0,1,1\n", 3, "TIMESTAMP: '2023-11-16T18:17:04.0' is not"},
    {AH "2023-13-01 00:00:00.0,1,1\n", 2, "is not a valid date"},
    {AH "2023-02-29 00:00:00.0,1,1\n", 2, "is not a valid date"},
    {AH "2023-11-16 24:00:00.0,1,1\n", 2, "is not a valid date"},
    {AH "2023-11-16 18:17:03.,1,1\n", 2, "TIMESTAMP"},
    {AH "2023-11-16 18:17:03.1234567890,1,1\n", 2, "more than 9 fractional digits"},
    {AH TS ",1,1\n2023-11-16 18:17:03.9799599,1,1\n", 3, "earlier than the previous"},
    {AH TS ",x,1\n", 2, "ContextTokens: 'x' is not an integer"},
    {AH TS ",1,0\n", 2, "GeneratedTokens: must be >= 1"},
    {AH TS ",1\n", 2, "expected 3 fields, got 2"},
};

/* Every malformed row is KVS_EINVAL naming path:line and the problem. */
START_TEST(test_bad_inputs)
{
    const bad_case *c = &bad_cases[_i];
    trace t;
    kvs_err err;
    char *p, want[1200];
    ck_assert_int_eq(load_text(c->text, &t, &err, &p), KVS_EINVAL);
    snprintf(want, sizeof want, "%s:%d: ", p, c->line);
    ck_assert_msg(!strncmp(err.msg, want, strlen(want)), "case %d: '%s' lacks '%s'", _i,
                  err.msg, want);
    ck_assert_msg(strstr(err.msg, c->words), "case %d: '%s' lacks '%s'", _i, err.msg, c->words);
    ck_assert_ptr_null(strchr(err.msg, '\n')); /* one line */
    ck_assert_ptr_null(t.reqs);
    ck_assert_int_eq(t.n, 0);
    free(p);
}
END_TEST

/* The shipped Azure traces.  First/last arrivals by hand from the first and
 * last rows: conv 18:15:46.6805900 -> 19:14:08.4025270 = 58 min 21.721937 s;
 * code 18:17:03.9799600 -> 19:14:19.9280160 = 57 min 15.948056 s. */
START_TEST(test_azure_shipped)
{
    trace t;
    kvs_err err;
    ck_assert_int_eq(trace_load(CONV, &t, &err), KVS_OK);
    ck_assert_int_eq(t.n, 19366);
    ck_assert_int_eq(t.format, TRACE_FORMAT_AZURE);
    ck_assert(t.reqs[0].arrival_s == 0.0);
    ck_assert_double_eq_tol(t.reqs[t.n - 1].arrival_s, 3501.721937, 1e-9);
    ck_assert_int_eq(t.reqs[0].prompt_tokens, 374);
    ck_assert_int_eq(t.reqs[0].output_tokens, 44);
    ck_assert_int_eq(t.reqs[t.n - 1].prompt_tokens, 197);
    ck_assert_int_eq(t.reqs[t.n - 1].output_tokens, 183);
    for (int64_t i = 1; i < t.n; i++)
        ck_assert(t.reqs[i].arrival_s >= t.reqs[i - 1].arrival_s);
    ck_assert_str_eq(t.sha256, "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8");
    ck_assert_str_eq(t.source, CONV);
    trace_free(&t);
    ck_assert_int_eq(trace_load(CODE, &t, &err), KVS_OK);
    ck_assert_int_eq(t.n, 8819);
    ck_assert_double_eq_tol(t.reqs[t.n - 1].arrival_s, 3435.948056, 1e-9);
    ck_assert_int_eq(t.reqs[0].prompt_tokens, 4808);
    ck_assert_int_eq(t.reqs[t.n - 1].output_tokens, 173);
    trace_free(&t);
}
END_TEST

START_TEST(test_scale_rate)
{
    trace t;
    kvs_err err;
    char *p;
    ck_assert_int_eq(load_text(NH "0,1,1\n1,1,1\n3,1,1\n", &t, &err, &p), KVS_OK);
    trace_scale_rate(&t, 2.0);
    ck_assert(t.reqs[1].arrival_s == 0.5);
    ck_assert(t.reqs[2].arrival_s == 1.5);
    trace_free(&t);
    free(p);
}
END_TEST

/* ---------------------------------------------------------- statistics */

/* Arrivals 0,1,2,4 and prompts 10,20,30,40, worked by hand:
 *   span 4, rate 4/4 = 1; IATs 1,1,2: mean 4/3, population variance
 *   ((1/3)^2*2 + (2/3)^2)/3 = 2/9, CV = sqrt(2/9)/(4/3) = sqrt(2)/4.
 *   IoD@1s: 4 full bins [0,1) [1,2) [2,3) [3,4) hold 1,1,1,0 (t=4 is past
 *   the last full bin): mean 3/4, variance 3/4 - 9/16 = 3/16, IoD 1/4.
 *   IoD@10s: no full bin -> 0.
 *   Nearest rank of n=4: p50 rank 2 -> 20, p90 rank ceil(3.6)=4 -> 40. */
START_TEST(test_stats_golden)
{
    trace t;
    trace_stats s;
    kvs_err err;
    char *p;
    ck_assert_int_eq(load_text(NH "0,10,4\n1,20,3\n2,30,2\n4,40,1\n", &t, &err, &p), KVS_OK);
    ck_assert_int_eq(trace_stats_compute(&t, &s, &err), KVS_OK);
    ck_assert_int_eq(s.n, 4);
    ck_assert_double_eq_tol(s.span_s, 4.0, 1e-12);
    ck_assert_double_eq_tol(s.rate_rps, 1.0, 1e-12);
    ck_assert_double_eq_tol(s.iat_cv, sqrt(2.0) / 4.0, 1e-12);
    ck_assert_double_eq_tol(s.iod_1s, 0.25, 1e-12);
    ck_assert(s.iod_10s == 0.0 && s.iod_60s == 0.0);
    ck_assert_double_eq_tol(s.prompt_mean, 25.0, 1e-12);
    ck_assert(s.prompt_p50 == 20 && s.prompt_p90 == 40 && s.prompt_p99 == 40 && s.prompt_max == 40);
    ck_assert_double_eq_tol(s.output_mean, 2.5, 1e-12);
    ck_assert(s.output_p50 == 2 && s.output_p90 == 4 && s.output_max == 4);
    trace_free(&t);
    free(p);
    /* Empty and single-request traces: zeros, no division by zero. */
    ck_assert_int_eq(load_text(NH, &t, &err, &p), KVS_OK);
    ck_assert_int_eq(trace_stats_compute(&t, &s, &err), KVS_OK);
    ck_assert(s.n == 0 && s.span_s == 0 && s.rate_rps == 0 && s.prompt_max == 0);
    trace_free(&t);
    free(p);
    ck_assert_int_eq(load_text(NH "5,7,8\n", &t, &err, &p), KVS_OK);
    ck_assert_int_eq(trace_stats_compute(&t, &s, &err), KVS_OK);
    ck_assert(s.n == 1 && s.span_s == 0 && s.rate_rps == 0 && s.iat_cv == 0);
    ck_assert(s.prompt_p50 == 7 && s.output_p99 == 8);
    trace_free(&t);
    free(p);
}
END_TEST

/* Nearest-rank by definition: v is the p-th percentile iff at least
 * ceil(p*n/100) values are <= v and fewer than that are < v. */
static void check_nearest_rank(const trace *t, int output, int p, double v)
{
    int64_t le = 0, lt = 0, need = (int64_t)ceil(p * (double)t->n / 100.0 - 1e-9);
    for (int64_t i = 0; i < t->n; i++) {
        double x = (double)(output ? t->reqs[i].output_tokens : t->reqs[i].prompt_tokens);
        le += x <= v;
        lt += x < v;
    }
    ck_assert_msg(le >= need && lt < need, "p%d = %g: %lld <= and %lld < of %lld", p, v,
                  (long long)le, (long long)lt, (long long)need);
}

/* Against the figures of /work/shared/traces/README.md for the conv trace
 * (rounded there, hence the tolerances), percentiles checked by definition
 * and loosely against the README's linearly interpolated ones. */
START_TEST(test_stats_azure_conv)
{
    trace t;
    trace_stats s;
    kvs_err err;
    ck_assert_int_eq(trace_load(CONV, &t, &err), KVS_OK);
    ck_assert_int_eq(trace_stats_compute(&t, &s, &err), KVS_OK);
    ck_assert_int_eq(s.n, 19366);
    ck_assert_double_eq_tol(s.span_s, 3502, 0.5);
    ck_assert_double_eq_tol(s.rate_rps, 5.53, 0.005);
    ck_assert_double_eq_tol(s.iat_cv, 1.09, 0.005);
    ck_assert_double_eq_tol(s.iod_1s, 1.39, 0.005);
    ck_assert_double_eq_tol(s.iod_10s, 3.86, 0.005);
    ck_assert_double_eq_tol(s.iod_60s, 16.1, 0.05);
    ck_assert_double_eq_tol(s.prompt_mean, 1155, 0.5);
    ck_assert_double_eq_tol(s.output_mean, 211, 0.5);
    ck_assert(s.prompt_max == 14050 && s.output_max == 1000);
    const double pv[2][3] = {{s.prompt_p50, s.prompt_p90, s.prompt_p99},
                             {s.output_p50, s.output_p90, s.output_p99}};
    const double readme[2][3] = {{1020, 2735, 4142}, {129, 424, 601}};
    const int ps[3] = {50, 90, 99};
    for (int w = 0; w < 2; w++)
        for (int j = 0; j < 3; j++) {
            check_nearest_rank(&t, w, ps[j], pv[w][j]);
            ck_assert_double_eq_tol(pv[w][j], readme[w][j], 0.01 * readme[w][j]);
        }
    /* Rate scaling by 2 halves the span and doubles the rate. */
    trace_scale_rate(&t, 2.0);
    trace_stats s2;
    ck_assert_int_eq(trace_stats_compute(&t, &s2, &err), KVS_OK);
    ck_assert_double_eq_tol(s2.rate_rps, 2 * s.rate_rps, 1e-9);
    ck_assert_double_eq_tol(s2.iat_cv, s.iat_cv, 1e-9);
    trace_free(&t);
}
END_TEST

/* ------------------------------------------------------------- writing */

static void assert_same(const trace *a, const trace *b)
{
    ck_assert_int_eq(a->n, b->n);
    ck_assert_int_eq(a->has_priority, b->has_priority);
    for (int64_t i = 0; i < a->n; i++) {
        ck_assert_msg(a->reqs[i].arrival_s == b->reqs[i].arrival_s, "row %lld: %.17g vs %.17g",
                      (long long)i, a->reqs[i].arrival_s, b->reqs[i].arrival_s);
        ck_assert_int_eq(a->reqs[i].prompt_tokens, b->reqs[i].prompt_tokens);
        ck_assert_int_eq(a->reqs[i].output_tokens, b->reqs[i].output_tokens);
        ck_assert_int_eq(a->reqs[i].priority, b->reqs[i].priority);
    }
}

static void round_trip(const trace *a)
{
    const char *dir = tu_tmpdir();
    char path[600];
    kvs_err err;
    snprintf(path, sizeof path, "%s/rt.csv", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(trace_write_csv(a, f, &err), KVS_OK);
    fclose(f);
    trace b;
    ck_assert_int_eq(trace_load(path, &b, &err), KVS_OK);
    ck_assert_int_eq(b.format, TRACE_FORMAT_NATIVE);
    assert_same(a, &b);
    trace_free(&b);
}

START_TEST(test_write_round_trip)
{
    trace t;
    kvs_err err;
    char *p;
    ck_assert_int_eq(load_text(PH "0,5,5,2\n0.123456789,6,7,0\n3,8,9,10\n", &t, &err, &p),
                     KVS_OK);
    round_trip(&t);
    trace_free(&t);
    free(p);
    /* Exact format of the output. */
    ck_assert_int_eq(load_text(NH "0.5,1,2\n", &t, &err, &p), KVS_OK);
    char buf[256] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    ck_assert_int_eq(trace_write_csv(&t, f, &err), KVS_OK);
    fclose(f);
    ck_assert_str_eq(buf, NH "0.500000000,1,2\n");
    trace_free(&t);
    free(p);
    /* The whole Azure conv trace survives native CSV exactly. */
    ck_assert_int_eq(trace_load(CONV, &t, &err), KVS_OK);
    round_trip(&t);
    trace_free(&t);
}
END_TEST

/* ------------------------------------------------------------------ CLI */

static char *run(const char *fmt, const char *a, const char *b, int *rc)
{
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, fmt, tu_kvsim(), a ? a : "", b ? b : "");
    *rc = tu_run(cmd, &out);
    return out;
}

START_TEST(test_cli)
{
    int rc;
    char *o, path[600];
    const char *spec = "'arrival=poisson,rate=5,n=100,prompt=uniform:10:20,output=7'";
    snprintf(path, sizeof path, "%s/g.csv", tu_tmpdir());

    o = run("%s trace gen --synthetic %s --seed 3 --out %s", spec, path, &rc);
    ck_assert_msg(rc == 0, "%s", o);
    free(o);
    o = run("%s trace stats %s --json %s", path, "", &rc);
    ck_assert_msg(rc == 0, "%s", o);
    ck_assert_ptr_nonnull(strstr(o, "\"n\": 100,"));
    ck_assert_ptr_nonnull(strstr(o, "\"format\": \"native\""));
    ck_assert_ptr_nonnull(strstr(o, "\"prompt_max\": 20,"));
    ck_assert_ptr_nonnull(strstr(o, "\"output_mean\": 7,"));
    free(o);

    /* Same seed, same bytes; the file equals what stdout gets. */
    char *o1 = run("%s trace gen --synthetic %s --seed 3", spec, "", &rc);
    ck_assert_int_eq(rc, 0);
    char o2[8192] = {0};
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_lt(fread(o2, 1, sizeof o2 - 1, f), sizeof o2 - 1);
    fclose(f);
    ck_assert_str_eq(o1, o2);
    ck_assert(!strncmp(o1, "arrival_s,prompt_tokens,output_tokens\n", 38));
    free(o1);

    o = run("%s trace stats --synthetic %s --seed 3 --rate-scale 2 %s", spec, "", &rc);
    ck_assert_msg(rc == 0, "%s", o);
    ck_assert_ptr_nonnull(strstr(o, "requests    100"));
    ck_assert_ptr_nonnull(strstr(o, "rate scale  2"));
    free(o);

    o = run("%s trace stats %s%s", CONV, "", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(strstr(o, "requests    19366"));
    free(o);

    /* Errors: exit 2 with one line naming the flag or file:line. */
    o = run("%s trace stats %s --bogus%s", path, "", &rc);
    ck_assert_int_eq(rc, 2);
    ck_assert_str_eq(o, "kvsim trace stats: unknown flag '--bogus' (try kvsim trace stats --help)\n");
    free(o);
    o = run("%s trace gen --synthetic %s --seed%s", spec, "", &rc);
    ck_assert_int_eq(rc, 2);
    ck_assert_str_eq(o, "kvsim trace gen: --seed: missing value\n");
    free(o);
    o = run("%s trace gen --synthetic 'rate=-1,n=5,prompt=1,output=1'%s%s", "", "", &rc);
    ck_assert_int_eq(rc, 2);
    ck_assert_str_eq(o, "kvsim trace gen: --synthetic: rate: must be > 0\n");
    free(o);
    o = run("%s trace stats --rate-scale 0 %s%s", CONV, "", &rc);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(o, "--rate-scale"));
    free(o);
    char *bad = tu_write_file(tu_tmpdir(), "bad.csv", NH "0,1,1\n1,0,1\n");
    o = run("%s trace stats %s%s", bad, "", &rc);
    ck_assert_int_eq(rc, 2);
    char want[700];
    snprintf(want, sizeof want, "kvsim trace stats: %s:3: prompt_tokens: must be >= 1, got 0\n",
             bad);
    ck_assert_str_eq(o, want);
    free(o);
    free(bad);
    o = run("%s trace frob%s%s", "", "", &rc);
    ck_assert_int_eq(rc, 2);
    free(o);

    /* --help everywhere: exit 0, every flag listed. */
    o = run("%s trace --help%s%s", "", "", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(strstr(o, "gen") && strstr(o, "stats") ? o : NULL);
    free(o);
    o = run("%s trace gen --help%s%s", "", "", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(strstr(o, "--synthetic") && strstr(o, "--seed") && strstr(o, "--out"));
    free(o);
    o = run("%s trace stats --help%s%s", "", "", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(strstr(o, "--synthetic") && strstr(o, "--seed") && strstr(o, "--rate-scale") &&
              strstr(o, "--json"));
    free(o);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("traces");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sha256_vectors);
    tcase_add_test(tc, test_sha256_impls_agree);
    tcase_add_test(tc, test_csv_fast_path_matches_libcsv);
    tcase_add_test(tc, test_parse_f64_matches_strtod);
    tcase_add_test(tc, test_sha256_million_a_chunked);
    tcase_add_test(tc, test_sha256_file);
    tcase_add_test(tc, test_native_golden);
    tcase_add_test(tc, test_native_priority_crlf_quoted);
    tcase_add_test(tc, test_native_hash_ids);
    tcase_add_test(tc, test_azure_midnight);
    tcase_add_test(tc, test_azure_leap_and_months);
    tcase_add_test(tc, test_header_only_and_empty);
    tcase_add_test(tc, test_missing_file);
    tcase_add_loop_test(tc, test_bad_inputs, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(tc, test_azure_shipped);
    tcase_add_test(tc, test_scale_rate);
    tcase_add_test(tc, test_stats_golden);
    tcase_add_test(tc, test_stats_azure_conv);
    tcase_add_test(tc, test_write_round_trip);
    tcase_add_test(tc, test_cli);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    Suite *s = suite();
    return tu_run_suites(&s, 1);
}
