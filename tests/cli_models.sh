#!/usr/bin/env bash
# cli_models.sh — `kvsim capacity` with 2026's models and flags, `kvsim models`
# and `kvsim gpus` (issue 13):
#   - a model that does not fit (deepseek-v3, MLA, on one h200) is a report:
#     fits false, the GiB missing per GPU, the smallest tp that fits, exit 0;
#   - an fp8 KV cache doubles the KV blocks and max batch of llama-3.1-8b on
#     h100-sxm (within one: block bytes halve, the KV memory is the same);
#   - --cp 2 doubles the longest single request;
#   - --compare-tp shows every degree, fits false rows included;
#   - the KV blocks of each engine profile (--engine, default vllm-v1) are
#     the blocks `kvsim run` gets with the same flags;
#   - bad input (unknown dtype, --ep on a dense model, --max-model-len beyond
#     the context limit, a config.json that is not JSON) is one line naming
#     the flag or file, exit 2;
#   - models lists MoE aliases with active < total parameters; gpus lists FP4.
. "$(dirname "$0")/testlib.sh"
# the shipped configs are read from models/hf under the working directory
cd "$(dirname "$0")/.." || exit 1

# jget FILE KEY: a top-level key of a JSON object
jget() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# ------------------------------------------------ does not fit: a report
"$KVSIM" capacity --model deepseek-v3 --gpu h200 --tp 1 > "$T/ds.txt" 2> "$T/err.txt"
rc=$?
[ $rc -eq 0 ] && ok || bad "deepseek-v3 on h200 exit $rc: $(cat "$T/err.txt")"
grep -q "fits: false" "$T/ds.txt" && ok || bad "no 'fits: false': $(cat "$T/ds.txt")"
grep -Eq "by [0-9]+\.[0-9]+ GiB per GPU" "$T/ds.txt" && ok || bad "no missing GiB: $(cat "$T/ds.txt")"
grep -Eq "smallest tp that fits on h200 is [0-9]+" "$T/ds.txt" && ok ||
  bad "no smallest tp: $(cat "$T/ds.txt")"
grep -q "MLA" "$T/ds.txt" && ok || bad "attention kind missing: $(cat "$T/ds.txt")"
"$KVSIM" capacity --model deepseek-v3 --gpu h200 --tp 1 --json > "$T/ds.json" 2> "$T/err.txt"
[ $? -eq 0 ] && ok || bad "deepseek-v3 --json: $(cat "$T/err.txt")"
python3 - "$T/ds.json" <<'PY' && ok || bad "deepseek-v3 json: $(cat "$T/ds.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["model_fits"] is False and d["fits"] is False, d
assert d["missing_bytes"] > 0 and abs(d["missing_gib"] - d["missing_bytes"] / 2**30) < 1e-3, d
assert d["min_fit_tp"] >= 2, d
assert d["attention"] == "mla" and d["params_active"] < d["params_total"], d
assert d["weight_dtype"] == "fp8", d
PY
# the smallest tp it names does fit
mt=$(jget "$T/ds.json" min_fit_tp)
"$KVSIM" capacity --model deepseek-v3 --gpu h200 --tp "$mt" --json > "$T/ds2.json" 2> "$T/err.txt" &&
  [ "$(jget "$T/ds2.json" model_fits)" = True ] && ok ||
  bad "deepseek-v3 at tp $mt: $(cat "$T/err.txt" "$T/ds2.json")"

# ------------------------------------------------ fp8 KV doubles the batch
args="--model llama-3.1-8b --gpu h100-sxm --seq-len 1024 --max-seqs 4096 --json"
"$KVSIM" capacity $args > "$T/f16.json" 2> "$T/err.txt" &&
  "$KVSIM" capacity $args --kv-cache-dtype fp8 > "$T/f8.json" 2>> "$T/err.txt" && ok ||
  bad "fp16/fp8 KV runs: $(cat "$T/err.txt")"
python3 - "$T/f16.json" "$T/f8.json" <<'PY' && ok || bad "fp8 KV: $(cat "$T/f16.json" "$T/f8.json")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["kv_dtype"] == "fp16" and b["kv_dtype"] == "fp8", (a["kv_dtype"], b["kv_dtype"])
assert b["kv_bytes_per_token"] * 2 == a["kv_bytes_per_token"]
assert abs(b["kv_blocks"] - 2 * a["kv_blocks"]) <= 1, (a["kv_blocks"], b["kv_blocks"])
assert abs(b["max_batch"] - 2 * a["max_batch"]) <= 1, (a["max_batch"], b["max_batch"])
assert a["max_batch"] > 100
assert a["batch_bound"] == "kv_blocks" and a["max_batch_effective"] == a["max_batch"]
PY
# --max-seqs binds at vllm-v0's default (256) and the table says so
"$KVSIM" capacity --engine vllm-v0 --model llama-3.1-8b --gpu h100-sxm --seq-len 1024 > "$T/seqs.txt" 2>&1
grep -q "max-seqs 256: --max-seqs binds" "$T/seqs.txt" && ok || bad "max-seqs bound: $(cat "$T/seqs.txt")"

