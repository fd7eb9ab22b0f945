/* afile.c — atomic output files (see afile.h). */
#include "afile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void afile_release(afile *a)
{
    free(a->path);
    free(a->tmp);
    a->path = a->tmp = NULL;
    a->f = NULL;
}

int afile_open(afile *a, const char *path, kvs_err *err)
{
    memset(a, 0, sizeof *a);
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0, n = strlen(path);
    a->path = strdup(path);
    a->tmp = malloc(n + 16);
    if (!a->path || !a->tmp) {
        afile_release(a);
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
    }
    memcpy(a->tmp, path, dir_len);
    snprintf(a->tmp + dir_len, n + 16 - dir_len, ".%s.XXXXXX", path + dir_len);
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        int e = errno;
        afile_release(a);
        return kvs_errf(err, KVS_EIO, "%s: %s", path, strerror(e));
    }
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    if (!(a->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(a->tmp);
        afile_release(a);
        return kvs_errf(err, KVS_EIO, "%s: %s", path, strerror(e));
    }
    return KVS_OK;
}

void afile_abort(afile *a)
{
    if (!a->path)
        return;
    if (a->f)
        fclose(a->f);
    unlink(a->tmp);
    afile_release(a);
}

int afile_commit(afile *a, kvs_err *err)
{
    int e = 0;
    if (fflush(a->f) != 0 || ferror(a->f))
        e = errno ? errno : EIO;
    else if (fsync(fileno(a->f)) != 0)
        e = errno;
    if (fclose(a->f) != 0 && !e)
        e = errno;
    a->f = NULL;
    if (!e && rename(a->tmp, a->path) != 0)
        e = errno;
    if (e) {
        int rc = kvs_errf(err, KVS_EIO, "%s: %s", a->path, strerror(e));
        unlink(a->tmp);
        afile_release(a);
        return rc;
    }
    /* the rename itself is durable once the directory is synced */
    char *slash = strrchr(a->path, '/');
    if (slash)
        *slash = 0;
    int dfd = open(slash ? (a->path[0] ? a->path : "/") : ".", O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    afile_release(a);
    return KVS_OK;
}
