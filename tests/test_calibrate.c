/* test_calibrate.c — calibrate -> profile -> store -> cost model on the CPU
 * backend with the tiny model: the fit recovers known costs exactly, the
 * profile survives its JSON round trip, a real quick calibration predicts
 * held-out whole steps, and incompatible profiles, unknown devices and
 * oversized grids are refused. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kernels.h"
#include "../store/store.h"
#include "../store/store_calib.h"
#include "../validate/calibrate.h"
#include "../validate/profile.h"
#include "testutil.h"

static model_spec tiny(void)
{
    model_spec m;
    kvs_err err = {{0}};
    ck_assert_msg(model_lookup("models/tiny.conf", &m, &err) == KVS_OK, "%s", err.msg);
    return m;
}

static cost_batch batch_of(const calib_point *p)
{
    return (cost_batch){.tokens = p->tokens, .kv_read = p->kv_read, .prefill_sq = p->prefill_sq,
                        .n_prefill = p->n_prefill, .n_decode = p->n_decode,
                        .prefill_ctx = p->prefill_ctx, .prefill_cached = p->prefill_cached};
}

/* Synthetic measurements with known costs (seconds):
 *   every token op     1e-6 + 1e-8 T      (a line: interpolation is exact)
 *   lm_head            2e-6 + 5e-8 n
 *   decode_attn        1e-5 + 2e-7 B + 3e-9 kv_read
 *   prefill_attn       4e-6 + 1e-6 B + 2e-8 tokens + 3e-8 cached
 *                      + 1e-10 prefill_sq + 5e-11 prefill_ctx
 * and steps measured at 7e-5 s above the summed ops (the overhead). */
static size_t synth_points(const model_spec *m, calib_point *pts)
{
    size_t n = 0;
    const int64_t T[] = {1, 16, 64, 256};
    for (size_t i = 0; i < profile_op_count(); i++) {
        const profile_op_info *op = profile_op_at(i);
        for (size_t j = 0; j < 4 && op->kind == PROFILE_OP_KIND_TOKENS; j++) {
            calib_point p = {.tokens = T[j], .batch = 1, .median_s = 1e-6 + 1e-8 * (double)T[j]};
            snprintf(p.op, sizeof p.op, "%s", op->name);
            pts[n++] = p;
        }
    }
    for (int64_t s = 1; s <= 64; s *= 4) {
        calib_point p = {.tokens = s, .batch = s, .median_s = 2e-6 + 5e-8 * (double)s};
        snprintf(p.op, sizeof p.op, "lm_head");
        pts[n++] = p;
    }
    const int64_t B[] = {1, 4, 16}, C[] = {64, 256, 1024};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            calib_point p = {.tokens = B[i], .batch = B[i], .context = C[j], .n_decode = B[i],
                             .kv_read = B[i] * C[j]};
            p.median_s = 1e-5 + 2e-7 * (double)B[i] + 3e-9 * (double)(B[i] * C[j]);
            snprintf(p.op, sizeof p.op, "decode_attn");
            pts[n++] = p;
        }
    /* whole prompts (c = 0) at 1 and 2 sequences, chunks over a cache */
    const int64_t PB[] = {1, 2, 1, 1, 1, 1}, L[] = {16, 64, 256}, CC[] = {0, 0, 100, 400};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            int64_t b = PB[i], l = L[j], c = CC[i];
            if (c > 0 && l == 256)
                continue;
            calib_point p = {.tokens = b * l, .batch = b, .context = c + l, .n_prefill = b,
                             .prefill_sq = b * l * l, .prefill_ctx = b * l * c,
                             .prefill_cached = b * c};
            p.median_s = 4e-6 + 1e-6 * (double)b + 2e-8 * (double)(b * l) + 3e-8 * (double)(b * c) +
                         1e-10 * (double)(b * l * l) + 5e-11 * (double)(b * l * c);
            snprintf(p.op, sizeof p.op, "prefill_attn");
            pts[n++] = p;
        }
    /* two steps: 8 decodes at context 100; one prefill of 40 */
    profile *ops_only;
    kvs_err err = {{0}};
    ck_assert_int_eq(profile_fit(m, pts, n, &ops_only, &err), KVS_OK);
    calib_point s1 = {.tokens = 8, .batch = 8, .n_decode = 8, .kv_read = 800};
    calib_point s2 = {.tokens = 40, .batch = 1, .n_prefill = 1, .prefill_sq = 1600};
    cost_batch b1 = batch_of(&s1), b2 = batch_of(&s2);
    s1.median_s = profile_step_s(ops_only, &b1) + 7e-5;
    s2.median_s = profile_step_s(ops_only, &b2) + 7e-5;
    snprintf(s1.op, sizeof s1.op, "step");
    snprintf(s2.op, sizeof s2.op, "step");
    pts[n++] = s1;
    pts[n++] = s2;
    profile_free(ops_only);
    return n;
}

