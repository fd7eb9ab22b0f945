/* cmd_validate.c — `kvsim validate`: replay a stored run's steps on the real
 * kernels, store the measured error beside the run, print it; and
 * `kvsim validate --report ID` to print a stored validation again. */
#include <getopt.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/str.h"
#include "../kernels/kernels.h"
#include "../store/store.h"
#include "../store/store_calib.h"
#include "../validate/profile.h"
#include "../validate/replay.h"
#include "../validate/validate.h"
#include "cli.h"

#define CMD "validate"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvsim validate --run ID --device cpu|cuda [options]\n"
            "       kvsim validate --report ID [--db FILE]\n"
            "\n"
            "Replay the steps of a run stored with `kvsim run --record-steps` on the real\n"
            "kernels (a paged KV cache of the run's size, the block tables the schedule\n"
            "implies, the full layer stack), time every replayed step, and store the\n"
            "error of the predicted step times and of the end-to-end metrics in the\n"
            "validations tables.  Prints the report.  Rules: docs/validation.md.\n"
            "\n"
            "options:\n"
            "  --run ID           the run to validate (required)\n"
            "  --device D         cpu | cuda (required; compiled in: %s)\n"
            "  --db FILE          results database (default kvsim.db); must exist\n"
            "  --max-steps N      steps to replay, 0 = all (default 2000)\n"
            "  --sample S         window: N consecutive steps from --start; even: N steps\n"
            "                     evenly spaced from --start to the end (default window)\n"
            "  --start S          first step (default 0)\n"
            "  --profile ID       judge this calibrated profile's predictions instead of the\n"
            "                     run's step times (it must be fitted for the run's model)\n"
            "  --repeats R        timed runs per step, the median is kept (default 1)\n"
            "  --warmup W         untimed runs of each step before timing (default 1 on\n"
            "                     cuda: a step of a new shape pays cuBLAS's first choice and\n"
            "                     load of its kernels, which a warm server does not; 0 on cpu)\n"
            "  --seed N           seed of the weights and inputs (default 0)\n"
            "  --quiet            print only the new validation id\n"
            "  --report ID        print stored validation ID and exit\n"
            "  -h, --help         print this help\n"
            "\n"
            "Errors (unknown run, run without recorded steps, profile for another model,\n"
            "absent device, too little device memory) print one line, exit 2, and store\n"
            "nothing.\n",
            kernels_backend_names());
}

enum { OPT_RUN = 1000, OPT_DEVICE, OPT_DB, OPT_MAX, OPT_SAMPLE, OPT_START, OPT_PROFILE,
       OPT_REPEATS, OPT_WARMUP, OPT_SEED, OPT_QUIET, OPT_REPORT, OPT_HELP };

static const struct option longopts[] = {
    {"run", required_argument, 0, OPT_RUN},
    {"device", required_argument, 0, OPT_DEVICE},
    {"db", required_argument, 0, OPT_DB},
    {"max-steps", required_argument, 0, OPT_MAX},
    {"sample", required_argument, 0, OPT_SAMPLE},
    {"start", required_argument, 0, OPT_START},
    {"profile", required_argument, 0, OPT_PROFILE},
    {"repeats", required_argument, 0, OPT_REPEATS},
    {"warmup", required_argument, 0, OPT_WARMUP},
    {"seed", required_argument, 0, OPT_SEED},
    {"quiet", no_argument, 0, OPT_QUIET},
    {"report", required_argument, 0, OPT_REPORT},
    {"help", no_argument, 0, OPT_HELP},
    {0, 0, 0, 0}};

typedef struct vopts {
    int64_t run_id;       /* --run, 0 = not given */
    int64_t max_steps;    /* --max-steps, 0 = all */
    int64_t start;        /* --start, step index */
    int64_t profile_id;   /* --profile, 0 = the run's own step times */
    int64_t repeats;      /* --repeats, timed runs per step */
    int64_t warmup;       /* --warmup, untimed runs per step; -1 = the device's default */
    int64_t report_id;    /* --report, 0 = validate instead */
    uint64_t seed;        /* --seed */
    const char *device;   /* --device "cpu" | "cuda", NULL = not given */
    const char *db;       /* --db path */
    val_sampling sampling;/* --sample */
    int quiet;            /* --quiet: print only the id */
} vopts;

