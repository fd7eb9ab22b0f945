/* dynmod.h — kvsim's optional parts built as modules and opened on first
 * use.
 *
 * The CUDA backend (libkvsim_cuda.so: libcudart, libcublas) and the MPI
 * driver of `kvsim sweep` (libkvsim_mpi.so: libmpi) are shared objects
 * that only the commands needing them open, so every other process starts
 * without mapping those libraries.  A module is looked for, in order, at
 * the path named by its environment variable (when that is set, only
 * there), at the path this build wrote it to, and under its file name on
 * the loader's path.  Opened modules stay loaded for the process.
 */
#ifndef KVSIM_DYNMOD_H
#define KVSIM_DYNMOD_H

#include <stddef.h>

/* The symbol `sym` of module `file` (e.g. "libkvsim_mpi.so"), found as
 * above through $env and the built path (NULL or "": none); flags add
 * RTLD_GLOBAL when `global` (a module whose libraries open plugins that
 * look for its symbols: Open MPI).  NULL with one line in why (at most n
 * bytes) when it cannot be opened or lacks the symbol.  Not thread-safe:
 * callers open their module once. */
void *dynmod_symbol(const char *env, const char *built, const char *file, const char *sym,
                    int global, char *why, size_t n);

#endif
