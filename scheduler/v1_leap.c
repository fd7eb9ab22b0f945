/* v1_leap.c — the V1 engine's leaps (docs/semantics-v1.md, section 9):
 * after a step in which every running request made a token (a decode, or
 * a prefill chunk reaching all its known tokens) but perhaps R's last,
 * which is still chunking its prompt (the step may have preempted: its
 * victims are W's head, looked up like any blocked head), the steps that
 * follow are forced until a step is short of blocks, the waiting walk
 * admits someone who cannot join (newcomers whose chunks make a token join
 * the leap, leap_join; a lone one whose first chunk falls short of its
 * prompt becomes the chunking one, whose last chunk joins too), a request
 * finishes in a cluster, or the horizon comes.
 * They are planned here in O(1 + blocks taken + the waiting walk) per
 * step, with R's g and C kept lazy and written once when the leap ends, or
 * paused at the horizon and resumed by the next plan.  The step-by-step
 * engine (v1.c) is the model they must match (tests/test_leaps.c). */
#include <assert.h>
#include <string.h>

#include "v1_internal.h"

/* The step record of a leap's decode steps of n members, but for what
 * changes from step to step (emit_decode fills that in); s->step is then
 * left alone until the leap ends, but for its limit (the waiting walk). */
static void decode_record_init(sched *s, int64_t n)
{
    sched_step *st = &s->step;
    memset(st, 0, sizeof *st);
    s->n_members = 0;
    st->batch.tokens = n;
    st->batch.n_decode = n;
    st->kind = SCHED_STEP_DECODE;
    st->leapt = s->leap_fn != NULL;
}

/* Emit a decode step (decode_record_init's n members) reading kv tokens at
 * time t, priced by run (its batch's), held back by `limit` (the step record v1_plan makes for
 * such a step; its members are not listed: with a leap sink it says so,
 * leapt = 1); returns its duration. */
static double emit_decode(sched *s, const cost_run *run, int64_t kv, double t, int32_t limit)
{
    sched_step *st = &s->step;
    assert(st->batch.n_prefill == 0 && st->n_preempted == 0 && s->n_members == 0);
    st->batch.kv_read = kv;
    st->limit = limit;
    double d = cost_run_s(run, kv); /* = cost_step_s(s->cost, &st->batch) */
    v1_step_stamp(s, d, t);
    if (s->sink)
        s->sink(s->sink_ctx, st, s->members, 0);
    return d;
}

/* Emit a step of the leap's decodes (as emit_decode's, reading kv tokens)
 * and the chunk of q prompt tokens over c stored of its chunking request
 * x (lk_x, S_[n]), which makes no token (leap_join emits the steps whose
 * chunks do).  Priced by the whole batch as
 * v1_emit_step prices it, x listed as the step's prefill member (leapt:
 * the decodes are not).  Returns its duration; s->step is the decode
 * record again after.  O(1). */
static double emit_mixed(sched *s, int64_t kv, double t, int32_t limit, int32_t x, int64_t c,
                         int64_t q)
{
    sched_step *st = &s->step;
    const cost_batch dec = st->batch;
    assert(dec.n_prefill == 0 && st->n_preempted == 0 && s->n_members == 0);
    cost_batch *cb = &st->batch;
    cb->kv_read = kv;
    v1_batch_add_chunk(s, cb, x, q, c);
    st->kind = v1_step_kind(cb);
    st->limit = limit;
    const double d = cost_step_s(s->cost, cb);
    v1_step_stamp(s, d, t);
    if (s->sink)
        s->sink(s->sink_ctx, st, s->members, s->n_members);
    s->n_members = 0;
    st->batch = dec;
    st->kind = SCHED_STEP_DECODE;
    return d;
}

/* c mod bs in [0, bs): a joiner's c, offset to step 1, may be negative. */
static inline int64_t lk_res(int64_t c, int64_t bs)
{
    const int64_t r = c % bs;
    return r < 0 ? r + bs : r;
}

/* Requests of S whose stored tokens before step 1 were = r mod bs. */
static const int32_t *group_of(const sched_v1 *v, int64_t r, int64_t *len)
{
    int64_t lo = r > 0 ? v->lk_start[r - 1] : 0;
    *len = v->lk_start[r] - lo;
    return v->lk_ids + lo;
}


/* The arrivals due by t (a leap's step about to start at t), each through
 * the arrival rule, in order (sched_set_arrivals).  They touch W and their
 * own state only, none of R's lazy state.  O(1 + arrivals). */
static void take_arrivals(sched *s, double t)
{
    for (int64_t id; (id = sched_arrival_due(s, t)) >= 0;) {
        sched_arrival_taken(s, id);
        v1_arrive(s, id);
    }
}

