/* job_grid.c — parsing grid axes and enumerating their cartesian product
 * (see job.h). */
#include "job.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void sweep_grid_init(sweep_grid *g) { memset(g, 0, sizeof *g); }

static void axis_free(sweep_axis *a)
{
    for (int i = 0; i < a->n_values; i++)
        free(a->values[i]);
    free(a->values);
    memset(a, 0, sizeof *a);
}

void sweep_grid_free(sweep_grid *g)
{
    for (int i = 0; i < g->n_axes; i++)
        axis_free(&g->axes[i]);
    memset(g, 0, sizeof *g);
}

/* Resolve the axis key into kind / opt_val / synth_key. */
static int axis_key(sweep_axis *a, const struct option *opts, kvs_err *err)
{
    const char *k = a->key;
    if (!strcmp(k, "rate") || !strncmp(k, "synthetic.", 10)) {
        /* the spec's own parser judges the key when the points are checked */
        const char *sk = !strcmp(k, "rate") ? "rate" : k + 10;
        int good = *sk && strlen(sk) < sizeof a->synth_key;
        for (const char *c = sk; *c; c++)
            good &= (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
        if (!good)
            return kvs_errf(err, KVS_EINVAL, "%s: '%s' is not a synthetic spec key", a->where,
                            sk);
        a->kind = SWEEP_KEY_SYNTH;
        snprintf(a->synth_key, sizeof a->synth_key, "%s", sk);
        return KVS_OK;
    }
    /* run flags that cannot vary per point (job_param's vary): where
     * results go and how they print */
    const job_param *jp = job_param_find(k);
    if (jp && !(jp->vary & JOB_VARY_GRID))
        return kvs_errf(err, KVS_EINVAL, "%s: '%s' cannot vary in a grid", a->where, k);
    for (const struct option *o = opts; o->name; o++) {
        if (strcmp(o->name, k))
            continue;
        a->opt_val = o->val;
        a->kind = o->has_arg == no_argument ? SWEEP_KEY_SWITCH : SWEEP_KEY_FLAG;
        return KVS_OK;
    }
    return kvs_errf(err, KVS_EINVAL,
                    "%s: unknown option '%s' (a kvsim run flag without dashes, 'rate' or "
                    "'synthetic.KEY')",
                    a->where, k);
}

static int add_value(sweep_axis *a, const char *v, size_t len, kvs_err *err)
{
    /* Blanks around a value are dropped, as a grid file's line ends are, so
     * that the stored grid text reads back as the same values. */
    while (len > 0 && isspace((unsigned char)*v))
        v++, len--;
    while (len > 0 && isspace((unsigned char)v[len - 1]))
        len--;
    if (len == 0)
        return kvs_errf(err, KVS_EINVAL, "%s: %s: empty value (stray separator?)", a->where,
                        a->key);
    if (memchr(v, '#', len) || memchr(v, '\n', len))
        return kvs_errf(err, KVS_EINVAL, "%s: %s: '%.*s': a value may not hold '#' or a newline",
                        a->where, a->key, (int)len, v);
    /* capacity doubles at every power of two, so n values cost O(n) moves;
     * duplicates are found once the axis is complete (axis_check_unique) */
    char **nv = a->values;
    int n = a->n_values;
    if ((n & (n - 1)) == 0) {
        nv = realloc(a->values, (size_t)(n ? 2 * n : 1) * sizeof *nv);
        if (!nv)
            return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", a->where);
        a->values = nv;
    }
    if (!(nv[a->n_values] = strndup(v, len)))
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", a->where);
    a->n_values++;
    if (a->kind == SWEEP_KEY_SWITCH && strcmp(nv[a->n_values - 1], "on") &&
        strcmp(nv[a->n_values - 1], "off"))
        return kvs_errf(err, KVS_EINVAL, "%s: %s: value '%s' is not on or off", a->where,
                        a->key, nv[a->n_values - 1]);
    return KVS_OK;
}

static int cmp_value(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* A value given twice is an error naming it.  Cost: O(n log n) on a sorted
 * copy of the pointers (the axis keeps its order). */
static int axis_check_unique(const sweep_axis *a, kvs_err *err)
{
    if (a->n_values < 2)
        return KVS_OK;
    char **s = malloc((size_t)a->n_values * sizeof *s);
    if (!s)
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", a->where);
    memcpy(s, a->values, (size_t)a->n_values * sizeof *s);
    qsort(s, (size_t)a->n_values, sizeof *s, cmp_value);
    int rc = KVS_OK;
    for (int i = 1; i < a->n_values && !rc; i++)
        if (!strcmp(s[i - 1], s[i]))
            rc = kvs_errf(err, KVS_EINVAL, "%s: %s: value '%s' given twice", a->where, a->key,
                          s[i]);
    free(s);
    return rc;
}

int sweep_grid_add(sweep_grid *g, const struct option *opts, const char *text,
                   const char *where, kvs_err *err)
{
    sweep_axis a;
    memset(&a, 0, sizeof a);
    snprintf(a.where, sizeof a.where, "%s", where);
    int rc = KVS_OK;
    const char *eq = strchr(text, '=');
    if (!eq) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: '%s' is not flag=v1,v2,...", where, text);
        goto fail;
    }
    size_t klen = (size_t)(eq - text);
    if (klen == 0 || klen >= sizeof a.key) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: '%s': missing or overlong option name", where, text);
        goto fail;
    }
    memcpy(a.key, text, klen);
    a.key[klen] = 0;
    if ((rc = axis_key(&a, opts, err)))
        goto fail;
    for (int i = 0; i < g->n_axes; i++)
        if (!strcmp(g->axes[i].key, a.key)) {
            rc = kvs_errf(err, KVS_EINVAL, "%s: '%s' already varied at %s", where, a.key,
                          g->axes[i].where);
            goto fail;
        }
    const char *list = eq + 1;
    if (!*list) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: %s: no values", where, a.key);
        goto fail;
    }
    char sep = strchr(list, '|') ? '|' : ',';
    for (const char *p = list;;) {
        const char *e = strchr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if ((rc = add_value(&a, p, len, err)))
            goto fail;
        if (!e)
            break;
        p = e + 1;
    }
    if ((rc = axis_check_unique(&a, err)))
        goto fail;
    if (g->n_axes == SWEEP_MAX_AXES) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: more than %d axes", where, SWEEP_MAX_AXES);
        goto fail;
    }
    int64_t n = g->n_axes ? g->n_points : 1;
    if (n * a.n_values > SWEEP_MAX_POINTS) { /* both <= 10^6: no overflow */
        rc = kvs_errf(err, KVS_EINVAL, "%s: the grid would have more than %d points", where,
                      SWEEP_MAX_POINTS);
        goto fail;
    }
    g->axes[g->n_axes++] = a;
    g->n_points = n * a.n_values;
    return KVS_OK;
