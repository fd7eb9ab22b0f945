/* bench_cluster.c — the cost of the cluster loop (a benchmark, not a test).
 * Simulates N requests (default 1,000,000) with ShareGPT lengths and
 * Poisson arrivals (default 1.4 req/s, as bench_sim) for LLaMA-7B on an
 * A100-80GB (roofline cost, vllm-v1 or vllm-v0), once on one engine at R requests/s and once on K replicas (default 16)
 * at K*R requests/s behind each router given — the same requests with
 * their arrival times divided by K, so that every replica carries about
 * the load of the single engine and the simulated work (steps, batch
 * sizes) is comparable; the ratio of times is then the price of K engines
 * on one clock and of the router.  Prints the time of run_execute (CPU
 * seconds of the process: it runs on one thread, and the figure does not
 * move with other load on a shared machine), steps and mean batch of
 * each, and the ratio (target <= 1.5).
 *
 *   bench_cluster [--requests N] [--rate R] [--replicas K] [--routers A,B]
 *                 [--engine vllm-v1|vllm-v0] [--same-arrivals] [--repeat R]
 *
 * --repeat R runs the one engine and each router R times, in turns (so a
 * busy spell of a shared machine falls on all of them), and prints the
 * ratio of the minima and of the medians.
 *
 * --same-arrivals keeps the arrival times (every replica then carries
 * 1/K of the load: many more, smaller steps — a different workload, shown
 * for what it costs). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/str.h"
#include "job/job.h"
#include "sim/cluster.h"
#include "sim/router.h"

static double cpu_s(void) /* the process's CPU seconds */
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* Prepare the run of `replicas` engines at `scale` times the rate. */
static const char *engine = "vllm-v1";

static int prepare(const char *spec, long long replicas, const char *router, double scale,
                   run_config *cfg, trace *tr, cost_model *cost)
{
    kvs_err err;
    job_opts jo;
    job_opts_init(&jo);
    char rep[32], sc[32];
    snprintf(rep, sizeof rep, "%lld", replicas);
    snprintf(sc, sizeof sc, "%.17g", scale);
    const char *flags[][2] = {{"model", "llama-7b"}, {"gpu", "a100-80g"},
                              {"max-model-len", "8192"}, {"synthetic", spec},
                              {"seed", "1"}, {"replicas", rep},
                              {"router", router}, {"rate-scale", sc}, {"engine", engine}};
    model_spec m;
    gpu_spec g;
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (job_param_set(&jo, flags[i][0], flags[i][1], &err))
            goto fail;
    if (job_prepare(&jo, &m, &g, tr, &err))
        goto fail;
    *cfg = jo.cfg;
    if (job_cost_select(cfg, &m, &g, NULL, 0, cost, &err)) {
        trace_free(tr);
        goto fail;
    }
    return 0;
fail:
    fprintf(stderr, "bench_cluster: %s\n", err.msg);
    return -1;
}

