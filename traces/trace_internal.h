/* trace_internal.h — helpers shared by the .c files of the traces module
 * only (not part of its API; include traces/trace.h instead).
 *
 * - an incremental SHA-256 (FIPS 180-4), used to fingerprint trace files;
 * - a CSV row reader on top of libcsv that hands each record, with the
 *   physical line it starts on, to a callback and hashes the bytes it reads;
 * - strict parsers for the integer and decimal fields of trace files;
 * - what the dataset importers share.
 */
#ifndef TRACE_INTERNAL_H
#define TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../base/kvs.h"
#include "trace.h"

/* The standard's own implementation (sha256.c), always built. */
typedef struct trace_sha256_ref {
    uint32_t h[8];         /* chaining state */
    uint64_t len;          /* bytes hashed so far */
    unsigned char buf[64]; /* pending partial block */
    size_t nbuf;           /* bytes used in buf, < 64 */
} trace_sha256_ref;

void trace_sha256_ref_init(trace_sha256_ref *c);
void trace_sha256_ref_update(trace_sha256_ref *c, const void *data, size_t n);
void trace_sha256_ref_hex(trace_sha256_ref *c, char hex[65]);

/* The SHA-256 the traces use: the system's libcrypto where the build found
 * it (KVSIM_HAVE_LIBCRYPTO; its state is opaque bytes here, large enough
 * for OpenSSL's SHA256_CTX, checked in sha256.c), else trace_sha256_ref.
 * Both give the same digest (tests/test_traces.c). */
typedef struct trace_sha256 {
    union {
        trace_sha256_ref ref;
        uint64_t ossl[16]; /* OpenSSL SHA256_CTX (112 bytes) */
    } u;
} trace_sha256;

void trace_sha256_init(trace_sha256 *c);
/* Hash n more bytes.  Cost: O(n). */
void trace_sha256_update(trace_sha256 *c, const void *data, size_t n);
/* Finish and write the digest as 64 lowercase hex digits + NUL. */
void trace_sha256_hex(trace_sha256 *c, char hex[65]);
/* "libcrypto" or "builtin": which one trace_sha256_* uses. */
const char *trace_sha256_impl(void);

/* Called once per CSV record, header included.  `line` is the 1-based
 * physical line the record starts on; fields[i] is NUL-terminated and holds
 * no NUL byte.  Return KVS_OK to continue, or a status (with err filled in)
 * to stop reading. */
typedef int (*trace_csv_row_fn)(void *ctx, int64_t line, char **fields,
                                int nfields, kvs_err *err);

/* Read the CSV file at `path` and call fn for each record in order.  Blank
 * lines and malformed quoting are errors naming path:line; LF, CRLF and a
 * missing final newline are all accepted.  If sha_hex is non-NULL it receives
 * the SHA-256 of the file's bytes (only on success).  A file with no record
 * at all calls fn zero times and returns KVS_OK.  Errors: KVS_EIO "path:
 * cannot open: ..." / read error, KVS_EINVAL from the parser or from fn,
 * KVS_ENOMEM.  Cost: O(file size), memory O(longest record). */
int trace_csv_read(const char *path, trace_csv_row_fn fn, void *ctx,
                   char sha_hex[65], kvs_err *err);

/* 1 if path names a Mooncake JSONL trace: it ends in ".jsonl", or its
 * first non-space byte is '{' (trace_jsonl.c).  Unreadable: 0. */
int trace_is_jsonl(const char *path);

/* Strict field parsers: the whole string must be the number.  Return 0 on
 * success, -1 on failure with a short reason ("is not an integer", "is out
 * of range") in *why. */
int trace_parse_i64(const char *s, int64_t *out, const char **why);
/* Plain decimal (digits, optional sign, point and exponent); no hex, inf or
 * nan. */
int trace_parse_f64(const char *s, double *out, const char **why);

/* Parse "YYYY-MM-DD HH:MM:SS[.f{1,9}]" (UTC) into whole seconds since 1970
 * and nanoseconds; 0 on success, -1 with *why set otherwise. */
int trace_parse_timestamp(const char *s, int64_t *sec, int64_t *ns, const char **why);

/* ---- shared by the importers (import.c, import_json.c) */

/* Append r to t (growing t->reqs; *cap is its capacity).  KVS_ENOMEM
 * naming path. */
int trace_import_push(trace *t, int64_t *cap, trace_req r, const char *path, kvs_err *err);
/* Tokens of a text: ceil(UTF-8 code points / chars_per_token), at least 1. */
int64_t trace_text_tokens(const char *text, double chars_per_token);
/* Give t's requests Poisson arrivals of o->rate (o->seed), or all 0. */
void trace_import_arrivals(trace *t, const trace_import_opts *o);

/* The JSON importers (import_json.c). */
int trace_import_sharegpt(const char *path, const trace_import_opts *o, trace *out,
                          trace_import_info *info, kvs_err *err);
int trace_import_vllm_custom(const char *path, const trace_import_opts *o, trace *out,
                             trace_import_info *info, kvs_err *err);

#endif
