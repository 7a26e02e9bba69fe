#!/usr/bin/env bash
# sumcastd end to end on the namespace test bed (tools/testbed/testbed.sh):
# an appliance namespace whose data veth (no IP) sumcastd drives through net_af_packet or
# net_af_xdp, a management veth for the control plane, and 4 worker namespaces on one bridge.
# Checks: sumcastd comes up ("ready") with --no-huge; it answers ARP; 4 workers' contributions
# give exact sums; sumcastctl stats/jobs show exactly the traffic the workers made; `sumcastctl config`
# (/sumcast/config) shows the settings `sumcastctl check --json` reads from the same file; SIGTERM stops
# it cleanly (exit 0, counters summary).
#
# With IDLE_POLL "adaptive" (dataplane.idle_poll): also, before the job, the idle appliance uses
# less than IDLE_CPU_BOUND of a CPU (default a quarter) over a one-second window (a busy-polling
# lcore takes all of one) and counts its sleeps; the job then runs exactly as with busy polling.
#
# usage: sumcastd_test.sh SUMCASTD SUMCASTCTL TEST_WORKER [af_packet|af_xdp] [WORKER_CORES] [IDLE_POLL]
#        [IDLE_CPU_BOUND]
# Exit 77 (skipped) when not root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"

sumcastd=$1 sumcastctl=$2 worker=$3 pmd=${4:-af_packet} cores=${5:-1} idle_poll=${6:-busy}
idle_cpu_bound=${7:-0.25}
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (network namespaces)"; exit 77; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../tools/testbed/testbed.sh
source "${SUMCAST_SOURCE_DIR:-$here/../..}/tools/testbed/testbed.sh"

N=4
ELEMENTS=20000
COLLECTIVES=3
work=$(mktemp -d /tmp/sumcastd-test.XXXXXX)
pid=""
worker_pids=()
cleanup() {
  local rc=$?
  for p in "${worker_pids[@]}" $pid; do kill -KILL "$p" 2>/dev/null || true; done
  [ -z "$pid" ] || wait "$pid" 2>/dev/null || true
  tb_down
  rm -rf "/var/run/dpdk/$TB_PREFIX"  # EAL leaves its runtime directory behind
  if [ $rc -ne 0 ] && [ -f "$work/sumcastd.log" ]; then
    echo "--- sumcastd.log"; cat "$work/sumcastd.log"
    for f in "$work"/w*.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
  fi
  rm -rf "$work"
  exit $rc
}
fail() { echo "FAIL: $*" >&2; exit 1; }

tb_up $N
trap cleanup EXIT  # after tb_up, which sets its own EXIT trap; ours calls tb_down too
tb_token "$work/token"
TB_HUGE=off tb_agg_conf "$work/agg.conf" "$work/token" "$pmd" "idle_poll = \"$idle_poll\";"
sed -i "s/worker_cores = 1;/worker_cores = $cores;/" "$work/agg.conf"
if [ "$cores" -gt 1 ]; then
  # Main lcore plus $cores engine lcores on 2 CPUs: the engines share CPU 1 and CPU 0.
  lc="0@0"; for ((c = 1; c <= cores; c++)); do lc="$lc,$c@$((c % 2))"; done
  sed -i "s/lcores = \"[^\"]*\";/lcores = \"$lc\";/" "$work/agg.conf"
fi

# --- start: wait for "ready" (bounded), never sleep.
ip netns exec "$(tb_ns app)" "$sumcastd" -c "$work/agg.conf" >"$work/sumcastd.log" 2>&1 &
pid=$!
tb_wait_line "$work/sumcastd.log" "^sumcastd: ready" 60 "$pid" || fail "sumcastd did not become ready"
grep -q -- "--no-huge" "$work/sumcastd.log" || fail "huge_pages = off did not give --no-huge"
grep -q "^sumcastd: memory: --no-huge" "$work/sumcastd.log" || fail "the memory choice is not logged"
app_mac=$(sed -n 's/^sumcastd: port .* mac \([0-9a-f:]*\) .*/\1/p' "$work/sumcastd.log")
[ -n "$app_mac" ] || fail "no port line with the MAC in the log"
echo "sumcastd up: $pmd, $cores core(s), data MAC $app_mac"

# --- ARP: w0's kernel must learn the appliance's MAC from sumcastd's reply.
deadline=$((SECONDS + 10))
until tb_exec w0 ip neigh show "$TB_APP_IP" | grep -q "lladdr $app_mac"; do
  [ $SECONDS -lt $deadline ] || fail "no ARP answer for $TB_APP_IP from sumcastd"
  tb_exec w0 ping -c1 -W1 -q "$TB_APP_IP" >/dev/null 2>&1 || true  # resolves; no ICMP answer
