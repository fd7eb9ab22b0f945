/* job_stream.c — a run's request rows staged while it simulates (see
 * job_stream.h). */
#include "job_stream.h"

#include <string.h>

#include "../store/store_spool.h"

/* The writer: stages the rows made ready, in order, until stopped with
 * every row made ready staged (so that what is staged depends on the run
 * alone, not on how the threads were scheduled), or until a write fails. */
static void *writer_main(void *arg)
{
    job_stream *js = arg;
    for (;;) {
        pthread_mutex_lock(&js->mu);
        while (!js->stop && js->ready == store_stage_count(js->stage))
            pthread_cond_wait(&js->cv, &js->mu);
        const int64_t hi = js->ready;
        const run_live *live = js->live;
        const int stop = js->stop;
        pthread_mutex_unlock(&js->mu);
        /* only this thread changes the stage's count while it runs */
        const int64_t lo = store_stage_count(js->stage);
        if (hi == lo) {
            if (stop)
                return NULL;
            continue;
        }
        kvs_err e;
        if (store_stage_rows(js->stage, live, lo, hi, &e)) {
            pthread_mutex_lock(&js->mu);
            js->failed = 1;
            pthread_mutex_unlock(&js->mu);
            return NULL;
        }
    }
}

/* run_row_sink.ready, on the simulating thread. */
static void on_ready(void *ctx, const run_live *live, int64_t k)
{
    job_stream *js = ctx;
    pthread_mutex_lock(&js->mu);
    js->live = live;
    js->ready = k;
    pthread_cond_signal(&js->cv);
    pthread_mutex_unlock(&js->mu);
}

/* run_row_sink.stop: the writer stages what is ready and ends, before the
 * run touches its rows. */
static void on_stop(void *ctx)
{
    job_stream *js = ctx;
    if (js->joined)
        return;
    pthread_mutex_lock(&js->mu);
    js->stop = 1;
    pthread_cond_signal(&js->cv);
    pthread_mutex_unlock(&js->mu);
    pthread_join(js->th, NULL);
    js->joined = 1;
}

int job_stream_start(job_stream *js, store *st, const trace *tr)
{
    memset(js, 0, sizeof *js);
    js->sink = (run_row_sink){on_ready, on_stop, js};
    kvs_err e;
    if (!st || store_stage_open(st, tr, &js->stage, &e))
        return 0;
    pthread_mutex_init(&js->mu, NULL);
    pthread_cond_init(&js->cv, NULL);
    if (pthread_create(&js->th, NULL, writer_main, js)) {
        pthread_cond_destroy(&js->cv);
        pthread_mutex_destroy(&js->mu);
        store_stage_close(js->stage);
        js->stage = NULL;
        return 0;
    }
    js->st = st;
    return 1;
}

void job_stream_end(job_stream *js)
{
    if (!js->st)
        return;
    on_stop(js);
    pthread_cond_destroy(&js->cv);
    pthread_mutex_destroy(&js->mu);
    store_stage_close(js->stage);
    js->stage = NULL;
    js->st = NULL;
}

int job_stream_save(job_stream *js, store *st, const run_config *cfg, const run_result *res,
                    int64_t *run_id, int64_t *streamed, kvs_err *err)
{
    *streamed = 0;
    if (!js->st)
        return store_save_run(st, cfg, res, run_id, err);
    on_stop(js);
    if (js->failed) { /* written whole, after the stage (and what it holds) is gone */
        job_stream_end(js);
        return store_save_run(st, cfg, res, run_id, err);
    }
    const store_stage *g = js->stage;
    int rc = store_save_run_staged(st, cfg, res, g, run_id, err);
    if (rc == KVS_OK && g)
        *streamed = store_stage_count(g);
    job_stream_end(js);
    return rc;
}
