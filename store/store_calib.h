/* store_calib.h — the calibration tables of the store: a calibration (device,
 * versions, properties) with its kernel measurements, and the cost profiles
 * fitted from it.  Writers take the store (one transaction each); the
 * profile reader takes a raw handle so the run layer can load a profile from
 * any open database.  Schema: store/schema.c. */
#ifndef STORE_CALIB_H
#define STORE_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "../base/kvs.h"
#include "../cost/cost.h"
#include "../models/model.h"
#include "store.h"

/* One calibrations row (strings may be NULL -> SQL NULL, except device). */
typedef struct store_calib_meta {
    const char *device;          /* "cpu" or "cuda" */
    const char *device_name;     /* "NVIDIA H100 80GB HBM3", CPU model */
    const char *gpu;             /* GPU name profiles made from it stand for */
    const char *model;           /* model name */
    const char *driver_version;  /* CUDA driver "12.4", NULL on CPU */
    const char *runtime_version; /* CUDA runtime, NULL on CPU */
    const char *props_json;      /* device properties + grid, JSON object */
} store_calib_meta;

/* One kernel_measurements row. */
typedef struct store_calib_meas {
    const char *op;         /* "qkv_proj", "decode_attn", "step", ... */
    const char *shape_json; /* the timed shape, JSON object */
    int64_t tokens;         /* tokens in the timed call */
    int64_t batch;          /* sequences */
    int64_t context;        /* context per sequence, tokens (0 if none) */
    double median_s, p10_s, p90_s; /* seconds over repeats (nearest rank) */
    int64_t repeats;        /* timed runs */
} store_calib_meas;

/* Insert a calibration with status 'finished' and its n measurements, in
 * one transaction.  Cost: n inserts. */
int store_calib_write(store *s, const store_calib_meta *meta, const store_calib_meas *m,
                      size_t n, int64_t *calib_id, kvs_err *err);

/* Insert a profile fitted from calib_id. */
int store_profile_write(store *s, int64_t calib_id, const char *device, const char *gpu,
                        const char *model, const char *params_json,
                        const char *fit_error_json, int64_t *profile_id, kvs_err *err);

/* A calibration, its measurements and the profile fitted from it (device,
 * gpu and model from meta), in one transaction. */
int store_calib_write_profile(store *s, const store_calib_meta *meta, const store_calib_meas *m,
                              size_t n, const char *params_json, const char *fit_error_json,
                              int64_t *calib_id, int64_t *profile_id, kvs_err *err);

typedef struct store_profile_row {
    int64_t profile_id;
    int64_t calib_id;
    char created_at[32];   /* ISO-8601 UTC */
    char device[16];       /* "cpu", "cuda" */
    char gpu[64];
    char model[256];
    char *params_json;     /* owned */
    char *fit_error_json;  /* owned, may be NULL */
} store_profile_row;

/* profile_id > 0: that profile (KVS_EINVAL if absent).  profile_id == 0:
 * the newest profile whose model and gpu equal the given ones (either may
 * be NULL = any); KVS_EINVAL "no profile ..." when none.  Cost: one
 * indexed query. */
int store_profile_find(sqlite3 *db, int64_t profile_id, const char *model, const char *gpu,
                       store_profile_row *out, kvs_err *err);
void store_profile_row_free(store_profile_row *r);

/* The cost model "calibrated" (newest profile for m->name on gpu_name) or
 * "calibrated:ID".  A profile fitted for another GPU, another model name or
 * another shape is refused (KVS_EINVAL, naming both) unless force; with
 * force and no ID, the newest profile of the model on any GPU is taken.
 * describe() names the profile id, calibration, model, GPU and device.
 * Cost: one or two indexed SELECTs and a JSON parse. */
int store_calibrated_cost_create(sqlite3 *db, const char *spec, const model_spec *m,
                                 const char *gpu_name, int force, cost_model *out,
                                 kvs_err *err);

#endif
