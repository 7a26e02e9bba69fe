#!/usr/bin/env bash
# Resource limits on the real sumcastd: agg.conf sets dataplane.max_jobs = 2 and
# dataplane.max_ranks = 4. Two 2-rank jobs run (fp32, --check); then
#   - a third job registers: refused at registration with too_many_jobs (both ranks exit 1 with
#     that reason, quickly: never discovered at packet time);
#   - a job of world size 5 (> max_ranks) registers: refused with bad_world_size;
#   - the two running jobs complete exact; afterwards no job is listed and jobs_active is 0, and a
#     new job registers and runs exact (the refused ones left nothing behind).
#
# usage: limits_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../integration/lib.sh
IT_LIMIT_S=${IT_LIMIT_S:-85}  # every wait stops by then (ctest TIMEOUT 120), cleanup included
source "$here/../integration/lib.sh"
shift 4

IT_JOB_TIMEOUT_MS=10000 IT_CONF_EXTRA="max_jobs = 2; max_ranks = 4;" it_begin 4
it_start_appliance

no_job_left() {
  local j
  j=$(it_jobs_json) || return 1
  [ "$(jq '[to_entries[] | select(.key | startswith("job"))] | length' <<<"$j")" = 0 ] || return 1
  [ "$(it_stat jobs_active)" = 0 ]
}
two_active() { [ "$(it_stat jobs_active)" = 2 ]; }
# rank_in NS_INDEX TAG JOB WORLD RANK ARGS...: one rank of a job in worker namespace w<NS_INDEX>.
rank_in() {
  local ns=$1 tag=$2 job=$3 world=$4 rank=$5
  shift 5
  ip netns exec "$(tb_ns "w$ns")" "$ALLREDUCE" --appliance "$TB_MGMT_IP:4790" --token-file "$IT_WORK/token" \
    --job "$job" --rank "$rank" --world "$world" --bind "${TB_WORKER_IP[$ns]}" "$@" >"$IT_WORK/$tag.r$rank.log" 2>&1 &
  IT_PIDS+=($!)
}
long=(--dtype fp32 --counts 65536 --iters 300 --warmup 1 --check --op-timeout-ms 20000)
rank_in 0 a robust-a 2 0 "${long[@]}"
rank_in 1 a robust-a 2 1 "${long[@]}"
a_pids=("${IT_PIDS[@]}")
IT_PIDS=()
rank_in 2 b robust-b 2 0 "${long[@]}"
rank_in 3 b robust-b 2 1 "${long[@]}"
b_pids=("${IT_PIDS[@]}")
IT_PIDS=()
it_until 60 two_active || fail "the two jobs did not both become active within 60 s"
note "2 jobs active (max_jobs 2)"

expect_refused() {  # TAG RANKS REASON
  local tag=$1 n=$2 reason=$3 i msg
  for ((i = 0; i < n; i++)); do
    msg=$(grep '^sumcast-allreduce: ' "$IT_WORK/$tag.r$i.log" | tail -n 1 || true)
    [ "${IT_RC[$i]}" = 1 ] || fail "$tag rank $i exited ${IT_RC[$i]}, want 1 ($msg)"
    grep -q "$reason" <<<"$msg" || fail "$tag rank $i: '$msg' does not name $reason"
    note "$tag rank $i refused: $msg"
  done
}
t0=$SECONDS
rank_in 0 c robust-c 2 0 --dtype fp32 --counts 1024 --iters 1 --warmup 0 --check
rank_in 1 c robust-c 2 1 --dtype fp32 --counts 1024 --iters 1 --warmup 0 --check
it_wait 30 || fail "the third job's ranks did not exit within 30 s"
expect_refused c 2 too_many_jobs
rank_in 0 d robust-d 5 0 --dtype fp32 --counts 1024 --iters 1 --warmup 0 --check
it_wait 30 || fail "the world-5 rank did not exit within 30 s"
expect_refused d 1 bad_world_size
note "refusals took $((SECONDS - t0)) s"
two_active || fail "a running job was affected by the refusals"

IT_PIDS=("${a_pids[@]}")
it_wait 70 || fail "job a did not finish"
it_expect_exact a 2 1
IT_PIDS=("${b_pids[@]}")
it_wait 70 || fail "job b did not finish"
it_expect_exact b 2 1
it_until 10 no_job_left || fail "a job is still listed or active"
it_ranks e robust-e 4 --dtype fp32 --counts 1,65536 --iters 2 --warmup 1 --check
it_wait 60 || fail "the job after the refusals did not finish"
it_expect_exact e 4 2
it_until 10 no_job_left || fail "a job is still listed or active at the end"
echo "PASS: max_jobs and max_ranks enforced at registration with their reasons; running jobs exact; nothing leaked"
