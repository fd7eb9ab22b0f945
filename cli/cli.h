/* cli.h — the command-line layer: subcommand entry points and the small
 * helpers they share for parsing flag values and reporting errors.  Only this
 * layer prints for humans and chooses exit codes: 0 on success, 2 on any
 * error (bad flag, bad input file, database or device failure), with one
 * line "kvsim <cmd>: <what>" on stderr.
 */
#ifndef CLI_H
#define CLI_H

#include <stdint.h>
#include <stdio.h>

#include "../base/kvs.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_ERR 2
#define CLI_EXIT_INTERRUPTED 130 /* stopped by SIGINT/SIGTERM (128 + SIGINT) */

/* SIGINT / SIGTERM (cli_stop.c).  cli_stop_install sets a handler that only
 * counts the signals; commands poll cli_stop_requested() (the count)
 * between runs.  counting = 0: one-shot, a second signal takes the default
 * action (ends the process); counting = 1: every signal is counted (the
 * forked sweep kills its workers on the second).  cli_stop_restore puts
 * the default actions back. */
void cli_stop_install(int counting);
void cli_stop_restore(void);
int cli_stop_requested(void);

/* Subcommands: argv[0] is the subcommand name. */
int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_capacity(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_gpus(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_trace_import(int argc, char **argv); /* cmd_trace_import.c */
int cmd_calibrate(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_cost(int argc, char **argv);
int cmd_store(int argc, char **argv);
int cmd_diff_bench(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_export(int argc, char **argv);

/* Print "kvsim <cmd>: <msg>\n" to stderr and return CLI_EXIT_ERR. */
int cli_fail(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Strict number parsing of a flag's value: the whole string must be a number
 * within [lo, hi].  On error prints "kvsim <cmd>: --flag: ..." and returns
 * CLI_EXIT_ERR; 0 on success. */
int cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo,
                  int64_t hi, int64_t *out);
int cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out);
int cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo,
                  double hi, double *out);

/* If argv[*i] is `flag` ("--f V" or "--f=V"), set *val to its value (or
 * set *missing when the value is absent) and return 1, advancing *i past a
 * separate value; else return 0. */
int cli_take_value(int argc, char **argv, int *i, const char *flag, const char **val,
                   int *missing);

/* The arguments args[0..n) that make a group what it is, for --resume to
 * compare with the stored ones: all but --db FILE, --quiet, --json and
 * --progress/--no-progress, joined with a newline after each (malloc'd;
 * NULL when out of memory).  cli_identity_args_skip: 1 for a lone argument
 * left out. */
char *cli_identity_args(int n, char **args);
int cli_identity_args_skip(const char *arg);

/* A command's own flag, each with a value, and where its value goes. */
typedef struct cli_own_flag {
    const char *flag;  /* e.g. "--slo" */
    const char **dst;  /* receives the value */
} cli_own_flag;

/* Split argv: the flags of own[n_own] (by cli_take_value) into their dst,
 * argv[0] and everything else in order into rest[*nrest] (room for argc).
 * Prints "FLAG: missing value" and returns the exit status when a flag
 * lacks its value; 0 on success.  Cost: O(argc x n_own). */
int cli_split_own_flags(const char *cmd, int argc, char **argv, const cli_own_flag *own,
                        int n_own, char **rest, int *nrest);

/* Open --db for writing runs (store_open_writable): refuses a database
 * without a file (":memory:", "" — its runs would be gone at exit) and
 * installs a wait hook that prints "kvsim CMD: --db PATH: waiting for the
 * database (locked N s of at most M s)" on stderr while a write waits on a
 * locked database.  Prints its error; CLI_EXIT_ERR or 0. */
typedef struct store store;
int cli_open_db(const char *cmd, const char *path, store **st);
/* cli_open_db for one run (kvsim run): a database that does not exist yet
 * is built privately and appears whole once the run is in it
 * (store_open_new). */
int cli_open_db_run(const char *cmd, const char *path, store **st);

/* A command that reads runs already stored: "--db PATH: no such database"
 * (printed, CLI_EXIT_ERR) when the file is not there, so that no empty
 * database is created by asking; 0 if it is. */
int cli_require_db(const char *cmd, const char *path);

/* True if argv holds -h or --help (before any "--"). */
int cli_wants_help(int argc, char **argv);

#define CLI_MAX_TPS 16 /* degrees a --tp-list may give */

/* Parse --tp-list "1,2,4": ascending degrees in [1, 1024], at most
 * CLI_MAX_TPS, into tps[*n].  Errors are printed (cli_fail) and return the
 * exit status; 0 on success. */
int cli_parse_tp_list(const char *cmd, const char *arg, double *tps, int *n);
/* The same for any flag of TP degrees (named in the errors). */
int cli_parse_degrees(const char *cmd, const char *flag, const char *arg, double *tps, int *n);

#endif
