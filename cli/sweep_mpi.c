/* sweep_mpi.c — `kvsim sweep` over MPI ranks (mpirun -np N kvsim sweep ...).
 *
 * Rank 0 parses the command line and creates (or resumes) the sweep exactly
 * as the single-machine driver does, then broadcasts the stored base flags,
 * the grid text, the sweep id and the points still to run.  Point k of that
 * list is simulated by rank k % N (static round-robin); ranks other than 0
 * pack each result (run_pack.h) and send it to rank 0, which alone writes
 * the database, in list order: the runs get the same ids and rows as a
 * single process running the list.  Messages of one sender on one tag are
 * not overtaken in MPI, so rank 0 simply receives point k from rank k % N.
 *
 * Interrupts (cli_stop.c) are agreed on once per round of N points: every
 * rank counts SIGINT/SIGTERM in its handler, and before each round an
 * MPI_Allreduce of the flags tells all ranks at once whether any was asked
 * to stop (a launcher may signal only some).  Then no rank starts another
 * point, rank 0 stores what it has received, marks the sweep interrupted
 * and exits CLI_EXIT_INTERRUPTED; --resume finishes it.  A kill (SIGKILL)
 * leaves every stored point intact too (each run is one transaction).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "comm.h"
#include "sweep.h"

/* Ranks in the job from the launcher's environment (Open MPI, MPICH/Hydra,
 * PMIx); 1 when not under a launcher. */
static int launcher_size(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return 1;
}

int sweep_mpi_active(void) { return launcher_size() > 1; }

#define TAG_RUN 1

static const comm_vt *mpi; /* comm_load's table, once sweep_mpi_main has it */

/* Broadcast a string from rank 0 (*s malloc'd on the other ranks). */
static int bcast_str(char **s, int rank)
{
    int64_t len = rank == 0 ? (int64_t)strlen(*s) + 1 : 0;
    mpi->bcast(&len, sizeof len, 0);
    if (rank != 0 && !(*s = malloc((size_t)len)))
        return -1;
    mpi->bcast(*s, (size_t)len, 0);
    return 0;
}

/* Rank 0: the result of point list[k] from rank `src`. */
static void recv_point(int src, int64_t point, run_packed *r)
{
    unsigned char *buf = NULL;
    size_t count = 0;
    kvs_err err;
    if (mpi->recv(src, TAG_RUN, &buf, &count)) {
        fprintf(stderr, "kvsim sweep: out of memory receiving point %lld\n", (long long)point);
        mpi->abort(CLI_EXIT_ERR);
    }
    int bad = run_unpack(buf, count, r, &err);
    if (bad || r->point_index != point) {
        if (!bad)
            run_packed_free(r);
        memset(r, 0, sizeof *r);
        r->point_index = point;
        r->status = 2;
        snprintf(r->error, sizeof r->error, "rank %d sent a bad result: %s", src,
                 bad ? err.msg : "wrong point");
    }
    free(buf);
}

/* Other ranks: send a simulated point to rank 0. */
static void send_point(const run_packed *r)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    kvs_err err;
    run_packed fail;
    if (run_pack(r, &buf, &len, &err) || len > INT_MAX) {
        memset(&fail, 0, sizeof fail);
        fail.point_index = r->point_index;
        fail.status = 2;
        snprintf(fail.error, sizeof fail.error, "%s",
                 buf ? "result larger than one MPI message (2 GiB)" : err.msg);
        free(buf);
        buf = NULL;
        if (run_pack(&fail, &buf, &len, &err)) {
            fprintf(stderr, "kvsim sweep: %s\n", err.msg);
            mpi->abort(CLI_EXIT_ERR);
        }
    }
    mpi->send(buf, len, 0, TAG_RUN);
    free(buf);
}

/* Rank 0 sets the sweep up (sweep_setup: flags, store, the points to do)
 * and broadcasts it; every other rank rebuilds the same plan from its
 * texts.  0, or the exit status every rank returns (rank 0 printed why). */
