/* cmd_query.c — `kvsim query`: run SQL read-only over a results database and
 * print the rows as an aligned table or as CSV (RFC 4180 quoting).
 */
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "../base/str.h"
#include "../store/store_query.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvsim query [--db FILE] [--csv] [--header | --no-header] [--timeout S]\n"
            "                   [--max-rows N] [--max-mem-mib M] SQL\n"
            "\n"
            "Run one or more SQL statements (separated by ';') read-only over a kvsim\n"
            "results database and print each statement's rows.  SQL '-' reads the\n"
            "statements from standard input.  The tables and views are described in\n"
            "docs/schema.md.\n"
            "\n"
            "options:\n"
            "  --db FILE     database to read (default kvsim.db); never created\n"
            "  --csv         print CSV (RFC 4180 quoting, LF line ends) instead of an\n"
            "                aligned table (default: table)\n"
            "  --header      print the column names first (default)\n"
            "  --no-header   omit the column names\n"
            "  --timeout S   stop a query that runs longer than S seconds (default 30;\n"
            "                0 = no limit)\n"
            "  --max-rows N  refuse to print more than N rows in all (default 1000000;\n"
            "                0 = no limit): add LIMIT, or raise it\n"
            "  --max-mem-mib M  memory SQLite may use, MiB (default 1024)\n"
            "  -h, --help    print this help\n"
            "\n"
            "Values: NULL prints as NULL in a table and as an empty field in CSV; reals\n"
            "print with 6 significant digits in a table and with the fewest digits that\n"
            "read back exactly in CSV; blobs print as hex.\n"
            "Only reading is allowed: statements that write, ATTACH, PRAGMAs that set,\n"
            "and functions outside plain SQL's are refused (docs/hardening.md).  A\n"
            "database you cannot write (or on a read-only filesystem) is read as is.\n"
            "Errors (bad or refused SQL, a missing database, a limit reached) print one\n"
            "line and exit 2.\n");
}

/* ------------------------------------------------------ cell formatting */

typedef struct cell {
    char *s;      /* formatted text, owned (NULL for SQL NULL) */
    size_t len;   /* bytes in s */
    int numeric;  /* INTEGER or REAL */
} cell;

/* Shortest "%.Ng" (N = 15..17) that parses back to v, with ".0" added to
 * an integral value (as SQLite writes reals) so it still reads as a real. */
static void fmt_real(double v, char *buf, size_t n)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (isfinite(v) && !strpbrk(buf, ".e"))
        strncat(buf, ".0", n - strlen(buf) - 1);
}

/* Format column i of the current row; returns 0 or -1 on allocation failure. */
static int cell_get(sqlite3_stmt *st, int i, cell *c, int exact)
{
    char num[40];
    const char *src = NULL;
    size_t len = 0;
    c->s = NULL;
    c->len = 0;
    c->numeric = 0;
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_NULL:
        return 0;
    case SQLITE_INTEGER:
        snprintf(num, sizeof num, "%lld", (long long)sqlite3_column_int64(st, i));
        src = num, len = strlen(num), c->numeric = 1;
        break;
    case SQLITE_FLOAT:
        if (exact)
            fmt_real(sqlite3_column_double(st, i), num, sizeof num);
        else
            snprintf(num, sizeof num, "%.6g", sqlite3_column_double(st, i));
        src = num, len = strlen(num), c->numeric = 1;
        break;
    case SQLITE_BLOB: {
        const unsigned char *b = sqlite3_column_blob(st, i);
        size_t nb = (size_t)sqlite3_column_bytes(st, i);
        if (!(c->s = malloc(2 * nb + 1)))
            return -1;
        for (size_t k = 0; k < nb; k++)
            snprintf(c->s + 2 * k, 3, "%02x", b[k]);
        c->s[2 * nb] = 0;
        c->len = 2 * nb;
        return 0;
    }
    default: /* TEXT */
        src = (const char *)sqlite3_column_text(st, i);
        len = (size_t)sqlite3_column_bytes(st, i);
        if (!src)
            return -1;
        break;
    }
    if (!(c->s = malloc(len + 1)))
        return -1;
    memcpy(c->s, src, len);
    c->s[len] = 0;
    c->len = len;
    return 0;
}

