/* test_cuda_load.c — CUDA and cuBLAS are loaded only by what needs them.
 *
 * The CUDA backend is a module (libkvsim_cuda.so) that kernels/backend.c
 * loads the first time the "cuda" backend is opened.  So:
 *   - a whole run in this process (flags, trace, cost, simulation, rows
 *     stored: what `kvsim run` does) leaves no libcudart or libcublas in
 *     /proc/self/maps, and the kvsim binary does not list them (nor
 *     libmpi: cli/comm.h) as needed;
 *   - in a build with CUDA, opening the cuda backend maps both, whether or
 *     not a device is present (without one the open fails with KVS_EDEVICE
 *     after loading the module), as `calibrate --backend cuda` does.
 * In a build without CUDA the first check still holds and the second is
 * replaced by the "not built" error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job/job.h"
#include "kernels/kernels.h"
#include "testutil.h"

/* 1 if a mapping of this process names lib (e.g. "libcudart"). */
static int mapped(const char *lib)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

START_TEST(test_run_maps_no_cuda)
{
    kvs_err err;
    job_opts jo;
    job_opts_init(&jo);
    const char *flags[][2] = {{"model", "llama-7b"}, {"gpu", "a100-80g"},
                              {"synthetic", "arrival=poisson,rate=4,n=300,prompt=256,output=64"}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        ck_assert_msg(job_param_set(&jo, flags[i][0], flags[i][1], &err) == 0, "%s", err.msg);
    model_spec m;
    gpu_spec g;
    trace tr;
    cost_model cost;
    ck_assert_msg(job_prepare(&jo, &m, &g, &tr, &err) == 0, "%s", err.msg);
    run_config cfg = jo.cfg;
    ck_assert_msg(job_cost_select(&cfg, &m, &g, NULL, 0, &cost, &err) == 0, "%s", err.msg);
    run_result res;
    ck_assert_msg(run_execute(&cfg, &tr, &cost, &res, &err) == 0, "%s", err.msg);
    char db[512];
    snprintf(db, sizeof db, "%s/lazy.db", tu_tmpdir());
    store *st;
    int64_t id;
    ck_assert_msg(store_open(db, &st, &err) == 0, "%s", err.msg);
    ck_assert_msg(store_write_run(st, &cfg, &res, &id, &err) == 0, "%s", err.msg);
    store_close(st);
    ck_assert_int_eq(res.sum.n_finished, 300);
    ck_assert_msg(!mapped("libcudart"), "a run mapped libcudart");
    ck_assert_msg(!mapped("libcublas"), "a run mapped libcublas");
    run_result_free(&res);
    cost_model_free(&cost);
    trace_free(&tr);
    /* the binary itself needs neither */
    char cmd[600], *out = NULL;
    snprintf(cmd, sizeof cmd, "ldd %s", tu_kvsim());
    if (tu_run(cmd, &out) == 0 && out) {
        ck_assert_msg(!strstr(out, "libcudart") && !strstr(out, "libcublas"),
                      "kvsim needs CUDA libraries at start:\n%s", out);
        /* nor MPI's: the MPI calls of a sweep under mpirun are a module
         * too (cli/comm.h), tested in cli_mpi.sh */
        ck_assert_msg(!strstr(out, "libmpi") && !strstr(out, "libopen-pal"),
                      "kvsim needs MPI libraries at start:\n%s", out);
    }
    free(out);
}
END_TEST

START_TEST(test_cuda_backend_loads_on_demand)
{
    kvs_err err;
    kernels_backend *be = NULL;
    ck_assert(!mapped("libcublas"));
    int rc = kernels_backend_open("cuda", &be, &err);
#ifdef KVSIM_HAVE_CUDA
    ck_assert_msg(rc == KVS_OK || rc == KVS_EDEVICE, "rc %d: %s", rc, err.msg);
    ck_assert_msg(mapped("libcudart") && mapped("libcublas"),
                  "opening the cuda backend did not load CUDA (rc %d: %s)", rc,
                  rc ? err.msg : "ok");
    if (rc == KVS_OK)
        kernels_backend_close(be);
#else
    ck_assert_int_eq(rc, KVS_EDEVICE);
    ck_assert(strstr(err.msg, "without CUDA") != NULL);
#endif
}
END_TEST

/* A module named in $KVSIM_CUDA_MODULE is the only one tried
 * (base/dynmod.h): a wrong path is an error naming it, not a silent
 * fallback to the build's module.  (Each test runs in its own process:
 * the module is opened once per process.) */
START_TEST(test_cuda_module_from_env)
{
    kvs_err err;
    kernels_backend *be = NULL;
    ck_assert_int_eq(setenv("KVSIM_CUDA_MODULE", "/nonexistent/libkvsim_cuda.so", 1), 0);
    int rc = kernels_backend_open("cuda", &be, &err);
    ck_assert_int_eq(rc, KVS_EDEVICE);
#ifdef KVSIM_HAVE_CUDA
    ck_assert_msg(strstr(err.msg, "/nonexistent/libkvsim_cuda.so") != NULL, "%s", err.msg);
    ck_assert(!mapped("libcudart"));
#else
    ck_assert(strstr(err.msg, "without CUDA") != NULL);
#endif
    unsetenv("KVSIM_CUDA_MODULE");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_load");
    TCase *tc = tcase_create("cuda_load");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_run_maps_no_cuda);
    tcase_add_test(tc, test_cuda_backend_loads_on_demand);
    tcase_add_test(tc, test_cuda_module_from_env);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
