#!/usr/bin/env bash
# cli_sglang.sh — `--engine sglang` end to end: the profile's defaults and
# memory rule in the summary and the store, the golden scenario A of
# docs/semantics-sglang.md through the CLI, its flags refused with one line
# naming the flag and the profile (exit 2, no run stored), SGLang-only
# flags refused under the other engines, and the profile in `compare` and
# `capacity`.
. "$(dirname "$0")/testlib.sh"
W='arrival=burst,n=50,prompt=128,output=64'
R=(--model llama-3.1-8b --gpu a100-80g --synthetic "$W")

"$KVSIM" run --engine sglang "${R[@]}" --db "$T/a.db" > "$T/out.txt" 2>&1
[ $? -eq 0 ] && ok || bad "sglang run: $(cat "$T/out.txt")"
grep -q "engine           sglang: fcfs, chunked prefill on, radix cache on, overlap scheduler on, max-prefill-tokens 16384, conservativeness 1, mem fraction 0.830" \
  "$T/out.txt" && ok || bad "summary lacks the profile: $(head -3 "$T/out.txt")"
# The pool by SGLang's rule, worked out by hand (docs/semantics-sglang.md 11.3, 12):
#   G = 81920 MiB: chunked_prefill_size 8192; reserved = 512 + 1.5 x 8192 + 1024 x 1/8
#   + 2 x 256 + 8 x 58 = 13904 MiB; f = round(68016 / 81920, 3) = 0.830.
#   Free before the weights = 80 GiB - 0.43 GiB (driver) - 0.68 GiB (SGLang's
#   CUDA context at TP 1; no peers) = 84,707,492,495 B; x 0.830 =
#   70,307,218,770 B; less 16,060,522,496 B of weights = 54,246,696,274 B
#   = 413,869 slots of 131,072 B.
#   max_running_requests = min(clamp(413869 / 131072 x 512 = 1616, 2048, 4096),
#   413869 / 2) = 2048.
grep -q "KV cache         413869 blocks x 1 tokens; max-seqs 2048, max-batched-tokens 8192" \
  "$T/out.txt" && ok || bad "capacity/defaults: $(grep 'KV cache' "$T/out.txt")"
