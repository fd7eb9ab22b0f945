/* cost_consts.c — the roofline's constants by name: the table of what each
 * is, its unit, its range and the source of its default; parsing them from
 * a `--cost roofline:key=value,...` spec and from a constants file; and
 * where each effective value came from (for `kvsim cost show`). */
#include "cost.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"

#define K(f) offsetof(cost_roofline_consts, f)

/* lo_open: the value must be > lo (efficiencies); else >= lo (times). */
static const cost_const_info consts[] = {
    {"eff_gemm", "fraction", K(eff_gemm), 0.0, 1.0, 1,
     "cuBLAS FP16 GEMMs of LLM shapes sustain 65-80% of the tensor peak on A100/H100"},
    {"eff_attn", "fraction", K(eff_attn), 0.0, 1.0, 1,
     "FlashAttention-2 (Dao, 2023): 50-73% of A100 peak forward; serving kernels at the low end"},
    {"eff_hbm", "fraction", K(eff_hbm), 0.0, 1.0, 1,
     "streaming kernels reach 80-90% of peak HBM bandwidth"},
    {"eff_nvlink", "fraction", K(eff_nvlink), 0.0, 1.0, 1,
     "nccl-tests all_reduce, 8 NVLink A100s: ~230 of 300 GB/s per direction"},
    {"collective_lat_s", "s", K(collective_lat_s), 0.0, 1.0, 0,
     "small-message NCCL all-reduce inside one NVLink node: ~10 us"},
    {"step_overhead_s", "s", K(step_overhead_s), 0.0, 10.0, 0,
     "vLLM RFC #6854: ~4 ms of GPU idle per V0 decode step (scheduling, I/O)"},
    {"step_overhead_seq_s", "s", K(step_overhead_seq_s), 0.0, 1.0, 0,
     "per-sequence input preparation and sampling; 0 unless an engine profile sets it"},
    {"kernel_lat_s", "s", K(kernel_lat_s), 0.0, 1.0, 0,
     "fixed time of one kernel (launch gap, ramp, tail): ~2-5 us; 0 unless a profile sets it"},
    {"collective_lat_peer_s", "s", K(collective_lat_peer_s), 0.0, 1.0, 0,
     "nccl-tests small all-reduce grows ~1-2 us per GPU past 2 in one NVLink node"},
    {"gemm_dim_half", "elements", K(gemm_dim_half), 0.0, 1e6, 0,
     "narrow per-GPU GEMMs fill fewer tiles and waves; 0 unless a profile sets it"},
    {"eff_pcie", "fraction", K(eff_pcie), 0.0, 1.0, 1,
     "NVIDIA/nccl#1639: PCIe all-reduce busbw 35 (4 GPUs) / 28 (8) of 64 GB/s; host-bound"},
    {"kv_reread", "fraction", K(kv_reread), 0.0, 1.0, 0,
     "GQA decode kernels (TensorRT-LLM XQA, 2024; vLLM, FlashInfer) read a KV head once: 0"},
    {"ridge_loss", "fraction", K(ridge_loss), 0.0, 1.0, 0,
     "tiled kernels near the ridge overlap loads and math imperfectly; 0 = plain roofline"},
    {"eff_fp8", "fraction", K(eff_fp8), 0.0, 1.0, 1,
     "Hopper FP8 GEMMs reach 68-78% of the FP8 peak (tilelang, DeepGEMM), BF16 ones ~79% of theirs"},
};
#define N_CONSTS (sizeof consts / sizeof consts[0])

size_t cost_roofline_const_count(void) { return N_CONSTS; }
const cost_const_info *cost_roofline_const_at(size_t i) { return i < N_CONSTS ? &consts[i] : NULL; }

static double *slot(cost_roofline_consts *k, const cost_const_info *c)
{
    return (double *)((char *)k + c->off);
}

double cost_roofline_const_value(const cost_roofline_consts *k, const cost_const_info *c)
{
    return *(const double *)((const char *)k + c->off);
}

void cost_roofline_origins_default(cost_const_origin origin[COST_MAX_CONSTS])
{
    for (size_t i = 0; i < N_CONSTS; i++)
        snprintf(origin[i], sizeof origin[i], "default");
}

/* The constant named `key`; a time may be given in s, ms or us
 * ("step_overhead_ms"): *scale converts the value to seconds. */
static const cost_const_info *find(const char *key, double *scale, size_t *idx)
{
    static const struct { const char *suffix; double scale; } units[] = {
        {"_s", 1.0}, {"_ms", 1e-3}, {"_us", 1e-6}};
    for (size_t i = 0; i < N_CONSTS; i++) {
        const char *n = consts[i].name;
        size_t ln = strlen(n);
        *scale = 1.0;
        *idx = i;
        if (!strcmp(key, n))
            return &consts[i];
        if (ln < 2 || strcmp(n + ln - 2, "_s"))
            continue;
        for (size_t u = 1; u < sizeof units / sizeof units[0]; u++) {
            size_t ls = strlen(units[u].suffix);
            if (strlen(key) == ln - 2 + ls && !strncmp(key, n, ln - 2) &&
                !strcmp(key + ln - 2, units[u].suffix)) {
                *scale = units[u].scale;
                return &consts[i];
            }
        }
    }
    return NULL;
}