# ------------------------------------------------ --cp 2 doubles the context
"$KVSIM" capacity --model llama-3.1-8b --gpu h100-sxm --json > "$T/cp1.json" 2> "$T/err.txt" &&
  "$KVSIM" capacity --model llama-3.1-8b --gpu h100-sxm --cp 2 --json > "$T/cp2.json" 2>> "$T/err.txt" &&
  ok || bad "cp runs: $(cat "$T/err.txt")"
python3 - "$T/cp1.json" "$T/cp2.json" <<'PY' && ok || bad "cp 2: $(cat "$T/cp1.json" "$T/cp2.json")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["cp"] == 2 and b["gpus"] == 2
assert a["max_context_tokens"] > 0
assert b["max_context_tokens"] == 2 * a["max_context_tokens"], (a["max_context_tokens"], b["max_context_tokens"])
assert b["blocks_per_request"] * 2 == a["blocks_per_request"]
PY

# ------------------------------------------------ --compare-tp, fits false rows
"$KVSIM" capacity --engine vllm-v0 --model llama-3.1-70b --gpu a100-80g --compare-tp 1,2,4,8 --json \
  > "$T/ctp.json" 2> "$T/err.txt"
[ $? -eq 0 ] && ok || bad "compare-tp exit: $(cat "$T/err.txt")"
python3 - "$T/ctp.json" <<'PY' && ok || bad "compare-tp: $(cat "$T/ctp.json")"
import json, sys
d = json.load(open(sys.argv[1]))
t = {r["tp"]: r for r in d["compare_tp"]}
assert sorted(t) == [1, 2, 4, 8], list(t)
assert t[1]["fits"] is False and t[1]["missing_bytes"] > 0, t[1]
assert t[4]["fits"] is True and t[4]["max_batch"] >= 1, t[4]
assert d["model_fits"] is False and d["min_fit_tp"] == 4, d
PY
# vLLM's rule (the default engine) reserves the activation peak of its own
# 2048-token budget on an A100, not of 131072 tokens: tp 2 fits (65.7 GiB of
# weights + 0.6 activations + 3.6 outside the tensors < 0.9 x 79.6 GiB).
"$KVSIM" capacity --model llama-3.1-70b --gpu a100-80g --tp 1 --json > "$T/v1.json" 2> "$T/err.txt" &&
  [ "$(jget "$T/v1.json" min_fit_tp)" = 2 ] && [ "$(jget "$T/v1.json" engine)" = vllm-v1 ] && ok ||
  bad "vllm-v1 min fit tp: $(cat "$T/err.txt" "$T/v1.json")"
"$KVSIM" capacity --model llama-3.1-70b --gpu a100-80g --compare-tp 1,2,4,8 > "$T/ctp.txt" 2>&1
[ "$(grep -c "fits false" "$T/ctp.txt")" -ge 1 ] && grep -Eq "^ +8 +8 " "$T/ctp.txt" && ok ||
  bad "compare-tp text: $(cat "$T/ctp.txt")"

# ------------------------------------------------ capacity = what a run gets
# For each engine the KV blocks capacity reports are the blocks kvsim run
# sizes its cache with (the run summary's "KV cache N blocks").
for e in vllm-v1 vllm-v0 trtllm sglang; do
  args="--engine $e --model llama-3.1-70b --gpu h100-sxm --tp 4"
  "$KVSIM" capacity $args --json > "$T/cap.json" 2> "$T/err.txt" &&
    "$KVSIM" run $args --synthetic n=4,rate=1,prompt=64,output=4 --db "$T/r.db" > "$T/run.txt" 2>> "$T/err.txt" ||
    bad "$e capacity/run: $(cat "$T/err.txt")"
  want=$(jget "$T/cap.json" kv_blocks)
  got=$(sed -n 's/^  KV cache *\([0-9]*\) blocks.*/\1/p' "$T/run.txt")
  [ -n "$want" ] && [ "$want" = "$got" ] && ok || bad "$e: capacity $want blocks, run $got: $(cat "$T/run.txt")"
done

# ------------------------------------------------ bad input: one line, exit 2
printf '{"architectures": ["LlamaForCausalLM"], nope\n' > "$T/config.json"
check_bad() { # WANT ARGS...
  local want=$1
  shift
  "$KVSIM" capacity "$@" > "$T/out.txt" 2>&1
  local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l < "$T/out.txt")" -eq 1 ] && grep -q -- "$want" "$T/out.txt"; then
    ok
  else
    bad "capacity $* (want exit 2, one line naming '$want'): rc $rc: $(cat "$T/out.txt")"
  fi
}
check_bad "--dtype" --model llama-3.1-8b --gpu h100-sxm --dtype fp6
check_bad "--kv-cache-dtype" --model llama-3.1-8b --gpu h100-sxm --kv-cache-dtype int4
check_bad "--ep" --model llama-3.1-8b --gpu h100-sxm --ep 2
check_bad "--max-model-len" --model llama-3.1-8b --gpu h100-sxm --max-model-len 200000
check_bad "$T/config.json" --model "$T/config.json" --gpu h100-sxm
check_bad "--cp" --model llama-3.1-8b --gpu h100-sxm --cp 0
check_bad "--engine" --model llama-3.1-8b --gpu h100-sxm --engine lmdeploy
check_bad "--compare-tp" --model llama-3.1-8b --gpu h100-sxm --compare-tp 4,2
# --ep on a MoE model is fine
"$KVSIM" capacity --model qwen3-30b-a3b --gpu h100-sxm --ep 2 --json > "$T/ep.json" 2> "$T/err.txt" &&
  [ "$(jget "$T/ep.json" ep)" = 2 ] && ok || bad "--ep 2 on qwen3-30b-a3b: $(cat "$T/err.txt")"