/* Simulate once; *secs gets the CPU time of run_execute alone. */
static int simulate(const char *spec, long long replicas, const char *router, double scale,
                    double *secs)
{
    run_config cfg;
    trace tr;
    cost_model cost;
    if (prepare(spec, replicas, router, scale, &cfg, &tr, &cost))
        return -1;
    run_result res;
    kvs_err err;
    double t0 = cpu_s();
    int rc = run_execute(&cfg, &tr, &cost, &res, &err);
    *secs = cpu_s() - t0;
    if (rc) {
        fprintf(stderr, "bench_cluster: %s\n", err.msg);
    } else {
        printf("  %2lld x %-16s %8.3f s CPU  %10lld steps (%4.1f%% leapt, %lld leaps resumed), "
               "mean batch %6.1f, TTFT p99 %7.3f s, imbalance %.3f, peak RSS %.0f MiB\n",
               replicas, replicas > 1 ? router : "(one engine)", *secs,
               (long long)res.sum.n_steps,
               res.sum.n_steps > 0 ? 100.0 * (double)res.leap_steps / (double)res.sum.n_steps : 0.0,
               (long long)res.leap_resumes,
               res.sum.mean_batch, res.sum.ttft.p99,
               replicas > 1 ? res.sum.load_imbalance : 1.0, peak_mib());
        run_result_free(&res);
    }
    cost_model_free(&cost);
    trace_free(&tr);
    return rc ? -1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define MAX_ROUTERS 8
#define MAX_REPEAT 50

/* A bad flag value: one line, exit status 2. */
static int bad_arg(const kvs_err *e)
{
    fprintf(stderr, "bench_cluster: %s\n", e->msg);
    return 2;
}

int main(int argc, char **argv)
{
    long long n = 1000000, k = 16;
    double rate = 1.4;
    int same = 0, rep = 1;
    char routers[256] = "round-robin,least-requests";
    const char *lengths = "traces/lengths_sharegpt_8k_llama2tok.csv";
    static const struct option opts[] = {{"requests", required_argument, 0, 'n'},
                                         {"rate", required_argument, 0, 'r'},
                                         {"replicas", required_argument, 0, 'k'},
                                         {"routers", required_argument, 0, 'R'},
                                         {"same-arrivals", no_argument, 0, 's'},
                                         {"engine", required_argument, 0, 'e'},
                                         {"repeat", required_argument, 0, 'p'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int o;
    int64_t v;
    kvs_err err;
    opterr = 0; /* unknown flags: one line below, not getopt's and the usage */
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'n':
            if (str_parse_i64("--requests", optarg, 1, 1000000000, &v, &err))
                return bad_arg(&err);
            n = v;
            break;
        case 'r':
            if (str_parse_f64("--rate", optarg, 1e-9, 1e9, &rate, &err))
                return bad_arg(&err);
            break;
        case 'k':
            if (str_parse_i64("--replicas", optarg, 1, CLUSTER_MAX_REPLICAS, &v, &err))
                return bad_arg(&err);
            k = v;
            break;
        case 'R': snprintf(routers, sizeof routers, "%s", optarg); break;
        case 's': same = 1; break;
        case 'e': engine = optarg; break;
        case 'p':
            if (str_parse_i64("--repeat", optarg, 1, MAX_REPEAT, &v, &err))
                return bad_arg(&err);
            rep = (int)v;
            break;
        case 'h':
            printf("usage: bench_cluster [--requests N] [--rate R] [--replicas K]\n"
                   "                     [--routers A,B] [--engine vllm-v1|vllm-v0]\n"
                   "                     [--same-arrivals] [--repeat R]\n");
            return 0;
        default:
            fprintf(stderr, "bench_cluster: unknown flag or missing value: '%s' (see --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    char *names[MAX_ROUTERS];
    int nr = 0;
    for (char *save, *r = strtok_r(routers, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
        if (nr == MAX_ROUTERS) {
            fprintf(stderr, "bench_cluster: --routers: at most %d\n", MAX_ROUTERS);
            return 2;
        }
        if (!router_find(r)) { /* before any run, not after the first one */
            fprintf(stderr, "bench_cluster: --routers: unknown router '%s' (%s)\n", r,
                    router_names());
            return 2;
        }
        names[nr++] = r;
    }
    char spec[1000];
    snprintf(spec, sizeof spec, "arrival=poisson,rate=%g,n=%lld,lengths=%s", rate, n, lengths);
    double scale = same ? 1.0 : (double)k;
    printf("bench_cluster: %lld requests, ShareGPT lengths, llama-7b on a100-80g, %s;\n"
           "  one engine at %.2f req/s vs %lld replicas at %.2f req/s\n",
           n, engine, rate, k, rate * scale);
    static double t1[MAX_REPEAT], tk[MAX_ROUTERS][MAX_REPEAT];
    for (int i = 0; i < rep; i++) {
        if (simulate(spec, 1, "round-robin", 1.0, &t1[i]))
            return 2;
        for (int j = 0; j < nr; j++) {
            if (simulate(spec, k, names[j], scale, &tk[j][i]))
                return 2;
            if (rep == 1)
                printf("  %-21s %8.2fx the one-engine time (target <= 1.5x)\n", names[j],
                       tk[j][i] / t1[i]);
        }
    }
    if (rep > 1) {
        double m1 = median(t1, rep), lo1 = t1[0];
        for (int j = 0; j < nr; j++) {
            double mk = median(tk[j], rep), lok = tk[j][0];
            printf("  %-21s %8.2fx of the minima, %.2fx of the medians (%d runs each; "
                   "target <= 1.5x)\n", names[j], lok / lo1, mk / m1, rep);
        }
    }
    return 0;
}
