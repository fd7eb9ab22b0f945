/* store_spool.h — no run lost to a busy database.  A simulated run is
 * written in one short transaction (store_write_run); when the database is
 * locked, store_save_run waits with a randomised exponential backoff for
 * as long as the store's wait limit (store_set_wait, $KVSIM_DB_WAIT_S,
 * default 600 s), telling the caller through the wait hook every few
 * seconds.  If the database is still locked after the limit, the run is
 * kept in a spool file next to the database:
 *
 *     DB.spool/run-YYYYMMDDTHHMMSSZ-PID-N.db
 *
 * A spool file is itself a kvsim database (same schema) holding that one
 * run with its requests, steps and class metrics, plus a `spool` table of
 * key/value rows that say what it is (format, target database, when and by
 * which process it was written, and the group it belongs to: the sweep
 * point or search probe with its parameters, or the compare variant, so
 * the import restores the sweep_points, sweep_point_params and
 * compare_runs rows the run's INSERT would have written).  A calibration
 * is spooled the same way, as DB.spool/calib-....db (store_save_calib).  It is
 * written under a hidden temporary name and renamed when complete, so a
 * spool file is either whole or absent.
 *
 * store_spool_import moves every spooled run into the database, each in one
 * transaction that also records the file's name in `spool_imports` (so a
 * file imported twice, by two writers racing or after a kill between the
 * commit and the unlink, is imported once) and then deletes the file.
 * store_open_writable calls it, so the next writer imports; `kvsim store
 * recover` calls it on demand.
 */
#ifndef STORE_SPOOL_H
#define STORE_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "store_calib.h"

/* store_write_run, retried while the database is locked (see above).
 * KVS_OK with *run_id set when stored.  When spooled: KVS_EDB "PATH:
 * database is locked for N s; the run is kept in SPOOLFILE (...)", with
 * *run_id 0; the run is then safe on disk.  Any other failure is
 * store_write_run's. */
int store_save_run(store *s, const run_config *cfg, const run_result *res, int64_t *run_id,
                   kvs_err *err);

/* store_save_run with request rows staged while the run simulated
 * (store.h, store_write_run_staged); a run spooled is written whole from
 * res.  stage NULL: store_save_run. */
int store_save_run_staged(store *s, const run_config *cfg, const run_result *res,
                          const store_stage *stage, int64_t *run_id, kvs_err *err);

/* The same for store_write_failed_run. */
int store_save_failed_run(store *s, const run_config *cfg, const trace *tr, const char *error,
                          const char *started_at, double wall_s, int64_t *run_id,
                          kvs_err *err);

/* A calibration, its kernel measurements and the profile fitted from it
 * (store_calib_write_profile), retried and spooled the same way (spool
 * file DB.spool/calib-....db, imported with the runs: new calib_id and
 * profile_id).  When spooled: KVS_EDB "...; the calibration is kept in
 * SPOOLFILE ...", *calib_id and *profile_id 0. */
int store_save_calib(store *s, const store_calib_meta *meta, const store_calib_meas *m,
                     size_t n, const char *params_json, const char *fit_error_json,
                     int64_t *calib_id, int64_t *profile_id, kvs_err *err);

/* What an import did. */
typedef struct store_spool_report {
    int64_t imported;     /* spool files whose runs are now in the database */
    int64_t calibrations; /* calibrations among them */
    int64_t duplicates;   /* files already imported before (deleted) */
    int64_t left;         /* files left in the spool (locked, unreadable) */
    int64_t first_run_id; /* run_id of the first imported run; 0 = none */
    char error[1024];     /* why the first file was left; "" = none */
} store_spool_report;

/* Import every complete spool file of this store's database (in name
 * order, i.e. the order they were written).  KVS_OK when the spool
 * directory is absent or every file was imported; otherwise KVS_EDB naming
 * the first file left and why (the rest are still tried).  Cost: one
 * transaction per file. */
int store_spool_import(store *s, store_spool_report *rep, kvs_err *err);

/* The spool directory of this store's database ("DB.spool") into buf;
 * KVS_EINVAL when the database has no file (":memory:", a temporary
 * database). */
int store_spool_dir(store *s, char *buf, size_t cap, kvs_err *err);

#endif
