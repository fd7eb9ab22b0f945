/* trace.h — request traces: loading real ones, generating synthetic ones.
 *
 * A trace is a flat array of requests sorted by arrival time.  Request i of a
 * trace is request id i everywhere else in kvsim (scheduler, store).  Formats
 * read (detected from the header line):
 *   native  `arrival_s,prompt_tokens,output_tokens[,priority][,hash_ids]`
 *           (arrival_s in seconds, non-decreasing; priority integer >= 0;
 *           hash_ids: prefix segment ids separated by spaces, empty for
 *           none, at most ceil(prompt_tokens / 512), one per 512-token
 *           segment as in Mooncake, the last one holding the remainder)
 *   Azure   `TIMESTAMP,ContextTokens,GeneratedTokens` (Azure LLM inference
 *           2023): arrival = timestamp - first timestamp.
 *   Mooncake JSONL (FAST'25), one object per line:
 *           {"timestamp": ms, "input_length": P, "output_length": O,
 *            "hash_ids": [prefix-chained ids of the 512-token blocks]}
 *           (chosen by the .jsonl extension or a first non-space '{').
 * CSV parsing uses libcsv, JSONL json-c.  Every malformed row is an error naming file:line;
 * nothing is skipped silently.  Synthetic traces come from a spec string (see
 * trace_synth_parse) and a seed, and are byte-for-byte reproducible.
 */
#ifndef TRACE_H
#define TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "../base/kvs.h"
#include "../base/request.h"

/* Limits on what a trace may hold; trace_load, trace_synth_gen and lengths
 * files refuse more with a message naming the row or key.  A token count of
 * at most TRACE_MAX_TOKENS keeps the simulator's per-request products such
 * as (P + O)^2 inside int64_t; arrivals of at most TRACE_MAX_ARRIVAL_S
 * (about 31.7 years) stay finite under --rate-scale 1e-6, and a double near
 * that time still resolves 0.12 us. */
#define TRACE_MAX_TOKENS INT64_C(1000000000) /* tokens per prompt or output */
#define TRACE_MAX_ARRIVAL_S 1e9              /* seconds since trace start */


typedef enum trace_format {
    TRACE_FORMAT_NATIVE = 0,
    TRACE_FORMAT_AZURE = 1,
    TRACE_FORMAT_SYNTHETIC = 2,
    TRACE_FORMAT_MOONCAKE = 3
} trace_format;

typedef struct trace {
    trace_req *reqs;     /* [n], non-decreasing arrival_s; owned */
    int64_t n;           /* number of requests, may be 0 */
    trace_format format; /* where the requests came from */
    int has_priority;    /* 1 if priorities were read or generated */
    char source[1024];   /* file path, or the synthetic spec string */
    char sha256[65];     /* hex SHA-256 of the file's bytes; "" if synthetic */
    /* Prompt prefix hashes, NULL when the trace has none (CSR layout): the
     * prompt of request i begins with segments hash_off[i] ..
     * hash_off[i+1] - 1, in order; segment k covers hash_tokens[k] >= 1
     * tokens whose content is identified by hash_ids[k] together with all
     * the ids before it in the request (equal id sequences mean equal
     * tokens).  A request's segments cover at most its prompt.  How they map
     * onto KV blocks: docs/semantics-extensions.md, section P. */
    int64_t *hash_off;    /* [n + 1] segment offsets, or NULL */
    uint64_t *hash_ids;   /* [hash_off[n]] segment ids */
    int32_t *hash_tokens; /* [hash_off[n]] tokens per segment */
    int32_t hash_block;   /* tokens per full segment in the source (512 for
                             Mooncake); 0 when segments vary (synthetic) */
} trace;

/* The trace's prefix identities as the scheduler takes them (borrowed). */
static inline req_prefixes trace_prefixes(const trace *t)
{
    req_prefixes p = {t->n, t->hash_off, t->hash_ids, t->hash_tokens, t->hash_block};
    return p;
}

