/* alloc.c — KV allocators: how many blocks a request holds.
 *   paged:            ceil(context / block_size), growing one block at a time
 *   reserved:         ceil(max_model_len / block_size) from admission to finish
 *   reserved-oracle:  ceil((P + O) / block_size) from admission to finish */
#include "sched_internal.h"

static int64_t paged_admit(const sched_config *cfg, const trace_req *r, int64_t ctx)
{
    (void)r;
    return sched_ceil_div(ctx, cfg->block_size);
}

static int64_t reserved_admit(const sched_config *cfg, const trace_req *r, int64_t ctx)
{
    (void)r;
    (void)ctx;
    return sched_ceil_div(cfg->max_model_len, cfg->block_size);
}

static int64_t oracle_admit(const sched_config *cfg, const trace_req *r, int64_t ctx)
{
    (void)ctx;
    return sched_ceil_div(r->prompt_tokens + r->output_tokens, cfg->block_size);
}

static const sched_alloc_vt alloc_paged = {"paged", paged_admit, 1};
static const sched_alloc_vt alloc_reserved = {"reserved", reserved_admit, 0};
static const sched_alloc_vt alloc_oracle = {"reserved-oracle", oracle_admit, 0};

const sched_alloc_vt *sched_alloc_vt_get(sched_alloc a)
{
    switch (a) {
    case SCHED_ALLOC_PAGED: return &alloc_paged;
    case SCHED_ALLOC_RESERVED: return &alloc_reserved;
    case SCHED_ALLOC_RESERVED_ORACLE: return &alloc_oracle;
    }
    return NULL;
}
