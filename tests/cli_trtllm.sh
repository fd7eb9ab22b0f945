#!/usr/bin/env bash
# cli_trtllm.sh — `--engine trtllm` end to end: the profile's defaults and
# capacity rule in the summary and the store, its flags refused with one
# line naming the flag and the profile (exit 2, no run stored), and the
# profile in `compare`.
. "$(dirname "$0")/testlib.sh"
W='arrival=burst,n=50,prompt=128,output=64'
R=(--model llama-3.1-8b --gpu a100-80g --synthetic "$W")

"$KVSIM" run --engine trtllm "${R[@]}" --db "$T/a.db" > "$T/out.txt" 2>&1
[ $? -eq 0 ] && ok || bad "trtllm run: $(cat "$T/out.txt")"
grep -q "engine           trtllm: in-flight batching, guaranteed no evict, chunked context on" \
  "$T/out.txt" && ok || bad "summary lacks the profile: $(head -3 "$T/out.txt")"
# KV capacity by TensorRT-LLM's rule, worked out by hand (docs/engine-memory.md):
#   CUDA total = 81920 MiB - 0.43 GiB; weights of Llama-3.1-8B in FP16 14.9575 GiB;
#   activations at 8192 tokens and 2048 sequences (4H + 3I) * 2 B * 8192 + 2048 * V * 4 B
#   = 1.8848 GiB; non-tensor 1.79 GiB at TP 1; KV = 0.9 x (total - those) = 54.84 GiB
#   = 449,344 tokens of 128 KiB -> ceil(tokens / 64) = 7021 blocks of 64.
grep -q "KV cache         7021 blocks x 64 tokens; max-seqs 2048, max-batched-tokens 8192" \
  "$T/out.txt" && ok || bad "capacity/defaults: $(grep 'KV cache' "$T/out.txt")"
r=$(sqlite3 "$T/a.db" "select engine, alloc, block_size, chunked_prefill, prefix_caching from runs")
[ "$r" = "trtllm|reserved-oracle|64|1|0" ] && ok || bad "stored profile: $r"
"$KVSIM" run --engine trtllm --alloc paged "${R[@]}" --db "$T/a.db" > "$T/out2.txt" 2>&1
grep -q "trtllm: in-flight batching, max utilization" "$T/out2.txt" && ok ||
  bad "--alloc paged is max utilization: $(head -3 "$T/out2.txt")"

# the profile's roofline constants (job_engine.cost, put by job_engine_apply)
# reach the run's cost model, and --cost's own win over them
"$KVSIM" run --engine trtllm "${R[@]}" --cost roofline:eff_gemm=0.75 --db "$T/k.db" \
  > /dev/null 2>&1 && ok || bad "trtllm run with --cost failed"
d=$(sqlite3 "$T/k.db" "select cost_desc from runs")
[[ "$d" == *" eff_gemm=0.75 eff_attn=0.6 "* && "$d" == *" kernel_lat_s=3e-06 "* &&
   "$d" == *" ridge_loss=0.25" ]] && ok || bad "trtllm cost constants: $d"

# flags the profile lacks: one line, exit 2, nothing stored
for f in "--prefix-caching" "--watermark 0.1" "--policy priority" "--swap-gib 2" \
         "--batching static"; do
  # shellcheck disable=SC2086
  "$KVSIM" run --engine trtllm $f "${R[@]}" --db "$T/b.db" > "$T/o.txt" 2> "$T/e.txt"
  rc=$?
  name=${f%% *}
  [ $rc -eq 2 ] && [ "$(wc -l < "$T/e.txt")" -eq 1 ] && grep -q -- "$name" "$T/e.txt" &&
    grep -q "trtllm" "$T/e.txt" && ok || bad "$f: exit $rc: $(cat "$T/e.txt")"
done
[ ! -f "$T/b.db" ] || [ "$(sqlite3 "$T/b.db" "select count(*) from runs" 2>/dev/null || echo 0)" = 0 ] &&
  ok || bad "a refused run was stored"
"$KVSIM" run --engine tensorrt "${R[@]}" --db "$T/b.db" > "$T/o.txt" 2> "$T/e.txt"
[ $? -eq 2 ] && grep -q "trtllm" "$T/e.txt" && ok || bad "unknown engine: $(cat "$T/e.txt")"

# compare under trtllm: its own default set
"$KVSIM" compare --engine trtllm "${R[@]}" --db "$T/c.db" > "$T/c.txt" 2>&1
[ $? -eq 0 ] && grep -q "^max-utilization" "$T/c.txt" && grep -q "^vllm-v1 " "$T/c.txt" &&
  ok || bad "compare: $(cat "$T/c.txt")"

echo "cli_trtllm: $pass passed, $fail failed"
[ $fail -eq 0 ]