/* Load a CSV trace, detecting the format from its header.  On error returns
 * KVS_EINVAL/KVS_EIO with "path:line: what" in err and leaves *out empty.
 * Rejected: unknown header, wrong field count, blank lines, non-integer
 * token counts or counts outside [1, TRACE_MAX_TOKENS], negative or
 * decreasing arrivals or arrivals above TRACE_MAX_ARRIVAL_S, priority < 0,
 * malformed or decreasing Azure timestamps, an empty file.  A
 * header alone gives n = 0.  Azure arrivals are computed exactly in integer
 * nanoseconds from the civil date, then converted once to seconds.  Sets
 * source = path and sha256 of the bytes read.  Cost: O(file size). */
int trace_load(const char *path, trace *out, kvs_err *err);

/* Load a Mooncake JSONL trace (what trace_load does for such a file):
 * arrival_s = timestamp / 1000; prompt = input_length, output =
 * output_length; hash_ids become 512-token segments, the last one holding
 * the prompt's remainder.  Errors name path:line: a line that is not one
 * JSON object, a missing, unknown or non-integer key, counts < 1, a
 * negative or decreasing timestamp, a negative id, or len(hash_ids) !=
 * ceil(input_length / 512); a blank line or an empty file.  Cost:
 * O(file size). */
int trace_load_jsonl(const char *path, trace *out, kvs_err *err);

/* Free the request array; safe on a zeroed or already freed trace. */
void trace_free(trace *t);

/* Divide every arrival time by k (> 0): k = 2 doubles the arrival rate. */
void trace_scale_rate(trace *t, double k);

/* Synthetic workloads.  Spec: comma-separated key=value pairs:
 *   arrival=poisson|gamma|burst   (burst: every request at time 0)
 *   rate=R        requests/s (> 0; required unless burst)
 *   cv=C          coefficient of variation of inter-arrival times (gamma)
 *   n=N           number of requests (required, >= 1)
 *   prompt=L | prompt=uniform:A:B     fixed or uniform [A,B] prompt length
 *   output=L | output=uniform:A:B     likewise for output length
 *   lengths=FILE  sample (prompt, output) pairs from a lengths CSV with
 *                 columns num_prefill_tokens,num_decode_tokens,...
 *   priorities=P0:S0/P1:S1/...   priority classes with shares (sum to 1)
 *   system_prompt=S  every prompt starts with the same S-token prefix,
 *                 followed by the sampled prompt length (P = S + sampled)
 *   turns=K       multi-turn conversations of K turns (default 1): turn
 *                 k+1's prompt is turn k's prompt + turn k's output + a
 *                 newly sampled user part (see trace_synth_gen)
 * system_prompt > 0 or turns > 1 give the trace prefix hashes (hash_off).
 * e.g. "arrival=poisson,rate=8,n=1000,lengths=traces/lengths_sharegpt.csv". */
typedef enum trace_arrival {
    TRACE_ARRIVAL_POISSON = 0,
    TRACE_ARRIVAL_GAMMA = 1,
    TRACE_ARRIVAL_BURST = 2
} trace_arrival;

typedef enum trace_len_kind {
    TRACE_LEN_FIXED = 0,
    TRACE_LEN_UNIFORM = 1,
    TRACE_LEN_FILE = 2
} trace_len_kind;

#define TRACE_MAX_CLASSES 16

typedef struct trace_synth_spec {
    trace_arrival arrival;
    double rate;          /* requests per second */
    double cv;            /* inter-arrival CV for gamma (1 = Poisson) */
    int64_t n;            /* requests */
    trace_len_kind prompt_kind, output_kind; /* FILE applies to both */
    int64_t prompt_a, prompt_b;              /* fixed: a; uniform: [a, b] */
    int64_t output_a, output_b;
    char lengths_path[1024];                 /* when kind == FILE */
    int n_classes;                           /* 0 = all priority 0 */
    int32_t class_priority[TRACE_MAX_CLASSES];
    double class_share[TRACE_MAX_CLASSES];   /* sums to 1 */
    int64_t system_prompt;                   /* shared prefix, tokens (0 = none) */
    int64_t turns;                           /* turns per conversation (>= 1) */
} trace_synth_spec;

