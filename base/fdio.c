/* fdio.c — whole reads and writes on a file descriptor (see fdio.h). */
#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int fdio_read_full(int fd, void *buf, size_t n)
{
    char *b = buf;
    while (n) {
        ssize_t k = read(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = 0;
            return -1;
        }
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int fdio_write_full(int fd, const void *buf, size_t n)
{
    const char *b = buf;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int fdio_sync_path(const char *path, int dir)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    const int e = errno;
    close(fd);
    errno = e;
    return r;
}
