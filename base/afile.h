/* afile.h — writing an output file atomically: the bytes go to a hidden
 * temporary file in the same directory (".NAME.XXXXXX"), which
 * afile_commit flushes, fsyncs and renames over NAME (then fsyncs the
 * directory), so a reader, or a process killed at any moment, sees either
 * the old file (or none) or the whole new one, never a truncated one.
 * afile_abort removes the temporary file.  The new file gets the usual
 * permissions (0666 less the umask), not mkstemp's 0600.
 */
#ifndef AFILE_H
#define AFILE_H

#include <stdio.h>

#include "kvs.h"

typedef struct afile {
    FILE *f;      /* write here; NULL when closed */
    char *path;   /* final path, owned */
    char *tmp;    /* temporary path, owned */
} afile;

/* Create the temporary file for `path`.  KVS_EIO "PATH: reason" on
 * failure.  Cost: one mkstemp. */
int afile_open(afile *a, const char *path, kvs_err *err);
/* Flush, fsync, close and rename into place; on failure the temporary
 * file is removed and `path` is untouched.  KVS_EIO "PATH: reason". */
int afile_commit(afile *a, kvs_err *err);
/* Close and remove the temporary file (no-op when already closed). */
void afile_abort(afile *a);

#endif
