/* replay_sched.c — the block tables a recorded schedule implies, derived on
 * the host step by step (rules in replay.h and docs/validation.md). */
#include "replay.h"

#include <stdlib.h>
#include <string.h>

typedef struct req_state {
    int32_t *blocks;    /* [cap] block ids held, in token order */
    int64_t n, cap;     /* blocks held, capacity */
    int64_t tokens;     /* tokens stored after the latest step applied */
    int64_t reserve;    /* blocks held at least (reserved / static), 0 for paged */
    int32_t next;       /* next_class of the next appearance after the latest applied */
    int64_t stamp;      /* latest step it was a member of, -1 */
    int64_t hpos;       /* index in holders[], -1 when holding nothing */
} req_state;

struct replay_sched {
    const val_run *r;      /* borrowed */
    req_state *q;          /* [tr.n] */
    int32_t *next_of;      /* [n_members] next_class of that request's next appearance */
    int64_t *last;         /* [tr.n] last step of each request, -1 if none */
    int32_t *free_ids;     /* LIFO of freed ids */
    int64_t n_free, cap_free;
    int64_t next_id;       /* ids handed out so far: fresh ids count up */
    int64_t held;          /* blocks held */
    int32_t *holders;      /* [tr.n] requests holding blocks (unordered) */
    int32_t *cand;         /* [tr.n] scratch: holders that may have been preempted */
    int64_t n_holders;
    int64_t next;          /* next step to apply */
    int begun;             /* between begin and end */
    int64_t mismatches, first_mismatch;
    int64_t hit_starts;    /* (re)starts over a prefix-cache hit (cached > 0) */
};

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* How a request's next appearance relates to its current state. */
enum next_class {
    NEXT_NONE = -1,   /* never appears again */
    NEXT_RESTART = 0, /* a prefill from scratch (or a prefix hit): it was preempted */
    NEXT_CONT = 1,    /* a decode, or the next chunk of its prefill: still running */
    NEXT_SWAPIN = 2   /* a swap-in: it was swapped out */
};

/* Class of member nx as the next appearance of a request whose latest
 * member stored `ctx` tokens. */
static int32_t classify(const sched_member *nx, int64_t ctx)
{
    if (nx->kind == SCHED_MEMBER_DECODE)
        return NEXT_CONT;
    if (nx->kind == SCHED_MEMBER_SWAPIN)
        return NEXT_SWAPIN;
    return nx->context - nx->tokens == ctx && ctx > 0 ? NEXT_CONT : NEXT_RESTART;
}

int replay_sched_init(const val_run *r, replay_sched **out, kvs_err *err)
{
    *out = NULL;
    replay_sched *s = calloc(1, sizeof *s);
    int64_t nr = r->tr.n > 0 ? r->tr.n : 1, nm = r->n_members > 0 ? r->n_members : 1;
    const sched_member **seen = NULL;
    if (!s)
        goto nomem;
    s->r = r;
    s->first_mismatch = -1;
    s->q = calloc((size_t)nr, sizeof *s->q);
    s->next_of = malloc((size_t)nm * sizeof *s->next_of);
    s->last = malloc((size_t)nr * sizeof *s->last);
    s->holders = malloc((size_t)nr * sizeof *s->holders);
    s->cand = malloc((size_t)nr * sizeof *s->cand);
    seen = malloc((size_t)nr * sizeof *seen);
    if (!s->q || !s->next_of || !s->last || !s->holders || !s->cand || !seen)
        goto nomem;
    for (int64_t i = 0; i < r->tr.n; i++) {
        s->q[i].stamp = -1;
        s->q[i].hpos = -1;
        s->q[i].next = NEXT_NONE;
        s->last[i] = -1;
        seen[i] = NULL;
    }
    /* Backwards: each member learns the class of its request's next appearance. */
    for (int64_t i = r->n_steps - 1; i >= 0; i--) {
        int64_t n;
        const sched_member *m = val_run_step_members(r, i, &n);
        int64_t off = r->steps[i].member_off;
        for (int64_t j = 0; j < n; j++) {
            const sched_member *nx = seen[m[j].req_id];
            s->next_of[off + j] = nx ? classify(nx, m[j].context) : NEXT_NONE;
            if (s->last[m[j].req_id] < 0)
                s->last[m[j].req_id] = i;
        }
        for (int64_t j = 0; j < n; j++)
            seen[m[j].req_id] = &m[j];
    }
    free(seen);
    *out = s;
    return KVS_OK;
nomem:
    free(seen);
    replay_sched_free(s);
    return kvs_errf(err, KVS_ENOMEM, "replay: out of memory for the block tables of %lld requests",
                    (long long)r->tr.n);
}

