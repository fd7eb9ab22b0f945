/* kvlink.c — the named KV links and the BW:LAT form (kvlink.h). */
#include "kvlink.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bandwidths are the vendors' per-direction line rates; the latencies are
 * kvsim's round figures for one transfer's fixed cost (set-up, first
 * byte), which vendors do not publish as one number: docs/cluster.md D2. */
static const kv_link links[] = {
    {"nvlink", 450.0, 5.0, "NVLink 4 (H100 SXM): 900 GB/s total, 450 GB/s each way"},
    {"ib", 50.0, 10.0, "InfiniBand NDR, one 400 Gb/s port (ConnectX-7)"},
    {"roce", 50.0, 20.0, "RoCE v2 over 400 GbE, one port (ConnectX-7)"},
};

#define N_LINKS (sizeof links / sizeof links[0])

const char *kv_link_names(void) { return "nvlink, ib, roce, or BW_GBPS:LAT_US"; }

static int parse_num(const char *s, char **end, double *out)
{
    errno = 0;
    *out = strtod(s, end);
    return *end == s || errno != 0 || !isfinite(*out);
}

int kv_link_parse(const char *spec, kv_link *out, kvs_err *err)
{
    if (!spec || !spec[0])
        spec = "nvlink";
    for (size_t i = 0; i < N_LINKS; i++)
        if (!strcmp(links[i].name, spec)) {
            *out = links[i];
            return KVS_OK;
        }
    char *end;
    double bw, lat;
    if (parse_num(spec, &end, &bw) || *end != ':' || parse_num(end + 1, &end, &lat) || *end)
        return kvs_errf(err, KVS_EINVAL, "--kv-link: '%s' is not a link (%s)", spec,
                        kv_link_names());
    if (!(bw > 0.0))
        return kvs_errf(err, KVS_EINVAL, "--kv-link: bandwidth %g GB/s must be positive", bw);
    if (!(lat >= 0.0))
        return kvs_errf(err, KVS_EINVAL, "--kv-link: latency %g us is negative", lat);
    out->name = "custom";
    out->gbps = bw;
    out->lat_us = lat;
    out->source = "given";
    return KVS_OK;
}

double kv_link_time_s(const kv_link *l, int64_t bytes)
{
    return l->lat_us * 1e-6 + (double)bytes / (l->gbps * 1e9);
}