/* ------------------------------------------------------------------ CSV */

static void csv_field(FILE *out, const char *s, size_t len)
{
    int quote = 0;
    for (size_t i = 0; i < len && !quote; i++)
        quote = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
    if (!quote) {
        fwrite(s, 1, len, out);
        return;
    }
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"')
            fputc('"', out);
        fputc(s[i], out);
    }
    fputc('"', out);
}

/* Stream the rows of st as CSV.  Returns 0, or -1 with err set. */
static int print_csv(FILE *out, store_query *q, sqlite3_stmt *st, int header, kvs_err *err)
{
    int nc = sqlite3_column_count(st), rc;
    if (header) {
        for (int i = 0; i < nc; i++) {
            const char *name = sqlite3_column_name(st, i);
            if (i)
                fputc(',', out);
            csv_field(out, name ? name : "", name ? strlen(name) : 0);
        }
        fputc('\n', out);
    }
    while ((rc = store_query_step(q, st, err)) == 1) {
        for (int i = 0; i < nc; i++) {
            cell c;
            if (cell_get(st, i, &c, 1)) {
                kvs_errf(err, KVS_ENOMEM, "out of memory");
                return -1;
            }
            if (i)
                fputc(',', out);
            if (c.s)
                csv_field(out, c.s, c.len);
            free(c.s);
        }
        fputc('\n', out);
    }
    return rc < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- table */

/* Display width: UTF-8 code points (continuation bytes do not count). */
static size_t text_width(const char *s, size_t len)
{
    size_t w = 0;
    for (size_t i = 0; i < len; i++)
        w += ((unsigned char)s[i] & 0xC0) != 0x80;
    return w;
}

static void pad(FILE *out, size_t n)
{
    while (n--)
        fputc(' ', out);
}

typedef struct table {
    int nc;            /* columns */
    cell *cells;       /* [rows * nc], row-major, owned */
    size_t rows, cap;  /* rows held, rows allocated */
} table;

static void table_free(table *t)
{
    for (size_t i = 0; i < t->rows * (size_t)t->nc; i++)
        free(t->cells[i].s);
    free(t->cells);
}

/* Print one cell aligned in a column of `width`; `last` skips the trailing
 * padding of a left-aligned last column. */
static void put_aligned(FILE *out, const char *s, size_t len, size_t width, int right,
                        int last)
{
    size_t w = text_width(s, len);
    if (right)
        pad(out, width - w);
    fwrite(s, 1, len, out);
    if (!right && !last)
        pad(out, width - w);
}

static void table_print(FILE *out, const table *t, sqlite3_stmt *st, int header)
{
    int nc = t->nc;
    size_t *width = calloc((size_t)nc, sizeof *width);
    int *right = calloc((size_t)nc, sizeof *right);
    if (!width || !right)
        goto out;
    /* A column is right-aligned when it holds numbers and nothing else. */
    for (int j = 0; j < nc; j++) {
        const char *name = sqlite3_column_name(st, j);
        width[j] = header && name ? text_width(name, strlen(name)) : 0;
        int any = 0, all = 1;
        for (size_t r = 0; r < t->rows; r++) {
            const cell *c = &t->cells[r * (size_t)nc + (size_t)j];
            size_t w = c->s ? text_width(c->s, c->len) : 4; /* "NULL" */
            if (w > width[j])
                width[j] = w;
            if (c->s) {
                any = 1;
                all &= c->numeric;
            }
        }
        right[j] = any && all;
    }
    if (header) {
        for (int j = 0; j < nc; j++) {
            const char *name = sqlite3_column_name(st, j);
            if (!name)
                name = "";
            if (j)
                fputs("  ", out);
            put_aligned(out, name, strlen(name), width[j], right[j], j == nc - 1);
        }
        fputc('\n', out);
        for (int j = 0; j < nc; j++) {
            if (j)
                fputs("  ", out);
            for (size_t k = 0; k < width[j]; k++)
                fputc('-', out);
        }
        fputc('\n', out);
    }
    for (size_t r = 0; r < t->rows; r++) {
        for (int j = 0; j < nc; j++) {
            const cell *c = &t->cells[r * (size_t)nc + (size_t)j];
            if (j)
                fputs("  ", out);
            if (c->s)
                put_aligned(out, c->s, c->len, width[j], right[j], j == nc - 1);
            else
                put_aligned(out, "NULL", 4, width[j], right[j], j == nc - 1);
        }
        fputc('\n', out);
    }
out:
    free(width);
    free(right);
}

/* Buffer all rows (widths need them) and print.  Returns 0, or -1 with err
 * set. */
static int print_table(FILE *out, store_query *q, sqlite3_stmt *st, int header, kvs_err *err)
{
    table t = {sqlite3_column_count(st), NULL, 0, 0};
    int rc;
    while ((rc = store_query_step(q, st, err)) == 1) {
        if (t.rows == t.cap) {
            size_t cap = t.cap ? 2 * t.cap : 64;
            cell *nc = realloc(t.cells, cap * (size_t)t.nc * sizeof *nc);
            if (!nc) {
                rc = -2;
                break;
            }
            t.cells = nc;
            t.cap = cap;
        }
        cell *row = t.cells + t.rows * (size_t)t.nc;
        int bad = 0;
        for (int i = 0; i < t.nc; i++)
            if (!bad && cell_get(st, i, &row[i], 0))
                bad = 1;
            else if (bad)
                row[i].s = NULL;
        t.rows++; /* the row's cells are owned by t now, even partial */
        /* a table is for a terminal: stored text prints without its
         * control characters (CSV keeps the bytes, quoted) */
        for (int i = 0; !bad && i < t.nc; i++)
            if (row[i].s)
                str_sanitize(row[i].s, row[i].len + 1, row[i].s);
        if (bad) {
            rc = -2;
            break;
        }
    }
    if (rc == -2)
        kvs_errf(err, KVS_ENOMEM, "out of memory");
    if (rc == 0)
        table_print(out, &t, st, header);
    table_free(&t);
    return rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ command */

/* Read all of stdin into a malloc'd string (NULL on failure). */
static char *read_stdin(void)
{
    size_t cap = 4096, len = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + len, 1, cap - len - 1, stdin)) > 0) {
        len += k;
        if (cap - len < 1024) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf)
        buf[len] = 0;
    if (ferror(stdin)) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* What `kvsim query`'s flags asked for. */
