/* run.h — one simulation run: configuration in, per-request results, step
 * records and summary metrics out.  This is the layer the CLI and the tests
 * call; it wires a trace, a cost model and the scheduler through the event
 * loop (engine.h) and computes the metrics of docs/semantics.md section 7.
 * It does no I/O: storing a run is store/store.h's job.
 */
#ifndef RUN_H
#define RUN_H

#include <stdint.h>

#include "../scheduler/sched.h"
#include "../traces/trace.h"
#include "../models/model.h"
#include "../cost/cost.h"
#include "../base/kvs.h"

/* Everything that defines a run, as stored in `runs` (flags map 1:1). */
typedef struct run_config {
    char model[256];          /* model name or config path */
    char gpu[32];             /* GPU name */
    int64_t tp;               /* tensor-parallel degree */
    int64_t ep;               /* expert-parallel degree (MoE models), >= 1 */
    int64_t cp;               /* context-parallel degree, >= 1: the scheduler's block
                                 spans cp * block_size tokens (docs/models.md) */
    char dtype[16];           /* weight dtype (--dtype), "" = the model's own */
    char kv_cache_dtype[16];  /* KV-cache dtype (--kv-cache-dtype), "" = the weights' */
    char trace_path[1024];    /* "" when synthetic */
    char synthetic[1024];     /* synthetic spec, "" when a file */
    char priorities[256];     /* --priorities P:SHARE/...: classes drawn with seed, "" none */
    double rate_scale;        /* arrival rate multiplier (> 0) */
    double rate_rps;          /* --rate: the workload's arrival rate, req/s; 0 = not given
                                 (a trace: rate_scale is derived from it; a synthetic
                                 spec: its rate= is replaced by it) */
    uint64_t seed;            /* synthetic generation seed */
    sched_config sched;       /* engine parameters (total_blocks resolved) */
    int64_t kv_blocks_flag;   /* --kv-blocks, 0 = computed from memory */
    double gpu_mem_util;      /* fraction of HBM kvsim may use */
    int kv_rule;              /* model_kv_rule: how the engine sizes its KV cache (set by
                                 the engine profile; 0 = kvsim's own rule) */
    double swap_gib;          /* host swap space for --preemption swap */
    double frontend_ms;       /* per-request front-end cost (tokenize, detokenize,
                                 HTTP), ms; lands in TTFT and E2E (run_frontend_apply) */
    char cost[256];           /* cost model spec as given */
    char cost_desc[512];      /* cost model's own description */
    char label[256];          /* free text */
    double slo_ttft_s;        /* 0 = no SLO on TTFT */
    double slo_tpot_s;        /* 0 = no SLO on TPOT */
    double slo_e2e_s;         /* 0 = no SLO on E2E */
    int record_steps;         /* keep step records */
    int64_t compare_id;       /* `kvsim compare` group, 0 = none */
    int64_t sweep_id;         /* `kvsim sweep` group, 0 = none */
    /* clusters (sim/cluster.h, docs/cluster.md) */
    int64_t replicas;         /* identical engines behind the router, >= 1 */
    char router[32];          /* router name (sim/router.h), "round-robin" default */
    uint64_t router_seed;     /* seed of the random router */
    int64_t affinity_cap;     /* prefix-affinity: outstanding requests a replica may
                                 have above the least loaded one, requests */
    /* disaggregated serving (docs/cluster.md, section D) */
    char pd[32];              /* --pd "P:D" prefill and decode pool sizes, "" = off */
    char kv_link[64];         /* --kv-link: nvlink | ib | roce | BW_GBPS:LAT_US, "" = nvlink */
    int64_t kv_bytes_per_token; /* resolved: the model's KV bytes per token over all
                                   heads (the whole TP group's), bytes */
    char pd_tp[32];           /* --pd-tp "TP_P:TP_D": each pool's TP degree, "" = both --tp */
    int64_t decode_tp;        /* resolved under --pd: the decode pool's TP degree, GPUs
                                 per decode replica; 0 without --pd (then unused) */
    sched_config decode_sched; /* resolved under --pd: the decode pool's engine parameters
                                  at decode_tp (its own KV blocks, swap, KV groups);
                                  unused while decode_tp is 0 */
} run_config;

typedef struct run_dist {
    double p50, p90, p99, mean; /* seconds (or s/token); NAN if no sample */
} run_dist;

