#include "kvs.h"

#include "str.h"

#include <stdarg.h>
#include <stdio.h>

int kvs_errf(kvs_err *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* One line whatever the input echoed: a control byte (a newline in a
         * quoted CSV field, a CR, ...) becomes '?'. */
        str_sanitize(err->msg, sizeof err->msg, err->msg);
    }
    return status;
}

const char *kvs_status_name(int status)
{
    switch (status) {
    case KVS_OK: return "ok";
    case KVS_EINVAL: return "invalid input";
    case KVS_EIO: return "i/o error";
    case KVS_ENOMEM: return "out of memory";
    case KVS_EDB: return "database error";
    case KVS_EDEVICE: return "device error";
    case KVS_EINTERNAL: return "internal error";
    default: return "unknown error";
    }
}
