/* job_inputs.c — the identity of a group's input files (see job.h): each
 * distinct trace file its runs read, as given, absolute and by the SHA-256
 * of its bytes; stored when a sweep, search or compare is created and
 * checked before it is resumed. */
#include "job.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"

void job_inputs_free(job_inputs *in)
{
    for (int i = 0; i < in->n; i++) {
        free(in->path[i]);
        free(in->abs[i]);
        free(in->sha[i]);
    }
    free(in->path);
    free(in->abs);
    free(in->sha);
    memset(in, 0, sizeof *in);
}

static int grow(job_inputs *in, kvs_err *err)
{
    if (in->n < in->cap)
        return KVS_OK;
    int cap = in->cap ? 2 * in->cap : 4;
    char **a = realloc(in->path, (size_t)cap * sizeof *a);
    if (a)
        in->path = a;
    char **b = a ? realloc(in->abs, (size_t)cap * sizeof *b) : NULL;
    if (b)
        in->abs = b;
    char **c = b ? realloc(in->sha, (size_t)cap * sizeof *c) : NULL;
    if (!c)
        return kvs_errf(err, KVS_ENOMEM, "out of memory");
    in->sha = c;
    in->cap = cap;
    return KVS_OK;
}

int job_inputs_add(job_inputs *in, const char *path, kvs_err *err)
{
    for (int i = 0; i < in->n; i++)
        if (!strcmp(in->path[i], path))
            return KVS_OK;
    char abs[PATH_MAX], sha[65];
    kvs_err e;
    if (!realpath(path, abs))
        return kvs_errf(err, KVS_EIO, "--trace %s: %s", path, strerror(errno));
    if (trace_sha256_file(abs, sha, &e))
        return kvs_errf(err, KVS_EIO, "--trace %s: %s", path, e.msg);
    int rc = grow(in, err);
    if (rc)
        return rc;
    in->path[in->n] = strdup(path);
    in->abs[in->n] = strdup(abs);
    in->sha[in->n] = strdup(sha);
    if (!in->path[in->n] || !in->abs[in->n] || !in->sha[in->n]) {
        free(in->path[in->n]);
        free(in->abs[in->n]);
        free(in->sha[in->n]);
        return kvs_errf(err, KVS_ENOMEM, "out of memory");
    }
    in->n++;
    return KVS_OK;
}

int job_inputs_add_opts(job_inputs *in, const job_opts *o, kvs_err *err)
{
    char path[sizeof o->cfg.trace_path + 64];
    job_trace_path(&o->cfg, path, sizeof path);
    return path[0] ? job_inputs_add(in, path, err) : KVS_OK;
}

typedef struct input_check {
    const char *noun; /* "sweep", "search", "compare" */
    int64_t id;
    kvs_err *err;
    int64_t seen;     /* rows checked */
} input_check;

static int check_input(void *ctx, const char *path, const char *abs, const char *sha)
{
    input_check *c = ctx;
    char now[PATH_MAX], hex[65], safe[512], safe_abs[512];
    kvs_err e;
    long long id = (long long)c->id;
    c->seen++;
    str_sanitize(safe, sizeof safe, path);
    str_sanitize(safe_abs, sizeof safe_abs, abs);
    if (!realpath(path, now))
        return kvs_errf(c->err, KVS_EINVAL,
                        "--resume: %s %lld: --trace %s: %s from this directory (the %s "
                        "read %s; resume it from the directory it was started in)",
                        c->noun, id, safe, strerror(errno), c->noun, safe_abs);
    if (strcmp(now, abs)) {
        char safe_now[512];
        return kvs_errf(c->err, KVS_EINVAL,
                        "--resume: %s %lld: --trace %s is %s from here, but the %s read "
                        "%s; resume it from the directory it was started in",
                        c->noun, id, safe, str_sanitize(safe_now, sizeof safe_now, now), c->noun,
                        safe_abs);
    }
    if (trace_sha256_file(now, hex, &e))
        return kvs_errf(c->err, KVS_EIO, "--resume: %s %lld: %s", c->noun, id, e.msg);
    if (strcmp(hex, sha)) {
        char safe_sha[72];
        return kvs_errf(c->err, KVS_EINVAL,
                        "--resume: %s %lld: --trace %s changed since the %s started "
                        "(SHA-256 %.12s..., stored %.12s...)",
                        c->noun, id, safe_abs, c->noun, hex,
                        str_sanitize(safe_sha, sizeof safe_sha, sha));
    }
    return KVS_OK;
}

int job_inputs_check(store *st, const char *kind, const char *noun, int64_t id,
                     int64_t *n_checked, kvs_err *err)
{
    input_check c = {noun, id, err, 0};
    kvs_err e;
    int rc = store_group_inputs(st, kind, id, check_input, &c, &e);
    if (n_checked)
        *n_checked = c.seen;
    if (rc == KVS_EDB)
        return kvs_errf(err, rc, "--db: %s", e.msg);
    if (rc && c.seen == 0) /* the store's own message (a NULL value) */
        return kvs_errf(err, rc, "--db: %s", e.msg);
    return rc;
}
