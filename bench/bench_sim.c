/* bench_sim.c — simulator speed and memory at scale (a benchmark, not a
 * test).  Simulates N requests (default 1,000,000) with ShareGPT lengths and
 * Poisson arrivals near saturation for LLaMA-7B on an A100-80GB (roofline
 * cost), once without and once with storing the per-request rows in a
 * fresh SQLite file, and prints requests simulated per wall-second, the
 * wall time of each phase and the process's peak resident memory.  With
 * --repeat R each phase runs R times and min / median are printed.
 *
 * --targets adds the speed issue's targets, each measured in this run on
 * whole `kvsim run` processes (the kvsim binary beside this one): the same
 * trace written as CSV, run by kvsim and imported by the sqlite3 CLI
 * (`.import`, when sqlite3 is on PATH), as a ratio; the 20,000-request
 * 4 req/s 1024/256 workload (target <= 0.05 s) and its fixed part (the
 * same run of one request); and --sizes LIST (default
 * 100000,1000000) whole runs with their peak RSS, to show growth.  Whole
 * runs are started by a small process forked at start (a child forked
 * from this one would count this one's memory in its peak RSS).
 *
 *   bench_sim [--requests N] [--rate R] [--db FILE] [--lengths FILE]
 *             [--engine E] [--repeat R] [--targets] [--sizes N,N,...]
 *             [--record-steps]
 *
 * --record-steps records every engine step (and so takes no leaps), and
 * "store rows alone" then writes the steps table's rows too.
 *
 * LLaMA-7B's 2,048-token context would reject a fifth of ShareGPT, so the
 * benchmark raises max-model-len to 8,192 (the largest length in the file)
 * to measure the engine on every request. */
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/str.h"
#include "job/job.h"

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* min and median of v[n] (sorts v) */
static void min_med(double *v, int n, double *mn, double *md)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *mn = v[0];
    *md = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double child_cpu_s; /* CPU seconds (user + system) of the last child */

/* Children are started by a spawner process forked at start, while this
 * process is still small.  A child forked from here would report this
 * process's resident set as part of its own peak: Linux copies the
 * parent's RSS into a forked child's high-water mark, and exec keeps it
 * (ru_maxrss).  With the trace and results of a million requests in
 * memory that hid the 100k run's peak under this process's.  Requests go
 * down one pipe as the argv strings, each ended by a NUL, and an empty
 * one; the answer comes back on the other as a spawn_result. */
typedef struct spawn_result {
    double wall_s;   /* fork to reap, s; negative if the child failed */
    double rss_mib;  /* the child's peak resident set, MiB */
    double cpu_s;    /* its user + system CPU, s */
} spawn_result;

static int spawn_req = -1, spawn_ans = -1; /* pipe ends (this side); -1: no spawner */

static int read_full(int fd, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *p, size_t n)
{
    for (size_t put = 0; put < n;) {
        ssize_t r = write(fd, (const char *)p + put, n - put);
        if (r <= 0)
            return -1;
        put += (size_t)r;
    }
    return 0;
}

/* The spawner: run each requested argv (stdout and stderr to /dev/null)
 * and answer with its figures, until the request pipe closes. */
static void spawner(int req, int ans)
{
    static char buf[65536];
    char *argv[64];
    for (;;) {
        size_t len = 0;
        int argc = 0;
        for (;;) { /* one request: strings up to an empty one */
            size_t start = len;
            char c;
            do {
                if (read_full(req, &c, 1) || len >= sizeof buf)
                    _exit(0);
                buf[len++] = c;
            } while (c);
            if (len - start == 1)
                break;
            if (argc < 63)
                argv[argc++] = buf + start;
        }
        argv[argc] = NULL;
        double t0 = wall();
        pid_t pid = fork();
        if (pid == 0) {
            if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
                _exit(127);
            execvp(argv[0], argv);
            _exit(127);
        }
        int st = 0;
        struct rusage ru;
        spawn_result r = {-1.0, 0.0, 0.0};
        if (pid > 0 && wait4(pid, &st, 0, &ru) >= 0) {
            r.wall_s = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? wall() - t0 : -1.0;
            r.rss_mib = (double)ru.ru_maxrss / 1024.0;
            r.cpu_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                      (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
        }
        if (write_full(ans, &r, sizeof r))
            _exit(0);
    }
}

/* Fork the spawner (call before allocating anything large).  0, or -1. */
static int spawner_start(void)
{
    int down[2], up[2];
    if (pipe(down) || pipe(up))
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        spawner(down[0], up[1]);
        _exit(0);
    }
    close(down[0]);
    close(up[1]);
    spawn_req = down[1];
    spawn_ans = up[0];
    return 0;
}