/* Step 1 (just emitted, ending at t) made a token for every running
 * request but perhaps R's last, x = lk_x, which is chunking its prompt
 * (victims of its preemptions, if any, wait at W's head); its prefill
 * chunks that made a token are written as decodes (prefills_as_decodes).
 * Each step then gives x its next chunk after the decodes, as the running
 * walk would (the same size, its blocks through the same alloc), its last
 * chunk joining the leap (or, when it cannot, planned as a normal step);
 * x's state is kept eager.  Each next step's running walk is then
 * forced until a request finishes (at step j* = min(O - g), which is still
 * leapt to) or a step's new blocks would exceed F (a preemption): every
 * request stores one token per step, so request r takes a block at the
 * steps where its stored tokens reach a multiple of bs and registers one a
 * step later, and per step only the requests of one residue group (mod bs)
 * touch the pool, in R's order as the running walk would.  The waiting walk
 * runs for real each step (its lookup of a blocked head is kept, see
 * find_hits); if it admits one newcomer whose first chunk falls short of its
 * prompt while there is no x, the newcomer becomes x and the leap goes on;
 * newcomers whose chunks make a token (and x at its last chunk) join the
 * leap (leap_joiners, leap_join); any other admission makes that step a
 * normal one and ends the leap, with *again = 1 when that step is a step 1
 * itself (v1_leap then starts the next leap after it).
 * A step whose blocks (x's included) exceed F, or that leaves x no budget,
 * is not planned.  Arrivals end it too: every
 * step leapt to starts before s->horizon.  g and C of R advance lazily and
 * are written once at the end.  Returns the end of the last step planned;
 * S then describes that step.  Cost: O(|S| + bs) plus O(1 + blocks taken +
 * the waiting walk) per step. */
static double leap_steps(sched *s, double t, int *again);

/* The heap of finishes (lk_fin, hn entries): a before b. */
static inline int fin_before(const v1_fin *a, const v1_fin *b)
{
    return a->step < b->step || (a->step == b->step && a->seq < b->seq);
}

static void fin_up(v1_fin *h, int64_t k)
{
    const v1_fin x = h[k];
    while (k > 0 && fin_before(&x, &h[(k - 1) / 2])) {
        h[k] = h[(k - 1) / 2];
        k = (k - 1) / 2;
    }
    h[k] = x;
}

static void fin_down(v1_fin *h, int64_t hn, int64_t k)
{
    const v1_fin x = h[k];
    for (;;) {
        int64_t c = 2 * k + 1;
        if (c >= hn)
            break;
        if (c + 1 < hn && fin_before(&h[c + 1], &h[c]))
            c++;
        if (!fin_before(&h[c], &x))
            break;
        h[k] = h[c];
        k = c;
    }
    h[k] = x;
}

/* Add member e of request id (its last token at the leap's step `step`)
 * to the heap of *hn entries.  O(log n). */
static void fin_push(sched_v1 *v, int64_t *hn, const v1_sched_ent *e, int64_t step)
{
    v->lk_fin[*hn] = (v1_fin){step, e->seq, e->id, 0};
    fin_up(v->lk_fin, (*hn)++);
}

/* Drop the heap's first entry.  O(log n). */
static void fin_pop(sched_v1 *v, int64_t *hn)
{
    v->lk_fin[0] = v->lk_fin[--*hn];
    if (*hn > 0)
        fin_down(v->lk_fin, *hn, 0);
}

/* Request id leaves residue group r of the leap (lk_ids, lk_start), the
 * others keeping their order.  O(n + bs), a memmove. */
static void group_remove(sched_v1 *v, int32_t id, int64_t r)
{
    const int64_t lo = r > 0 ? v->lk_start[r - 1] : 0, hi = v->lk_start[r];
    int64_t k = lo;
    while (k < hi && v->lk_ids[k] != id)
        k++;
    assert(k < hi);
    const int64_t end = v->lk_start[v->bs];
    memmove(&v->lk_ids[k], &v->lk_ids[k + 1], (size_t)(end - k - 1) * sizeof *v->lk_ids);
    for (int64_t q = r; q <= v->bs; q++)
        v->lk_start[q]--;
}

/* S's first n entries into their residue groups (lk_start, lk_ids), R's
 * order kept within each; their smallest O - g into *jstar and the KV their
 * step 1 read into *kv.  O(n + bs). */
static void leap_group(sched_v1 *v, int64_t n, int64_t *jstar, int64_t *kv)
{
    const int64_t bs = v->bs;
    *jstar = INT64_MAX;
    *kv = 0;
    memset(v->lk_start, 0, (size_t)(bs + 1) * sizeof *v->lk_start);
    for (int64_t k = 0; k < n; k++) {
        v1_sched_ent *e = &v->S_[k];
        e->told = 0; /* a member from step 1 on (lk_emitted = 0) */
        e->seq = k;
        int64_t rem = (int64_t)v->rq[e->id].O - v->rq[e->id].g;
        v->lk_fin[k] = (v1_fin){rem, k, e->id, 0}; /* the heap, built below */
        if (rem < *jstar)
            *jstar = rem;
        *kv += e->c + 1;
        v->lk_start[lk_res(e->c, bs) + 1]++;
    }
    for (int64_t r = 1; r <= bs; r++)
        v->lk_start[r] += v->lk_start[r - 1];
    for (int64_t k = 0; k < n; k++) /* stable: lk_start[r] ends as group r's end */
        v->lk_ids[v->lk_start[lk_res(v->S_[k].c, bs)]++] = v->S_[k].id;
    for (int64_t k = n / 2 - 1; k >= 0; k--) /* the heap of finishes */
        fin_down(v->lk_fin, n, k);
    v->lk_seq = n;
}