typedef struct query_args {
    const char *db;          /* --db */
    const char *sql;         /* the SQL, "-" for stdin */
    int csv, header;         /* --csv; --header / --no-header */
    store_query_limits lim;  /* --timeout, --max-rows, --max-mem-mib */
} query_args;

/* Parse argv into *o; a bad flag is printed, with its exit status
 * returned; 0 when the arguments are good. */
static int parse_args(int argc, char **argv, query_args *o)
{
    *o = (query_args){"kvsim.db", NULL, 0, 1, {30.0, 1000000, INT64_C(1024) << 20}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--db")) {
            if (i + 1 >= argc || !*argv[i + 1])
                return cli_fail("query", "--db: missing file name");
            o->db = argv[++i];
        } else if (!strcmp(a, "--csv")) {
            o->csv = 1;
        } else if (!strcmp(a, "--header")) {
            o->header = 1;
        } else if (!strcmp(a, "--no-header")) {
            o->header = 0;
        } else if (!strcmp(a, "--timeout") || !strcmp(a, "--max-rows") ||
                   !strcmp(a, "--max-mem-mib")) {
            if (i + 1 >= argc)
                return cli_fail("query", "%s: missing value", a);
            const char *v = argv[++i];
            int64_t mib;
            int bad = !strcmp(a, "--timeout")
                          ? cli_parse_f64("query", a, v, 0, 1e6, &o->lim.timeout_s)
                      : !strcmp(a, "--max-rows")
                          ? cli_parse_i64("query", a, v, 0, INT64_MAX, &o->lim.max_rows)
                          : cli_parse_i64("query", a, v, 1, INT64_C(1) << 24, &mib);
            if (bad)
                return bad;
            if (!strcmp(a, "--max-mem-mib"))
                o->lim.max_heap_bytes = mib << 20;
        } else if (!strcmp(a, "--") && i + 1 < argc && !o->sql) {
            o->sql = argv[++i];
            if (i + 1 < argc)
                return cli_fail("query", "unexpected argument '%s' (quote the SQL as one argument)",
                                argv[i + 1]);
        } else if (a[0] == '-' && a[1]) {
            return cli_fail("query", "unknown option '%s' (see kvsim query --help)", a);
        } else if (o->sql) {
            return cli_fail("query", "unexpected argument '%s' (quote the SQL as one argument)", a);
        } else {
            o->sql = a;
        }
    }
    if (!o->sql)
        return cli_fail("query", "missing SQL (see kvsim query --help)");
    return 0;
}

