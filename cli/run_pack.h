/* run_pack.h — one simulated run as a byte buffer and back: how an MPI rank
 * ships a finished (or failed) sweep point to rank 0, which alone writes the
 * database.  The buffer holds the run_config, the trace's requests and
 * identity, and the run_result (per-request results, summary, and the steps
 * and their members when recorded), or the error of a failed run.
 *
 * Format: a header (magic "KVSP", format version, the byte sizes of the
 * structs it carries), then each struct's bytes and each array with its
 * length.  Structs travel as their in-memory bytes, so both ends must be the
 * same kvsim build on machines of the same architecture (an MPI job runs one
 * binary); the header sizes catch a mismatch, and every length is checked
 * against the buffer on the way in.
 */
#ifndef RUN_PACK_H
#define RUN_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "../base/kvs.h"
#include "../sim/run.h"
#include "../traces/trace.h"

typedef struct run_packed {
    int64_t point_index;   /* the sweep point this run is */
    int status;            /* 0 finished, 1 failed after it started (stored as
                            * failed), 2 failed before it started (not stored) */
    char error[1200];      /* why it failed, "" when finished */
    run_config cfg;        /* the resolved configuration */
    trace tr;              /* the requests (owned after unpack) */
    run_result res;        /* status 0: the result (owned); res.tr points at tr */
} run_packed;

/* Serialize p (res.reqs over tr.n requests; steps and members when
 * res.steps is non-NULL) into a malloc'd buffer *buf of *len bytes.
 * Cost: O(requests + steps + members) copies. */
int run_pack(const run_packed *p, unsigned char **buf, size_t *len, kvs_err *err);

/* Parse a buffer made by run_pack into *out (owning its arrays; free with
 * run_packed_free).  KVS_EINVAL on a truncated or foreign buffer. */
int run_unpack(const unsigned char *buf, size_t len, run_packed *out, kvs_err *err);

/* Free the arrays of an unpacked run (trace and result). */
void run_packed_free(run_packed *p);

#endif