/* Parse a spec string; errors name the offending key ("--synthetic: rate:
 * must be > 0").  arrival defaults to poisson; n is required; rate unless
 * burst; cv with gamma (and only there); prompt and output unless lengths
 * (which excludes them).  Shares must be > 0 and sum to 1 within 1e-6. */
int trace_synth_parse(const char *spec, trace_synth_spec *out, kvs_err *err);

/* Generate the trace for (spec, seed).  Arrivals: the first request arrives
 * at the first sampled inter-arrival time (not at 0), each later one a fresh
 * gap after the previous; poisson gaps are exponential with mean 1/rate,
 * gamma gaps Gamma(shape k = 1/cv^2, scale 1/(rate*k)); burst puts all at 0.
 * Arrival times are rounded to whole nanoseconds so that trace_write_csv
 * reproduces them exactly.  Lengths: fixed, uniform on [a, b] inclusive, or
 * rows of the lengths file drawn uniformly with replacement (a row with a
 * token count outside [1, TRACE_MAX_TOKENS] is an error naming file:line);
 * an arrival past TRACE_MAX_ARRIVAL_S (rate too low for n) is an error.  Priorities: each request
 * draws its class with the given shares.  The seed feeds three independent
 * rng.h streams (arrivals, lengths, priorities), so changing e.g. the
 * lengths leaves the arrival times unchanged.  Prefixes: with
 * system_prompt S or turns K > 1, request i belongs to conversation i mod C
 * (C = ceil(n / K)) as its turn floor(i / C); the sampled prompt length is
 * the turn's new user part u_i; turn 0's prompt is S + u_i, a later turn's
 * is the previous turn's prompt + its output + u_i, and the trace gets
 * prefix segments [system][user][output][user]... whose ids repeat exactly
 * where the tokens do.  Without either key the trace is as before and has
 * no hashes.  Sets format SYNTHETIC, source = spec_text, sha256 "".
 * Cost: O(n * K) (+ reading a lengths file). */
/* Give every request of t a priority class "P0:S0/P1:S1/..." (shares in
 * (0, 1] summing to 1, as the synthetic spec's priorities=), one seeded
 * uniform draw per request in trace order; sets has_priority.  Errors
 * (KVS_EINVAL) start with "--priorities: ".  Cost: O(n * classes). */
int trace_assign_priorities(trace *t, const char *classes, uint64_t seed, kvs_err *err);

int trace_synth_gen(const trace_synth_spec *spec, const char *spec_text,
                    uint64_t seed, trace *out, kvs_err *err);

/* Write in native CSV format (with header; priority column if has_priority).
 * Arrival times are printed with %.9f: times that are whole nanoseconds
 * (synthetic and Azure traces, native files with <= 9 decimals) load back
 * as the same doubles; others are rounded to 1 ns.  KVS_EIO on a write
 * error.  Cost: O(n). */
int trace_write_csv(const trace *t, FILE *f, kvs_err *err);

typedef struct trace_stats {
    int64_t n;
    double span_s;            /* last arrival - first arrival */
    double rate_rps;          /* n / span_s (0 if span is 0) */
    double iat_cv;            /* std/mean of inter-arrival times */
    double iod_1s, iod_10s, iod_60s; /* index of dispersion of counts per bin */
    double prompt_mean, prompt_p50, prompt_p90, prompt_p99, prompt_max;
    double output_mean, output_p50, output_p90, output_p99, output_max;
} trace_stats;

/* Compute statistics.  IAT CV uses the population standard deviation of
 * the n-1 gaps; the index of dispersion is variance/mean of the request
 * count in the full bins of 1, 10, 60 s starting at the first arrival (0
 * if fewer than 2 full bins); percentiles are nearest-rank (value at rank
 * ceil(p*n/100)).  An empty trace gives all zeros.  Cost: O(n log n). */
int trace_stats_compute(const trace *t, trace_stats *out, kvs_err *err);

/* Hex SHA-256 of a file's bytes into hex[65]. */
int trace_sha256_file(const char *path, char hex[65], kvs_err *err);

/* Write t as native CSV to `path` atomically: a temporary file in the same
 * directory, flushed and renamed over path, so a reader sees the old file
 * or the whole new one, never a part.  Errors name the path.  Cost: O(n). */