/* Prepare every statement of sql before running any, so that a script with
 * one refused statement runs none of them: *stmts[*n] (the caller
 * finalizes and frees them, also after an error).  Prints its error; the
 * exit status or 0. */
static int prepare_all(store_query *q, const char *sql, sqlite3_stmt ***stmts, size_t *n)
{
    size_t cap = 0;
    kvs_err err;
    for (const char *tail = sql; tail && *tail;) {
        sqlite3_stmt *st = NULL;
        if (store_query_prepare(q, &tail, &st, &err) != KVS_OK)
            return cli_fail("query", "%s", err.msg);
        if (!st)
            continue; /* whitespace or a comment */
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            sqlite3_stmt **ns = realloc(*stmts, cap * sizeof *ns);
            if (!ns) {
                sqlite3_finalize(st);
                return cli_fail("query", "out of memory");
            }
            *stmts = ns;
        }
        (*stmts)[(*n)++] = st;
    }
    return 0;
}

/* Run the prepared statements in order, printing each one's rows (a table,
 * or CSV) to stdout.  Prints its error; the exit status or 0. */
static int run_all(store_query *q, sqlite3_stmt **stmts, size_t n, const query_args *o)
{
    int printed = 0;
    kvs_err err;
    for (size_t k = 0; k < n; k++) {
        sqlite3_stmt *st = stmts[k];
        int rc;
        if (sqlite3_column_count(st) == 0) {
            while ((rc = store_query_step(q, st, &err)) == 1) {
            }
        } else {
            if (printed++ && !o->csv)
                fputc('\n', stdout);
            rc = o->csv ? print_csv(stdout, q, st, o->header, &err)
                        : print_table(stdout, q, st, o->header, &err);
        }
        if (rc != 0) {
            fflush(stdout);
            return cli_fail("query", "%s", err.msg);
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout))
        return cli_fail("query", "stdout: write error");
    return 0;
}

int cmd_query(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    query_args o;
    int status = parse_args(argc, argv, &o);
    if (status)
        return status;
    char *sql_buf = NULL;
    if (!strcmp(o.sql, "-")) {
        if (!(sql_buf = read_stdin()))
            return cli_fail("query", "stdin: could not read the SQL");
        o.sql = sql_buf;
    }
    store_query *q = NULL;
    sqlite3_stmt **stmts = NULL;
    size_t n_stmts = 0;
    kvs_err err;
    if (store_query_open(o.db, &o.lim, &q, &err) != KVS_OK)
        status = cli_fail("query", "%s", err.msg);
    else if (!(status = prepare_all(q, o.sql, &stmts, &n_stmts)))
        status = run_all(q, stmts, n_stmts, &o);
    for (size_t k = 0; k < n_stmts; k++)
        sqlite3_finalize(stmts[k]);
    free(stmts);
    store_query_close(q);
    free(sql_buf);
    return status;
}
