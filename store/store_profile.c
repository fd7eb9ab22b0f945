/* store_profile.c — the "calibrated[:ID]" cost model from the store: find a
 * stored profile, refuse one fitted for another GPU or model unless forced,
 * and wrap it as a cost model (cost/profile.h). */
#include "store_calib.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cost/profile.h"

/* "calibrated" -> 0, "calibrated:ID" -> ID >= 1. */
static int parse_spec(const char *spec, int64_t *id, kvs_err *err)
{
    *id = 0;
    if (!strcmp(spec, "calibrated"))
        return KVS_OK;
    if (strncmp(spec, "calibrated:", 11))
        return kvs_errf(err, KVS_EINVAL, "'%s' is not calibrated[:ID]", spec);
    char *end;
    errno = 0;
    long long v = strtoll(spec + 11, &end, 10);
    if (errno || *end || end == spec + 11 || v < 1)
        return kvs_errf(err, KVS_EINVAL, "'%s': ID must be a positive integer", spec);
    *id = v;
    return KVS_OK;
}

static int same_shape(const model_spec *a, const model_spec *b)
{
    return a->hidden == b->hidden && a->layers == b->layers && a->heads == b->heads &&
           a->kv_heads == b->kv_heads && a->head_dim == b->head_dim &&
           a->intermediate == b->intermediate && a->vocab == b->vocab;
}

/* "model@gpu, ..." of the profiles in the database, for error messages. */
static void list_profiles(sqlite3 *db, char *buf, size_t n)
{
    sqlite3_stmt *st = NULL;
    size_t len = 0;
    buf[0] = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT model, gpu, max(profile_id) FROM profiles "
                           "GROUP BY model, gpu ORDER BY 3 DESC LIMIT 8",
                           -1, &st, NULL) == SQLITE_OK)
        while (sqlite3_step(st) == SQLITE_ROW && len + 1 < n)
            len += (size_t)snprintf(buf + len, n - len, "%s%s on %s (id %lld)", len ? ", " : "",
                                    (const char *)sqlite3_column_text(st, 0),
                                    (const char *)sqlite3_column_text(st, 1),
                                    (long long)sqlite3_column_int64(st, 2));
    sqlite3_finalize(st);
    if (!buf[0])
        snprintf(buf, n, "none");
}

static int find_profile(sqlite3 *db, int64_t id, const model_spec *m, const char *gpu, int force,
                        store_profile_row *row, kvs_err *err)
{
    if (id > 0)
        return store_profile_find(db, id, NULL, NULL, row, err);
    int rc = store_profile_find(db, 0, m->name, gpu, row, err);
    if (rc == KVS_EINVAL && force)
        rc = store_profile_find(db, 0, m->name, NULL, row, err);
    if (rc == KVS_EINVAL) {
        char have[400];
        list_profiles(db, have, sizeof have);
        return kvs_errf(err, KVS_EINVAL,
                        "calibrated: no profile for model '%s' on gpu '%s' (stored: %s); "
                        "run `kvsim calibrate --model %s --gpu %s`, or pick one with "
                        "calibrated:ID and --force-profile",
                        m->name, gpu, have, m->name, gpu);
    }
    return rc;
}

int store_calibrated_cost_create(sqlite3 *db, const char *spec, const model_spec *m,
                           const char *gpu_name, int force, cost_model *out, kvs_err *err)
{
    out->vt = NULL;
    out->self = NULL;
    int64_t id;
    int rc = parse_spec(spec ? spec : "", &id, err);
    if (rc != KVS_OK)
        return rc;
    const char *gpu = gpu_name ? gpu_name : "";
    store_profile_row row;
    if ((rc = find_profile(db, id, m, gpu, force, &row, err)) != KVS_OK)
        return rc;
    profile *p = NULL;
    char desc[512] = "";
    rc = profile_from_json(db, row.params_json, &p, err);
    if (rc == KVS_OK && !force) {
        const model_spec *pm = profile_model(p);
        if (strcmp(row.gpu, gpu))
            rc = kvs_errf(err, KVS_EINVAL,
                          "%s: profile %lld was measured for gpu '%s' (device %s), not "
                          "'%s'; use --force-profile to use it anyway",
                          spec, (long long)row.profile_id, row.gpu, row.device, gpu);
        else if (strcmp(row.model, m->name) || strcmp(pm->name, m->name))
            rc = kvs_errf(err, KVS_EINVAL,
                          "%s: profile %lld was fitted for model '%s', not '%s'; use "
                          "--force-profile to use it anyway",
                          spec, (long long)row.profile_id, row.model, m->name);
        else if (!same_shape(pm, m))
            rc = kvs_errf(err, KVS_EINVAL,
                          "%s: profile %lld was fitted for a different shape of '%s' "
                          "(hidden %lld, layers %lld, heads %lld/%lld kv); use --force-profile "
                          "to use it anyway",
                          spec, (long long)row.profile_id, m->name, (long long)pm->hidden,
                          (long long)pm->layers, (long long)pm->heads, (long long)pm->kv_heads);
    }
    if (rc == KVS_OK)
        snprintf(desc, sizeof desc,
                 "calibrated: profile %lld (calibration %lld, model %s, gpu %s, device %s, %s; "
                 "overhead %.3g s)%s",
                 (long long)row.profile_id, (long long)row.calib_id, row.model, row.gpu,
                 row.device, row.created_at, profile_overhead_s(p),
                 force && (strcmp(row.gpu, gpu) || strcmp(row.model, m->name)) ? " [forced]" : "");
    store_profile_row_free(&row);
    if (rc != KVS_OK) {
        profile_free(p);
        return rc;
    }
    return cost_profile_create(p, desc, out, err);
}
