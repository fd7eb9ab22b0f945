/* cluster.c — the multi-engine event loop and its results (cluster.h). */
#include "cluster.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "evq.h"
#include "itl.h"
#include "steps.h"
#include "kvlink.h"
#include "router.h"

const char *cluster_router_name(const run_config *cfg)
{
    return cfg->router[0] ? cfg->router : "round-robin";
}

int cluster_pd_parse(const char *pd, int64_t *p, int64_t *d, kvs_err *err)
{
    *p = *d = 0;
    if (!pd || !pd[0])
        return KVS_OK;
    char *end;
    long long a = strtoll(pd, &end, 10), b = -1;
    if (end != pd && *end == ':' && end[1] >= '0' && end[1] <= '9')
        b = strtoll(end + 1, &end, 10);
    else
        end = (char *)"x";
    if (*end || a < 1 || b < 1 || a > CLUSTER_MAX_REPLICAS || b > CLUSTER_MAX_REPLICAS ||
        a + b > CLUSTER_MAX_REPLICAS)
        return kvs_errf(err, KVS_EINVAL,
                        "--pd: '%s' is not P:D with P, D >= 1 prefill and decode replicas "
                        "(P + D <= %d)", pd, CLUSTER_MAX_REPLICAS);
    *p = a;
    *d = b;
    return KVS_OK;
}

int cluster_pd_tp_parse(const char *pd_tp, int64_t *tp_p, int64_t *tp_d, kvs_err *err)
{
    *tp_p = *tp_d = 0;
    if (!pd_tp || !pd_tp[0])
        return KVS_OK;
    char *end;
    long long a = strtoll(pd_tp, &end, 10), b = -1;
    if (end != pd_tp && *end == ':' && end[1] >= '0' && end[1] <= '9')
        b = strtoll(end + 1, &end, 10);
    else
        end = (char *)"x";
    if (*end || a < 1 || b < 1 || a > CLUSTER_MAX_TP || b > CLUSTER_MAX_TP)
        return kvs_errf(err, KVS_EINVAL,
                        "--pd-tp: '%s' is not TP_P:TP_D with each TP degree in [1, %d]", pd_tp,
                        CLUSTER_MAX_TP);
    *tp_p = a;
    *tp_d = b;
    return KVS_OK;
}

/* The --pd, --pd-tp and --kv-link checks of cluster_config_check. */
static int pd_check(const run_config *cfg, kvs_err *err)
{
    int64_t p, d, tp_p, tp_d;
    int rc = cluster_pd_parse(cfg->pd, &p, &d, err);
    if (rc || (rc = cluster_pd_tp_parse(cfg->pd_tp, &tp_p, &tp_d, err)))
        return rc;
    if (p == 0 && tp_p > 0)
        return kvs_errf(err, KVS_EINVAL, "--pd-tp: applies only with --pd");
    if (p == 0)
        return cfg->kv_link[0] ? kvs_errf(err, KVS_EINVAL, "--kv-link: applies only with --pd")
                               : KVS_OK;
    if (tp_p > 0 && tp_p != cfg->tp)
        return kvs_errf(err, KVS_EINVAL,
                        "--pd-tp %s: the prefill pool's TP %lld differs from --tp %lld (leave "
                        "--tp out or give TP_P)",
                        cfg->pd_tp, (long long)tp_p, (long long)cfg->tp);
    if (cfg->replicas != 1 && cfg->replicas != p + d)
        return kvs_errf(err, KVS_EINVAL,
                        "--pd %s: the pools add up to %lld replicas but --replicas is %lld "
                        "(leave --replicas out or give P + D)",
                        cfg->pd, (long long)(p + d), (long long)cfg->replicas);
    if (cfg->sched.engine != SCHED_ENGINE_VLLM_V1)
        return kvs_errf(err, KVS_EINVAL,
                        "--pd: disaggregated serving needs --engine vllm-v1; the %s profile "
                        "has no KV hand-off (docs/cluster.md, D7)",
                        sched_engine_name(cfg->sched.engine));
    kv_link l;
    return kv_link_parse(cfg->kv_link, &l, err);
}

int cluster_config_resolve(run_config *cfg, kvs_err *err)
{
    int64_t p, d;
    int rc = pd_check(cfg, err);
    cfg->decode_tp = 0;
    if (!rc && !(rc = cluster_pd_parse(cfg->pd, &p, &d, err)) && p > 0) {
        cfg->replicas = p + d;
        if (!cfg->kv_link[0]) /* the default, stored by name */
            strcpy(cfg->kv_link, "nvlink");
        int64_t tp_p, tp_d;
        if (!(rc = cluster_pd_tp_parse(cfg->pd_tp, &tp_p, &tp_d, err)))
            cfg->decode_tp = tp_d > 0 ? tp_d : cfg->tp;
    }
    return rc;
}

