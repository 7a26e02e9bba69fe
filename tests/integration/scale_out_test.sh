#!/usr/bin/env bash
# Scale-out on the namespace test bed (docs/scale-out.md): n = 4 worker hosts, each also
# running a host aggregator (sumcast-serve, the embedded summation service, bound to its own
# address), and K appliances: K = 0 is pure host-side summation; appliance 0 is the real sumcastd
# (net_af_packet, appliance namespace), appliances 1..K-1 are sumcast-serve on aggregation nodes of
# their own (tb_add_node). Every rank lists the same aggregators (appliances first, then host 0..3)
# with --placement auto, which for equal bandwidths gives the appliances BytePS' share
# y = 2K(n-1)/(n^2+Kn-2K) and nothing to the hosts at K = 4.
#   MODE exact (default): fp32 counts that do and do not divide evenly, up to 4 MiB, with --check
#     (exact), then: rank 0 printed the placement, with each aggregator's share as the formula says;
#     every aggregator with a share started the job, those without none.
#   MODE host_killed: with failover off, host 1's aggregator is killed (SIGKILL) mid-call: every
#     rank exits 1 within the deadline and its error names host 1's aggregator (failover_test.sh
#     tests the same loss survived).
#   MODE inprocess: as exact, but each host's aggregator is its rank's own in-process service
#     (sumcast-allreduce --serve), not a sidecar: the ranks start together and wait for each
#     other's services, and each keeps its service up until the others are done with it.
#
# usage: scale_out_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR SERVE K [MODE]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
SERVE=$5
shift 5
K=$1 MODE=${2:-exact}
N=4

IT_JOB_TIMEOUT_MS=20000 it_begin "$N"
SERVE_PIDS=()
aggs=()  # every rank's aggregator options, in order
if [ "$K" -ge 1 ]; then
  it_start_appliance
  aggs+=(--appliance "$TB_MGMT_IP:4790")
fi
start_serve() {  # NS IP
  ip netns exec "$(tb_ns "$1")" "$SERVE" --bind "$2" --token-file "$IT_WORK/token" --job-timeout-ms 20000 \
    >"$IT_WORK/serve-$1.log" 2>&1 &
  SERVE_PIDS+=($!)
  IT_EXTRA_PIDS+=($!)
  tb_wait_line "$IT_WORK/serve-$1.log" "^sumcast-serve: ready" 20 "$!" || fail "sumcast-serve in $1 did not start"
}
for ((j = 1; j < K; j++)); do
  tb_add_node "a$j" "$TB_SUBNET.$((100 + j))" || fail "aggregation node a$j did not come up"
  start_serve "a$j" "$TB_SUBNET.$((100 + j))"
  aggs+=(--appliance "$TB_SUBNET.$((100 + j)):4790")
done
for ((i = 0; i < N; i++)); do
  [ "$MODE" = inprocess ] || start_serve "w$i" "${TB_WORKER_IP[$i]}"
  aggs+=(--host-agg "$i=${TB_WORKER_IP[$i]}:4790")
done
note "K=$K: ${#SERVE_PIDS[*]} sumcast-serve running; aggregators: ${aggs[*]}"

ranks() {  # TAG options...: rank i in namespace w<i>, every rank with the same aggregator list
  local tag=$1 i serve=()
  shift
  for ((i = 0; i < N; i++)); do
    [ "$MODE" != inprocess ] || serve=(--serve "${TB_WORKER_IP[$i]}:4790")
    ip netns exec "$(tb_ns "w$i")" "$ALLREDUCE" "${aggs[@]}" "${serve[@]}" --token-file "$IT_WORK/token" --job "$tag" \
      --rank "$i" --world "$N" --bind "${TB_WORKER_IP[$i]}" "$@" >"$IT_WORK/$tag.r$i.log" 2>&1 &
    IT_PIDS+=($!)
  done
}

