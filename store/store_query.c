/* store_query.c — read-only, bounded SQL over a results database (see
 * store_query.h for the promise and its layers). */
#include "store_query.h"

#include <ctype.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct store_query {
    sqlite3 *db;
    char *path;             /* as given */
    store_query_limits lim;
    double deadline;        /* monotonic seconds; 0 = none */
    int timed_out;          /* set by the progress handler */
    int64_t rows;           /* returned so far */
    char denied[160];       /* the authorizer's last refusal */
};

/* Pure SQL functions a query may call: core scalars, aggregates, window
 * functions, dates, JSON and math.  Anything else (load_extension,
 * fts3_tokenizer, readfile, ...) is refused. */
static const char *const safe_functions[] = {
    "abs", "avg", "char", "coalesce", "concat", "concat_ws", "count", "date", "datetime",
    "format", "glob", "group_concat", "hex", "ifnull", "iif", "instr", "julianday", "length",
    "like", "likelihood", "likely", "lower", "ltrim", "max", "min", "nullif", "octet_length",
    "printf", "quote", "random", "randomblob", "replace", "round", "rtrim", "sign", "string_agg", "strftime",
    "substr", "substring", "sum", "time", "timediff", "total", "trim", "typeof", "unhex",
    "unicode", "unistr", "unixepoch", "unlikely", "upper", "zeroblob",
    /* window */
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value",
    /* math */
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "ceiling", "cos",
    "cosh", "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow",
    "power", "radians", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
    /* JSON */
    "json", "json_array", "json_array_length", "json_extract", "json_insert", "json_object",
    "json_patch", "json_quote", "json_remove", "json_replace", "json_set", "json_type",
    "json_valid", "json_group_array", "json_group_object", "json_each", "json_tree", "jsonb",
    "json_pretty", "->", "->>",
};

/* PRAGMAs that only read (and only without an argument that sets). */
static const char *const safe_pragmas[] = {
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "schema_version", "user_version", "page_count", "page_size",
    "integrity_check", "quick_check", "compile_options", "database_list", "collation_list",
    "function_list", "pragma_list", "encoding", "journal_mode",
};

static int in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcasecmp(s, list[i]))
            return 1;
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int authorize(void *ctx, int action, const char *a, const char *b, const char *db,
                     const char *trigger)
{
    store_query *q = ctx;
    (void)db;
    (void)trigger;
    switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
        return SQLITE_OK;
    case SQLITE_FUNCTION:
        if (in_list(b, safe_functions, sizeof safe_functions / sizeof *safe_functions))
            return SQLITE_OK;
        snprintf(q->denied, sizeof q->denied, "the function %.60s()", b ? b : "?");
        return SQLITE_DENY;
    case SQLITE_PRAGMA:
        if (!b && in_list(a, safe_pragmas, sizeof safe_pragmas / sizeof *safe_pragmas))
            return SQLITE_OK;
        if (b && in_list(a, safe_pragmas, 7)) /* table_info(runs) and its kin */
            return SQLITE_OK;
        snprintf(q->denied, sizeof q->denied, "PRAGMA %.60s%s", a ? a : "?",
                 b ? " with a value" : "");
        return SQLITE_DENY;
    default: {
        static const char *const names[] = {
            [SQLITE_CREATE_INDEX] = "CREATE INDEX", [SQLITE_CREATE_TABLE] = "CREATE TABLE",
            [SQLITE_CREATE_TEMP_TABLE] = "CREATE TEMP TABLE", [SQLITE_CREATE_VIEW] = "CREATE VIEW",
            [SQLITE_CREATE_TRIGGER] = "CREATE TRIGGER", [SQLITE_DELETE] = "DELETE",
            [SQLITE_DROP_TABLE] = "DROP TABLE", [SQLITE_DROP_VIEW] = "DROP VIEW",
            [SQLITE_INSERT] = "INSERT", [SQLITE_UPDATE] = "UPDATE",
            [SQLITE_TRANSACTION] = "a transaction", [SQLITE_ATTACH] = "ATTACH",
            [SQLITE_DETACH] = "DETACH", [SQLITE_ALTER_TABLE] = "ALTER TABLE",
            [SQLITE_REINDEX] = "REINDEX", [SQLITE_ANALYZE] = "ANALYZE",
            [SQLITE_CREATE_VTABLE] = "CREATE VIRTUAL TABLE", [SQLITE_SAVEPOINT] = "SAVEPOINT",
        };
        const char *n = action >= 0 && action < (int)(sizeof names / sizeof *names) &&
                                names[action]
                            ? names[action]
                            : "a write or a change of the connection";
        snprintf(q->denied, sizeof q->denied, "%s", n);
        return SQLITE_DENY;
    }
    }
}

