/* job_stream.h — a run's request rows written by a second thread while the
 * run simulates (issue "Speed": rows written while the simulation runs).
 *
 * The simulation holds no lock on the database (docs/hardening.md), so
 * the thread stages the rows in a private temporary database attached to
 * the store's connection (store.h, store_stage_*), which the simulating
 * thread does not touch until the run ends.  While the engine runs, the
 * run layer says which requests are done (sim/run.h run_row_sink) and the
 * thread stages their rows, one transaction per batch of done requests;
 * when the engine is done it stages what is left of those batches and
 * ends (the rows staged depend on the run alone, not on the threads'
 * timing).
 * job_stream_save stores the run as store_save_run does (one short
 * transaction, the same waiting and spooling), copying the staged rows in
 * and inserting only the rest.  The stored rows are bit for bit those of
 * the usual path; if staging fails (a full temporary directory, say) the
 * run is stored the usual way.
 */
#ifndef JOB_STREAM_H
#define JOB_STREAM_H

#include <pthread.h>
#include <stdint.h>

#include "../sim/run.h"
#include "../store/store.h"

typedef struct job_stream {
    store *st;             /* the run's store, borrowed; NULL: not streaming */
    store_stage *stage;    /* the staging database */
    pthread_t th;          /* the writer */
    pthread_mutex_t mu;    /* guards live, ready, stop, failed */
    pthread_cond_t cv;     /* ready grew, or stop */
    const run_live *live;  /* the live run (from its first ready) */
    int64_t ready;         /* requests [0, ready) are done (run_row_sink.ready) */
    int stop;              /* no more rows: the writer ends */
    int joined;            /* the writer has ended */
    int failed;            /* staging failed: the run is stored the usual way */
    run_row_sink sink;     /* what the run layer calls */
} job_stream;

/* Start staging run rows of tr for st: 1 when started (js->sink to be
 * handed to the run), 0 when not (st NULL, no staging database, no
 * thread: nothing changed).  js is initialised either way.  Cost: an
 * ATTACH, a CREATE TABLE and one read. */
int job_stream_start(job_stream *js, store *st, const trace *tr);

/* Stop the writer (if the run has not) and store the run with its staged
 * rows (store_save_run_staged: the same waits, spooling and errors as
 * store_save_run); *streamed = the rows staged, 0 when the usual path
 * wrote them all.  The stream is over after it.  A stream that did not
 * start: store_save_run.  Cost: O(rows not staged) inserts plus the copy. */
int job_stream_save(job_stream *js, store *st, const run_config *cfg, const run_result *res,
                    int64_t *run_id, int64_t *streamed, kvs_err *err);

/* Give the stream up (the run failed): the writer stopped and the staging
 * database detached.  A no-op for a stream that did not start or is over. */
void job_stream_end(job_stream *js);

#endif
