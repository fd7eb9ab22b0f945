/* sglang_admit.c — the SGLang engine's step 2c: forming an extend batch
 * from the chunked request K and the waiting list W under the PrefillAdder's
 * budgets (docs/semantics-sglang.md, section 5).  Page size 1 throughout:
 * ceil_ps and floor_ps are the identity and a page is one token.
 *
 * The ledger keeps SGLang's arithmetic: the running reserve is a real
 * number (a sum over R of min(O - g, CLIP) * rho, added in R's order), each
 * admitted piece adds integers to it, and the remaining figures are read
 * from the live free and evictable counts whenever a test needs them.
 * Cost: O(|R|) to open the ledger, O(1) per request tested (plus its tree
 * lookup), and O(|L|) per completion check under the ignore-EOS test.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sglang_internal.h"

#define CLIP 4096 /* SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION */
#define PS 1      /* page size */

enum { ADD_CONTINUE = 0, ADD_NO_TOKEN = 1, ADD_OTHER = 2 };

typedef struct ledger {
    double offset;      /* rem_total's offset: the running reserve, then each piece's
                           x + res + ps, in that order */
    int64_t cur_offset; /* cur_rem's offset: each piece's x + ps */
    int64_t rem_input;  /* B - sum of x */
    int64_t rem_chunk;  /* C - sum of x (chunking on) */
} ledger;

static int64_t usable(const sched *s) { return s->sgl->F + sgl_evictable(s->sgl); }

static double rem_total(const sched *s, const ledger *l)
{
    return (double)usable(s) - l->offset;
}

static int64_t cur_rem(const sched *s, const ledger *l) { return usable(s) - l->cur_offset; }

static int64_t clip_out(int64_t o) { return o < CLIP ? o : CLIP; }

/* A piece of x tokens joins the batch; res is min(O, CLIP) when it ends
 * the prompt, else 0 (_update_prefill_budget). */
static void ledger_add(ledger *l, int64_t x, int64_t res)
{
    l->offset += (double)(x + res + PS);
    l->cur_offset += x + PS;
    l->rem_input -= x;
    l->rem_chunk -= x;
}

static int budget_state(const sched *s, const ledger *l)
{
    if (rem_total(s, l) <= 0 || cur_rem(s, l) <= 0)
        return ADD_NO_TOKEN;
    if (l->rem_input <= 0 || (s->sgl->C > 0 && l->rem_chunk <= 0))
        return ADD_OTHER;
    return ADD_CONTINUE;
}

/* Admit a piece of request id: q tokens over its c stored ones (its
 * prefix hit m for a request from W, the earlier pieces for K).  tok: the
 * piece ends the prompt. */
static void admit(sched *s, sgl_batch *b, ledger *l, int32_t id, int64_t q, int tok)
{
    const trace_req *r = &s->reqs[id];
    ledger_add(l, q, tok ? clip_out(r->output_tokens) : 0);
    sgl_batch_add(b, s->sgl, id, q, (tok ? SGL_TOK : 0) | (id != s->sgl->K ? SGL_NEW : 0));
}

/* ------------------------------------------ the completion check (5.6) */
static void cl_push_sorted(sched_sgl *v, int64_t left, int64_t held)
{
    /* stable insertion while the list is built: after equal lefts */
    int64_t i = v->ncl;
    while (i > 0 && v->cl_left[i - 1] > left) {
        v->cl_left[i] = v->cl_left[i - 1];
        v->cl_held[i] = v->cl_held[i - 1];
        i--;
    }
    v->cl_left[i] = left;
    v->cl_held[i] = held;
    v->ncl++;
}

/* SGLang's later insertion: at the first index whose left is >= this one,
 * else before the last element (at 0 into an empty list). */
static void cl_insert_quirk(sched_sgl *v, int64_t left, int64_t held)
{
    int64_t i = 0;
    while (i < v->ncl && v->cl_left[i] < left)
        i++;
    if (i == v->ncl && v->ncl > 0)
        i = v->ncl - 1;
    memmove(v->cl_left + i + 1, v->cl_left + i, (size_t)(v->ncl - i) * sizeof *v->cl_left);
    memmove(v->cl_held + i + 1, v->cl_held + i, (size_t)(v->ncl - i) * sizeof *v->cl_held);
    v->cl_left[i] = left;
    v->cl_held[i] = held;
    v->ncl++;
}

static void cl_add_req(sched *s, int32_t id, int quirk)
{
    sched_sgl *v = s->sgl;
    const int64_t left = s->reqs[id].output_tokens - v->rq[id].g;
    if (left <= 0)
        return;
    if (quirk)
        cl_insert_quirk(v, left, sgl_T(s, id));
    else
        cl_push_sorted(v, left, sgl_T(s, id));
}

/* The list L: built from r, R in order, then the batch (K first) the first
 * time in a pass, then only r's pair is added. */
