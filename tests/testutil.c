#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dirs[64][512];
static int g_ndirs;

static void cleanup(void)
{
    for (int i = 0; i < g_ndirs; i++) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%.520s'", g_dirs[i]);
        if (system(cmd) != 0) { /* best effort */ }
    }
}

const char *tu_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    if (g_ndirs >= 64)
        abort();
    char *d = g_dirs[g_ndirs];
    snprintf(d, 512, "%s/kvsim-test-XXXXXX", base);
    if (!mkdtemp(d))
        abort();
    if (g_ndirs++ == 0)
        atexit(cleanup);
    return d;
}

char *tu_write_file(const char *dir, const char *name, const char *text)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p)
        abort();
    snprintf(p, n, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
    return p;
}

int tu_run(const char *cmd, char **out)
{
    char *full = malloc(strlen(cmd) + 16);
    if (!full)
        abort();
    sprintf(full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (!p)
        return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += k;
        if (cap - len < 2048) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    if (!buf)
        abort();
    buf[len] = 0;
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    if (st == -1)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *tu_kvsim(void)
{
#ifdef KVSIM_BIN
    return KVSIM_BIN;
#else
    return "./build/kvsim";
#endif
}

int tu_run_suites(Suite **suites, int n)
{
    SRunner *sr = srunner_create(suites[0]);
    for (int i = 1; i < n; i++)
        srunner_add_suite(sr, suites[i]);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
