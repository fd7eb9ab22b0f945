/* vmem.c — zero-filled regions released from the front (see vmem.h). */
#include "vmem.h"

#include <sys/mman.h>
#include <unistd.h>

static size_t page_size(void)
{
    static size_t ps;
    if (!ps) {
        long p = sysconf(_SC_PAGESIZE);
        ps = p > 0 ? (size_t)p : 4096;
    }
    return ps;
}

void *vmem_init(vmem *m, size_t bytes)
{
    const size_t ps = page_size();
    m->base = NULL;
    m->bytes = m->released = 0;
    if (bytes == 0 || bytes > (size_t)-1 - ps)
        return NULL;
    const size_t len = (bytes + ps - 1) / ps * ps;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    m->base = p;
    m->bytes = len;
    return p;
}

size_t vmem_release(vmem *m, size_t upto)
{
    if (!m->base)
        return 0;
    if (upto > m->bytes)
        upto = m->bytes;
    const size_t end = upto / page_size() * page_size();
    if (end > m->released && munmap(m->base + m->released, end - m->released) == 0)
        m->released = end;
    return m->released;
}

size_t vmem_release_batched(vmem *m, size_t upto)
{
    if (m->base && upto >= m->released && upto - m->released >= VMEM_BATCH)
        return vmem_release(m, upto);
    return m->released;
}

void vmem_free(vmem *m)
{
    if (m->base && m->released < m->bytes)
        munmap(m->base + m->released, m->bytes - m->released);
    m->base = NULL;
    m->bytes = m->released = 0;
}
