/* model_conf.c — read a model shape from a key=value config file. */
#include "model.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"

typedef struct conf_key {
    const char *key;
    size_t off;   /* offsetof the int64_t field in model_spec */
    int64_t max;  /* inclusive upper bound; values must be >= 1 */
} conf_key;

static const conf_key keys[] = {
    {"hidden", offsetof(model_spec, hidden), 65536},
    {"layers", offsetof(model_spec, layers), 1024},
    {"heads", offsetof(model_spec, heads), 1024},
    {"kv_heads", offsetof(model_spec, kv_heads), 1024},
    {"head_dim", offsetof(model_spec, head_dim), 1024},
    {"intermediate", offsetof(model_spec, intermediate), 1048576},
    {"vocab", offsetof(model_spec, vocab), 4194304},
    {"max_ctx", offsetof(model_spec, max_ctx), 16777216},
    {"dtype_bytes", offsetof(model_spec, dtype_bytes), 4},
};

#define N_KEYS (sizeof keys / sizeof keys[0])
#define MAX_LINE 1022 /* characters per line, newline excluded */


static void default_name(const char *path, char *name, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len >= 5 && !strcmp(base + len - 5, ".conf"))
        len -= 5;
    if (len >= n)
        len = n - 1;
    memcpy(name, base, len);
    name[len] = 0;
}

/* Parse one "key = value" line into *m; seen_line[i] records where key i
 * was set. */
static int parse_line(const char *path, int line, char *text, model_spec *m,
                      int *seen_line, int *name_line, kvs_err *err)
{
    char *eq = strchr(text, '=');
    if (!eq)
        return kvs_errf(err, KVS_EINVAL, "%s:%d: expected key=value, got '%s'", path,
                        line, text);
    *eq = 0;
    char *key = str_trim(text), *val = str_trim(eq + 1);
    if (!*val)
        return kvs_errf(err, KVS_EINVAL, "%s:%d: %s: missing value", path, line, key);
    if (!strcmp(key, "name")) {
        if (*name_line)
            return kvs_errf(err, KVS_EINVAL, "%s:%d: name: repeated (first set on line %d)",
                            path, line, *name_line);
        if (strlen(val) >= sizeof m->name)
            return kvs_errf(err, KVS_EINVAL, "%s:%d: name: longer than %zu characters",
                            path, line, sizeof m->name - 1);
        strcpy(m->name, val);
        *name_line = line;
        return KVS_OK;
    }
    for (size_t i = 0; i < N_KEYS; i++) {
        if (strcmp(key, keys[i].key))
            continue;
        if (seen_line[i])
            return kvs_errf(err, KVS_EINVAL, "%s:%d: %s: repeated (first set on line %d)",
                            path, line, key, seen_line[i]);
        char *end;
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno || *end)
            return kvs_errf(err, KVS_EINVAL, "%s:%d: %s: '%s' is not an integer", path,
                            line, key, val);
        if (v < 1 || v > keys[i].max)
            return kvs_errf(err, KVS_EINVAL, "%s:%d: %s: %lld is out of range [1, %lld]",
                            path, line, key, v, (long long)keys[i].max);
        if (!strcmp(key, "dtype_bytes") && v == 3)
            return kvs_errf(err, KVS_EINVAL, "%s:%d: dtype_bytes: must be 1, 2 or 4", path,
                            line);
        *(int64_t *)((char *)m + keys[i].off) = v;
        seen_line[i] = line;
        return KVS_OK;
    }
    return kvs_errf(err, KVS_EINVAL,
                    "%s:%d: unknown key '%s' (keys: name, hidden, layers, heads, kv_heads, "
                    "head_dim, intermediate, vocab, max_ctx, dtype_bytes)",
                    path, line, key);
}

int model_conf_read(const char *path, model_spec *out, kvs_err *err)
{
    model_spec m;
    memset(&m, 0, sizeof m);
    int seen_line[N_KEYS] = {0};
    int name_line = 0, line = 0, rc = KVS_OK;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    FILE *f = fopen(path, "r");
    if (!f)
        return kvs_errf(err, KVS_EIO, "--model: cannot open '%s': %s", path,
                        strerror(errno));
    while ((got = getline(&buf, &cap, f)) >= 0) {
        line++;
        size_t n = (size_t)got - (got > 0 && buf[got - 1] == '\n');
        if (n > MAX_LINE) {
            rc = kvs_errf(err, KVS_EINVAL, "%s:%d: line longer than %d characters", path,
                          line, MAX_LINE);
            goto done;
        }
        /* A NUL byte would end the line early and skip the rest silently. */
        if (memchr(buf, '\0', (size_t)got)) {
            rc = kvs_errf(err, KVS_EINVAL, "%s:%d: NUL byte in the line", path, line);
            goto done;
        }
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = 0;
        char *text = str_trim(buf);
        if (!*text)
            continue;
        rc = parse_line(path, line, text, &m, seen_line, &name_line, err);
        if (rc)
            goto done;
    }
    if (ferror(f)) {
        rc = kvs_errf(err, KVS_EIO, "%s: read error", path);
        goto done;
    }
    for (size_t i = 0; i < N_KEYS; i++) {
        if (!seen_line[i]) {
            rc = kvs_errf(err, KVS_EINVAL, "%s:%d: end of file: missing key '%s'", path,
                          line, keys[i].key);
            goto done;
        }
    }
    if (m.kv_heads > m.heads || m.heads % m.kv_heads) {
        rc = kvs_errf(err, KVS_EINVAL,
                      "%s:%d: kv_heads: %lld does not divide heads %lld", path,
                      seen_line[3], (long long)m.kv_heads, (long long)m.heads);
        goto done;
    }
    if (!name_line)
        default_name(path, m.name, sizeof m.name);
    *out = m;
done:
    free(buf);
    fclose(f);
    return rc;
}
