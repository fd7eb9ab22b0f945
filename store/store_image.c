/* store_image.c — a new database file written from the recorded image of a
 * fresh one (see store_image.h). */
#include "store_image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/fdio.h"
#include "store.h"

int store_image_current(void)
{
    return store_schema_image_fingerprint == store_schema_fingerprint() &&
           store_schema_image_size > 0;
}

unsigned char *store_image_bytes(void)
{
    unsigned char *b = calloc(1, store_schema_image_size);
    if (!b)
        return NULL;
    size_t at = 0; /* into store_schema_image_data */
    for (uint32_t k = 0; k < store_schema_image_nseg; k++) {
        const uint32_t off = store_schema_image_seg[k][0], len = store_schema_image_seg[k][1];
        if ((uint64_t)off + len > store_schema_image_size) { /* a corrupt recording */
            free(b);
            return NULL;
        }
        memcpy(b + off, store_schema_image_data + at, len);
        at += len;
    }
    return b;
}

/* Whether path is a plain file name SQLite would create as it is. */
static int plain_path(const char *path)
{
    return path && *path && strcmp(path, ":memory:") != 0 && strncmp(path, "file:", 5) != 0;
}

/* Written with O_EXCL (store_image.h). */
char *store_image_create_private(const char *path)
{
    const char *e = getenv("KVSIM_SCHEMA_IMAGE");
    struct stat st;
    if ((e && !strcmp(e, "0")) || !plain_path(path) || !store_image_current())
        return NULL;
    if (lstat(path, &st) == 0 || errno != ENOENT)
        return NULL; /* there is a file (or a dangling link, or we cannot tell) */
    size_t n = strlen(path) + 64;
    char *tmp = malloc(n);
    unsigned char *img = store_image_bytes();
    int fd = -1, ok = 0;
    if (!tmp || !img)
        goto out;
    static unsigned seq; /* several threads may race here: O_EXCL sorts them out */
    for (int tries = 0; tries < 8 && fd < 0; tries++) {
        snprintf(tmp, n, "%s.kvsim-new-%ld-%u", path, (long)getpid(),
                 __atomic_fetch_add(&seq, 1u, __ATOMIC_RELAXED));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            goto out;
    }
    if (fd < 0)
        goto out;
    ok = fdio_write_full(fd, img, store_schema_image_size) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok)
        (void)unlink(tmp);
out:
    free(img);
    if (!ok) {
        free(tmp);
        return NULL;
    }
    return tmp;
}

int store_image_create(const char *path)
{
    char *tmp = store_image_create_private(path);
    if (!tmp)
        return 0;
    const int made = link(tmp, path) == 0;
    (void)unlink(tmp);
    free(tmp);
    return made;
}
