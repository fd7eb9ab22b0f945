/* trace_check.h — the invariants every loaded or generated trace keeps
 * (traces/trace.h), checked by the trace fuzz targets: requests sorted by
 * finite arrival times in [0, TRACE_MAX_ARRIVAL_S], token counts in
 * [1, TRACE_MAX_TOKENS], priorities >= 0 (all 0 without a priority column),
 * and, when present, well-formed prefix segments covering at most each
 * prompt.  A broken invariant aborts through fuzz_fail. */
#ifndef TRACE_CHECK_H
#define TRACE_CHECK_H

#include "../../traces/trace.h"

/* Check t's requests and prefix segments.  Cost: O(n + segments). */
void trace_check(const trace *t);

/* Write t as native CSV into `scratch` (a fuzz_file path) and load it back:
 * the same requests, arrivals within 1 ns.  Cost: O(n). */
void trace_check_round_trip(const trace *t, void *scratch_fuzz_file);

/* Statistics are finite, and arrivals stay finite and sorted under the
 * extreme --rate-scale values (1e-6, 1e6).  Modifies t's arrivals. */
void trace_check_stats_and_scaling(trace *t);

#endif
