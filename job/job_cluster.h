/* job_cluster.h — the cluster capacity search (`kvsim capacity --search
 * cluster`): the cheapest replicas x TP x GPU configuration whose run meets
 * the SLOs, at dollars per GPU-hour the user gives (no built-in prices).
 *
 * The candidates are every GPU of the list, every TP degree of the list
 * that the model fits at (job_search_tps), and 1 .. max_replicas replicas,
 * plus, with --pd-splits, disaggregated P:D configurations (each pool its
 * own TP of the list), ordered by cost per hour = GPUs * price (ties:
 * fewer GPUs, then the order of the lists, aggregated first).  The search probes them in that order and stops
 * at the first that holds, which is therefore the cheapest; every probe is
 * a stored run of the search's sweep (job.h's job_search), its value the
 * candidate's cost per hour.  Rules: docs/cluster.md, section S.
 */
#ifndef JOB_CLUSTER_H
#define JOB_CLUSTER_H

#include "job.h"

#define JOB_CLUSTER_MAX_GPUS 8

/* The GPUs searched and their prices. */
typedef struct job_cluster_prices {
    int n;                                /* GPUs */
    char gpu[JOB_CLUSTER_MAX_GPUS][32];   /* names as given to --gpus */
    double price[JOB_CLUSTER_MAX_GPUS];   /* dollars per GPU-hour, > 0 */
} job_cluster_prices;

/* The P:D splits the search tries besides the aggregated configurations
 * (--pd-splits; docs/cluster.md, S2). */
typedef struct job_cluster_splits {
    int64_t n;          /* splits; 0 = aggregated only */
    int64_t *p, *d;     /* [n] prefill and decode replicas, owned */
} job_cluster_splits;

/* One configuration the search may probe. */
typedef struct job_cluster_cand {
    int gpu;            /* index into job_cluster_prices */
    int64_t tp;         /* tensor-parallel degree, GPUs per replica (P:D: per prefill
                           replica) */
    int64_t replicas;   /* engines (P:D: P + D) */
    int64_t p;          /* P:D: prefill replicas; 0 = aggregated */
    int64_t tp_d;       /* P:D: GPUs per decode replica; 0 = aggregated */
    double cost_h;      /* GPUs * price, dollars per hour */
} job_cluster_cand;

/* GPUs of candidate k: replicas * tp, or P * tp + D * tp_d.  Cost: O(1). */
int64_t job_cluster_cand_gpus(const job_cluster_cand *k);

/* Parse --pd-splits: "none" or "" (no split), "auto" (every P:D with
 * P, D >= 1 and P + D <= max_replicas; max_replicas at most
 * JOB_CLUSTER_MAX_AUTO), or a list "P:D,P:D" (each as --pd, P + D <=
 * max_replicas, no split twice).  KVS_EINVAL naming --pd-splits.  Caller
 * frees with job_cluster_splits_free.  Cost: O(splits). */
int job_cluster_splits_parse(const char *spec, int64_t max_replicas, job_cluster_splits *out,
                             kvs_err *err);
void job_cluster_splits_free(job_cluster_splits *s);

#define JOB_CLUSTER_MAX_AUTO 64 /* --pd-splits auto: the largest --max-replicas */

/* Parse --gpus "a,b" and --price "a=2.5,b=3.6": known GPU names, given
 * once each; every price names a GPU of --gpus and every GPU has a price
 * (KVS_EINVAL naming the flag and the GPU).  Cost: O(length). */
int job_cluster_prices_parse(const char *gpus, const char *prices, job_cluster_prices *out,
                             kvs_err *err);

/* The candidates for base's model, in probe order, into *out (malloc'd)
 * and *n: every GPU x TP x 1 .. max_replicas aggregated, and every GPU x
 * split of `splits` (may be NULL) x prefill TP x decode TP, both TPs from
 * tps.  tps[0..ntp) ascending; TP degrees a GPU cannot hold are left out
 * (skipped(ctx, gpu, tp, why) hears of each; may be NULL).  Order: cost
 * per hour, then fewer GPUs, the order of --gpus, aggregated before P:D,
 * the smaller (prefill) TP, decode TP, replicas, P.  Fails when no
 * candidate is left.  Cost: O(gpus * tps^2 * (max_replicas + splits) log). */
int job_cluster_candidates(const job_opts *base, const job_cluster_prices *p, const double *tps,
                           int ntp, int64_t max_replicas, const job_cluster_splits *splits,
                           void (*skipped)(void *ctx, const char *gpu, int64_t tp,
                                           const char *why),
                           void *ctx, job_cluster_cand **out, int *n, kvs_err *err);

/* The probe of candidate k, as job_search_point: the run flags (gpu, tp,
 * replicas set; a P:D candidate also pd and pd-tp, an aggregated one no
 * kv-link), the point's parameters gpu, tp, replicas (and pd, pd-tp)
 * stored, the next stored run tagged.  c->param must be "cost_per_hour".
 * Errors "--db: ...".  Cost: 6 rows. */
int job_cluster_point(job_search *c, const job_cluster_prices *p, const job_cluster_cand *k,
                      job_probe_point *pt, kvs_err *err);

/* Dollars per million output tokens of a configuration costing cost_h
 * dollars per hour at throughput_tok_s output tokens per second (NAN when
 * the throughput is not positive).  Cost: O(1). */
double job_cluster_cost_per_mtok(double cost_h, double throughput_tok_s);

#endif
