/* import.c — `kvsim trace import`: the table of dataset importers, their
 * options, the CSV ones (BurstGPT, Azure LLM inference 2024), what the
 * importers share, and writing the result atomically. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/rng.h"
#include "trace.h"
#include "trace_internal.h"

/* ------------------------------------------------------------ options */

void trace_import_opts_init(trace_import_opts *o)
{
    *o = (trace_import_opts){.chars_per_token = 4.0, .turns = 0, .rate = 0.0, .seed = 0,
                             .output_len = 256};
}

int trace_import_opt_set(trace_import_opts *o, const char *name, const char *value,
                         kvs_err *err)
{
    const char *why = NULL;
    double d = 0;
    int64_t i = 0;
    if (!strcmp(name, "turns")) {
        o->turns = 1;
        return KVS_OK;
    }
    if (!value)
        return kvs_errf(err, KVS_EINVAL, "--%s: missing value", name);
    if (!strcmp(name, "chars-per-token") || !strcmp(name, "rate")) {
        if (trace_parse_f64(value, &d, &why))
            return kvs_errf(err, KVS_EINVAL, "--%s: '%s' %s", name, value, why);
        int cpt = name[0] == 'c';
        if (cpt ? !(d > 0 && d <= 1e6) : !(d >= 0 && d <= 1e9))
            return kvs_errf(err, KVS_EINVAL, "--%s: %s is out of range (%s)", name, value,
                            cpt ? "> 0" : ">= 0; 0 = all at time 0");
        *(cpt ? &o->chars_per_token : &o->rate) = d;
        return KVS_OK;
    }
    if (!strcmp(name, "seed") || !strcmp(name, "output-len")) {
        if (trace_parse_i64(value, &i, &why))
            return kvs_errf(err, KVS_EINVAL, "--%s: '%s' %s", name, value, why);
        if (name[0] == 's' ? i < 0 : (i < 1 || i > TRACE_MAX_TOKENS))
            return kvs_errf(err, KVS_EINVAL, "--%s: %s is out of range", name, value);
        if (name[0] == 's')
            o->seed = (uint64_t)i;
        else
            o->output_len = i;
        return KVS_OK;
    }
    return kvs_errf(err, KVS_EINVAL, "--%s: not an import option (chars-per-token, turns, "
                                     "rate, seed, output-len)", name);
}

/* ------------------------------------------------------------ shared */

int trace_import_push(trace *t, int64_t *cap, trace_req r, const char *path, kvs_err *err)
{
    if (t->n == *cap) {
        int64_t nc = *cap ? 2 * *cap : 1024;
        trace_req *p = realloc(t->reqs, (size_t)nc * sizeof *p);
        if (!p)
            return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
        t->reqs = p;
        *cap = nc;
    }
    t->reqs[t->n++] = r;
    return KVS_OK;
}

int64_t trace_text_tokens(const char *text, double chars_per_token)
{
    int64_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        chars += (*p & 0xC0) != 0x80; /* count lead bytes, not continuations */
    int64_t tok = (int64_t)ceil((double)chars / chars_per_token);
    return tok < 1 ? 1 : tok > TRACE_MAX_TOKENS ? TRACE_MAX_TOKENS : tok;
}

void trace_import_arrivals(trace *t, const trace_import_opts *o)
{
    rng r;
    rng_init(&r, o->seed);
    double now = 0;
    for (int64_t i = 0; i < t->n; i++) {
        if (o->rate > 0)
            now += rng_exponential(&r, 1.0 / o->rate);
        t->reqs[i].arrival_s = now;
    }
}

/* ------------------------------------------------------------ CSV readers */

typedef struct csv_import {
    const char *path;
    const char *format;      /* for messages */
    trace *t;
    int64_t cap;
    trace_import_info *info;
    int cols[3];             /* columns of time, prompt, output */
    int ncols;               /* fields per row */
    int azure;               /* 1: timestamps, 0: seconds */
    int64_t t0_s, t0_ns;     /* azure: first timestamp */
    double first, prev;      /* first and previous arrival, seconds */
} csv_import;

/* Column index of `name` in the header, or -1. */
static int column(char **f, int nf, const char *name)
{
    for (int i = 0; i < nf; i++)
        if (!strcmp(f[i], name))
            return i;
    return -1;
}