/* Set key=val (text, trimmed by the caller) from `where`. */
static int set_one(const char *key, const char *val, const char *where, cost_roofline_consts *k,
                   cost_const_origin *origin, kvs_err *err)
{
    double scale;
    size_t i;
    const cost_const_info *c = find(key, &scale, &i);
    if (!c) {
        char names[256] = "";
        size_t len = 0;
        for (size_t j = 0; j < N_CONSTS && len < sizeof names; j++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", j ? ", " : "",
                                    consts[j].name);
        return kvs_errf(err, KVS_EINVAL, "%s: unknown roofline constant '%s' (known: %s; times "
                                         "also as _ms or _us)", where, key, names);
    }
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (end == val || *end || errno || !isfinite(v))
        return kvs_errf(err, KVS_EINVAL, "%s: %s: '%s' is not a number", where, key, val);
    v *= scale;
    int low_ok = c->lo_open ? v > c->lo : v >= c->lo;
    if (!low_ok || !(v <= c->hi))
        return kvs_errf(err, KVS_EINVAL, "%s: %s: %g %s is out of range %s%g, %g]", where,
                        c->name, v, c->unit, c->lo_open ? "(" : "[", c->lo, c->hi);
    *slot(k, c) = v;
    if (origin)
        snprintf(origin[i], sizeof origin[i], "%s", where);
    return KVS_OK;
}


int cost_roofline_consts_read(const char *path, cost_roofline_consts *k,
                              cost_const_origin origin[COST_MAX_CONSTS], kvs_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return kvs_errf(err, KVS_EIO, "%s: cannot open (%s)", path, strerror(errno));
    char line[1024];
    int rc = KVS_OK;
    for (long no = 1; rc == KVS_OK && fgets(line, sizeof line, f); no++) {
        char where[1100];
        snprintf(where, sizeof where, "%s:%ld", path, no);
        if (!strchr(line, '\n') && !feof(f)) {
            rc = kvs_errf(err, KVS_EINVAL, "%s: line longer than %zu characters", where,
                          sizeof line - 2);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *s = str_trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = kvs_errf(err, KVS_EINVAL, "%s: '%s' is not key=value", where, s);
            break;
        }
        *eq = 0;
        rc = set_one(str_trim(s), str_trim(eq + 1), where, k, origin, err);
    }
    if (rc == KVS_OK && ferror(f))
        rc = kvs_errf(err, KVS_EIO, "%s: read error", path);
    fclose(f);
    return rc;
}

int cost_roofline_consts_parse_as(const char *params, const char *where, cost_roofline_consts *k,
                                  cost_const_origin origin[COST_MAX_CONSTS], kvs_err *err)
{
    char buf[1024];
    if (strlen(params) >= sizeof buf)
        return kvs_errf(err, KVS_EINVAL, "%s: roofline parameters longer than %zu characters",
                        where, sizeof buf - 1);
    strcpy(buf, params);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return kvs_errf(err, KVS_EINVAL, "%s: roofline: '%s' is not key=value", where,
                            str_trim(tok));
        *eq = 0;
        char *key = str_trim(tok), *val = str_trim(eq + 1);
        int rc = !strcmp(key, "file") ? cost_roofline_consts_read(val, k, origin, err)
                                      : set_one(key, val, where, k, origin, err);
        if (rc)
            return rc;
    }
    return KVS_OK;
}

int cost_roofline_consts_parse(const char *params, cost_roofline_consts *k,
                               cost_const_origin origin[COST_MAX_CONSTS], kvs_err *err)
{
    return cost_roofline_consts_parse_as(params, "--cost", k, origin, err);
}

size_t cost_roofline_consts_show(const cost_roofline_consts *k,
                                 const cost_const_origin origin[COST_MAX_CONSTS], char *buf,
                                 size_t cap)
{
    size_t len = 0;
    if (cap)
        buf[0] = 0;
    for (size_t i = 0; i < N_CONSTS; i++) {
        const cost_const_info *c = &consts[i];
        double v = cost_roofline_const_value(k, c);
        const char *unit = c->unit;
        if (!strcmp(unit, "s") && v > 0 && v < 1e-3) /* times in the unit people use */
            v *= 1e6, unit = "us";
        else if (!strcmp(unit, "s") && v > 0 && v < 1)
            v *= 1e3, unit = "ms";
        int n = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0,
                         "%-21s %-10g %-9s %-22s %s\n", c->name, v, unit,
                         origin ? origin[i] : "default", c->source);
        if (n > 0)
            len += (size_t)n;
    }
    return len;
}
