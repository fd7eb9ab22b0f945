/* cmd_cost.c — `kvsim cost show`: the roofline's effective constants, each
 * with its unit, where its value came from (default, --cost, a constants
 * file and line) and the public source of its default. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cost/cost.h"
#include "../job/job.h"
#include "cli.h"

#define CMD "cost"
#define DEFAULT_ENGINE "vllm-v1" /* kvsim run's default profile (job_opts_init) */

static void usage(FILE *f)
{
    fprintf(f, "usage: kvsim cost show [--engine NAME] [--cost roofline[:KEY=VALUE,...]]\n\n"
               "Print the roofline cost model's constants as a run would use them: value,\n"
               "unit, where the value came from (default, the engine profile, --cost, or\n"
               "FILE:LINE of a constants file given as file=PATH) and the source of the\n"
               "default.  A profile's constants come first, --cost's win over them.\n"
               "Keys:");
    for (size_t i = 0, col = 5; i < cost_roofline_const_count(); i++) {
        const char *n = cost_roofline_const_at(i)->name;
        if (col + 1 + strlen(n) > 78) {
            fprintf(f, "\n     ");
            col = 5;
        }
        col += (size_t)fprintf(f, " %s", n);
    }
    fprintf(f, "\n(times also as _ms or _us).  docs/cost-models.md explains each one.\n\n"
               "options:\n"
               "  --engine NAME the engine profile whose constants a run starts from\n"
               "                (");
    for (size_t i = 0; i < job_engine_count(); i++)
        fprintf(f, "%s%s", i ? ", " : "", job_engine_at(i)->name);
    fprintf(f, "; default %s)\n"
               "  --cost SPEC   roofline, or roofline:KEY=VALUE,... (default roofline)\n"
               "  -h, --help    print this help\n", DEFAULT_ENGINE);
}

int cmd_cost(int argc, char **argv)
{
    if (cli_wants_help(argc, argv) || argc < 2) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_ERR : CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "show"))
        return cli_fail(CMD, "unknown subcommand '%s' (kvsim cost show)", argv[1]);
    const char *spec = "roofline", *engine = DEFAULT_ENGINE;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--cost") && i + 1 < argc)
            spec = argv[++i];
        else if (!strncmp(argv[i], "--cost=", 7))
            spec = argv[i] + 7;
        else if (!strcmp(argv[i], "--engine") && i + 1 < argc)
            engine = argv[++i];
        else if (!strncmp(argv[i], "--engine=", 9))
            engine = argv[i] + 9;
        else if (!strcmp(argv[i], "--engine") || !strcmp(argv[i], "--cost"))
            return cli_fail(CMD, "%s: missing value", argv[i]);
        else
            return cli_fail(CMD, "unknown argument '%s' (see kvsim cost --help)", argv[i]);
    }
    cost_roofline_consts k;
    cost_const_origin *origin = malloc(COST_MAX_CONSTS * sizeof *origin);
    if (!origin)
        return cli_fail(CMD, "out of memory");
    kvs_err err;
    if (job_cost_constants(engine, spec, &k, origin, &err) != KVS_OK) {
        free(origin);
        return cli_fail(CMD, "%s", err.msg);
    }
    char text[8192];
    cost_roofline_consts_show(&k, origin, text, sizeof text);
    printf("%-21s %-10s %-9s %-22s %s\n%s", "constant", "value", "unit", "from", "source of the default",
           text);
    free(origin);
    return CLI_EXIT_OK;
}
