/* fuzz_trace_jsonl.c — libFuzzer target for Mooncake JSONL traces
 * (trace_load_jsonl), and for trace_load's detection of them.
 *
 * On success: format Mooncake, 512-token segments exactly covering each
 * prompt (one hash id per started block), every trace invariant
 * (trace_check), SHA-256 of the bytes, a CSV round trip of the requests;
 * trace_load on the same bytes, when they start with '{', gives the same
 * requests and segments.  On failure: one line naming the file, nothing
 * left allocated, and trace_load fails the same way. */
#include <string.h>

#include "../../traces/trace_internal.h"
#include "fuzz_util.h"
#include "trace_check.h"

static fuzz_file in_file, out_file;

static int starts_with_brace(const uint8_t *d, size_t n)
{
    size_t i = 0;
    while (i < n && (d[i] == ' ' || (d[i] >= '\t' && d[i] <= '\r')))
        i++;
    return i < n && d[i] == '{';
}

static int same_trace(const trace *a, const trace *b)
{
    if (a->n != b->n || memcmp(a->reqs, b->reqs, (size_t)a->n * sizeof *a->reqs))
        return 0;
    if (!a->hash_off || !b->hash_off)
        return a->hash_off == b->hash_off;
    int64_t ns = a->hash_off[a->n];
    return !memcmp(a->hash_off, b->hash_off, (size_t)(a->n + 1) * sizeof *a->hash_off) &&
           !memcmp(a->hash_ids, b->hash_ids, (size_t)ns * sizeof *a->hash_ids) &&
           !memcmp(a->hash_tokens, b->hash_tokens, (size_t)ns * sizeof *a->hash_tokens);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int allowed[] = {KVS_EINVAL, KVS_ENOMEM, 0};
    if (in_file.path[0] == '\0') {
        fuzz_file_init(&in_file, "trace.jsonl");
        fuzz_file_init(&out_file, "roundtrip.csv");
    }
    fuzz_file_set(&in_file, data, size);
    trace t, u;
    kvs_err err = {{0}}, err2 = {{0}};
    int rc = trace_load_jsonl(in_file.path, &t, &err);
    int detected = starts_with_brace(data, size);
    int rc2 = detected ? trace_load(in_file.path, &u, &err2) : -1;
    if (rc != KVS_OK) {
        fuzz_check_error(rc, &err, allowed, in_file.path);
        if (t.reqs || t.n || t.hash_off || t.hash_ids || t.hash_tokens)
            fuzz_fail("failed load left requests behind", &err);
        if (detected && (rc2 != rc || strcmp(err.msg, err2.msg)))
            fuzz_fail("trace_load fails differently from trace_load_jsonl", &err2);
        if (rc2 == KVS_OK)
            trace_free(&u);
        return 0;
    }
    if (t.format != TRACE_FORMAT_MOONCAKE || t.hash_block != 512 || !t.hash_off)
        fuzz_fail("JSONL trace without Mooncake format or segments", NULL);
    trace_check(&t);
    for (int64_t i = 0; i < t.n; i++) {
        int64_t covered = 0, segs = t.hash_off[i + 1] - t.hash_off[i];
        for (int64_t k = t.hash_off[i]; k < t.hash_off[i + 1]; k++)
            covered += t.hash_tokens[k];
        if (covered != t.reqs[i].prompt_tokens || segs != (t.reqs[i].prompt_tokens + 511) / 512)
            fuzz_fail("segments do not cover the prompt in 512-token blocks", NULL);
    }
    if (detected) {
        if (rc2 != KVS_OK || !same_trace(&t, &u))
            fuzz_fail("trace_load gives another trace than trace_load_jsonl", &err2);
        trace_free(&u);
    }
    trace_sha256 c;
    char hex[65];
    trace_sha256_init(&c);
    trace_sha256_update(&c, data, size);
    trace_sha256_hex(&c, hex);
    if (strcmp(hex, t.sha256))
        fuzz_fail("sha256 differs from the bytes' hash", NULL);
    trace_check_round_trip(&t, &out_file);
    trace_check_stats_and_scaling(&t);
    trace_free(&t);
    return 0;
}
