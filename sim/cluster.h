/* cluster.h — a cluster run: `replicas` identical engines (each with its
 * own scheduler, KV cache and steps) on one simulated clock, fed by a
 * router that picks a replica at each request's arrival (sim/router.h).
 * The rules are docs/cluster.md's; run_execute calls this when
 * cfg->replicas > 1 and keeps the single-engine loop (engine.h) otherwise.
 *
 * Every request keeps its trace id; each engine is created for the whole
 * trace and sees only the arrivals routed to it; without --pd the engines
 * share one set of per-request arrays (sched_init_shared), under --pd each
 * has its own, O(n) memory per replica.  Results: run_result.reqs as for one
 * engine, run_result.replica (which engine served each request), steps
 * tagged with their replica and numbered in the cluster's start order, and
 * run_result.replicas (the metrics of each engine).
 *
 * With --pd P:D the engines 0 .. P-1 are the prefill pool and P .. P+D-1
 * the decode pool: the router places arrivals on the prefill pool, each
 * prefill engine runs its requests with output 1, and a request with more
 * output moves (its KV over the --kv-link) to the least loaded decode
 * engine, which decodes the rest (docs/cluster.md, section D).
 * run_result.decode and kv_transfer_s record the hand-offs.
 */
#ifndef CLUSTER_H
#define CLUSTER_H

#include "run.h"

#define CLUSTER_MAX_REPLICAS 4096
#define CLUSTER_MAX_TP 1024 /* --pd-tp's bound, as --tp's */

/* cfg->router, or "round-robin" when it is empty (a zeroed config). */
const char *cluster_router_name(const run_config *cfg);

/* Check the cluster fields of cfg: replicas in [1, CLUSTER_MAX_REPLICAS],
 * a known router, affinity_cap >= 0; with --pd a split that adds up to
 * --replicas (or --replicas left at 1), vllm-v1, a valid --kv-link and
 * --pd-tp (each needs --pd; --pd-tp's TP_P must be cfg->tp).  KVS_EINVAL naming the flag.
 * Cost: O(routers). */
int cluster_config_check(const run_config *cfg, kvs_err *err);

/* Disaggregated serving (docs/cluster.md, section D): parse --pd "P:D"
 * into the pool sizes (each >= 1, P + D <= CLUSTER_MAX_REPLICAS); "" gives
 * 0 and 0.  KVS_EINVAL naming --pd.  Cost: O(length). */
int cluster_pd_parse(const char *pd, int64_t *p, int64_t *d, kvs_err *err);

/* --pd-tp "TP_P:TP_D" into each pool's TP degree (each in [1,
 * CLUSTER_MAX_TP]); "" gives 0 and 0 (both pools at --tp).  KVS_EINVAL
 * naming --pd-tp.  Cost: O(length). */
int cluster_pd_tp_parse(const char *pd_tp, int64_t *tp_p, int64_t *tp_d, kvs_err *err);

/* After cluster_config_check: with --pd, set cfg->replicas to P + D, an
 * empty cfg->kv_link to "nvlink" and cfg->decode_tp to --pd-tp's TP_D (or
 * cfg->tp); without --pd, decode_tp to 0.
 * KVS_EINVAL as cluster_config_check. */
int cluster_config_resolve(run_config *cfg, kvs_err *err);

/* Simulate `tr` on cfg->replicas engines behind cfg->router; *out as
 * run_execute's.  Under --pd the decode pool's engines run under
 * run_config_decode_sched(cfg) and decode_cost (pass `cost` when the pools
 * share a TP); every other engine under cfg->sched and cost.
 * Cost: O(events * (log replicas + router)) plus the engines' own work. */
int cluster_execute(const run_config *cfg, const trace *tr, const cost_model *cost,
                    const cost_model *decode_cost, run_result *out, kvs_err *err);

#endif
