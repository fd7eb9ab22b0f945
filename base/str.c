/* str.c — string helpers (see str.h). */
#include "str.h"

#include <ctype.h>
#include <getopt.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void str_json_write(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

void str_json_escape(char *dst, size_t n, const char *src)
{
    size_t o = 0;
    if (n == 0)
        return;
    for (; *src && o + 7 < n; src++) {
        unsigned char ch = (unsigned char)*src;
        if (ch == '"' || ch == '\\') {
            dst[o++] = '\\';
            dst[o++] = (char)ch;
        } else if (ch < 0x20) {
            o += (size_t)snprintf(dst + o, n - o, "\\u%04x", ch);
        } else {
            dst[o++] = (char)ch;
        }
    }
    dst[o] = 0;
}

char *str_join(int n, char *const *args, const char *sep)
{
    size_t ls = strlen(sep), len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(args[i]) + ls;
    char *s = malloc(len), *q = s;
    if (!s)
        return NULL;
    for (int i = 0; i < n; i++) {
        size_t k = strlen(args[i]);
        memcpy(q, args[i], k);
        memcpy(q + k, sep, ls);
        q += k + ls;
    }
    *q = 0;
    return s;
}

char *str_sanitize(char *dst, size_t n, const char *src)
{
    if (n == 0)
        return dst;
    size_t i = 0;
    for (; i + 1 < n && src[i]; i++) {
        unsigned char ch = (unsigned char)src[i];
        dst[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    dst[i] = 0;
    return dst;
}

int str_parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out,
                  kvs_err *err)
{
    char *end;
    if (!s || !*s)
        return kvs_errf(err, KVS_EINVAL, "%s: missing value", flag);
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return kvs_errf(err, KVS_EINVAL, "%s: '%s' is not an integer", flag, s);
    if (v < lo || v > hi)
        return kvs_errf(err, KVS_EINVAL, "%s: %lld is out of range [%lld, %lld]", flag, v,
                        (long long)lo, (long long)hi);
    *out = v;
    return KVS_OK;
}

int str_parse_u64(const char *flag, const char *s, uint64_t *out, kvs_err *err)
{
    char *end;
    if (!s || !*s || *s == '-')
        return kvs_errf(err, KVS_EINVAL, "%s: '%s' is not a non-negative integer", flag,
                        s ? s : "");
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return kvs_errf(err, KVS_EINVAL, "%s: '%s' is not a non-negative integer", flag, s);
    *out = v;
    return KVS_OK;
}

int str_parse_f64(const char *flag, const char *s, double lo, double hi, double *out,
                  kvs_err *err)
{
    char *end;
    if (!s || !*s)
        return kvs_errf(err, KVS_EINVAL, "%s: missing value", flag);
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return kvs_errf(err, KVS_EINVAL, "%s: '%s' is not a number", flag, s);
    if (v < lo || v > hi)
        return kvs_errf(err, KVS_EINVAL, "%s: %g is out of range [%g, %g]", flag, v, lo, hi);
    *out = v;
    return KVS_OK;
}

void str_buf_printf(str_buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->len + (size_t)k)
            cap *= 2;
        char *v = realloc(b->s, cap);
        if (!v) {
            b->oom = 1;
            return;
        }
        b->s = v;
        b->cap = cap;
    }
}

void str_buf_json(str_buf *b, const char *s)
{
    str_buf_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            str_buf_printf(b, "\\%c", *p);
        else if (*p < 0x20)
            str_buf_printf(b, "\\u%04x", *p);
        else
            str_buf_printf(b, "%c", *p);
    }
    str_buf_printf(b, "\"");
}

char *str_trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

int str_getopt_exact(int argc, char **argv, const char *shortopts,
                     const struct option *longopts, char *why, size_t n)
{
    int at = optind, li = -1;
    int c = getopt_long(argc, argv, shortopts, longopts, &li);
    if (c == -1 || li < 0)
        return c;
    /* GNU getopt skips non-options to reach the flag it took */
    int k = at > 0 ? at : 1;
    while (k < argc && (argv[k][0] != '-' || !argv[k][1]))
        k++;
    if (k >= argc || strncmp(argv[k], "--", 2))
        return c;
    const char *name = argv[k] + 2;
    size_t len = strcspn(name, "=");
    if (len == strlen(longopts[li].name) && !strncmp(name, longopts[li].name, len))
        return c;
    snprintf(why, n, "'--%.*s': flags are not abbreviated (did you mean --%s?)", (int)len, name,
             longopts[li].name);
    return '!';
}