typedef struct run_summary {
    int64_t n_requests, n_finished, n_rejected;
    /* n_rejected by reason (sched_reject_reason); they sum to n_rejected */
    int64_t n_reject_context;      /* P + O over max_model_len */
    int64_t n_reject_token_budget; /* prompt over max_batched_tokens */
    int64_t n_reject_kv;           /* blocks over the whole KV cache */
    run_dist ttft, tpot, e2e, norm_latency;
    double throughput_tok_s;   /* output tokens of finished / (last finish - first arrival) */
    double throughput_req_s;   /* finished requests / same span */
    int64_t preemptions;       /* all kinds */
    int64_t preempt_recompute, preempt_swap, preempt_priority;
    int64_t total_kv_blocks;
    int64_t peak_kv_blocks;    /* max blocks held during a step */
    double mean_kv_blocks;     /* step-duration-weighted mean of blocks held */
    double mean_batch;         /* mean requests per step */
    double makespan_s;         /* last step end - first arrival */
    int64_t n_steps;
    double slo_attainment;     /* finished meeting all SLOs / finished; NAN w/o SLO */
    double goodput_req_s;      /* finished meeting SLOs / span; NAN w/o SLO */
    /* prefix caching and chunked prefill (docs/semantics-extensions.md);
     * counts are over admissions (a request preempted and re-admitted looks
     * its prompt up again); rates are NAN without prefix caching */
    double prefix_hit_rate;       /* hit tokens / prompt tokens (P+g) admitted */
    double prefix_block_hit_rate; /* hit blocks / full hashed prompt blocks admitted */
    int64_t prefix_hit_tokens;    /* tokens of the cached blocks found */
    int64_t prefix_saved_tokens;  /* prompt tokens not computed thanks to hits */
    int64_t prefix_evictions;     /* cached blocks evicted for fresh ones */
    int64_t prefill_chunks;       /* prefill chunks (chunked prefill; else 0) */
    /* clusters: requests routed to the busiest replica / the mean per
     * replica (1 = even); NAN for one engine */
    double load_imbalance;
    /* inter-token latency: the gaps between a request's consecutive tokens
     * (O - 1 per request), over every request, streamed through sim/hist.h:
     * percentiles within 2^-10 relative, mean exact (docs/semantics.md 7) */
    run_dist itl;                 /* seconds */
    int64_t n_itl;                /* gaps counted */
    double itl_std_s;             /* population standard deviation of the gaps, s
                                     (not a `runs` column: --result-json reports it) */
    /* share of steps whose batch each limit kept from growing
     * (sched_step_limit); they sum to 1 over a run with steps, else NAN */
    double limit_kv_share;           /* fraction of steps */
    double limit_max_seqs_share;     /* fraction of steps */
    double limit_token_budget_share; /* fraction of steps */
    double limit_none_share;         /* fraction of steps: nothing waiting */
    double limit_other_share;        /* fraction of steps: a static batch running */
} run_summary;

/* Metrics of one priority class (requests with one priority value). */
typedef struct run_class {
    int32_t priority;          /* the class */
    int64_t n_requests, n_finished, n_rejected;
    run_dist ttft, tpot, e2e;  /* seconds (TPOT s/token), as run_summary */
    double slo_attainment;     /* NAN without SLOs */
} run_class;

#define RUN_MAX_CLASSES 64 /* more distinct priorities: no per-class rows */

typedef struct run_step_rec {
    sched_step step;          /* the step as the scheduler emitted it */
    int64_t member_off;       /* index of its first member in members[] */
    int32_t replica;          /* the engine that ran it (0 for one engine) */
    int32_t pad_;
} run_step_rec;

/* One replica of a cluster run: the metrics of section 7 over the requests
 * the router sent it, with its own steps, KV use and counters. */
typedef struct run_replica {
    int64_t replica;          /* 0 .. replicas - 1 */
    run_summary sum;          /* as the run's, restricted to this engine */
} run_replica;

