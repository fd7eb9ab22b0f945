/* itl.c — inter-token latency streamed from step members (itl.h). */
#include "itl.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>


static void src_init(run_itl_src *s) { *s = (run_itl_src){0}; }

int run_itl_init(run_itl *t, const trace *tr, int64_t n_src, kvs_err *err)
{
    *t = (run_itl){0};
    size_t nn = (size_t)(tr->n > 0 ? tr->n : 1);
    /* live state zero-filled (no token yet), committed as it is written */
    t->req = vmem_init(&t->req_mem, nn * sizeof *t->req);
    if (!t->req)
        t->req = calloc(nn, sizeof *t->req);
    t->max_s = malloc(nn * sizeof *t->max_s);
    t->src = calloc((size_t)(n_src > 0 ? n_src : 1), sizeof *t->src);
    t->n_src = n_src;
    t->tr = tr->reqs;
    if (!t->req || !t->max_s || !t->src || hist_init(&t->h)) {
        run_itl_free(t);
        return kvs_errf(err, KVS_ENOMEM, "run: out of memory");
    }
    t->n = tr->n;
    t->window = 1;
    for (int64_t i = 0; i < tr->n; i++) {
        t->max_s[i] = NAN;
        if (tr->reqs[i].output_tokens > t->window)
            t->window = tr->reqs[i].output_tokens;
    }
    for (int64_t k = 0; k < n_src; k++)
        src_init(&t->src[k]);
    return KVS_OK;
}

/* The pages of live state that requests [0, k) alone used go back,
 * VMEM_BATCH bytes at least at a time (an unmap). */
void run_itl_release(run_itl *t, int64_t k)
{
    assert(k >= 0 && k <= t->n);
    vmem_release_batched(&t->req_mem, (size_t)k * sizeof *t->req);
}

/* The source's pending run goes into the bins and its sums. */
static void src_flush(run_itl *t, run_itl_src *s)
{
    hist_add_moments(&s->sum, &s->sumsq, s->run_gap_s, s->run_len);
    hist_add_n_bins(&t->h, s->run_gap_s, s->run_len);
    s->run_len = 0;
}

/* One more gap of s; a gap unlike the pending run's flushes it. */
static void src_gap(run_itl *t, run_itl_src *s, double gap, int64_t count)
{
    if (gap != s->run_gap_s) {
        src_flush(t, s);
        s->run_gap_s = gap;
    }
    s->run_len += count;
}

void run_itl_members(run_itl *t, int64_t src, const sched_member *m, int64_t nm, double t_end,
                     int held)
{
    run_itl_src *s = &t->src[src];
    run_itl_req *req = t->req;
    const trace_req *tr = t->tr;
    int64_t done = 0;
    double *max_s = t->max_s;
    for (int64_t i = 0; i < nm; i++) {
        const int32_t id = m[i].req_id;
        run_itl_req *q = &req[id];
        const trace_req *r = &tr[id];
        const int d = run_itl_step_member(q, r, &m[i], held);
        if (d == 0)
            continue;
        if (d == 2) {
            const double gap = t_end - q->last_tok_s;
            src_gap(t, s, gap, 1);
            if (!(gap <= max_s[id]))
                max_s[id] = gap;
        }
        q->last_tok_s = t_end;
        done += q->gen == r->output_tokens;
    }
    t->n_done += done;
}

/* The record of s's longest gaps doubled, in order from 0.  -1 out of
 * memory (nothing changed). */
static int mx_grow(run_itl_src *s)
{
    const int64_t cap = s->mx_cap ? 2 * s->mx_cap : 16;
    int64_t *st = malloc((size_t)cap * sizeof *st);
    double *g = malloc((size_t)cap * sizeof *g);
    if (!st || !g) {
        free(st);
        free(g);
        return -1;
    }
    for (int64_t k = 0; k < s->mx_n; k++) {
        const int64_t i = (s->mx_head + k) & (s->mx_cap - 1);
        st[k] = s->mx_step[i];
        g[k] = s->mx_gap[i];
    }
    free(s->mx_step);
    free(s->mx_gap);
    s->mx_step = st;
    s->mx_gap = g;
    s->mx_head = 0;
    s->mx_cap = cap;
    return 0;
}

