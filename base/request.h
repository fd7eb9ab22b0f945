/* request.h — one request as every layer sees it: when it arrives, how many
 * prompt tokens it brings, how many it generates, and its priority; and the
 * optional prompt-prefix identities of a whole workload.
 *
 * Traces (traces/trace.h) produce arrays of these; the scheduler consumes
 * them without knowing where they came from.  Request i of an array is
 * request id i everywhere (scheduler, metrics, store).  Pure data: no
 * functions, no allocation.
 */
#ifndef REQUEST_H
#define REQUEST_H

#include <stdint.h>

/* 24 bytes: a run holds one per request of its trace.  P and O are at
 * most TRACE_MAX_TOKENS (10^9, traces/trace.h), which every producer of
 * these checks before it stores them, so each fits an int32_t and so does
 * P + O; products and longer sums are taken in int64_t. */
typedef struct trace_req {
    double arrival_s;      /* seconds since trace start, >= 0 */
    int32_t prompt_tokens; /* P >= 1 */
    int32_t output_tokens; /* O >= 1, the first generated token included */
    int32_t priority;      /* >= 0, lower is served first; 0 by default */
} trace_req;
_Static_assert(sizeof(trace_req) == 24, "trace_req grew past 24 bytes");

/* Prompt prefix identities of n requests, in CSR layout (borrowed views):
 * the prompt of request i begins with segments off[i] .. off[i+1] - 1, in
 * order; segment k covers tokens[k] >= 1 tokens whose content is identified
 * by ids[k] together with every id before it in the request (equal id
 * sequences mean equal tokens).  A request's segments cover at most its
 * prompt.  off == NULL: the workload has no prefix identities.  How they map
 * onto KV blocks: docs/semantics-extensions.md, section P. */
typedef struct req_prefixes {
    int64_t n;             /* requests described */
    const int64_t *off;    /* [n + 1] segment offsets, or NULL */
    const uint64_t *ids;   /* [off[n]] segment ids */
    const int32_t *tokens; /* [off[n]] tokens per segment */
    int32_t grid;          /* tokens of every full segment when the source cuts
                              prompts on a fixed grid (512 for Mooncake and the
                              native CSV's hash_ids); 0 when segments vary
                              (synthetic system prompts and turns) */
} req_prefixes;

#endif
