#!/usr/bin/env bash
# Control-plane abuse against the real sumcastd while a legitimate 4-rank job
# runs (fp32, --check): abuse.py, from the attacker's side of the management network (a worker
# namespace), sends a wrong token, REGISTER before HELLO, a bad magic, an oversized and a truncated
# message, a slow-loris HELLO, world size 1, the live job's name, one rank twice, a world size
# mismatch, and opens connections up to control.max_connections (8 here; io_timeout_ms 1000).
# Each must be refused or closed with its reason (abuse.py checks every answer). The live job must
# complete exact, and afterwards no job is listed and jobs_active is 0.
#
# usage: abuse_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../integration/lib.sh
IT_LIMIT_S=${IT_LIMIT_S:-85}  # every wait stops by then (ctest TIMEOUT 120), cleanup included
source "$here/../integration/lib.sh"
shift 4
N=4
IO_TIMEOUT_MS=1000
MAX_CONNECTIONS=8

IT_JOB_TIMEOUT_MS=10000 it_begin $N
sed -i "s/^  job_timeout_ms = .*/&\n  io_timeout_ms = $IO_TIMEOUT_MS;\n  max_connections = $MAX_CONNECTIONS;/" \
  "$IT_WORK/agg.conf"
it_start_appliance

under_way() { local c; c=$(it_stat contributions) && [ "$c" -ge 100 ]; }
no_job_left() {
  local j
  j=$(it_jobs_json) || return 1
  [ "$(jq '[to_entries[] | select(.key | startswith("job"))] | length' <<<"$j")" = 0 ] || return 1
  [ "$(it_stat jobs_active)" = 0 ]
}

# Running while the abuse starts (abuse.py tests the live job's name first); it ends on its own.
it_ranks live robust-live $N --dtype fp32 --counts 65536 --iters 1000 --warmup 1 --check --op-timeout-ms 20000
it_until 60 under_way || fail "the live job made no progress within 60 s"
note "live job under way; abuse starts"
if ! tb_exec w0 /usr/bin/python3 "$here/abuse.py" "$TB_MGMT_IP" 4790 "$IT_WORK/token" robust-live \
  "$IO_TIMEOUT_MS" "$MAX_CONNECTIONS" >"$IT_WORK/abuse.log" 2>&1; then
  cat "$IT_WORK/abuse.log"
  fail "a control-plane abuse case was not refused as expected"
fi
while read -r line; do note "$line"; done <"$IT_WORK/abuse.log"
it_wait 80 || fail "the live job did not finish"
it_expect_exact live $N 1
it_until 10 no_job_left || fail "a job is still listed or active after the abuse"
echo "PASS: every abuse case refused with its reason; the live job completed exact; no job left"
