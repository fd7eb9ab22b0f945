/* csv_read.c — the CSV record reader shared by trace and lengths files
 * (libcsv underneath) and the strict number parsers for their fields. */
#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

typedef struct reader {
    const char *path;
    trace_csv_row_fn fn;
    void *ctx;
    kvs_err *err;
    int status;        /* first error, KVS_OK while reading */
    int64_t line;      /* physical line the current record starts on */
    int64_t extra_nl;  /* newlines inside quoted fields of the current record */
    int prev_term;     /* terminator of the previous record (-2 at start) */
    int64_t blank_at;  /* line of the first blank line not yet followed by a record, 0 none
                          (blank lines at the end of the file are accepted) */
    char *buf;         /* [cap] bytes: the current record's fields, NUL-separated */
    size_t len, cap;   /* bytes used / allocated in buf */
    size_t *off;       /* [offcap] start offset of each field in buf */
    int nf, offcap;    /* fields in the current record / slots in off */
    char **ptrs;       /* [ptrcap] field pointers handed to fn */
    int ptrcap;
} reader;

static void on_field(void *s, size_t n, void *data)
{
    reader *r = data;
    if (r->status != KVS_OK)
        return;
    const char *p = s ? s : "";
    if (memchr(p, '\0', n)) {
        r->status = kvs_errf(r->err, KVS_EINVAL, "%s:%lld: NUL byte in field", r->path,
                             (long long)r->line);
        return;
    }
    for (size_t i = 0; i < n; i++)
        r->extra_nl += p[i] == '\n';
    if (r->nf == r->offcap) {
        int nc = r->offcap ? 2 * r->offcap : 16;
        size_t *o = realloc(r->off, (size_t)nc * sizeof *o);
        if (!o) {
            r->status = kvs_errf(r->err, KVS_ENOMEM, "%s: out of memory", r->path);
            return;
        }
        r->off = o;
        r->offcap = nc;
    }
    if (r->cap - r->len < n + 1) {
        size_t nc = r->cap ? r->cap : 256;
        while (nc - r->len < n + 1)
            nc *= 2;
        char *b = realloc(r->buf, nc);
        if (!b) {
            r->status = kvs_errf(r->err, KVS_ENOMEM, "%s: out of memory", r->path);
            return;
        }
        r->buf = b;
        r->cap = nc;
    }
    r->off[r->nf++] = r->len;
    memcpy(r->buf + r->len, p, n);
    r->buf[r->len + n] = '\0';
    r->len += n + 1;
}

/* A record ends at an unquoted CR or LF (c), or at end of input (c = -1).
 * With CSV_REPALL_NL libcsv also reports the LF of a CRLF as an empty
 * record; that one is skipped, every other empty record is a blank line:
 * an error when a record follows it, accepted at the end of the file. */
static void on_record(int c, void *data)
{
    reader *r = data;
    if (r->status != KVS_OK)
        return;
    int crlf_tail = c == '\n' && r->prev_term == '\r' && r->nf == 0;
    r->prev_term = c;
    if (crlf_tail)
        return;
    if (r->nf == 0) {
        if (!r->blank_at)
            r->blank_at = r->line;
        r->line++;
        return;
    }
    if (r->blank_at) {
        r->status = kvs_errf(r->err, KVS_EINVAL, "%s:%lld: blank line", r->path,
                             (long long)r->blank_at);
        return;
    }
    if (r->nf > r->ptrcap) {
        char **p = realloc(r->ptrs, (size_t)r->offcap * sizeof *p);
        if (!p) {
            r->status = kvs_errf(r->err, KVS_ENOMEM, "%s: out of memory", r->path);
            return;
        }
        r->ptrs = p;
        r->ptrcap = r->offcap;
    }
    for (int i = 0; i < r->nf; i++)
        r->ptrs[i] = r->buf + r->off[i];
    r->status = r->fn(r->ctx, r->line, r->ptrs, r->nf, r->err);
    r->line += 1 + r->extra_nl;
    r->extra_nl = 0;
    r->nf = 0;
    r->len = 0;
}

int trace_csv_read(const char *path, trace_csv_row_fn fn, void *ctx,
                   char sha_hex[65], kvs_err *err)
{
    reader r = {.path = path, .fn = fn, .ctx = ctx, .err = err, .line = 1, .prev_term = -2};
    struct csv_parser p;
    trace_sha256 sha;
    int have_parser = 0;
    unsigned char *chunk = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        r.status = kvs_errf(err, KVS_EIO, "%s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    chunk = malloc(65536);
    if (!chunk || csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_REPALL_NL) != 0) {
        r.status = kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    have_parser = 1;
    trace_sha256_init(&sha);
    size_t k;
    while (r.status == KVS_OK && (k = fread(chunk, 1, 65536, f)) > 0) {
        trace_sha256_update(&sha, chunk, k);
        if (csv_parse(&p, chunk, k, on_field, on_record, &r) != k && r.status == KVS_OK) {
            int e = csv_error(&p);
            r.status = kvs_errf(err, e == CSV_EPARSE ? KVS_EINVAL : KVS_ENOMEM,
                                "%s:%lld: malformed CSV (%s)", path,
                                (long long)(r.line + r.extra_nl), csv_strerror(e));
        }
    }
    if (r.status != KVS_OK)
        goto done;
    if (ferror(f)) {
        r.status = kvs_errf(err, KVS_EIO, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    if (csv_fini(&p, on_field, on_record, &r) != 0 && r.status == KVS_OK)
        r.status = kvs_errf(err, KVS_EINVAL, "%s:%lld: malformed CSV (unterminated quoted field)",
                            path, (long long)r.line);
    if (r.status == KVS_OK && sha_hex)
        trace_sha256_hex(&sha, sha_hex);
done:
    if (have_parser)
        csv_free(&p);
    if (f)
        fclose(f);
    free(chunk);
    free(r.buf);
    free(r.off);
    free(r.ptrs);
    return r.status;
}

int trace_parse_i64(const char *s, int64_t *out, const char **why)
{
    const char *p = s;
    int neg = 0;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (*p < '0' || *p > '9') {
        *why = "is not an integer";
        return -1;
    }
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    int overflow = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (lim - d) / 10)
            overflow = 1;
        else
            v = v * 10 + d;
    }
    if (*p) {
        *why = "is not an integer";
        return -1;
    }
    if (overflow) {
        *why = "is out of range";
        return -1;
    }
    *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return 0;
}

int trace_parse_f64(const char *s, double *out, const char **why)
{
    /* strtod alone would accept "0x1p3", "inf", "nan" and leading spaces. */
    int digits = 0;
    for (const char *p = s; *p; p++) {
        if (*p >= '0' && *p <= '9')
            digits = 1;
        else if (!strchr("+-.eE", *p)) {
            *why = "is not a number";
            return -1;
        }
    }
    if (!digits) {
        *why = "is not a number";
        return -1;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s) {
        *why = "is not a number";
        return -1;
    }
    if (errno == ERANGE && fabs(v) > 1.0) {
        *why = "is out of range";
        return -1;
    }
    if (!isfinite(v)) {
        *why = "is out of range";
        return -1;
    }
    *out = v;
    return 0;
}
