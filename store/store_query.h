/* store_query.h — read-only SQL over a results database, safe against the
 * database and the SQL both (what `kvsim query` and the Python package's
 * readers run on).
 *
 * Promise: a query reads; it never writes a file, attaches another
 * database, loads code, calls a function outside a fixed list of pure SQL
 * functions, or runs past its time, row and memory limits.  Enforced in
 * layers: the connection is read-only (mode=ro, or immutable=1 where the
 * file or its directory cannot be written, e.g. a WAL database on a
 * read-only filesystem); defensive mode, no extension loading, no FTS3
 * tokenizer pointers, untrusted schema; an authorizer that allows SELECT,
 * reads, recursive CTEs, the listed functions and a few read-only PRAGMAs
 * and denies every other action; a statement must be read-only
 * (sqlite3_stmt_readonly) and begin with SELECT, WITH, VALUES, EXPLAIN or
 * PRAGMA; a progress handler stops it at the time limit; the row count is
 * capped in store_query_step.  docs/hardening.md has the threat model.
 */
#ifndef STORE_QUERY_H
#define STORE_QUERY_H

#include <stdint.h>

#include "../base/kvs.h"

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

typedef struct store_query_limits {
    double timeout_s;      /* wall time per store_query_open session, s; 0 = none */
    int64_t max_rows;      /* rows returned by all statements; 0 = none */
    int64_t max_heap_bytes;/* SQLite's heap for the whole process; 0 = unchanged */
} store_query_limits;

typedef struct store_query store_query;

/* Open `path` for reading under the limits.  A missing file is KVS_EINVAL
 * "PATH: no such database"; nothing is ever created.  Cost: one open and
 * one read of the schema. */
int store_query_open(const char *path, const store_query_limits *lim, store_query **out,
                     kvs_err *err);
void store_query_close(store_query *q);
/* The connection (for column metadata); owned by q. */
sqlite3 *store_query_db(store_query *q);

/* Prepare the next statement of *sql (advanced past it).  *st is NULL at
 * the end or for a comment.  A statement that could write, or is not a
 * SELECT / WITH / VALUES / EXPLAIN / PRAGMA, or that the authorizer
 * refuses, is KVS_EINVAL "PATH: refused: ..." naming the action.
 * Cost: SQLite's prepare. */
int store_query_prepare(store_query *q, const char **sql, sqlite3_stmt **st, kvs_err *err);

/* sqlite3_step with the limits: returns 1 for a row, 0 when done, or -1
 * with err set (SQL error, "interrupted: ran longer than --timeout S s",
 * "more than N rows (raise --max-rows or add LIMIT)", out of memory). */
int store_query_step(store_query *q, sqlite3_stmt *st, kvs_err *err);

#endif
