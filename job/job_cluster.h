/* job_cluster.h — the cluster capacity search (`kvsim capacity --search
 * cluster`): the cheapest replicas x TP x GPU configuration whose run meets
 * the SLOs, at dollars per GPU-hour the user gives (no built-in prices).
 *
 * The candidates are every GPU of the list, every TP degree of the list
 * that the model fits at (job_search_tps), and 1 .. max_replicas replicas,
 * ordered by cost per hour = replicas * tp * price (ties: fewer GPUs, then
 * the order of the lists).  The search probes them in that order and stops
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

/* One configuration the search may probe. */
typedef struct job_cluster_cand {
    int gpu;            /* index into job_cluster_prices */
    int64_t tp;         /* tensor-parallel degree, GPUs per replica */
    int64_t replicas;   /* engines */
    double cost_h;      /* replicas * tp * price, dollars per hour */
} job_cluster_cand;

/* Parse --gpus "a,b" and --price "a=2.5,b=3.6": known GPU names, given
 * once each; every price names a GPU of --gpus and every GPU has a price
 * (KVS_EINVAL naming the flag and the GPU).  Cost: O(length). */
int job_cluster_prices_parse(const char *gpus, const char *prices, job_cluster_prices *out,
                             kvs_err *err);

/* The candidates for base's model, in probe order, into *out (malloc'd)
 * and *n.  tps[0..ntp) ascending; TP degrees a GPU cannot hold are left
 * out (skipped(ctx, gpu, tp, why) hears of each; may be NULL).  Fails when
 * no candidate is left.  Cost: O(gpus * tps * max_replicas log). */
int job_cluster_candidates(const job_opts *base, const job_cluster_prices *p, const double *tps,
                           int ntp, int64_t max_replicas,
                           void (*skipped)(void *ctx, const char *gpu, int64_t tp,
                                           const char *why),
                           void *ctx, job_cluster_cand **out, int *n, kvs_err *err);

/* The probe of candidate k, as job_search_point: the run flags (gpu, tp,
 * replicas set), the point's parameters gpu, tp and replicas stored, the
 * next stored run tagged.  c->param must be "cost_per_hour".  Errors
 * "--db: ...".  Cost: 4 rows. */
int job_cluster_point(job_search *c, const job_cluster_prices *p, const job_cluster_cand *k,
                      job_probe_point *pt, kvs_err *err);

/* Dollars per million output tokens of a configuration costing cost_h
 * dollars per hour at throughput_tok_s output tokens per second (NAN when
 * the throughput is not positive).  Cost: O(1). */
double job_cluster_cost_per_mtok(double cost_h, double throughput_tok_s);

#endif
