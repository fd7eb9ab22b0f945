/* sweep.h — the pieces of `kvsim sweep` shared by its two drivers: the
 * single-machine one (cmd_sweep.c: in-process or forked worker processes)
 * and the MPI one (sweep_mpi.c: ranks simulate, rank 0 writes).
 *
 * A sweep plan (job.h's job_sweep) is the base run flags, the grid, the
 * sweep's id in the database and the points still to run.  The plan's
 * logic is job/'s; the functions here print its errors and return 0 or
 * CLI_EXIT_ERR.  Both drivers build it with
 * sweep_setup (a new sweep, or --resume ID reading the grid and the base
 * flags back from the `sweeps` row), run each point with the functions
 * below, and end with sweep_finish (table, resume hint, exit status).
 */
#ifndef SWEEP_H
#define SWEEP_H

#include <stdint.h>

#include "../store/store.h"
#include "run_opts.h"

typedef struct sweep_cli {
    int jobs;           /* -j: worker processes (>= 1) */
    int64_t resume_id;  /* --resume: the sweep to finish; 0 = a new sweep */
    int progress;       /* -1 auto (stderr is a terminal), 0 off, 1 on */
    int quiet;          /* --quiet: print only the sweep id */
    char db[1024];      /* --db */
} sweep_cli;

typedef job_sweep sweep_plan; /* job.h */

/* Parse argv (argv[0] = "sweep"), then create the sweep in the database or
 * read back the one to resume; on success *st is the open store and the
 * plan lists the points to run.  Prints errors; returns 0 or CLI_EXIT_ERR. */
int sweep_setup(const char *cmd, int argc, char **argv, sweep_cli *cli, sweep_plan *p,
                store **st);

/* Rebuild a plan's base flags and grid from stored texts (as in the sweeps
 * row), with `where` naming their origin for errors; no database access. */
int sweep_plan_from_texts(const char *cmd, const char *base_args, const char *grid_text,
                          const char *where, sweep_plan *p);
void sweep_plan_free(sweep_plan *p);

/* The run flags of point `index`: the base, the point's values, the sweep
 * id and (without --label) a label "sweep ID #INDEX: KEY".  Prints errors
 * naming the axis's origin; returns 0 or CLI_EXIT_ERR. */
int sweep_point_opts(const char *cmd, const sweep_plan *p, int64_t index, run_opts *o);

/* Simulate point `index` and store it in st, tagged as the point
 * (store_sweep_tag).  Prints errors; returns 0 or CLI_EXIT_ERR (a run that
 * failed after it started is stored as failed and also returns
 * CLI_EXIT_ERR). */
int sweep_point_exec(const char *cmd, const sweep_plan *p, store *st, int64_t index,
                     int64_t *run_id);

/* job_sweep_simulate, printing the details of a status-2 point (a bad
 * point or a failed prepare) as "kvsim sweep: ...". */
void sweep_point_simulate(const sweep_plan *p, int64_t index, store *cost_st, run_packed *out);

/* Store a simulated point (rank 0 of MPI): the run, or a failed run, tagged
 * as its point.  Prints errors; returns 0, or CLI_EXIT_ERR when the point
 * failed or could not be written. */
int sweep_point_store(const char *cmd, const sweep_plan *p, store *st, const run_packed *r,
                      int64_t *run_id);

/* Progress line on stderr ("\r[####....] 12/48 ... ETA"), drawn only when
 * enabled. */
typedef struct sweep_progress {
    int on;              /* draw at all */
    int64_t total;       /* points to run in this invocation */
    int64_t done;        /* finished (stored) */
    int64_t failed;      /* failed */
    int running;         /* points in flight */
    double t0;           /* start, seconds (monotonic) */
} sweep_progress;
void sweep_progress_init(sweep_progress *pr, int enable, int64_t total);
void sweep_progress_draw(sweep_progress *pr);
void sweep_progress_end(sweep_progress *pr);

/* Print the sweep's table (or its id with --quiet) and say what is left:
 * failed points, or that the sweep was interrupted and how to resume it.
 * Returns the exit status: 0 when every point has a finished run, 130
 * (CLI_EXIT_INTERRUPTED) when interrupted, else 2. */
int sweep_finish(const char *cmd, const sweep_cli *cli, const sweep_plan *p, store *st,
                 int interrupted);

/* MPI (sweep_mpi.c): 1 when this process was started by mpirun with more
 * than one rank (from the launcher's environment).  sweep_mpi_main runs the
 * whole sweep over the ranks; without MPI support in the build it fails
 * with a message. */
int sweep_mpi_active(void);
int sweep_mpi_main(const char *cmd, int argc, char **argv);

#endif
