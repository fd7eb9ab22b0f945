/* trace_check.c — trace invariants for the fuzz targets. */
#include "trace_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_util.h"

static void check_sorted_finite(const trace *t, const char *when)
{
    for (int64_t i = 0; i < t->n; i++) {
        double a = t->reqs[i].arrival_s;
        if (!isfinite(a) || a < 0 || (i > 0 && a < t->reqs[i - 1].arrival_s))
            fuzz_fail(when, NULL);
    }
}

void trace_check(const trace *t)
{
    if (t->n < 0 || (t->n > 0 && !t->reqs))
        fuzz_fail("bad request count or array", NULL);
    check_sorted_finite(t, "arrivals not finite, negative or decreasing");
    for (int64_t i = 0; i < t->n; i++) {
        const trace_req *r = &t->reqs[i];
        if (r->arrival_s > TRACE_MAX_ARRIVAL_S)
            fuzz_fail("arrival above TRACE_MAX_ARRIVAL_S", NULL);
        if (r->prompt_tokens < 1 || r->output_tokens < 1 ||
            r->prompt_tokens > TRACE_MAX_TOKENS || r->output_tokens > TRACE_MAX_TOKENS)
            fuzz_fail("token count outside [1, TRACE_MAX_TOKENS]", NULL);
        if (r->priority < 0 || (!t->has_priority && r->priority != 0))
            fuzz_fail("bad priority", NULL);
    }
    if (!t->hash_off) {
        if (t->hash_ids || t->hash_tokens)
            fuzz_fail("segment arrays without offsets", NULL);
        return;
    }
    if (t->hash_off[0] != 0 || (t->hash_off[t->n] > 0 && (!t->hash_ids || !t->hash_tokens)))
        fuzz_fail("bad segment offsets or arrays", NULL);
    for (int64_t i = 0; i < t->n; i++) {
        if (t->hash_off[i + 1] < t->hash_off[i])
            fuzz_fail("segment offsets decrease", NULL);
        int64_t covered = 0;
        for (int64_t k = t->hash_off[i]; k < t->hash_off[i + 1]; k++) {
            if (t->hash_tokens[k] < 1)
                fuzz_fail("segment of < 1 token", NULL);
            if (t->hash_block > 0 && k + 1 < t->hash_off[i + 1] &&
                t->hash_tokens[k] != t->hash_block)
                fuzz_fail("inner segment shorter than hash_block", NULL);
            covered += t->hash_tokens[k];
        }
        if (covered > t->reqs[i].prompt_tokens)
            fuzz_fail("segments cover more than the prompt", NULL);
    }
}

void trace_check_round_trip(const trace *t, void *scratch_fuzz_file)
{
    fuzz_file *out = scratch_fuzz_file;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kvs_err err;
    if (!f)
        abort();
    if (trace_write_csv(t, f, &err))
        fuzz_fail("trace_write_csv failed", &err);
    fclose(f);
    fuzz_file_set(out, (const uint8_t *)buf, len);
    free(buf);
    trace u;
    if (trace_load(out->path, &u, &err))
        fuzz_fail("a written trace does not load back", &err);
    if (u.n != t->n || u.has_priority != t->has_priority)
        fuzz_fail("round trip changed the request count", NULL);
    for (int64_t i = 0; i < t->n; i++) {
        const trace_req *a = &t->reqs[i], *b = &u.reqs[i];
        if (a->prompt_tokens != b->prompt_tokens || a->output_tokens != b->output_tokens ||
            a->priority != b->priority)
            fuzz_fail("round trip changed a request", NULL);
        if (fabs(a->arrival_s - b->arrival_s) > 1e-9 + 1e-15 * fabs(a->arrival_s))
            fuzz_fail("round trip moved an arrival by more than 1 ns", NULL);
    }
    trace_free(&u);
}

void trace_check_stats_and_scaling(trace *t)
{
    trace_stats st;
    kvs_err err;
    if (trace_stats_compute(t, &st, &err))
        fuzz_fail("trace_stats_compute failed on a valid trace", &err);
    if (st.n != t->n || !isfinite(st.span_s) || !isfinite(st.prompt_mean) ||
        !isfinite(st.output_mean) || !isfinite(st.iat_cv))
        fuzz_fail("statistics not finite", NULL);
    trace_scale_rate(t, 1e-6);
    check_sorted_finite(t, "arrivals not finite after --rate-scale 1e-6");
    trace_scale_rate(t, 1e12); /* net 1e6 */
    check_sorted_finite(t, "arrivals not finite after --rate-scale 1e6");
}
