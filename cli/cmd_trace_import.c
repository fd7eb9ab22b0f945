/* cmd_trace_import.c — `kvsim trace import FORMAT IN -o OUT`: convert a
 * dataset (ShareGPT, BurstGPT, Azure 2024, vllm bench custom) into a native
 * CSV trace with traces/'s importers, written atomically. */
#include <stdio.h>
#include <string.h>

#include "../traces/trace.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvsim trace import FORMAT IN -o OUT [options]\n\n"
               "Convert dataset IN into a native CSV trace OUT (arrival_s,prompt_tokens,\n"
               "output_tokens), written atomically (a temporary file renamed over OUT).\n\n"
               "formats:\n");
    for (size_t i = 0; i < trace_importer_count(); i++)
        fprintf(f, "  %-12s %s\n", trace_importer_at(i)->name, trace_importer_at(i)->doc);
    fprintf(f, "\noptions:\n"
               "  -o, --out FILE         the trace to write (required)\n"
               "  --chars-per-token R    text lengths: ceil(characters / R) tokens (default 4;\n"
               "                         a ShareGPT turn's \"tokens\" or a custom line's\n"
               "                         \"prompt_tokens\" count is used when given)\n"
               "  --turns                sharegpt: one request per turn, the prompt holding\n"
               "                         the conversation so far (default: the first turn)\n"
               "  --rate R               sharegpt, vllm-custom: Poisson arrivals of R req/s\n"
               "                         (default 0: all at time 0, vLLM's default rate)\n"
               "  --seed N               seed of those arrivals (default 0)\n"
               "  --output-len N         vllm-custom: output tokens of a line without\n"
               "                         \"output_tokens\" (default 256, vLLM's)\n"
               "Malformed input stops the import with one line naming the file and record\n"
               "(exit 2); OUT is then left as it was.\n");
}

int cmd_trace_import(int argc, char **argv)
{
    const char *cmd = "trace import", *pos[2] = {NULL, NULL}, *out = NULL;
    int npos = 0;
    trace_import_opts o;
    trace_import_opts_init(&o);
    kvs_err err;
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int missing = 0;
        if (!strcmp(a, "-o")) {
            if (i + 1 >= argc)
                return cli_fail(cmd, "-o: missing value");
            out = argv[++i];
        } else if (cli_take_value(argc, argv, &i, "--out", &v, &missing)) {
            if (missing)
                return cli_fail(cmd, "--out: missing value");
            out = v;
        } else if (!strcmp(a, "--turns")) {
            trace_import_opt_set(&o, "turns", NULL, &err);
        } else if (!strncmp(a, "--", 2)) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(a + 2, "="), a + 2);
            char flag[80];
            snprintf(flag, sizeof flag, "--%s", name);
            if (!cli_take_value(argc, argv, &i, flag, &v, &missing) || missing)
                return cli_fail(cmd, "%s: %s (try kvsim trace import --help)", a,
                                missing ? "missing value" : "unknown flag");
            if (trace_import_opt_set(&o, name, v, &err))
                return cli_fail(cmd, "%s", err.msg);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return cli_fail(cmd, "unexpected argument '%s' (try kvsim trace import --help)", a);
        }
    }
    if (npos < 2)
        return cli_fail(cmd, "give FORMAT and IN (try kvsim trace import --help)");
    if (!out)
        return cli_fail(cmd, "-o OUT: required (the trace to write)");
    trace_import_info info;
    if (trace_import(pos[0], pos[1], out, &o, &info, &err))
        return cli_fail(cmd, "%s", err.msg);
    fprintf(stderr, "kvsim trace import: %s: %lld records, %lld requests written to %s", pos[1],
            (long long)info.records, (long long)info.requests, out);
    if (info.skipped)
        fprintf(stderr, "; skipped %lld %s", (long long)info.skipped, info.skipped_why);
    fprintf(stderr, "\n");
    return CLI_EXIT_OK;
}
