/* comm.h — the message passing that `kvsim sweep` under mpirun needs, as a
 * table of functions loaded on demand.
 *
 * The MPI driver of a sweep (sweep_mpi.c) broadcasts its plan, sends each
 * rank's packed results to rank 0 and agrees on interrupts.  Those few
 * operations live in a module (libkvsim_mpi.so, cli/comm_mpi.c, linked
 * against libmpi) that comm_load opens only when a sweep was started by a
 * launcher with more than one rank.  So the kvsim binary needs no MPI
 * library at start: every other command (a `run` among them) maps none of
 * libmpi, libopen-rte, libopen-pal, hwloc and libevent, which cost about
 * 2.3 ms of dynamic linking in every process (`perf stat` of an empty
 * program linked with them, 4.6 ms vs 2.3 ms).
 *
 * Every operation is over the job's world communicator; buffers are bytes
 * (every rank runs the same binary on the same kind of host).  A failure
 * inside MPI aborts the job, as MPI's default error handler does.
 */
#ifndef KVSIM_COMM_H
#define KVSIM_COMM_H

#include <stddef.h>
#include <stdint.h>

typedef struct comm_vt {
    /* Start (once per process): this rank and the number of ranks. */
    void (*init)(int *rank, int *size);
    /* Rank root's n bytes at buf reach every rank's buf (n the same on
     * every rank, n <= INT_MAX). */
    void (*bcast)(void *buf, size_t n, int root);
    /* n bytes (n <= INT_MAX) to rank dest under tag. */
    void (*send)(const void *buf, size_t n, int dest, int tag);
    /* The next message from rank src under tag, whatever its length: a
     * malloc'd copy in *buf (the caller frees it) and its length in *n;
     * -1 out of memory (the message is then left unreceived). */
    int (*recv)(int src, int tag, unsigned char **buf, size_t *n);
    /* The largest of every rank's `mine`. */
    int (*max_int)(int mine);
    /* End the whole job with this status (does not return). */
    void (*abort)(int status);
    /* Stop (once per process, after the last operation). */
    void (*finalize)(void);
} comm_vt;

/* The MPI table from its module: $KVSIM_MPI_MODULE when set (and then
 * only it), else the module this build made, else libkvsim_mpi.so on the
 * loader's path.  Loaded once and
 * kept for the process.  NULL with why (one line) when it cannot be. */
const comm_vt *comm_load(char *why, size_t n);

/* 1 if this build made the MPI module (comm_load may then succeed). */
int comm_built(void);

#endif
