/* job_pack.c — (de)serializing one run for MPI transport (see job.h). */
#include "job.h"

#include <stdlib.h>
#include <string.h>

#define PACK_MAGIC "KVSP"
#define PACK_VERSION 3u /* 2: the replicas of a cluster run; 3: swaps apart
                           from the 24-byte request results */

/* Struct sizes the buffer was made with; both ends must agree. */
typedef struct pack_header {
    char magic[4];      /* "KVSP" */
    uint32_t version;   /* PACK_VERSION */
    uint32_t sz_config, sz_trace_req, sz_req_result, sz_summary, sz_step_rec,
        sz_member, sz_replica, sz_req_swap; /* sizeof of each struct carried, bytes */
} pack_header;

typedef struct writer {
    unsigned char *buf; /* owned, grows */
    size_t len, cap;    /* bytes used, allocated */
    int oom;            /* set once an allocation failed */
} writer;

static void put(writer *w, const void *p, size_t n)
{
    if (w->oom || n == 0)
        return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n)
            cap *= 2;
        unsigned char *b = realloc(w->buf, cap);
        if (!b) {
            w->oom = 1;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put_i64(writer *w, int64_t v) { put(w, &v, sizeof v); }

static void header_fill(pack_header *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, PACK_MAGIC, 4);
    h->version = PACK_VERSION;
    h->sz_config = sizeof(run_config);
    h->sz_trace_req = sizeof(trace_req);
    h->sz_req_result = sizeof(sched_req_result);
    h->sz_summary = sizeof(run_summary);
    h->sz_step_rec = sizeof(run_step_rec);
    h->sz_member = sizeof(sched_member);
    h->sz_replica = sizeof(run_replica);
    h->sz_req_swap = sizeof(sched_req_swap);
}

int run_pack(const run_packed *p, unsigned char **buf, size_t *len, kvs_err *err)
{
    writer w = {NULL, 0, 0, 0};
    pack_header h;
    header_fill(&h);
    put(&w, &h, sizeof h);
    put_i64(&w, p->point_index);
    put_i64(&w, p->status);
    put(&w, p->error, sizeof p->error);
    put(&w, &p->cfg, sizeof p->cfg);
    /* trace identity, then its requests */
    put_i64(&w, p->tr.format);
    put_i64(&w, p->tr.has_priority);
    put(&w, p->tr.source, sizeof p->tr.source);
    put(&w, p->tr.sha256, sizeof p->tr.sha256);
    int64_t n = p->tr.reqs ? p->tr.n : 0;
    put_i64(&w, n);
    put(&w, p->tr.reqs, (size_t)n * sizeof(trace_req));
    /* result: reqs present iff finished */
    int64_t nr = p->status == 0 && p->res.reqs ? n : 0;
    put_i64(&w, nr);
    put(&w, p->res.reqs, (size_t)nr * sizeof(sched_req_result));
    int64_t nsw = nr && p->res.swaps ? n : 0; /* swaps: only a run that could swap */
    put_i64(&w, nsw);
    put(&w, p->res.swaps, (size_t)nsw * sizeof(sched_req_swap));
    put(&w, &p->res.sum, sizeof p->res.sum);
    put(&w, p->res.started_at, sizeof p->res.started_at);
    put(&w, &p->res.wall_s, sizeof p->res.wall_s);
    int64_t ns = p->status == 0 && p->res.steps ? p->res.n_steps : 0;
    int64_t nm = ns ? p->res.n_members : 0;
    put_i64(&w, ns);
    put(&w, p->res.steps, (size_t)ns * sizeof(run_step_rec));
    put_i64(&w, nm);
    put(&w, p->res.members, (size_t)nm * sizeof(sched_member));
    /* a cluster run: the replica of each request, the per-replica metrics */
    int64_t nid = nr && p->res.replica ? n : 0;
    int64_t nrep = nr ? p->res.n_replicas : 0;
    put_i64(&w, nid);
    put(&w, p->res.replica, (size_t)nid * sizeof(int32_t));
    put_i64(&w, nrep);
    put(&w, p->res.replicas, (size_t)nrep * sizeof(run_replica));
    if (w.oom) {
        free(w.buf);
        return kvs_errf(err, KVS_ENOMEM, "run_pack: out of memory packing %lld requests",
                        (long long)n);
    }
    *buf = w.buf;
    *len = w.len;
    return KVS_OK;
}

typedef struct reader {
    const unsigned char *p; /* next byte */
    size_t left;            /* bytes left */
} reader;

static int get(reader *r, void *dst, size_t n)
{
    if (n > r->left)
        return -1;
    if (n)
        memcpy(dst, r->p, n);
    r->p += n;
    r->left -= n;
    return 0;
}

