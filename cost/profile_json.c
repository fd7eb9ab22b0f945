/* profile_json.c — a profile as JSON: written by hand (params_json,
 * fit_error_json), read back with SQLite's JSON functions with every field
 * checked. */
#include "profile_internal.h"

#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"

/* ------------------------------------------------------------ JSON out */


int profile_to_json(const profile *p, char **params_json, char **fit_error_json, kvs_err *err)
{
    *params_json = *fit_error_json = NULL;
    str_buf a = {0}, e = {0};
    const model_spec *m = &p->m;
    str_buf_printf(&a, "{\"version\":1,\"model\":{\"name\":");
    str_buf_json(&a, m->name);
    str_buf_printf(&a, ",\"hidden\":%lld,\"layers\":%lld,\"heads\":%lld,\"kv_heads\":%lld,"
                  "\"head_dim\":%lld,\"intermediate\":%lld,\"vocab\":%lld},"
                  "\"overhead_s\":%.17g,\"overhead_per_seq_s\":%.17g,\"ops\":[",
              (long long)m->hidden, (long long)m->layers, (long long)m->heads,
              (long long)m->kv_heads, (long long)m->head_dim, (long long)m->intermediate,
              (long long)m->vocab, p->overhead_s, p->overhead_per_seq_s);
    for (size_t i = 0; i < p->n_ops; i++) {
        const prof_op *o = &p->ops[i];
        str_buf_printf(&a, "%s{\"op\":\"%s\",\"per_layer\":%d,", i ? "," : "", o->info->name,
                  o->per_layer);
        if (o->nf == 0) {
            str_buf_printf(&a, "\"method\":\"interp\",\"x\":\"%s\",\"points\":[",
                      o->info->kind == PROFILE_OP_KIND_SEQS ? "seqs" : "tokens");
            for (int64_t j = 0; j < o->n; j++)
                str_buf_printf(&a, "%s[%.17g,%.17g]", j ? "," : "", o->x[j], o->y[j]);
        } else {
            int nf;
            const profile_feat *f = profile_op_feats(o->info->kind, &nf);
            str_buf_printf(&a, "\"method\":\"nnls\",\"features\":[");
            for (int j = 0; j < nf; j++)
                str_buf_printf(&a, "%s\"%s\"", j ? "," : "", profile_feat_name(f[j]));
            str_buf_printf(&a, "],\"coef\":[");
            for (int j = 0; j < nf; j++)
                str_buf_printf(&a, "%s%.17g", j ? "," : "", o->coef[j]);
        }
        str_buf_printf(&a, "]}");
    }
    str_buf_printf(&a, "]}");
    str_buf_printf(&e, "{");
    for (size_t i = 0; i < p->n_errs; i++) {
        const profile_op_error *x = &p->errs[i];
        str_buf_printf(&e, "%s\"%s\":{\"method\":\"%s\",\"n\":%lld,\"median_rel\":%.6g,\"max_rel\":%.6g}",
                  i ? "," : "", x->op, x->method, (long long)x->n,
                  isfinite(x->median_rel) ? x->median_rel : -1.0,
                  isfinite(x->max_rel) ? x->max_rel : -1.0);
    }
    str_buf_printf(&e, "}");
    if (a.oom || e.oom) {
        free(a.s), free(e.s);
        return kvs_errf(err, KVS_ENOMEM, "out of memory (profile JSON)");
    }
    *params_json = a.s;
    *fit_error_json = e.s;
    return KVS_OK;
}

/* ------------------------------------------------------------ JSON in */

static int prep(sqlite3 *db, const char *sql, const char *arg, sqlite3_stmt **st, kvs_err *err)
{
    if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK ||
        sqlite3_bind_text(*st, 1, arg, -1, SQLITE_STATIC) != SQLITE_OK) {
        int rc = kvs_errf(err, KVS_EDB, "reading profile JSON: %s", sqlite3_errmsg(db));
        sqlite3_finalize(*st);
        *st = NULL;
        return rc;
    }
    return KVS_OK;
}

static int is_num(sqlite3_stmt *st, int i)
{
    int t = sqlite3_column_type(st, i);
    return (t == SQLITE_INTEGER || t == SQLITE_FLOAT) && isfinite(sqlite3_column_double(st, i));
}