int trace_write_csv_path(const trace *t, const char *path, kvs_err *err);

/* ------------------------------------------------------------ importers (import*.c) */

/* Datasets people have, converted to a native trace (`kvsim trace import`):
 *   sharegpt      ShareGPT JSON: an array of {"conversations": [{"from",
 *                 "value"}, ...]}; one request per conversation from its
 *                 first turn (prompt) and the reply (turn 2), as vLLM's
 *                 benchmarks sample it, or with turns = 1 one per
 *                 (turn, reply) pair, the prompt holding the whole
 *                 conversation so far.  A turn's tokens are its "tokens"
 *                 count when it has one, else ceil(characters /
 *                 chars_per_token).  Conversations of fewer than 2 turns
 *                 are skipped (counted).
 *   burstgpt      BurstGPT CSV: Timestamp,Model,Request tokens,Response
 *                 tokens,Total tokens,Log Type; arrival = Timestamp - first;
 *                 rows with 0 request or response tokens (failed requests)
 *                 are skipped (counted).
 *   azure2024     Azure LLM inference 2024 CSV: TIMESTAMP,ContextTokens,
 *                 GeneratedTokens with timestamps "YYYY-MM-DD
 *                 HH:MM:SS.ffffff[+HH:MM]"; rows with 0 tokens skipped.
 *   vllm-custom   `vllm bench serve --dataset-name custom` JSONL: one
 *                 {"prompt": TEXT} per line, optional "prompt_tokens" /
 *                 "output_tokens" counts; the output is output_len tokens
 *                 when a line gives none.
 * Datasets without times (sharegpt, vllm-custom) arrive as a Poisson
 * process of `rate` requests/s drawn with `seed`, or all at time 0 when
 * rate is 0 (vLLM's default, an infinite request rate).  Malformed input
 * (bad JSON or CSV, a missing or mistyped field, a negative count, a
 * decreasing time) is one error naming the file and the record
 * ("FILE: record 12: conversations[1]: no \"value\"", "FILE:7: ..."). */
typedef struct trace_import_opts {
    double chars_per_token; /* characters (UTF-8 code points) per token; default 4 */
    int turns;              /* sharegpt: 1 = every turn, 0 = the first (default) */
    double rate;            /* requests/s of generated arrivals; 0 = all at 0 (default) */
    uint64_t seed;          /* seed of generated arrivals; default 0 */
    int64_t output_len;     /* vllm-custom: output tokens of a line without a count; 256 */
} trace_import_opts;

/* What an import read. */
typedef struct trace_import_info {
    int64_t records;        /* conversations, rows or lines read */
    int64_t requests;       /* requests written */
    int64_t skipped;        /* records left out, for skipped_why */
    char skipped_why[96];   /* "conversations of fewer than 2 turns", or "" */
} trace_import_info;

typedef struct trace_importer {
    const char *name;       /* FORMAT of kvsim trace import: "sharegpt" */
    const char *doc;        /* one line for --help */
    /* Required: read `path` into *out (arrival order). */
    int (*read)(const char *path, const trace_import_opts *o, trace *out,
                trace_import_info *info, kvs_err *err);
} trace_importer;

void trace_import_opts_init(trace_import_opts *o);
/* Set option `name` ("chars-per-token", "turns" (value ignored), "rate",
 * "seed", "output-len") from text; errors name "--NAME". */
int trace_import_opt_set(trace_import_opts *o, const char *name, const char *value,
                         kvs_err *err);
size_t trace_importer_count(void);
const trace_importer *trace_importer_at(size_t i);        /* NULL past the end */
const trace_importer *trace_importer_find(const char *name); /* NULL if none */

/* Read `in` as `format` and write it to `out_path` as native CSV
 * atomically (trace_write_csv_path).  info may be NULL.  Errors: an
 * unknown format names the known ones; the reader's errors; the writer's.
 * Cost: O(input). */
int trace_import(const char *format, const char *in, const char *out_path,
                 const trace_import_opts *o, trace_import_info *info, kvs_err *err);

#endif
