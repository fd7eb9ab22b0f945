/* store_rows.h — inside store/ only: the request rows of a run
 * (store_rows.c) for the run writer (store_run.c), and the small SQL helpers
 * the writers share.  Not part of the store's API (store.h). */
#ifndef STORE_ROWS_H
#define STORE_ROWS_H

#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>

#include "store.h"

/* printf onto buf[*len..cap); once the text no longer fits, *len ends up
 * >= cap and further calls do nothing. */
static inline void store_sql_append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static inline void store_sql_append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    *len = k < 0 ? cap : *len + (size_t)k;
}

/* Bind a REAL, or NULL for NaN ("none"). */
static inline int store_bind_nan_null(sqlite3_stmt *st, int i, double v)
{
    return isnan(v) ? sqlite3_bind_null(st, i) : sqlite3_bind_double(st, i, v);
}

/* Request rows [from, n) of finished run res under run_id, in the caller's
 * transaction, checked first (final statuses, lengths >= 1, ids within the
 * key).  Cost: O(n - from) inserts. */
int store_rows_write(store *s, int64_t run_id, const run_result *res, int64_t from,
                     kvs_err *err);

/* Whether g stages rows on store s's connection. */
int store_rows_stage_of(const store_stage *g, const store *s);

/* g staged rows of res's trace, no more than it has. */
int store_rows_stage_check(store *s, const store_stage *g, const run_result *res, kvs_err *err);

/* Copy g's staged rows into main.request_rows as run id's, in the caller's
 * transaction: record by record when id is the one they were keyed for,
 * else with the keys moved to id's.  Cost: O(staged) record copies. */
int store_rows_from_stage(store *s, const store_stage *g, int64_t id, kvs_err *err);

#endif