/* The header: version, overhead, model shape. */
static int parse_head(sqlite3 *db, const char *js, profile *p, kvs_err *err)
{
    static const char *const keys[] = {"hidden", "layers", "heads", "kv_heads", "head_dim",
                                       "intermediate", "vocab"};
    int64_t *dst[] = {&p->m.hidden,   &p->m.layers,       &p->m.heads, &p->m.kv_heads,
                      &p->m.head_dim, &p->m.intermediate, &p->m.vocab};
    sqlite3_stmt *st = NULL;
    int rc = prep(db, "SELECT json_valid(?1)", js, &st, err);
    if (rc != KVS_OK)
        return rc;
    int valid = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (!valid)
        return kvs_errf(err, KVS_EINVAL, "profile params: not valid JSON");
    rc = prep(db,
              "SELECT 1, /* column 0 unused */ json_extract(?1,'$.version'), "
              "json_extract(?1,'$.overhead_s'), json_extract(?1,'$.model.name'), "
              "json_extract(?1,'$.model.hidden'), json_extract(?1,'$.model.layers'), "
              "json_extract(?1,'$.model.heads'), json_extract(?1,'$.model.kv_heads'), "
              "json_extract(?1,'$.model.head_dim'), json_extract(?1,'$.model.intermediate'), "
              "json_extract(?1,'$.model.vocab'), json_extract(?1,'$.overhead_per_seq_s')",
              js, &st, err);
    if (rc != KVS_OK)
        return rc;
    if (sqlite3_step(st) != SQLITE_ROW) {
        rc = kvs_errf(err, KVS_EDB, "reading profile JSON: %s", sqlite3_errmsg(db));
    } else if (sqlite3_column_type(st, 1) != SQLITE_INTEGER || sqlite3_column_int(st, 1) != 1) {
        rc = kvs_errf(err, KVS_EINVAL, "profile params: version must be 1");
    } else if (!is_num(st, 2)) {
        rc = kvs_errf(err, KVS_EINVAL, "profile params: overhead_s must be a number");
    } else if (sqlite3_column_type(st, 11) != SQLITE_NULL && !is_num(st, 11)) {
        /* absent in profiles fitted before the per-sequence term: 0 */
        rc = kvs_errf(err, KVS_EINVAL, "profile params: overhead_per_seq_s must be a number");
    } else if (sqlite3_column_type(st, 3) != SQLITE_TEXT) {
        rc = kvs_errf(err, KVS_EINVAL, "profile params: model.name missing");
    } else {
        p->overhead_s = sqlite3_column_double(st, 2);
        p->overhead_per_seq_s =
            sqlite3_column_type(st, 11) == SQLITE_NULL ? 0.0 : sqlite3_column_double(st, 11);
        snprintf(p->m.name, sizeof p->m.name, "%s", (const char *)sqlite3_column_text(st, 3));
        for (int i = 0; i < 7 && rc == KVS_OK; i++) {
            if (sqlite3_column_type(st, 4 + i) != SQLITE_INTEGER || sqlite3_column_int64(st, 4 + i) < 1)
                rc = kvs_errf(err, KVS_EINVAL, "profile params: model.%s must be an integer >= 1",
                              keys[i]);
            else
                *dst[i] = sqlite3_column_int64(st, 4 + i);
        }
    }
    sqlite3_finalize(st);
    return rc;
}

static int parse_points(sqlite3 *db, const char *arr, prof_op *o, const char *where, kvs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = prep(db,
                  "SELECT json_array_length(value), json_extract(value,'$[0]'), "
                  "json_extract(value,'$[1]') FROM json_each(?1)",
                  arr, &st, err);
    int64_t cap = 0;
    while (rc == KVS_OK && sqlite3_step(st) == SQLITE_ROW) {
        if (sqlite3_column_int(st, 0) != 2 || !is_num(st, 1) || !is_num(st, 2)) {
            rc = kvs_errf(err, KVS_EINVAL, "%s: points[%lld] must be [x, seconds]", where,
                          (long long)o->n);
            break;
        }
        double x = sqlite3_column_double(st, 1), y = sqlite3_column_double(st, 2);
        if (y < 0 || x < 0 || (o->n > 0 && x <= o->x[o->n - 1])) {
            rc = kvs_errf(err, KVS_EINVAL, "%s: points[%lld] must have x increasing, "
                                           "both >= 0", where, (long long)o->n);
            break;
        }
        if (o->n == cap) {
            cap = cap ? 2 * cap : 16;
            double *nx = realloc(o->x, (size_t)cap * sizeof *nx);
            if (nx)
                o->x = nx;
            double *ny = nx ? realloc(o->y, (size_t)cap * sizeof *ny) : NULL;
            if (!nx || !ny) {
                rc = kvs_errf(err, KVS_ENOMEM, "out of memory (profile)");
                break;
            }
            o->y = ny;
        }
        o->x[o->n] = x;
        o->y[o->n++] = y;
    }
    sqlite3_finalize(st);
    if (rc == KVS_OK && o->n == 0)
        rc = kvs_errf(err, KVS_EINVAL, "%s: no points", where);
    return rc;
}

