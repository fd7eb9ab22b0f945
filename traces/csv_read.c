/* csv_read.c — the CSV record reader shared by trace and lengths files
 * and the strict number parsers for their fields.  Files without a quote
 * or NUL byte (every native and Azure trace kvsim writes) are split in
 * place by a tight loop; from the first quote or NUL on, libcsv reads the
 * rest.  Both give the same records, lines and errors. */
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

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Split one unquoted record [a, e) in place into NUL-terminated fields,
 * trimmed of spaces and tabs as libcsv trims them, and hand it to fn.  A
 * record of nothing but spaces and tabs is a blank line, as for libcsv:
 * an error when a record follows it, accepted at the end of the file. */
static void fast_record(reader *r, char *a, char *e)
{
    char *q = a;
    while (q < e && is_blank(*q))
        q++;
    if (q == e) { /* as on_record: an error only if a record follows */
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
    int nf = 0;
    for (char *f = a;;) {
        char *c = memchr(f, ',', (size_t)(e - f));
        char *end = c ? c : e;
        while (f < end && is_blank(*f))
            f++;
        char *t = end;
        while (t > f && is_blank(t[-1]))
            t--;
        *t = '\0'; /* over the comma, a trailing blank or the terminator */
        if (nf == r->ptrcap) {
            int nc = r->ptrcap ? 2 * r->ptrcap : 16;
            char **p = realloc(r->ptrs, (size_t)nc * sizeof *p);
            if (!p) {
                r->status = kvs_errf(r->err, KVS_ENOMEM, "%s: out of memory", r->path);
                return;
            }
            r->ptrs = p;
            r->ptrcap = nc;
        }
        r->ptrs[nf++] = f;
        if (!c)
            break;
        f = c + 1;
    }
    r->status = r->fn(r->ctx, r->line, r->ptrs, nf, r->err);
    r->line++;
}

/* Hand every complete record of s[0, n) to fast_record; a record ends at
 * LF, CR or CRLF, and at the end of the file (eof).  A CR last in s waits
 * for the next byte (it may start a CRLF).  Returns the bytes consumed. */
static size_t fast_records(reader *r, char *s, size_t n, int eof)
{
    size_t i = 0;
    while (i < n && r->status == KVS_OK) {
        char *a = s + i;
        char *nl = memchr(a, '\n', n - i);
        char *cr = memchr(a, '\r', (size_t)((nl ? nl : s + n) - a));
        char *e = cr ? cr : nl;
        if (!e) {
            if (!eof)
                break;
            e = s + n; /* last record, no final newline */
        } else if (e == cr && e + 1 == s + n && !eof) {
            break;
        }
        size_t next = (size_t)(e - s) + (e < s + n ? 1 : 0);
        if (e == cr && next < n && s[next] == '\n')
            next++;
        fast_record(r, a, e);
        i = next;
    }
    return i;
}

/* Feed bytes to libcsv, turning its failure into "path:line: malformed". */
static void slow_parse(reader *r, struct csv_parser *p, const void *s, size_t n)
{
    if (csv_parse(p, s, n, on_field, on_record, r) != n && r->status == KVS_OK) {
        int e = csv_error(p);
        r->status = kvs_errf(r->err, e == CSV_EPARSE ? KVS_EINVAL : KVS_ENOMEM,
                             "%s:%lld: malformed CSV (%s)", r->path,
                             (long long)(r->line + r->extra_nl), csv_strerror(e));
    }
}

#define CSV_CHUNK 65536

int trace_csv_read(const char *path, trace_csv_row_fn fn, void *ctx,
                   char sha_hex[65], kvs_err *err)
{
    reader r = {.path = path, .fn = fn, .ctx = ctx, .err = err, .line = 1, .prev_term = -2};
    struct csv_parser p;
    trace_sha256 sha;
    int slow = 0; /* libcsv reads from here on */
    char *buf = NULL; /* [cap]: the pending partial record, then a chunk, then a NUL */
    size_t have = 0, cap = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        r.status = kvs_errf(err, KVS_EIO, "%s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    trace_sha256_init(&sha);
    for (;;) {
        if (cap - have < CSV_CHUNK + 1) {
            size_t nc = cap ? 2 * cap : 2 * CSV_CHUNK;
            while (nc - have < CSV_CHUNK + 1)
                nc *= 2;
            char *nb = realloc(buf, nc);
            if (!nb) {
                r.status = kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
                goto done;
            }
            buf = nb;
            cap = nc;
        }
        size_t k = fread(buf + have, 1, CSV_CHUNK, f);
        if (k == 0)
            break;
        trace_sha256_update(&sha, buf + have, k);
        if (!slow && (memchr(buf + have, '"', k) || memchr(buf + have, '\0', k))) {
            /* the pending bytes begin a record: libcsv starts there, fresh */
            if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_REPALL_NL) != 0) {
                r.status = kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
                goto done;
            }
            slow = 1;
            k += have;
            have = 0;
        }
        if (slow) {
            slow_parse(&r, &p, buf + have, k);
        } else {
            have += k;
            size_t used = fast_records(&r, buf, have, 0);
            memmove(buf, buf + used, have - used);
            have -= used;
        }
        if (r.status != KVS_OK)
            goto done;
    }
    if (ferror(f)) {
        r.status = kvs_errf(err, KVS_EIO, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    if (!slow && have > 0) {
        buf[have] = '\0'; /* the spare byte: the last field's terminator */
        fast_records(&r, buf, have, 1);
    }
    if (slow && csv_fini(&p, on_field, on_record, &r) != 0 && r.status == KVS_OK)
        r.status = kvs_errf(err, KVS_EINVAL, "%s:%lld: malformed CSV (unterminated quoted field)",
                            path, (long long)r.line);
    if (r.status == KVS_OK && sha_hex)
        trace_sha256_hex(&sha, sha_hex);
done:
    if (slow)
        csv_free(&p);
    if (f)
        fclose(f);
    free(buf);
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

/* Clinger's fast path: [+-]digits[.digits], at most 19 digits, whose
 * integer w is at most 2^53, with at most 22 after the point: w and 10^f
 * are exact doubles, so the one division w / 10^f rounds once, to the
 * double nearest the decimal, as strtod does (IEEE division is correctly
 * rounded; x86-64 evaluates doubles in doubles).  Traces write times with
 * a few decimals (%.6f), so nearly every field takes it.  0 when it does
 * not apply; the caller then parses and checks the usual way.  O(length). */
static int parse_f64_fast(const char *s, double *out)
{
    static const double p10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *p = s;
    const int neg = *p == '-';
    if (*p == '+' || *p == '-')
        p++;
    uint64_t w = 0;
    int nd = 0, f = 0, dot = 0;
    for (;; p++) {
        if (*p >= '0' && *p <= '9') {
            if (++nd > 19)
                return 0;
            w = w * 10 + (uint64_t)(*p - '0');
            f += dot;
        } else if (*p == '.' && !dot) {
            dot = 1;
        } else {
            break;
        }
    }
    if (*p || nd == 0 || w > (UINT64_C(1) << 53) || f > 22)
        return 0;
    const double v = (double)w / p10[f];
    *out = neg ? -v : v;
    return 1;
}

int trace_parse_f64(const char *s, double *out, const char **why)
{
    if (parse_f64_fast(s, out))
        return 0;
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
