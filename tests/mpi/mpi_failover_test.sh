#!/usr/bin/env bash
# The MPI interposer across a failover (docs/failover.md): an unmodified MPI program
# (mpi_failover.c: in-place MPI_Allreduce of 256 Ki integer-valued floats, each checked) under
# mpirun/mpiexec, 4 ranks on one host (SUMCAST_MPI_INTRANODE=0: every rank talks to the
# appliances), every call's bytes split over two embedded services (sumcast_mpi_test_appliance)
# on loopback. Once rank 0 finished a few calls, the first service is SIGKILLed. Checks: the
# program exits 0 with every element of every call right, the interposer printed no error and
# took every call (none passed to MPI), and the surviving service ran the failover's jobs.
# MODE both-mpi: both services SIGKILLed at once mid-run, SUMCAST_MPI_FAILOVER_FALLBACK=mpi: the
# program still exits 0 with every call exact, the interposer printed no error, and its statistics
# count the fall-back (a communicator fell back, the later calls passed to MPI for it).
# MODE both-error: the same loss with the default (error): the program fails within the bound,
# and the interposer's error names both services, that every one is lost, and the setting.
# MODE both-mpi-behind: as both-mpi, but first the last rank's results are cut (an nftables rule,
# on its own loopback address, drops UDP to it; root): the other ranks complete the call it is
# stuck in and wait in the next one, so when both services are then killed the ranks are one call
# apart, and the rank behind must get that call's result from a rank ahead. Calls of 64 Ki floats,
# so that a rank sends every contribution of a call before it needs a result. Rank 0 holds after
# call 5 until the cut is in place (a FIFO, MPI_FAILOVER_HOLD_*): 60 such calls can all be done
# before a script polling for "# iteration 5" acts, and a cut in the last call leaves the ranks
# ahead in the final (passed) MPI call, where no recovery can reach them.
# usage: mpi_failover_test.sh ompi|mpich LIBSUMCAST_MPI PROGRAM TEST_APPLIANCE
#        [one|both-mpi|both-error|both-mpi-behind]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
flavor=$1 lib=$2 prog=$3 appliance=$4 mode=${5:-one}
case $mode in one | both-mpi | both-error | both-mpi-behind) ;; *) echo "unknown mode '$mode'" >&2; exit 2 ;; esac
if [ "$mode" = both-mpi-behind ]; then
  [ "$(id -u)" = 0 ] || { echo "skipped: needs root (an nftables rule)"; exit 77; }
  command -v nft >/dev/null || { echo "skipped: no nft"; exit 77; }
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/mpi_lib.sh"
if [ "$flavor" = ompi ]; then command -v mpirun >/dev/null || { echo "skipped: no mpirun"; exit 77; }
else command -v mpiexec.mpich >/dev/null || { echo "skipped: no mpiexec.mpich"; exit 77; }; fi

work=$(mktemp -d /tmp/sumcast-mpi-failover.XXXXXX)
app_pids=() run_pid="" nft_table=""
cleanup() {
  local rc=$? p
  [ -n "$run_pid" ] && kill -KILL "$run_pid" 2>/dev/null
  [ -n "$nft_table" ] && nft delete table inet "$nft_table" 2>/dev/null
  exec 7>&- 8>&- 9>&-
  for p in "${app_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ $rc -ne 0 ]; then for f in "$work"/*.log; do echo "--- $f"; tail -40 "$f"; done; fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
wait_for() {  # FILE PATTERN SECS
  local deadline=$((SECONDS + $3))
  until grep -q "$2" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    read -rt 0.05 <> <(:) || true  # poll interval, not synchronisation
  done
}

head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"; echo >>"$work/token"
chmod 600 "$work/token"  # a token file must be private, or the services refuse it
base="127.$((1 + $$ % 200)).$(( ($$ / 200) % 250 + 1))"
last=$((RANDOM % 200 + 20))
port=$((20000 + RANDOM % 20000))
addrs=()
# Each service runs until its stdin (a pipe held on fd 8 or 9 here) closes, or a signal.
exec 8> >(exec "$appliance" "$base.$last" "$port" "$work/token" >"$work/appliance0.log" 2>&1)
app_pids+=($!)
exec 9> >(exec "$appliance" "$base.$((last + 1))" "$port" "$work/token" >"$work/appliance1.log" 2>&1)
app_pids+=($!)
for k in 0 1; do
  wait_for "$work/appliance$k.log" '^ready' 20 || fail "test appliance $k did not start"
  addrs+=("$base.$((last + k)):$port")
done

iters=60 count=262144 after_ms=500 fallback=error extra=()
case $mode in both-mpi) fallback=mpi ;; both-mpi-behind) fallback=mpi ;; esac
if [ "$mode" = both-mpi-behind ]; then
  # The cut rank hears nothing from then on: it must not declare the services lost by silence
  # before the test kills them (it does so within 1.5 s of the cut).
  count=65536 after_ms=4000 behind_ip="$base.$((last + 2))"
  mkfifo "$work/hold"
  exec 7<>"$work/hold"  # read-write: neither side's open blocks; rank 0 reads a line from it
  extra=(MPI_FAILOVER_LAST_RANK_BIND="$behind_ip" SUMCAST_MPI_SLOTS=128 MPI_FAILOVER_HOLD_AT=5
         MPI_FAILOVER_HOLD_FIFO="$work/hold")