/* Run argv as a child with stdout/stderr to /dev/null: its wall seconds and
 * peak RSS (MiB), or a negative wall time if it failed; its CPU seconds in
 * child_cpu_s (on a shared machine CPU time is the steadier figure). */
static double run_child(char *const argv[], double *rss_mib)
{
    spawn_result r = {-1.0, 0.0, 0.0};
    int bad = spawn_req < 0;
    for (int i = 0; !bad && argv[i]; i++)
        bad = write_full(spawn_req, argv[i], strlen(argv[i]) + 1) != 0;
    if (bad || write_full(spawn_req, "", 1) || read_full(spawn_ans, &r, sizeof r))
        r.wall_s = -1.0;
    *rss_mib = r.rss_mib;
    child_cpu_s = r.cpu_s;
    return r.wall_s;
}

static void rm_db(const char *db)
{
    char side[700];
    unlink(db);
    snprintf(side, sizeof side, "%s-wal", db);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", db);
    unlink(side);
}

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

#define MAX_REP 16

/* Min and median wall and CPU seconds of rep runs of argv, each on a fresh
 * database db (removed before and after). */
typedef struct rep_times {
    double wall_min, wall_med, cpu_min, cpu_med; /* s */
} rep_times;

static rep_times time_fresh_runs(char *const argv[], const char *db, int rep)
{
    double tk[MAX_REP], ck[MAX_REP], rss = 0;
    rep_times t;
    for (int i = 0; i < rep; i++) {
        rm_db(db);
        tk[i] = run_child(argv, &rss);
        ck[i] = child_cpu_s;
    }
    rm_db(db);
    min_med(tk, rep, &t.wall_min, &t.wall_med);
    min_med(ck, rep, &t.cpu_min, &t.cpu_med);
    return t;
}

/* Whole `kvsim run` processes: the same trace as CSV against sqlite3's
 * .import of that file, the small 20k workload, and growth over sizes. */
