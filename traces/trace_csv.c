/* trace_csv.c — loading native and Azure LLM 2023 CSV traces, plus the
 * small whole-trace operations (free, rate scaling). */
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "trace_internal.h"

#define NATIVE_HEADER "arrival_s,prompt_tokens,output_tokens[,priority][,hash_ids]"
#define CSV_SEGMENT 512 /* tokens per hash_ids entry, as Mooncake */
#define AZURE_HEADER "TIMESTAMP,ContextTokens,GeneratedTokens"

typedef struct loader {
    const char *path;
    trace *t;
    int64_t cap;        /* slots allocated in t->reqs */
    int ncols;          /* fields per row, from the header; 0 before it */
    int prio_col;       /* native: column of priority, -1 none */
    int hash_col;       /* native: column of hash_ids, -1 none */
    int64_t hcap;       /* slots in t->hash_ids / t->hash_tokens */
    int64_t ocap;       /* slots in t->hash_off */
    int64_t t0_s;       /* Azure: first timestamp, whole seconds since 1970 */
    int64_t t0_ns;      /* Azure: its fraction, ns in [0, 1e9) */
    int64_t prev_s, prev_ns; /* Azure: previous timestamp */
} loader;

/* Days since 1970-01-01 of a proleptic Gregorian date: count days in whole
 * 400-year eras since 0000-03-01 (146097 days each), then in the year of
 * the era with years starting in March so that the leap day is last. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                          /* [0, 399] */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;  /* [0, 146096] */
    return era * 146097 + doe - 719468;                   /* 719468: 0000-03-01 to 1970 */
}

static int is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

/* n decimal digits at s into *v; 0 on success. */
static int digits(const char *s, int n, int64_t *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        *v = *v * 10 + (s[i] - '0');
    }
    return 0;
}

int trace_parse_timestamp(const char *s, int64_t *sec, int64_t *ns, const char **why)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int64_t y, mo, d, h, mi, se;
    *why = "is not a timestamp YYYY-MM-DD HH:MM:SS[.fffffff]";
    if (strlen(s) < 19 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) ||
        s[7] != '-' || digits(s + 8, 2, &d) || s[10] != ' ' || digits(s + 11, 2, &h) ||
        s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &se))
        return -1;
    int64_t frac = 0;
    const char *p = s + 19;
    if (*p == '.') {
        int nd = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, nd++) {
            if (nd == 9) {
                *why = "has more than 9 fractional digits";
                return -1;
            }
            frac = frac * 10 + (*p - '0');
        }
        if (nd == 0)
            return -1;
        for (; nd < 9; nd++)
            frac *= 10;
    }
    if (*p)
        return -1;
    *why = "is not a valid date and time";
    if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59)
        return -1;
    if (d > mdays[mo - 1] + (mo == 2 && is_leap(y)))
        return -1;
    *sec = days_from_civil(y, (int)mo, (int)d) * 86400 + h * 3600 + mi * 60 + se;
    *ns = frac;
    return 0;
}

static int push(loader *L, trace_req r, kvs_err *err)
{
    trace *t = L->t;
    if (t->n == L->cap) {
        int64_t nc = L->cap ? 2 * L->cap : 1024;
        if ((uint64_t)nc > SIZE_MAX / sizeof(trace_req))
            return kvs_errf(err, KVS_ENOMEM, "%s: too many requests", L->path);
        trace_req *p = realloc(t->reqs, (size_t)nc * sizeof *p);
        if (!p)
            return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", L->path);
        t->reqs = p;
        L->cap = nc;
    }
    t->reqs[t->n++] = r;
    return KVS_OK;
}

static int header(loader *L, int64_t line, char **f, int nf, kvs_err *err)
{
    /* A UTF-8 byte-order mark before the first name is not part of it. */
    if (!strncmp(f[0], "\xEF\xBB\xBF", 3))
        f[0] += 3;
    L->prio_col = L->hash_col = -1;
    if (nf >= 3 && nf <= 5 && !strcmp(f[0], "arrival_s") && !strcmp(f[1], "prompt_tokens") &&
        !strcmp(f[2], "output_tokens") &&
        (nf == 3 || (nf == 4 && (!strcmp(f[3], "priority") || !strcmp(f[3], "hash_ids"))) ||
         (nf == 5 && !strcmp(f[3], "priority") && !strcmp(f[4], "hash_ids")))) {
        L->t->format = TRACE_FORMAT_NATIVE;
        if (nf >= 4 && !strcmp(f[3], "priority"))
            L->prio_col = 3;
        if (!strcmp(f[nf - 1], "hash_ids"))
            L->hash_col = nf - 1;
        L->t->has_priority = L->prio_col >= 0;
        if (L->hash_col >= 0) {
            L->t->hash_off = calloc(1, sizeof *L->t->hash_off);
            if (!L->t->hash_off)
                return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", L->path);
            L->ocap = 1;
            L->t->hash_block = CSV_SEGMENT;
        }
    } else if (nf == 3 && !strcmp(f[0], "TIMESTAMP") && !strcmp(f[1], "ContextTokens") &&
               !strcmp(f[2], "GeneratedTokens")) {
        L->t->format = TRACE_FORMAT_AZURE;
    } else if (nf == 1 && strchr(f[0], '\t')) {
        return kvs_errf(err, KVS_EINVAL,
                        "%s:%lld: the header is tab-separated; kvsim reads comma-separated "
                        "traces: replace the tabs with commas (e.g. tr '\\t' ',' < FILE), "
                        "header '" NATIVE_HEADER "' or Azure '" AZURE_HEADER "'",
                        L->path, (long long)line);
    } else {
        return kvs_errf(err, KVS_EINVAL,
                        "%s:%lld: unknown header '%s%s%s%s'; accepted: native "
                        "'" NATIVE_HEADER "' or Azure '" AZURE_HEADER "'",
                        L->path, (long long)line, f[0], nf > 1 ? "," : "", nf > 1 ? f[1] : "",
                        nf > 2 ? ",..." : "");
    }
    L->ncols = nf;
    return KVS_OK;
}

