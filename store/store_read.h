/* store_read.h — reading one stored run back: its `runs` row as the
 * run_config and run_summary it was written from (store_write_run /
 * store_write_failed_run in store_run.c). */
#ifndef STORE_READ_H
#define STORE_READ_H

#include <stdint.h>

#include "../base/kvs.h"
#include "../sim/run.h"
#include "store.h"

/* One `runs` row. */
typedef struct store_run_row {
    int64_t run_id;       /* runs.run_id */
    int finished;         /* 1 status 'finished', 0 'failed' */
    char error[1024];     /* runs.error, "" when none */
    char started_at[64];  /* ISO 8601 UTC start, "" when NULL */
    double wall_s;        /* seconds of wall time, NAN when NULL */
    run_config cfg;       /* the configuration columns (text columns truncated to fit) */
    run_summary sum;      /* the summary columns: NAN / 0 where NULL */
} store_run_row;

/* Read run `run_id`.  KVS_EINVAL "run ID: no such run", KVS_EDB on a
 * database error (with the path).  Cost: one primary-key lookup. */
int store_read_run(store *s, int64_t run_id, store_run_row *out, kvs_err *err);

#endif