fail:
    axis_free(&a);
    return rc;
}

/* Parse lines of grid text; `origin` is the path or name used in
 * "ORIGIN:LINE" errors. */
static int read_lines(sweep_grid *g, const struct option *opts, const char *text,
                      const char *origin, kvs_err *err)
{
    int line = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        line++;
        char *buf = strndup(p, len);
        if (!buf)
            return kvs_errf(err, KVS_ENOMEM, "%s:%d: out of memory", origin, line);
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = 0;
        char *s = buf;
        while (isspace((unsigned char)*s))
            s++;
        size_t sl = strlen(s);
        while (sl > 0 && isspace((unsigned char)s[sl - 1]))
            s[--sl] = 0;
        int rc = KVS_OK;
        if (*s) {
            char where[1100];
            snprintf(where, sizeof where, "%s:%d", origin, line);
            rc = sweep_grid_add(g, opts, s, where, err);
        }
        free(buf);
        if (rc)
            return rc;
        p += len;
        if (*p == '\n')
            p++;
    }
    return KVS_OK;
}

int sweep_grid_read_text(sweep_grid *g, const struct option *opts, const char *text,
                         const char *where, kvs_err *err)
{
    return read_lines(g, opts, text, where, err);
}

int sweep_grid_read_file(sweep_grid *g, const struct option *opts, const char *path,
                         kvs_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return kvs_errf(err, KVS_EIO, "%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0;
    int rc = KVS_OK;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 8192;
            char *t = realloc(text, cap);
            if (!t) {
                rc = kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
                goto out;
            }
            text = t;
        }
        size_t k = fread(text + len, 1, 4096, f);
        len += k;
        if (k < 4096)
            break;
    }
    if (ferror(f)) {
        rc = kvs_errf(err, KVS_EIO, "%s: read error", path);
        goto out;
    }
    text[len] = 0;
    if (strlen(text) != len) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: contains a NUL byte", path);
        goto out;
    }
    rc = read_lines(g, opts, text, path, err);