static int share_plan(const char *cmd, int argc, char **argv, int rank, sweep_cli *cli,
                      sweep_plan *p, store **st)
{
    int64_t hdr[3] = {0, 0, 0}; /* ok, sweep_id, n_todo */
    if (rank == 0) {
        int rc = sweep_setup(cmd, argc, argv, cli, p, st);
        hdr[0] = rc == 0;
        hdr[1] = p->sweep_id;
        hdr[2] = p->n_todo;
        mpi->bcast(hdr, sizeof hdr, 0);
        if (rc)
            return rc;
    } else {
        mpi->bcast(hdr, sizeof hdr, 0);
        if (!hdr[0])
            return CLI_EXIT_ERR;
    }
    char *base_args = rank == 0 ? p->base_args : NULL;
    char *grid_text = rank == 0 ? p->grid_text : NULL;
    if (bcast_str(&base_args, rank) || bcast_str(&grid_text, rank)) {
        fprintf(stderr, "kvsim sweep: rank %d: out of memory\n", rank);
        mpi->abort(CLI_EXIT_ERR);
    }
    if (rank != 0) {
        char where[64];
        snprintf(where, sizeof where, "sweep %lld", (long long)hdr[1]);
        if (sweep_plan_from_texts(cmd, base_args, grid_text, where, p) ||
            !(p->todo = malloc((size_t)(hdr[2] > 0 ? hdr[2] : 1) * sizeof *p->todo))) {
            fprintf(stderr, "kvsim sweep: rank %d could not rebuild the sweep\n", rank);
            mpi->abort(CLI_EXIT_ERR);
        }
        free(base_args);
        free(grid_text);
        p->sweep_id = hdr[1];
        p->n_todo = hdr[2];
    }
    if (p->n_todo > 0) {
        if ((uint64_t)p->n_todo > INT_MAX / sizeof *p->todo) {
            if (rank == 0)
                fprintf(stderr, "kvsim sweep: %lld points are more than one MPI message holds\n",
                        (long long)p->n_todo);
            return CLI_EXIT_ERR; /* every rank knows n_todo: all return */
        }
        mpi->bcast(p->todo, (size_t)p->n_todo * sizeof *p->todo, 0);
    }
    return 0;
}

/* The points round-robin over the ranks: each simulates its own, rank 0
 * receives the others' results and stores every point in order.  Rounds
 * stop when any rank was interrupted; returns 1 then. */
static int run_points(const char *cmd, const sweep_plan *p, int rank, int size, store *st,
                      store *cost_st, sweep_progress *pr)
{
    int interrupted = 0;
    for (int64_t k = 0; k < p->n_todo; k++) {
        int owner = (int)(k % size);
        if (owner == 0) { /* a new round: does any rank want to stop? */
            interrupted = mpi->max_int(cli_stop_requested() > 0);
            if (interrupted)
                break;
        }
        run_packed r;
        if (rank == owner)
            sweep_point_simulate(p, p->todo[k], cost_st, &r);
        if (rank == 0) {
            if (owner != 0)
                recv_point(owner, p->todo[k], &r);
            int64_t run_id = 0;
            if (sweep_point_store(cmd, p, st, &r, &run_id))
                pr->failed++;
            else
                pr->done++;
            sweep_progress_draw(pr);
        } else if (rank == owner) {
            send_point(&r);
        }
        if (rank == owner || rank == 0)
            run_packed_free(&r);
    }
    return interrupted;
}

int sweep_mpi_main(const char *cmd, int argc, char **argv)
{
    char why[512];
    if (!(mpi = comm_load(why, sizeof why)))
        return cli_fail(cmd, "started by mpirun with %d ranks, but %s; run it without mpirun "
                             "or with -np 1", launcher_size(), why);
    int rank = 0, size = 1;
    mpi->init(&rank, &size);

    sweep_cli cli;
    sweep_plan p;
    store *st = NULL;
    memset(&p, 0, sizeof p);
    int rc = share_plan(cmd, argc, argv, rank, &cli, &p, &st);
    if (rc) {
        store_close(st);
        mpi->finalize();
        return rc;
    }
    /* calibrated cost profiles are read from the database on every rank */
    store *cost_st = st;
    if (rank != 0 && !strncmp(p.base.cfg.cost, "calibrated", 10)) {
        kvs_err err;
        if (store_open(p.base.db, &cost_st, &err))
            fprintf(stderr, "kvsim sweep: rank %d: --db: %s\n", rank, err.msg);
    }

    sweep_progress pr;
    sweep_progress_init(&pr, rank == 0 && (cli.progress == 1 || (cli.progress < 0 && !cli.quiet &&
                                                                 isatty(STDERR_FILENO))),
                        p.n_todo);
    cli_stop_install(0);
    int interrupted = run_points(cmd, &p, rank, size, st, cost_st, &pr);
    sweep_progress_end(&pr);
    cli_stop_restore();
    if (rank == 0)
        rc = sweep_finish(cmd, &cli, &p, st, interrupted);
    else if (cost_st)
        store_close(cost_st);
    store_close(st);
    sweep_plan_free(&p);
    mpi->finalize();
    return rc;
}