typedef struct run_result {
    const trace *tr;             /* borrowed: the requests simulated */
    sched_req_result *reqs;      /* [tr->n], owned */
    sched_req_swap *swaps;       /* [tr->n], owned; NULL when the engine cannot swap
                                    (every request's swaps are then 0 and 0 s) */
    double *max_itl_s;           /* [tr->n], owned: each request's largest gap
                                    between consecutive tokens, s; NAN with
                                    fewer than two tokens */
    run_step_rec *steps;         /* [n_steps] if record_steps, else NULL */
    int64_t n_steps;
    sched_member *members;       /* [n_members] concatenated step members */
    int64_t n_members;
    run_summary sum;
    run_class *classes;          /* [n_classes] by priority, owned; 0 classes
                                    when the trace has no priorities or more
                                    than RUN_MAX_CLASSES of them */
    int n_classes;
    int32_t *replica;            /* [tr->n] engine that served each request, owned;
                                    NULL for one engine (every request on 0) */
    int32_t *decode;             /* [tr->n] decode replica of each request, -1 none
                                    (output 1 or refused at prefill); NULL unless --pd */
    double *kv_transfer_s;       /* [tr->n] KV transfer time, seconds, NAN none; NULL
                                    unless --pd */
    int64_t kv_decoders;         /* --pd: D, the last D of the replicas decode; 0 without */
    int64_t kv_transfers;        /* --pd: requests whose KV moved */
    double kv_transfer_mean_s;   /* --pd: their mean transfer time, seconds (0 if none) */
    double kv_transfer_max_s;    /* --pd: the longest, seconds */
    double kv_wait_mean_s;       /* --pd: their mean wait from the prefill's end to
                                    the decode side's allocation (D4), seconds */
    double kv_wait_max_s;        /* --pd: the longest such wait, seconds */
    run_replica *replicas;       /* [n_replicas] per-replica metrics, owned; NULL
                                    for one engine */
    int64_t n_replicas;
    char started_at[32];         /* ISO-8601 UTC */
    double wall_s;               /* simulation wall time */
    int64_t leap_steps;          /* steps the engine leapt (docs/semantics-v1.md 9);
                                    a diagnostic, not stored */
    int64_t leap_resumes;        /* plans that resumed a paused leap; the same */
    int64_t rows_streamed;       /* request rows stored while the run simulated
                                    (job_stream.h), requests; a diagnostic, not stored */
} run_result;

/* Fill a config with defaults (llama-3-8b, a100-80g, tp 1, block 16, ...). */
void run_config_defaults(run_config *cfg);

/* Apply cfg's --dtype and --kv-cache-dtype to the model shape *m (names as
 * model_dtype_parse reads them; "" keeps the model's own).  Errors name the
 * flag.  Cost: O(1). */
int run_config_apply_dtypes(const run_config *cfg, model_spec *m, kvs_err *err);

/* Resolve what the flags leave implicit, for model m on GPU g:
 * max_model_len (0 = the model's context), max_batched_tokens (0 =
 * max(2048, max_model_len); 2048 with chunked prefill), total_blocks (kv_blocks_flag, or the KV
 * capacity of docs/semantics.md section 2), the swap space in blocks and the
 * per-block transfer time over the host link.  Under --pd also decode_tp
 * (--pd-tp's TP_D, else tp) and decode_sched, the same resolved at
 * decode_tp; --pd-tp's TP_P must equal tp (the job layer sets it).
 * Errors name the flag. */
int run_config_resolve(run_config *cfg, const model_spec *m, const gpu_spec *g,
                       kvs_err *err);
/* The first step of run_config_resolve: max_model_len and
 * max_batched_tokens as above, nothing else.  Cost: O(1). */
void run_config_resolve_budget(run_config *cfg, const model_spec *m);

/* The KV capacity cfg's engine rule (cfg->kv_rule) gives model m on GPU g
 * under cfg's tp/ep/cp, block size, token budget and max-seqs: what
 * run_config_resolve sizes total_blocks with when --kv-blocks is not
 * given.  Cost: O(1). */
int run_config_kv_capacity(const run_config *cfg, const model_spec *m, const gpu_spec *g,
                           kv_capacity *out, kvs_err *err);

/* The scheduler's configuration for cfg: cfg->sched, with a block that
 * spans cfg->cp * block_size tokens of context (each of the cp groups
 * holds block_size of them, so a block of total_blocks is one block on
 * every GPU).  The identity when cp is 1.  Cost: O(1). */
void run_config_sched(const run_config *cfg, sched_config *out);

/* run_config_sched for a cluster's decode pool under --pd: from
 * cfg->decode_sched when cfg->decode_tp is set (resolved), else from
 * cfg->sched (both pools alike).  Cost: O(1). */
void run_config_decode_sched(const run_config *cfg, sched_config *out);

/* Simulate `tr` under cfg->sched (total_blocks already resolved) and cost.
 * On success *out owns its arrays (run_result_free). Cost: O(events log). */
int run_execute(const run_config *cfg, const trace *tr, const cost_model *cost,
                run_result *out, kvs_err *err);

/* Hears how a run is going: the simulated clock (end of the latest step,
 * s), requests that made their last token so far and the trace's requests,
 * and the wall seconds since the run started.  Called every 4096 steps. */
typedef void (*run_progress_fn)(void *ctx, double sim_s, int64_t done, int64_t total,
                                double wall_s);

