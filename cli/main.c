/* main.c — the kvsim binary: dispatches to a subcommand. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "comm.h"
#include "../kernels/kernels.h"

typedef struct cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} cli_command;

static const cli_command commands[] = {
    {"run", cmd_run, "simulate a trace on one serving engine and store the run"},
    {"compare", cmd_compare, "run several policies on the same trace, side by side"},
    {"sweep", cmd_sweep, "run a grid of run flags (in parallel, or under mpirun), one run each"},
    {"capacity", cmd_capacity, "KV memory arithmetic: bytes per token, blocks, max batch"},
    {"models", cmd_models, "list the built-in models"},
    {"gpus", cmd_gpus, "list the built-in GPUs"},
    {"trace", cmd_trace, "generate a synthetic trace or print a trace's statistics"},
    {"calibrate", cmd_calibrate, "time the real kernels and fit a cost profile"},
    {"validate", cmd_validate, "replay a stored run on the real kernels and measure the error"},
    {"query", cmd_query, "run SQL over a results database"},
    {"store", cmd_store, "import spooled runs (recover) and list run groups with their status"},
    {"cost", cmd_cost, "show the roofline cost model's constants and where each came from"},
    {"show", cmd_show, "reprint a stored run's summary"},
    {"export", cmd_export, "write a stored run as a Perfetto (Chrome trace-event) timeline"},
    {"diff-bench", cmd_diff_bench, "compare a simulated result with a measured vllm bench serve one"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: kvsim <command> [options]   (kvsim <command> --help for its options)\n\n"
               "kvsim %s: trace-driven simulator of LLM inference serving.\n\ncommands:\n",
            KVSIM_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nWith no command, `kvsim run` runs on its defaults.\n");
}

int main(int argc, char **argv)
{
    /* A file-size limit (ulimit -f) then fails the write with EFBIG, which is
     * reported like a full disk, instead of killing kvsim mid-write. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        char *def[] = {"run", NULL};
        return cmd_run(1, def);
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("kvsim %s\n", KVSIM_VERSION);
        printf("kernel backends: %s\n", kernels_backend_names());
        printf("MPI sweeps: %s\n", comm_built() ? "yes (libkvsim_mpi.so, loaded under mpirun)"
                                                : "no (built without MPI)");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "kvsim: unknown command '%s' (try kvsim --help)\n", argv[1]);
    return CLI_EXIT_ERR;
}
