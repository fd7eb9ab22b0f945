/* test_vmem.c — base/vmem.h: a region reads as zeros, keeps what is written,
 * releases whole pages of a prefix only (never a partly live page, never
 * twice, never past its end), and what it released is gone from the
 * process (mincore refuses an unmapped range) while the rest stays. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/vmem.h"
#include "testutil.h"

/* 1 if [p, p + n) is mapped in this process (mincore answers ENOMEM for
 * an unmapped page). */
static int mapped(const void *p, size_t n)
{
    unsigned char vec[64];
    const size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    ck_assert(n / ps <= sizeof vec);
    if (mincore((void *)p, n, vec) == 0)
        return 1;
    ck_assert_int_eq(errno, ENOMEM);
    return 0;
}

START_TEST(test_release_prefix_pages)
{
    const size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    vmem m;
    unsigned char *p = vmem_init(&m, 10 * ps - 100); /* rounds up to 10 pages */
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(m.bytes, 10 * ps);
    ck_assert_uint_eq(m.released, 0);
    for (size_t i = 0; i < m.bytes; i += 997) /* zero-filled */
        ck_assert_uint_eq(p[i], 0);
    for (size_t i = 0; i < m.bytes; i++)
        p[i] = (unsigned char)(i * 31 + 7);
    /* less than a page: nothing goes */
    ck_assert_uint_eq(vmem_release(&m, ps - 1), 0);
    ck_assert(mapped(p, ps));
    /* 2.5 pages: the two whole ones */
    ck_assert_uint_eq(vmem_release(&m, 2 * ps + ps / 2), 2 * ps);
    ck_assert(!mapped(p, ps) && !mapped(p + ps, ps));
    ck_assert(mapped(p + 2 * ps, 8 * ps));
    for (size_t i = 2 * ps; i < m.bytes; i++) /* the rest kept its bytes */
        ck_assert_uint_eq(p[i], (unsigned char)(i * 31 + 7));
    /* a lower mark changes nothing; a mark past the end stops at the end */
    ck_assert_uint_eq(vmem_release(&m, ps), 2 * ps);
    ck_assert_uint_eq(vmem_release(&m, 7 * ps), 7 * ps);
    ck_assert(mapped(p + 7 * ps, 3 * ps));
    ck_assert_uint_eq(vmem_release(&m, 100 * ps), 10 * ps);
    ck_assert(!mapped(p + 9 * ps, ps));
    vmem_free(&m); /* nothing left to unmap: a no-op */
    ck_assert_ptr_null(m.base);
    vmem_free(&m);
}
END_TEST

/* The batched release waits for VMEM_BATCH bytes past the released ones,
 * then releases every whole page below the mark, as vmem_release does. */
START_TEST(test_release_batched)
{
    const size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    const size_t pages = 3 * VMEM_BATCH / ps;
    vmem m;
    unsigned char *p = vmem_init(&m, pages * ps);
    ck_assert_ptr_nonnull(p);
    memset(p, 1, pages * ps);
    ck_assert_uint_eq(vmem_release_batched(&m, VMEM_BATCH - 1), 0);
    ck_assert(mapped(p, ps));
    ck_assert_uint_eq(vmem_release_batched(&m, VMEM_BATCH + ps + 1), VMEM_BATCH + ps);
    ck_assert(!mapped(p + VMEM_BATCH, ps) && mapped(p + VMEM_BATCH + ps, ps));
    /* the next batch counts from what was released */
    ck_assert_uint_eq(vmem_release_batched(&m, 2 * VMEM_BATCH), VMEM_BATCH + ps);
    ck_assert_uint_eq(vmem_release_batched(&m, 2 * VMEM_BATCH + ps), 2 * VMEM_BATCH + ps);
    vmem_free(&m);
    ck_assert_uint_eq(vmem_release_batched(&m, 10 * VMEM_BATCH), 0); /* empty: no-op */
}
END_TEST

START_TEST(test_free_unmaps_the_rest)
{
    const size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    vmem m;
    unsigned char *p = vmem_init(&m, 4 * ps);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xa5, 4 * ps);
    ck_assert_uint_eq(vmem_release(&m, ps), ps);
    vmem_free(&m);
    ck_assert(!mapped(p + ps, ps) && !mapped(p + 3 * ps, ps));
    ck_assert_ptr_null(m.base);
    ck_assert_uint_eq(m.bytes, 0);
    /* nothing to map: NULL, an empty region */
    ck_assert_ptr_null(vmem_init(&m, 0));
    ck_assert_ptr_null(m.base);
    ck_assert_uint_eq(vmem_release(&m, 10), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("vmem");
    TCase *tc = tcase_create("vmem");
    tcase_add_test(tc, test_release_prefix_pages);
    tcase_add_test(tc, test_release_batched);
    tcase_add_test(tc, test_free_unmaps_the_rest);
    suite_add_tcase(s, tc);
    return tu_run_suites(&s, 1);
}