int cluster_config_check(const run_config *cfg, kvs_err *err)
{
    int rc = pd_check(cfg, err);
    if (rc)
        return rc;
    if (cfg->replicas < 1 || cfg->replicas > CLUSTER_MAX_REPLICAS)
        return kvs_errf(err, KVS_EINVAL, "--replicas: %lld is out of range [1, %d]",
                        (long long)cfg->replicas, CLUSTER_MAX_REPLICAS);
    if (!router_find(cluster_router_name(cfg)))
        return kvs_errf(err, KVS_EINVAL, "--router: unknown router '%s' (%s)", cfg->router,
                        router_names());
    if (cfg->affinity_cap < 0)
        return kvs_errf(err, KVS_EINVAL, "--affinity-cap: %lld is negative",
                        (long long)cfg->affinity_cap);
    return KVS_OK;
}

/* One replica's step sink and aggregates (as run.c's for one engine). */
typedef struct cl_rep {
    struct cluster *cl;    /* the cluster it belongs to */
    int32_t index;         /* its replica number */
    int busy;              /* a step is in flight */
    int plan_queued;       /* it is in the cluster's todo list */
    double wake_at;        /* time of a queued timeout PLAN, seconds, or -1 */
    run_step_agg agg;      /* its steps' KV and batch aggregates (steps.h) */
    double last_end_s;     /* end of its last step, seconds */
    int32_t *fin;          /* --pd, prefill pool: prefill members of the step in
                              flight, the requests it may finish */
    int64_t n_fin, fin_cap;
} cl_rep;

typedef struct cluster {
    const run_config *cfg; /* borrowed */
    run_result *res;       /* being filled (replica[], steps, members) */
    int64_t n;             /* replicas */
    int64_t np;            /* prefill pool 0 .. np-1 (--pd), decode np .. n-1; n without */
    int64_t live_from;     /* refresh the view after every event of replicas >= this */
    trace_req *pre_reqs;   /* [tr->n] --pd: the prefill engines' trace, output 1, owned */
    kv_link link;          /* --pd: the KV link */
    int64_t handoffs;      /* --pd: requests sent to the decode pool */
    double wait_sum_s, wait_max_s; /* --pd: loads' waits for decode blocks (D4), s */
    sched **eng;           /* [n] the engines */
    cl_rep *rep;           /* [n] their loop state and aggregates */
    router_replica *view;  /* [n] what the router sees */
    int64_t *todo;         /* [n] replicas to plan at the current instant, FIFO */
    int live;              /* 1: keep view current after every event (the
                              router reads it); else only at the end */
    int32_t *ahead_next;   /* [tr->n] routed ahead (route_ahead): the next request
                              routed to the same replica, -1 none; NULL: not ahead */
    int64_t *ahead_head;   /* [n] each replica's next request still to arrive, -1 none
                              (its engine may take arrivals in: sched_set_arrivals) */
    int64_t steps_cap, members_cap; /* capacities of res->steps / res->members */
    int64_t n_steps;       /* steps of all replicas, in start order */
    int failed;            /* out of memory recording steps */
    run_itl itl;           /* inter-token latency over every engine (itl.h) */
    int64_t limit_steps[SCHED_LIMIT_COUNT]; /* every engine's steps by sched_step_limit */
    const trace *tr;       /* the requests (borrowed) */
    const router_vt *router; /* the router */
} cluster;

static void on_step(void *ctx, const sched_step *st, const sched_member *m, int64_t nm)
{
    cl_rep *k = ctx;
    cluster *cl = k->cl;
    run_step_agg_add(&k->agg, st);
    int64_t global = cl->n_steps++;
    if (st->limit >= 0 && st->limit < SCHED_LIMIT_COUNT)
        cl->limit_steps[st->limit]++;
    const double t_end = st->start_s + st->dur_s;
    if (st->leapt)
        run_itl_leapt_step(&cl->itl, k->index, st);
    run_itl_members(&cl->itl, k->index, m, nm, t_end, st->held);
    if (k->index < cl->np && cl->np < cl->n && !cl->failed) /* --pd: who may finish */
        for (int64_t i = 0; i < nm; i++) {
            if (m[i].kind != SCHED_MEMBER_PREFILL)
                continue;
            if (run_grow((void **)&k->fin, &k->fin_cap, k->n_fin + 1, sizeof *k->fin)) {
                cl->failed = 1;
                return;
            }
            k->fin[k->n_fin++] = m[i].req_id;
        }
    if (!cl->cfg->record_steps || cl->failed)
        return;
    /* steps.step_id: the cluster's start order */
    if (run_steps_append(cl->res, &cl->steps_cap, &cl->members_cap, st, global, k->index, m, nm))
        cl->failed = 1;
}

static void on_leap(void *ctx, const int32_t *ids, int64_t n, int64_t steps,
                    const int32_t *each)
{
    cl_rep *k = ctx;
    run_itl_leap_end(&k->cl->itl, k->index, ids, n, steps, each);
}