static void targets(const char *kvsim, const trace *tr, const char *engine, const char *db,
                    int rep, const char *sizes, const char *lengths, double rate)
{
    char csv[600], idb[600];
    snprintf(csv, sizeof csv, "%s.trace.csv", db);
    snprintf(idb, sizeof idb, "%s.import.db", db);
    FILE *f = fopen(csv, "w");
    kvs_err err;
    if (!f || trace_write_csv(tr, f, &err) || fclose(f)) {
        fprintf(stderr, "bench_sim: cannot write %s\n", csv);
        return;
    }
    char *krun[] = {(char *)kvsim, "run", "--trace", csv, "--model", "llama-7b", "--gpu",
                    "a100-80g", "--max-model-len", "8192", "--engine", (char *)engine, "--db",
                    (char *)db, NULL};
    char imp[700];
    snprintf(imp, sizeof imp, ".import %s t", csv);
    char *srun[] = {"sqlite3", "-csv", idb, imp, NULL};
    double tk[MAX_REP], ts[MAX_REP], ck[MAX_REP], cs[MAX_REP], rss = 0, r2 = 0, mn, md;
    double smn = -1, smd = -1, cmn, cmd, csmn, csmd;
    int ok_s = 1;
    for (int i = 0; i < rep; i++) {
        rm_db(db);
        tk[i] = run_child(krun, &rss);
        ck[i] = child_cpu_s;
        rm_db(idb);
        ts[i] = run_child(srun, &r2);
        cs[i] = child_cpu_s;
        ok_s &= ts[i] >= 0;
    }
    min_med(tk, rep, &mn, &md);
    min_med(ck, rep, &cmn, &cmd);
    printf("  whole `kvsim run --trace` of the %lld-row CSV  %7.3f / %7.3f s wall, %7.3f / %7.3f s "
           "CPU   peak RSS %.0f MiB (target <= 150)\n", (long long)tr->n, mn, md, cmn, cmd, rss);
    if (ok_s) {
        min_med(ts, rep, &smn, &smd);
        min_med(cs, rep, &csmn, &csmd);
        printf("  sqlite3 .import of the same CSV              %7.3f / %7.3f s wall, %7.3f / %7.3f s "
               "CPU   ratio %.2fx wall, %.2fx CPU (target <= 1.5x)\n", smn, smd, csmn, csmd,
               mn / smn, cmn / csmn);
    } else {
        printf("  sqlite3 .import: no sqlite3 CLI on PATH, ratio not measured\n");
    }
    rm_db(db);
    rm_db(idb);
    unlink(csv);
    /* the small workload, and its fixed part: the same run of one request
     * (process start, a new database built and linked into place) */
    char *small[] = {(char *)kvsim, "run", "--synthetic",
                     "arrival=poisson,rate=4,n=20000,prompt=1024,output=256", "--engine",
                     (char *)engine, "--db", (char *)db, NULL};
    char *one[] = {(char *)kvsim, "run", "--synthetic",
                   "arrival=poisson,rate=4,n=1,prompt=1024,output=256", "--engine",
                   (char *)engine, "--db", (char *)db, NULL};
    rep_times t = time_fresh_runs(small, db, rep);
    printf("  whole run, 20,000 requests 4 req/s 1024/256  %7.3f / %7.3f s wall, %7.3f / %7.3f s "
           "CPU (target <= 0.05 s)\n", t.wall_min, t.wall_med, t.cpu_min, t.cpu_med);
    t = time_fresh_runs(one, db, rep);
    printf("    of which fixed: the same run of 1 request  %7.3f / %7.3f s wall, %7.3f / %7.3f s "
           "CPU (start, a new database built and linked into place)\n", t.wall_min, t.wall_med,
           t.cpu_min, t.cpu_med);
    /* growth */
    char list[200];
    snprintf(list, sizeof list, "%s", sizes);
    double prev_n = 0.0, prev_rss = 0.0; /* the size before, for bytes per request */
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        char spec[1000];
        snprintf(spec, sizeof spec, "arrival=poisson,rate=%g,n=%s,lengths=%s", rate, tok, lengths);
        char *grow[] = {(char *)kvsim, "run", "--synthetic", spec, "--seed", "1", "--model",
                        "llama-7b", "--gpu", "a100-80g", "--max-model-len", "8192", "--engine",
                        (char *)engine, "--db", (char *)db, NULL};
        rm_db(db);
        double t = run_child(grow, &rss);
        printf("  growth: whole run of %10s requests      %7.3f s wall, %7.3f s CPU   peak RSS "
               "%.0f MiB", tok, t, child_cpu_s, rss);
        const double n = atof(tok);
        if (t >= 0.0 && prev_n > 0.0 && n > prev_n) /* the slope: what one more request costs */
            printf(", %.0f bytes per request from %.0f (target <= 80)", (rss - prev_rss) *
                   1048576.0 / (n - prev_n), prev_n);
        printf("\n");
        if (t >= 0.0) {
            prev_n = n;
            prev_rss = rss;
        }
    }
    rm_db(db);
}

/* The benchmark's flags. */
typedef struct bench_args {
    long long n;            /* requests */
    double rate;            /* req/s */
    const char *db;         /* the store's file (a /tmp one by default) */
    const char *lengths;    /* the lengths file */
    const char *engine;     /* the engine profile */
    const char *sizes;      /* --targets' growth sizes */
    int rep, want_targets, record_steps;
} bench_args;

/* --sizes: 1 to 8 request counts in [1, 1e9], comma-separated (targets()
 * copies the list into 200 bytes).  0, or KVS_EINVAL naming the bad one. */
static int check_sizes(const char *s, kvs_err *err)
{
    char list[200], *save = NULL;
    if (strlen(s) >= sizeof list)
        return kvs_errf(err, KVS_EINVAL, "--sizes: longer than %zu characters", sizeof list - 1);
    snprintf(list, sizeof list, "%s", s);
    int n = 0;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
        int64_t v;
        if (n == 8 || str_parse_i64("--sizes", tok, 1, 1000000000, &v, err))
            return n == 8 ? kvs_errf(err, KVS_EINVAL, "--sizes: at most 8 sizes") : KVS_EINVAL;
    }
    return n > 0 ? 0 : kvs_errf(err, KVS_EINVAL, "--sizes: no size given");
}

