/* api_internal.h — the handles of kvsim.h as the api files share them
 * (kvsim.c: runs and databases; kvsim_catalog.c: flags, models, GPUs;
 * kvsim_batch.c: compare, sweep, capacity).  Not installed. */
#ifndef KVSIM_API_INTERNAL_H
#define KVSIM_API_INTERNAL_H

#include "../job/job.h"
#include "kvsim.h"

struct kvsim_db {
    store *st;       /* owned */
};

struct kvsim_run {
    job_opts opts;   /* the flags, then the resolved configuration */
    run_result res;  /* after execute; res.tr points at tr */
    trace tr;        /* the requests simulated (owned) */
    int executed;    /* 1 after a successful simulation */
    int64_t run_id;  /* 0 until stored */
    kvs_err err;     /* the last error */
};

/* "MSG" of e into err[1024] (may be NULL); returns rc. */
int api_err_out(char *err, int rc, const char *msg);

#endif