/* Bring the router's view of replica r up to date with its engine. */
static void refresh_now(cluster *cl, int64_t r)
{
    int64_t resolved, used;
    sched_get_load(cl->eng[r], &resolved, &used);
    router_replica *v = &cl->view[r];
    v->outstanding = v->routed - resolved;
    v->kv_used = used;
    assert(v->outstanding >= 0);
}

static void refresh(cluster *cl, int64_t r)
{
    if (r >= cl->live_from)
        refresh_now(cl, r);
}

static void todo_add(cluster *cl, int64_t r, int64_t *ntodo)
{
    cl_rep *k = &cl->rep[r];
    if (!k->busy && !k->plan_queued) {
        k->plan_queued = 1;
        cl->todo[(*ntodo)++] = r;
    }
}

/* --pd: prefill replica r's step ended at `now`.  Its requests that
 * finished there with more output to make arrive at the decode replica
 * with the fewest outstanding requests (D4), which plans next; their
 * blocks stay here until their KV has been read (or, refused there, go at
 * once).  Those with output 1 are done and free their blocks at once. */
static void pd_step_end(cluster *cl, const trace *tr, int64_t r, int64_t *ntodo)
{
    cl_rep *k = &cl->rep[r];
    const sched_req_result *res = sched_results(cl->eng[r]);
    router_view dv = {cl->n - cl->np, cl->view + cl->np, cl->eng + cl->np, tr->reqs, 0, 0,
                      {{0}}};
    for (int64_t i = 0; i < k->n_fin; i++) {
        int32_t id = k->fin[i];
        if (res[id].status != SCHED_REQ_FINISHED)
            continue;
        if (tr->reqs[id].output_tokens < 2) {
            sched_release_finished(cl->eng[r], id);
            continue;
        }
        int64_t d = cl->np + router_argmin(&dv, NULL);
        cl->view[d].routed++;
        cl->res->decode[id] = (int32_t)d;
        cl->handoffs++;
        sched_arrive_remote(cl->eng[d], id);
        if (sched_results(cl->eng[d])[id].status == SCHED_REQ_REJECTED)
            sched_release_finished(cl->eng[r], id); /* no transfer (D5) */
        refresh_now(cl, d);
        todo_add(cl, d, ntodo);
    }
    k->n_fin = 0;
    refresh(cl, r);
}

/* --pd: the loads decode replica r's last plan began (D4): each request's
 * KV crosses the link from then, and arrives as a KV_ARRIVAL event. */
static int pd_loads(cluster *cl, evq *q, int64_t r)
{
    int64_t n;
    const sched_kv_load *ld = sched_loads_started(cl->eng[r], &n);
    for (int64_t i = 0; i < n; i++) {
        double x = kv_link_time_s(&cl->link, ld[i].tokens * cl->cfg->kv_bytes_per_token);
        cl->res->kv_transfer_s[ld[i].id] = x;
        const int64_t p = cl->res->replica[ld[i].id];
        double w = ld[i].start_s - sched_results(cl->eng[p])[ld[i].id].first_token_s;
        cl->wait_sum_s += w;
        cl->wait_max_s = w > cl->wait_max_s ? w : cl->wait_max_s;
        if (evq_push(q, ld[i].start_s + x, EVQ_KIND_KV_ARRIVAL, ld[i].id))
            return -1;
    }
    return 0;
}

#define PLAN_ARG(r) ((int64_t)(r)) /* a timeout PLAN event's argument */

/* The earlier of t and replica k's timeout (none when wake_at < 0). */
static double before_wake(const cl_rep *k, double t)
{
    return k->wake_at >= 0.0 && k->wake_at < t ? k->wake_at : t;
}

/* Trace row a's arrival time, INFINITY past the end. */
static double arrival_at(const trace *tr, int64_t a)
{
    return a >= 0 && a < tr->n ? tr->reqs[a].arrival_s : INFINITY;
}

/* Replica r plans at `now` (not busy), `next` the first trace row not yet
 * routed, rv what the router reads: a step's end or a timeout goes on the
 * queue.  KVS_OK, KVS_ENOMEM, or KVS_EINVAL when it is stuck. */