/* Step 1 (just emitted, ending at t) made a token for every entry of S
 * (v1_leap_ready): its prefill chunks that reach P + g are
 * written as the decodes they equal from step 2 on, a decode of token
 * P + g whose context before step 1 was P + g - 1.  That is what the
 * leap's groups, KV and lazy state read, and what v1_finish of step 1
 * stores (C = P + g, one token); the blocks it holds and has registered
 * after step 1 are a decode's too (ceil((P + g) / bs) and (P + g) / bs).
 * A newcomer's first token is step 1's, at t.  O(|S|). */
static void prefills_as_decodes(sched *s, double t)
{
    sched_v1 *v = s->v1;
    int converted = 0;
    for (int64_t k = 0; k < v->ns; k++) {
        v1_sched_ent *e = &v->S_[k];
        if (e->kind == SCHED_MEMBER_DECODE)
            continue;
        struct v1_req *rq = &v->rq[e->id];
        if (e->c + e->q < (int64_t)rq->P + rq->g) { /* the chunking one: lk_x */
            assert(k == v->ns - 1);
            continue;
        }
        assert(e->c + e->q == (int64_t)rq->P + rq->g);
        if (rq->g == 0)
            s->res[e->id].first_token_s = t;
        e->c += e->q - 1;
        e->q = 1;
        e->kind = SCHED_MEMBER_DECODE;
        rq->C = (int32_t)e->c;
        rq->sq = 1;
        converted = 1;
    }
    s->ctr.leap_prefills += converted;
}

/* One leap from step 1 (just emitted, ending at t); *again = 1 when it
 * ended in a step planned the normal way that is itself a step 1
 * (v1_leap_ready, S = R) before the horizon. */
static double leap_once(sched *s, double t, int *again)
{
    sched_same_set_flush(s); /* the leap's steps go to the same leap sink */
    s->v1->sa_armed = 0;
    sched_v1 *v = s->v1;
    *again = 0;
    prefills_as_decodes(s, t);
    const v1_sched_ent *last = &v->S_[v->ns - 1];
    v->lk_x = last->kind == SCHED_MEMBER_PREFILL ? last->id : -1; /* still chunking */
    const int64_t n = v->ns - (v->lk_x >= 0);
    int64_t jstar, kv;
    leap_group(v, n, &jstar, &kv);
    if (jstar <= 1 || n == 0)
        return t;
    s->ctr.leap_preempted += s->step.n_preempted > 0; /* s->step: step 1's record */
    v->lk_n = n;
    v->lk_jstar = jstar;
    v->lk_kv = kv;
    v->lk_step = 2; /* the step to plan, numbered from step 1 */
    v->lk_emitted = 0;
    decode_record_init(s, n);
    return leap_steps(s, t, again);
}

double v1_leap(sched *s, double t)
{
    int again = 1;
    while (again)
        t = leap_once(s, t, &again);
    return t;
}

/* Tell the leap sink the leapt tokens of the leap's members S_[0, n):
 * each made one in each of the last lk_emitted - told leapt steps.  The
 * leap ends.  O(n). */
static void leap_tell_all(sched *s, int64_t n)
{
    sched_v1 *v = s->v1;
    if (s->leap_fn && v->lk_emitted > 0) {
        int64_t m = 0;
        for (int64_t k = 0; k < n; k++) {
            const v1_sched_ent *e = &v->S_[k];
            const int64_t c = v->lk_emitted - e->told;
            assert(c >= 0 && c < INT32_MAX);
            v->lk_tell[m] = e->id;
            v->lk_each[m] = (int32_t)c;
            m += c > 0;
        }
        if (m > 0)
            s->leap_fn(s->sink_ctx, v->lk_tell, m, 0, v->lk_each);
    }
    v->lk_emitted = 0;
}

/* The residue groups without the requests that finished (g = O): each
 * group keeps its others in its order, as leap_group would group them
 * again, without dividing.  O(|groups| + bs). */
static void leap_drop_finished(sched_v1 *v)
{
    int64_t w = 0, lo = 0;
    for (int64_t r = 0; r < v->bs; r++) {
        const int64_t hi = v->lk_start[r];
        for (int64_t k = lo; k < hi; k++) {
            const int32_t id = v->lk_ids[k];
            if (v->rq[id].g < v->rq[id].O)
                v->lk_ids[w++] = id;
        }
        lo = hi;
        v->lk_start[r] = w;
    }
    v->lk_start[v->bs] = w;
}