static int progress(void *ctx)
{
    store_query *q = ctx;
    if (q->deadline > 0 && now_s() > q->deadline) {
        q->timed_out = 1;
        return 1;
    }
    return 0;
}

/* "file:" URI of path with `query` appended (percent-encoding ?, #, %). */
static char *uri_of(const char *path, const char *query)
{
    size_t n = strlen(path), k = 0;
    char *u = malloc(3 * n + strlen(query) + 16);
    if (!u)
        return NULL;
    k += (size_t)sprintf(u, "file:");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c == '?' || c == '#' || c == '%' || c < 0x20)
            k += (size_t)sprintf(u + k, "%%%02X", c);
        else
            u[k++] = (char)c;
    }
    sprintf(u + k, "?%s", query);
    return u;
}

static void harden(sqlite3 *db)
{
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 1, NULL);
    sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 100 * 1000 * 1000);
    sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, 10 * 1000 * 1000);
}

/* Open uri read-only and read the schema; SQLITE_OK or the failing code. */
static int try_open(store_query *q, const char *uri)
{
    if (q->db)
        sqlite3_close(q->db);
    q->db = NULL;
    int rc = sqlite3_open_v2(uri, &q->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (rc != SQLITE_OK)
        return rc;
    harden(q->db);
    sqlite3_busy_timeout(q->db, 5000);
    return sqlite3_exec(q->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
}

int store_query_open(const char *path, const store_query_limits *lim, store_query **out,
                     kvs_err *err)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return kvs_errf(err, KVS_EINVAL, "%s: no such database", path);
    if (!S_ISREG(sb.st_mode))
        return kvs_errf(err, KVS_EINVAL, "%s: not a database file", path);
    store_query *q = calloc(1, sizeof *q);
    if (!q || !(q->path = strdup(path))) {
        free(q);
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
    }
    if (lim)
        q->lim = *lim;
    if (q->lim.max_heap_bytes > 0)
        sqlite3_hard_heap_limit64(q->lim.max_heap_bytes);
    char *ro = uri_of(path, "mode=ro"), *imm = uri_of(path, "mode=ro&immutable=1");
    int rc = ro && imm ? try_open(q, ro) : SQLITE_NOMEM;
    /* A WAL database whose -shm cannot be created (no write access to the
     * file or its directory, a read-only filesystem) opens as immutable. */
    if (rc != SQLITE_OK && rc != SQLITE_NOMEM && rc != SQLITE_NOTADB && rc != SQLITE_CORRUPT &&
        access(path, W_OK) != 0)
        rc = try_open(q, imm);
    free(ro);
    free(imm);
    if (rc != SQLITE_OK) {
        int e = kvs_errf(err, rc == SQLITE_NOMEM ? KVS_ENOMEM : KVS_EINVAL, "%s: %s", path,
                         q->db ? sqlite3_errmsg(q->db) : sqlite3_errstr(rc));
        store_query_close(q);
        return e;
    }
    sqlite3_set_authorizer(q->db, authorize, q);
    if (q->lim.timeout_s > 0) {
        q->deadline = now_s() + q->lim.timeout_s;
        sqlite3_progress_handler(q->db, 1000, progress, q);
    }
    *out = q;
    return KVS_OK;
}

void store_query_close(store_query *q)
{
    if (!q)
        return;
    sqlite3_close(q->db);
    free(q->path);
    free(q);
}

sqlite3 *store_query_db(store_query *q) { return q->db; }

/* The statement's first keyword, upper-cased, into kw[n]. */
static void first_keyword(const char *sql, char *kw, size_t n)
{
    size_t k = 0;
    while (*sql && k + 1 < n && isalpha((unsigned char)*sql))
        kw[k++] = (char)toupper((unsigned char)*sql++);
    kw[k] = 0;
}

/* Skip blanks and SQL comments. */
static const char *skip_space(const char *s)
{
    for (;;) {
        while (isspace((unsigned char)*s))
            s++;
        if (s[0] == '-' && s[1] == '-') {
            while (*s && *s != '\n')
                s++;
        } else if (s[0] == '/' && s[1] == '*') {
            const char *e = strstr(s + 2, "*/");
            s = e ? e + 2 : s + strlen(s);
        } else {
            return s;
        }
    }
}

static int keyword_ok(const char *kw)
{
    return !strcmp(kw, "SELECT") || !strcmp(kw, "WITH") || !strcmp(kw, "VALUES") ||
           !strcmp(kw, "EXPLAIN") || !strcmp(kw, "PRAGMA");
}

static int refuse_keyword(store_query *q, const char *kw, kvs_err *err)
{
    return kvs_errf(err, KVS_EINVAL, "%s: refused: %s statements (kvsim query only reads; "
                                     "use SELECT, WITH, VALUES, EXPLAIN or a read-only PRAGMA)",
                    q->path, kw[0] ? kw : "such");
}

int store_query_prepare(store_query *q, const char **sql, sqlite3_stmt **st, kvs_err *err)
{
    *st = NULL;
    q->denied[0] = 0;
    char kw[16];
    const char *head = skip_space(*sql);
    first_keyword(head, kw, sizeof kw);
    if (*head && *head != ';' && !keyword_ok(kw))
        return refuse_keyword(q, kw, err);
    const char *next = NULL;
    if (sqlite3_prepare_v2(q->db, *sql, -1, st, &next) != SQLITE_OK) {
        int rc = q->denied[0] ? kvs_errf(err, KVS_EINVAL, "%s: refused: %s (kvsim query only reads)",
                                         q->path, q->denied)
                              : kvs_errf(err, KVS_EINVAL, "%s: %s", q->path, sqlite3_errmsg(q->db));
        *st = NULL;
        return rc;
    }
    *sql = next;
    if (!*st)
        return KVS_OK;
    first_keyword(skip_space(sqlite3_sql(*st)), kw, sizeof kw);
    if (!keyword_ok(kw) || !sqlite3_stmt_readonly(*st)) {
        sqlite3_finalize(*st);
        *st = NULL;
        return refuse_keyword(q, kw, err);
    }
    return KVS_OK;
}

int store_query_step(store_query *q, sqlite3_stmt *st, kvs_err *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (q->lim.max_rows > 0 && ++q->rows > q->lim.max_rows) {
            kvs_errf(err, KVS_EINVAL, "%s: more than %lld rows (raise --max-rows or add LIMIT)",
                     q->path, (long long)q->lim.max_rows);
            return -1;
        }
        return 1;
    }
    if (rc == SQLITE_DONE)
        return 0;
    if (q->timed_out)
        kvs_errf(err, KVS_EINVAL, "%s: interrupted: ran longer than --timeout %g s", q->path,
                 q->lim.timeout_s);
    else if (rc == SQLITE_NOMEM)
        kvs_errf(err, KVS_ENOMEM, "%s: out of memory (the query needs more than the memory limit)",
                 q->path);
    else if (q->denied[0])
        kvs_errf(err, KVS_EINVAL, "%s: refused: %s (kvsim query only reads)", q->path, q->denied);
    else
        kvs_errf(err, KVS_EINVAL, "%s: %s", q->path, sqlite3_errmsg(q->db));
    return -1;
}