static int plan_one(cluster *cl, evq *q, int64_t r, double now, int64_t next,
                    const router_view *rv, kvs_err *err)
{
    cl_rep *k = &cl->rep[r];
    const int more = next < cl->tr->n;
    double t_end;
    if (cl->ahead_next) { /* nothing reaches r before its next arrival or timeout */
        sched_set_horizon(cl->eng[r], before_wake(k, arrival_at(cl->tr, cl->ahead_head[r])));
        sched_set_arrivals(cl->eng[r], &cl->ahead_head[r], cl->ahead_next,
                           before_wake(k, INFINITY));
    } else if (cl->np == cl->n && !cl->cfg->record_steps) {
        /* a router that reads state (K8a): nothing reaches r before the
         * next arrival that may go to it (K8b), or its timeout */
        const router_vt *rt = cl->router;
        const int64_t safe = more && rt->safe_arrivals ? rt->safe_arrivals(rv, r) : 0;
        const double far = before_wake(k, arrival_at(cl->tr, next + safe));
        const double near = before_wake(k, arrival_at(cl->tr, next));
        sched_set_horizon_pair(cl->eng[r], near, far);
    }
    int plan = sched_plan_step(cl->eng[r], now, more, &t_end);
    refresh(cl, r);
    if (r >= cl->np && cl->np < cl->n && pd_loads(cl, q, r))
        return kvs_errf(err, KVS_ENOMEM, "cluster: out of memory");
    if (plan == SCHED_PLAN_STEP) {
        k->busy = 1;
        if (evq_push(q, t_end, EVQ_KIND_STEP_END, r))
            return kvs_errf(err, KVS_ENOMEM, "cluster: out of memory");
    } else if (plan == SCHED_PLAN_WAIT && k->wake_at != t_end) {
        k->wake_at = t_end;
        if (evq_push(q, t_end, EVQ_KIND_PLAN, PLAN_ARG(r)))
            return kvs_errf(err, KVS_ENOMEM, "cluster: out of memory");
    } else if (plan == SCHED_PLAN_STUCK) {
        return kvs_errf(err, KVS_EINVAL, "simulation (replica %lld) %s", (long long)r,
                        sched_error(cl->eng[r]));
    }
    return KVS_OK;
}

/* A router that ignores load (round-robin, random) picks from the arrival
 * count and its generator alone, so every request's replica is known
 * before the run: picked here, in arrival order, from a copy of the view.
 * Each replica then plans with the next arrival routed to it as its
 * horizon (sched_set_horizon), as one engine does with its next arrival,
 * and V1 leaps past the other replicas' arrivals.  The choices are the
 * same as at each arrival; what the replicas share of the figures does not
 * depend on how their steps interleave (itl.h).  Not with --pd (the
 * decode pool's hand-offs come when prefills finish) or --record-steps
 * (steps are numbered in the cluster's start order, no leaps).  Cost:
 * O(requests), 4 bytes each. */
static int route_ahead(cluster *cl, const router_vt *router, router_view rv)
{
    const trace *tr = cl->tr;
    if (router->reads_state || cl->np < cl->n || cl->cfg->record_steps || tr->n > INT32_MAX)
        return KVS_OK;
    cl->ahead_next = malloc((size_t)(tr->n > 0 ? tr->n : 1) * sizeof *cl->ahead_next);
    cl->ahead_head = malloc((size_t)cl->n * sizeof *cl->ahead_head);
    if (!cl->ahead_next || !cl->ahead_head)
        return KVS_ENOMEM;
    for (int64_t i = 0; i < tr->n; i++) {
        int64_t r = router->pick(&rv, i);
        assert(r >= 0 && r < cl->np);
        rv.arrivals++;
        cl->res->replica[i] = (int32_t)r;
    }
    for (int64_t r = 0; r < cl->n; r++)
        cl->ahead_head[r] = -1;
    for (int64_t i = tr->n - 1; i >= 0; i--) { /* ahead_head ends as each one's first */
        int32_t r = cl->res->replica[i];
        cl->ahead_next[i] = (int32_t)cl->ahead_head[r];
        cl->ahead_head[r] = i;
    }
    return KVS_OK;
}

/* Trace arrival `id` (K2.2): the replica the router picks, or the one
 * routed ahead (K8), whose engine may have taken it in during a leap
 * already.  Returns the replica. */
static int64_t route_arrival(cluster *cl, const router_vt *router, router_view *rv, int64_t id)
{
    int64_t r;
    int taken = 0; /* the engine took it in during a leap */
    if (cl->ahead_next) { /* picked before the run (route_ahead) */
        r = cl->res->replica[id];
        taken = cl->ahead_head[r] != id;
        assert(!taken || cl->rep[r].busy);
        if (!taken)
            cl->ahead_head[r] = cl->ahead_next[id];
    } else {
        r = router->pick(rv, id);
    }
    assert(r >= 0 && r < cl->np);
    rv->arrivals++;
    cl->res->replica[id] = (int32_t)r;
    cl->view[r].routed++;
    if (!taken)
        sched_arrive(cl->eng[r], id);
    refresh(cl, r);
    return r;
}

/* The run's end: every request resolved (a hand-off on both sides) and,
 * under --pd, every kept block back (D5); else a kvsim bug. */
static int check_end(cluster *cl, const trace *tr, double now, kvs_err *err)
{
    int64_t resolved = 0;
    for (int64_t r = 0; r < cl->n; r++) {
        refresh_now(cl, r);
        resolved += cl->view[r].routed - cl->view[r].outstanding;
    }
    for (int64_t r = 0; cl->np < cl->n && r < cl->n; r++) {
        sched_counters c;
        sched_get_counters(cl->eng[r], &c);
        if (c.used_blocks != 0)
            return kvs_errf(err, KVS_EINTERNAL,
                            "cluster: replica %lld ends holding %lld KV blocks (a kvsim bug)",
                            (long long)r, (long long)c.used_blocks);
    }
    if (resolved != tr->n + cl->handoffs)
        return kvs_errf(err, KVS_EINTERNAL,
                        "cluster: %lld of %lld requests unresolved at t=%.6f (a kvsim bug)",
                        (long long)(tr->n + cl->handoffs - resolved), (long long)tr->n, now);
    return KVS_OK;
}

