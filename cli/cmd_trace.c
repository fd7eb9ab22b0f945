/* cmd_trace.c — `kvsim trace gen` (write a synthetic trace as native CSV)
 * and `kvsim trace stats` (summary statistics of a trace file or a
 * synthetic spec, as a table or one JSON object). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../base/afile.h"
#include "../base/str.h"
#include "../traces/trace.h"
#include "cli.h"

#define SPEC_HELP                                                                     \
    "  --synthetic SPEC  synthetic workload, comma-separated key=value pairs:\n"     \
    "                      arrival=poisson|gamma|burst  (default poisson)\n"         \
    "                      rate=R      requests/s, > 0 (required unless burst)\n"    \
    "                      cv=C        inter-arrival CV (required for gamma)\n"      \
    "                      n=N         number of requests (required)\n"              \
    "                      prompt=L | prompt=uniform:A:B   prompt tokens\n"          \
    "                      output=L | output=uniform:A:B   output tokens\n"          \
    "                      lengths=FILE  sample (prompt, output) rows of a CSV with\n" \
    "                                  num_prefill_tokens,num_decode_tokens columns\n" \
    "                      priorities=P0:S0/P1:S1/...  classes and shares (sum 1)\n" \
    "                      system_prompt=S  every prompt starts with the same S-token\n" \
    "                                  prefix (P = S + the sampled length)\n"           \
    "                      turns=K     conversations of K turns: each turn's prompt is\n" \
    "                                  the previous turn's prompt and output plus a new\n" \
    "                                  part (default 1)\n"                              \
    "                    e.g. arrival=poisson,rate=8,n=1000,"                         \
    "lengths=traces/lengths_sharegpt_8k_llama2tok.csv\n"                               \
    "  --seed N          random seed of the synthetic trace (default 0)\n"

static void usage_top(FILE *f)
{
    fprintf(f, "usage: kvsim trace <subcommand> [options]   (kvsim trace <subcommand> --help)\n\n"
               "subcommands:\n"
               "  gen    write a synthetic trace in kvsim's native CSV format\n"
               "  stats  print a trace's statistics (rate, burstiness, lengths)\n"
               "  import convert a dataset (ShareGPT, BurstGPT, Azure 2024, vllm bench\n"
               "         custom JSONL) into a native trace\n\n"
               "Native CSV: header arrival_s,prompt_tokens,output_tokens[,priority].\n"
               "Also read: Azure LLM inference 2023 (TIMESTAMP,ContextTokens,GeneratedTokens).\n");
}

static void usage_gen(FILE *f)
{
    fprintf(f, "usage: kvsim trace gen --synthetic SPEC [--seed N] [--out FILE]\n\n"
               "Write the synthetic trace for (SPEC, seed) as native CSV; the same SPEC and\n"
               "seed give byte-identical output.\n\n" SPEC_HELP
               "  --out FILE        output file (default: standard output)\n");
}

static void usage_stats(FILE *f)
{
    fprintf(f, "usage: kvsim trace stats (FILE | --synthetic SPEC [--seed N]) "
               "[--rate-scale K] [--json]\n\n"
               "Print request count, span, mean rate, inter-arrival CV, index of dispersion\n"
               "of counts in 1/10/60 s bins, and prompt/output mean, nearest-rank\n"
               "p50/p90/p99 and max.\n\n"
               "  FILE              trace: CSV (native or Azure LLM 2023) or Mooncake JSONL\n" SPEC_HELP
               "  --rate-scale K    divide arrival times by K > 0 (default 1: as recorded)\n"
               "  --json            print one JSON object instead of a table (default off)\n");
}

/* The value of flag argv[*i] ("--flag VALUE" or "--flag=VALUE") if its name
 * is `flag`; advances *i past it.  Returns NULL if argv[*i] is another flag;
 * sets *missing when the value is absent. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag, int *missing)
{
    const char *v = NULL;
    return cli_take_value(argc, argv, i, flag, &v, missing) ? v : NULL;
}

static int load_synthetic(const char *cmd, const char *spec_text, uint64_t seed, trace *t)
{
    trace_synth_spec spec;
    kvs_err err;
    if (trace_synth_parse(spec_text, &spec, &err) || trace_synth_gen(&spec, spec_text, seed, t, &err))
        return cli_fail(cmd, "%s", err.msg);
    return 0;
}

static int cmd_gen(int argc, char **argv)
{
    const char *cmd = "trace gen", *spec = NULL, *out = NULL, *v;
    uint64_t seed = 0;
    int missing = 0;
    if (cli_wants_help(argc, argv)) {
        usage_gen(stdout);
        return CLI_EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        if ((v = flag_value(argc, argv, &i, "--synthetic", &missing)))
            spec = v;
        else if ((v = flag_value(argc, argv, &i, "--seed", &missing))) {
            if (cli_parse_u64(cmd, "--seed", v, &seed))
                return CLI_EXIT_ERR;
        } else if ((v = flag_value(argc, argv, &i, "--out", &missing)))
            out = v;
        else if (missing)
            return cli_fail(cmd, "%s: missing value", argv[i]);
        else
            return cli_fail(cmd, "unknown argument '%s' (try kvsim trace gen --help)", argv[i]);
    }
    if (!spec)
        return cli_fail(cmd, "--synthetic: required (try kvsim trace gen --help)");
    trace t;
    if (load_synthetic(cmd, spec, seed, &t))
        return CLI_EXIT_ERR;
    /* --out is written atomically: a kill leaves the old file or none,
     * never a truncated last line that loads as a request */
    afile af = {NULL, NULL, NULL};
    kvs_err err;
    if (out && afile_open(&af, out, &err)) {
        trace_free(&t);
        return cli_fail(cmd, "--out: cannot open %s", err.msg);
    }
    FILE *f = out ? af.f : stdout;
    if (t.hash_off)
        fprintf(stderr, "kvsim %s: note: the native CSV has no column for prompt prefix "
                        "hashes (system_prompt=, turns=): the written trace drops them; "
                        "use --synthetic directly with kvsim run for prefix caching\n",
                cmd);
    int st = trace_write_csv(&t, f, &err);
    trace_free(&t);
    if (st != KVS_OK) {
        if (out)
            afile_abort(&af);
        return cli_fail(cmd, "%s%s%s", out ? out : "stdout", ": ", err.msg);
    }
    if (out && afile_commit(&af, &err))
        return cli_fail(cmd, "--out: %s", err.msg);
    return CLI_EXIT_OK;
}