static int csv_header(csv_import *c, int64_t line, char **f, int nf, kvs_err *err)
{
    static const char *const burst[] = {"Timestamp", "Request tokens", "Response tokens"};
    static const char *const azure[] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
    const char *const *want = c->azure ? azure : burst;
    for (int k = 0; k < 3; k++)
        if ((c->cols[k] = column(f, nf, want[k])) < 0)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: not a %s header: no column '%s'",
                            c->path, (long long)line, c->format, want[k]);
    c->ncols = nf;
    return KVS_OK;
}

/* Azure 2024's "YYYY-MM-DD HH:MM:SS.ffffff[+HH:MM|Z]" in seconds since the
 * first row's time. */
static int azure_time(csv_import *c, const char *s, double *out, const char **why)
{
    char buf[64];
    size_t n = strlen(s);
    int off_min = 0;
    if (n >= sizeof buf) {
        *why = "is not a timestamp";
        return -1;
    }
    memcpy(buf, s, n + 1);
    if (n > 6 && (buf[n - 6] == '+' || buf[n - 6] == '-') && buf[n - 3] == ':') {
        int hh = (buf[n - 5] - '0') * 10 + (buf[n - 4] - '0');
        int mm = (buf[n - 2] - '0') * 10 + (buf[n - 1] - '0');
        off_min = (buf[n - 6] == '-' ? -1 : 1) * (hh * 60 + mm);
        buf[n - 6] = 0;
    } else if (n > 1 && buf[n - 1] == 'Z') {
        buf[n - 1] = 0;
    }
    int64_t sec, ns;
    if (trace_parse_timestamp(buf, &sec, &ns, why))
        return -1;
    sec -= (int64_t)off_min * 60; /* to UTC */
    if (c->info->records == 1) { /* the first row: time 0 */
        c->t0_s = sec;
        c->t0_ns = ns;
    }
    *out = (double)(sec - c->t0_s) + (double)(ns - c->t0_ns) * 1e-9;
    return 0;
}

static int csv_count(csv_import *c, int64_t line, const char *col, const char *s, int64_t *v,
                     kvs_err *err)
{
    const char *why = NULL;
    if (trace_parse_i64(s, v, &why) == 0 && (*v < 0 || *v > TRACE_MAX_TOKENS))
        why = *v < 0 ? "is negative" : "is too large";
    if (why)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: '%s' %s", c->path, (long long)line, col,
                        s, why);
    return KVS_OK;
}

static int csv_row(void *ctx, int64_t line, char **f, int nf, kvs_err *err)
{
    csv_import *c = ctx;
    if (!c->ncols)
        return csv_header(c, line, f, nf, err);
    if (nf != c->ncols)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %d fields, the header has %d", c->path,
                        (long long)line, nf, c->ncols);
    c->info->records++;
    const char *why = NULL;
    double at = 0;
    const char *tcol = c->azure ? "TIMESTAMP" : "Timestamp";
    if (c->azure ? azure_time(c, f[c->cols[0]], &at, &why)
                 : trace_parse_f64(f[c->cols[0]], &at, &why))
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: '%s' %s", c->path, (long long)line, tcol,
                        f[c->cols[0]], why);
    if (!c->azure && c->info->records == 1)
        c->first = at;
    if (!c->azure)
        at -= c->first;
    if (at < 0 || at < c->prev || at > TRACE_MAX_ARRIVAL_S)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: '%s' %s", c->path, (long long)line, tcol,
                        f[c->cols[0]], at < 0 || at < c->prev ? "is before the previous row's"
                                                              : "is too late");
    c->prev = at;
    int64_t p, o;
    int rc;
    if ((rc = csv_count(c, line, c->azure ? "ContextTokens" : "Request tokens", f[c->cols[1]],
                        &p, err)) ||
        (rc = csv_count(c, line, c->azure ? "GeneratedTokens" : "Response tokens",
                        f[c->cols[2]], &o, err)))
        return rc;
    if (p == 0 || o == 0) {
        c->info->skipped++;
        return KVS_OK;
    }
    /* p, o in [1, TRACE_MAX_TOKENS] (csv_count) */
    return trace_import_push(c->t, &c->cap, (trace_req){at, (int32_t)p, (int32_t)o, 0}, c->path,
                             err);
}