/* A bad flag value: one line, exit status 2. */
static int bad_arg(const kvs_err *e)
{
    fprintf(stderr, "bench_sim: %s\n", e->msg);
    return 2;
}

/* Parse argv into *a: -1 to go on, or the exit status (usage printed for
 * --help; one line on stderr for an unknown flag or a bad value). */
static int parse_args(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){1000000, 6.0, NULL, "traces/lengths_sharegpt_8k_llama2tok.csv", "vllm-v1",
                      "100000,1000000", 1, 0, 0};
    static const struct option opts[] = {{"requests", required_argument, 0, 'n'},
                                         {"rate", required_argument, 0, 'r'},
                                         {"db", required_argument, 0, 'd'},
                                         {"lengths", required_argument, 0, 'l'},
                                         {"engine", required_argument, 0, 'e'},
                                         {"repeat", required_argument, 0, 'R'},
                                         {"targets", no_argument, 0, 'T'},
                                         {"sizes", required_argument, 0, 'S'},
                                         {"record-steps", no_argument, 0, 'k'},
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
            a->n = v;
            break;
        case 'r':
            if (str_parse_f64("--rate", optarg, 1e-9, 1e9, &a->rate, &err))
                return bad_arg(&err);
            break;
        case 'd': a->db = optarg; break;
        case 'l': a->lengths = optarg; break;
        case 'e': a->engine = optarg; break;
        case 'R':
            if (str_parse_i64("--repeat", optarg, 1, MAX_REP, &v, &err))
                return bad_arg(&err);
            a->rep = (int)v;
            break;
        case 'T': a->want_targets = 1; break;
        case 'S':
            if (check_sizes(optarg, &err))
                return bad_arg(&err);
            a->sizes = optarg;
            break;
        case 'k': a->record_steps = 1; break;
        case 'h':
            printf("usage: bench_sim [--requests N] [--rate R] [--db FILE] [--lengths FILE]\n"
                   "                 [--engine vllm-v1|vllm-v0|trtllm|sglang] [--repeat R] [--targets]\n"
                   "                 [--sizes N,N,...] [--record-steps]\n");
            return 0;
        default:
            fprintf(stderr, "bench_sim: unknown flag or missing value: '%s' (see --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    return -1; /* go on */
}

/* Phase 1: simulate without storing, a->rep times; prints the load and
 * the times.  0 or 2 (the error printed). */
static int phase_simulate(const bench_args *a, const run_config *cfg, const trace *tr,
                          const cost_model *cost, double t_gen)
{
    run_result res;
    kvs_err err;
    const int rep = a->rep;
    double w_sim[MAX_REP], c_sim[MAX_REP];
    for (int i = 0; i < rep; i++) {
        double t1 = wall(), c1 = cpu();
        if (run_execute(cfg, tr, cost, &res, &err)) {
            fprintf(stderr, "bench_sim: %s\n", err.msg);
            return 2;
        }
        w_sim[i] = wall() - t1;
        c_sim[i] = cpu() - c1;
        if (i + 1 < rep)
            run_result_free(&res);
    }
    double mib_sim = peak_mib();
    printf("bench_sim: %lld requests, ShareGPT lengths, Poisson %.2f req/s, llama-7b on a100-80g, %s\n",
           a->n, a->rate, a->engine);
    printf("  load: %lld finished, %lld rejected, %lld steps, mean batch %.1f, "
           "throughput %.0f tok/s, TTFT p50 %.3f s p99 %.3f s, %lld preemptions, %.1f%% of steps leapt\n",
           (long long)res.sum.n_finished, (long long)res.sum.n_rejected,
           (long long)res.sum.n_steps, res.sum.mean_batch, res.sum.throughput_tok_s,
           res.sum.ttft.p50, res.sum.ttft.p99, (long long)res.sum.preemptions,
           res.sum.n_steps > 0 ? 100.0 * (double)res.leap_steps / (double)res.sum.n_steps : 0.0);
    run_result_free(&res);
    double mn, md, cmn, cmd;
    min_med(w_sim, rep, &mn, &md);
    min_med(c_sim, rep, &cmn, &cmd);
    printf("  (min / median of %d)\n", rep);
    printf("  trace generation          %7.3f s\n", t_gen);
    printf("  simulate (no rows stored) %7.3f / %7.3f s wall, %7.3f / %7.3f s CPU "
           "= %.0f requests/s   peak RSS %.0f MiB\n",
           mn, md, cmn, cmd, (double)a->n / mn, mib_sim);
    return 0;
}

/* Phase 2: simulate and store every request row in a fresh file, a->rep
 * times; prints the store's own time and the total.  0 or 2. */
static int phase_store(const bench_args *a, const run_config *cfg, const trace *tr,
                       const cost_model *cost, double t_gen)
{
    run_result res;
    kvs_err err;
    const int rep = a->rep;
    double w_all[MAX_REP], w_store[MAX_REP], c_store[MAX_REP];
    for (int i = 0; i < rep; i++) {
        rm_db(a->db);
        double t2 = wall();
        store *st;
        int64_t run_id;
        if (run_execute(cfg, tr, cost, &res, &err) || store_open(a->db, &st, &err)) {
            fprintf(stderr, "bench_sim: %s\n", err.msg);
            return 2;
        }
        double t3 = wall(), c3 = cpu();
        if (store_write_run(st, cfg, &res, &run_id, &err)) {
            fprintf(stderr, "bench_sim: %s\n", err.msg);
            return 2;
        }
        store_close(st); /* the WAL checkpoint counts as writing */
        w_store[i] = wall() - t3;
        c_store[i] = cpu() - c3;
        w_all[i] = wall() - t2;
        run_result_free(&res);
    }
    double amn, amd, mn, md, cmn, cmd;
    min_med(w_all, rep, &amn, &amd);
    min_med(w_store, rep, &mn, &md);
    min_med(c_store, rep, &cmn, &cmd);
    printf("  store rows alone          %7.3f / %7.3f s wall, %7.3f / %7.3f s CPU "
           "= %.0f request rows/s%s\n",
           mn, md, cmn, cmd, (double)a->n / mn, a->record_steps ? " (and the steps)" : "");
    printf("  simulate + store rows     %7.3f / %7.3f s   = %.0f requests/s   peak RSS %.0f MiB\n",
           amn, amd, (double)a->n / amn, peak_mib());
    printf("  whole run incl. generation %6.3f s\n", t_gen + amn);
    rm_db(a->db);
    return 0;
}

int main(int argc, char **argv)
{
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (a.want_targets && spawner_start()) {
        fprintf(stderr, "bench_sim: cannot start the child spawner\n");
        return 2;
    }
    char dbbuf[256];
    if (!a.db) {
        snprintf(dbbuf, sizeof dbbuf, "/tmp/kvsim-bench-%d.db", (int)getpid());
        a.db = dbbuf;
    }
    kvs_err err;
    char spec[1000];
    snprintf(spec, sizeof spec, "arrival=poisson,rate=%g,n=%lld,lengths=%s", a.rate, a.n,
             a.lengths);
    /* the run pipeline of kvsim run (job.h): flags by name, prepare, cost */
    job_opts jo;
    job_opts_init(&jo);
    const char *flags[][2] = {{"model", "llama-7b"}, {"gpu", "a100-80g"},
                              {"max-model-len", "8192"}, {"synthetic", spec}, {"seed", "1"},
                              {"engine", a.engine}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (job_param_set(&jo, flags[i][0], flags[i][1], &err)) {
            fprintf(stderr, "bench_sim: %s\n", err.msg);
            return 2;
        }
    if (a.record_steps && job_param_set(&jo, "record-steps", "true", &err)) {
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
    if ((rc = phase_simulate(&a, &cfg, &tr, &cost, t_gen)) ||
        (rc = phase_store(&a, &cfg, &tr, &cost, t_gen)))
        return rc;
    if (a.want_targets) {
        char self[4096], kvsim[4200];
        snprintf(self, sizeof self, "%s", argv[0]);
        snprintf(kvsim, sizeof kvsim, "%s/kvsim", dirname(self));
        targets(kvsim, &tr, a.engine, a.db, a.rep, a.sizes, a.lengths, a.rate);
    }
    cost_model_free(&cost);
    trace_free(&tr);
    return 0;
}
