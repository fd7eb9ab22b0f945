#include "cli.h"

#include "../base/str.h"
#include "../store/store.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every error line goes through here: flag values and stored text echoed
 * in it have their control characters (newlines, escape sequences) made
 * '?' (str_sanitize), so it stays one harmless terminal line. */
int cli_fail(const char *cmd, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    str_sanitize(line, sizeof line, line);
    fprintf(stderr, "kvsim %s: %s\n", cmd, line);
    return CLI_EXIT_ERR;
}

/* The parsers are base/str.h's; these print their error. */
int cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo,
                  int64_t hi, int64_t *out)
{
    kvs_err err;
    return str_parse_i64(flag, s, lo, hi, out, &err) ? cli_fail(cmd, "%s", err.msg) : 0;
}

int cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out)
{
    kvs_err err;
    return str_parse_u64(flag, s, out, &err) ? cli_fail(cmd, "%s", err.msg) : 0;
}

int cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo,
                  double hi, double *out)
{
    kvs_err err;
    return str_parse_f64(flag, s, lo, hi, out, &err) ? cli_fail(cmd, "%s", err.msg) : 0;
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    }
    return 0;
}

int cli_take_value(int argc, char **argv, int *i, const char *flag, const char **val,
                   int *missing)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n))
        return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n])
        return 0;
    if (*i + 1 >= argc) {
        *missing = 1;
        return 1;
    }
    *val = argv[++*i];
    return 1;
}

int cli_split_own_flags(const char *cmd, int argc, char **argv, const cli_own_flag *own,
                        int n_own, char **rest, int *nrest)
{
    rest[(*nrest)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        int missing = 0, k = 0;
        const char *v = NULL;
        while (k < n_own && !cli_take_value(argc, argv, &i, own[k].flag, &v, &missing))
            k++;
        if (k == n_own) {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        if (missing)
            return cli_fail(cmd, "%s: missing value", argv[i]);
        *own[k].dst = v;
    }
    return 0;
}


/* The wait hook: one line per note, on stderr. */
static void wait_note(void *ctx, const char *path, double waited_s, double limit_s)
{
    fprintf(stderr, "kvsim %s: --db %s: waiting for the database (locked %.0f s of at most %.0f s; "
                    "then the run is kept in its spool)\n",
            (const char *)ctx, path, waited_s, limit_s);
}

static int open_db(const char *cmd, const char *path, int one_run, store **st)
{
    kvs_err err;
    *st = NULL;
    if ((one_run ? store_open_new(path, st, &err) : store_open_writable(path, st, &err)))
        return cli_fail(cmd, "--db: %s", err.msg);
    if (!store_has_file(*st)) {
        store_close(*st);
        *st = NULL;
        return cli_fail(cmd, "--db %s: an in-memory database is gone when kvsim exits, and "
                             "its runs with it; name a file", path);
    }
    store_set_wait(*st, store_wait_limit(*st), wait_note, (void *)cmd);
    return 0;
}

int cli_open_db(const char *cmd, const char *path, store **st)
{
    return open_db(cmd, path, 0, st);
}

int cli_open_db_run(const char *cmd, const char *path, store **st)
{
    return open_db(cmd, path, 1, st);
}

int cli_require_db(const char *cmd, const char *path)
{
    if (access(path, F_OK) != 0)
        return cli_fail(cmd, "--db %s: no such database", path);
    return 0;
}

int cli_parse_degrees(const char *cmd, const char *flag, const char *arg, double *tps, int *n)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return cli_fail(cmd, "%s: too long", flag);
    strcpy(buf, arg);
    *n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (cli_parse_i64(cmd, flag, t, 1, 1024, &v))
            return CLI_EXIT_ERR;
        if (*n && v <= tps[*n - 1])
            return cli_fail(cmd, "%s: give ascending degrees ('%s')", flag, arg);
        if (*n == CLI_MAX_TPS)
            return cli_fail(cmd, "%s: at most %d degrees", flag, CLI_MAX_TPS);
        tps[(*n)++] = (double)v;
    }
    if (*n == 0)
        return cli_fail(cmd, "%s: empty list", flag);
    return 0;
}

int cli_parse_tp_list(const char *cmd, const char *arg, double *tps, int *n)
{
    return cli_parse_degrees(cmd, "--tp-list", arg, tps, n);
}

int cli_identity_args_skip(const char *arg)
{
    return !strcmp(arg, "--quiet") || !strcmp(arg, "--json") || !strcmp(arg, "--progress") ||
           !strcmp(arg, "--no-progress") || !strncmp(arg, "--db=", 5);
}

char *cli_identity_args(int n, char **args)
{
    char **keep = calloc((size_t)n + 1, sizeof *keep);
    int k = 0;
    if (!keep)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (cli_identity_args_skip(args[i]))
            continue;
        if (!strcmp(args[i], "--db")) {
            i++;
            continue;
        }
        keep[k++] = args[i];
    }
    char *t = str_join(k, keep, "\n");
    free(keep);
    return t;
}