static int import_csv(const char *path, int azure, trace *out, trace_import_info *info,
                      kvs_err *err)
{
    csv_import c = {.path = path, .format = azure ? "Azure LLM 2024" : "BurstGPT", .t = out,
                    .info = info, .azure = azure};
    snprintf(info->skipped_why, sizeof info->skipped_why, "rows with 0 %s tokens",
             azure ? "context or generated" : "request or response");
    int rc = trace_csv_read(path, csv_row, &c, NULL, err);
    if (rc == 0 && !c.ncols)
        rc = kvs_errf(err, KVS_EINVAL, "%s: empty file (no header)", path);
    return rc;
}

static int read_burstgpt(const char *path, const trace_import_opts *o, trace *out,
                         trace_import_info *info, kvs_err *err)
{
    (void)o;
    return import_csv(path, 0, out, info, err);
}

static int read_azure2024(const char *path, const trace_import_opts *o, trace *out,
                          trace_import_info *info, kvs_err *err)
{
    (void)o;
    return import_csv(path, 1, out, info, err);
}

/* ------------------------------------------------------------ table */

static const trace_importer importers[] = {
    {"sharegpt", "ShareGPT JSON conversations (first turn, or every turn with --turns)",
     trace_import_sharegpt},
    {"burstgpt", "BurstGPT CSV (Timestamp, Request tokens, Response tokens)", read_burstgpt},
    {"azure2024", "Azure LLM inference 2024 CSV (TIMESTAMP, ContextTokens, GeneratedTokens)",
     read_azure2024},
    {"vllm-custom", "vllm bench serve custom JSONL ({\"prompt\": ...} per line)",
     trace_import_vllm_custom},
};

#define N_IMPORTERS (sizeof importers / sizeof importers[0])

size_t trace_importer_count(void) { return N_IMPORTERS; }
const trace_importer *trace_importer_at(size_t i) { return i < N_IMPORTERS ? &importers[i] : NULL; }

const trace_importer *trace_importer_find(const char *name)
{
    for (size_t i = 0; i < N_IMPORTERS; i++)
        if (!strcmp(importers[i].name, name))
            return &importers[i];
    return NULL;
}

/* ------------------------------------------------------------ writing */

int trace_write_csv_path(const trace *t, const char *path, kvs_err *err)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp)
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int rc = kvs_errf(err, KVS_EIO, "%s: cannot create a temporary file beside it: %s",
                          path, strerror(errno));
        free(tmp);
        return rc;
    }
    FILE *f = fdopen(fd, "w");
    kvs_err e;
    int rc = f ? trace_write_csv(t, f, &e) : KVS_EIO;
    if (!f)
        snprintf(e.msg, sizeof e.msg, "%s", strerror(errno));
    if (rc == 0 && fsync(fd) != 0) {
        rc = KVS_EIO;
        snprintf(e.msg, sizeof e.msg, "fsync: %s", strerror(errno));
    }
    if (f ? fclose(f) != 0 && rc == 0 : close(fd) != 0 && rc == 0) {
        rc = KVS_EIO;
        snprintf(e.msg, sizeof e.msg, "close: %s", strerror(errno));
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = KVS_EIO;
        snprintf(e.msg, sizeof e.msg, "rename: %s", strerror(errno));
    }
    if (rc) {
        unlink(tmp);
        kvs_errf(err, rc, "%s: %s", path, e.msg);
    }
    free(tmp);
    return rc;
}

int trace_import(const char *format, const char *in, const char *out_path,
                 const trace_import_opts *o, trace_import_info *info, kvs_err *err)
{
    const trace_importer *imp = trace_importer_find(format);
    if (!imp) {
        char names[256] = "";
        for (size_t i = 0; i < N_IMPORTERS; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     importers[i].name);
        return kvs_errf(err, KVS_EINVAL, "unknown format '%s' (known: %s)", format, names);
    }
    trace_import_info tmp;
    if (!info)
        info = &tmp;
    memset(info, 0, sizeof *info);
    trace t;
    memset(&t, 0, sizeof t);
    int rc = imp->read(in, o, &t, info, err);
    if (rc == 0 && t.n == 0)
        rc = kvs_errf(err, KVS_EINVAL, "%s: no request to write (%lld records, %lld skipped)",
                      in, (long long)info->records, (long long)info->skipped);
    if (rc == 0) {
        info->requests = t.n;
        rc = trace_write_csv_path(&t, out_path, err);
    }
    trace_free(&t);
    return rc;
}