/* A token count: a whole number >= 1. */
static int tokens(loader *L, int64_t line, const char *col, const char *s, int64_t *v,
                  kvs_err *err)
{
    const char *why;
    if (trace_parse_i64(s, v, &why))
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: '%s' %s", L->path, (long long)line,
                        col, s, why);
    if (*v <= 0)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: must be >= 1, got %lld", L->path,
                        (long long)line, col, (long long)*v);
    if (*v > TRACE_MAX_TOKENS)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: %lld is above the limit of %lld "
                        "tokens per request", L->path, (long long)line, col, (long long)*v,
                        (long long)TRACE_MAX_TOKENS);
    return KVS_OK;
}

/* The hash_ids field of request t->n (prompt P): ids separated by spaces,
 * empty for none, at most ceil(P / 512); segment k covers min(512, P - 512k)
 * tokens.  Appends to the CSR arrays; the caller pushes the request. */
static int hash_ids(loader *L, int64_t line, const char *s, int64_t P, kvs_err *err)
{
    trace *t = L->t;
    if (t->n + 2 > L->ocap) {
        int64_t nc = L->ocap > 0 ? 2 * L->ocap : 1024;
        int64_t *o = realloc(t->hash_off, (size_t)nc * sizeof *o);
        if (!o)
            return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", L->path);
        t->hash_off = o;
        L->ocap = nc;
    }
    const int64_t base = t->hash_off[t->n], most = (P + CSV_SEGMENT - 1) / CSV_SEGMENT;
    int64_t k = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        const char *q = p;
        while (*q && *q != ' ')
            q++;
        char buf[32];
        size_t len = (size_t)(q - p);
        const char *why = "is not an integer";
        int64_t id = -1;
        if (len < sizeof buf) {
            memcpy(buf, p, len);
            buf[len] = 0;
            if (trace_parse_i64(buf, &id, &why) == 0 && id < 0)
                why = "must be >= 0";
        }
        if (id < 0)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: hash_ids: id %lld '%.*s' %s", L->path,
                            (long long)line, (long long)k + 1, (int)(len < 40 ? len : 40), p,
                            why);
        if (k == most)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: hash_ids: more than ceil(%lld / %d) = "
                            "%lld ids for prompt_tokens %lld (one per %d-token segment)",
                            L->path, (long long)line, (long long)P, CSV_SEGMENT,
                            (long long)most, (long long)P, CSV_SEGMENT);
        if (base + k == L->hcap) {
            int64_t nc = L->hcap ? 2 * L->hcap : 1024;
            uint64_t *ids = realloc(t->hash_ids, (size_t)nc * sizeof *ids);
            if (ids)
                t->hash_ids = ids;
            int32_t *tok = ids ? realloc(t->hash_tokens, (size_t)nc * sizeof *tok) : NULL;
            if (!tok)
                return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", L->path);
            t->hash_tokens = tok;
            L->hcap = nc;
        }
        int64_t left = P - CSV_SEGMENT * k;
        t->hash_ids[base + k] = (uint64_t)id;
        t->hash_tokens[base + k] = (int32_t)(left < CSV_SEGMENT ? left : CSV_SEGMENT);
        k++;
        p = q;
    }
    t->hash_off[t->n + 1] = base + k;
    return KVS_OK;
}