/* The event loop of engine.c, one busy/plan state per replica: at one
 * instant every step end (of any replica) comes first, then arrivals (each
 * routed on the state those step ends left), then each touched replica
 * plans its next step.  The plans of an instant wait in cl->todo (FIFO,
 * each replica once) rather than on the queue: they run when the queue's
 * next event is later than the instant, which is when engine.c's PLAN
 * events would pop (a timeout PLAN due at the instant pops before them, as
 * there). */
static int cluster_loop(cluster *cl, const trace *tr, double *end_s, kvs_err *err)
{
    evq q;
    router_view rv = {cl->np, cl->view, cl->eng, tr->reqs, 0, cl->cfg->affinity_cap, {{0}}};
    rng_init(&rv.gen, cl->cfg->router_seed);
    const router_vt *router = router_find(cluster_router_name(cl->cfg));
    if (!router)
        return kvs_errf(err, KVS_EINVAL, "--router: unknown router '%s'", cl->cfg->router);
    cl->live = router->reads_state;
    cl->router = router;
    cl->live_from = cl->live ? 0 : cl->np; /* the decode pool's choice reads state */
    if (route_ahead(cl, router, rv) || evq_init(&q, 16 + 2 * cl->n))
        return kvs_errf(err, KVS_ENOMEM, "cluster: out of memory");
    int rc = KVS_OK;
    int64_t next = 0, ntodo = 0;
    double now = 0.0;
    if (tr->n > 0 && evq_push(&q, tr->reqs[0].arrival_s, EVQ_KIND_ARRIVAL, 0))
        goto nomem;
    evq_event e;
    for (;;) {
        const evq_event *first = evq_peek(&q);
        if (ntodo > 0 && (!first || first->t > now)) {
            for (int64_t i = 0; i < ntodo && rc == KVS_OK; i++) {
                int64_t r = cl->todo[i];
                cl->rep[r].plan_queued = 0;
                if (!cl->rep[r].busy)
                    rc = plan_one(cl, &q, r, now, next, &rv, err);
            }
            ntodo = 0;
            if (rc)
                goto done;
            continue;
        }
        if (!evq_pop(&q, &e))
            break;
        now = e.t;
        int64_t r = e.arg;
        if (e.kind == EVQ_KIND_STEP_END) {
            sched_finish_step(cl->eng[r], now);
            cl->rep[r].busy = 0;
            cl->rep[r].last_end_s = now;
            refresh(cl, r);
            if (r < cl->np && cl->np < cl->n)
                pd_step_end(cl, tr, r, &ntodo);
        } else if (e.kind == EVQ_KIND_ARRIVAL) {
            r = route_arrival(cl, router, &rv, e.arg);
            next = e.arg + 1;
            if (next < tr->n && evq_push(&q, tr->reqs[next].arrival_s, EVQ_KIND_ARRIVAL, next))
                goto nomem;
        } else if (e.kind == EVQ_KIND_KV_ARRIVAL) { /* --pd: D4 */
            int64_t p = cl->res->replica[e.arg], d = cl->res->decode[e.arg];
            sched_release_finished(cl->eng[p], e.arg);
            refresh(cl, p);
            todo_add(cl, p, &ntodo);
            sched_kv_loaded(cl->eng[d], e.arg);
            refresh(cl, d);
            todo_add(cl, d, &ntodo);
            continue;
        } else { /* a timeout PLAN fired */
            cl->rep[r].wake_at = -1.0;
            if (!cl->rep[r].busy && (rc = plan_one(cl, &q, r, now, next, &rv, err)))
                goto done;
            continue;
        }
        todo_add(cl, r, &ntodo);
    }
    rc = check_end(cl, tr, now, err);
    goto done;
nomem:
    rc = kvs_errf(err, KVS_ENOMEM, "cluster: out of memory");
done:
    *end_s = now;
    evq_free(&q);
    return rc;
}

/* One engine's counters, added into *sum. */
static void add_counters(const sched_counters *c, run_summary *sum)
{
    sum->preempt_recompute += c->preempt_recompute;
    sum->preempt_swap += c->preempt_swap;
    sum->preempt_priority += c->preempt_priority;
    sum->preemptions += c->preempt_recompute + c->preempt_swap;
    sum->prefix_hit_tokens += c->prefix_hit_tokens;
    sum->prefix_saved_tokens += c->prefix_saved_tokens;
    sum->prefix_evictions += c->prefix_evictions;
    sum->prefill_chunks += c->prefill_chunks;
}