r=$(sqlite3 "$T/a.db" "select engine, block_size, chunked_prefill, prefix_caching,
  max_prefill_tokens, conservativeness, overlap_schedule, max_seqs, gpu_mem_util from runs")
[ "$r" = "sglang|1|1|1|16384|1.0|1|2048|0.83" ] && ok || bad "stored profile: $r"

# Scenario A (15.1) through the CLI: N 64, C 8, M 8, radix off, overlap off,
# d = 1 + 0.5 x tokens: r0 tokens at 4.5, 10.5, 12; r1 at 4.5, 10.5; r2 at 8.5.
printf 'arrival_s,prompt_tokens,output_tokens\n0,3,3\n0,4,2\n2.0,6,1\n' > "$T/a.csv"
"$KVSIM" run --engine sglang --trace "$T/a.csv" --kv-blocks 64 --max-seqs 8 \
  --max-batched-tokens 8 --no-prefix-caching --no-overlap-schedule --max-model-len 4096 \
  --cost affine:1,0.5,0,0 --db "$T/g.db" > "$T/g.txt" 2>&1
[ $? -eq 0 ] && ok || bad "scenario A run: $(cat "$T/g.txt")"
r=$(sqlite3 "$T/g.db" "select group_concat(req_id || ':' || first_token_s || ':' || finish_s, ' ')
  from (select * from requests order by req_id)")
[ "$r" = "0:4.5:12.0 1:4.5:10.5 2:8.5:8.5" ] && ok || bad "scenario A rows: $r"
# the same with the overlap scheduler (scenario E, 15.5): r1 done at 6.5, r2 at 10.5
"$KVSIM" run --engine sglang --trace "$T/a.csv" --kv-blocks 64 --max-seqs 8 \
  --max-batched-tokens 8 --no-prefix-caching --max-model-len 4096 \
  --cost affine:1,0.5,0,0 --db "$T/g.db" > "$T/g.txt" 2>&1
r=$(sqlite3 "$T/g.db" "select group_concat(req_id || ':' || first_token_s || ':' || finish_s, ' ')
  from (select * from requests where run_id = 2 order by req_id)")
[ "$r" = "0:4.5:12.5 1:4.5:6.5 2:10.5:10.5" ] && ok || bad "scenario E rows: $r"

# flags the profile lacks: one line, exit 2, nothing stored
for f in "--watermark 0.1" "--policy priority" "--swap-gib 2" "--batching static" \
         "--block-size 16" "--long-prefill-threshold 100" "--kv-cache off" \
         "--preemption swap" "--alloc reserved"; do
  # shellcheck disable=SC2086
  "$KVSIM" run --engine sglang $f "${R[@]}" --db "$T/b.db" > "$T/o.txt" 2> "$T/e.txt"
  rc=$?
  name=${f%% *}
  [ $rc -eq 2 ] && [ "$(wc -l < "$T/e.txt")" -eq 1 ] && grep -q -- "$name" "$T/e.txt" &&
    grep -q "sglang" "$T/e.txt" && ok || bad "$f: exit $rc: $(cat "$T/e.txt")"
done
# lpm needs the radix cache; with it, it runs
"$KVSIM" run --engine sglang --policy lpm --no-prefix-caching "${R[@]}" --db "$T/b.db" \
  > "$T/o.txt" 2> "$T/e.txt"
[ $? -eq 2 ] && [ "$(wc -l < "$T/e.txt")" -eq 1 ] && grep -q "needs the radix cache" "$T/e.txt" &&
  ok || bad "lpm without the radix cache: $(cat "$T/e.txt")"
"$KVSIM" run --engine sglang --policy lpm "${R[@]}" --db "$T/l.db" > "$T/o.txt" 2>&1 &&
  grep -q "engine           sglang: lpm," "$T/o.txt" && ok || bad "lpm run: $(cat "$T/o.txt")"
# SGLang's own flags under another engine
for f in "--max-prefill-tokens 100" "--schedule-conservativeness 0.5" "--no-overlap-schedule"; do
  # shellcheck disable=SC2086
  "$KVSIM" run --engine vllm-v1 $f "${R[@]}" --db "$T/b.db" > "$T/o.txt" 2> "$T/e.txt"
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l < "$T/e.txt")" -eq 1 ] && grep -q "engine sglang" "$T/e.txt" &&
    ok || bad "$f under vllm-v1: exit $rc: $(cat "$T/e.txt")"
done
"$KVSIM" run --engine sglang --overlap-schedule --no-overlap-schedule "${R[@]}" --db "$T/b.db" \
  > "$T/o.txt" 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "give one of them" "$T/e.txt" && ok || bad "both overlap flags: $(cat "$T/e.txt")"
[ ! -f "$T/b.db" ] || [ "$(sqlite3 "$T/b.db" "select count(*) from runs" 2>/dev/null || echo 0)" = 0 ] &&
  ok || bad "a refused run was stored"
"$KVSIM" run --engine sglan "${R[@]}" --db "$T/b.db" > "$T/o.txt" 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "sglang" "$T/e.txt" && ok || bad "unknown engine: $(cat "$T/e.txt")"

# compare under sglang: its own default set
"$KVSIM" compare --engine sglang "${R[@]}" --db "$T/c.db" > "$T/c.txt" 2>&1
[ $? -eq 0 ] && grep -q "^no-overlap" "$T/c.txt" && grep -q "^trtllm " "$T/c.txt" &&
  grep -q "^vllm-v1 " "$T/c.txt" && ok || bad "compare: $(cat "$T/c.txt")"

# capacity reports the slots a run gets
"$KVSIM" capacity --engine sglang --model llama-3.1-8b --gpu a100-80g --json > "$T/cap.json" \
  2> "$T/e.txt" && grep -q '"kv_blocks": *413869' "$T/cap.json" && ok ||
  bad "capacity: $(cat "$T/e.txt" "$T/cap.json")"

echo "cli_sglang: $pass passed, $fail failed"
[ $fail -eq 0 ]