static void cl_add(sched *s, const sgl_batch *b, int32_t id)
{
    sched_sgl *v = s->sgl;
    if (v->cl_built) {
        cl_add_req(s, id, 1);
        return;
    }
    v->cl_built = 1;
    v->ncl = 0;
    cl_add_req(s, id, 0);
    for (int64_t i = 0; i < v->nR; i++)
        cl_add_req(s, v->R[i], 0);
    for (int64_t i = 0; i < b->n; i++)
        cl_add_req(s, b->id[i], 0);
}

/* 5.6: with the radix cache off every request of kvsim is ignore_eos. */
static int test_ignore_eos(sched *s, sgl_batch *b, ledger *l, int32_t id)
{
    sched_sgl *v = s->sgl;
    const int64_t T = sgl_T(s, id);
    const int64_t cur = cur_rem(s, l);
    const double tot = rem_total(s, l);
    if ((double)T > fmin((double)cur, tot))
        return ADD_NO_TOKEN;
    cl_add(s, b, id);
    int64_t curp = cur - T, freed = 0;
    for (int64_t i = 0; i < v->ncl; i++) {
        int64_t bs = v->ncl - i;
        if (curp + freed - v->cl_left[i] * bs <= bs) /* one spare token per request */
            return ADD_NO_TOKEN;
        freed += v->cl_held[i];
    }
    if (v->C <= 0 || T <= l->rem_chunk) {
        v->rq[id].m = v->rq[id].c = 0;
        admit(s, b, l, id, T, 1);
    } else if (l->rem_chunk <= 0) {
        return ADD_OTHER;
    } else {
        v->rq[id].m = v->rq[id].c = 0;
        admit(s, b, l, id, l->rem_chunk, 0); /* the first piece: r becomes K */
    }
    return budget_state(s, l);
}

/* 5.7: the general test, with the radix cache (m tokens matched, its path
 * ending at node). */
static int test_general(sched *s, sgl_batch *b, ledger *l, int32_t id, int64_t m, int32_t node)
{
    sched_sgl *v = s->sgl;
    const trace_req *r = &s->reqs[id];
    const int64_t T = sgl_T(s, id), e = T - m;
    int64_t left = r->output_tokens - v->rq[id].g;
    const int64_t tot = e + clip_out(left > 0 ? left : 0) + PS;
    if ((double)tot >= rem_total(s, l))
        return ADD_NO_TOKEN;
    if (v->C <= 0 && b->n > 0 && e >= l->rem_input)
        return ADD_OTHER;
    radix_lock(v->tree, node); /* _lock_node: E may drop */
    if ((double)tot >= rem_total(s, l)) {
        radix_unlock(v->tree, node);
        return ADD_NO_TOKEN;
    }
    int64_t q = e;
    int whole = v->C <= 0 || e <= l->rem_chunk;
    if (!whole) {
        q = l->rem_chunk;
        if (q <= 0) {
            radix_unlock(v->tree, node);
            return ADD_OTHER;
        }
    }
    v->rq[id].m = v->rq[id].c = m;
    v->rq[id].node = node; /* the lock stays until the request leaves */
    admit(s, b, l, id, q, whole);
    return budget_state(s, l);
}

/* 5.4: K's next piece, always scheduled. */
static void continue_chunked(sched *s, sgl_batch *b, ledger *l)
{
    sched_sgl *v = s->sgl;
    const int32_t k = v->K;
    const int64_t rest = sgl_T(s, k) - v->rq[k].c;
    double rt = rem_total(s, l);
    int64_t x = rt >= (double)l->rem_chunk ? l->rem_chunk : (int64_t)rt; /* int() truncates */
    if (x <= 0)
        x = l->rem_chunk;
    int64_t q = rest < x ? rest : x;
    assert(q >= 1);
    admit(s, b, l, k, q, q == rest);
}

/* 5.8, lpm: every waiting request's prefix is looked up (its whole T
 * tokens; the lookup stamps and may split the tree); one that matches at
 * most 32 tokens is matched against a scratch tree of the waiting requests
 * seen so far in this pass and deprioritized if that finds 32 or more,
 * else added to it; W is then sorted stably by longest match, capped at
 * T - 1, the deprioritized last.  Only while W holds at most 128
 * requests.  O(|W| log |W| + lookups). */