if [ "$MODE" = exact ] || [ "$MODE" = inprocess ]; then
  ranks mixed --check --iters 2 --warmup 1 --counts 1,3,255,256,257,65537,262144,1000003,1M
  it_wait 90 || fail "no result within 90 s"
  it_expect_exact mixed "$N" 9
  log=$IT_WORK/mixed.r0.log
  grep -q '^# placement: auto over 4 hosts' "$log" || fail "rank 0 printed no placement"
  # The appliances' total share against the formula (computed here, not by the tool).
  y=$(awk '/^#   [0-9]+ +appliance/ { s += $6 } END { printf "%.6f", s }' "$log")
  want=$(awk -v n=$N -v k="$K" 'BEGIN { printf "%.6f", (k >= n) ? 1 : 2 * k * (n - 1) / (n * n + k * n - 2 * k) }')
  awk -v a="$y" -v b="$want" 'BEGIN { exit !(a - b < 1e-5 && b - a < 1e-5) }' ||
    fail "appliances' share $y, the formula says $want"
  used=$(grep -c '^#   [0-9].*[0-9]$' "$log" || true)
  unused=$(grep -c '(not used)$' "$log" || true)
  want_used=$((K >= N ? K : K + N))
  [ "$used" = "$want_used" ] || fail "$used aggregators used, want $want_used"
  if [ "$MODE" = inprocess ]; then
    echo "PASS: n=$N K=$K exact with in-process host aggregators; appliances' share $y (formula $want)"
    exit 0
  fi
  # Each aggregator with a share ran the job (sumcast-serve reports at SIGTERM), the others not.
  for p in "${SERVE_PIDS[@]}"; do kill -TERM "$p"; done
  for p in "${SERVE_PIDS[@]}"; do wait "$p" || fail "sumcast-serve $p exited $?"; done
  started=0
  for f in "$IT_WORK"/serve-*.log; do
    s=$(sed -n 's/.*jobs started \([0-9]*\),.*/\1/p' "$f")
    [ -n "$s" ] || fail "$(basename "$f"): no final report"
    started=$((started + s))
  done
  if [ "$K" -ge 1 ]; then
    c=$(it_stat contributions)
    [ "$c" -gt 0 ] || fail "sumcastd summed nothing"
    started=$((started + 1))
  fi
  [ "$started" = "$want_used" ] || fail "$started aggregators started the job, want $want_used"
  echo "PASS: n=$N K=$K exact; appliances' share $y (formula $want); $used aggregators used, $unused unused"
elif [ "$MODE" = host_killed ]; then
  victim="${TB_WORKER_IP[1]}:4790"
  ranks killed --iters 20 --warmup 0 --counts 4M --op-timeout-ms 30000 --failover off
  # Data flows through host 1's aggregator (its counters are not visible from here: wait for the
  # ranks' first placement line and for sumcastd or, at K = 0, a little traffic on host 1's port).
  tb_wait_line "$IT_WORK/killed.r0.log" '^# placement' 30 "${IT_PIDS[0]}" || fail "rank 0 did not start"
  rx0=$(tb_exec sw cat /sys/class/net/p1/statistics/rx_bytes)
  it_until 30 bash -c "[ \$(ip netns exec $(tb_ns sw) cat /sys/class/net/p1/statistics/rx_bytes) -gt $((rx0 + 4000000)) ]" ||
    fail "no traffic from host 1"
  kill -KILL "${SERVE_PIDS[$(((K > 0 ? K - 1 : 0) + 1))]}"  # after the K-1 aggregation nodes and host 0
  note "killed host 1's aggregator ($victim)"
  it_wait 60 || fail "ranks still running 60 s after the kill"
  for ((i = 0; i < N; i++)); do
    [ "${IT_RC[$i]}" = 1 ] || fail "rank $i exited ${IT_RC[$i]}, want 1"
    err=$(grep '^sumcast-allreduce:' "$IT_WORK/killed.r$i.log" | tail -n 1)
    [[ $err == *"$victim"* ]] || fail "rank $i's error does not name $victim: $err"
    note "rank $i: $err"
  done
  echo "PASS: n=$N K=$K: host 1's aggregator killed; every rank failed naming $victim"
else
  fail "MODE must be exact, inprocess or host_killed"
fi
