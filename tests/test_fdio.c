/* test_fdio.c — base/fdio.h: a megabyte goes through a pipe whole although
 * the pipe holds at most 64 KiB and the reader asks for pieces of up to
 * 150,000 bytes (so read(2) returns short counts); a read past the
 * end fails with errno 0, a write to a closed pipe fails with EPIPE. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fdio.h"
#include "testutil.h"

#define FDIO_N (1u << 20)

typedef struct {
    int fd;
    unsigned char *got; /* [FDIO_N] */
    int rc;             /* the last fdio_read_full's */
} reader;

/* Reads FDIO_N bytes in pieces of 1 byte to 150,000 (more than a pipe
 * holds, so read(2) returns short), then once more past the end. */
static void *read_main(void *arg)
{
    reader *r = arg;
    size_t at = 0, piece = 1;
    while (at < FDIO_N) {
        size_t n = piece < FDIO_N - at ? piece : FDIO_N - at;
        if ((r->rc = fdio_read_full(r->fd, r->got + at, n)))
            return NULL;
        at += n;
        piece = piece * 7919 % 149999 + 1;
    }
    unsigned char extra;
    r->rc = fdio_read_full(r->fd, &extra, 1);
    return NULL;
}

START_TEST(test_whole_through_a_pipe)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    unsigned char *want = malloc(FDIO_N);
    reader r = {p[0], calloc(1, FDIO_N), 0};
    ck_assert(want && r.got);
    for (size_t i = 0; i < FDIO_N; i++)
        want[i] = (unsigned char)(i * 2654435761u >> 13);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, read_main, &r), 0);
    ck_assert_int_eq(fdio_write_full(p[1], want, FDIO_N), 0);
    ck_assert_int_eq(close(p[1]), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(r.rc, -1); /* the read past the end */
    ck_assert_int_eq(errno, 0);
    ck_assert(memcmp(r.got, want, FDIO_N) == 0);
    close(p[0]);
    free(want);
    free(r.got);
}
END_TEST

START_TEST(test_write_to_a_closed_pipe_fails)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(close(p[0]), 0);
    signal(SIGPIPE, SIG_IGN);
    char b[16] = {0};
    ck_assert_int_eq(fdio_write_full(p[1], b, sizeof b), -1);
    ck_assert_int_eq(errno, EPIPE);
    close(p[1]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fdio");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_whole_through_a_pipe);
    tcase_add_test(tc, test_write_to_a_closed_pipe_fails);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