out:
    free(text);
    fclose(f);
    return rc;
}

char *sweep_grid_text(const sweep_grid *g)
{
    size_t cap = 1;
    for (int i = 0; i < g->n_axes; i++) {
        cap += strlen(g->axes[i].key) + 2;
        for (int j = 0; j < g->axes[i].n_values; j++)
            cap += strlen(g->axes[i].values[j]) + 1;
    }
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t len = 0;
    for (int i = 0; i < g->n_axes; i++) {
        const sweep_axis *a = &g->axes[i];
        char sep = ',';
        for (int j = 0; j < a->n_values; j++)
            if (strchr(a->values[j], ','))
                sep = '|';
        len += (size_t)sprintf(s + len, "%s=", a->key);
        for (int j = 0; j < a->n_values; j++) {
            if (j)
                s[len++] = sep;
            len += (size_t)sprintf(s + len, "%s", a->values[j]);
        }
        s[len++] = '\n';
    }
    s[len] = 0;
    return s;
}

void sweep_grid_choice(const sweep_grid *g, int64_t index, int choice[SWEEP_MAX_AXES])
{
    for (int i = g->n_axes - 1; i >= 0; i--) {
        int64_t n = g->axes[i].n_values;
        choice[i] = (int)(index % n);
        index /= n;
    }
}

int sweep_grid_point_key(const sweep_grid *g, int64_t index, char *buf, size_t n,
                         kvs_err *err)
{
    int choice[SWEEP_MAX_AXES];
    sweep_grid_choice(g, index, choice);
    size_t len = 0;
    if (n)
        buf[0] = 0;
    for (int i = 0; i < g->n_axes; i++) {
        int k = snprintf(buf + len, n > len ? n - len : 0, "%s%s=%s", i ? " " : "",
                         g->axes[i].key, g->axes[i].values[choice[i]]);
        len += (size_t)(k < 0 ? 0 : k);
        if (len >= n)
            return kvs_errf(err, KVS_EINVAL, "sweep: key of point %lld is longer than %zu bytes",
                            (long long)index, n);
    }
    return KVS_OK;
}

int sweep_spec_set(char *spec, size_t cap, const char *key, const char *value, kvs_err *err)
{
    char out[4096];
    size_t len = 0, klen = strlen(key);
    int replaced = 0;
    out[0] = 0;
    for (const char *p = spec; *p;) {
        const char *e = strchr(p, ',');
        size_t ilen = e ? (size_t)(e - p) : strlen(p);
        const char *eq = memchr(p, '=', ilen);
        if (!eq)
            return kvs_errf(err, KVS_EINVAL, "--synthetic: '%.*s' is not key=value", (int)ilen, p);
        int k;
        if ((size_t)(eq - p) == klen && !memcmp(p, key, klen)) {
            k = snprintf(out + len, sizeof out - len, "%s%s=%s", len ? "," : "", key, value);
            replaced = 1;
        } else {
            k = snprintf(out + len, sizeof out - len, "%s%.*s", len ? "," : "", (int)ilen, p);
        }
        len += (size_t)k;
        if (len >= sizeof out)
            break;
        p += ilen;
        if (*p == ',')
            p++;
    }
    if (!replaced && len < sizeof out)
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%s=%s", len ? "," : "", key, value);
    if (len >= sizeof out || len >= cap)
        return kvs_errf(err, KVS_EINVAL, "--synthetic: spec with %s=%s is longer than %zu bytes",
                        key, value, cap - 1);
    memcpy(spec, out, len + 1);
    return KVS_OK;
}
