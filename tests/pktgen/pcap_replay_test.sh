#!/usr/bin/env bash
# The stress pcaps replayed into a running sumcastd through DPDK's net_pcap device, on the
# namespace test bed (tools/testbed/testbed.sh) — the test suite's stand-in for dpdk-pktgen, which
# is not packaged for Debian (docs/stress-testing.md).
#
#   1. sumcastd (two engine cores, net_af_packet on the appliance veth with a deep rx ring) runs in
#      the appliance namespace.
#   2. sumcast-pcapgen, in worker namespace w0, registers a 4-rank stress job for w0's address
#      (one QPN per rank), writes the pcap for the grant it got (job id, Q_Key, the appliance's
#      MAC/IP and per-core QPNs), prints "ready", and holds the job: its control connections stay
#      open and it receives the results on w0's UDP port 4791, checking every element.
#   3. dpdk-testpmd in w0 replays the pcap: net_pcap (rx_pcap=FILE) -> io forwarding ->
#      net_af_packet on w0's veth -> the switch -> sumcastd. The generator exits by itself once
#      every result arrived (bounded wait).
#   4. sumcastctl stats: every slot round of the job completed, every frame was a contribution,
#      and no drop concerns the job.
#
# usage: pcap_replay_test.sh SUMCASTD SUMCASTCTL SUMCAST_PCAPGEN
# Environment: REPLAY_DTYPE (fp32), REPLAY_SLOTS (32), REPLAY_ROUNDS (16), REPLAY_RANKS (4).
# Exit 77 (skipped) when not root or without dpdk-testpmd.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"

