/* dynmod.c — dynmod_symbol: dlopen of a module by name, dlsym of its table. */
#include "dynmod.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void *dynmod_symbol(const char *env, const char *built, const char *file, const char *sym,
                    int global, char *why, size_t n)
{
    const char *named = env ? getenv(env) : NULL;
    const int only = named && *named; /* a module named in the environment is the only one tried */
    const char *paths[] = {only ? named : built, file};
    void *h = NULL;
    const char *err = "not found";
    for (size_t i = 0; i < (only ? 1u : 2u) && !h; i++)
        if (paths[i] && paths[i][0] &&
            !(h = dlopen(paths[i], RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL))))
            err = dlerror();
    if (!h) {
        snprintf(why, n, "cannot load the module %s: %s", file, err ? err : "not found");
        return NULL;
    }
    void *p = dlsym(h, sym);
    if (!p)
        snprintf(why, n, "the module %s has no %s (a mismatched build?)", file, sym);
    return p;
}
