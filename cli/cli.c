#include "cli.h"

#include <errno.h>
#include <math.h>
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

int cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo,
                  int64_t hi, int64_t *out)
{
    char *end;
    if (!s || !*s)
        return cli_fail(cmd, "%s: missing value", flag);
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return cli_fail(cmd, "%s: '%s' is not an integer", flag, s);
    if (v < lo || v > hi)
        return cli_fail(cmd, "%s: %lld is out of range [%lld, %lld]", flag, v,
                        (long long)lo, (long long)hi);
    *out = v;
    return 0;
}

int cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-')
        return cli_fail(cmd, "%s: '%s' is not a non-negative integer", flag, s ? s : "");
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return cli_fail(cmd, "%s: '%s' is not a non-negative integer", flag, s);
    *out = v;
    return 0;
}

int cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo,
                  double hi, double *out)
{
    char *end;
    if (!s || !*s)
        return cli_fail(cmd, "%s: missing value", flag);
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return cli_fail(cmd, "%s: '%s' is not a number", flag, s);
    if (v < lo || v > hi)
        return cli_fail(cmd, "%s: %g is out of range [%g, %g]", flag, v, lo, hi);
    *out = v;
    return 0;
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

void cli_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}
