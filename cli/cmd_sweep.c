/* cmd_sweep.c — `kvsim sweep`: run every point of a grid of run flags and
 * store each as a run tagged with one sweep_id, in this process (-j 1) or in
 * forked worker processes (-j N), each writing its own runs (SQLite in WAL
 * mode serializes the writers; the store retries a busy database).  Under
 * mpirun the work goes to sweep_mpi.c instead.
 *
 * Interrupts (cli_stop.c): SIGINT or SIGTERM stops handing out points and
 * waits for the running ones to be stored (a second signal kills the
 * workers, or in-process ends the process: open transactions are rolled
 * back); the sweep is then marked interrupted and the command says how to
 * resume, exit 130.  A
 * worker ignores SIGINT (the parent decides) and exits when its command
 * pipe closes, so killing the parent ends the workers after their point.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/fdio.h"
#include "cli.h"
#include "sweep.h"


static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvsim sweep --grid FLAG=V1,V2,... [--grid ...] [--grid-file FILE]\n"
            "                   [-j N] [run flags...]\n"
            "       kvsim sweep --resume SWEEP_ID [--db FILE] [-j N]\n\n"
            "Run every combination (cartesian product) of the given flag values on top of\n"
            "the base run flags, store each point as a run tagged with one sweep_id, and\n"
            "print a table.  Points are numbered in order: the first axis varies slowest.\n\n"
            "  --grid FLAG=V1,V2,...   vary a kvsim run flag (without dashes) over values;\n"
            "                          separate values with '|' when they hold commas.\n"
            "                          FLAG may also be `rate` (the rate= of --synthetic),\n"
            "                          `synthetic.KEY` (any key of the spec) or\n"
            "                          `priority-preemption` (values on,off)\n"
            "  --grid-file FILE        axes from a file: one FLAG=V1,V2,... per line, '#'\n"
            "                          comments; errors name FILE:LINE\n"
            "  -j N, --jobs N          simulate N points at a time in worker processes\n"
            "                          (default 1: in this process)\n"
            "  --resume ID             finish sweep ID: run its points that have no run yet,\n"
            "                          with the grid and flags stored in the database\n"
            "  --progress              draw a progress bar with ETA on stderr (default: when\n"
            "  --no-progress           stderr is a terminal and not --quiet)\n"
            "  --quiet                 print only the sweep id\n"
            "  --help                  this text\n\n"
            "Under `mpirun -np N kvsim sweep ...` the ranks simulate the points round-robin\n"
            "and rank 0 alone writes the database (-j is ignored there). The MPI calls\n"
            "are the module libkvsim_mpi.so, opened only then ($KVSIM_MPI_MODULE names\n"
            "another; `kvsim --version` says whether this build has it).\n"
            "Ctrl-C (or SIGTERM) stops handing out points, waits for the running ones and\n"
            "says how to resume; a second one kills the running points (their runs are not\n"
            "stored).  Every stored point stays; --resume runs the others.\n"
            "Rows: SELECT * FROM sweep_runs WHERE sweep_id = ID (docs/exploration.md).\n\n"
            "base run flags (as kvsim run; not --json):\n%s",
            job_param_help());
}

/* ------------------------------------------------------ in this process */

static int run_inline(const char *cmd, const sweep_plan *p, store *st, sweep_progress *pr)
{
    for (int64_t k = 0; k < p->n_todo && !cli_stop_requested(); k++) {
        int64_t run_id = 0;
        pr->running = 1;
        sweep_progress_draw(pr);
        if (sweep_point_exec(cmd, p, st, p->todo[k], &run_id))
            pr->failed++;
        else
            pr->done++;
        pr->running = 0;
    }
    sweep_progress_end(pr);
    return cli_stop_requested() > 0;
}

/* ------------------------------------------------------ worker processes */

typedef struct worker_msg {
    int64_t point;   /* point index */
    int64_t run_id;  /* stored run, 0 if none */
    int32_t rc;      /* 0 stored and finished */
    int32_t pad;
} worker_msg;        /* 24 bytes: one atomic pipe write */

typedef struct worker {
    pid_t pid;       /* 0 once reaped */
    int cmd_fd;      /* write end of its command pipe, -1 once closed */
    int64_t point;   /* point in flight, -1 when idle */
} worker;

/* The worker: open its own connection, run the points it is sent, report
 * each on the result pipe; exit when the command pipe closes. */
