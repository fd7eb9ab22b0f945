#!/usr/bin/env bash
# cli_tampered_db.sh — values read back from a database are checked like
# flags (issue 16).  Each case tampers a copy of a good database (sqlite3
# shell, or python3 with writable_schema where a NOT NULL must go) and
# runs the reader: `validate` and `sweep --resume` must refuse with one
# line and exit 2 (no crash, no sanitizer report when KVSIM is an ASan/UBSan
# build), and a runs.model of /etc/passwd is never opened (its first line,
# "root:...", never echoed).  Every column read back is checked against
# its flag's range or its metric's kind, with `show` and `validate`.
#
#   tests/cli_tampered_db.sh KVSIM
. "$(dirname "$0")/testlib.sh"
command -v sqlite3 >/dev/null || { echo "SKIP: cli_tampered_db needs the sqlite3 shell"; exit 0; }
command -v python3 >/dev/null || { echo "SKIP: cli_tampered_db needs python3"; exit 0; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
G=$T/good.db
"$KVSIM" run --synthetic 'n=20,rate=5,prompt=16,output=4' --engine vllm-v0 --record-steps \
  --db "$G" --quiet >/dev/null || bad "good run"
(cd "$T" && "$KVSIM" sweep --db "$G" --grid max-seqs=2,4 --synthetic 'n=10,rate=5,prompt=8,output=2' --quiet >/dev/null) || bad "good sweep"
sqlite3 "$G" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null

tamper() { # NAME SQL -> $T/NAME.db
  cp "$G" "$T/$1.db"
  sqlite3 "$T/$1.db" "$2" || bad "$1: tampering failed"
}
unnull() { # NAME TABLE COLUMN-DEFINITION: drop the NOT NULL / CHECK of a column
  cp "$G" "$T/$1.db"
  python3 - "$T/$1.db" "$2" "$3" <<'PY' || bad "$1: schema edit failed"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA writable_schema=ON")
sql = c.execute("SELECT sql FROM sqlite_master WHERE name = ?", (sys.argv[2],)).fetchone()[0]
col = sys.argv[3]
i = sql.index(col)
j, depth = i, 0
while depth or sql[j] not in ",)":  # the end of the column definition
    depth += {"(": 1, ")": -1}.get(sql[j], 0)
    j += 1
c.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?",
          (sql[:i] + col.split()[0] + " TEXT" + sql[j:], sys.argv[2]))
v = c.execute("PRAGMA schema_version").fetchone()[0]
c.execute("PRAGMA schema_version = %d" % (v + 1))
PY
}
refused() { # NAME WANT CMD...: one line, exit 2, WANT in it
  local name=$1 want=$2
  shift 2
  out=$("$@" 2>&1)
  rc=$?
  [ $rc -eq 2 ] && ok || bad "$name: exit $rc: $(printf '%s' "$out" | head -c 400)"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && ok || bad "$name: not one line: $(printf '%s' "$out" | head -c 400)"
  case "$out" in *"$want"*) ok ;; *) bad "$name: want '$want' in: $out" ;; esac
  case "$out" in *root:*) bad "$name: echoed a file's line: $out" ;; esac
}
V() { "$KVSIM" validate --db "$T/$1.db" --run 1 --device cpu --max-steps 5; }

tamper model "UPDATE runs SET model = '/etc/passwd'"
refused model "is not a built-in model name" V model
tamper model_dir "UPDATE runs SET model = '.'"
refused model_dir "does not read as a model" V model_dir
# a path of a model config's shape is read (a run's --model may be one), but
# what it holds is never quoted
head -n 1 /etc/passwd >"$T/evil.conf" 2>/dev/null || echo "root:x:0:0:root:/root:/bin/bash" >"$T/evil.conf"
tamper model_conf "UPDATE runs SET model = '$T/evil.conf'"
refused model_conf "does not read as a model" V model_conf
tamper kv_blocks "UPDATE runs SET kv_blocks = 4611686018427387904 WHERE run_id = 1"
refused kv_blocks "runs.kv_blocks" V kv_blocks
tamper block_size "UPDATE runs SET block_size = 1099511627776 WHERE run_id = 1"
refused block_size "runs.block_size" V block_size
tamper max_len "UPDATE runs SET max_model_len = 1099511627775, max_batched_tokens = 1099511627775 WHERE run_id = 1"
refused max_len "malformed" V max_len
tamper n_requests "UPDATE runs SET n_requests = 2147483647 WHERE run_id = 1"
refused n_requests "runs.n_requests is 2147483647 but 20 requests rows" V n_requests
tamper members "UPDATE step_rows SET members = zeroblob(2400000) WHERE key = (1 << 32) + 1"
refused members "step 1" V members
tamper big_prefill "UPDATE step_rows SET n_prefill = 9223372036854775807, tokens = 9223372036854775807 WHERE key >> 32 = 1"
refused big_prefill "step 0" V big_prefill
tamper neg_tokens "UPDATE request_rows SET prompt_tokens = -5 WHERE key >> 32 = 1"
[ -e "$T/neg_tokens.db" ] && refused neg_tokens "run 1" V neg_tokens
# a length past the limit every trace reader applies (it would not fit the
# 32-bit field a request's lengths are held in)
tamper big_tokens "UPDATE request_rows SET prompt_tokens = 3000000000 WHERE key = (1 << 32) + 3"
refused big_tokens "req_id 3: prompt_tokens 3000000000, output_tokens 4 outside [1, 1000000000]" V big_tokens

