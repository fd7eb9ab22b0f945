#!/usr/bin/env bash
# cli_validate.sh — `kvsim validate` end to end on the CPU backend: a small
# tiny-model run with preemptions is recorded, replayed on the kernels,
# stored (validations + validation_steps rows that agree with the run's
# steps), and reported again; sampling and window flags; and bad input (one
# line on stderr, exit 2, nothing stored).  Timings are never asserted.
. "$(dirname "$0")/testlib.sh"
q() { sqlite3 "$DB" "$1"; }
DB=$T/v.db
SPEC='arrival=poisson,rate=200,n=30,prompt=uniform:8:64,output=uniform:2:12'
RUN=(run --engine vllm-v0 --model models/tiny.conf --synthetic "$SPEC" --seed 3 --block-size 8 --db "$DB" --quiet)

# --- a recorded run that preempts: 12 blocks of 8 tokens for 30 requests
id=$("$KVSIM" "${RUN[@]}" --kv-blocks 12 --record-steps)
[ "$id" = 1 ] && ok || bad "run printed '$id'"
[ "$(q 'select preemptions > 0 from runs where run_id=1')" = 1 ] && ok || bad "run 1 did not preempt"
nsteps=$(q "select count(*) from steps where run_id=1")
half=$((nsteps / 2))