static void worker_main(const char *cmd, const sweep_plan *p, int cmd_fd, int res_fd)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
    store *st = NULL;
    int code = 0;
    if (cli_open_db(cmd, p->base.db, &st))
        code = CLI_EXIT_ERR;
    int64_t point;
    while (fdio_read_full(cmd_fd, &point, sizeof point) == 0) {
        worker_msg m = {point, 0, CLI_EXIT_ERR, 0};
        if (st)
            m.rc = sweep_point_exec(cmd, p, st, point, &m.run_id);
        if (fdio_write_full(res_fd, &m, sizeof m))
            break;
    }
    store_close(st);
    fflush(stdout);
    fflush(stderr);
    _exit(code);
}

/* Hand the next point to worker w, or close its pipe when there is none or
 * the sweep is stopping. */
static void dispatch(worker *w, const sweep_plan *p, int64_t *next)
{
    if (!cli_stop_requested() && *next < p->n_todo && w->cmd_fd >= 0) {
        int64_t point = p->todo[*next];
        if (fdio_write_full(w->cmd_fd, &point, sizeof point) == 0) {
            w->point = point;
            ++*next;
            return;
        }
    }
    if (w->cmd_fd >= 0)
        close(w->cmd_fd);
    w->cmd_fd = -1;
    w->point = -1;
}

static int handle_msg(const worker_msg *m, worker *ws, int nw, const sweep_plan *p,
                      int64_t *next, sweep_progress *pr)
{
    for (int i = 0; i < nw; i++) {
        if (ws[i].point != m->point || ws[i].pid == 0)
            continue;
        if (m->rc == 0)
            pr->done++;
        else
            pr->failed++;
        pr->running--;
        dispatch(&ws[i], p, next);
        if (ws[i].point >= 0)
            pr->running++;
        return 0;
    }
    return -1;
}

/* Non-blocking drain of the result pipe. */
static void drain(int res_fd, worker *ws, int nw, const sweep_plan *p, int64_t *next,
                  sweep_progress *pr)
{
    struct pollfd pf = {res_fd, POLLIN, 0};
    worker_msg m;
    while (poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN) && fdio_read_full(res_fd, &m, sizeof m) == 0)
        handle_msg(&m, ws, nw, p, next, pr);
}

/* Fork nw workers, each with its command pipe, all writing results to
 * res_fd's pipe, and hand each its first point.  A failed pipe or fork is
 * printed and stops the spawning (the workers already running go on). */
static void spawn_workers(const char *cmd, const sweep_plan *p, worker *ws, int nw,
                          const int res_pipe[2], int64_t *next, sweep_progress *pr)
{
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < nw; i++) {
        int cp[2];
        ws[i].cmd_fd = -1;
        ws[i].point = -1;
        if (pipe(cp)) {
            cli_fail(cmd, "pipe: %s", strerror(errno));
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            cli_fail(cmd, "fork: %s", strerror(errno));
            close(cp[0]);
            close(cp[1]);
            break;
        }
        if (pid == 0) {
            /* drop every other worker's pipe so that each sees EOF when
             * the parent (alone) closes its end */
            for (int j = 0; j < i; j++)
                if (ws[j].cmd_fd >= 0)
                    close(ws[j].cmd_fd);
            close(cp[1]);
            close(res_pipe[0]);
            worker_main(cmd, p, cp[0], res_pipe[1]);
        }
        close(cp[0]);
        ws[i].pid = pid;
        ws[i].cmd_fd = cp[1];
        dispatch(&ws[i], p, next);
        if (ws[i].point >= 0)
            pr->running++;
    }
}

/* An interrupt: the first closes the idle workers' pipes (they exit; the
 * running points finish), the second kills every worker.  *warned and
 * *killed remember which was done. */
static void on_stop(const char *cmd, worker *ws, int nw, sweep_progress *pr, int *warned,
                    int *killed)
{
    if (cli_stop_requested() && !*warned) {
        *warned = 1;
        if (pr->on)
            fputc('\n', stderr);
        if (isatty(STDERR_FILENO)) /* for the person at the terminal only */
            fprintf(stderr, "kvsim %s: stopping: waiting for %d running points "
                            "(interrupt again to kill them)\n",
                    cmd, pr->running);
        for (int i = 0; i < nw; i++)
            if (ws[i].point < 0 && ws[i].cmd_fd >= 0) {
                close(ws[i].cmd_fd);
                ws[i].cmd_fd = -1;
            }
    }
    if (cli_stop_requested() > 1 && !*killed) {
        *killed = 1;
        for (int i = 0; i < nw; i++)
            if (ws[i].pid > 0)
                kill(ws[i].pid, SIGKILL);
    }
}

