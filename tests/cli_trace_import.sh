#!/usr/bin/env bash
# cli_trace_import.sh — `kvsim trace import FORMAT IN -o OUT`: each shipped
# sample in tests/data/import gives exactly the rows worked out by hand
# below; malformed input is one line naming the file and the record, exit
# 2, and leaves OUT as it was (no temporary file either).
. "$(dirname "$0")/testlib.sh"
D=tests/data/import

# golden NAME WANT ARGS...: import with ARGS into $T/NAME.csv, compare bytes
golden() {
  local name=$1 want=$2
  shift 2
  if ! "$KVSIM" trace import "$@" -o "$T/$name.csv" 2> "$T/$name.err"; then
    bad "$name: exit $?: $(cat "$T/$name.err")"
    return
  fi
  [ "$(cat "$T/$name.csv")" = "$want" ] && ok ||
    bad "$name: got
$(cat "$T/$name.csv")
want
$want"
}
H=arrival_s,prompt_tokens,output_tokens

# ShareGPT, 4 characters per token, first turn: conversation a: "What is KV
# cache?" is 17 characters -> ceil(17/4) = 5, "It stores keys and values."
# 26 -> 7; b has one turn (skipped); c: "héllo wörld" is 11 code points (13
# bytes) -> 3, the empty reply counts 1 (a request has >= 1 token); d gives
# counts, 120 and 45.  No rate: every request at time 0.
golden sharegpt "$H
0.000000000,5,7
0.000000000,3,1
0.000000000,120,45" sharegpt $D/sharegpt_sample.json
grep -q "4 records, 3 requests .*skipped 1 conversations of fewer than 2 turns" "$T/sharegpt.err" &&
  ok || bad "sharegpt summary line: $(cat "$T/sharegpt.err")"
# --turns: a's second pair carries the history, 5 + 7 + "Why?" (1) = 13,
# and replies "Speed." (6 characters -> 2).
golden sharegpt_turns "$H
0.000000000,5,7
0.000000000,13,2
0.000000000,3,1
0.000000000,120,45" sharegpt $D/sharegpt_sample.json --turns
# 2 characters per token: 17 -> 9, 26 -> 13, 11 -> 6; counts unchanged.
golden sharegpt_cpt2 "$H
0.000000000,9,13
0.000000000,6,1
0.000000000,120,45" sharegpt $D/sharegpt_sample.json --chars-per-token 2
# BurstGPT: times minus the first (5 s): 0, 113, 113.5; the row with 0
# response tokens (a failed request) is skipped.
golden burstgpt "$H
0.000000000,472,18
113.000000000,417,217
113.500000000,1360,441" burstgpt $D/burstgpt_sample.csv
# Azure 2024: 00:00:00.009930 is time 0, 00:00:01.009930 is 1 s, and
# 02:00:02.009930+02:00 is 00:00:02.009930 UTC, 2 s; the 0-token row skipped.
golden azure2024 "$H
0.000000000,2048,12
1.000000000,100,30
2.000000000,7,3" azure2024 $D/azure2024_sample.csv
# vllm custom: "Write a haiku about GPUs." 25 characters -> 7 tokens and
# vLLM's 256 output tokens; 21 -> 6 with its own 64; the given counts 1000/10.
golden custom "$H
0.000000000,7,256
0.000000000,6,64
0.000000000,1000,10" vllm-custom $D/vllm_custom_sample.jsonl

# Poisson arrivals with --rate: increasing, reproducible, seed-dependent.
"$KVSIM" trace import sharegpt $D/sharegpt_sample.json --rate 2 --seed 3 -o "$T/r1.csv" 2> /dev/null
"$KVSIM" trace import sharegpt $D/sharegpt_sample.json --rate 2 --seed 3 -o "$T/r2.csv" 2> /dev/null
"$KVSIM" trace import sharegpt $D/sharegpt_sample.json --rate 2 --seed 4 -o "$T/r3.csv" 2> /dev/null
cmp -s "$T/r1.csv" "$T/r2.csv" && ok || bad "--rate --seed 3 twice gives different files"
cmp -s "$T/r1.csv" "$T/r3.csv" && bad "--seed 3 and 4 give the same arrivals" || ok
awk -F, 'NR > 1 { if ($1 <= prev) exit 1; prev = $1 }' "$T/r1.csv" && ok || bad "--rate arrivals do not increase"
# an imported trace runs
"$KVSIM" run --trace "$T/burstgpt.csv" --model llama-2-7b --db "$T/run.db" --quiet > /dev/null 2>&1 &&
  ok || bad "kvsim run on an imported trace failed"