# every stored column read back is checked (issue 16): a column that holds
# a flag's value against that flag's range (job/job_param.c), a metric
# against its kind (never negative, a fraction within [0, 1]); `show` and
# `validate` both refuse with one line naming the run and the column
S() { "$KVSIM" show 1 --db "$T/$1.db"; }
col() { # NAME SQL WANT: tamper, then `show` and `validate` refuse
  tamper "$1" "$2"
  refused "$1 (show)" "$3" S "$1"
  refused "$1 (validate)" "$3" V "$1"
}
col max_seqs "UPDATE runs SET max_seqs = -5 WHERE run_id = 1" \
  "run 1: runs.max_seqs = -5 is outside [1, 1073741824], the range of --max-seqs"
col tp0 "UPDATE runs SET tp = 0 WHERE run_id = 1" "run 1: runs.tp = 0 is outside [1, 1024]"
col util "UPDATE runs SET gpu_mem_util = 7 WHERE run_id = 1" \
  "run 1: runs.gpu_mem_util = 7 is outside [0.01, 1], the range of --gpu-mem-util"
col watermark "UPDATE runs SET watermark = 2 WHERE run_id = 1" "run 1: runs.watermark = 2 is outside [0, 0.99], the range of --watermark"
col rate_scale "UPDATE runs SET rate_scale = 0 WHERE run_id = 1" "run 1: runs.rate_scale = 0 is outside"
col n_finished "UPDATE runs SET n_finished = -1 WHERE run_id = 1" "run 1: runs.n_finished: -1 is negative"
col attainment "UPDATE runs SET slo_attainment = 1.5 WHERE run_id = 1" \
  "run 1: runs.slo_attainment: 1.5 is not a fraction in [0, 1]"
col tput "UPDATE runs SET throughput_tok_s = -3 WHERE run_id = 1" "run 1: runs.throughput_tok_s: -3 is negative"
# an untouched copy still reads
cp "$G" "$T/good_copy.db"
"$KVSIM" show 1 --db "$T/good_copy.db" >/dev/null 2>&1 && ok || bad "show of an untouched copy: $("$KVSIM" show 1 --db "$T/good_copy.db" 2>&1 | head -2)"

# sweep --resume over tampered rows: sweep 1's runs are 2 and 3
unnull null_status runs "status TEXT NOT NULL"
sqlite3 "$T/null_status.db" "UPDATE runs SET status = NULL WHERE run_id = 2"
(cd "$T" && out=$("$KVSIM" sweep --resume 1 --db "$T/null_status.db" 2>&1); rc=$?
 [ $rc -eq 2 ] || [ $rc -eq 0 ] || echo "FAIL: null status: exit $rc: $out" >"$T/f1"
 case "$out" in *Sanitizer*|*"runtime error"*) echo "FAIL: null status: $out" >"$T/f1" ;; esac)
[ -e "$T/f1" ] && bad "$(cat "$T/f1")" || ok
unnull null_key sweep_points "point_key TEXT NOT NULL"
sqlite3 "$T/null_key.db" "PRAGMA foreign_keys=OFF; UPDATE sweep_points SET point_key = NULL WHERE point_index = 0"
(cd "$T" && refused null_key "sweep 1 point 0" "$KVSIM" sweep --resume 1 --db "$T/null_key.db"; echo "$pass $fail" >"$T/counts")
read -r p2 f2 <"$T/counts"; pass=$p2; fail=$f2
tamper bad_point "UPDATE sweep_points SET point_index = 99 WHERE point_index = 0"
(cd "$T" && refused bad_point "outside its 2 points" "$KVSIM" sweep --resume 1 --db "$T/bad_point.db"; echo "$pass $fail" >"$T/counts")
read -r p2 f2 <"$T/counts"; pass=$p2; fail=$f2

# stored text reaches the terminal without control characters (ESC, CR, LF)
tamper label "UPDATE runs SET label = 'a' || char(27) || '[2J' || char(13) || 'b' || char(10) || 'c'"
out=$("$KVSIM" query --db "$T/label.db" "SELECT label FROM runs WHERE run_id = 1" | tail -1)
[ "$out" = "a?[2J?b?c" ] && ok || bad "query table label: $(printf '%s' "$out" | od -c | head -2)"
tamper key "UPDATE sweep_points SET point_key = 'max-seqs=2' || char(27) || ']0;x' || char(7) WHERE point_index = 0"
out=$(cd "$T" && "$KVSIM" sweep --resume 1 --db "$T/key.db" 2>&1)
case "$out" in *$'\033'*|*$'\a'*) bad "sweep echoed a control character" ;; *) ok ;; esac
out=$("$KVSIM" run --synthetic "$(printf 'n=1\033[2J')" --db "$T/x.db" 2>&1)
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && case "$out" in *$'\033'*) false ;; esac && ok || bad "flag value echoed raw: $out"

echo "cli_tampered_db: $pass passed, $fail failed"
[ $fail -eq 0 ]