static const char *format_name(trace_format f)
{
    switch (f) {
    case TRACE_FORMAT_NATIVE: return "native";
    case TRACE_FORMAT_AZURE: return "azure";
    case TRACE_FORMAT_SYNTHETIC: return "synthetic";
    case TRACE_FORMAT_MOONCAKE: return "mooncake";
    }
    return "unknown";
}

static void print_json(const trace *t, const trace_stats *s, int synthetic, uint64_t seed,
                       double scale)
{
    printf("{\"source\": ");
    str_json_write(stdout, t->source);
    printf(", \"format\": \"%s\", \"sha256\": \"%s\", ", format_name(t->format), t->sha256);
    if (synthetic)
        printf("\"seed\": %llu, ", (unsigned long long)seed);
    printf("\"rate_scale\": %.10g, \"n\": %lld, \"span_s\": %.10g, \"rate_rps\": %.10g, "
           "\"iat_cv\": %.10g, \"iod_1s\": %.10g, \"iod_10s\": %.10g, \"iod_60s\": %.10g, "
           "\"prompt_mean\": %.10g, \"prompt_p50\": %.10g, \"prompt_p90\": %.10g, "
           "\"prompt_p99\": %.10g, \"prompt_max\": %.10g, "
           "\"output_mean\": %.10g, \"output_p50\": %.10g, \"output_p90\": %.10g, "
           "\"output_p99\": %.10g, \"output_max\": %.10g}\n",
           scale, (long long)s->n, s->span_s, s->rate_rps, s->iat_cv, s->iod_1s, s->iod_10s,
           s->iod_60s, s->prompt_mean, s->prompt_p50, s->prompt_p90, s->prompt_p99,
           s->prompt_max, s->output_mean, s->output_p50, s->output_p90, s->output_p99,
           s->output_max);
}