/* Hit rates from summed counters (run.c's rule: NAN without caching). */
static void set_rates(const run_config *cfg, int64_t qt, int64_t ht, int64_t qb, int64_t hb,
                      run_summary *sum)
{
    int pc = cfg->sched.prefix_caching;
    sum->prefix_hit_rate = pc && qt > 0 ? (double)ht / (double)qt : NAN;
    sum->prefix_block_hit_rate = pc && qb > 0 ? (double)hb / (double)qb : NAN;
}

/* Per-replica metrics: each engine's requests as a trace of their own (in
 * trace order), so run_metrics_compute applies unchanged.  Under --pd a
 * prefill engine's are its requests with output 1 and its own results
 * (TTFT = E2E there); a decode engine's are those it decoded, whole, with
 * the merged results (D6).  The request ids are sorted into the engines'
 * runs in one pass over the trace (a counting sort, stable); each run is
 * then copied out in turn. */
static int replica_metrics(cluster *cl, const trace *tr, double first_arrival)
{
    run_result *res = cl->res;
    const int pd = cl->np < cl->n;
    size_t nn = (size_t)(tr->n > 0 ? tr->n : 1);
    int32_t *ids = malloc(nn * (pd ? 2 : 1) * sizeof *ids); /* a hand-off is in two runs */
    int64_t *off = calloc((size_t)cl->n + 1, sizeof *off);  /* [n + 1] run starts */
    res->replicas = calloc((size_t)cl->n, sizeof *res->replicas);
    if (!ids || !off || !res->replicas) {
        free(ids);
        free(off);
        return -1;
    }
    res->n_replicas = cl->n;
    for (int64_t i = 0; i < tr->n; i++) {
        off[res->replica[i] + 1]++;
        if (pd && res->decode[i] >= 0)
            off[res->decode[i] + 1]++;
    }
    int64_t longest = 1;
    for (int64_t r = 0; r < cl->n; r++) {
        longest = off[r + 1] > longest ? off[r + 1] : longest;
        off[r + 1] += off[r];
    }
    for (int64_t i = 0; i < tr->n; i++) { /* off[r]: run r's next slot */
        ids[off[res->replica[i]]++] = (int32_t)i;
        if (pd && res->decode[i] >= 0)
            ids[off[res->decode[i]]++] = (int32_t)i;
    }
    for (int64_t r = cl->n; r > 0; r--) /* back to the starts */
        off[r] = off[r - 1];
    off[0] = 0;
    trace_req *sub = malloc((size_t)longest * sizeof *sub);
    sched_req_result *sr = malloc((size_t)longest * sizeof *sr);
    if (!sub || !sr) {
        free(sub);
        free(sr);
        free(ids);
        free(off);
        return -1;
    }
    for (int64_t r = 0; r < cl->n; r++) {
        const int pre = pd && r < cl->np, dec = r >= cl->np;
        const sched_req_result *own = sched_results(cl->eng[r]);
        const int64_t m = off[r + 1] - off[r];
        for (int64_t j = 0; j < m; j++) {
            const int32_t i = ids[off[r] + j];
            sub[j] = pre ? cl->pre_reqs[i] : tr->reqs[i];
            sr[j] = pre ? own[i] : res->reqs[i];
        }
        trace st = {0};
        st.reqs = sub;
        st.n = m;
        run_replica *rp = &res->replicas[r];
        rp->replica = r;
        run_summary *sum = &rp->sum;
        run_metrics_compute(cl->cfg, &st, sr, sum);
        sched_counters c;
        sched_get_counters(cl->eng[r], &c);
        add_counters(&c, sum);
        set_rates(cl->cfg, c.prefix_query_tokens, c.prefix_hit_tokens, c.prefix_query_blocks,
                  c.prefix_hit_blocks, sum);
        const cl_rep *k = &cl->rep[r];
        sum->total_kv_blocks = dec && cl->cfg->decode_tp > 0 ? cl->cfg->decode_sched.total_blocks
                                                             : cl->cfg->sched.total_blocks;
        sum->peak_kv_blocks = k->agg.peak_blocks;
        sum->mean_kv_blocks = run_step_agg_mean_blocks(&k->agg);
        sum->n_steps = k->agg.n_steps;
        sum->mean_batch = run_step_agg_mean_batch(&k->agg);
        sum->makespan_s = k->agg.n_steps > 0 ? k->last_end_s - first_arrival : 0.0;
        sum->load_imbalance = NAN;
    }
    free(sub);
    free(sr);
    free(ids);
    free(off);
    return 0;
}

/* The cluster's summary: section 7 over every request, the engines'
 * counters summed, KV figures per engine (peak: the highest of any engine;
 * mean: over every engine's busy time), and the load imbalance. */