done
echo "ARP: $TB_APP_IP is at $app_mac"

if [ "$idle_poll" = adaptive ]; then
  grep -q "idle poll adaptive" "$work/sumcastd.log" || fail "the log does not say the idle poll is adaptive"
  # CPU time of the idle appliance (every thread: the lcores and the control thread) over a
  # one-second measurement window, from /proc (utime + stime, in clock ticks).
  cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
  hz=$(getconf CLK_TCK)
  t0=$(cpu_ticks) w0=$(date +%s%N)
  read -rt 1 <> <(:) || true  # the window itself (a measurement, not a wait for anything)
  t1=$(cpu_ticks) w1=$(date +%s%N)
  used=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v ns=$((w1 - w0)) 'BEGIN { printf "%.3f", (t / hz) / (ns / 1e9) }')
  echo "idle: sumcastd used $used CPU over $(( (w1 - w0) / 1000000 )) ms (busy polling: 1 CPU per engine lcore)"
  awk -v u="$used" -v b="$idle_cpu_bound" 'BEGIN { exit !(u < b) }' ||
    fail "the idle appliance used $used CPU, want < $idle_cpu_bound"
  echo "idle: bound $idle_cpu_bound CPU"
  sleeps=$("$sumcastctl" --prefix "$TB_PREFIX" stats | awk '$1 == "idle_sleeps" { print $NF }')
  [ "${sleeps:-0}" -gt 0 ] || fail "no idle sleep counted"
  # Before its first sleep the core polled for idle_after_us, yielding its CPU after each empty poll.
  yields=$("$sumcastctl" --prefix "$TB_PREFIX" stats | awk '$1 == "idle_yields" { print $NF }')
  [ "${yields:-0}" -gt 0 ] || fail "no yield counted before the idle core's first sleep"
  echo "idle: $sleeps sleeps, $yields yields counted"
fi

# --- 4 workers, one job.
for ((i = 0; i < N; i++)); do
  ip netns exec "$(tb_ns w$i)" "$worker" --control "$TB_MGMT_IP:4790" --token-file "$work/token" \
    --job t1 --world $N --rank $i --ip "${TB_WORKER_IP[$i]}" --iface "$TB_WORKER_IF" \
    --elements $ELEMENTS --collectives $COLLECTIVES --timeout-ms 90000 >"$work/w$i.log" 2>&1 &
  worker_pids+=($!)
done
for ((i = 0; i < N; i++)); do
  wait "${worker_pids[$i]}" || fail "worker $i exited with $? ($(tail -1 "$work/w$i.log"))"
done
worker_pids=()
cat "$work"/w*.log | grep exact
chunks=$(sed -n 's/.* exact; \([0-9]*\) chunks.*/\1/p' "$work/w0.log")
if [ -z "$chunks" ] || [ "$chunks" -eq 0 ]; then fail "worker 0 did not report its chunks"; fi

# --- sumcastctl reads the counters back.
"$sumcastctl" --prefix "$TB_PREFIX" stats | tee "$work/stats.txt"
total() { awk -v k="$1" '$1 == k { print $NF }' "$work/stats.txt"; }
[ "$(total contributions)" = $((chunks * N)) ] || fail "contributions $(total contributions), want $((chunks * N))"
[ "$(total slots_completed)" = "$chunks" ] || fail "slots_completed $(total slots_completed), want $chunks"
[ "$(total rx_packets)" -ge $((chunks * N)) ] || fail "rx_packets below the contributions"
[ "$(total tx_packets)" -ge $((chunks * N)) ] || fail "tx_packets below the results sent"
[ "$(total arp_replies)" -ge 1 ] || fail "no ARP reply counted"
"$sumcastctl" --prefix "$TB_PREFIX" stats --json >"$work/stats.json"
grep -q '"per_core"' "$work/stats.json" || fail "stats --json has no per_core"
if [ "$cores" -gt 1 ]; then
  # Software dispatch (nic_offload's fallback on a port without rte_flow): every slot's frames are
  # summed on the core that owns it (slot % cores). Chunk j of a worker goes to slot j % 64, so
  # core c must have summed exactly N x |{j < chunks : (j % 64) % cores == c}| contributions, and
  # none may have been refused as another core's (wrong_core).
  "$sumcastctl" --prefix "$TB_PREFIX" port --json >"$work/port.json"
  [ "$(jq -r .path "$work/port.json")" = rss_software_dispatch ] || fail "path $(jq -r .path "$work/port.json")"
  [ "$(jq -r .software_dispatch "$work/port.json")" = 1 ] || fail "software dispatch is off with $cores cores"
  queues=$(jq -r .queues "$work/port.json")
  pc() { jq -r ".per_core[$1].$2" "$work/stats.json"; }
  for ((c = 0; c < cores; c++)); do
    want=0
    for ((j = 0; j < chunks; j++)); do [ $(((j % 64) % cores)) = "$c" ] && want=$((want + N)); done
    [ "$(pc "$c" contributions)" = "$want" ] || fail "core $c summed $(pc "$c" contributions) contributions, owns $want"
    [ "$(pc "$c" drop_wrong_core)" = 0 ] || fail "core $c refused $(pc "$c" drop_wrong_core) frames as another core's"
    [ "$(pc "$c" dispatch_full)" = 0 ] || fail "core $c found a dispatch ring full"
    # A core without an rx queue of its own received every frame it summed by dispatch.
    if [ "$c" -ge "$queues" ] && [ "$(pc "$c" dispatched_in)" -lt "$want" ]; then
      fail "core $c (no rx queue) got $(pc "$c" dispatched_in) frames by dispatch, summed $want"
    fi
  done
  out=$(jq '[.per_core[].dispatched_out] | add' "$work/stats.json")
  in=$(jq '[.per_core[].dispatched_in] | add' "$work/stats.json")
  if [ "$out" != "$in" ] || [ "$out" -eq 0 ]; then fail "dispatched out $out, in $in"; fi
  echo "software dispatch: per-core contributions match slot ownership; $out frames dispatched"