static void print_table(const trace *t, const trace_stats *s, int synthetic, uint64_t seed,
                        double scale)
{
    printf("trace       %s\n", t->source);
    printf("format      %s", format_name(t->format));
    if (synthetic)
        printf(" (seed %llu)", (unsigned long long)seed);
    else
        printf(" (sha256 %s)", t->sha256);
    printf("\n");
    if (scale != 1.0)
        printf("rate scale  %g (arrival times divided by it)\n", scale);
    printf("requests    %lld\n", (long long)s->n);
    printf("span        %.3f s\n", s->span_s);
    printf("mean rate   %.3f req/s\n", s->rate_rps);
    printf("IAT CV      %.3f\n", s->iat_cv);
    printf("IoD         %.3f @1s   %.3f @10s   %.3f @60s\n", s->iod_1s, s->iod_10s, s->iod_60s);
    printf("%-10s %10s %8s %8s %8s %8s\n", "tokens", "mean", "p50", "p90", "p99", "max");
    printf("%-10s %10.1f %8.0f %8.0f %8.0f %8.0f\n", "prompt", s->prompt_mean, s->prompt_p50,
           s->prompt_p90, s->prompt_p99, s->prompt_max);
    printf("%-10s %10.1f %8.0f %8.0f %8.0f %8.0f\n", "output", s->output_mean, s->output_p50,
           s->output_p90, s->output_p99, s->output_max);
}

static int cmd_stats(int argc, char **argv)
{
    const char *cmd = "trace stats", *spec = NULL, *file = NULL, *v;
    uint64_t seed = 0;
    double scale = 1.0;
    int json = 0, missing = 0, seed_given = 0;
    if (cli_wants_help(argc, argv)) {
        usage_stats(stdout);
        return CLI_EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        if ((v = flag_value(argc, argv, &i, "--synthetic", &missing)))
            spec = v;
        else if ((v = flag_value(argc, argv, &i, "--seed", &missing))) {
            if (cli_parse_u64(cmd, "--seed", v, &seed))
                return CLI_EXIT_ERR;
            seed_given = 1;
        } else if ((v = flag_value(argc, argv, &i, "--rate-scale", &missing))) {
            if (cli_parse_f64(cmd, "--rate-scale", v, 1e-9, 1e9, &scale))
                return CLI_EXIT_ERR;
        } else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (missing)
            return cli_fail(cmd, "%s: missing value", argv[i]);
        else if (argv[i][0] == '-' && argv[i][1])
            return cli_fail(cmd, "unknown flag '%s' (try kvsim trace stats --help)", argv[i]);
        else if (file)
            return cli_fail(cmd, "'%s': only one trace file may be given", argv[i]);
        else
            file = argv[i];
    }
    if (!file == !spec)
        return cli_fail(cmd, "give either a trace FILE or --synthetic SPEC (try kvsim trace "
                        "stats --help)");
    if (seed_given && !spec)
        return cli_fail(cmd, "--seed: only used with --synthetic");
    trace t;
    kvs_err err;
    if (spec) {
        if (load_synthetic(cmd, spec, seed, &t))
            return CLI_EXIT_ERR;
    } else if (trace_load(file, &t, &err)) {
        return cli_fail(cmd, "%s", err.msg);
    }
    trace_scale_rate(&t, scale);
    trace_stats s;
    int st = trace_stats_compute(&t, &s, &err);
    if (st == KVS_OK) {
        if (json)
            print_json(&t, &s, spec != NULL, seed, scale);
        else
            print_table(&t, &s, spec != NULL, seed, scale);
    }
    trace_free(&t);
    if (st != KVS_OK)
        return cli_fail(cmd, "%s", err.msg);
    if (fflush(stdout) != 0)
        return cli_fail(cmd, "writing output: %s", strerror(errno));
    return CLI_EXIT_OK;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2)
        return cli_fail("trace",
                        "missing subcommand: gen, stats or import (try kvsim trace --help)");
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage_top(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "gen"))
        return cmd_gen(argc - 1, argv + 1);
    if (!strcmp(argv[1], "stats"))
        return cmd_stats(argc - 1, argv + 1);
    if (!strcmp(argv[1], "import"))
        return cmd_trace_import(argc - 1, argv + 1);
    return cli_fail("trace", "unknown subcommand '%s' (try kvsim trace --help)", argv[1]);
}
