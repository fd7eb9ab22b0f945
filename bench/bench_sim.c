/* bench_sim.c — simulator speed and memory at scale (a benchmark, not a
 * test).  Simulates N requests (default 1,000,000) with ShareGPT lengths and
 * Poisson arrivals near saturation for LLaMA-7B on an A100-80GB (roofline
 * cost), once without and once with storing the per-request rows in a
 * fresh SQLite file, and prints requests simulated per wall-second, the
 * wall time of each phase and the process's peak resident memory.
 *
 *   bench_sim [--requests N] [--rate R] [--db FILE] [--lengths FILE]
 *
 * LLaMA-7B's 2,048-token context would reject a fifth of ShareGPT, so the
 * benchmark raises max-model-len to 8,192 (the largest length in the file)
 * to measure the engine on every request. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "job/job.h"

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

int main(int argc, char **argv)
{
    long long n = 1000000;
    double rate = 6.0;
    const char *db = NULL;
    const char *lengths = "traces/lengths_sharegpt_8k_llama2tok.csv";
    const char *engine = "vllm-v1";
    static const struct option opts[] = {{"requests", required_argument, 0, 'n'},
                                         {"rate", required_argument, 0, 'r'},
                                         {"db", required_argument, 0, 'd'},
                                         {"lengths", required_argument, 0, 'l'},
                                         {"engine", required_argument, 0, 'e'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'n': n = atoll(optarg); break;
        case 'r': rate = atof(optarg); break;
        case 'd': db = optarg; break;
        case 'l': lengths = optarg; break;
        case 'e': engine = optarg; break;
        default:
            printf("usage: bench_sim [--requests N] [--rate R] [--db FILE] [--lengths FILE]\n"
                   "                 [--engine vllm-v1|vllm-v0]\n");
            return o == 'h' ? 0 : 2;
        }
    }
    char dbbuf[256];
    if (!db) {
        snprintf(dbbuf, sizeof dbbuf, "/tmp/kvsim-bench-%d.db", (int)getpid());
        db = dbbuf;
    }
    kvs_err err;
    char spec[1000];
    snprintf(spec, sizeof spec, "arrival=poisson,rate=%g,n=%lld,lengths=%s", rate, n, lengths);
    /* the run pipeline of kvsim run (job.h): flags by name, prepare, cost */
    job_opts jo;
    job_opts_init(&jo);
    const char *flags[][2] = {{"model", "llama-7b"}, {"gpu", "a100-80g"},
                              {"max-model-len", "8192"}, {"synthetic", spec}, {"seed", "1"},
                              {"engine", engine}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (job_param_set(&jo, flags[i][0], flags[i][1], &err)) {
            fprintf(stderr, "bench_sim: %s\n", err.msg);
            return 2;
        }
    model_spec m;
    gpu_spec g;
    trace tr;
    cost_model cost;
    double t0 = wall();
    if (job_prepare(&jo, &m, &g, &tr, &err)) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 2;
    }
    double t_gen = wall() - t0;
    run_config cfg = jo.cfg;
    if (job_cost_select(&cfg, &m, &g, NULL, 0, &cost, &err)) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 2;
    }

    /* 1: simulate only */
    run_result res;
    double t1 = wall();
    if (run_execute(&cfg, &tr, &cost, &res, &err)) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 2;
    }
    double t_sim = wall() - t1;
    double mib_sim = peak_mib();
    printf("bench_sim: %lld requests, ShareGPT lengths, Poisson %.2f req/s, llama-7b on a100-80g, %s\n",
           n, rate, engine);
    printf("  load: %lld finished, %lld rejected, %lld steps, mean batch %.1f, "
           "throughput %.0f tok/s, TTFT p50 %.3f s p99 %.3f s, %lld preemptions\n",
           (long long)res.sum.n_finished, (long long)res.sum.n_rejected,
           (long long)res.sum.n_steps, res.sum.mean_batch, res.sum.throughput_tok_s,
           res.sum.ttft.p50, res.sum.ttft.p99, (long long)res.sum.preemptions);
    printf("  trace generation          %7.3f s\n", t_gen);
    printf("  simulate (no rows stored) %7.3f s  = %.0f requests/s   peak RSS %.0f MiB\n", t_sim,
           (double)n / t_sim, mib_sim);
    run_result_free(&res);

    /* 2: simulate and store every request row */
    unlink(db);
    double t2 = wall();
    store *st;
    int64_t run_id;
    if (run_execute(&cfg, &tr, &cost, &res, &err) || store_open(db, &st, &err) ||
        store_write_run(st, &cfg, &res, &run_id, &err)) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 2;
    }
    store_close(st);
    double t_all = wall() - t2;
    printf("  simulate + store rows     %7.3f s  = %.0f requests/s   peak RSS %.0f MiB\n", t_all,
           (double)n / t_all, peak_mib());
    printf("  whole run incl. generation %6.3f s (target < 5 s on one core; peak RSS target < 500 MiB)\n",
           t_gen + t_all);
    run_result_free(&res);
    cost_model_free(&cost);
    trace_free(&tr);
    unlink(db);
    char side[300];
    snprintf(side, sizeof side, "%s-wal", db);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", db);
    unlink(side);
    return 0;
}