static void cluster_summary(cluster *cl, const trace *tr, double end_s)
{
    run_result *res = cl->res;
    run_summary *sum = &res->sum;
    run_metrics_compute(cl->cfg, tr, res->reqs, sum);
    int64_t qt = 0, ht = 0, qb = 0, hb = 0, most = 0;
    double bs = 0.0, busy = 0.0, members = 0.0;
    for (int64_t r = 0; r < cl->n; r++) {
        sched_counters c;
        sched_get_counters(cl->eng[r], &c);
        add_counters(&c, sum);
        res->leap_steps += c.leap_steps;
        res->leap_resumes += c.leap_resumes;
        qt += c.prefix_query_tokens;
        ht += c.prefix_hit_tokens;
        qb += c.prefix_query_blocks;
        hb += c.prefix_hit_blocks;
        const cl_rep *k = &cl->rep[r];
        if (k->agg.peak_blocks > sum->peak_kv_blocks)
            sum->peak_kv_blocks = k->agg.peak_blocks;
        bs += k->agg.block_seconds;
        busy += k->agg.busy_s;
        members += k->agg.members_total;
        sum->n_steps += k->agg.n_steps;
        if (r < cl->np && cl->view[r].routed > most)
            most = cl->view[r].routed;
    }
    set_rates(cl->cfg, qt, ht, qb, hb, sum);
    cl->res->max_itl_s = run_itl_finish(&cl->itl, sum);
    run_metrics_limit_shares(cl->limit_steps, sum->n_steps, sum);
    sum->total_kv_blocks = cl->cfg->sched.total_blocks;
    sum->mean_kv_blocks = busy > 0 ? bs / busy : 0.0;
    sum->mean_batch = sum->n_steps > 0 ? members / (double)sum->n_steps : 0.0;
    sum->makespan_s = tr->n > 0 ? end_s - tr->reqs[0].arrival_s : 0.0;
    /* over the pool the router fills: every engine, or the prefill pool */
    sum->load_imbalance = tr->n > 0 ? (double)most * (double)cl->np / (double)tr->n : NAN;
}

static double now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cluster_setup(cluster *cl, const trace *tr, const cost_model *cost,
                         const cost_model *decode_cost, kvs_err *err)
{
    size_t n = (size_t)cl->n, nn = (size_t)(tr->n > 0 ? tr->n : 1);
    cl->eng = calloc(n, sizeof *cl->eng);
    cl->rep = calloc(n, sizeof *cl->rep);
    cl->view = calloc(n, sizeof *cl->view);
    cl->todo = calloc(n, sizeof *cl->todo);
    cl->res->replica = malloc(nn * sizeof *cl->res->replica);
    if (!cl->eng || !cl->rep || !cl->view || !cl->todo || !cl->res->replica)
        return kvs_errf(err, KVS_ENOMEM, "cluster: out of memory for %lld replicas",
                        (long long)cl->n);
    if (cl->np < cl->n) { /* --pd: the prefill engines see output 1 (D2) */
        cl->pre_reqs = malloc(nn * sizeof *cl->pre_reqs);
        cl->res->decode = malloc(nn * sizeof *cl->res->decode);
        cl->res->kv_transfer_s = malloc(nn * sizeof *cl->res->kv_transfer_s);
        if (!cl->pre_reqs || !cl->res->decode || !cl->res->kv_transfer_s)
            return kvs_errf(err, KVS_ENOMEM, "cluster: out of memory for %lld requests",
                            (long long)tr->n);
        for (int64_t i = 0; i < tr->n; i++) {
            cl->pre_reqs[i] = tr->reqs[i];
            cl->pre_reqs[i].output_tokens = 1;
            cl->res->decode[i] = -1;
            cl->res->kv_transfer_s[i] = NAN;
        }
        int rc = kv_link_parse(cl->cfg->kv_link, &cl->link, err);
        if (rc)
            return rc;
    }
    int rc0 = run_itl_init(&cl->itl, tr, cl->n, err);
    if (rc0)
        return rc0;
    req_prefixes px = trace_prefixes(tr);
    sched_config sc, dsc; /* --pd-tp: the decode pool has its own */
    run_config_sched(cl->cfg, &sc); /* --cp: the block spans cp * block_size tokens */
    run_config_decode_sched(cl->cfg, &dsc);
    for (int64_t r = 0; r < cl->n; r++) {
        const int pre = r < cl->np && cl->np < cl->n, dec = r >= cl->np;
        /* without --pd each request lives on one engine: they share its state */
        sched *owner = r > 0 && cl->np == cl->n ? cl->eng[0] : NULL;
        int rc = sched_init_shared(&cl->eng[r], dec ? &dsc : &sc,
                                   pre ? cl->pre_reqs : tr->reqs, tr->n,
                                   dec ? decode_cost : cost, owner, err);
        if (rc || (rc = sched_attach_prefixes(cl->eng[r], &px, err)) ||
            (pre && (rc = sched_keep_finished(cl->eng[r], 1, err))) ||
            (dec && cl->np < cl->n && (rc = sched_accept_remote(cl->eng[r], err))))
            return rc;
        cl->rep[r].cl = cl;
        cl->rep[r].index = (int32_t)r;
        cl->rep[r].wake_at = -1.0;
        /* every member, decodes included: the ITL needs each token's request */
        sched_set_step_sink(cl->eng[r], on_step, &cl->rep[r], 1);
        if (!cl->cfg->record_steps) /* recorded steps list every member: no leaps */
            sched_set_leap_sink(cl->eng[r], on_leap);
    }
    return KVS_OK;
}