/* run_execute with a progress hook (fn may be NULL). */
int run_execute_progress(const run_config *cfg, const trace *tr, const cost_model *cost,
                         run_progress_fn fn, void *ctx, run_result *out, kvs_err *err);

/* run_execute_progress with the decode pool's own cost model under --pd
 * (--pd-tp with a decode TP other than the prefill pool's: the same --cost
 * built at cfg->decode_tp); decode_cost NULL = `cost` for every engine.
 * Both borrowed. */
int run_execute_pools(const run_config *cfg, const trace *tr, const cost_model *cost,
                      const cost_model *decode_cost, run_progress_fn fn, void *ctx,
                      run_result *out, kvs_err *err);

/* Request rows handed out while a run goes, so that a second thread can
 * store them (job/job_stream.c).  A request's row is done once the request
 * is finished or rejected and every token it made has been counted: at
 * the start of each step that is not leapt (a leap's tokens are counted
 * when it ends, before any step that is not), the run finds the first k
 * requests done, and when k has grown it calls ready(ctx, live, k) on the
 * simulating thread.  Rows [0, k) then never change again until the run
 * calls stop(ctx), once, when the engine is done and before it touches
 * them (the front-end shift, handing the results over): stop must return
 * only when no other thread reads `live` any more.  One engine only: a
 * cluster run (replicas, --pd) calls neither. */
typedef struct run_live run_live;
typedef struct run_row_sink {
    void (*ready)(void *ctx, const run_live *live, int64_t k);
    void (*stop)(void *ctx);
    void *ctx;
} run_row_sink;

/* Request i's row as run_result will hold it, from a live run (i < the k
 * of the latest ready call): its result with the front end applied
 * (run_frontend_apply) and its largest gap (run_result.max_itl_s[i]).
 * Bit for bit the values the finished run stores.  O(1); reads only. */
void run_live_row(const run_live *live, int64_t i, sched_req_result *r, double *max_itl_s);

/* Request i's swaps in a live run ({0 s, 0} when the engine cannot swap).
 * O(1); reads only. */
sched_req_swap run_live_swap(const run_live *live, int64_t i);

/* Whether cfg runs a cluster (replicas or --pd: sim/cluster.h) rather
 * than one engine.  O(1). */
int run_config_clustered(const run_config *cfg);

/* run_execute_pools whose rows are also handed out while it runs (rows
 * may be NULL: then it is run_execute_pools; a cluster ignores them). */
int run_execute_rows(const run_config *cfg, const trace *tr, const cost_model *cost,
                     const cost_model *decode_cost, run_progress_fn fn, void *ctx,
                     const run_row_sink *rows, run_result *out, kvs_err *err);
void run_result_free(run_result *r);

/* Every request's inter-token gaps rebuilt from the recorded steps (a run
 * with record_steps), by the rule the ITL metrics use: request i's gaps are
 * (*gaps)[(*off)[i] .. (*off)[i + 1]), seconds, in token order; *off has
 * tr->n + 1 entries.  Both malloc'd (the caller frees).  KVS_ENOMEM.
 * Cost: O(members). */
int run_request_itls(const run_result *res, double **gaps, int64_t **off);

/* The front-end rule (docs/semantics-extensions.md): the engine runs on the
 * trace's arrival times, then each request's first_token_s and finish_s
 * (where set) are reported cfg->frontend_ms later, as if the request had
 * reached the engine that much after it was sent (the engine's rules do not
 * depend on the absolute time).  Step records keep engine time.  A no-op at
 * 0.  Used by run_execute and cluster_execute.  Cost: O(n). */
void run_frontend_apply(const run_config *cfg, sched_req_result *reqs, int64_t n);

/* Metrics of section 7 from per-request results; used by run_execute and by
 * validation (which recomputes them with measured step times). */
void run_metrics_compute(const run_config *cfg, const trace *tr,
                         const sched_req_result *reqs, run_summary *sum);

/* The limit shares of sum (limit_*_share) from steps counted by
 * sched_step_limit over n_steps steps; NAN without steps.  Cost: O(1). */
void run_metrics_limit_shares(const int64_t steps[SCHED_LIMIT_COUNT], int64_t n_steps,
                              run_summary *sum);

/* Per-priority-class metrics: *out (malloc'd, ascending priority) and *n.
 * Leaves *out NULL and *n 0 when the trace has no priority column or more
 * than RUN_MAX_CLASSES classes.  Cost: O(n * classes). */
int run_metrics_by_class(const run_config *cfg, const trace *tr,
                         const sched_req_result *reqs, run_class **out, int *n);

#endif
