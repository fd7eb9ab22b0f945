/* itl.c — inter-token latency streamed from step members (itl.h). */
#include "itl.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>

int run_itl_makes_token(const run_itl_req *q, const trace_req *r, const sched_member *m)
{
    return q->gen < r->output_tokens &&
           !(m->kind == SCHED_MEMBER_PREFILL && m->context < r->prompt_tokens + q->gen);
}

int run_itl_init(run_itl *t, const trace *tr, double *max_itl_s, kvs_err *err)
{
    *t = (run_itl){0};
    size_t nn = (size_t)(tr->n > 0 ? tr->n : 1);
    t->req = malloc(nn * sizeof *t->req);
    t->max_itl_s = max_itl_s;
    t->tr = tr->reqs;
    if (!t->req || !max_itl_s || hist_init(&t->h)) {
        free(t->req);
        t->req = NULL;
        return kvs_errf(err, KVS_ENOMEM, "run: out of memory");
    }
    for (int64_t i = 0; i < tr->n; i++) {
        max_itl_s[i] = NAN;
        t->req[i] = (run_itl_req){0.0, 0, 0};
    }
    return KVS_OK;
}

void run_itl_member(run_itl *t, const sched_member *m, double t_end)
{
    run_itl_req *q = &t->req[m->req_id];
    const trace_req *r = &t->tr[m->req_id];
    if (!run_itl_makes_token(q, r, m))
        return;
    if (q->gen > 0) {
        double gap = t_end - q->last_tok_s;
        if (gap != t->run_gap_s) {
            hist_add_n(&t->h, t->run_gap_s, t->run_len);
            t->run_gap_s = gap;
            t->run_len = 0;
        }
        t->run_len++;
        double *mx = &t->max_itl_s[m->req_id];
        if (!(gap <= *mx))
            *mx = gap;
    }
    q->gen++;
    q->last_tok_s = t_end;
    t->n_done += q->gen == r->output_tokens;
}

void run_itl_leap_init(run_itl_leap *l)
{
    l->max_s = -INFINITY;
    l->end_s = 0.0;
}

void run_itl_leapt_step(run_itl *t, run_itl_leap *l, const sched_step *st)
{
    const double t_end = st->start_s + st->dur_s;
    const double gap = t_end - st->start_s; /* the previous step ended at start_s */
    if (gap != t->run_gap_s) {
        hist_add_n(&t->h, t->run_gap_s, t->run_len);
        t->run_gap_s = gap;
        t->run_len = 0;
    }
    t->run_len += st->batch.n_decode;
    if (!(gap <= l->max_s))
        l->max_s = gap;
    l->end_s = t_end;
}

void run_itl_leap_end(run_itl *t, run_itl_leap *l, const int32_t *ids, int64_t n,
                      int64_t steps)
{
    for (int64_t k = 0; k < n; k++) {
        run_itl_req *q = &t->req[ids[k]];
        const int64_t out = t->tr[ids[k]].output_tokens;
        assert(q->gen > 0 && q->gen + steps <= out);
        q->gen += (int32_t)steps;
        q->last_tok_s = l->end_s;
        double *mx = &t->max_itl_s[ids[k]];
        if (!(l->max_s <= *mx))
            *mx = l->max_s;
        t->n_done += q->gen == out;
    }
    run_itl_leap_init(l);
}

void run_itl_finish(run_itl *t, run_summary *sum)
{
    hist_add_n(&t->h, t->run_gap_s, t->run_len);
    t->run_len = 0;
    sum->itl = hist_dist(&t->h);
    sum->itl_std_s = hist_std(&t->h);
    sum->n_itl = t->h.n;
}

void run_itl_free(run_itl *t)
{
    free(t->req);
    t->req = NULL;
    hist_free(&t->h);
}
