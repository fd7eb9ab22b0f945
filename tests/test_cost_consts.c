/* test_cost_consts.c — the roofline's constants are settable by name
 * (`--cost roofline:key=value,...` and constants files), each checked and
 * traced to where it came from; and cost model families are chosen through
 * a registry that a program may extend (the test registers its own). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"
#include "job/job.h"
#include "models/model.h"
#include "testutil.h"

START_TEST(test_parse_and_origins)
{
    cost_roofline_consts k, d;
    cost_roofline_consts_default(&k);
    cost_roofline_consts_default(&d);
    cost_const_origin o[COST_MAX_CONSTS];
    cost_roofline_origins_default(o);
    kvs_err err;
    ck_assert_int_eq(cost_roofline_consts_parse("eff_gemm=0.6, step_overhead_ms=4", &k, o, &err),
                     KVS_OK);
    ck_assert(k.eff_gemm == 0.6);
    ck_assert(k.step_overhead_s == 4e-3);
    ck_assert(k.eff_attn == d.eff_attn);
    ck_assert_str_eq(o[0], "--cost");
    ck_assert_str_eq(o[1], "default");
    ck_assert_int_eq(cost_roofline_consts_parse("collective_lat_us=12", &k, o, &err), KVS_OK);
    ck_assert(fabs(k.collective_lat_s - 12e-6) < 1e-18);
    /* bad keys and values name themselves */
    ck_assert_int_eq(cost_roofline_consts_parse("eff_gem=0.6", &k, o, &err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "unknown roofline constant 'eff_gem'"));
    ck_assert_int_eq(cost_roofline_consts_parse("eff_hbm=fast", &k, o, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--cost: eff_hbm: 'fast' is not a number");
    ck_assert_int_eq(cost_roofline_consts_parse("eff_hbm=0", &k, o, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--cost: eff_hbm: 0 fraction is out of range (0, 1]");
    ck_assert_int_eq(cost_roofline_consts_parse("step_overhead_s=-1", &k, o, &err), KVS_EINVAL);
    ck_assert_int_eq(cost_roofline_consts_parse("eff_hbm", &k, o, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--cost: roofline: 'eff_hbm' is not key=value");
    /* the fidelity terms: eff_pcie an efficiency (0, 1], kv_reread and
     * ridge_loss fractions [0, 1] whose 0 is the plain model */
    ck_assert(d.eff_pcie == 0.5 && d.kv_reread == 0.0 && d.ridge_loss == 0.0);
    ck_assert_int_eq(cost_roofline_consts_parse("eff_pcie=0.4,kv_reread=1,ridge_loss=0", &k, o,
                                                &err), KVS_OK);
    ck_assert(k.eff_pcie == 0.4 && k.kv_reread == 1.0 && k.ridge_loss == 0.0);
    ck_assert_int_eq(cost_roofline_consts_parse("eff_pcie=0", &k, o, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--cost: eff_pcie: 0 fraction is out of range (0, 1]");
    ck_assert_int_eq(cost_roofline_consts_parse("kv_reread=2", &k, o, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--cost: kv_reread: 2 fraction is out of range [0, 1]");
    ck_assert_int_eq(cost_roofline_consts_parse("ridge_loss=-0.1", &k, o, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--cost: ridge_loss: -0.1 fraction is out of range [0, 1]");
    /* eff_fp8: an efficiency (0, 1], 0.9 by default */
    ck_assert(d.eff_fp8 == 0.9);
    ck_assert_int_eq(cost_roofline_consts_parse("eff_fp8=1", &k, o, &err), KVS_OK);
    ck_assert(k.eff_fp8 == 1.0);
    ck_assert_int_eq(cost_roofline_consts_parse("eff_fp8=1.2", &k, o, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--cost: eff_fp8: 1.2 fraction is out of range (0, 1]");
}
END_TEST

START_TEST(test_constants_file)
{
    const char *dir = tu_tmpdir();
    char *path = tu_write_file(dir, "h100.consts",
                               "# fitted on TensorRT-LLM tables\n"
                               "eff_gemm = 0.65\n\n"
                               "step_overhead_ms = 1.5   # V1-like\n");
    char spec[2048];
    snprintf(spec, sizeof spec, "file=%s,eff_gemm=0.55", path);
    cost_roofline_consts k;
    cost_roofline_consts_default(&k);
    cost_const_origin o[COST_MAX_CONSTS];
    cost_roofline_origins_default(o);
    kvs_err err;
    ck_assert_msg(cost_roofline_consts_parse(spec, &k, o, &err) == KVS_OK, "%s", err.msg);
    ck_assert(k.eff_gemm == 0.55); /* the flag after the file wins */
    ck_assert(k.step_overhead_s == 1.5e-3);
    char want[1200];
    snprintf(want, sizeof want, "%s:4", path);
    ck_assert_str_eq(o[5], want);
    char text[4096];
    cost_roofline_consts_show(&k, o, text, sizeof text);
    ck_assert_ptr_nonnull(strstr(text, want));
    ck_assert_ptr_nonnull(strstr(text, "eff_gemm              0.55"));
    /* times show in the unit people read them in: 1.5e-3 s as 1.5 ms,
     * the default 10 us all-reduce latency as 10 us */
    ck_assert_ptr_nonnull(strstr(text, "step_overhead_s       1.5        ms "));
    ck_assert_ptr_nonnull(strstr(text, "collective_lat_s      10         us "));
    char *bad = tu_write_file(dir, "bad.consts", "eff_gemm = 0.6\nwarp_speed = 9\n");
    ck_assert_int_eq(cost_roofline_consts_read(bad, &k, o, &err), KVS_EINVAL);
    snprintf(want, sizeof want, "%s:2: unknown roofline constant 'warp_speed'", bad);
    ck_assert_msg(!strncmp(err.msg, want, strlen(want)), "%s", err.msg);
    free(path);
    free(bad);
}
END_TEST

START_TEST(test_roofline_spec_changes_cost)
{
    model_spec m;
    gpu_spec g;
    kvs_err err;
    ck_assert_int_eq(model_lookup("llama-2-7b", &m, &err), KVS_OK);
    ck_assert_int_eq(gpu_lookup("a100-80g", &g, &err), KVS_OK);
    cost_model a, b;
    ck_assert_int_eq(cost_model_create("roofline", &m, &g, 1, &a, &err), KVS_OK);
    ck_assert_int_eq(cost_model_create("roofline:step_overhead_ms=5", &m, &g, 1, &b, &err), KVS_OK);
    cost_batch one = {.tokens = 1, .kv_read = 128, .n_decode = 1};
    /* only the fixed per-step overhead changed: 5 ms instead of 3 ms */
    ck_assert(fabs(cost_step_s(&b, &one) - cost_step_s(&a, &one) - 2e-3) < 1e-12);
    cost_model_free(&a);
    cost_model_free(&b);
}
END_TEST

/* A cost family the library does not know: every step takes `s` seconds. */
static double flat_step_s(void *self, const cost_batch *b)
{
    (void)b;
    return *(double *)self;
}
static void flat_free(void *self) { free(self); }
static const cost_model_vt flat_vt = {"flat", flat_step_s, flat_free, NULL, NULL, NULL};
static int flat_create(const char *params, const cost_env *env, cost_model *out, kvs_err *err)
{
    (void)env;
    double *s = malloc(sizeof *s);
    *s = strtod(params, NULL);
    if (!(*s > 0)) {
        free(s);
        return kvs_errf(err, KVS_EINVAL, "--cost: flat:S needs S > 0");
    }
    out->vt = &flat_vt;
    out->self = s;
    return KVS_OK;
}
static const cost_family flat_family = {"flat", "flat:S", 1, flat_create};

START_TEST(test_registry)
{
    kvs_err err;
    cost_model c;
    ck_assert_int_eq(cost_model_create("flat:0.5", NULL, NULL, 1, &c, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "--cost: unknown cost model 'flat:0.5' (choices: "
                              "affine:c0,c1,c2,c3, roofline[:KEY=VALUE,...], calibrated[:ID])");
    ck_assert_int_eq(cost_family_register(&flat_family, &err), KVS_OK);
    ck_assert_int_eq(cost_family_register(&flat_family, &err), KVS_EINVAL);
    ck_assert_str_eq(err.msg, "cost registry: 'flat' is already registered");
    ck_assert_int_eq(cost_model_create("flat:0.5", NULL, NULL, 1, &c, &err), KVS_OK);
    cost_batch b = {.tokens = 100};
    ck_assert(cost_step_s(&c, &b) == 0.5);
    cost_model_free(&c);
    ck_assert_int_eq(cost_model_create("flat:-1", NULL, NULL, 1, &c, &err), KVS_EINVAL);

    /* End to end through the job pipeline into the store, as `kvsim run
     * --cost flat:0.5` would (the default vllm-v1 profile).  One request,
     * P 100, O 3, at t 0: step 1 computes the 100 prompt tokens (within
     * the 2048 budget) and gives token 1 at 0.5 s; steps 2 and 3 decode
     * tokens 2 and 3 at 1.0 and 1.5 s.  TTFT 0.5, E2E 1.5, TPOT 0.5. */
    job_opts o;
    job_opts_init(&o);
    ck_assert_int_eq(job_param_set(&o, "synthetic", "arrival=burst,n=1,prompt=100,output=3", &err),
                     KVS_OK);
    ck_assert_int_eq(job_param_set(&o, "cost", "flat:0.5", &err), KVS_OK);
    char path[1100];
    snprintf(path, sizeof path, "%s/flat.db", tu_tmpdir());
    store *st = NULL;
    ck_assert_int_eq(store_open(path, &st, &err), KVS_OK);
    int64_t id = 0;
    run_result res = {0};
    ck_assert_msg(job_execute(&o, st, &id, &res, &err) == KVS_OK, "%s", err.msg);
    ck_assert(res.sum.ttft.p50 == 0.5 && res.sum.e2e.p50 == 1.5 && res.sum.tpot.p50 == 0.5);
    ck_assert_int_eq(res.sum.n_steps, 3);
    run_result_free(&res);
    job_run_info *info = malloc(sizeof *info);
    ck_assert_int_eq(job_read_run(st, id, info, &err), KVS_OK);
    ck_assert_str_eq(info->cfg.cost, "flat:0.5");
    ck_assert_str_eq(info->cfg.cost_desc, "flat");
    ck_assert(info->sum.e2e.p99 == 1.5);
    free(info);
    store_close(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cost_consts");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_parse_and_origins);
    tcase_add_test(tc, test_constants_file);
    tcase_add_test(tc, test_roofline_spec_changes_cost);
    tcase_add_test(tc, test_registry);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
