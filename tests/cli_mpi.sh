#!/usr/bin/env bash
# cli_mpi.sh — `mpirun -np 2 kvsim sweep`: two ranks store the same rows as
# one process (requests, steps and summaries of every point, and even the
# same run ids, since rank 0 writes in point order); --resume under MPI
# fills in deleted points; SIGTERM to one rank stops every rank, marks the
# sweep interrupted (exit 130) and --resume completes it; bad input on rank 0
# ends every rank with exit 2.
# Skipped (exit 0, with a note) when mpirun is missing or kvsim was built
# without MPI (-DKVSIM_MPI=OFF or no libopenmpi-dev).
. "$(dirname "$0")/testlib.sh"
if ! command -v mpirun > /dev/null 2>&1; then
  echo "SKIP: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
  exit 0
fi
if ! "$KVSIM" --version | grep -q '^MPI sweeps: yes'; then
  echo "SKIP: $KVSIM was built without MPI"
  exit 0
fi
# an SQL error is a failure (recorded in $T/sqlerr), never an empty match
q() { sqlite3 "$1" "$2" 2>> "$T/sqlerr"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI itself leaks at MPI_Finalize (in plugins it has unloaded by then,
# which LeakSanitizer cannot even name), so a sanitizer build checks memory
# errors here but not leaks; the same sweep code runs leak-checked without
# MPI in cli_sweep.sh.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
# the MPI calls are a module opened under mpirun only: the binary needs no
# MPI library at start (cli/comm.h), and a module that cannot be opened is
# one line naming it, exit 2, before anything is stored
ldd "$KVSIM" | grep -q 'libmpi\|libopen-pal' && bad "kvsim needs an MPI library at start" || ok
OMPI_COMM_WORLD_SIZE=2 KVSIM_MPI_MODULE=/nonexistent/libkvsim_mpi.so "$KVSIM" sweep \
  --db "$T/nomod.db" --model llama-7b --gpu a100-80g \
  --synthetic 'arrival=poisson,rate=2,n=20,prompt=64,output=16' --grid 'max-seqs=4,8' \
  > "$T/nomod.out" 2> "$T/nomod.err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/nomod.err")" -eq 1 ] && grep -q 'cannot load the module libkvsim_mpi.so' "$T/nomod.err" &&
  [ ! -s "$T/nomod.out" ] && [ ! -e "$T/nomod.db" ] && ok ||
  bad "missing MPI module: exit $rc, stderr '$(cat "$T/nomod.err")'"
MPIRUN=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)

S='arrival=poisson,rate=RATE,n=200,prompt=uniform:32:600,output=uniform:1:200,priorities=0:0.5/1:0.5'
args=(--engine vllm-v0 --model llama-2-7b --synthetic "${S/RATE/10}" --seed 5 --record-steps
      --grid 'max-seqs=8,64,256' --grid 'batching=static,continuous' --grid 'rate=5,40'
      --grid 'policy=fcfs,priority' --quiet)
"${MPIRUN[@]}" "$KVSIM" sweep "${args[@]}" --db "$T/mpi.db" > "$T/mpi.out" 2> "$T/mpi.err"
rc=$?
[ $rc -eq 0 ] && ok || bad "mpirun sweep exit $rc: $(tail -5 "$T/mpi.err")"
[ "$(cat "$T/mpi.out")" = 1 ] && ok || bad "mpirun sweep printed '$(cat "$T/mpi.out")' (want the id once, from rank 0)"
"$KVSIM" sweep "${args[@]}" --db "$T/one.db" > /dev/null 2>&1 || bad "one-process sweep failed"

REQ="select sp.point_index, sp.run_id, q.req_id, q.arrival_s, q.prompt_tokens, q.output_tokens,
            q.priority, q.status, q.first_token_s, q.finish_s, q.preemptions, q.swaps
     from sweep_points sp join requests q on q.run_id = sp.run_id order by 1, 3"
STEPS="select sp.point_index, s.step_id, s.start_s, s.dur_s, s.kind, s.tokens, s.kv_read,
              s.kv_blocks_used, hex(s.members)
       from sweep_points sp join steps s on s.run_id = sp.run_id order by 1, 2"
RUNS="select point_index, point_key, run_id, status, batching, policy, max_seqs, synthetic,
             n_finished, ttft_p99_s, tpot_p99_s, e2e_p99_s, throughput_tok_s, preemptions, n_steps
      from sweep_runs order by point_index"
for what in REQ STEPS RUNS; do
  a=$(q "$T/mpi.db" "${!what}" | sha256sum)
  b=$(q "$T/one.db" "${!what}" | sha256sum)
  [ "$a" = "$b" ] && ok || bad "2 ranks and 1 process differ in $what"
done
[ "$(q "$T/mpi.db" "select count(*) from sweep_points")" = 24 ] && ok || bad "mpi sweep lacks points"
[ "$(q "$T/mpi.db" "select count(*) from steps")" -gt 0 ] && ok || bad "no steps shipped to rank 0"

