/* fuzz_util.h — helpers shared by the libFuzzer targets of tests/fuzz/:
 * handing the fuzz input to a parser that reads a file (an in-memory file,
 * memfd, reached through /proc/self/fd/N), and the invariants every parser's
 * error must keep (one non-empty line naming its origin, a known status).
 *
 * A broken invariant calls fuzz_fail, which prints the reason and aborts so
 * that libFuzzer saves the input as a crash.
 */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "../../base/kvs.h"

/* A reusable in-memory file.  fuzz_file_set replaces its contents; `path`
 * opens it afresh (offset 0) with fopen. */
typedef struct fuzz_file {
    int fd;          /* memfd (or a temp file when memfd is unavailable) */
    char path[64];   /* "/proc/self/fd/N" */
} fuzz_file;

/* Create once per process (aborts on failure).  Cost: one syscall. */
void fuzz_file_init(fuzz_file *f, const char *name);
/* Make the file hold exactly data[0..n).  Cost: O(n). */
void fuzz_file_set(fuzz_file *f, const uint8_t *data, size_t n);

/* Print "fuzz invariant broken: <what>" (and the error message, if any) to
 * stderr and abort. */
void fuzz_fail(const char *what, const kvs_err *err)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

/* Check a failed parse: status is one of `allowed` (a 0-terminated list),
 * the message is non-empty, holds no control character (so it is one line)
 * and, when `must_name` is non-NULL, contains that text (the file path or
 * flag the error must name). */
void fuzz_check_error(int status, const kvs_err *err, const int *allowed,
                      const char *must_name);

/* A NUL-terminated malloc'd copy of data[0..n) (aborts when out of memory).
 * NUL bytes inside the input are kept, so the string may end early. */
char *fuzz_strndup(const uint8_t *data, size_t n);

#endif