# --- validate the first half: requests are still running at its end, so
# the KV contents check has something to check
"$KVSIM" validate --run 1 --device cpu --db "$DB" --max-steps "$half" > "$T/out.txt" 2> "$T/err.txt"
rc=$?
[ $rc -eq 0 ] && ok || bad "validate exit $rc: $(cat "$T/err.txt")"
grep -q '^validation_id 1$' "$T/out.txt" && ok || bad "no validation_id line"
grep -q 'step time error' "$T/out.txt" && ok || bad "no step error table"
grep -q '^  decode ' "$T/out.txt" && ok || bad "no decode row"
grep -q 'TTFT p99' "$T/out.txt" && ok || bad "no end-to-end table"
r=$(q "select run_id, device, profile_id is null, max_steps, sampling, created_at like '20%' from validations where validation_id=1")
[ "$r" = "1|cpu|1|$half|window|1" ] && ok || bad "validations row: $r"
# one validation_steps row per replayed step, steps 0..half-1, predicted = steps.dur_s,
# kind and batch as in steps, measured > 0
r=$(q "select count(*), min(step_id), max(step_id) from validation_steps where validation_id=1")
[ "$r" = "$half|0|$((half - 1))" ] && ok || bad "validation_steps rows: $r (want $half|0|$((half - 1)))"
r=$(q "select count(*) from validation_steps v join steps s on s.run_id=1 and s.step_id=v.step_id
       where v.validation_id=1 and v.predicted_s = s.dur_s and v.kind = s.kind
         and v.batch = length(s.members) / 24 and v.measured_s > 0")
[ "$r" = "$half" ] && ok || bad "only $r of $half rows agree with steps"
js() { q "select json_extract(summary_json, '$1') from validations where validation_id=${2:-1}"; }
[ "$(js '$.step_error.all.n')" = "$half" ] && ok || bad "summary n $(js '$.step_error.all.n')"
# by shape: "new" holds the replay's first step of each token count (one per
# distinct count among the replayed steps), "repeat" the rest
ntok=$(q "select count(distinct tokens) from steps where run_id=1 and step_id < $half")
[ "$(js '$.step_error.by_shape.new.n')" = "$ntok" ] && ok ||
  bad "by_shape.new.n $(js '$.step_error.by_shape.new.n'), want $ntok distinct token counts"
[ "$(js '$.step_error.by_shape.repeat.n')" = "$((half - ntok))" ] && ok ||
  bad "by_shape.repeat.n $(js '$.step_error.by_shape.repeat.n'), want $((half - ntok))"
grep -q '^  tokens new ' "$T/out.txt" && grep -q '^  tokens repeat ' "$T/out.txt" && ok ||
  bad "no tokens new / repeat rows"
[ "$(js '$.checks.schedule_mismatch_steps')" = 0 ] && ok || bad "block tables disagree with kv_blocks_used"
[ "$(js '$.memory.blocks_match')" = 1 ] && ok || bad "peak blocks differ: $(js '$.memory.note')"
peak=$(q "select max(kv_blocks_used) from steps where run_id=1 and step_id < $half")
[ "$(js '$.memory.peak_blocks_sim')" = "$peak" ] && ok || bad "peak_blocks_sim != $peak"
# the cpu backend stores fp32: device bytes are twice the simulator's fp16 bytes
r=$(q "select json_extract(summary_json,'$.memory.kv_bytes_device') = 2 * json_extract(summary_json,'$.memory.kv_bytes_sim') from validations where validation_id=1")
[ "$r" = 1 ] && ok || bad "device bytes are not 2x the simulator's"
kr=$(js '$.checks.kv_requests')
[ "${kr:-0}" -gt 0 ] && ok || bad "no request's KV was checked ($kr)"
[ "$(js '$.checks.kv_ok')" = 1 ] && ok || bad "KV contents differ: NMSE $(js '$.checks.kv_max_nmse')"
[ "$(js '$.e2e.all.n_requests')" = 30 ] && ok || bad "e2e over $(js '$.e2e.all.n_requests') requests"
# on cpu the steps are timed cold unless --warmup says otherwise (on cuda the
# default is one untimed run first: docs/validation.md)
[ "$(js '$.warmup')" = 0 ] && ok || bad "cpu default warmup $(js '$.warmup'), want 0"

# --- --report prints the same tables again
"$KVSIM" validate --report 1 --db "$DB" > "$T/rep.txt" 2>&1 && ok || bad "--report failed"
head -n -1 "$T/out.txt" | diff - "$T/rep.txt" > /dev/null && ok || bad "--report differs from the first print"

# --- even sampling over the whole run; a window from --start with repeats
"$KVSIM" validate --run 1 --device cpu --db "$DB" --max-steps 10 --sample even --quiet > "$T/id.txt" &&
  ok || bad "even sampling failed"
[ "$(cat "$T/id.txt")" = 2 ] && ok || bad "--quiet printed '$(cat "$T/id.txt")'"
# 10 of n steps from 0: k * n / 10 for k = 0..9
want=$(for k in 0 1 2 3 4 5 6 7 8 9; do echo $((k * nsteps / 10)); done | paste -sd,)
got=$(q "select group_concat(step_id) from (select step_id from validation_steps where validation_id=2 order by step_id)")
[ "$got" = "$want" ] && ok || bad "even steps $got, want $want"
[ "$(q 'select sampling from validations where validation_id=2')" = even ] && ok || bad "sampling not stored"
"$KVSIM" validate --run 1 --device cpu --db "$DB" --start 5 --max-steps 3 --repeats 3 --warmup 1 \
  --quiet > /dev/null && ok || bad "window from --start failed"
[ "$(q 'select group_concat(step_id) from validation_steps where validation_id=3')" = "5,6,7" ] &&
  ok || bad "window from 5 stored other steps"
[ "$(js '$.repeats' 3)|$(js '$.warmup' 3)|$(js '$.start' 3)" = "3|1|5" ] && ok || bad "repeats/warmup/start not in summary"

# --- bad input: one line, exit 2, nothing stored
before=$(q "select count(*) from validations")
"$KVSIM" "${RUN[@]}" > /dev/null                                     # run 2: no --record-steps
"$KVSIM" "${RUN[@]}" --kv-blocks 100000000 --record-steps > /dev/null # run 3: huge cache
sqlite3 "$DB" "insert into profiles(profile_id, model, gpu, device, params_json)
               values (1, 'llama-7b', 'h100-sxm', 'cuda', '{}')"
expect_fail() { # expected-substring args...
  local want=$1
  shift
  "$KVSIM" validate "$@" > "$T/o.txt" 2> "$T/e.txt"
  local rc=$?
  local lines
  lines=$(wc -l < "$T/e.txt")
  if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -q "^kvsim validate: .*$want" "$T/e.txt"; then
    ok
  else
    bad "validate $* -> exit $rc, stderr: $(cat "$T/e.txt")"
  fi
}
expect_fail '--run 99: no such run' --run 99 --device cpu --db "$DB"
expect_fail 're-run with kvsim run --record-steps' --run 2 --device cpu --db "$DB"
expect_fail 'no CUDA device' --run 1 --device cuda --db "$DB"
expect_fail "fitted for model 'llama-7b', not the run's model 'tiny'" --run 1 --device cpu --profile 1 --db "$DB"
expect_fail '--profile 42' --run 1 --device cpu --profile 42 --db "$DB"
expect_fail 'bytes are free' --run 3 --device cpu --db "$DB"
expect_fail '--start 100000: the run has steps' --run 1 --device cpu --start 100000 --db "$DB"
expect_fail "--sample: unknown value 'random'" --run 1 --device cpu --sample random --db "$DB"
expect_fail '--device is required' --run 1 --db "$DB"
expect_fail "--device: unknown device 'tpu'" --run 1 --device tpu --db "$DB"
expect_fail '--run is required' --device cpu --db "$DB"
expect_fail '--max-steps' --run 1 --device cpu --max-steps -1 --db "$DB"
expect_fail '--repeats' --run 1 --device cpu --repeats 0 --db "$DB"
expect_fail '--report 99: no such validation' --report 99 --db "$DB"
expect_fail 'no such file' --run 1 --device cpu --db "$T/missing.db"
expect_fail "unknown option '--bogus'" --run 1 --device cpu --bogus --db "$DB"
[ "$(q 'select count(*) from validations')" = "$before" ] && ok || bad "a failed validate stored a row"
[ ! -e "$T/missing.db" ] && ok || bad "a missing --db was created"

# --- scheduler extensions, when this kvsim has them (docs/validation.md):
# chunked prefill is replayed exactly (chunks over the KV they continue);
# prefix-cache sharing is not reproduced and the memory check says so
if "$KVSIM" run --help | grep -q -- --chunked-prefill; then
  cid=$("$KVSIM" "${RUN[@]}" --kv-blocks 13 --record-steps --chunked-prefill --max-batched-tokens 32)
  vid=$("$KVSIM" validate --run "$cid" --device cpu --db "$DB" --max-steps 0 --quiet)
  [ -n "$vid" ] && ok || bad "chunked validate failed"
  [ "$(js '$.checks.schedule_mismatch_steps' "$vid")" = 0 ] && ok || bad "chunked: block tables disagree"
  [ "$(js '$.step_error.by_kind.mixed.n' "$vid")" -gt 0 ] && ok || bad "chunked: no mixed step replayed"
  cn=$(q "select count(*) from steps where run_id=$cid")
  vid=$("$KVSIM" validate --run "$cid" --device cpu --db "$DB" --max-steps $((cn / 2)) --quiet)
  [ "$(js '$.checks.kv_ok' "$vid")" = 1 ] && ok || bad "chunked: KV contents differ or unchecked"
fi
if "$KVSIM" run --help | grep -q -- --prefix-caching; then
  pid=$("$KVSIM" run --engine vllm-v0 --model models/tiny.conf --block-size 8 --db "$DB" --quiet --kv-blocks 40 \
    --synthetic "$SPEC,system_prompt=32" --seed 1 --record-steps --prefix-caching)
  vid=$("$KVSIM" validate --run "$pid" --device cpu --db "$DB" --max-steps 20 --quiet)
  [ -n "$vid" ] && ok || bad "prefix-caching validate failed"
  [ "$(js '$.checks.prefix_hit_starts' "$vid")" -gt 0 ] && ok || bad "prefix hits not seen"
  js '$.memory.note' "$vid" | grep -q 'prefix-cache' && ok || bad "memory note lacks the prefix cache"
fi

# --- --help lists every flag with its default, exit 0
"$KVSIM" validate --help > "$T/h.txt" 2>&1 && ok || bad "--help exit $?"
for f in --run --device --db --max-steps --sample --start --profile --repeats --warmup --seed \
  --quiet --report --help; do
  grep -q -- "$f" "$T/h.txt" && ok || bad "--help lacks $f"
done

echo "cli_validate: $pass passed, $fail failed"
[ $fail -eq 0 ]
