#!/usr/bin/env bash
# Failover on the namespace test bed (docs/failover.md): n = 4 ranks, each call's bytes split over
# two aggregators, the real sumcastd (appliance 0, TB_MGMT_IP) and sumcast-serve on an aggregation
# node of its own (a1), or in MODE hostagg sumcastd and the four worker hosts' sumcast-serve.
# Mid-job (sumcastd has summed a few calls' worth) one aggregator is lost; every rank runs 120
# calls (30 under loss) of 256 Ki integer-valued fp32 elements with --check:
#   kill     SIGKILL sumcastd (control connections drop)
#   stop     SIGSTOP sumcast-serve on a1 (connections stay up: silence tells; sumcastd is the
#            agreement's and the range's new home); then SIGCONT: a new job over both is exact
#   cut      sumcastd's data link goes down on the switch (its control stays up: silence tells)
#   hostagg  SIGKILL sumcastd; its range moves to host 0's aggregator
#   loss1    1% loss on every switch port (tb_loss 1), then SIGKILL sumcastd
#   both     SIGKILL both: every rank exits 1, its error naming both aggregators
#   (kill, hostagg and loss1 stop sumcastd first and kill it once frames wait unanswered at its
#   port, so that the kill always finds chunks in flight)
# Otherwise every rank exits 0 with every element right, printed the failover (the lost
# aggregator, where its range went) and, summed over the ranks, replayed chunks.
#
# usage: failover_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR SERVE MODE
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
SERVE=$5
MODE=$6
N=4
ITERS=120
[ "$MODE" = loss1 ] && ITERS=30  # each call waits for some retransmissions there: keep it seconds
COUNT=256K

IT_JOB_TIMEOUT_MS=20000 it_begin "$N"
it_start_appliance
A0="$TB_MGMT_IP:4790"
A1="$TB_SUBNET.101:4790"
SERVE_PIDS=()
start_serve() {  # NS IP
  ip netns exec "$(tb_ns "$1")" "$SERVE" --bind "$2" --token-file "$IT_WORK/token" --job-timeout-ms 20000 \
    --slots 64 >"$IT_WORK/serve-$1.log" 2>&1 &
  SERVE_PIDS+=($!)
  IT_EXTRA_PIDS+=($!)
  tb_wait_line "$IT_WORK/serve-$1.log" "^sumcast-serve: ready" 20 "$!" || fail "sumcast-serve in $1 did not start"
}
aggs=(--appliance "$A0")
if [ "$MODE" = hostagg ]; then
  for ((i = 0; i < N; i++)); do
    start_serve "w$i" "${TB_WORKER_IP[$i]}"
    aggs+=(--host-agg "$i=${TB_WORKER_IP[$i]}:4790")
  done
  new_home="${TB_WORKER_IP[0]}:4790"
else
  tb_add_node a1 "$TB_SUBNET.101" || fail "aggregation node a1 did not come up"
  start_serve a1 "$TB_SUBNET.101"
  aggs+=(--appliance "$A1")
  new_home=$A1
fi
for ((i = 0; i < N; i++)); do
  # --slots 64: what the test bed's sumcastd grants, so that any aggregator can take another's range.
  ip netns exec "$(tb_ns "w$i")" "$ALLREDUCE" "${aggs[@]}" --token-file "$IT_WORK/token" --job "fo-$MODE" \
    --rank "$i" --world "$N" --bind "${TB_WORKER_IP[$i]}" --check --iters $ITERS --warmup 0 --counts $COUNT \
    --slots 64 --failover-after-ms 500 --failover-timeout-ms 10000 --op-timeout-ms 20000 \
    >"$IT_WORK/fo.r$i.log" 2>&1 &
  IT_PIDS+=($!)
done
pids=("${IT_PIDS[@]}")