static int on_row(void *ctx, int64_t line, char **f, int nf, kvs_err *err)
{
    loader *L = ctx;
    trace *t = L->t;
    trace_req r = {0};
    const char *why;
    int st;
    if (L->ncols == 0)
        return header(L, line, f, nf, err);
    if (nf != L->ncols)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: expected %d fields, got %d", L->path,
                        (long long)line, L->ncols, nf);
    const char *pcol = t->format == TRACE_FORMAT_AZURE ? "ContextTokens" : "prompt_tokens";
    const char *ocol = t->format == TRACE_FORMAT_AZURE ? "GeneratedTokens" : "output_tokens";
    int64_t p, o; /* in [1, TRACE_MAX_TOKENS] once read */
    if ((st = tokens(L, line, pcol, f[1], &p, err)) || (st = tokens(L, line, ocol, f[2], &o, err)))
        return st;
    r.prompt_tokens = (int32_t)p;
    r.output_tokens = (int32_t)o;
    if (t->format == TRACE_FORMAT_AZURE) {
        int64_t s, ns;
        if (trace_parse_timestamp(f[0], &s, &ns, &why))
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: TIMESTAMP: '%s' %s", L->path,
                            (long long)line, f[0], why);
        if (t->n == 0) {
            L->t0_s = L->prev_s = s;
            L->t0_ns = L->prev_ns = ns;
        } else if (s < L->prev_s || (s == L->prev_s && ns < L->prev_ns)) {
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: TIMESTAMP: '%s' is earlier than the "
                            "previous row's", L->path, (long long)line, f[0]);
        }
        if (s - L->t0_s > (int64_t)TRACE_MAX_ARRIVAL_S - 1)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: TIMESTAMP: '%s' is more than %.0f s "
                            "after the first (the limit)", L->path, (long long)line, f[0],
                            TRACE_MAX_ARRIVAL_S);
        L->prev_s = s;
        L->prev_ns = ns;
        /* Exact integer nanoseconds, then one correctly rounded division:
         * the nearest double to the true offset (for spans < 104 days). */
        int64_t dns = (s - L->t0_s) * 1000000000 + (ns - L->t0_ns);
        r.arrival_s = (double)dns / 1e9;
    } else {
        if (trace_parse_f64(f[0], &r.arrival_s, &why))
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: arrival_s: '%s' %s", L->path,
                            (long long)line, f[0], why);
        if (r.arrival_s < 0)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: arrival_s: must be >= 0, got %s",
                            L->path, (long long)line, f[0]);
        if (r.arrival_s > TRACE_MAX_ARRIVAL_S)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: arrival_s: %s is above the limit of "
                            "%.0f s", L->path, (long long)line, f[0], TRACE_MAX_ARRIVAL_S);
        if (t->n > 0 && r.arrival_s < t->reqs[t->n - 1].arrival_s)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: arrival_s: %s is earlier than the "
                            "previous row's %.9f", L->path, (long long)line, f[0],
                            t->reqs[t->n - 1].arrival_s);
        if (L->prio_col >= 0) {
            int64_t p;
            if (trace_parse_i64(f[3], &p, &why))
                return kvs_errf(err, KVS_EINVAL, "%s:%lld: priority: '%s' %s", L->path,
                                (long long)line, f[3], why);
            if (p < 0 || p > INT32_MAX)
                return kvs_errf(err, KVS_EINVAL, "%s:%lld: priority: must be in [0, %d], "
                                "got %lld", L->path, (long long)line, INT32_MAX, (long long)p);
            r.priority = (int32_t)p;
        }
        if (L->hash_col >= 0 && (st = hash_ids(L, line, f[L->hash_col], r.prompt_tokens, err)))
            return st;
    }
    return push(L, r, err);
}

int trace_load(const char *path, trace *out, kvs_err *err)
{
    if (trace_is_jsonl(path))
        return trace_load_jsonl(path, out, err);
    memset(out, 0, sizeof *out);
    loader L = {.path = path, .t = out};
    int st;
    if (strlen(path) >= sizeof out->source) {
        st = kvs_errf(err, KVS_EINVAL, "%s: path longer than %zu bytes", path,
                      sizeof out->source - 1);
        goto fail;
    }
    st = trace_csv_read(path, on_row, &L, out->sha256, err);
    if (st != KVS_OK)
        goto fail;
    if (L.ncols == 0) {
        st = kvs_errf(err, KVS_EINVAL, "%s:1: empty file: expected a header line, native '"
                      NATIVE_HEADER "' or Azure '" AZURE_HEADER "'", path);
        goto fail;
    }
    snprintf(out->source, sizeof out->source, "%s", path);
    return KVS_OK;
fail:
    trace_free(out);
    memset(out, 0, sizeof *out);
    return st;
}

void trace_free(trace *t)
{
    if (!t)
        return;
    free(t->reqs);
    free(t->hash_off);
    free(t->hash_ids);
    free(t->hash_tokens);
    t->reqs = NULL;
    t->hash_off = NULL;
    t->hash_ids = NULL;
    t->hash_tokens = NULL;
    t->n = 0;
}

void trace_scale_rate(trace *t, double k)
{
    for (int64_t i = 0; i < t->n; i++)
        t->reqs[i].arrival_s /= k;
}