void run_itl_leapt_step(run_itl *t, int64_t src, const sched_step *st)
{
    run_itl_src *s = &t->src[src];
    if (s->mx_n == s->mx_cap && mx_grow(s)) {
        t->oom = 1;
        return;
    }
    const double t_end = st->start_s + st->dur_s;
    const double gap = t_end - st->start_s; /* the previous step ended at start_s */
    src_gap(t, s, gap, st->batch.n_decode);
    s->end_s = t_end;
    /* its gap ends the record: the gaps it beats go (a count that reaches
     * one reaches it too), as do steps older than any count can reach */
    const int64_t m = s->mx_cap - 1, now = ++s->leapt, oldest = now - t->window;
    int64_t *restrict stp = s->mx_step;
    double *restrict g = s->mx_gap;
    int64_t h = s->mx_head, n = s->mx_n;
    while (n > 0 && g[(h + n - 1) & m] <= gap)
        n--;
    while (n > 0 && stp[h] <= oldest) {
        h = (h + 1) & m;
        n--;
    }
    const int64_t i = (h + n) & m;
    stp[i] = now;
    g[i] = gap;
    s->mx_head = h;
    s->mx_n = n + 1;
}

/* The longest gap of s's last c leapt steps (1 <= c <= window, c <=
 * s->leapt): that of the oldest recorded step among them.  O(log window). */
static double mx_last(const run_itl_src *s, int64_t c)
{
    const int64_t from = s->leapt - c, m = s->mx_cap - 1; /* steps > from */
    int64_t lo = 0, hi = s->mx_n - 1; /* the last one is step s->leapt: > from */
    assert(s->mx_n > 0 && s->mx_step[(s->mx_head + hi) & m] > from);
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (s->mx_step[(s->mx_head + mid) & m] > from)
            hi = mid;
        else
            lo = mid + 1;
    }
    return s->mx_gap[(s->mx_head + lo) & m];
}

void run_itl_leap_end(run_itl *t, int64_t src, const int32_t *ids, int64_t n, int64_t steps,
                      const int32_t *each)
{
    const run_itl_src *s = &t->src[src];
    int64_t c_mx = 0; /* the last count looked up (members mostly share one) */
    double mx = 0.0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t c = each ? each[k] : steps;
        if (c == 0)
            continue;
        const int32_t id = ids[k];
        run_itl_req *q = &t->req[id];
        const int64_t out = t->tr[id].output_tokens;
        assert(q->gen > 0 && c > 0 && q->gen + c <= out && c <= s->leapt && c <= t->window);
        q->gen += (int32_t)c;
        q->last_tok_s = s->end_s;
        if (c != c_mx) {
            mx = mx_last(s, c);
            c_mx = c;
        }
        if (!(mx <= t->max_s[id]))
            t->max_s[id] = mx;
        t->n_done += q->gen == out;
    }
}

/* The live state goes back to the system. */
static void req_free(run_itl *t)
{
    if (t->req_mem.base)
        vmem_free(&t->req_mem);
    else
        free(t->req);
    t->req = NULL;
}

double *run_itl_finish(run_itl *t, run_summary *sum)
{
    double *max_itl_s = t->max_s; /* handed over */
    t->max_s = NULL;
    req_free(t);
    t->h.sum = t->h.sumsq = 0.0;
    for (int64_t k = 0; k < t->n_src; k++) {
        src_flush(t, &t->src[k]);
        t->h.sum += t->src[k].sum;
        t->h.sumsq += t->src[k].sumsq;
    }
    sum->itl = hist_dist(&t->h);
    sum->itl_std_s = hist_std(&t->h);
    sum->n_itl = t->h.n;
    return max_itl_s;
}

void run_itl_free(run_itl *t)
{
    req_free(t);
    free(t->max_s);
    for (int64_t k = 0; t->src && k < t->n_src; k++) {
        free(t->src[k].mx_step);
        free(t->src[k].mx_gap);
    }
    free(t->src);
    t->max_s = NULL;
    t->src = NULL;
    hist_free(&t->h);
}
