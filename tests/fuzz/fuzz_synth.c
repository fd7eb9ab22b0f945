/* fuzz_synth.c — libFuzzer target for synthetic workload specs
 * (trace_synth_parse) and their generation (trace_synth_gen), including the
 * lengths CSV a spec may name.
 *
 * Input: the spec on the first line; the bytes after the first '\n' are the
 * contents of the lengths file, which replaces any lengths=FILE path.  The
 * request count is capped (n <= 2000) so that each input runs in
 * microseconds.  On success the generated trace must match its spec (count,
 * lengths within bounds, priorities from the classes, sorted finite
 * arrivals) and be identical when generated twice; on failure the error
 * must be one line naming --synthetic or the lengths file. */
#include <stdlib.h>
#include <string.h>

#include "../../traces/trace.h"
#include "fuzz_util.h"
#include "trace_check.h"

#define FUZZ_MAX_N 2000

static fuzz_file lengths_file;

static void check_error(int rc, const kvs_err *err)
{
    static const int allowed[] = {KVS_EINVAL, KVS_ENOMEM, 0};
    fuzz_check_error(rc, err, allowed, NULL);
    if (!strstr(err->msg, "--synthetic") && !strstr(err->msg, lengths_file.path))
        fuzz_fail("error names neither --synthetic nor the lengths file", err);
}

static void check_length(int64_t v, trace_len_kind kind, int64_t a, int64_t b)
{
    if (kind != TRACE_LEN_FILE && (v < a || v > b))
        fuzz_fail("generated length outside the spec's bounds", NULL);
}

static void check_trace(const trace_synth_spec *s, const char *text, const trace *t)
{
    int prefixes = s->system_prompt > 0 || s->turns > 1;
    if (t->n != s->n || !t->reqs || t->format != TRACE_FORMAT_SYNTHETIC ||
        strcmp(t->source, text) || t->sha256[0] || t->has_priority != (s->n_classes > 0) ||
        !t->hash_off != !prefixes)
        fuzz_fail("generated trace header does not match the spec", NULL);
    trace_check(t);
    for (int64_t i = 0; i < t->n; i++) {
        const trace_req *r = &t->reqs[i];
        if (s->arrival == TRACE_ARRIVAL_BURST && r->arrival_s != 0)
            fuzz_fail("burst arrival not at 0", NULL);
        /* With prefixes the prompt is system + earlier turns + the sampled
         * user part, which is the segment USER that ends the request. */
        int64_t user = prefixes ? t->hash_tokens[t->hash_off[i + 1] - 1] : r->prompt_tokens;
        check_length(user, s->prompt_kind, s->prompt_a, s->prompt_b);
        check_length(r->output_tokens, s->output_kind, s->output_a, s->output_b);
        int found = s->n_classes == 0 && r->priority == 0;
        for (int c = 0; c < s->n_classes; c++)
            found |= r->priority == s->class_priority[c];
        if (!found)
            fuzz_fail("priority not among the spec's classes", NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (lengths_file.path[0] == '\0')
        fuzz_file_init(&lengths_file, "lengths.csv");
    const uint8_t *nl = memchr(data, '\n', size);
    size_t spec_len = nl ? (size_t)(nl - data) : size;
    char *text = fuzz_strndup(data, spec_len);
    if (nl)
        fuzz_file_set(&lengths_file, nl + 1, size - spec_len - 1);
    else
        fuzz_file_set(&lengths_file, NULL, 0);

    trace_synth_spec spec;
    kvs_err err = {{0}};
    int rc = trace_synth_parse(text, &spec, &err);
    if (rc != KVS_OK) {
        check_error(rc, &err);
        goto out;
    }
    if (spec.n < 1 || (spec.arrival != TRACE_ARRIVAL_BURST && !(spec.rate > 0)))
        fuzz_fail("parse accepted a spec without n or rate", NULL);
    if (spec.n > FUZZ_MAX_N)
        spec.n = FUZZ_MAX_N;
    if (spec.prompt_kind == TRACE_LEN_FILE)
        snprintf(spec.lengths_path, sizeof spec.lengths_path, "%s", lengths_file.path);

    trace a, b;
    rc = trace_synth_gen(&spec, text, 42, &a, &err);
    if (rc != KVS_OK) {
        check_error(rc, &err);
        if (a.reqs || a.n || a.hash_off)
            fuzz_fail("failed generation left requests behind", &err);
        goto out;
    }
    check_trace(&spec, text, &a);
    if (trace_synth_gen(&spec, text, 42, &b, &err))
        fuzz_fail("second generation failed", &err);
    if (b.n != a.n || memcmp(a.reqs, b.reqs, (size_t)a.n * sizeof *a.reqs) ||
        (a.hash_off && (memcmp(a.hash_off, b.hash_off, (size_t)(a.n + 1) * sizeof *a.hash_off) ||
                        memcmp(a.hash_ids, b.hash_ids,
                               (size_t)a.hash_off[a.n] * sizeof *a.hash_ids))))
        fuzz_fail("same spec and seed gave different traces", NULL);
    trace_check_stats_and_scaling(&a);
    trace_free(&a);
    trace_free(&b);
out:
    free(text);
    return 0;
}