fi
mpi_launch "$flavor" 4 "" -- LD_PRELOAD="$lib" SUMCAST_MPI_APPLIANCES="${addrs[0]},${addrs[1]}" \
  SUMCAST_MPI_TOKEN_FILE="$work/token" SUMCAST_MPI_STATS=1 SUMCAST_MPI_INTRANODE=0 SUMCAST_MPI_THRESHOLD=1024 \
  SUMCAST_MPI_FAILOVER_AFTER_MS=$after_ms SUMCAST_MPI_REGISTER_TIMEOUT_MS=20000 SUMCAST_MPI_OP_TIMEOUT_MS=20000 \
  SUMCAST_MPI_FAILOVER_FALLBACK=$fallback "${extra[@]}" -- "$prog" $iters $count >"$work/run.log" 2>&1 &
run_pid=$!
wait_for "$work/run.log" '^# iteration 5$' 60 || fail "the program did not get through 5 calls"
grep -q "^# iteration $iters\$" "$work/run.log" && fail "the program was done before the kill"
if [ "$mode" = both-mpi-behind ]; then
  nft_table="sumcast_mpi_failover_$$"
  nft add table inet "$nft_table"
  nft add chain inet "$nft_table" out "{ type filter hook output priority 0; }"
  nft add rule inet "$nft_table" out ip daddr "$behind_ip" meta l4proto udp drop
  cut_at=$(grep -c '^# iteration' "$work/run.log")
  [ "$cut_at" = 5 ] || fail "rank 0 did not hold after call 5 ($cut_at calls done at the cut)"
  echo go >&7  # rank 0 goes on into call 6
  # The others complete the call the cut rank is stuck in (rank 0 prints it), unless the cut
  # caught that rank still missing results of the call rank 0 had just completed: both end in
  # the ranks one call apart. Bounded well below the cut rank's silence limit.
  deadline=$((SECONDS + 2))
  while [ "$(grep -c '^# iteration' "$work/run.log")" -le "$cut_at" ] && [ $SECONDS -lt $deadline ]; do
    read -rt 0.02 <> <(:) || true  # poll interval, not synchronisation
  done
  echo "cut the last rank's results ($behind_ip) after $cut_at calls; rank 0 then completed" \
    "$(grep -c '^# iteration' "$work/run.log")"
fi
if [ "$mode" = one ]; then
  kill -KILL "${app_pids[0]}"
  echo "killed the first appliance (${addrs[0]}) after $(grep -c '^# iteration' "$work/run.log") calls"
else
  kill -KILL "${app_pids[0]}" "${app_pids[1]}"
  echo "killed both appliances after $(grep -c '^# iteration' "$work/run.log") calls"
fi
deadline=$((SECONDS + 120))
while kill -0 "$run_pid" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "the program still runs 120 s after the kill"
  read -rt 0.1 <> <(:) || true  # poll interval, not synchronisation
done
rc=0
wait "$run_pid" || rc=$?
run_pid=""
if [ "$mode" = both-error ]; then
  [ $rc != 0 ] || fail "the program exited 0 although every appliance was lost and the fall-back is off"
  err=$(grep -m1 "^sumcast-mpi: ERROR: MPI_Allreduce through the appliance failed" "$work/run.log") ||
    fail "no error line from the interposer"
  for want in "every aggregator is lost" "${addrs[0]} lost" "${addrs[1]} lost" "SUMCAST_MPI_FAILOVER_FALLBACK=mpi"; do
    grep -qF "$want" <<<"$err" || fail "the error does not say '$want': $err"
  done
  echo "the program failed (exit $rc) with: ${err:0:400}"
  exit 0
fi
[ $rc = 0 ] || fail "the program exited $rc"
grep -q "^all exact: $iters calls" "$work/run.log" || fail "not every call exact"
! grep -qi "sumcast-mpi: \(error\|warning\)" "$work/run.log" || fail "the interposer reported a problem"
taken=$(stat_calls "$work/run.log" MPI_Allreduce)
if [ "$mode" = both-mpi ] || [ "$mode" = both-mpi-behind ]; then
  line=$(grep -m1 "^sumcast-mpi:   every appliance lost: 1 communicator(s) fell back to MPI" "$work/run.log") ||
    fail "the statistics do not count the fall-back"
  passed=$(sed -n 's/^sumcast-mpi:   passed because:.* fallback \([0-9]*\).*/\1/p' "$work/run.log" | head -1)
  [ "${taken:-0}" -ge 5 ] && [ "${taken:-0}" -lt "$iters" ] || fail "the interposer took ${taken:-no} calls"
  [ "${passed:-0}" -ge 1 ] || fail "no later call passed to MPI for the fall-back"
  grep -m1 "^sumcast-mpi: every appliance lost on a communicator" "$work/run.log" | cut -c1-300
  if [ "$mode" = both-mpi-behind ]; then
    grep -q "of them from another rank's result 1" <<<"$line" || fail "no rank got a result from another: $line"
    grep -q "the ranks one call behind got that call's result from this rank" "$work/run.log" ||
      fail "the rank ahead did not say it sent the result"
  fi
  echo "every call exact across the loss of both appliances: $taken taken (the last completed by MPI)," \
    "then passed to MPI (at most $passed per rank); ${line#sumcast-mpi:   }"
  exit 0
fi
# The program's calls, plus its final 1-element MPI_LONG sum (below the threshold: passed).
[ "${taken:-0}" = "$iters" ] || fail "the interposer took ${taken:-no} MPI_Allreduce calls, want $iters"
exec 9>&-  # the survivor stops and prints its counters
wait "${app_pids[1]}" || fail "the surviving service failed"
app_pids=("${app_pids[0]}")
# The job itself, then the failover's agreement job and the job that took the lost range.
started=$(sed -n 's/.*jobs started \([0-9]*\).*/\1/p' "$work/appliance1.log")
[ "${started:-0}" -ge 3 ] || fail "the surviving service started ${started:-no} jobs, want the job and the failover's two"
echo "the interposer took all $iters calls, every one exact, across the failover ($started jobs on the survivor)"
