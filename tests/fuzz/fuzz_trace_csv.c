/* fuzz_trace_csv.c — libFuzzer target for trace files through the public
 * trace_load, which detects the format: native and Azure CSV from the
 * header, Mooncake JSONL from a first '{' (fuzz_trace_jsonl covers JSONL
 * in depth).
 *
 * On success the trace must keep every documented invariant (trace_check:
 * sorted finite arrivals, token counts and priorities in range, prefix
 * segments), carry the SHA-256 of the bytes and its path, and survive a
 * round trip through trace_write_csv; statistics and the extreme
 * --rate-scale values must stay finite.  On failure the error must be one
 * line naming the file, and nothing may be left allocated. */
#include <string.h>

#include "../../traces/trace_internal.h"
#include "fuzz_util.h"
#include "trace_check.h"

static fuzz_file in_file, out_file;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int allowed[] = {KVS_EINVAL, KVS_ENOMEM, 0};
    if (in_file.path[0] == '\0') {
        fuzz_file_init(&in_file, "trace.csv");
        fuzz_file_init(&out_file, "roundtrip.csv");
    }
    fuzz_file_set(&in_file, data, size);
    trace t;
    kvs_err err = {{0}};
    int rc = trace_load(in_file.path, &t, &err);
    if (rc != KVS_OK) {
        fuzz_check_error(rc, &err, allowed, in_file.path);
        if (t.reqs || t.n || t.hash_off)
            fuzz_fail("failed load left requests behind", &err);
        return 0;
    }
    if (t.format == TRACE_FORMAT_SYNTHETIC || strcmp(t.source, in_file.path))
        fuzz_fail("loaded trace with a synthetic format or another source", NULL);
    trace_check(&t);
    /* The streamed hash equals a one-shot hash of the same bytes. */
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
