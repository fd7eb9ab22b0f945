/* kvlink.h — the link that carries a prompt's KV from a prefill replica to
 * a decode replica in disaggregated serving (docs/cluster.md, section D):
 * a per-direction bandwidth and a fixed latency, named (nvlink, ib, roce)
 * or given as BW_GBPS:LAT_US.  A transfer of B bytes takes
 * latency + B / bandwidth; transfers do not share the link (each has the
 * whole bandwidth, section D's simplifications).
 */
#ifndef KVLINK_H
#define KVLINK_H

#include <stdint.h>

#include "../base/kvs.h"

typedef struct kv_link {
    const char *name;   /* "nvlink", ... or "custom" */
    double gbps;        /* bandwidth per direction, GB/s (10^9 bytes per second) */
    double lat_us;      /* latency of one transfer, microseconds */
    const char *source; /* where the figures come from, for docs and help */
} kv_link;

/* Parse `spec` ("" = nvlink) into *out: a name of the table or
 * BW_GBPS:LAT_US with BW > 0 and LAT >= 0.  KVS_EINVAL naming --kv-link.
 * Cost: O(table). */
int kv_link_parse(const char *spec, kv_link *out, kvs_err *err);

/* Seconds to move `bytes` over the link: lat_us * 1e-6 + bytes / (gbps * 1e9). */
double kv_link_time_s(const kv_link *l, int64_t bytes);

/* The named links, comma-separated, for messages.  Static text. */
const char *kv_link_names(void);

#endif
