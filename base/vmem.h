/* vmem.h — large zero-filled arrays whose memory is committed as they are
 * first written and handed back to the system from the front once their
 * entries are no longer needed.
 *
 * A per-request array of a million-request run (kvsim's scheduler state)
 * is live only between a request's arrival and its end: the live part is
 * a window that slides from the front of the array to its back.  A vmem
 * region is an anonymous mapping: pages that were never written cost no
 * memory, and vmem_release unmaps the whole pages of a prefix, so the
 * resident size follows the window, not the array.  An entry released is
 * gone: touching it faults (a bug caught at once, never a stale value).
 */
#ifndef KVSIM_VMEM_H
#define KVSIM_VMEM_H

#include <stddef.h>

typedef struct vmem {
    unsigned char *base; /* the mapping, NULL: none */
    size_t bytes;        /* its length, bytes (a whole number of pages) */
    size_t released;     /* bytes [0, released) unmapped, a multiple of the page */
} vmem;

/* Map a zero-filled region of at least `bytes` (>= 1) into *m; its start,
 * or NULL (m->base NULL) when the system refuses.  No memory is committed
 * until written.  O(1). */
void *vmem_init(vmem *m, size_t bytes);

/* Unmap the whole pages of [0, upto) not yet released (upto <= bytes).
 * Nothing below upto may be touched afterwards.  O(1) syscall; a call that
 * frees no whole page does nothing.  Returns bytes released in all. */
size_t vmem_release(vmem *m, size_t upto);

/* vmem_release once at least VMEM_BATCH bytes past those released would
 * go, else nothing: for callers that move upto a little at a time (one
 * unmap per 64 KiB at least, not one per page).  An empty m: no-op. */
#define VMEM_BATCH (64 * 1024) /* bytes */
size_t vmem_release_batched(vmem *m, size_t upto);

/* Unmap what is left; m becomes empty.  A NULL or empty m: no-op. */
void vmem_free(vmem *m);

#endif