START_TEST(test_fit_recovers_known_costs)
{
    model_spec m = tiny();
    calib_point pts[128];
    size_t n = synth_points(&m, pts);
    profile *p;
    kvs_err err = {{0}};
    ck_assert_int_eq(profile_fit(&m, pts, n, &p, &err), KVS_OK);
    /* decode of 10 sequences reading 5000 tokens in all:
     * 1e-5 + 2e-7 * 10 + 3e-9 * 5000 = 2.7e-5 s per layer, 4 layers */
    cost_batch d = {.tokens = 10, .kv_read = 5000, .n_decode = 10};
    ck_assert_double_eq_tol(profile_op_s(p, "decode_attn", &d), 4 * 2.7e-5, 1e-12);
    /* prefill 3 x 100: 4e-6 + 3e-6 + 2e-8 * 300 + 1e-10 * 30000 = 1.6e-5, x 4 layers */
    cost_batch f = {.tokens = 300, .prefill_sq = 30000, .n_prefill = 3};
    ck_assert_double_eq_tol(profile_op_s(p, "prefill_attn", &f), 4 * 1.6e-5, 1e-12);
    /* a chunk of 50 over 300 cached: 4e-6 + 1e-6 + 2e-8 * 50 + 3e-8 * 300
     * + 1e-10 * 2500 + 5e-11 * 15000 = 1.6e-5, x 4 layers */
    cost_batch ch = {.tokens = 50, .prefill_sq = 2500, .n_prefill = 1, .prefill_ctx = 15000,
                     .prefill_cached = 300};
    ck_assert_double_eq_tol(profile_op_s(p, "prefill_attn", &ch), 4 * 1.6e-5, 1e-12);
    /* rmsnorm runs twice per layer: 8 x (1e-6 + 1e-8 * 100) = 1.6e-5 at T = 100
     * (between grid points 64 and 256: linear interpolation of a line) */
    cost_batch t = {.tokens = 100, .n_decode = 100, .kv_read = 100};
    ck_assert_double_eq_tol(profile_op_s(p, "rmsnorm", &t), 8 * 2e-6, 1e-12);
    /* beyond the grid the last segment extends: T = 1000 -> 1.1e-5 per call */
    cost_batch big = {.tokens = 1000, .n_prefill = 1, .prefill_sq = 1000000};
    ck_assert_double_eq_tol(profile_op_s(p, "qkv_proj", &big), 4 * 1.1e-5, 1e-12);
    /* no decode in the step: decode attention costs nothing */
    ck_assert_double_eq(profile_op_s(p, "decode_attn", &f), 0.0);
    ck_assert_double_eq_tol(profile_overhead_s(p), 7e-5, 1e-12);
    /* every fit error is ~0: the data are exactly the model */
    for (size_t i = 0; i < profile_error_count(p); i++)
        ck_assert_double_lt(profile_error_at(p, i)->max_rel, 1e-9);
    ck_assert(isnan(profile_op_s(p, "no_such_op", &d)));
    /* an empty step takes no time */
    cost_batch none = {0};
    ck_assert_double_eq(profile_step_s(p, &none), 0.0);
    profile_free(p);
}
END_TEST

/* A negative slope in the data must not produce a negative coefficient:
 * decode time falling with batch is fitted by the non-negative model. */
