/* fuzz_util.c — in-memory files and error invariants for the fuzz targets. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void fuzz_file_init(fuzz_file *f, const char *name)
{
    f->fd = memfd_create(name, 0);
    if (f->fd < 0) {
        char tmpl[] = "/tmp/kvsim-fuzz-XXXXXX";
        f->fd = mkstemp(tmpl);
        if (f->fd < 0) {
            perror("fuzz: mkstemp");
            abort();
        }
        unlink(tmpl); /* still reachable through /proc/self/fd */
    }
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

void fuzz_file_set(fuzz_file *f, const uint8_t *data, size_t n)
{
    if (ftruncate(f->fd, 0) != 0) {
        perror("fuzz: ftruncate");
        abort();
    }
    size_t done = 0;
    while (done < n) {
        ssize_t k = pwrite(f->fd, data + done, n - done, (off_t)done);
        if (k <= 0) {
            perror("fuzz: pwrite");
            abort();
        }
        done += (size_t)k;
    }
}

void fuzz_fail(const char *what, const kvs_err *err)
{
    fprintf(stderr, "fuzz invariant broken: %s\n", what);
    if (err)
        fprintf(stderr, "  error message: [%s]\n", err->msg);
    abort();
}

void fuzz_check_error(int status, const kvs_err *err, const int *allowed,
                      const char *must_name)
{
    int ok = 0;
    for (const int *a = allowed; *a; a++)
        ok |= status == *a;
    if (!ok) {
        char what[96];
        snprintf(what, sizeof what, "unexpected status %d (%s)", status,
                 kvs_status_name(status));
        fuzz_fail(what, err);
    }
    if (!err->msg[0])
        fuzz_fail("empty error message", err);
    for (const unsigned char *p = (const unsigned char *)err->msg; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            fuzz_fail("control character (e.g. a newline) in the error message", err);
    if (must_name && !strstr(err->msg, must_name))
        fuzz_fail("error message does not name its origin", err);
}

char *fuzz_strndup(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}
