/* kvs.h — status codes and error reporting shared by every kvsim module.
 *
 * Library functions return a kvs_status (KVS_OK on success) and, on failure,
 * fill a caller-provided kvs_err with one human-readable line that names the
 * culprit (file and line, flag, or table).  Only main() turns a status into
 * an exit code and prints the message.  `err` may always be NULL.
 */
#ifndef KVS_H
#define KVS_H

#include <stddef.h>
#include <stdint.h>

typedef enum kvs_status {
    KVS_OK = 0,
    KVS_EINVAL = 1,    /* bad input: flag, config, trace contents */
    KVS_EIO = 2,       /* file could not be read or written */
    KVS_ENOMEM = 3,    /* allocation failed */
    KVS_EDB = 4,       /* SQLite error: locked, read-only, full, corrupt */
    KVS_EDEVICE = 5,   /* requested compute device absent or failed */
    KVS_EINTERNAL = 6  /* invariant broken: a kvsim bug */
} kvs_status;

typedef struct kvs_err {
    char msg[1024]; /* one line, no trailing newline */
} kvs_err;

/* Format a message into err (if non-NULL) and return `status`.  Control
 * characters (e.g. a newline echoed from an input file) become '?', so the
 * message is always one line.  Cost: one vsnprintf. */
int kvs_errf(kvs_err *err, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Name of a status, e.g. "invalid input". Never NULL. */
const char *kvs_status_name(int status);

#define KVSIM_VERSION "0.3.0"

#endif