/* Reap the workers that exited; one that died with a point in flight
 * loses that point (its transaction, if any, was rolled back).  Returns
 * how many were reaped. */
static int reap_workers(const char *cmd, int res_fd, worker *ws, int nw, const sweep_plan *p,
                        int64_t *next, sweep_progress *pr, int killed)
{
    int status, reaped = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        drain(res_fd, ws, nw, p, next, pr);
        for (int i = 0; i < nw; i++) {
            if (ws[i].pid != pid)
                continue;
            ws[i].pid = 0;
            reaped++;
            if (ws[i].cmd_fd >= 0)
                close(ws[i].cmd_fd);
            ws[i].cmd_fd = -1;
            if (ws[i].point >= 0) {
                if (!killed)
                    cli_fail(cmd, "worker %d died running point %lld", (int)pid,
                             (long long)ws[i].point);
                pr->failed++;
                pr->running--;
                ws[i].point = -1;
            }
        }
    }
    return reaped;
}

static int run_forked(const char *cmd, const sweep_plan *p, int jobs, sweep_progress *pr)
{
    int nw = jobs < p->n_todo ? jobs : (int)p->n_todo;
    worker *ws = calloc((size_t)(nw > 0 ? nw : 1), sizeof *ws);
    int res_pipe[2];
    int64_t next = 0;
    int killed = 0, warned = 0;
    if (!ws)
        return cli_fail(cmd, "out of memory"), 1;
    if (pipe(res_pipe)) {
        free(ws);
        return cli_fail(cmd, "pipe: %s", strerror(errno)), 1;
    }
    spawn_workers(cmd, p, ws, nw, res_pipe, &next, pr);
    close(res_pipe[1]);
    int alive = 0;
    for (int i = 0; i < nw; i++)
        alive += ws[i].pid > 0;
    while (alive > 0) {
        sweep_progress_draw(pr);
        on_stop(cmd, ws, nw, pr, &warned, &killed);
        struct pollfd pf = {res_pipe[0], POLLIN, 0};
        int pr_rc = poll(&pf, 1, 250);
        if (pr_rc > 0 && (pf.revents & POLLIN)) {
            worker_msg m;
            if (fdio_read_full(res_pipe[0], &m, sizeof m) == 0)
                handle_msg(&m, ws, nw, p, &next, pr);
        }
        alive -= reap_workers(cmd, res_pipe[0], ws, nw, p, &next, pr, killed);
    }
    close(res_pipe[0]);
    sweep_progress_end(pr);
    free(ws);
    return cli_stop_requested() > 0 || next < p->n_todo;
}

int cmd_sweep(int argc, char **argv)
{
    const char *cmd = "sweep";
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (sweep_mpi_active())
        return sweep_mpi_main(cmd, argc, argv);
    sweep_cli cli;
    sweep_plan p;
    store *st = NULL;
    int rc = sweep_setup(cmd, argc, argv, &cli, &p, &st);
    if (rc)
        return rc;
    int show = cli.progress == 1 || (cli.progress < 0 && !cli.quiet && isatty(STDERR_FILENO));
    sweep_progress pr;
    sweep_progress_init(&pr, show, p.n_todo);
    int interrupted;
    signal(SIGPIPE, SIG_IGN);
    if (cli.jobs <= 1 || p.n_todo <= 1) {
        cli_stop_install(0); /* a second signal ends the process */
        interrupted = run_inline(cmd, &p, st, &pr);
    } else {
        cli_stop_install(1); /* a second signal kills the workers */
        store_close(st); /* a connection is never carried across fork() */
        st = NULL;
        interrupted = run_forked(cmd, &p, cli.jobs, &pr);
        kvs_err err;
        if (store_open(cli.db, &st, &err)) {
            sweep_plan_free(&p);
            return cli_fail(cmd, "--db: %s", err.msg);
        }
    }
    cli_stop_restore();
    rc = sweep_finish(cmd, &cli, &p, st, interrupted);
    store_close(st);
    sweep_plan_free(&p);
    return rc;
}
