/* cmd_calibrate.c — `kvsim calibrate`: time the real kernels of a model on
 * a backend over a grid, store every measurement, fit a cost profile, store
 * it, and print the fit errors. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "../kernels/kernels.h"
#include "../models/model.h"
#include "../store/store.h"
#include "../store/store_calib.h"
#include "../store/store_spool.h"
#include "../validate/calibrate.h"
#include "../validate/profile.h"
#include "cli.h"

#define CMD "calibrate"

typedef struct calib_args {
    const char *device;   /* "cpu" | "cuda" */
    const char *model;    /* name or .conf path */
    const char *gpu;      /* NULL = "cpu" or guessed from the device */
    const char *db;       /* database path */
    const char *grid;     /* "quick" | "full" */
    int64_t repeats;      /* -1 = backend default */
    int64_t warmup;       /* -1 = backend default */
    int64_t tp;
    uint64_t seed;
    int quiet;
} calib_args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvsim calibrate [options]\n\n"
            "Time the real kernels (one decoder layer's ops, attention over a paged KV cache,\n"
            "the LM head, and a few whole steps) over a grid of shapes, store every\n"
            "measurement, fit a per-operation cost profile and store it; then\n"
            "`kvsim run --cost calibrated` uses it.\n\n"
            "options:\n"
            "  --device cpu|cuda   kernel backend (default cuda)\n"
            "  --model M           model name or .conf path (default llama-2-7b; the CPU\n"
            "                      backend is meant for small shapes, e.g. models/tiny.conf)\n"
            "  --gpu G             GPU name the profile stands for (default: 'cpu' on the CPU\n"
            "                      backend; on CUDA, the built-in GPU matching the device)\n"
            "  --db PATH           results database (default kvsim.db)\n"
            "  --grid quick|full   shape grid (default quick)\n"
            "  --repeats N         timed runs per point (default 10 on cuda, 5 on cpu)\n"
            "  --warmup N          untimed runs per point first (default 3 on cuda, 1 on cpu)\n"
            "  --tp N              tensor-parallel degree; only 1 is supported (default 1)\n"
            "  --seed N            seed of the random weights and inputs (default 1)\n"
            "  --quiet             no line per measured point\n"
            "  -h, --help          this help\n");
}

