#!/usr/bin/env bash
# cli_fixture.sh — behaviour is unchanged by moves of code: the runs of
# tests/fixtures/scenarios.txt give byte for byte the `requests` rows and
# the `runs` metrics recorded in tests/fixtures/rows.txt (made with kvsim
# 0.1.0 before its run pipeline moved into job/).  Reals are compared at
# full precision (%.17g).
#
#   tests/cli_fixture.sh KVSIM            compare
#   tests/cli_fixture.sh KVSIM --write    re-record rows.txt (only when a
#                                         change of results is intended)
set -euo pipefail
KVSIM=$(realpath "${1:-build/kvsim}")
cd "$(dirname "$0")/.."
command -v sqlite3 >/dev/null || { echo "SKIP: cli_fixture needs the sqlite3 shell"; exit 0; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
DB=$T/f.db
n=0
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  n=$((n + 1))
  # shellcheck disable=SC2086  # the scenario's flags split on blanks
  "$KVSIM" run --db "$DB" --quiet $line >/dev/null
done < tests/fixtures/scenarios.txt

r() { printf "printf('%%!.17g', %s)" "$1"; }
metrics="n_requests, n_finished, n_rejected"
for d in ttft tpot e2e norm_latency; do
  for s in p50 p90 p99 mean; do metrics+=", $(r ${d}_${s}_s)"; done
done
for c in throughput_tok_s throughput_req_s mean_kv_blocks mean_batch makespan_s \
         slo_attainment goodput_req_s prefix_hit_rate prefix_block_hit_rate; do
  metrics+=", $(r $c)"
done
metrics+=", preemptions, preempt_recompute, preempt_swap, preempt_priority, peak_kv_blocks,
  n_steps, prefix_hit_tokens, prefix_saved_tokens, prefix_evictions, prefill_chunks,
  kv_blocks, max_batched_tokens, max_model_len, swap_blocks, $(r swap_block_s)"
{
  sqlite3 "$DB" "SELECT run_id, $metrics FROM runs ORDER BY run_id"
  sqlite3 "$DB" "SELECT run_id, req_id, $(r arrival_s), prompt_tokens, output_tokens, priority,
    status, $(r first_token_s), $(r finish_s), preemptions, swaps, $(r swapped_s)
    FROM requests ORDER BY run_id, req_id"
} > "$T/rows.txt"

if [ "${2:-}" = --write ]; then
  cp "$T/rows.txt" tests/fixtures/rows.txt
  echo "cli_fixture: wrote tests/fixtures/rows.txt ($n runs, $(wc -l < "$T/rows.txt") lines)"
  exit 0
fi
if ! cmp -s "$T/rows.txt" tests/fixtures/rows.txt; then
  echo "FAIL: rows differ from tests/fixtures/rows.txt:"
  diff tests/fixtures/rows.txt "$T/rows.txt" | head -20
  exit 1
fi
echo "cli_fixture: $n runs, $(wc -l < "$T/rows.txt") rows identical to the fixture"
echo "1 passed, 0 failed"