# ------------------------------------------------ models and gpus
"$KVSIM" models > "$T/models.txt" 2> "$T/err.txt"
[ $? -eq 0 ] && ok || bad "models exit: $(cat "$T/err.txt")"
awk '$1 == "qwen3-30b-a3b" { for (i = 1; i <= NF; i++) if ($i ~ /B$/) v[++n] = substr($i, 1, length($i) - 1) + 0
                             found = 1; exit !(n >= 2 && v[2] < v[1]) } END { if (!found) exit 1 }' \
  "$T/models.txt" && ok || bad "models: qwen3-30b-a3b active < total: $(grep qwen3-30b "$T/models.txt")"
"$KVSIM" models --json > "$T/models.json" 2> "$T/err.txt"
python3 - "$T/models.json" <<'PY' && ok || bad "models --json: $(head -c 2000 "$T/models.json")"
import json, sys
m = {r["name"]: r for r in json.load(open(sys.argv[1]))["models"]}
q = m["qwen3-30b-a3b"]
assert q["alias"] and q["params_active"] < q["params_total"], q
assert q["kv_bytes_per_token_fp8"] * 2 == q["kv_bytes_per_token_fp16"], q
assert m["deepseek-v3"]["attention"] == "MLA", m["deepseek-v3"]
assert m["llama-7b"]["params"] == 6738415616 and not m["llama-7b"]["alias"]
assert all("error" not in r for r in m.values()), [r for r in m.values() if "error" in r]
PY
"$KVSIM" gpus > "$T/gpus.txt" 2> "$T/err.txt"
[ $? -eq 0 ] && ok || bad "gpus exit: $(cat "$T/err.txt")"
# columns: ... FP16 FP8 INT8 FP4 PCIe NVLink; b200's FP4 is a number, h100's '-'
awk '$1 == "b200" { exit !($(NF-2) + 0 > 0) }' "$T/gpus.txt" && ok || bad "gpus: b200 fp4: $(cat "$T/gpus.txt")"
awk '$1 == "h100-sxm" { exit !($(NF-2) == "-") }' "$T/gpus.txt" && ok || bad "gpus: h100 fp4: $(cat "$T/gpus.txt")"
"$KVSIM" gpus --json > "$T/gpus.json" 2> "$T/err.txt"
python3 - "$T/gpus.json" <<'PY' && ok || bad "gpus --json: $(cat "$T/gpus.json")"
import json, sys
g = {r["name"]: r for r in json.load(open(sys.argv[1]))["gpus"]}
assert g["b200"]["fp4_flops"] > 0 and g["h200"]["fp4_flops"] == 0
assert g["h100-sxm"]["mem_runtime_bytes"] == 81559 << 20
PY

# --- a Llama config read from its config.json runs byte for byte as the built-in
SPEC='arrival=poisson,rate=20,n=300,prompt=uniform:16:900,output=uniform:1:150'
for m in llama-2-7b llama-2-7b-hf; do
  for e in vllm-v1 vllm-v0; do
    "$KVSIM" run --model $m --engine $e --synthetic "$SPEC" --kv-blocks 800 --seed 2 \
      --db "$T/hf.db" --label "$m/$e" --quiet > /dev/null || bad "run $m $e failed"
  done
done
rows() { sqlite3 "$T/hf.db" "SELECT q.req_id, printf('%!.17g|%!.17g', q.first_token_s, q.finish_s),
  q.preemptions FROM requests q JOIN runs r USING (run_id) WHERE r.label = '$1' ORDER BY q.req_id"; }
metrics() { sqlite3 "$T/hf.db" "SELECT n_steps, preemptions, kv_blocks, printf('%!.17g', ttft_p99_s)
  FROM runs WHERE label = '$1'"; }
for e in vllm-v1 vllm-v0; do
  [ -n "$(rows llama-2-7b/$e)" ] && [ "$(rows llama-2-7b/$e)" = "$(rows llama-2-7b-hf/$e)" ] &&
    [ "$(metrics llama-2-7b/$e)" = "$(metrics llama-2-7b-hf/$e)" ] && ok ||
    bad "$e: llama-2-7b-hf (config.json) differs from the built-in llama-2-7b"
done

echo "cli_models: $pass passed, $fail failed"
[ $fail -eq 0 ]
