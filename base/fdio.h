/* fdio.h — whole reads and writes on a file descriptor: read(2) and
 * write(2) return short counts (a pipe, a signal), so a caller that wants
 * n bytes loops; these two do the loop once, retrying EINTR.  And an
 * fsync by name, for a file or a directory written by name.
 */
#ifndef FDIO_H
#define FDIO_H

#include <stddef.h>

/* Read exactly n bytes into buf.  0, or -1 at end of file or on an error
 * (errno says which; 0 at end of file).  Cost: O(n). */
int fdio_read_full(int fd, void *buf, size_t n);
/* Write all n bytes of buf.  0, or -1 on an error (errno).  Cost: O(n). */
int fdio_write_full(int fd, const void *buf, size_t n);
/* fsync the file (dir 0) or directory (dir 1) at path.  0, or -1 with
 * errno of the open or the fsync.  Cost: one sync. */
int fdio_sync_path(const char *path, int dir);

#endif