sumcastd=$1 sumcastctl=$2 pcapgen=$3
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (network namespaces)"; exit 77; }
testpmd=$(command -v dpdk-testpmd || true)
[ -n "$testpmd" ] || { echo "skipped: needs dpdk-testpmd (Debian package dpdk)"; exit 77; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../tools/testbed/testbed.sh
source "${SUMCAST_SOURCE_DIR:-$here/../..}/tools/testbed/testbed.sh"

DTYPE=${REPLAY_DTYPE:-fp32}
SLOTS=${REPLAY_SLOTS:-32}
ROUNDS=${REPLAY_ROUNDS:-16}
RANKS=${REPLAY_RANKS:-4}
CORES=2
work=$(mktemp -d /tmp/sumcast-replay.XXXXXX)
pid="" gen_pid="" pmd_pid=""
cleanup() {
  local rc=$?
  if [ $rc -ne 0 ] && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    "$sumcastctl" --prefix "$TB_PREFIX" stats || true
  fi
  for p in $pmd_pid $gen_pid $pid; do kill -KILL "$p" 2>/dev/null || true; done
  [ -z "$pid" ] || wait "$pid" 2>/dev/null || true
  tb_down
  rm -rf "/var/run/dpdk/$TB_PREFIX" "/var/run/dpdk/tp$TB_PREFIX"
  if [ $rc -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; }; done
  fi
  rm -rf "$work"
  exit $rc
}
fail() { echo "FAIL: $*" >&2; exit 1; }

tb_up 1
trap cleanup EXIT
tb_token "$work/token"
TB_HUGE=off tb_agg_conf "$work/agg.conf" "$work/token" af_packet
# Two engine cores (software dispatch from the one af_packet queue); an rx ring deep enough to hold
# the whole replay, since a pcap replay is open-loop (no retransmission makes up for a loss).
sed -i "s/worker_cores = 1;/worker_cores = $CORES;/; s/lcores = \"[^\"]*\";/lcores = \"0@0,1@1,2@0\";/" "$work/agg.conf"
sed -i "s/\"net_af_packet0,iface=$TB_APP_DATA_IF\"/\"net_af_packet0,iface=$TB_APP_DATA_IF,framecnt=16384\"/" "$work/agg.conf"
sed -i "s/slots_per_job = 64;/slots_per_job = $SLOTS;/" "$work/agg.conf"

ip netns exec "$(tb_ns app)" "$sumcastd" -c "$work/agg.conf" >"$work/sumcastd.log" 2>&1 &
pid=$!
tb_wait_line "$work/sumcastd.log" "^sumcastd: ready" 60 "$pid" || fail "sumcastd did not become ready"

# --- the generator registers the job and writes the pcap for it.
ip netns exec "$(tb_ns w0)" "$pcapgen" --appliance "$TB_MGMT_IP:4790" --token-file "$work/token" --job stress \
  --ranks "$RANKS" --dtype "$DTYPE" --payload 1024 --slots "$SLOTS" --rounds "$ROUNDS" \
  --iface "$TB_WORKER_IF" --src-ip "${TB_WORKER_IP[0]}" -o "$work/stress.pcap" --info "$work/stress.info" \
  --hold --verify-results --exit-when-complete >"$work/pcapgen.log" 2>&1 &
gen_pid=$!
tb_wait_line "$work/pcapgen.log" "ready:" 30 "$gen_pid" || fail "sumcast-pcapgen did not register the job"
cat "$work/pcapgen.log"
# shellcheck disable=SC1091
source "$work/stress.info"  # job_id, frames, slot_rounds, ...
"$sumcastctl" --prefix "$TB_PREFIX" jobs | tee "$work/jobs.txt"
grep -q "stress .* yes" "$work/jobs.txt" || fail "the stress job is not running"

# --- replay: net_pcap -> io forwarding -> af_packet on w0's veth. testpmd's forwarding lcore
# shares CPU 0 with sumcastd's main lcore (idle) and second engine. (Background jobs start with
# `ip netns exec` itself, not the tb_exec function, so that $! is the program's pid.)
ip netns exec "$(tb_ns w0)" "$testpmd" --no-huge -m 512 --file-prefix "tp$TB_PREFIX" --lcores "0@1,1@0" --no-pci \
  --vdev "net_pcap0,rx_pcap=$work/stress.pcap,tx_pcap=/dev/null" \
  --vdev "net_af_packet1,iface=$TB_WORKER_IF,framecnt=4096" -- \
  --no-flush-rx --forward-mode=io --nb-cores=1 --total-num-mbufs=16384 --stats-period 1 >"$work/testpmd.log" 2>&1 &
pmd_pid=$!

# The generator exits once every result arrived and was checked (bounded).
deadline=$((SECONDS + 90))
while kill -0 "$gen_pid" 2>/dev/null; do
  if [ $SECONDS -ge $deadline ]; then
    "$sumcastctl" --prefix "$TB_PREFIX" stats || true
    fail "not every result arrived within 90 s"
  fi
  kill -0 "$pmd_pid" 2>/dev/null || fail "dpdk-testpmd exited early"
  read -rt 0.1 <> <(:) || true
done
rc=0; wait "$gen_pid" || rc=$?
gen_pid=""
grep "results:" "$work/pcapgen.log"
[ $rc -eq 0 ] || fail "sumcast-pcapgen exited with $rc"
grep -q "results: $frames of $frames received, $frames exact, 0 wrong" "$work/pcapgen.log" ||
  fail "not every result exact"
kill -INT "$pmd_pid"
wait "$pmd_pid" 2>/dev/null || true
pmd_pid=""
grep -E "RX-packets|TX-packets" "$work/testpmd.log" | tail -4 || true

# --- sumcastd's own count: every slot round completed; every frame was summed; no job drop.
"$sumcastctl" --prefix "$TB_PREFIX" stats | tee "$work/stats.txt"
total() { awk -v k="$1" '$1 == k { print $NF }' "$work/stats.txt"; }
[ "$(total slots_completed)" = "$slot_rounds" ] ||
  fail "slots_completed $(total slots_completed), the stream has $slot_rounds slot rounds"
[ "$(total contributions)" = "$frames" ] || fail "contributions $(total contributions), the pcap has $frames frames"
[ "$(total duplicates)" = 0 ] || fail "duplicates: $(total duplicates)"
for reason in bad_icrc unknown_job bad_qkey foreign_source bad_slot wrong_core stale_round chunk_mismatch \
  version_bit dtype_mismatch too_large; do
  v=$(total "$reason")
  [ -z "$v" ] || [ "$v" = 0 ] || fail "drops $reason: $v"
done
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
pid=""
[ $rc -eq 0 ] || fail "sumcastd exited with $rc"
echo "PASS: $frames frames ($RANKS ranks x $SLOTS slots x $ROUNDS rounds, $DTYPE) replayed through net_pcap: every slot round completed, every result exact"