START_TEST(test_fit_non_negative)
{
    model_spec m = tiny();
    calib_point pts[128];
    size_t n = synth_points(&m, pts);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(pts[i].op, "decode_attn"))
            pts[i].median_s = 5e-5 - 1e-6 * (double)pts[i].batch; /* 4.9e-5 .. 3.4e-5 */
    profile *p;
    kvs_err err = {{0}};
    ck_assert_int_eq(profile_fit(&m, pts, n, &p, &err), KVS_OK);
    char *params, *fit;
    ck_assert_int_eq(profile_to_json(p, &params, &fit, &err), KVS_OK);
    ck_assert_ptr_null(strstr(params, "[-")); /* no negative coefficient */
    ck_assert_ptr_null(strstr(params, ",-"));
    /* predictions stay within the data's range */
    cost_batch d = {.tokens = 4, .kv_read = 400, .n_decode = 4};
    double per_layer = profile_op_s(p, "decode_attn", &d) / 4;
    ck_assert(per_layer > 3.0e-5 && per_layer < 5.0e-5);
    free(params), free(fit);
    profile_free(p);
}
END_TEST

static store *open_db(const char **path_out)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/kvsim.db", tu_tmpdir());
    store *s;
    kvs_err err = {{0}};
    ck_assert_msg(store_open(path, &s, &err) == KVS_OK, "%s", err.msg);
    if (path_out)
        *path_out = path;
    return s;
}

static int64_t save(store *s, const profile *p, const char *gpu, const char *model)
{
    char *params, *fit;
    kvs_err err = {{0}};
    int64_t cid, pid;
    store_calib_meta meta = {"cpu", "test CPU", gpu, model, NULL, NULL, "{}"};
    ck_assert_int_eq(store_calib_write(s, &meta, NULL, 0, &cid, &err), KVS_OK);
    ck_assert_int_eq(profile_to_json(p, &params, &fit, &err), KVS_OK);
    ck_assert_int_eq(store_profile_write(s, cid, "cpu", gpu, model, params, fit, &pid, &err), KVS_OK);
    free(params), free(fit);
    return pid;
}

START_TEST(test_refuse_incompatible_profile)
{
    model_spec m = tiny();
    calib_point pts[128];
    size_t n = synth_points(&m, pts);
    profile *p;
    kvs_err err = {{0}};
    ck_assert_int_eq(profile_fit(&m, pts, n, &p, &err), KVS_OK);
    store *s = open_db(NULL);
    sqlite3 *db = store_db(s);
    int64_t pid = save(s, p, "a100-80g", "tiny");
    cost_model c;
    char spec[64];
    snprintf(spec, sizeof spec, "calibrated:%lld", (long long)pid);

    /* measured for a100-80g, asked for h100-sxm */
    ck_assert_int_eq(store_calibrated_cost_create(db, spec, &m, "h100-sxm", 0, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "'a100-80g'"));
    ck_assert_ptr_nonnull(strstr(err.msg, "--force-profile"));
    ck_assert_int_eq(store_calibrated_cost_create(db, "calibrated", &m, "h100-sxm", 0, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "no profile for model 'tiny' on gpu 'h100-sxm'"));
    ck_assert_ptr_nonnull(strstr(err.msg, "tiny on a100-80g"));
    /* forced: used, and the description says so */
    ck_assert_int_eq(store_calibrated_cost_create(db, "calibrated", &m, "h100-sxm", 1, &c, &err), KVS_OK);
    char desc[512];
    cost_model_describe(&c, desc, sizeof desc);
    ck_assert_ptr_nonnull(strstr(desc, "[forced]"));
    cost_model_free(&c);

    /* another model of the same name but another shape */
    model_spec other = m;
    other.layers = 8;
    ck_assert_int_eq(store_calibrated_cost_create(db, spec, &other, "a100-80g", 0, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "different shape"));
    snprintf(other.name, sizeof other.name, "llama-7b");
    ck_assert_int_eq(store_calibrated_cost_create(db, spec, &other, "a100-80g", 0, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "fitted for model 'tiny'"));

    /* the matching one loads, names itself, and predicts like the fit */
    ck_assert_int_eq(store_calibrated_cost_create(db, "calibrated", &m, "a100-80g", 0, &c, &err), KVS_OK);
    cost_model_describe(&c, desc, sizeof desc);
    char want[64];
    snprintf(want, sizeof want, "profile %lld", (long long)pid);
    ck_assert_ptr_nonnull(strstr(desc, want));
    cost_batch b = {.tokens = 77, .kv_read = 3000, .prefill_sq = 4900, .n_prefill = 1, .n_decode = 7};
    ck_assert_double_eq(cost_step_s(&c, &b), profile_step_s(p, &b)); /* %.17g round trip */
    cost_model_free(&c);

    /* bad specs and ids */
    ck_assert_int_eq(store_calibrated_cost_create(db, "calibrated:999", &m, "a100-80g", 0, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "no profile with id 999"));
    ck_assert_int_eq(store_calibrated_cost_create(db, "calibrated:x1", &m, "a100-80g", 0, &c, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "positive integer"));
    profile_free(p);
    store_close(s);
}
END_TEST

