#!/usr/bin/env bash
# Faults on the real appliance with 4 worker processes (fp32, 1 Mi elements per
# call, --check). MODE:
#   link_flap   rank 1's veth goes down for FAULT_MS (2000) ms once the job is under way, then up.
#   loss_burst  the switch drops 100% of the frames it forwards (nftables) for FAULT_MS ms, then the
#               rule is removed.
#   restart     sumcastd is killed (SIGKILL) mid-job; every rank must fail within its op timeout
#               (3000 ms) + 1 s naming the appliance; sumcastd is started again and a new job
#               registers and runs exact on it.
# For link_flap and loss_burst the job either completes exactly after the fault (the workers'
# retransmissions recover within the appliance's job timeout, 10 s here), or every rank fails with
# an error within FAULT_MS + job timeout + op timeout + slack of the fault's start: never a hang,
# never a wrong sum. After every fault: no job listed, jobs_active 0 (no leaked slots or jobs).
# The fault's duration is the fault itself, not a synchronisation wait.
#
# usage: fault_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR MODE
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../integration/lib.sh
IT_LIMIT_S=${IT_LIMIT_S:-85}  # every wait stops by then (ctest TIMEOUT 120), cleanup included
source "$here/../integration/lib.sh"
shift 4
MODE=$1
N=4
FAULT_MS=${FAULT_MS:-2000}
JOB_TIMEOUT_MS=10000
OP_TIMEOUT_MS=3000
COUNT=$((1 << 20))

IT_JOB_TIMEOUT_MS=$JOB_TIMEOUT_MS it_begin $N
it_start_appliance

contributions() { it_stat contributions; }
under_way() { local c; c=$(contributions) && [ "$c" -ge 1000 ]; }
no_job_left() {
  local j
  j=$(it_jobs_json) || return 1
  [ "$(jq '[to_entries[] | select(.key | startswith("job"))] | length' <<<"$j")" = 0 ] || return 1
  [ "$(it_stat jobs_active)" = 0 ]
}
hold_ms() { read -rt "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')" <> <(:) || true; }

# The restart job is long enough never to finish before the kill (its 4 calls took 0.7 s under
# ASan, and the kill sometimes came after the last one); it ends at the kill anyway.
case $MODE in
  link_flap | loss_burst) op_timeout=20000 iters=4 ;;
  restart) op_timeout=$OP_TIMEOUT_MS iters=1000 ;;
  *) fail "unknown mode $MODE" ;;
esac
it_ranks job "fault-$MODE" $N --dtype fp32 --counts $COUNT --iters $iters --warmup 0 --check --op-timeout-ms "$op_timeout"
it_until 60 under_way || fail "the job made no progress within 60 s"
t0=$EPOCHREALTIME
case $MODE in
  link_flap)
    tb_exec w1 ip link set "$TB_WORKER_IF" down
    note "rank 1's link down at $(contributions) contributions"
    hold_ms "$FAULT_MS"
    tb_exec w1 ip link set "$TB_WORKER_IF" up
    note "rank 1's link up"
    ;;
  loss_burst)
    tb_exec sw nft -f - <<'NFT'
table bridge robust_burst {
  chain drop_all { type filter hook forward priority 0; policy drop; }
}
NFT
    note "switch drops 100% from $(contributions) contributions"
    hold_ms "$FAULT_MS"
    tb_exec sw nft delete table bridge robust_burst
    note "loss burst over"
    ;;
  restart)
    at=$(contributions)
    disown "$IT_APP_PID"
    kill -KILL "$IT_APP_PID"
    note "SIGKILL sumcastd (pid $IT_APP_PID) at $at contributions"
    ;;
esac

it_wait 60 || fail "ranks still running 60 s after the fault: a hang"
if [ "$MODE" = restart ]; then
  bound=$((op_timeout + 1000))
else
  bound=$((FAULT_MS + JOB_TIMEOUT_MS + op_timeout + 3000))
fi
ok=0 failed=0
for ((i = 0; i < N; i++)); do
  ms=$(it_elapsed_ms "$t0" "${IT_EXIT_AT[$i]}")
  msg=$(grep '^sumcast-allreduce: ' "$IT_WORK/job.r$i.log" | tail -n 1 || true)
  grep -q "wrong elements" "$IT_WORK/job.r$i.log" && fail "rank $i counted wrong elements"
  if [ "${IT_RC[$i]}" = 0 ]; then
    ok=$((ok + 1))
    note "rank $i: completed, $ms ms after the fault began"
  else
    failed=$((failed + 1))
    [ "${IT_RC[$i]}" = 1 ] || fail "rank $i exited ${IT_RC[$i]}, want 0 or 1 ($msg)"
    [ "$ms" -le "$bound" ] || fail "rank $i took $ms ms to fail, bound $bound ms"
    note "rank $i: exit 1 after $ms ms (bound $bound): $msg"
  fi
done
case $MODE in
  restart)
    [ $ok = 0 ] || fail "$ok ranks completed although the appliance was killed"
    for ((i = 0; i < N; i++)); do
      grep '^sumcast-allreduce: ' "$IT_WORK/job.r$i.log" | tail -n 1 | grep -q "appliance $TB_MGMT_IP:4790" ||
        fail "rank $i: error does not name the appliance"
    done
    wait "$IT_APP_PID" 2>/dev/null || true
    rm -rf "/var/run/dpdk/$TB_PREFIX"
    # A fresh log: it_start_appliance waits for "ready" in it, which the old one already has.
    mv "$IT_WORK/sumcastd.log" "$IT_WORK/sumcastd.killed.log"
    it_start_appliance
    no_job_left || fail "the restarted appliance lists jobs"
    it_ranks again "fault-again" $N --dtype fp32 --counts 1,1000,$COUNT --iters 2 --warmup 1 --check
    it_wait 60 || fail "the job on the restarted appliance did not finish within 60 s"
    it_expect_exact again $N 3
    note "a new job ran exact on the restarted appliance"
    ;;
  *)
    if [ $ok = $N ]; then
      it_expect_exact job $N 1
      note "the job recovered from the fault and completed exact"
    elif [ $ok -gt 0 ]; then
      # A rank may finish its last call just before the others see the abort; accepted only when
      # its own results were exact (checked above: no wrong elements).
      note "$ok rank(s) completed, $failed failed with a bounded error"
    else
      note "every rank failed with a bounded error"
    fi
    ;;
esac
it_until 15 no_job_left || fail "the appliance still lists a job or counts it active after the fault"
echo "PASS: $MODE: no hang, no wrong sum, bounded errors or exact completion; no job left"
