/* comm_mpi.c — comm.h's table over MPI: the module libkvsim_mpi.so, the
 * only part of kvsim linked against libmpi.  Built apart from the kvsim
 * binary (CMakeLists.txt) and opened by comm_load when a sweep runs under
 * mpirun.  It calls nothing of kvsim. */
#include <limits.h>
#include <stdlib.h>

#include <mpi.h>

#include "comm.h"

static void mpi_init(int *rank, int *size)
{
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
}

static void mpi_bcast(void *buf, size_t n, int root)
{
    if (n > INT_MAX)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
}

static void mpi_send(const void *buf, size_t n, int dest, int tag)
{
    if (n > INT_MAX)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Send(buf, (int)n, MPI_BYTE, dest, tag, MPI_COMM_WORLD);
}

static int mpi_recv(int src, int tag, unsigned char **buf, size_t *n)
{
    MPI_Status status;
    int count = 0;
    MPI_Probe(src, tag, MPI_COMM_WORLD, &status);
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count < 0)
        count = 0;
    if (!(*buf = malloc(count > 0 ? (size_t)count : 1)))
        return -1;
    MPI_Recv(*buf, count, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    *n = (size_t)count;
    return 0;
}

static int mpi_max_int(int mine)
{
    int all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

static void mpi_abort(int status)
{
    MPI_Abort(MPI_COMM_WORLD, status);
    abort(); /* MPI_Abort does not return; if it did, neither may we */
}

static void mpi_finalize(void) { MPI_Finalize(); }

/* The symbol comm_load looks up. */
const comm_vt kvsim_comm_mpi_vt = {
    .init = mpi_init,
    .bcast = mpi_bcast,
    .send = mpi_send,
    .recv = mpi_recv,
    .max_int = mpi_max_int,
    .abort = mpi_abort,
    .finalize = mpi_finalize,
};