/* Broken params_json is refused naming the field. */
START_TEST(test_profile_json_checked)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    profile *p;
    kvs_err err = {{0}};
    ck_assert_int_eq(profile_from_json(db, "{not json", &p, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "not valid JSON"));
    ck_assert_int_eq(profile_from_json(db, "{\"version\":2}", &p, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "version"));

    model_spec m = tiny();
    calib_point pts[128];
    size_t n = synth_points(&m, pts);
    profile *fit;
    ck_assert_int_eq(profile_fit(&m, pts, n, &fit, &err), KVS_OK);
    char *params, *fe;
    ck_assert_int_eq(profile_to_json(fit, &params, &fe, &err), KVS_OK);
    ck_assert_int_eq(profile_from_json(db, params, &p, &err), KVS_OK);
    profile_free(p);
    /* a negative coefficient, a missing op, an unknown op */
    char *at = strstr(params, "\"coef\":["), *bad = malloc(strlen(params) + 2);
    ck_assert_ptr_nonnull(at);
    ck_assert_ptr_nonnull(bad);
    /* decode_attn's first coefficient is 1e-5 > 0: make it negative */
    sprintf(bad, "%.*s-%s", (int)(at + 8 - params), params, at + 8);
    ck_assert_int_eq(profile_from_json(db, bad, &p, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "coef[0]"));
    free(bad);
    bad = strdup(params);
    at = strstr(bad, "\"op\":\"rope\"");
    memcpy(at, "\"op\":\"ropf\"", 11);
    ck_assert_int_eq(profile_from_json(db, bad, &p, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "(ropf): unknown op"));
    free(bad);
    free(params), free(fe);
    profile_free(fit);
    sqlite3_close(db);
}
END_TEST

/* The whole path on the CPU: quick grid on the tiny model, fit, store,
 * load, and predict held-out whole steps that are not grid points.
 *
 * The accuracy of the fit is a measured figure, not an assertion here: the
 * grid and the held-out steps are timed minutes apart on a shared machine,
 * and what sharing changes between the two (caches, frequency, a compile
 * beside the test) moved the held-out median error from ~5% to 48% on the
 * same code.  test_fit_recovers_known_costs checks the fit itself on exact
 * costs; this test prints the held-out errors (the figure
 * scripts/gpu_run.sh reports on a GPU) and asserts what no load can break:
 * every prediction positive, finite and within a factor of 2.5 of its
 * measurement, which a wrong unit, a missing op or a misplaced profile term
 * does not meet. */