[ "$MODE" = loss1 ] && tb_loss 1
contributions() { "$SUMCASTCTL" --prefix "$TB_PREFIX" stats --json | jq -r .total.contributions; }
# A few calls' worth summed by sumcastd (its share of a call: 4 ranks x 512 chunks, or less with
# the hosts aggregating), and the ranks still running: the loss comes mid-job.
under_way() { local c; c=$(contributions) && [ "$c" -ge 6000 ]; }
it_until 60 under_way || fail "the job made no progress within 60 s"
for p in "${pids[@]}"; do _it_alive "$p" || fail "a rank was done before the failure was injected"; done
at=$(contributions)
victim=$A0
case $MODE in
  kill | hostagg | loss1)
    # Frozen first and killed once frames reach it unanswered, so that some rank surely has chunks
    # outstanding there: a kill that lands between two calls (the ranks waiting on the other
    # aggregator's half) would leave nothing to replay.
    app_rx() { tb_exec app cat "/sys/class/net/$TB_APP_DATA_IF/statistics/rx_packets"; }
    kill -STOP "$IT_APP_PID"
    rx_at_stop=$(app_rx)
    frames_unanswered() { [ $(($(app_rx) - rx_at_stop)) -ge 8 ]; }
    if ! it_until 5 frames_unanswered; then
      # A rank whose call waits probes it every 125 ms (a quarter of --failover-after-ms; docs/
      # failover.md, section 1), so silence means no rank's call waited. Resumed, so that the
      # ranks finish and their logs (above, on failure) say where they were, failovers included.
      got=$(($(app_rx) - rx_at_stop))
      kill -CONT "$IT_APP_PID"
      note "sumcastd resumed; its jobs: $("$SUMCASTCTL" --prefix "$TB_PREFIX" jobs 2>&1 | tr '\n' ' ')"
      it_wait 60 || true
      fail "no frame reached the frozen sumcastd within 5 s ($got frames; the ranks' logs say where they were)"
    fi
    disown "$IT_APP_PID"
    kill -KILL "$IT_APP_PID"
    ;;
  stop)
    kill -STOP "${SERVE_PIDS[0]}"
    victim=$A1
    new_home=$A0
    ;;
  cut) tb_exec sw ip link set pd down ;;
  both)
    disown "$IT_APP_PID"
    kill -KILL "$IT_APP_PID" "${SERVE_PIDS[0]}"
    ;;
  *) fail "unknown mode $MODE" ;;
esac
note "$MODE: $victim lost at $at contributions"

it_wait 90 || fail "ranks still running 90 s after the failure"
if [ "$MODE" = both ]; then
  for ((i = 0; i < N; i++)); do
    [ "${IT_RC[$i]}" = 1 ] || fail "rank $i exited ${IT_RC[$i]}, want 1"
    err=$(grep '^sumcast-allreduce:' "$IT_WORK/fo.r$i.log" | tail -n 1)
    [[ $err == *"$A0"* && $err == *"$A1"* ]] || fail "rank $i's error does not name $A0 and $A1: $err"
    note "rank $i: $err"
  done
  echo "PASS: both aggregators lost: every rank failed naming both"
  exit 0
fi
it_expect_exact fo "$N" 1
replayed=0
for ((i = 0; i < N; i++)); do
  line=$(grep '^# failover 1 of rank' "$IT_WORK/fo.r$i.log" || true)
  [[ $line == *"$victim lost"*"moved to $new_home"* ]] || fail "rank $i: no failover of $victim to $new_home: '$line'"
  [ "$(it_counter fo "$i" failovers)" = 1 ] || fail "rank $i counted $(it_counter fo "$i" failovers) failovers"
  replayed=$((replayed + $(it_counter fo "$i" replayed_chunks)))
  note "rank $i: $line"
done
[ "$replayed" -gt 0 ] || fail "no rank replayed a chunk"
if [ "$MODE" = stop ]; then  # the frozen aggregator comes back and takes new jobs
  kill -CONT "${SERVE_PIDS[0]}"
  IT_PIDS=()
  for ((i = 0; i < N; i++)); do
    ip netns exec "$(tb_ns "w$i")" "$ALLREDUCE" "${aggs[@]}" --token-file "$IT_WORK/token" --job fo-rejoin \
      --rank "$i" --world "$N" --bind "${TB_WORKER_IP[$i]}" --check --iters 3 --warmup 0 --counts $COUNT --slots 64 \
      >"$IT_WORK/rejoin.r$i.log" 2>&1 &
    IT_PIDS+=($!)
  done
  it_wait 60 || fail "the job after SIGCONT did not finish"
  it_expect_exact rejoin "$N" 1
  ! grep -q '^# failover' "$IT_WORK"/rejoin.r*.log || fail "the job after SIGCONT failed over"
  note "after SIGCONT, a new job over both aggregators was exact without a failover"
fi
echo "PASS: $MODE: $victim lost mid-job; $ITERS calls exact on every rank, range moved to $new_home, $replayed chunks replayed"