static int parse(int argc, char **argv, calib_args *a)
{
    enum { O_DEVICE = 256, O_MODEL, O_GPU, O_DB, O_GRID, O_REPEATS, O_WARMUP, O_TP, O_SEED, O_QUIET };
    static const struct option opts[] = {
        {"device", required_argument, 0, O_DEVICE}, {"model", required_argument, 0, O_MODEL},
        {"gpu", required_argument, 0, O_GPU},       {"db", required_argument, 0, O_DB},
        {"grid", required_argument, 0, O_GRID},     {"repeats", required_argument, 0, O_REPEATS},
        {"warmup", required_argument, 0, O_WARMUP}, {"tp", required_argument, 0, O_TP},
        {"seed", required_argument, 0, O_SEED},     {"quiet", no_argument, 0, O_QUIET},
        {0, 0, 0, 0}};
    *a = (calib_args){.device = "cuda", .model = "llama-2-7b", .db = "kvsim.db",
                      .grid = "quick", .repeats = -1, .warmup = -1, .tp = 1, .seed = 1};
    optind = 0; /* GNU getopt: restart */
    opterr = 0;
    int c;
    char why[256];
    while ((c = str_getopt_exact(argc, argv, ":", opts, why, sizeof why)) != -1) {
        switch (c) {
        case '!': return cli_fail(CMD, "%s", why);
        case O_DEVICE: a->device = optarg; break;
        case O_MODEL: a->model = optarg; break;
        case O_GPU: a->gpu = optarg; break;
        case O_DB: a->db = optarg; break;
        case O_GRID: a->grid = optarg; break;
        case O_REPEATS:
            if (cli_parse_i64(CMD, "--repeats", optarg, 1, 100000, &a->repeats))
                return CLI_EXIT_ERR;
            break;
        case O_WARMUP:
            if (cli_parse_i64(CMD, "--warmup", optarg, 0, 100000, &a->warmup))
                return CLI_EXIT_ERR;
            break;
        case O_TP:
            if (cli_parse_i64(CMD, "--tp", optarg, 1, 1024, &a->tp))
                return CLI_EXIT_ERR;
            break;
        case O_SEED:
            if (cli_parse_u64(CMD, "--seed", optarg, &a->seed))
                return CLI_EXIT_ERR;
            break;
        case O_QUIET: a->quiet = 1; break;
        case ':': return cli_fail(CMD, "%s: missing value", argv[optind - 1]);
        default: return cli_fail(CMD, "unknown option '%s' (see kvsim calibrate --help)", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_fail(CMD, "unexpected argument '%s'", argv[optind]);
    if (a->tp != 1)
        return cli_fail(CMD, "--tp: only 1 is supported (one device; all-reduce is not measured)");
    if (strcmp(a->device, "cpu") && strcmp(a->device, "cuda"))
        return cli_fail(CMD, "--device: unknown device '%s' (choices: cpu, cuda)", a->device);
    return 0;
}

/* The built-in GPU whose family appears in the device name, nearest in
 * memory; "" if none. */
static void guess_gpu(const kernels_device_info *info, char *out, size_t n)
{
    const gpu_spec *g = gpu_builtin_guess(info->name, info->mem_total_bytes);
    snprintf(out, n, "%s", g ? g->name : "");
}

static double gib(int64_t b) { return (double)b / (double)((int64_t)1 << 30); }

static void progress(void *ctx, const calib_point *p)
{
    (void)ctx;
    printf("  %-13s %-58s %10.3f us  (p10 %.3f, p90 %.3f)\n", p->op, p->shape_json,
           p->median_s * 1e6, p->p10_s * 1e6, p->p90_s * 1e6);
    fflush(stdout);
}

static int store_all(const calib_args *a, const kernels_device_info *info, const char *gpu,
                     const model_spec *m, const calib_grid *g, const calib_options *o,
                     const calib_result *res, const profile *prof, int64_t *calib_id,
                     int64_t *profile_id, kvs_err *err)
{
    store *st = NULL;
    store_calib_meas *ms = calloc(res->n ? res->n : 1, sizeof *ms);
    char *params = NULL, *fit = NULL, props[2048];
    int rc = ms ? store_open(a->db, &st, err) : kvs_errf(err, KVS_ENOMEM, "out of memory");
    if (rc != KVS_OK)
        goto done;
    for (size_t i = 0; i < res->n; i++) {
        const calib_point *p = &res->pts[i];
        ms[i] = (store_calib_meas){p->op,      p->shape_json, p->tokens, p->batch, p->context,
                                   p->median_s, p->p10_s,     p->p90_s,  p->repeats};
    }
    snprintf(props, sizeof props,
             "{\"device\":%s,\"grid\":\"%s\",\"repeats\":%lld,\"warmup\":%lld,\"seed\":%llu,"
             "\"tp\":%lld,\"plan_bytes\":%lld,\"block_size\":%lld}",
             info->props_json, g->name, (long long)o->repeats, (long long)o->warmup,
             (unsigned long long)o->seed, (long long)a->tp, (long long)res->plan.total_bytes,
             (long long)g->block_size);
    store_calib_meta meta = {a->device, info->name, gpu, m->name,
                             info->driver_version[0] ? info->driver_version : NULL,
                             info->runtime_version[0] ? info->runtime_version : NULL, props};
    /* one transaction, waited for and spooled like a run (store_spool.h) */
    if ((rc = profile_to_json(prof, &params, &fit, err)) != KVS_OK)
        goto done;
    rc = store_save_calib(st, &meta, ms, res->n, params, fit, calib_id, profile_id, err);
done:
    free(params);
    free(fit);
    free(ms);
    store_close(st);
    return rc;
}

static void print_summary(const profile *prof, int64_t calib_id, int64_t profile_id,
                          const char *db, const char *gpu, const calib_args *a)
{
    printf("\nfit (relative error |predicted - measured| / measured):\n");
    printf("  %-13s %-11s %5s %10s %10s\n", "op", "method", "n", "median", "max");
    for (size_t i = 0; i < profile_error_count(prof); i++) {
        const profile_op_error *e = profile_error_at(prof, i);
        printf("  %-13s %-11s %5lld %9.1f%% %9.1f%%\n", e->op, e->method, (long long)e->n,
               100 * e->median_rel, 100 * e->max_rel);
    }
    printf("  per-step overhead %.3f us %+.3f us per sequence (fitted, unclamped)\n",
           profile_overhead_s(prof) * 1e6, profile_overhead_per_seq_s(prof) * 1e6);
    printf("\nstored calibration %lld and profile %lld in %s\n", (long long)calib_id,
           (long long)profile_id, db);
    if (gpu_lookup(gpu, &(gpu_spec){0}, NULL) == KVS_OK)
        printf("use: kvsim run --model %s --gpu %s --cost calibrated:%lld --db %s\n", a->model,
               gpu, (long long)profile_id, db);
    else /* a CPU profile stands for no built-in GPU: say so when using it */
        printf("use: kvsim run --model %s --cost calibrated:%lld --force-profile --db %s\n"
               "     (the profile was measured on '%s', which is not a built-in GPU: "
               "--force-profile applies it to --gpu's memory figures)\n",
               a->model, (long long)profile_id, db, gpu);
}

int cmd_calibrate(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    calib_args a;
    if (parse(argc, argv, &a))
        return CLI_EXIT_ERR;
    kvs_err err = {{0}};
    model_spec m;
    calib_grid g;
    kernels_backend *be = NULL;
    kernels_device_info info;
    calib_result res = {0};
    profile *prof = NULL;
    calib_step *steps = NULL;
    char gpu[64];
    int64_t calib_id = 0, profile_id = 0;
    int rc;
    if ((rc = model_lookup(a.model, &m, &err)) != KVS_OK ||
        (rc = calib_grid_preset(a.grid, a.device, &m, &g, &err)) != KVS_OK ||
        (rc = kernels_backend_open(a.device, &be, &err)) != KVS_OK ||
        (rc = kernels_backend_info(be, &info, &err)) != KVS_OK)
        goto done;
    if (a.gpu)
        snprintf(gpu, sizeof gpu, "%s", a.gpu);
    else if (!strcmp(a.device, "cpu"))
        snprintf(gpu, sizeof gpu, "cpu");
    else
        guess_gpu(&info, gpu, sizeof gpu);
    if (!gpu[0]) {
        rc = kvs_errf(&err, KVS_EINVAL, "--gpu: cannot tell which built-in GPU '%s' is; pass --gpu NAME",
                      info.name);
        goto done;
    }
    int cpu = !strcmp(a.device, "cpu");
    calib_options o = {.grid = &g,
                       .warmup = a.warmup >= 0 ? a.warmup : cpu ? 1 : 3,
                       .repeats = a.repeats >= 0 ? a.repeats : cpu ? 5 : 10,
                       .seed = a.seed,
                       .progress = a.quiet ? NULL : progress};
    steps = calloc(CALIB_MAX_STEPS, sizeof *steps);
    if (!steps) {
        rc = kvs_errf(&err, KVS_ENOMEM, "out of memory");
        goto done;
    }
    size_t n_steps = calib_default_steps(&g, steps, CALIB_MAX_STEPS);
    printf("kvsim calibrate: %s on %s (%s backend, %s storage)", m.name, info.name, a.device,
           kernels_backend_vtable(be)->storage);
    if (info.driver_version[0])
        printf(", driver %s, runtime %s", info.driver_version, info.runtime_version);
    printf("\n  profile for gpu '%s', grid %s, %lld warm-up + %lld timed runs per point\n", gpu,
           g.name, (long long)o.warmup, (long long)o.repeats);
    calib_plan plan;
    calib_plan_grid(be, &m, &g, steps, n_steps, &plan);
    printf("  memory: %.2f GiB (weights %.2f, KV %.2f in %lld blocks, activations %.2f, "
           "attention scratch %.2f) of %.2f GiB free\n",
           gib(plan.total_bytes), gib(plan.weights_bytes), gib(plan.kv_bytes),
           (long long)plan.kv_blocks, gib(plan.acts_bytes), gib(plan.workspace_bytes),
           gib(info.mem_free_bytes));
    fflush(stdout);
    if ((rc = calib_measure(be, &m, &o, steps, n_steps, &res, &err)) != KVS_OK ||
        (rc = profile_fit(&m, res.pts, res.n, &prof, &err)) != KVS_OK ||
        (rc = store_all(&a, &info, gpu, &m, &g, &o, &res, prof, &calib_id, &profile_id, &err)) !=
            KVS_OK)
        goto done;
    print_summary(prof, calib_id, profile_id, a.db, gpu, &a);
done:
    profile_free(prof);
    calib_result_free(&res);
    free(steps);
    kernels_backend_close(be);
    return rc == KVS_OK ? CLI_EXIT_OK : cli_fail(CMD, "%s", err.msg);
}
