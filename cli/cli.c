#include "cli.h"

#include "../base/str.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kvsim %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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