fi
"$sumcastctl" --prefix "$TB_PREFIX" jobs | tee "$work/jobs.txt"
grep -q "jobs_started 1" "$work/jobs.txt" || fail "sumcastctl jobs does not show the job started"
"$sumcastctl" --prefix "$TB_PREFIX" version | grep -q "^sumcastd " || fail "sumcastctl version: no daemon version"
# `sumcastctl config` (the daemon's /sumcast/config) shows what `sumcastctl check --json` reads
# from the same file: every key, the same values (booleans as 0 and 1), and this run's idle_poll.
"$sumcastctl" --prefix "$TB_PREFIX" config --json >"$work/config.json" || fail "sumcastctl config failed"
"$sumcastctl" --prefix "$TB_PREFIX" config | grep -qx "dataplane.idle_poll = \"$idle_poll\"" ||
  fail "sumcastctl config does not show dataplane.idle_poll = \"$idle_poll\""
"$sumcastctl" check --json "$work/agg.conf" >"$work/check.json" || fail "sumcastctl check rejects the running agg.conf"
/usr/bin/python3 - "$work/config.json" "$work/check.json" "$idle_poll" <<'PY' || fail "sumcastd's config differs from sumcastctl check"
import json, sys
tel = json.load(open(sys.argv[1]))
check = json.load(open(sys.argv[2]))
keys = 0
for section, settings in check.items():
    if not isinstance(settings, dict):
        continue
    for key, value in settings.items():
        want = int(value) if isinstance(value, bool) else value
        got = tel[section][key]
        assert got == want, f"{section}.{key}: sumcastd {got!r}, sumcastctl check {want!r}"
        keys += 1
assert tel["dataplane"]["idle_poll"] == sys.argv[3], tel["dataplane"]
assert "tx_coalesce" in tel["dataplane"] and "driver" in tel["port"], tel
print(f"sumcastctl config: the {keys} settings sumcastctl check shows, same values")
PY
if command -v dpdk-telemetry.py >/dev/null; then
  echo /sumcast/stats,total | dpdk-telemetry.py -f "$TB_PREFIX" >"$work/tel.txt" 2>&1 || true
  grep -q '"contributions": *'$((chunks * N)) "$work/tel.txt" || fail "dpdk-telemetry.py cannot read /sumcast/stats"
fi

# --- SIGTERM: clean exit (bounded wait), summary printed.
kill -TERM "$pid"
deadline=$((SECONDS + 20))
while kill -0 "$pid" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "sumcastd still running 20 s after SIGTERM"
  read -rt 0.05 <> <(:) || true
done
rc=0; wait "$pid" || rc=$?
pid=""
[ $rc -eq 0 ] || fail "sumcastd exited with $rc after SIGTERM"
grep -q "^sumcastd: SIGTERM: stopping" "$work/sumcastd.log" || fail "no stop line"
grep -q "^sumcastd:   contributions  *$((chunks * N))$" "$work/sumcastd.log" || fail "summary lacks the contributions"
grep -q "^sumcastd: stopped" "$work/sumcastd.log" || fail "no 'stopped' line"
echo "PASS: $pmd, $cores core(s): $N workers x $COLLECTIVES collectives x $ELEMENTS elements exact, $chunks chunks"