static int parse(int argc, char **argv, vopts *o)
{
    memset(o, 0, sizeof *o);
    o->max_steps = 2000;
    o->repeats = 1;
    o->warmup = -1;
    o->db = "kvsim.db";
    opterr = 0;
    optind = 1;
    int c, rc = 0;
    char why[256];
    while (rc == 0 && (c = str_getopt_exact(argc, argv, ":h", longopts, why, sizeof why)) != -1) {
        switch (c) {
        case '!': rc = cli_fail(CMD, "%s", why); break;
        case OPT_RUN: rc = cli_parse_i64(CMD, "--run", optarg, 1, INT64_MAX, &o->run_id); break;
        case OPT_DEVICE: o->device = optarg; break;
        case OPT_DB: o->db = optarg; break;
        case OPT_MAX: rc = cli_parse_i64(CMD, "--max-steps", optarg, 0, INT32_MAX, &o->max_steps); break;
        case OPT_SAMPLE: {
            int v = val_sampling_parse(optarg);
            if (v < 0)
                return cli_fail(CMD, "--sample: unknown value '%s' (window, even)", optarg);
            o->sampling = (val_sampling)v;
            break;
        }
        case OPT_START: rc = cli_parse_i64(CMD, "--start", optarg, 0, INT64_MAX, &o->start); break;
        case OPT_PROFILE: rc = cli_parse_i64(CMD, "--profile", optarg, 1, INT64_MAX, &o->profile_id); break;
        case OPT_REPEATS: rc = cli_parse_i64(CMD, "--repeats", optarg, 1, 1000000, &o->repeats); break;
        case OPT_WARMUP: rc = cli_parse_i64(CMD, "--warmup", optarg, 0, 1000000, &o->warmup); break;
        case OPT_SEED: rc = cli_parse_u64(CMD, "--seed", optarg, &o->seed); break;
        case OPT_QUIET: o->quiet = 1; break;
        case OPT_REPORT: rc = cli_parse_i64(CMD, "--report", optarg, 1, INT64_MAX, &o->report_id); break;
        case ':': return cli_fail(CMD, "%s: missing value", argv[optind - 1]);
        default: return cli_fail(CMD, "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (rc)
        return rc;
    if (optind < argc)
        return cli_fail(CMD, "unexpected argument '%s'", argv[optind]);
    if (o->report_id)
        return 0;
    if (!o->run_id)
        return cli_fail(CMD, "--run is required (or --report ID)");
    if (!o->device)
        return cli_fail(CMD, "--device is required (cpu or cuda)");
    if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda"))
        return cli_fail(CMD, "--device: unknown device '%s' (cpu, cuda)", o->device);
    /* On an H200, decode steps whose GEMM shape the replay had not run yet
     * measured 9-11% slower than the same steps warm (gpu_run.sh, 2026-12-04;
     * docs/validation.md): time steps warm on cuda. */
    if (o->warmup < 0)
        o->warmup = strcmp(o->device, "cuda") == 0 ? 1 : 0;
    return 0;
}

static const char *kind_name(int32_t k)
{
    return k == SCHED_STEP_PREFILL ? "prefill" : k == SCHED_STEP_DECODE ? "decode" : "mixed";
}

static int64_t profile_exists(sqlite3 *db, int64_t id)
{
    sqlite3_stmt *st = NULL;
    int64_t found = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM profiles WHERE profile_id = ?", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_bind_int64(st, 1, id) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        found = id;
    sqlite3_finalize(st);
    return found;
}

/* --profile: the profile, checked against the run's model. */
static int load_profile(sqlite3 *db, int64_t id, const model_spec *m, profile **out)
{
    store_profile_row row;
    kvs_err err;
    memset(&row, 0, sizeof row);
    if (store_profile_find(db, id, NULL, NULL, &row, &err) != KVS_OK)
        return cli_fail(CMD, "--profile %lld: %s", (long long)id, err.msg);
    int rc = 0;
    if (strcmp(row.model, m->name)) {
        rc = cli_fail(CMD, "--profile %lld was fitted for model '%s', not the run's model '%s'",
                      (long long)id, row.model, m->name);
    } else if (profile_from_json(db, row.params_json, out, &err) != KVS_OK) {
        rc = cli_fail(CMD, "--profile %lld: %s", (long long)id, err.msg);
    } else {
        const model_spec *pm = profile_model(*out);
        if (pm->hidden != m->hidden || pm->layers != m->layers || pm->heads != m->heads ||
            pm->kv_heads != m->kv_heads || pm->head_dim != m->head_dim ||
            pm->intermediate != m->intermediate || pm->vocab != m->vocab) {
            rc = cli_fail(CMD, "--profile %lld was fitted for another shape of '%s' than the "
                          "run's", (long long)id, m->name);
            profile_free(*out);
            *out = NULL;
        }
    }
    store_profile_row_free(&row);
    return rc;
}

/* Everything one validation holds, freed in one place. */
typedef struct vstate {
    val_run run;          /* the stored run */
    profile *prof;        /* --profile, or NULL */
    kernels_backend *be;  /* the device */
    replay *rp;           /* the replay on it */
    int64_t *idx;         /* [n] replayed step ids */
    double *pred;         /* [n_steps] predicted seconds of every step */
    double *meas;         /* [n] measured seconds (+ modelled swap) of replayed steps */
    double *pred_sel;     /* [n] pred of the replayed steps */
    int64_t *batch;       /* [n] members of each replayed step */
    const char **kinds;   /* [n] step kinds as stored */
    char *json;           /* summary, owned */
} vstate;

static void vstate_free(vstate *v)
{
    replay_close(v->rp);
    kernels_backend_close(v->be);
    profile_free(v->prof);
    val_run_free(&v->run);
    free(v->idx);
    free(v->pred);
    free(v->meas);
    free(v->pred_sel);
    free(v->batch);
    free(v->kinds);
    free(v->json);
}

static int validate(const vopts *o, store *st)
{
    sqlite3 *db = store_db(st);
    vstate v;
    memset(&v, 0, sizeof v);
    kvs_err err;
    int rc = CLI_EXIT_ERR;
    if (val_run_load(db, o->run_id, &v.run, &err) != KVS_OK) {
        cli_fail(CMD, "%s", err.msg);
        goto done;
    }
    val_run *r = &v.run;
    if (o->profile_id && load_profile(db, o->profile_id, &r->model, &v.prof))
        goto done;
    size_t ns = (size_t)r->n_steps;
    v.idx = malloc(ns * sizeof *v.idx);
    v.pred = malloc(ns * sizeof *v.pred);
    v.meas = malloc(ns * sizeof *v.meas);
    v.pred_sel = malloc(ns * sizeof *v.pred_sel);
    v.batch = malloc(ns * sizeof *v.batch);
    v.kinds = malloc(ns * sizeof *v.kinds);
    if (!v.idx || !v.pred || !v.meas || !v.pred_sel || !v.batch || !v.kinds) {
        cli_fail(CMD, "out of memory for %lld steps", (long long)r->n_steps);
        goto done;
    }
    int64_t n = 0;
    if (val_pick_steps(r->n_steps, o->sampling, o->start, o->max_steps, v.idx, &n, &err)) {
        cli_fail(CMD, "%s", err.msg);
        goto done;
    }
    if (kernels_backend_open(o->device, &v.be, &err) != KVS_OK) {
        cli_fail(CMD, "--device %s: %s", o->device, err.msg);
        goto done;
    }
    kernels_device_info info;
    if (kernels_backend_info(v.be, &info, &err) != KVS_OK) {
        cli_fail(CMD, "--device %s: %s", o->device, err.msg);
        goto done;
    }
    for (int64_t i = 0; i < r->n_steps; i++)
        v.pred[i] = v.prof ? profile_step_s(v.prof, &r->steps[i].step.batch) + val_step_swap_s(r, i)
                           : r->steps[i].step.dur_s;
    replay_options ro = {.warmup = o->warmup, .repeats = o->repeats, .seed = o->seed,
                         .check_kv = 1};
    if (replay_open(v.be, r, v.idx, n, &ro, &v.rp, &err) != KVS_OK) {
        cli_fail(CMD, "%s", err.msg);
        goto done;
    }
    for (int64_t k = 0; k < n; k++) {
        if (replay_step(v.rp, v.idx[k], &v.meas[k], &err) != KVS_OK) {
            cli_fail(CMD, "replaying step %lld: %s", (long long)v.idx[k], err.msg);
            goto done;
        }
        v.meas[k] += val_step_swap_s(r, v.idx[k]); /* modelled, not measured */
        int64_t nm;
        (void)val_run_step_members(r, v.idx[k], &nm);
        v.batch[k] = nm;
        v.kinds[k] = kind_name(r->steps[v.idx[k]].step.kind);
        v.pred_sel[k] = v.pred[v.idx[k]];
    }
    val_replay_stats stats;
    replay_get_stats(v.rp, &stats);
    if (replay_check_kv(v.rp, &stats.kv_checked, &stats.kv_stale, &stats.kv_nmse, &err) !=
        KVS_OK) {
        cli_fail(CMD, "checking the KV contents: %s", err.msg);
        goto done;
    }
    val_info vi = {.device = o->device, .device_name = info.name,
                   .storage = kernels_backend_vtable(v.be)->storage, .sampling = o->sampling,
                   .start = o->start, .max_steps = o->max_steps, .repeats = o->repeats,
                   .warmup = o->warmup, .seed = o->seed,
                   .profile_id = o->profile_id ? o->profile_id : profile_exists(db, r->profile_id),
                   .profile_given = o->profile_id != 0};
    if (val_summary_json(r, &vi, v.idx, v.pred, v.meas, n, &stats, &v.json, &err) != KVS_OK) {
        cli_fail(CMD, "%s", err.msg);
        goto done;
    }
    val_record rec = {.run_id = r->run_id, .device = o->device, .profile_id = vi.profile_id,
                      .max_steps = o->max_steps, .sampling = val_sampling_name(o->sampling),
                      .summary_json = v.json, .step_ids = v.idx, .predicted_s = v.pred_sel,
                      .measured_s = v.meas, .kinds = v.kinds, .batch = v.batch, .n = n};
    int64_t vid = 0;
    if (val_store_write(st, &rec, &vid, &err) != KVS_OK) {
        cli_fail(CMD, "%s", err.msg);
        goto done;
    }
    if (o->quiet) {
        printf("%lld\n", (long long)vid);
    } else {
        if (val_report_print(stdout, db, vid, &err) != KVS_OK) {
            cli_fail(CMD, "%s", err.msg);
            goto done;
        }
        printf("validation_id %lld\n", (long long)vid);
    }
    rc = CLI_EXIT_OK;
done:
    vstate_free(&v);
    return rc;
}

int cmd_validate(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    vopts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    if (access(o.db, F_OK) != 0)
        return cli_fail(CMD, "--db %s: no such file (runs are stored by kvsim run)", o.db);
    store *st = NULL;
    kvs_err err;
    if (store_open(o.db, &st, &err) != KVS_OK)
        return cli_fail(CMD, "--db: %s", err.msg);
    if (o.report_id) {
        rc = val_report_print(stdout, store_db(st), o.report_id, &err) == KVS_OK
                 ? CLI_EXIT_OK
                 : cli_fail(CMD, "%s", err.msg);
    } else {
        rc = validate(&o, st);
    }
    store_close(st);
    return rc;
}