static int parse_linear(sqlite3 *db, const char *feats, const char *coef, prof_op *o,
                        const char *where, kvs_err *err)
{
    const profile_feat *f = profile_op_feats(o->info->kind, &o->nf);
    sqlite3_stmt *st = NULL;
    int rc = prep(db, "SELECT value FROM json_each(?1)", feats ? feats : "[]", &st, err);
    int k = 0;
    while (rc == KVS_OK && sqlite3_step(st) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        if (k >= o->nf || !v || strcmp(v, profile_feat_name(f[k])))
            rc = kvs_errf(err, KVS_EINVAL, "%s: features[%d] must be '%s'", where, k,
                          k < o->nf ? profile_feat_name(f[k]) : "(none)");
        k++;
    }
    sqlite3_finalize(st);
    if (rc == KVS_OK && k != o->nf)
        rc = kvs_errf(err, KVS_EINVAL, "%s: %d features, expected %d", where, k, o->nf);
    if (rc != KVS_OK)
        return rc;
    rc = prep(db, "SELECT value FROM json_each(?1)", coef ? coef : "[]", &st, err);
    k = 0;
    while (rc == KVS_OK && sqlite3_step(st) == SQLITE_ROW) {
        if (k >= o->nf || !is_num(st, 0) || sqlite3_column_double(st, 0) < 0)
            rc = kvs_errf(err, KVS_EINVAL, "%s: coef[%d] must be a number >= 0", where, k);
        else
            o->coef[k] = sqlite3_column_double(st, 0);
        k++;
    }
    sqlite3_finalize(st);
    if (rc == KVS_OK && k != o->nf)
        rc = kvs_errf(err, KVS_EINVAL, "%s: %d coefficients, expected %d", where, k, o->nf);
    return rc;
}

static int parse_op(sqlite3 *db, sqlite3_stmt *st, profile *p, kvs_err *err)
{
    char where[96];
    int idx = sqlite3_column_int(st, 0);
    const char *name = (const char *)sqlite3_column_text(st, 1);
    const char *method = (const char *)sqlite3_column_text(st, 3);
    snprintf(where, sizeof where, "profile params: ops[%d] (%s)", idx, name ? name : "?");
    const profile_op_info *info = name ? profile_op_find(name) : NULL;
    if (!info || info->kind == PROFILE_OP_KIND_STEP || info->kind == PROFILE_OP_KIND_LAYER)
        return kvs_errf(err, KVS_EINVAL, "%s: unknown op", where);
    for (size_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].info == info)
            return kvs_errf(err, KVS_EINVAL, "%s: op given twice", where);
    if (p->n_ops >= PROFILE_MAX_OPS)
        return kvs_errf(err, KVS_EINVAL, "%s: too many ops", where);
    if (sqlite3_column_type(st, 2) != SQLITE_INTEGER || sqlite3_column_int(st, 2) < 0 ||
        sqlite3_column_int(st, 2) > 16)
        return kvs_errf(err, KVS_EINVAL, "%s: per_layer must be an integer in [0, 16]", where);
    prof_op *o = &p->ops[p->n_ops++];
    o->info = info;
    o->per_layer = sqlite3_column_int(st, 2);
    int table = info->kind == PROFILE_OP_KIND_TOKENS || info->kind == PROFILE_OP_KIND_SEQS;
    if (!method || strcmp(method, table ? "interp" : "nnls"))
        return kvs_errf(err, KVS_EINVAL, "%s: method must be '%s'", where, table ? "interp" : "nnls");
    if (table)
        return parse_points(db, (const char *)sqlite3_column_text(st, 4) ? (const char *)sqlite3_column_text(st, 4) : "[]",
                            o, where, err);
    return parse_linear(db, (const char *)sqlite3_column_text(st, 5),
                        (const char *)sqlite3_column_text(st, 6), o, where, err);
}

int profile_from_json(sqlite3 *db, const char *js, profile **out, kvs_err *err)
{
    *out = NULL;
    profile *p = calloc(1, sizeof *p);
    if (!p)
        return kvs_errf(err, KVS_ENOMEM, "out of memory (profile)");
    sqlite3_stmt *st = NULL;
    int rc = parse_head(db, js, p, err);
    if (rc == KVS_OK)
        rc = prep(db,
                  "SELECT key, json_extract(value,'$.op'), json_extract(value,'$.per_layer'), "
                  "json_extract(value,'$.method'), json_extract(value,'$.points'), "
                  "json_extract(value,'$.features'), json_extract(value,'$.coef') "
                  "FROM json_each(?1, '$.ops')",
                  js, &st, err);
    while (rc == KVS_OK && sqlite3_step(st) == SQLITE_ROW)
        rc = parse_op(db, st, p, err);
    sqlite3_finalize(st);
    for (size_t i = 0; rc == KVS_OK && i < profile_op_count(); i++) {
        const profile_op_info *info = profile_op_at(i);
        int found = info->kind == PROFILE_OP_KIND_STEP || info->kind == PROFILE_OP_KIND_LAYER;
        for (size_t j = 0; j < p->n_ops; j++)
            found |= p->ops[j].info == info;
        if (!found)
            rc = kvs_errf(err, KVS_EINVAL, "profile params: op '%s' missing", info->name);
    }
    if (rc != KVS_OK) {
        profile_free(p);
        return rc;
    }
    *out = p;
    return KVS_OK;
}