/* Step j = lk_jstar of the leap has just been emitted, ending at t: the
 * requests that made their last token in it finish now, as v1_finish
 * would finish them after that step (in S's order: g = O, the finish time,
 * their blocks freed last to first), and the leap goes on without them,
 * as the step-by-step engine's next plans would (R is then all decodes
 * of the others, none finishing at once).  Their leapt tokens (from their
 * entry to step j) are told to the leap sink first, theirs alone.  The
 * leap's set, groups, KV and last step are then the others'.
 * 0 with nothing done when it cannot go on: everyone finishes, the engine
 * is a cluster's (sched_set_leap_past_finish), or a prefill replica keeps
 * finished requests' blocks (v1_pd).  O(k log n + blocks freed) for k
 * finishers, plus memmoves of S, R and the groups (O(n + bs) words each,
 * a pass over the groups when k >= n / 4). */
static int leap_finish(sched *s, double t)
{
    sched_v1 *v = s->v1;
    const int64_t n = v->lk_n, j = v->lk_jstar;
    if (v->pd.keep || !s->leap_past_finish)
        return 0;
    /* the finishers: the heap's members that finish at step j, in S's order
     * (popped at once: if everyone finishes, the leap ends and the next one
     * builds its own heap) */
    int64_t hn = n, nf = 0;
    assert(hn > 0 && v->lk_fin[0].step == j);
    while (hn > 0 && v->lk_fin[0].step == j) {
        v->lk_tell[nf] = v->lk_fin[0].id;
        v->lk_pos[nf++] = v->lk_fin[0].seq;
        fin_pop(v, &hn);
    }
    if (hn == 0)
        return 0;
    /* their places in S (ascending ranks: each search starts past the last) */
    for (int64_t i = 0, lo = 0; i < nf; i++) {
        int64_t hi = n - 1;
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (v->S_[mid].seq < v->lk_pos[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        assert(v->S_[lo].seq == v->lk_pos[i] && v->S_[lo].id == v->lk_tell[i]);
        const v1_sched_ent *e = &v->S_[lo];
        assert(v->lk_emitted - e->told > 0 && v->lk_emitted - e->told < INT32_MAX);
        v->lk_each[i] = (int32_t)(v->lk_emitted - e->told);
        v->lk_pos[i] = lo++;
    }
    if (s->leap_fn) /* the finishers' leapt tokens, theirs alone */
        s->leap_fn(s->sink_ctx, v->lk_tell, nf, 0, v->lk_each);
    int64_t kv = v->lk_kv;
    const int by_one = 4 * nf <= n; /* leave their residue groups one by one */
    for (int64_t i = 0; i < nf; i++) {
        const v1_sched_ent e = v->S_[v->lk_pos[i]];
        struct v1_req *rq = &v->rq[e.id];
        assert((int64_t)rq->O - rq->g == j);
        if (by_one)
            group_remove(v, e.id, lk_res(e.c, v->bs));
        kv -= e.c + 1;
        rq->sq = 0;
        rq->C = (int32_t)(e.c + j);
        rq->g = rq->O;
        v1_req_finished(s, e.id, t);
    }
    /* S and R (the same requests in the same order, and the chunking one
     * last) without them: the stretches between their places move down */
    const int hx = v->lk_x >= 0;
    assert(v->nrun == n + hx && v->ns == n + hx);
    int64_t w = v->lk_pos[0];
    for (int64_t i = 0; i < nf; i++) {
        const int64_t lo = v->lk_pos[i] + 1, hi = i + 1 < nf ? v->lk_pos[i + 1] : n + hx;
        memmove(&v->S_[w], &v->S_[lo], (size_t)(hi - lo) * sizeof *v->S_);
        memmove(&v->run[w], &v->run[lo], (size_t)(hi - lo) * sizeof *v->run);
        w += hi - lo;
    }
    const int64_t out = n - nf;
    assert(w == out + hx);
    v->ns = v->nrun = out + hx;
    if (!by_one)
        leap_drop_finished(v);
    assert(v->lk_start[v->bs] == out && hn == out);
    v1_rq_release(s); /* the finishers' entries are read no more */
    v->lk_n = out;
    v->lk_jstar = v->lk_fin[0].step;
    assert(v->lk_jstar > j);
    v->lk_kv = kv;
    s->ctr.leap_finishes++;
    return 1;
}

/* Whether entry e of S at a leap's step (a newcomer the waiting walk
 * admitted, or the chunking request at its last chunk) may join the leap
 * at that step: its chunk reaches all its known tokens T = P + g, so the
 * step makes its next token, which is not its last; the chunk is not a
 * re-admitted request's one last token (g >= 1, c = T - 1), which
 * v1_emit_step prices as a decode; and the engine is alone (not a
 * cluster's, no remote requests, no kept blocks), as for leap_finish. */
static int leap_can_join(const sched *s, const v1_sched_ent *e)
{
    const sched_v1 *v = s->v1;
    const struct v1_req *rq = &v->rq[e->id];
    const int64_t T = (int64_t)rq->P + rq->g;
    return s->leap_past_finish && !v->pd.keep && !v->pd.load && e->kind == SCHED_MEMBER_PREFILL &&
           e->c + e->q == T && !(rq->g >= 1 && e->c == T - 1) && (int64_t)rq->O - rq->g >= 2;
}

/* Whether e's chunk falls short of its known tokens (it would go on
 * chunking). */
static int leap_chunk_short(const sched_v1 *v, const v1_sched_ent *e)
{
    return e->c + e->q < (int64_t)v->rq[e->id].P + v->rq[e->id].g;
}

/* How many of S_[n..ns) join the leap at this step: the newcomers the
 * waiting walk admitted, after the chunking request's last chunk when
 * there is one (S_[n], which then makes its token too).  All of them when
 * each may (leap_can_join) but perhaps the last, whose chunk may fall
 * short of its prompt (it then becomes the chunking request); -1 when they
 * cannot (the step is then a normal one).  A lone newcomer that falls
 * short is the caller's (the chunking request, as before joins).
 * O(entries). */
static int64_t leap_joiners(const sched *s, int64_t n)
{
    const sched_v1 *v = s->v1;
    const int64_t m = v->ns - n;
    if (m <= 0)
        return -1;
    for (int64_t k = n; k < v->ns - 1; k++)
        if (!leap_can_join(s, &v->S_[k]))
            return -1;
    const v1_sched_ent *last = &v->S_[v->ns - 1];
    if (leap_can_join(s, last))
        return m;
    return m > 1 && leap_chunk_short(v, last) && last->kind == SCHED_MEMBER_PREFILL ? m - 1 : -1;
}

/* Step `step` of the leap, starting at t, has the leap's n decodes (their
 * KV read kv) and the chunks of the newcomers S_[n..ns), of which the
 * first `joins` may join (leap_joiners) and a last one may fall short of
 * its prompt: it is emitted as v1_emit_step would price and record it (the
 * decodes leapt, the newcomers listed in S's order, so their tokens are
 * counted as members'; the leap sink is told nothing), and each joiner
 * enters the leap at lk_emitted (this step included) and becomes the
 * decode it is from the next step on, its lazy state offset to step 1:
 * c = P + g - step (its context before step `step` as a decode would be
 * P + g - 1), g less step - 1, so that step j's token is g + j for it as
 * for the others, its KV read at step j is c + j, and its blocks fill at
 * the steps its residue c mod bs says.  Each goes last in its residue
 * group (R's order), and the leap's KV and last step take it in; one that
 * fell short stays S_[lk_n] for the caller to make the chunking request.
 * Returns the step's end; the caller reloads n, jstar, kv and the decode
 * record.  O(n + bs) per joiner. */
static double leap_join(sched *s, double t, int32_t lim, int64_t step, int64_t kv, int64_t joins)
{
    sched_v1 *v = s->v1;
    const int64_t bs = v->bs, n0 = v->lk_n;
    sched_step *st = &s->step;
    const cost_batch dec = st->batch;
    assert(v->nrun == v->ns && joins >= 1 && n0 + joins <= v->ns);
    assert(dec.n_prefill == 0 && st->n_preempted == 0 && s->n_members == 0);
    st->batch.kv_read = kv;
    for (int64_t k = n0; k < v->ns; k++)
        v1_batch_add_chunk(s, &st->batch, v->S_[k].id, v->S_[k].q, v->S_[k].c);
    st->kind = v1_step_kind(&st->batch);
    st->limit = lim;
    const double d = cost_step_s(s->cost, &st->batch);
    v1_step_stamp(s, d, t);
    if (s->sink)
        s->sink(s->sink_ctx, st, s->members, s->n_members);
    s->n_members = 0;
    st->batch = dec;
    st->kind = SCHED_STEP_DECODE;
    t += d;
    s->ctr.leap_joins += joins;
    for (int64_t k = n0; k < n0 + joins; k++) {
        const int64_t n = v->lk_n;
        assert(k == n);
        v1_sched_ent *e = &v->S_[k];
        const int32_t id = e->id;
        struct v1_req *rq = &v->rq[id];
        const int64_t g = rq->g, T = (int64_t)rq->P + g;
        assert(leap_can_join(s, e));
        if (g == 0)
            s->res[id].first_token_s = t;
        e->c = T - step;
        e->q = 1;
        e->kind = SCHED_MEMBER_DECODE;
        e->told = v->lk_emitted; /* this step's token is a member's: counted */
        e->seq = v->lk_seq++;     /* last in S */
        rq->C = (int32_t)T;
        rq->sq = 1;
        assert(g + 1 - step >= INT32_MIN);
        rq->g = (int32_t)(g + 1 - step);
        const int64_t r = lk_res(e->c, bs), pos = v->lk_start[r];
        memmove(v->lk_ids + pos + 1, v->lk_ids + pos, (size_t)(n - pos) * sizeof *v->lk_ids);
        v->lk_ids[pos] = id;
        for (int64_t j = r; j <= bs; j++)
            v->lk_start[j]++;
        int64_t hn = n;
        fin_push(v, &hn, e, (int64_t)rq->O - rq->g);
        v->lk_n = n + 1;
        v->lk_kv += e->c + 1;
        assert((int64_t)rq->O - rq->g > step); /* its last token comes after this step */
        v->lk_jstar = v->lk_fin[0].step;
        assert(v->lk_jstar <= (int64_t)rq->O - rq->g);
    }
    return t;
}

/* leap_join at step `step` of the leap (the walk's `lim`), in the middle
 * of leap_steps, whose steps from *told on are counted into lk_emitted
 * first; a last entry whose chunk fell short becomes the chunking request
 * (lk_x), and the decode record is S's again.  The caller reloads its view
 * of the leap (lk_n, lk_jstar, lk_kv, lk_x).  Returns the step's end. */
static double leap_join_step(sched *s, double t, int32_t lim, int64_t step, int64_t *told,
                             int64_t joins)
{
    sched_v1 *v = s->v1;
    v->lk_x = -1;
    v->lk_emitted += step + 1 - *told;
    *told = step + 1;
    t = leap_join(s, t, lim, step, v->lk_kv + v->lk_n * (step - 1), joins);
    if (v->ns > v->lk_n) { /* S_[lk_n] goes on chunking from the next step */
        v->lk_x = v->S_[v->lk_n].id;
        s->ctr.leap_chunks++;
    }
    decode_record_init(s, v->lk_n);
    return t;
}

/* The blocks step `step` of the leap takes and registers, ph = (step - 1)
 * mod bs: the requests of the residue group whose stored tokens reach a
 * multiple of bs take a block each, and with prefix caching those of the
 * group a step behind register their full one, in R's order as the running
 * walk would; the chunking request x (S_[n], or -1) gets its next chunk,
 * *cx over *qx (rule 4.4), and its blocks through the same alloc.  0 with
 * nothing taken when the free blocks cannot cover the step or x gets no
 * budget (S would not be R: the leap stops short of blocks).
 * O(1 + blocks taken). */
static inline int leap_take_blocks(sched_v1 *v, int64_t n, int64_t ph, int32_t x, int64_t *cx,
                                   int64_t *qx)
{
    const int64_t bs = v->bs;
    int64_t nt, nr = 0;
    const int32_t *take = group_of(v, ph == 0 ? 0 : bs - ph, &nt); /* (bs - (step-1)%bs) % bs */
    const int32_t *regs = v->pfx ? group_of(v, ph + 1 == bs ? 0 : bs - ph - 1, &nr) : NULL;
    int64_t need = nt;
    if (x >= 0) { /* the running walk reaches x last: its next chunk (rule 4.4) */
        const v1_sched_ent *ex = &v->S_[n];
        *cx = ex->c + ex->q;
        assert(*cx < (int64_t)v->rq[x].P + v->rq[x].g);
        *qx = v1_chunk(v, x, *cx, v->B - n);
        need += sched_ceil_div(*cx + *qx, bs) - v->rq[x].held;
    }
    if (need > v->pool.F || (x >= 0 && *qx <= 0))
        return 0;
    for (int64_t k = 0; k < nt; k++) {
        int32_t id = take[k];
        table_of(v, id)[v->rq[id].held++] = v1_pool_take(&v->pool);
    }
    for (int64_t k = 0; k < nr; k++) {
        int32_t id = regs[k];
        const int32_t blk = table_of(v, id)[v->rq[id].reg];
        /* a decode's full block lies past the prompt's ids: private */
        assert(v->rq[id].reg >= v1_shared_blocks(v, id));
        v1_pool_register_private(&v->pool, blk);
        v->rq[id].reg++;
    }
    if (x >= 0) { /* its last chunk is stored (v1_finish), this one scheduled */
        v1_sched_ent *ex = &v->S_[n];
        ex->c = *cx;
        ex->q = *qx;
        v->rq[x].C = (int32_t)*cx;
        v->rq[x].sq = (int32_t)*qx;
        const int ok = v1_alloc_running(v, x, *cx, *qx);
        assert(ok);
        (void)ok;
    }
    return 1;
}

/* The arrivals due by t, then the waiting walk of the leap's step starting
 * at t, as v1_plan's, with the limit it leaves in *lim.  A lone newcomer
 * whose first chunk falls short of its prompt, while there is no chunking
 * request, becomes it (*x, with its chunk *cx over *qx; the leap goes on
 * with it); newcomers whose chunks make a token, and x at its last chunk,
 * join (*joins, leap_joiners).  1 when the step must be completed as a
 * normal one instead: the walk admitted someone who cannot join, or x's
 * last chunk cannot join, or newcomers follow a chunk that goes on.  The
 * walk reads and changes nothing of R's lazy state.  O(1 + the walk). */
static inline int leap_walk(sched *s, double t, int64_t n, int32_t *x, int64_t *cx, int64_t *qx,
                            int32_t *lim, int64_t *joins)
{
    sched_v1 *v = s->v1;
    take_arrivals(s, t); /* the arrivals before this step (sched_set_arrivals) */
    int64_t b = v->B - n - *qx;
    v->walk_t = t;
    if (v->wn > 0 || v->pd.nready > 0) {
        if (b <= 0)
            *lim = SCHED_LIMIT_TOKEN_BUDGET;
        else if (v->nrun >= s->cfg.max_seqs)
            *lim = SCHED_LIMIT_MAX_SEQS;
        else {
            s->step.limit = SCHED_LIMIT_NONE_WAITING;
            v1_waiting_walk(s, &b);
            *lim = s->step.limit;
            const v1_sched_ent *e = &v->S_[n];
            if (*x < 0 && v->ns == n + 1 && leap_chunk_short(v, e)) {
                /* one newcomer whose first chunk falls short of its
                 * prompt: the leap goes on with it as its chunking one */
                *x = v->lk_x = e->id;
                *cx = e->c;
                *qx = e->q;
            } else if (*x < 0 && v->ns > n && (*joins = leap_joiners(s, n)) <= 0) {
                return 1; /* it admitted someone who cannot join */
            }
        }
    } else {
        *lim = SCHED_LIMIT_NONE_WAITING;
    }
    if (*x >= 0 && (*cx + *qx == (int64_t)v->rq[*x].P + v->rq[*x].g || v->ns > n + 1)) {
        /* x's last chunk (it makes a token): x and any newcomers behind
         * it join if they may; newcomers behind a chunk that goes on, or
         * anyone who may not join, make the step a normal one */
        if (*cx + *qx < (int64_t)v->rq[*x].P + v->rq[*x].g || (*joins = leap_joiners(s, n)) <= 0)
            return 1;
    }
    return 0;
}

/* The leap, stopped after planning up to step `step` (numbered from 1;
 * normal: that step is completed as a normal one, left by the walk with
 * limit lim), ends: its steps are told to the leap sink, and S's n
 * members and R's g, C written once, as v1_finish of its last step would
 * have left them; then the normal step, if any, is emitted, and *again
 * says whether it is a step 1 a next leap can start from.  Returns the end
 * of the last step.  O(|S|) plus the normal step's. */
static double leap_write_out(sched *s, double t, int64_t n, int64_t step, int normal,
                             int32_t lim, int *again)
{
    sched_v1 *v = s->v1;
    v->lk_paused = 0;
    leap_tell_all(s, n);
    const int64_t L = step - 2 + normal; /* steps after step 1 */
    for (int64_t k = 0; k < n && L > 0; k++) {
        v1_sched_ent *e = &v->S_[k];
        e->c += L;
        v->rq[e->id].C = e->c;
        v->rq[e->id].g += L;
    }
    if (normal) { /* this step is a normal one from here */
        memset(&s->step, 0, sizeof s->step);
        s->step.limit = lim;
        s->n_members = 0;
        t += v1_emit_step(s, t);
        /* a step 1 as v1_plan's: nobody was preempted and S is R */
        *again = v->ns == v->nrun && v1_leap_ready(v) && t < v1_leap_horizon(s);
    }
    return t;
}

/* The leap's steps from lk_step on (v1_leap), the first starting at t:
 * planned while they start before the horizon, up to lk_jstar, while the
 * free blocks cover the step's new ones and the waiting walk admits
 * nobody.  S's entries and g, C of R stay as at step 1 (lazy) until the
 * leap ends, and are then written once: S describes the last step planned
 * (v1_finish stores its tokens).  When the horizon alone stops it the leap
 * is paused instead: nothing is written, v1_finish of its last step does
 * nothing, and the next plan goes on with it (leap_resume), or writes it
 * out (leap_write_paused).  Returns the end of the last step planned (t if
 * none).  Cost: O(1 + blocks taken + the waiting walk) per step, plus
 * O(|S|) when the leap ends. */
static double leap_steps(sched *s, double t, int *again)
{
    sched_v1 *v = s->v1;
    const int64_t bs = v->bs;
    int64_t n = v->lk_n, jstar = v->lk_jstar, kv = v->lk_kv;
    const int64_t step0 = v->lk_step;
    int64_t step = step0, told = step0; /* steps from `told` on: not yet in lk_emitted */
    int normal = 0, short_of_blocks = 0; /* normal: this step is completed as a normal one */
    int32_t lim = SCHED_LIMIT_NONE_WAITING; /* the limit of the step being planned */
    const double hz = v1_leap_horizon(s);
    int32_t x = v->lk_x; /* the chunking request, S_[n] (its last chunk), or -1 */
    /* S's decode batch (decode_record_init): the steps differ in kv_read alone */
    const cost_run *run = cost_run_get(&v->lk_runs, s->cost, &s->step.batch);
    /* (step - 1) mod bs, kept as the steps go (no division per step) */
    for (int64_t ph = (step - 1) % bs; t < hz; step++, ph = ph + 1 == bs ? 0 : ph + 1) {
        if (step > jstar) { /* step jstar ended at t: its last tokens finish */
            v->lk_emitted += step - told;
            told = step;
            if (!leap_finish(s, t))
                break;
            n = v->lk_n;
            jstar = v->lk_jstar;
            kv = v->lk_kv;
            decode_record_init(s, n);
            run = cost_run_get(&v->lk_runs, s->cost, &s->step.batch);
        }
        assert(ph == (step - 1) % bs);
        int64_t cx = 0, qx = 0, joins = 0;
        if (!leap_take_blocks(v, n, ph, x, &cx, &qx)) {
            short_of_blocks = 1;
            break;
        }
        if (leap_walk(s, t, n, &x, &cx, &qx, &lim, &joins)) {
            normal = 1;
            break;
        }
        if (joins > 0) { /* newcomers (and x at its last chunk) whose chunks
                            make a token join; a last one whose chunk falls
                            short becomes the chunking one */
            t = leap_join_step(s, t, lim, step, &told, joins);
            n = v->lk_n;
            jstar = v->lk_jstar;
            kv = v->lk_kv;
            x = v->lk_x;
            run = cost_run_get(&v->lk_runs, s->cost, &s->step.batch);
            continue;
        }
        if (x >= 0) {
            t += emit_mixed(s, kv + n * (step - 1), t, lim, x, cx, qx);
            s->ctr.leap_chunks++;
        } else
            t += emit_decode(s, run, kv + n * (step - 1), t, lim);
    }
    s->ctr.leap_steps += step - step0 + normal;
    v->lk_emitted += step - told;
    v->lk_step = step;
    if (step == step0 && !normal && step0 > 2) {
        assert(x < 0); /* a leap with a chunk does not pause */
        v->lk_paused = 1; /* a resume that planned nothing: leap_resume writes it out */
        return t;
    }
    if (!normal && !short_of_blocks && step <= jstar && !v->pd.keep && step > 2 && x < 0) {
        v->lk_paused = 1; /* the horizon alone: go on in the next plan */
        return t;
    }
    return leap_write_out(s, t, n, step, normal, lim, again);
}

/* End a paused leap where it stopped: its steps told to the leap sink, and
 * R's state written as v1_finish of its last step (lk_step - 1) would have
 * left it.  A no-op when no leap is paused.  O(|S|). */
static void leap_write_paused(sched *s)
{
    sched_v1 *v = s->v1;
    if (!v->lk_paused)
        return;
    v->lk_paused = 0;
    leap_tell_all(s, v->lk_n);
    const int64_t done = v->lk_step - 1; /* steps whose tokens are stored */
    for (int64_t k = 0; k < v->lk_n; k++) {
        const v1_sched_ent *e = &v->S_[k];
        v->rq[e->id].C = e->c + done;
        v->rq[e->id].g += done;
        v->rq[e->id].sq = 0;
    }
}

/* The paused leap goes on at now, as the step-by-step engine would plan:
 * R is the leap's set, all decoding, and the state is what its last step
 * left; W may have gained arrivals, which the steps' waiting walk sees.
 * 1 with *t_end set if it planned a step; 0 if it planned none (the
 * horizon, or too few free blocks), and then the leap is written out and
 * the plan goes on as usual.  O(1) plus leap_steps. */
int v1_leap_resume(sched *s, double now, double *t_end)
{
    sched_v1 *v = s->v1;
    assert(v->lk_paused && v->ns == 0 && v->nrun == v->lk_n && v->lk_x < 0);
    if (!(now < v1_leap_horizon(s))) {
        leap_write_paused(s);
        return 0;
    }
    v->lk_paused = 0;
    v->ns = v->lk_n; /* S is the leap's set again, as at its step 1 */
    decode_record_init(s, v->lk_n);
    const int64_t step0 = v->lk_step;
    int again = 0;
    double t = leap_steps(s, now, &again);
    if (!again && v->lk_step == step0 && v->ns == v->lk_n) { /* nothing planned */
        assert(v->lk_paused);
        v->ns = 0;
        leap_write_paused(s);
        return 0;
    }
    s->ctr.leap_resumes++;
    v->sa_armed = 0;
    *t_end = again ? v1_leap(s, t) : t;
    return 1;
}

