/* engine.h — the event loop: replays a trace's arrivals and the engine's
 * step completions on one clock.  Arrivals are fed one at a time from the
 * sorted trace (only the next one is ever queued), a step's end is an event,
 * and a PLAN event asks the scheduler for the next step after every other
 * event of the same instant has been handled — so a request arriving
 * exactly when a step ends is seen by the next iteration, and an idle engine
 * jumps straight to the next arrival.
 */
#ifndef ENGINE_H
#define ENGINE_H

#include "../scheduler/sched.h"
#include "../traces/trace.h"
#include "../base/kvs.h"

/* Run `s` over every request of `tr` until all have finished or been
 * rejected.  *end_s receives the time of the last event.  Fails with
 * KVS_EINVAL if the engine can make no progress (sched_error), KVS_ENOMEM,
 * or KVS_EINTERNAL if requests are left unresolved.
 * Cost: O(steps * batch + n log n). */
int engine_run(sched *s, const trace *tr, double *end_s, kvs_err *err);

#endif
