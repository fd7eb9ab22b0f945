/* cmd_diff_bench.c — `kvsim diff-bench MEASURED.json SIMULATED.json`: the
 * metric-by-metric error of a simulated result against a measured one,
 * both in `vllm bench serve`'s saved-result format (`kvsim run
 * --result-json` writes the simulated one; docs/vllm-bench.md). */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvsim diff-bench MEASURED.json SIMULATED.json\n\n"
            "Compare two results in vllm bench serve's saved-result format (a measured run,\n"
            "and kvsim run --result-json's simulated one): every number both files hold at\n"
            "the top level (duration, completed, throughputs, mean/median/std/pNN of\n"
            "ttft, tpot, itl, e2el in ms, ...), in MEASURED's order, with the simulated\n"
            "value's error (simulated - measured) and relative error.  Lists (the\n"
            "per-request ttfts, itls, ...) and text are skipped.  Ends with the largest\n"
            "relative error.  Exit 0; 2 when a file is not a JSON object or they share no\n"
            "number.\n");
}

/* Keys that describe the set-up, not a result: not compared. */
static int is_setup(const char *k)
{
    static const char *const setup[] = {"num_prompts", "request_rate", "burstiness",
                                        "max_concurrency", "date", "backend", "model_id",
                                        "tokenizer_id"};
    for (size_t i = 0; i < sizeof setup / sizeof setup[0]; i++)
        if (!strcmp(k, setup[i]))
            return 1;
    return 0;
}

static int load(const char *cmd, const char *path, json_object **out)
{
    json_object *o = json_object_from_file(path);
    if (!o) {
        char why[512];
        const char *e = json_util_get_last_err();
        snprintf(why, sizeof why, "%s", e ? e : "unknown error");
        why[strcspn(why, "\n")] = 0; /* json-c ends its message with a newline */
        return cli_fail(cmd, "%s: cannot read it as JSON (%s)", path, why);
    }
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return cli_fail(cmd, "%s: not a JSON object (a vllm bench serve result is one)", path);
    }
    *out = o;
    return 0;
}

static int number(json_object *o, double *v)
{
    if (!o || !(json_object_is_type(o, json_type_double) || json_object_is_type(o, json_type_int)))
        return 0;
    *v = json_object_get_double(o);
    return isfinite(*v);
}

int cmd_diff_bench(int argc, char **argv)
{
    const char *cmd = "diff-bench";
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (argc != 3)
        return cli_fail(cmd, "give two files: MEASURED.json SIMULATED.json (see kvsim "
                             "diff-bench --help)");
    json_object *meas = NULL, *sim = NULL;
    if (load(cmd, argv[1], &meas))
        return CLI_EXIT_ERR;
    if (load(cmd, argv[2], &sim)) {
        json_object_put(meas);
        return CLI_EXIT_ERR;
    }
    int n = 0, rc = CLI_EXIT_OK;
    double worst = -1.0;
    char worst_key[128] = "";
    printf("%-28s %16s %16s %14s %9s\n", "metric", "measured", "simulated", "error", "rel.");
    json_object_object_foreach(meas, key, mv)
    {
        double a, b;
        if (is_setup(key) || !number(mv, &a))
            continue;
        json_object *sv = NULL;
        if (!json_object_object_get_ex(sim, key, &sv) || !number(sv, &b))
            continue;
        double rel = a != 0 ? (b - a) / fabs(a) : (b == a ? 0.0 : INFINITY);
        printf("%-28s %16.6g %16.6g %+14.6g %+8.2f%%\n", key, a, b, b - a, 100.0 * rel);
        if (fabs(rel) > worst) {
            worst = fabs(rel);
            snprintf(worst_key, sizeof worst_key, "%s", key);
        }
        n++;
    }
    if (n == 0)
        rc = cli_fail(cmd, "%s and %s share no numeric result key (are both vllm bench serve "
                           "results?)", argv[1], argv[2]);
    else
        printf("%d metrics compared; largest relative error %.2f%% (%s)\n", n, 100.0 * worst,
               worst_key);
    json_object_put(meas);
    json_object_put(sim);
    return rc;
}