/* An array of `count` elements of `size` bytes into a fresh malloc'd block
 * (NULL for count 0). */
static int get_array(reader *r, int64_t count, size_t size, void **out)
{
    *out = NULL;
    if (count < 0 || (uint64_t)count > r->left / (size ? size : 1))
        return -1;
    if (count == 0)
        return 0;
    size_t bytes = (size_t)count * size;
    if (!(*out = malloc(bytes)))
        return -2;
    return get(r, *out, bytes);
}

int run_unpack(const unsigned char *buf, size_t len, run_packed *out, kvs_err *err)
{
    reader r = {buf, len};
    pack_header h, want;
    int64_t v = 0, n = 0, nr = 0, ns = 0, nm = 0, nid = 0, nrep = 0;
    int bad = 0;
    memset(out, 0, sizeof *out);
    header_fill(&want);
    if (get(&r, &h, sizeof h) || memcmp(&h, &want, sizeof h))
        return kvs_errf(err, KVS_EINVAL,
                        "run_unpack: not a run buffer of this kvsim build (magic, version "
                        "or struct sizes differ)");
    bad |= get(&r, &out->point_index, sizeof out->point_index);
    bad |= get(&r, &v, sizeof v);
    out->status = (int)v;
    bad |= get(&r, out->error, sizeof out->error);
    out->error[sizeof out->error - 1] = 0;
    bad |= get(&r, &out->cfg, sizeof out->cfg);
    bad |= get(&r, &v, sizeof v);
    out->tr.format = (trace_format)v;
    bad |= get(&r, &v, sizeof v);
    out->tr.has_priority = (int)v;
    bad |= get(&r, out->tr.source, sizeof out->tr.source);
    bad |= get(&r, out->tr.sha256, sizeof out->tr.sha256);
    out->tr.source[sizeof out->tr.source - 1] = 0;
    out->tr.sha256[sizeof out->tr.sha256 - 1] = 0;
    if (bad || get(&r, &n, sizeof n))
        goto truncated;
    int g = get_array(&r, n, sizeof(trace_req), (void **)&out->tr.reqs);
    if (g == -2)
        goto oom;
    if (g)
        goto truncated;
    out->tr.n = n;
    if (get(&r, &nr, sizeof nr) || (nr != 0 && nr != n))
        goto truncated;
    if ((g = get_array(&r, nr, sizeof(sched_req_result), (void **)&out->res.reqs)) == -2)
        goto oom;
    int64_t nsw;
    if (g || get(&r, &nsw, sizeof nsw) || (nsw != 0 && nsw != nr))
        goto truncated;
    if ((g = get_array(&r, nsw, sizeof(sched_req_swap), (void **)&out->res.swaps)) == -2)
        goto oom;
    if (g || get(&r, &out->res.sum, sizeof out->res.sum) ||
        get(&r, out->res.started_at, sizeof out->res.started_at) ||
        get(&r, &out->res.wall_s, sizeof out->res.wall_s) || get(&r, &ns, sizeof ns))
        goto truncated;
    out->res.started_at[sizeof out->res.started_at - 1] = 0;
    if ((g = get_array(&r, ns, sizeof(run_step_rec), (void **)&out->res.steps)) == -2)
        goto oom;
    if (g || get(&r, &nm, sizeof nm))
        goto truncated;
    if ((g = get_array(&r, nm, sizeof(sched_member), (void **)&out->res.members)) == -2)
        goto oom;
    if (g || get(&r, &nid, sizeof nid) || (nid != 0 && nid != nr))
        goto truncated;
    if ((g = get_array(&r, nid, sizeof(int32_t), (void **)&out->res.replica)) == -2)
        goto oom;
    if (g || get(&r, &nrep, sizeof nrep))
        goto truncated;
    if ((g = get_array(&r, nrep, sizeof(run_replica), (void **)&out->res.replicas)) == -2)
        goto oom;
    out->res.n_replicas = nrep;
    if (g || r.left != 0)
        goto truncated;
    if (out->status == 0 && nr != n)
        goto truncated;
    out->res.n_steps = ns;
    out->res.n_members = nm;
    out->res.tr = &out->tr;
    return KVS_OK;
truncated:
    run_packed_free(out);
    return kvs_errf(err, KVS_EINVAL, "run_unpack: truncated or corrupt run buffer (%zu bytes)",
                    len);
oom:
    run_packed_free(out);
    return kvs_errf(err, KVS_ENOMEM, "run_unpack: out of memory");
}

void run_packed_free(run_packed *p)
{
    run_result_free(&p->res);
    p->res.tr = NULL;
    trace_free(&p->tr);
}