void replay_sched_free(replay_sched *s)
{
    if (!s)
        return;
    for (int64_t i = 0; s->q && i < s->r->tr.n; i++)
        free(s->q[i].blocks);
    free(s->q);
    free(s->next_of);
    free(s->last);
    free(s->free_ids);
    free(s->holders);
    free(s->cand);
    free(s);
}

int64_t replay_sched_next(const replay_sched *s) { return s->next; }
int64_t replay_sched_held(const replay_sched *s) { return s->held; }
int64_t replay_sched_ids(const replay_sched *s) { return s->next_id; }

int64_t replay_sched_hit_starts(const replay_sched *s) { return s->hit_starts; }

int64_t replay_sched_mismatches(const replay_sched *s, int64_t *first)
{
    if (first)
        *first = s->first_mismatch;
    return s->mismatches;
}

const int32_t *replay_sched_blocks(const replay_sched *s, int32_t req, int64_t *n,
                                   int64_t *tokens)
{
    const req_state *q = &s->q[req];
    *n = q->n;
    if (tokens)
        *tokens = q->tokens;
    return q->n ? q->blocks : NULL;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int64_t replay_sched_holders(const replay_sched *s, int32_t *out, int64_t cap)
{
    int64_t n = s->n_holders < cap ? s->n_holders : cap;
    memcpy(out, s->holders, (size_t)n * sizeof *out);
    qsort(out, (size_t)n, sizeof *out, cmp_i32);
    return n;
}

/* Free every block of req (pushed in reverse, so a later allocation pops
 * them in the order they were held).  Never allocates: grow keeps free_ids
 * as large as the ids handed out. */
static void release(replay_sched *s, int32_t req)
{
    req_state *q = &s->q[req];
    if (q->n == 0)
        return;
    for (int64_t k = q->n - 1; k >= 0; k--)
        s->free_ids[s->n_free++] = q->blocks[k];
    s->held -= q->n;
    q->n = 0;
    q->tokens = 0;
    int64_t p = q->hpos;
    s->holders[p] = s->holders[--s->n_holders];
    s->q[s->holders[p]].hpos = p;
    q->hpos = -1;
}

/* Grow req's table to `need` blocks. */
static int grow(replay_sched *s, int32_t req, int64_t need)
{
    req_state *q = &s->q[req];
    if (need <= q->n)
        return KVS_OK;
    if (need > q->cap) {
        int64_t cap = q->cap ? q->cap : 4;
        while (cap < need)
            cap *= 2;
        int32_t *v = realloc(q->blocks, (size_t)cap * sizeof *v);
        if (!v)
            return KVS_ENOMEM;
        q->blocks = v;
        q->cap = cap;
    }
    int64_t fresh = need - q->n - s->n_free; /* new ids this call may hand out */
    if (fresh > 0 && s->next_id + fresh > s->cap_free) {
        int64_t cap = s->cap_free ? s->cap_free : 64;
        while (cap < s->next_id + fresh)
            cap *= 2;
        int32_t *v = realloc(s->free_ids, (size_t)cap * sizeof *v);
        if (!v)
            return KVS_ENOMEM;
        s->free_ids = v;
        s->cap_free = cap;
    }
    if (q->n == 0) {
        q->hpos = s->n_holders;
        s->holders[s->n_holders++] = req;
    }
    while (q->n < need) {
        if (s->next_id >= INT32_MAX)
            return KVS_EINVAL;
        q->blocks[q->n++] = s->n_free ? s->free_ids[--s->n_free] : (int32_t)s->next_id++;
        s->held++;
    }
    return KVS_OK;
}

/* Blocks a request holds at least from its (re)start: the reservation. */
static int64_t reservation(const replay_sched *s, const sched_member *m, const sched_member *all,
                           int64_t n_all)
{
    const run_config *c = &s->r->cfg;
    const sched_config *k = &c->sched;
    const trace_req *t = &s->r->tr.reqs[m->req_id];
    if (k->batching == SCHED_BATCHING_STATIC) {
        int64_t omax = 0; /* every member reserves ceil((Pmax + Omax) / bs) */
        for (int64_t j = 0; j < n_all; j++)
            if (s->r->tr.reqs[all[j].req_id].output_tokens > omax)
                omax = s->r->tr.reqs[all[j].req_id].output_tokens;
        return ceil_div(m->tokens + omax, k->block_size);
    }
    if (k->alloc == SCHED_ALLOC_RESERVED)
        return ceil_div(k->max_model_len, k->block_size);
    if (k->alloc == SCHED_ALLOC_RESERVED_ORACLE)
        return ceil_div(t->prompt_tokens + t->output_tokens, k->block_size);
    return 0;
}

/* A prefill member starts its request afresh unless it is the next chunk of
 * the prompt the request holds. */
static int is_restart(const req_state *q, const sched_member *m)
{
    int64_t cached = m->context - m->tokens;
    return m->kind == SCHED_MEMBER_PREFILL && !(q->n > 0 && q->tokens == cached && cached > 0);
}

/* Under priority preemption the engine may preempt every running request
 * while forming a step, find nothing left to decode, and admit instead,
 * without counting those preemptions in any step's n_preempted.  In the
 * members that looks like a prefill step whose absent holders all restart
 * later, which is also what holders preempted at a later decode step look
 * like; the simulator's block count decides: true when releasing the nc
 * candidates gives steps.kv_blocks_used and keeping them does not. */
static int emptied_by_priority(const replay_sched *s, int64_t i, const sched_member *m,
                               int64_t n, int64_t nc)
{
    if (!s->r->cfg.sched.priority_preemption || nc == 0)
        return 0;
    int64_t absent = 0, held = s->held, bs = s->r->cfg.sched.block_size;
    for (int64_t k = 0; k < s->n_holders; k++) {
        const req_state *q = &s->q[s->holders[k]];
        if (q->stamp == i)
            continue;
        if (q->next == NEXT_CONT)
            return 0; /* a request kept running: the engine did not empty */
        absent += q->n;
    }
    for (int64_t j = 0; j < n; j++) {
        const req_state *q = &s->q[m[j].req_id];
        int64_t need = ceil_div(m[j].context, bs);
        if (is_restart(q, &m[j])) {
            int64_t res = reservation(s, &m[j], m, n);
            held += (need > res ? need : res) - q->n;
        } else {
            need = need > q->reserve ? need : q->reserve;
            held += need > q->n ? need - q->n : 0;
        }
    }
    int64_t used = s->r->steps[i].step.kv_blocks_used;
    return held != used && held - absent == used;
}

/* Is request a a worse victim than b?  The engine preempts the request last
 * in policy order first (semantics 3.6; lpm orders victims as fcfs). */
static int worse(const val_run *r, int32_t a, int32_t b)
{
    const trace_req *x = &r->tr.reqs[a], *y = &r->tr.reqs[b];
    if (r->cfg.sched.policy == SCHED_POLICY_PRIORITY && x->priority != y->priority)
        return x->priority > y->priority;
    if (x->arrival_s != y->arrival_s)
        return x->arrival_s > y->arrival_s;
    return a > b;
}

/* Sort v[n] worst victim first (insertion sort: n is at most max_seqs and
 * this runs only when a step preempted fewer requests than it left out). */
static void sort_victims(const val_run *r, int32_t *v, int64_t n)
{
    for (int64_t i = 1; i < n; i++) {
        int32_t x = v[i];
        int64_t j = i;
        for (; j > 0 && worse(r, x, v[j - 1]); j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

int replay_sched_begin(replay_sched *s, const replay_sched_hooks *h, kvs_err *err)
{
    const val_run *r = s->r;
    int64_t i = s->next, n;
    if (s->begun || i >= r->n_steps)
        return kvs_errf(err, KVS_EINTERNAL, "replay: step %lld begun twice or past the end",
                        (long long)i);
    const sched_member *m = val_run_step_members(r, i, &n);
    const int64_t off = r->steps[i].member_off, bs = r->cfg.sched.block_size;
    int has_decode = 0, rc = KVS_OK;
    for (int64_t j = 0; j < n; j++) {
        s->q[m[j].req_id].stamp = i;
        has_decode |= m[j].kind != SCHED_MEMBER_PREFILL;
    }
    /* Preempted while this step was formed: holders absent from it whose next
     * appearance is not a decode or their next prompt chunk.  The step says
     * how many (n_preempted); a partial prompt waiting for blocks (chunked
     * prefill) is absent too but outranks every victim, so the n_preempted
     * worst in policy order are the victims. */
    int64_t nc = 0;
    for (int64_t k = 0; k < s->n_holders; k++) {
        const req_state *q = &s->q[s->holders[k]];
        if (q->stamp != i && q->next != NEXT_CONT)
            s->cand[nc++] = s->holders[k];
    }
    int64_t nv = r->steps[i].step.n_preempted < nc ? r->steps[i].step.n_preempted : nc;
    if (nv == 0 && !has_decode && emptied_by_priority(s, i, m, n, nc))
        nv = nc;
    if (nv > 0 && nv < nc)
        sort_victims(r, s->cand, nc);
    for (int64_t k = 0; k < nv; k++) {
        int32_t id = s->cand[k];
        req_state *q = &s->q[id];
        if (q->next == NEXT_SWAPIN && h && h->swap_out &&
            (rc = h->swap_out(h->ctx, id, q->blocks, q->n, q->tokens, err)) != KVS_OK)
            return rc;
        release(s, id);
    }
    for (int64_t j = 0; j < n; j++) {
        int32_t id = m[j].req_id;
        req_state *q = &s->q[id];
        int64_t cached = m[j].context - m[j].tokens;
        if (is_restart(q, &m[j])) {
            release(s, id); /* a (re)start: frees the blocks of a recompute preemption */
            q->reserve = reservation(s, &m[j], m, n);
            s->hit_starts += cached > 0;
            if (h && h->start && (rc = h->start(h->ctx, id, cached, err)) != KVS_OK)
                return rc;
        } else if (m[j].kind == SCHED_MEMBER_DECODE && q->n == 0) {
            return kvs_errf(err, KVS_EINVAL,
                            "run %lld step %lld: request %d decodes but holds no KV blocks "
                            "(the recorded schedule is inconsistent)",
                            (long long)r->run_id, (long long)i, id);
        } else if (m[j].kind == SCHED_MEMBER_SWAPIN && q->n != 0) {
            return kvs_errf(err, KVS_EINVAL,
                            "run %lld step %lld: request %d swaps in while holding KV blocks "
                            "(the recorded schedule is inconsistent)",
                            (long long)r->run_id, (long long)i, id);
        }
        q->tokens = m[j].context;
        int64_t need = ceil_div(m[j].context, bs);
        if ((rc = grow(s, id, need > q->reserve ? need : q->reserve)) != KVS_OK)
            goto nomem;
        if (m[j].kind == SCHED_MEMBER_SWAPIN && h && h->swap_in &&
            (rc = h->swap_in(h->ctx, id, q->blocks, q->n, err)) != KVS_OK)
            return rc;
        q->next = s->next_of[off + j];
    }
    if (s->held != r->steps[i].step.kv_blocks_used) {
        if (s->mismatches++ == 0)
            s->first_mismatch = i;
    }
    s->begun = 1;
    return KVS_OK;
nomem:
    if (rc == KVS_EINVAL)
        return kvs_errf(err, KVS_EINVAL, "run %lld step %lld: more than 2^31 KV blocks",
                        (long long)r->run_id, (long long)i);
    return kvs_errf(err, KVS_ENOMEM, "replay: out of memory for block tables at step %lld",
                    (long long)i);
}

void replay_sched_end(replay_sched *s)
{
    const val_run *r = s->r;
    int64_t i = s->next, n;
    if (!s->begun)
        return;
    const sched_member *m = val_run_step_members(r, i, &n);
    for (int64_t j = 0; j < n; j++) {
        int32_t id = m[j].req_id;
        if (s->last[id] == i && r->reqs[id].status == SCHED_REQ_FINISHED)
            release(s, id);
    }
    s->begun = 0;
    s->next++;
}