# malformed NAME FORMAT WORDS CONTENT: exit 2, one line naming the file and
# WORDS (a grep -F pattern), OUT untouched, no temporary file left.
malformed() {
  local name=$1 fmt=$2 words=$3 ext=${5:-json}
  printf '%s\n' "$4" > "$T/$name.$ext"
  echo keep > "$T/out.csv"
  "$KVSIM" trace import "$fmt" "$T/$name.$ext" -o "$T/out.csv" 2> "$T/$name.err"
  local rc=$?
  [ $rc -eq 2 ] && ok || bad "$name: exit $rc, want 2"
  [ "$(wc -l < "$T/$name.err")" -eq 1 ] && ok || bad "$name: not one line: $(cat "$T/$name.err")"
  grep -qF "$T/$name.$ext" "$T/$name.err" && grep -qF -- "$words" "$T/$name.err" && ok ||
    bad "$name: message does not name the file and '$words': $(cat "$T/$name.err")"
  [ "$(cat "$T/out.csv")" = keep ] && ok || bad "$name: OUT was changed"
  [ -z "$(ls "$T" | grep 'out.csv.tmp')" ] && ok || bad "$name: a temporary file was left"
}
malformed sg_json sharegpt ":2: not valid JSON" '[{"conversations":
  [}]'
malformed sg_value sharegpt 'record 1: conversations[0]: no "value" string' \
  '[{"conversations": [{"value": "a"}, {"value": "b"}]}, {"conversations": [{"from": "human"}, {"value": "b"}]}]'
malformed sg_neg sharegpt 'record 0: conversations[1]: "tokens" is negative' \
  '[{"conversations": [{"value": "a"}, {"value": "b", "tokens": -3}]}]'
malformed sg_conv sharegpt 'record 0: no "conversations" array' '[{"id": "x"}]'
malformed sg_top sharegpt 'the top level is not an array' '{"conversations": []}'
malformed bg_neg burstgpt ":3: Response tokens: '-5' is negative" 'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
1,ChatGPT,10,5,15,API log
2,ChatGPT,10,-5,5,API log' csv
malformed bg_head burstgpt "no column 'Response tokens'" 'Timestamp,Model,Request tokens
1,ChatGPT,10' csv
malformed bg_order burstgpt ":3: Timestamp: '1' is before the previous row's" 'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
2,ChatGPT,10,5,15,API log
1,ChatGPT,10,5,15,API log' csv
malformed az_time azure2024 ":2: TIMESTAMP: '2024-13-10 00:00:00+00:00'" 'TIMESTAMP,ContextTokens,GeneratedTokens
2024-13-10 00:00:00+00:00,5,5' csv
malformed az_missing azure2024 ":2: 2 fields, the header has 3" 'TIMESTAMP,ContextTokens,GeneratedTokens
2024-05-10 00:00:00+00:00,5' csv
malformed vc_prompt vllm-custom ':2: no "prompt" string' '{"prompt": "a"}
{"text": "b"}' jsonl
malformed vc_json vllm-custom ":1: not valid JSON" '{"prompt": "a"' jsonl
malformed vc_neg vllm-custom ':1: "output_tokens" is negative' '{"prompt": "a", "output_tokens": -1}' jsonl
"$KVSIM" trace import nosuch $D/burstgpt_sample.csv -o "$T/x.csv" 2> "$T/fmt.err"
[ $? -eq 2 ] && grep -q "unknown format 'nosuch' (known: sharegpt, burstgpt, azure2024, vllm-custom)" "$T/fmt.err" &&
  ok || bad "unknown format: $(cat "$T/fmt.err")"
"$KVSIM" trace import sharegpt $D/sharegpt_sample.json 2> "$T/noout.err"
[ $? -eq 2 ] && ok || bad "no -o: not exit 2"
"$KVSIM" trace import sharegpt $D/sharegpt_sample.json --chars-per-token 0 -o "$T/x.csv" 2> "$T/cpt.err"
[ $? -eq 2 ] && grep -q -- "--chars-per-token" "$T/cpt.err" && ok || bad "--chars-per-token 0: $(cat "$T/cpt.err")"
"$KVSIM" trace import --help | grep -q "vllm-custom" && ok || bad "--help lacks the formats"

echo "cli_trace_import: $pass passed, $fail failed"
[ $fail -eq 0 ]