static void cluster_free(cluster *cl)
{
    for (int64_t r = cl->n - 1; cl->eng && r >= 0; r--) /* engine 0, the owner, last */
        sched_free(cl->eng[r]);
    for (int64_t r = 0; cl->rep && r < cl->n; r++)
        free(cl->rep[r].fin);
    run_itl_free(&cl->itl);
    free(cl->ahead_next);
    free(cl->ahead_head);
    free(cl->pre_reqs);
    free(cl->eng);
    free(cl->rep);
    free(cl->view);
    free(cl->todo);
}

int cluster_execute(const run_config *cfg, const trace *tr, const cost_model *cost,
                    const cost_model *decode_cost, run_result *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    out->tr = tr;
    time_t wall = time(NULL);
    struct tm tmv;
    gmtime_r(&wall, &tmv);
    strftime(out->started_at, sizeof out->started_at, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    double t0 = now_wall();
    int rc = cluster_config_check(cfg, err);
    if (rc)
        return rc;
    cluster cl = {0};
    cl.cfg = cfg;
    cl.res = out;
    cl.tr = tr;
    cl.n = cfg->replicas;
    int64_t pp, dd;
    if ((rc = cluster_pd_parse(cfg->pd, &pp, &dd, err)))
        return rc;
    if (pp > 0 && pp + dd != cl.n)
        return kvs_errf(err, KVS_EINVAL, "--pd %s: replicas %lld unresolved (a kvsim bug)",
                        cfg->pd, (long long)cl.n);
    cl.np = pp > 0 ? pp : cl.n;
    double end_s = 0.0;
    if ((rc = cluster_setup(&cl, tr, cost, decode_cost, err)) ||
        (rc = cluster_loop(&cl, tr, &end_s, err)))
        goto fail;
    if (cl.failed) {
        rc = kvs_errf(err, KVS_ENOMEM, "--record-steps: out of memory after %lld steps",
                      (long long)out->n_steps);
        goto fail;
    }
    if (cl.itl.oom) {
        rc = kvs_errf(err, KVS_ENOMEM, "run: out of memory (inter-token latencies)");
        goto fail;
    }
    out->reqs = malloc((size_t)(tr->n > 0 ? tr->n : 1) * sizeof *out->reqs);
    if (!out->reqs)
        goto nomem;
    for (int64_t i = 0; i < tr->n; i++) {
        out->reqs[i] = sched_results(cl.eng[out->replica[i]])[i];
        if (out->decode && out->decode[i] >= 0) { /* D6: TTFT there, the rest here */
            sched_req_result m = sched_results(cl.eng[out->decode[i]])[i];
            m.first_token_s = out->reqs[i].first_token_s;
            m.preemptions += out->reqs[i].preemptions;
            out->reqs[i] = m;
            double x = out->kv_transfer_s[i];
            out->kv_transfers++;
            out->kv_transfer_mean_s += x;
            out->kv_transfer_max_s = x > out->kv_transfer_max_s ? x : out->kv_transfer_max_s;
        }
    }
    for (int64_t r = 0; r < cl.n && !out->swaps; r++) /* any engine that can swap */
        if (sched_swaps(cl.eng[r]) &&
            !(out->swaps = calloc((size_t)(tr->n > 0 ? tr->n : 1), sizeof *out->swaps)))
            goto nomem;
    for (int64_t i = 0; out->swaps && i < tr->n; i++) /* the engine of the row's result */
        out->swaps[i] = sched_swap_at(
            sched_swaps(cl.eng[out->decode && out->decode[i] >= 0 ? out->decode[i]
                                                                   : out->replica[i]]),
            i);
    out->kv_decoders = cl.n - cl.np;
    if (out->kv_transfers > 0) {
        out->kv_transfer_mean_s /= (double)out->kv_transfers;
        out->kv_wait_mean_s = cl.wait_sum_s / (double)out->kv_transfers;
        out->kv_wait_max_s = cl.wait_max_s;
    }
    run_frontend_apply(cfg, out->reqs, tr->n);
    cluster_summary(&cl, tr, end_s);
    if (replica_metrics(&cl, tr, tr->n > 0 ? tr->reqs[0].arrival_s : 0.0) ||
        run_metrics_by_class(cfg, tr, out->reqs, &out->classes, &out->n_classes))
        goto nomem;
    cluster_free(&cl);
    out->wall_s = now_wall() - t0;
    return KVS_OK;
nomem:
    rc = kvs_errf(err, KVS_ENOMEM, "cluster: out of memory for the results");
fail:
    cluster_free(&cl);
    run_result_free(out);
    return rc;
}
