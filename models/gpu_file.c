/* gpu_file.c — read a GPU's figures from a key=value file (the format of
 * model_conf.c; docs/models.md, "GPU files"). */
#include "model.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"

typedef struct gpu_key {
    const char *key;
    size_t off;   /* offsetof the field in gpu_spec */
    int is_int;   /* 1: int64_t bytes, else double */
    int required; /* 1: a file must set it */
    int zero_ok;  /* 1: 0 allowed (a precision the GPU lacks) */
} gpu_key;

static const gpu_key keys[] = {
    {"mem_bytes", offsetof(gpu_spec, mem_bytes), 1, 1, 0},
    {"hbm_Bps", offsetof(gpu_spec, hbm_Bps), 0, 1, 0},
    {"fp16_flops", offsetof(gpu_spec, fp16_flops), 0, 1, 0},
    {"bf16_flops", offsetof(gpu_spec, bf16_flops), 0, 1, 1},
    {"fp8_flops", offsetof(gpu_spec, fp8_flops), 0, 1, 1},
    {"int8_ops", offsetof(gpu_spec, int8_ops), 0, 1, 1},
    {"fp4_flops", offsetof(gpu_spec, fp4_flops), 0, 1, 1},
    {"host_link_Bps", offsetof(gpu_spec, host_link_Bps), 0, 1, 0},
    {"nvlink_Bps", offsetof(gpu_spec, nvlink_Bps), 0, 1, 0},
    {"mem_runtime_bytes", offsetof(gpu_spec, mem_runtime_bytes), 1, 0, 1},
};

#define N_KEYS (sizeof keys / sizeof keys[0])
#define MAX_LINE 1022


static int set_key(const char *path, int line, const gpu_key *k, const char *val,
                   gpu_spec *g, kvs_err *err)
{
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || *end || !isfinite(v))
        return kvs_errf(err, KVS_EINVAL, "%s:%d: %s: '%s' is not a number", path, line,
                        k->key, val);
    if (v < 0 || (v == 0 && !k->zero_ok))
        return kvs_errf(err, KVS_EINVAL, "%s:%d: %s: %s must be %s", path, line, k->key, val,
                        k->zero_ok ? ">= 0" : "> 0");
    if (k->is_int) {
        if (v > 9e15 || v != floor(v))
            return kvs_errf(err, KVS_EINVAL, "%s:%d: %s: %s is not a whole number of bytes "
                            "below 9e15", path, line, k->key, val);
        *(int64_t *)((char *)g + k->off) = (int64_t)v;
    } else {
        *(double *)((char *)g + k->off) = v;
    }
    return KVS_OK;
}

int gpu_file_read(const char *path, gpu_spec *out, kvs_err *err)
{
    gpu_spec g;
    memset(&g, 0, sizeof g);
    int seen[N_KEYS] = {0}, name_line = 0, line = 0, rc = KVS_OK;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    FILE *f = fopen(path, "r");
    if (!f)
        return kvs_errf(err, KVS_EIO, "--gpu: cannot open '%s': %s", path, strerror(errno));
    while ((got = getline(&buf, &cap, f)) >= 0) {
        line++;
        size_t n = (size_t)got - (got > 0 && buf[got - 1] == '\n');
        if (n > MAX_LINE || memchr(buf, '\0', (size_t)got)) {
            rc = kvs_errf(err, KVS_EINVAL, "%s:%d: line too long or holding a NUL byte",
                          path, line);
            goto done;
        }
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = 0;
        char *text = str_trim(buf);
        if (!*text)
            continue;
        char *eq = strchr(text, '=');
        if (!eq) {
            rc = kvs_errf(err, KVS_EINVAL, "%s:%d: expected key=value, got '%s'", path, line,
                          text);
            goto done;
        }
        *eq = 0;
        char *key = str_trim(text), *val = str_trim(eq + 1);
        if (!*val) {
            rc = kvs_errf(err, KVS_EINVAL, "%s:%d: %s: missing value", path, line, key);
            goto done;
        }
        if (!strcmp(key, "name")) {
            if (name_line || strlen(val) >= sizeof g.name) {
                rc = kvs_errf(err, KVS_EINVAL, "%s:%d: name: repeated or longer than %zu "
                              "characters", path, line, sizeof g.name - 1);
                goto done;
            }
            strcpy(g.name, val);
            name_line = line;
            continue;
        }
        size_t i = 0;
        while (i < N_KEYS && strcmp(key, keys[i].key))
            i++;
        if (i == N_KEYS) {
            rc = kvs_errf(err, KVS_EINVAL,
                          "%s:%d: unknown key '%s' (keys: name, mem_bytes, hbm_Bps, fp16_flops, "
                          "bf16_flops, fp8_flops, int8_ops, fp4_flops, host_link_Bps, "
                          "nvlink_Bps, mem_runtime_bytes)",
                          path, line, key);
            goto done;
        }
        if (seen[i]) {
            rc = kvs_errf(err, KVS_EINVAL, "%s:%d: %s: repeated (first set on line %d)", path,
                          line, key, seen[i]);
            goto done;
        }
        rc = set_key(path, line, &keys[i], val, &g, err);
        if (rc)
            goto done;
        seen[i] = line;
    }
    if (ferror(f)) {
        rc = kvs_errf(err, KVS_EIO, "%s: read error", path);
        goto done;
    }
    for (size_t i = 0; i < N_KEYS; i++) {
        if (keys[i].required && !seen[i]) {
            rc = kvs_errf(err, KVS_EINVAL, "%s: missing key '%s'", path, keys[i].key);
            goto done;
        }
    }
    if (!name_line) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        size_t len = strlen(base);
        if (len >= 4 && !strcmp(base + len - 4, ".gpu"))
            len -= 4;
        if (len >= sizeof g.name)
            len = sizeof g.name - 1;
        memcpy(g.name, base, len);
        g.name[len] = 0;
    }
    *out = g;
done:
    free(buf);
    fclose(f);
    return rc;
}
