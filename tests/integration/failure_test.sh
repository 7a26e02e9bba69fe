#!/usr/bin/env bash
# Failures in the middle of an all-reduce, on the real appliance and 4 worker processes. The job:
# fp32, 16 Mi elements (64 MiB, 65536 chunks per rank) per call, 100 calls; the failure is injected
# once the appliance has counted 1000 contributions, i.e. inside the first call (which completes
# only after 4 + 262144 contributions: the line-up call's 4, then the call's). The call is that
# large because at 16 MiB the ASan pass's poll of the stats (sumcastctl, jq) once came back at 55 K
# of the call's 65 K contributions, and once after the call; at 64 MiB it came back at 14-64 K.
# MODE:
#   worker_killed     SIGKILL rank 1. Its control connection closes; the appliance fails the job
#                     (member left) and tells the others. Each other rank must exit 1 with the
#                     appliance's abort within control.job_timeout_ms (2000) + 1 s of slack, although
#                     its own op timeout is 20 s; the appliance must free the job (no job listed,
#                     jobs_active 0) and the failed call must not have completed there.
#   worker_stopped    SIGSTOP rank 1: its connection stays open, only the appliance's job timeout
#                     (no progress for 2000 ms while a round waits) can notice. The others must exit 1
#                     with the timeout abort within 2000 ms + 2 s of the stop (the timeout runs from
#                     the last progress, before the stop); the job is freed; rank 1, continued, must
#                     exit 1 too (the job is gone) within 5 s.
#   appliance_killed  SIGKILL sumcastd. Every rank (op timeout 2000 ms) must exit 1 within 2000 ms
#                     + 1 s, with an error naming the appliance, and none may have completed a call.
#                     (The kernel closes the dead daemon's control connections: the ranks notice that.)
#   appliance_stopped SIGSTOP sumcastd: a hung appliance whose connections stay open, as after a
#                     crash of its host or a partition. Only the ranks' own bound can notice: each
#                     must exit 1 with "no result for 2000 ms" (its op timeout) within 2000 ms + 1 s.
# Elapsed times are measured from the signal to the moment a rank is seen gone (20 ms polling).
#
# usage: failure_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR MODE
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
shift 4
MODE=$1
N=4
JOB_TIMEOUT_MS=2000
COUNT=$((16 << 20))
FIRST_CALL_DONE=$((N + N * COUNT / 256))  # contributions once the first call completed (256 fp32 per chunk)

IT_JOB_TIMEOUT_MS=$JOB_TIMEOUT_MS it_begin $N
it_start_appliance

case $MODE in
  worker_killed | worker_stopped) op_timeout=20000 ;;  # the error must come from the appliance
  appliance_killed | appliance_stopped) op_timeout=2000 ;;
  *) fail "unknown mode $MODE" ;;
esac
it_ranks job "fail-$MODE" $N --dtype fp32 --counts $COUNT --iters 100 --warmup 0 --op-timeout-ms "$op_timeout"
pids=("${IT_PIDS[@]}")

contributions() { "$SUMCASTCTL" --prefix "$TB_PREFIX" stats --json | jq -r .total.contributions; }
under_way() { local c; c=$(contributions) && [ "$c" -ge 1000 ]; }
it_until 60 under_way || fail "the job made no progress within 60 s"
at_signal=$(contributions)
[ "$at_signal" -lt "$FIRST_CALL_DONE" ] || fail "the first call completed before the failure was injected"

# Waits (bounded) for the ranks in IDX... to exit; checks status 1, the message, the time taken.
# check_exits T0 BOUND_MS PATTERN IDX...
check_exits() {
  local t0=$1 bound=$2 pattern=$3 i ms msg
  shift 3
  IT_PIDS=()
  for i in "$@"; do IT_PIDS+=("${pids[$i]}"); done
  it_wait 30 || fail "ranks $* still running 30 s after the failure"
  local k=0
  for i in "$@"; do
    ms=$(it_elapsed_ms "$t0" "${IT_EXIT_AT[$k]}")
    msg=$(grep '^sumcast-allreduce: ' "$IT_WORK/job.r$i.log" | tail -n 1 || true)
    [ "${IT_RC[$k]}" = 1 ] || fail "rank $i exited ${IT_RC[$k]}, want 1 ($msg)"
    grep -q -- "$pattern" <<<"$msg" || fail "rank $i: error '$msg' does not match '$pattern'"
    [ "$ms" -le "$bound" ] || fail "rank $i took $ms ms to fail, bound $bound ms"
    note "rank $i: exit 1 after $ms ms (bound $bound): $msg"
    k=$((k + 1))
  done
}

no_job_left() {
  local j
  j=$("$SUMCASTCTL" --prefix "$TB_PREFIX" jobs --json) || return 1
  [ "$(jq '[to_entries[] | select(.key | startswith("job"))] | length' <<<"$j")" = 0 ] || return 1
  [ "$("$SUMCASTCTL" --prefix "$TB_PREFIX" stats --json | jq -r .total.jobs_active)" = 0 ]
}

case $MODE in
  worker_killed)
    t0=$EPOCHREALTIME
    disown "${pids[1]}"  # no "Killed" report from bash; its status is not needed
    kill -KILL "${pids[1]}"
    note "SIGKILL rank 1 (pid ${pids[1]}) at $at_signal contributions"
    # The abort reaches a worker on the control connection or as an abort packet, whichever first.
    check_exits "$t0" $((JOB_TIMEOUT_MS + 1000)) "aborted the job: a member left\|(member_left)" 0 2 3
    it_until 5 no_job_left || fail "the appliance still lists the job 5 s after its ranks left"
    final=$(contributions)
    [ "$final" -lt "$FIRST_CALL_DONE" ] || fail "the call completed on the appliance ($final contributions)"
    ;;
  worker_stopped)
    t0=$EPOCHREALTIME
    kill -STOP "${pids[1]}"
    note "SIGSTOP rank 1 (pid ${pids[1]}) at $at_signal contributions"
    check_exits "$t0" $((JOB_TIMEOUT_MS + 2000)) "aborted the job: no progress within the job timeout\|(timeout)" 0 2 3
    it_until 5 no_job_left || fail "the appliance still lists the job 5 s after the timeout"
    t1=$EPOCHREALTIME
    kill -CONT "${pids[1]}"
    check_exits "$t1" 5000 "rank 1: " 1
    ;;
  appliance_killed)
    t0=$EPOCHREALTIME
    disown "$IT_APP_PID"
    kill -KILL "$IT_APP_PID"
    note "SIGKILL sumcastd (pid $IT_APP_PID) at $at_signal contributions"
    check_exits "$t0" $((op_timeout + 1000)) "appliance $TB_MGMT_IP:4790" 0 1 2 3
    ;;
  appliance_stopped)
    t0=$EPOCHREALTIME
    kill -STOP "$IT_APP_PID"
    note "SIGSTOP sumcastd (pid $IT_APP_PID) at $at_signal contributions"
    check_exits "$t0" $((op_timeout + 1000)) "appliance $TB_MGMT_IP:4790 .*: no result for $op_timeout ms" 0 1 2 3
    disown "$IT_APP_PID"
    kill -KILL "$IT_APP_PID"
    ;;
esac
rows=$(grep -c '^ *[0-9]' "$IT_WORK/job.r0.log" || true)
[ "$rows" = 0 ] || fail "rank 0 reported a completed size after the failure"
echo "PASS: $MODE: every rank failed with the expected error within its bound; no call completed"