START_TEST(test_calibrate_cpu_predicts_held_out_steps)
{
    model_spec m = tiny();
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    calib_grid g;
    ck_assert_int_eq(calib_grid_preset("quick", "cpu", &m, &g, &err), KVS_OK);
    calib_step *steps = calloc(CALIB_MAX_STEPS, sizeof *steps);
    ck_assert_ptr_nonnull(steps);
    size_t ns = calib_default_steps(&g, steps, CALIB_MAX_STEPS);
    /* decodes at each of the 4 batch sizes, an uneven batch, a prompt, a
     * prompt with decodes, a chunk over stored context with decodes */
    ck_assert_int_eq(ns, 8);
    calib_options o = {.grid = &g, .warmup = 1, .repeats = 3, .seed = 3};
    calib_result res;
    ck_assert_msg(calib_measure(be, &m, &o, steps, ns, &res, &err) == KVS_OK, "%s", err.msg);
    /* 6 token sizes x 8 ops + 4 x 3 decode + 3 uneven decode batches + 2 x 3
     * x 2 prefill (batch x length x cached) + 4 LM head + 6 + 4 whole layers
     * + 8 steps */
    ck_assert_int_eq(res.n, 6 * 8 + 12 + 3 + 12 + 4 + 10 + 8);
    for (size_t i = 0; i < res.n; i++) {
        ck_assert(res.pts[i].p10_s <= res.pts[i].median_s && res.pts[i].median_s <= res.pts[i].p90_s);
        ck_assert_int_ge(res.pts[i].launches, 1);
        ck_assert_int_le(res.pts[i].launches, CALIB_MAX_LAUNCHES);
        ck_assert_ptr_nonnull(strstr(res.pts[i].shape_json, "\"launches\":"));
    }
    profile *p;
    ck_assert_int_eq(profile_fit(&m, res.pts, res.n, &p, &err), KVS_OK);
    /* The CPU fit's errors, visible in the test log (ctest -V, or
     * Testing/Temporary/LastTest.log): what the GPU script prints too. */
    printf("CPU fit (tiny model, quick grid): overhead %.2f us %+.3f us/seq\n",
           profile_overhead_s(p) * 1e6, profile_overhead_per_seq_s(p) * 1e6);
    int have_step = 0, have_layer = 0;
    for (size_t i = 0; i < profile_error_count(p); i++) {
        const profile_op_error *e = profile_error_at(p, i);
        printf("CPU fit error %-13s %-11s n=%-3lld median %6.1f%%  max %6.1f%%\n", e->op, e->method,
               (long long)e->n, 100 * e->median_rel, 100 * e->max_rel);
        have_step |= !strcmp(e->op, "step");
        have_layer |= !strcmp(e->op, "layer");
    }
    ck_assert(have_step && have_layer);

    const char *path;
    store *s = open_db(&path);
    char *params, *fe;
    int64_t cid, pid;
    store_calib_meas *ms = calloc(res.n, sizeof *ms);
    ck_assert_ptr_nonnull(ms);
    for (size_t i = 0; i < res.n; i++)
        ms[i] = (store_calib_meas){res.pts[i].op, res.pts[i].shape_json, res.pts[i].tokens,
                                   res.pts[i].batch, res.pts[i].context, res.pts[i].median_s,
                                   res.pts[i].p10_s, res.pts[i].p90_s, res.pts[i].repeats};
    store_calib_meta meta = {"cpu", "test", "cpu", m.name, NULL, NULL, "{}"};
    ck_assert_int_eq(store_calib_write(s, &meta, ms, res.n, &cid, &err), KVS_OK);
    ck_assert_int_eq(profile_to_json(p, &params, &fe, &err), KVS_OK);
    ck_assert_int_eq(store_profile_write(s, cid, "cpu", "cpu", m.name, params, fe, &pid, &err), KVS_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(store_db(s), "SELECT count(*) FROM kernel_measurements WHERE calib_id = ?1", -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_int64(st, 1, cid);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int64(st, 0), (int64_t)res.n);
    sqlite3_finalize(st);
    cost_model c;
    ck_assert_msg(store_calibrated_cost_create(store_db(s), "calibrated", &m, "cpu", 0, &c, &err) == KVS_OK, "%s", err.msg);

    /* held-out steps: none is a calibration shape */
    calib_step *h = calloc(6, sizeof *h);
    ck_assert_ptr_nonnull(h);
    h[0].n = 8; /* 8 decodes at context 300 */
    for (int i = 0; i < 8; i++)
        h[0].q[i] = 1, h[0].c[i] = 299;
    h[1].n = 1, h[1].q[0] = 100; /* one prefill of 100 */
    h[2].n = 7, h[2].q[0] = 48;  /* a prefill of 48 with 6 decodes at 700 */
    for (int i = 1; i < 7; i++)
        h[2].q[i] = 1, h[2].c[i] = 699;
    h[3].n = 24; /* 24 decodes, contexts 100 .. 790 */
    for (int i = 0; i < 24; i++)
        h[3].q[i] = 1, h[3].c[i] = 100 + 30 * i;
    h[4].n = 5, h[4].q[0] = 80, h[4].q[1] = 30; /* two prefills + 3 decodes at 150 */
    for (int i = 2; i < 5; i++)
        h[4].q[i] = 1, h[4].c[i] = 149;
    h[5].n = 3, h[5].q[0] = 40, h[5].c[0] = 200; /* a chunk over 200 cached + 2 decodes */
    h[5].q[1] = h[5].q[2] = 1, h[5].c[1] = 500, h[5].c[2] = 60;
    calib_bench *bench;
    ck_assert_int_eq(calib_bench_open(be, &m, 256, 32, 32 * 64, 16, 4, &bench, &err), KVS_OK);
    double rel[6];
    for (int i = 0; i < 6; i++) {
        calib_point pt;
        ck_assert_msg(calib_bench_step(bench, &h[i], 0, 3, &pt, &err) == KVS_OK, "%s", err.msg);
        cost_batch b = batch_of(&pt);
        double pred = cost_step_s(&c, &b);
        rel[i] = fabs(pred - pt.median_s) / pt.median_s;
        printf("held-out step %d (%s): measured %.3f ms, predicted %.3f ms, error %.1f%%\n", i,
               pt.shape_json, pt.median_s * 1e3, pred * 1e3, 100 * rel[i]);
        ck_assert_msg(isfinite(pred) && pred > 0 && pred < 2.5 * pt.median_s &&
                          pt.median_s < 2.5 * pred,
                      "held-out step %d: predicted %.6f s for a measured %.6f s", i, pred,
                      pt.median_s);
    }
    for (int i = 0; i < 6; i++)
        for (int j = i + 1; j < 6; j++)
            if (rel[j] < rel[i]) {
                double t = rel[i];
                rel[i] = rel[j];
                rel[j] = t;
            }
    printf("CPU held-out median error %.1f%% (a figure, not a bound)\n",
           100 * 0.5 * (rel[2] + rel[3]));
    calib_bench_close(bench);
    cost_model_free(&c);
    free(h), free(ms), free(params), free(fe), free(steps);
    profile_free(p);
    calib_result_free(&res);
    store_close(s);
    kernels_backend_close(be);
}
END_TEST

/* A grid that cannot fit is refused before allocating, naming the bytes. */
START_TEST(test_grid_too_big_refused)
{
    model_spec m = tiny();
    m.vocab = (int64_t)1 << 32; /* LM head alone: 2^32 x 256 x 4 bytes = 4 TiB */
    kernels_backend *be;
    kvs_err err = {{0}};
    ck_assert_int_eq(kernels_backend_open("cpu", &be, &err), KVS_OK);
    calib_grid g;
    ck_assert_int_eq(calib_grid_preset("quick", "cpu", &m, &g, &err), KVS_OK);
    calib_options o = {.grid = &g, .warmup = 0, .repeats = 1};
    calib_result res;
    ck_assert_int_eq(calib_measure(be, &m, &o, NULL, 0, &res, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "GiB free"));
    ck_assert_ptr_nonnull(strstr(err.msg, "weights 4096.0"));
    ck_assert_int_eq(calib_grid_preset("huge", "cpu", &m, &g, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--grid"));
    kernels_backend_close(be);
}
END_TEST

/* The CLI: help, unknown device, no GPU, and a full CPU run. */
START_TEST(test_cli)
{
    char cmd[1200], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s calibrate --help", tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "--grid quick|full"));
    ck_assert_ptr_nonnull(strstr(out, "default kvsim.db"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s calibrate --device tpu --model models/tiny.conf", tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "unknown device 'tpu'"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s calibrate --device cpu --model models/tiny.conf --tp 2", tu_kvsim());
    ck_assert_int_eq(tu_run(cmd, &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "--tp"));
    free(out);
    kernels_backend *be = NULL;
    kvs_err err = {{0}};
    if (kernels_backend_open("cuda", &be, &err) != KVS_OK) {
        snprintf(cmd, sizeof cmd, "%s calibrate --device cuda --model models/tiny.conf --db %s/x.db",
                 tu_kvsim(), tu_tmpdir());
        ck_assert_int_eq(tu_run(cmd, &out), 2);
        ck_assert_ptr_nonnull(strstr(out, "no CUDA device"));
        free(out);
    }
    kernels_backend_close(be);
    snprintf(cmd, sizeof cmd,
             "%s calibrate --device cpu --model models/tiny.conf --repeats 1 --warmup 0 --quiet "
             "--db %s/cli.db",
             tu_kvsim(), tu_tmpdir());
    ck_assert_int_eq(tu_run(cmd, &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "stored calibration 1 and profile 1"));
    ck_assert_ptr_nonnull(strstr(out, "decode_attn"));
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("calibrate");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fit_recovers_known_costs);
    tcase_add_test(tc, test_fit_non_negative);
    tcase_add_test(tc, test_refuse_incompatible_profile);
    tcase_add_test(tc, test_profile_json_checked);
    tcase_add_test(tc, test_calibrate_cpu_predicts_held_out_steps);
    tcase_add_test(tc, test_grid_too_big_refused);
    tcase_add_test(tc, test_cli);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