static void lpm_order(sched *s)
{
    sched_sgl *v = s->sgl;
    if (!v->lpm || !v->tree || v->nw == 0 || v->nw > LPM_MAX)
        return;
    radix *scratch;
    kvs_err err;
    if (radix_init(&scratch, radix_ident_of(v->tree), radix_ctx_of(v->tree), &err)) {
        snprintf(s->errmsg, sizeof s->errmsg, "out of memory in the radix cache");
        return;
    }
    for (int64_t i = 0; i < v->nw; i++) {
        int32_t id = v->W[v->wh + i], node;
        const int64_t T = sgl_T(s, id);
        int64_t m = sgl_lookup(s, id, T, &node);
        v->lpm_key[i] = m < T - 1 ? m : T - 1;
        v->lpm_dep[i] = 0;
        if (m <= LPM_IN_BATCH) {
            int64_t mb = radix_match(scratch, id, T, &node);
            if (mb >= LPM_IN_BATCH)
                v->lpm_dep[i] = 1;
            else if (mb < 0 || radix_insert(scratch, id, T, NULL) < 0)
                snprintf(s->errmsg, sizeof s->errmsg, "out of memory in the radix cache");
        }
    }
    radix_free(scratch);
    /* stable insertion sort by (deprioritized, -key) */
    int32_t *ids = v->lpm_ids;
    for (int64_t i = 0; i < v->nw; i++) {
        int32_t id = v->W[v->wh + i];
        int64_t key = v->lpm_key[i];
        uint8_t dep = v->lpm_dep[i];
        int64_t j = i;
        while (j > 0 && (v->lpm_dep[j - 1] > dep ||
                         (v->lpm_dep[j - 1] == dep && v->lpm_key[j - 1] < key))) {
            ids[j] = ids[j - 1];
            v->lpm_key[j] = v->lpm_key[j - 1];
            v->lpm_dep[j] = v->lpm_dep[j - 1];
            j--;
        }
        ids[j] = id;
        v->lpm_key[j] = key;
        v->lpm_dep[j] = dep;
    }
    memcpy(v->W + v->wh, ids, (size_t)v->nw * sizeof *ids);
}

/* Stop reasons as the step record says them. */
static int limit_of(int why)
{
    return why == ADD_NO_TOKEN ? SCHED_LIMIT_KV : SCHED_LIMIT_TOKEN_BUDGET;
}

void sgl_form_extend(sched *s, sgl_batch *b, int *limit)
{
    sched_sgl *v = s->sgl;
    b->kind = SGL_BATCH_NONE;
    b->n = 0;
    *limit = SCHED_LIMIT_NONE_WAITING;
    const int64_t A0 = v->M - v->nR, A1 = v->M - v->nholders;
    const int64_t A = A0 < A1 ? A0 : A1;
    if (v->K < 0 && (v->full || v->nw == 0)) { /* gate 1 */
        if (v->nw > 0)
            *limit = SCHED_LIMIT_KV;
        return;
    }
    if (v->K < 0 && A <= 0) { /* gate 2 */
        v->full = 1;
        *limit = SCHED_LIMIT_MAX_SEQS;
        return;
    }
    lpm_order(s); /* 5.8: fcfs leaves W as it is */
    ledger l = {0.0, 0, v->B, v->C};
    for (int64_t i = 0; i < v->nR; i++) { /* the running reserve, in R's order */
        int32_t id = v->R[i];
        int64_t left = s->reqs[id].output_tokens - v->rq[id].g;
        l.offset += (double)clip_out(left) * v->rho;
    }
    v->cl_built = 0;
    if (v->K >= 0)
        continue_chunked(s, b, &l);
    int64_t taken = 0; /* W's leading requests admitted */
    for (; taken < v->nw; taken++) {
        if (b->n >= A) {
            v->full = 1;
            *limit = SCHED_LIMIT_MAX_SEQS;
            break;
        }
        int32_t id = v->W[v->wh + taken];
        int why;
        if (v->tree) {
            int32_t node;
            int64_t m = sgl_lookup(s, id, sgl_T(s, id) - 1, &node);
            why = test_general(s, b, &l, id, m, node);
        } else {
            why = test_ignore_eos(s, b, &l, id);
        }
        /* a test that admitted r puts it last in the batch */
        int in = b->n > 0 && b->id[b->n - 1] == id;
        if (why != ADD_CONTINUE) {
            if (why == ADD_NO_TOKEN)
                v->full = 1;
            *limit = limit_of(why);
            taken += in;
            break;
        }
        assert(in);
    }
    if (b->n == 0)
        return;
    /* 5.9: the admitted leave W; K first, new members after it */
    v->wh += taken;
    v->nw -= taken;
    b->kind = SGL_BATCH_EXTEND;
    int64_t need = 0;
    for (int64_t i = 0; i < b->n; i++)
        need += b->mem[i].tokens;
    sgl_alloc(s, need);
    for (int64_t i = 0; i < b->n; i++) {
        int32_t id = b->id[i];
        sgl_req *q = &v->rq[id];
        if (!(b->tok[i] & SGL_NEW)) { /* K */
            if (b->tok[i] & SGL_TOK) /* its last piece: K is cleared after the pass */
                v->K = -1, sgl_set_state(s, id, SGL_RUNNING);
        } else {
            v->nholders++; /* a request slot */
            if (b->tok[i] & SGL_TOK) {
                sgl_set_state(s, id, SGL_RUNNING);
            } else {
                assert(v->K < 0);
                v->K = id;
                sgl_set_state(s, id, SGL_CHUNKED);
            }
        }
        q->c = b->mem[i].context;
    }
}