# --resume under MPI: delete three points' runs (cascading to their point rows)
q "$T/mpi.db" "pragma foreign_keys=on; delete from runs where run_id in
  (select run_id from sweep_points where point_index in (3, 10, 17))"
[ "$(q "$T/mpi.db" "select count(*) from sweep_points")" = 21 ] && ok || bad "delete did not cascade"
"${MPIRUN[@]}" "$KVSIM" sweep --resume 1 --db "$T/mpi.db" --quiet > /dev/null 2> "$T/mpi.err"
[ $? -eq 0 ] && ok || bad "mpirun --resume: $(tail -5 "$T/mpi.err")"
SUM="select point_index, point_key, n_finished, ttft_p99_s, e2e_p99_s, n_steps from sweep_runs order by point_index"
[ "$(q "$T/mpi.db" "$SUM" | sha256sum)" = "$(q "$T/one.db" "$SUM" | sha256sum)" ] && ok ||
  bad "resumed MPI sweep differs from the one-process sweep"
[ "$(q "$T/mpi.db" "pragma integrity_check")" = ok ] && ok || bad "integrity_check"

# Ctrl-C under MPI: SIGTERM to rank 1 alone (a launcher may signal only some
# ranks) stops every rank before the next round of points; rank 0 keeps the
# stored points, marks the sweep interrupted, exits 130; --resume completes it
# with the rows of an uninterrupted sweep.
S2="${S/RATE/10}"
# 20,000 requests a point: the sweep must outlast the launch, the first
# stored point and the signal (at 3,000 it took 0.3 s and could finish first)
iargs=(--engine vllm-v0 --model llama-2-7b --synthetic "${S2/n=200/n=20000}" --seed 5
       --grid 'max-seqs=8,16,32,64,128,256' --grid 'rate=5,10,20,40' --quiet)
("${MPIRUN[@]}" "$KVSIM" sweep "${iargs[@]}" --db "$T/int.db" > /dev/null 2> "$T/int.err"
 echo $? > "$T/int.rc") &
n=0
for _ in $(seq 1 300); do
  n=$(sqlite3 "$T/int.db" "select count(*) from sweep_points" 2> /dev/null || echo 0)
  [ "${n:-0}" -ge 1 ] && break
  sleep 0.1
done
ranks=$(for pid in $(pgrep -f -- "$KVSIM sweep"); do
          [ "$(ps -o comm= -p "$pid" 2> /dev/null)" = kvsim ] && echo "$pid"; done | sort -n)
r1=$(echo "$ranks" | sed -n 2p)
[ -n "$r1" ] && kill -TERM "$r1"
wait
[ "$(cat "$T/int.rc")" = 130 ] && ok || bad "interrupted MPI sweep exit $(cat "$T/int.rc"): $(tail -3 "$T/int.err")"
got=$(q "$T/int.db" "select status || ' ' || (select count(*) from sweep_points) from sweeps")
case "$got" in
  "interrupted "*) [ "${got#interrupted }" -lt 24 ] && ok || bad "interrupted sweep stored all points: $got" ;;
  *) bad "MPI sweep after SIGTERM: '$got' (want interrupted)" ;;
esac
"${MPIRUN[@]}" "$KVSIM" sweep --resume 1 --db "$T/int.db" --quiet > /dev/null 2> "$T/int.err"
[ $? -eq 0 ] && ok || bad "mpirun --resume after SIGTERM: $(tail -3 "$T/int.err")"
[ "$(q "$T/int.db" "select status || ' ' || (select count(*) from sweep_points) from sweeps")" = "complete 24" ] &&
  ok || bad "resumed MPI sweep: $(q "$T/int.db" "select status from sweeps")"
"$KVSIM" sweep "${iargs[@]}" --db "$T/int1.db" > /dev/null 2>&1 || bad "one-process sweep failed"
[ "$(q "$T/int.db" "$SUM" | sha256sum)" = "$(q "$T/int1.db" "$SUM" | sha256sum)" ] && ok ||
  bad "interrupted and resumed MPI sweep differs from one process's"

# bad input: rank 0 reports once, every rank exits
"${MPIRUN[@]}" "$KVSIM" sweep --db "$T/bad.db" --model llama-2-7b --grid 'nosuch=1,2' \
  > /dev/null 2> "$T/bad.err"
[ $? -ne 0 ] && ok || bad "bad grid under mpirun exited 0"
[ "$(grep -c "unknown option 'nosuch'" "$T/bad.err")" = 1 ] && ok ||
  bad "bad grid under mpirun: $(cat "$T/bad.err")"

[ ! -s "$T/sqlerr" ] && ok || bad "SQL errors: $(cat "$T/sqlerr")"
echo "cli_mpi: $pass passed, $fail failed"
[ $fail -eq 0 ]
