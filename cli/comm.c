/* comm.c — comm_load: the MPI module of comm.h, opened on first use. */
#include "comm.h"

#include "../base/dynmod.h"

#ifdef KVSIM_HAVE_MPI

const comm_vt *comm_load(char *why, size_t n)
{
    static const comm_vt *vt;
    /* global: Open MPI's own plugins, which it opens in turn, look for
     * libmpi's symbols in the global scope */
    if (!vt)
        vt = dynmod_symbol("KVSIM_MPI_MODULE", KVSIM_MPI_MODULE, "libkvsim_mpi.so",
                           "kvsim_comm_mpi_vt", 1, why, n);
    return vt;
}

int comm_built(void) { return 1; }

#else

#include <stdio.h>

int comm_built(void) { return 0; }

const comm_vt *comm_load(char *why, size_t n)
{
    snprintf(why, n, "this kvsim was built without MPI (install libopenmpi-dev and rebuild "
                     "with -DKVSIM_MPI=ON)");
    return NULL;
}

#endif
