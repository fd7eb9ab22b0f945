/* comm.c — comm_load: the MPI module of comm.h, opened on first use. */
#include <stdio.h>
#include <stdlib.h>

#include "comm.h"

#ifdef KVSIM_HAVE_MPI
#include <dlfcn.h>

const comm_vt *comm_load(char *why, size_t n)
{
    static const comm_vt *vt;
    if (vt)
        return vt;
    /* a module named in the environment is the only one tried */
    const char *env = getenv("KVSIM_MPI_MODULE");
    const char *paths[] = {env && *env ? env : KVSIM_MPI_MODULE, "libkvsim_mpi.so"};
    void *h = NULL;
    const char *err = "not found";
    for (size_t i = 0; i < (env && *env ? 1u : 2u) && !h; i++)
        /* global: Open MPI's own plugins, which it opens in turn, look for
         * libmpi's symbols in the global scope */
        if (paths[i] && paths[i][0] && !(h = dlopen(paths[i], RTLD_NOW | RTLD_GLOBAL)))
            err = dlerror();
    if (!h) {
        snprintf(why, n, "cannot load the MPI module libkvsim_mpi.so: %s", err ? err : "not found");
        return NULL;
    }
    if (!(vt = dlsym(h, "kvsim_comm_mpi_vt")))
        snprintf(why, n, "the MPI module has no kvsim_comm_mpi_vt (a mismatched build?)");
    return vt;
}

int comm_built(void) { return 1; }

#else

int comm_built(void) { return 0; }

const comm_vt *comm_load(char *why, size_t n)
{
    snprintf(why, n, "this kvsim was built without MPI (install libopenmpi-dev and rebuild "
                     "with -DKVSIM_MPI=ON)");
    return NULL;
}

#endif
