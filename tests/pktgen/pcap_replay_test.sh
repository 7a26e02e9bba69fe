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
#   5. replay.lua (the dpdk-pktgen profile) under the pktgen stand-in with a real sender, on a
#      second registration's stream without one contribution: its summary names the lost round
#      and the stale rounds after it (below).
#
# Jumbo payloads (REPLAY_PAYLOAD=4096): DPDK 22.11's net_af_packet takes no MTU above 1500 (its
# max_rx_pktlen is fixed at 1518), so the appliance's port is net_pcap on its veth instead
# (REPLAY_PMD=pcap: libpcap on the interface, no MTU limit of its own), the test bed's veths get
# the MTU the frames need, and testpmd sends through net_pcap on w0's veth as well.
#
# usage: pcap_replay_test.sh SUMCASTD SUMCASTCTL SUMCAST_PCAPGEN
# Environment: REPLAY_DTYPE (fp32), REPLAY_SLOTS (32), REPLAY_ROUNDS (16), REPLAY_RANKS (4),
# REPLAY_PAYLOAD (1024 bytes), REPLAY_PMD (af_packet; pcap for payloads above 1416 bytes).
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
PAYLOAD=${REPLAY_PAYLOAD:-1024}
PMD=${REPLAY_PMD:-af_packet}
MTU=$((PAYLOAD + 84 > 1500 ? PAYLOAD + 84 : 1500))  # IP MTU the frames need (docs/agg.conf.md)
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
if [ "$MTU" -gt 1500 ]; then
  tb_exec app ip link set "$TB_APP_DATA_IF" mtu "$MTU"
  tb_exec w0 ip link set "$TB_WORKER_IF" mtu "$MTU"
  for p in pd p0; do tb_exec sw ip link set "$p" mtu "$MTU"; done
fi
tb_token "$work/token"
TB_HUGE=off tb_agg_conf "$work/agg.conf" "$work/token" "$PMD"
sed -i "s/mtu = 1500;/mtu = $MTU;/; s/max_payload_bytes = 1024;/max_payload_bytes = $PAYLOAD;/" "$work/agg.conf"
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
  --ranks "$RANKS" --dtype "$DTYPE" --payload "$PAYLOAD" --slots "$SLOTS" --rounds "$ROUNDS" \
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
out_vdev="net_af_packet1,iface=$TB_WORKER_IF,framecnt=4096" pmd_opts=()
if [ "$PMD" = pcap ]; then
  out_vdev="net_pcap1,iface=$TB_WORKER_IF"
  pmd_opts=(--mbuf-size=$((MTU + 256)) --max-pkt-len=$((MTU + 18)))
fi
ip netns exec "$(tb_ns w0)" "$testpmd" --no-huge -m 512 --file-prefix "tp$TB_PREFIX" --lcores "0@1,1@0" --no-pci \
  --vdev "net_pcap0,rx_pcap=$work/stress.pcap,tx_pcap=/dev/null" --vdev "$out_vdev" -- \
  --no-flush-rx --forward-mode=io --nb-cores=1 --total-num-mbufs=16384 --stats-period 1 "${pmd_opts[@]}" \
  >"$work/testpmd.log" 2>&1 &
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
# --- 5. The dpdk-pktgen profile (replay.lua) on a second stream that loses one contribution, under
# the pktgen stand-in (pktgen_mock.lua) with a real sender (pcap_send.py, which leaves that frame
# out), counters from this sumcastd: the summary must name the lost round and the rounds of its
# slot dropped as stale_round after it, and end with pktgen.quit().
lost_note=""
lua=$(command -v lua5.4 || command -v lua5.3 || true)
if [ "${REPLAY_LOST:-1}" = 0 ]; then
  lost_note=" (lost-contribution stage not run: REPLAY_LOST=0)"
elif [ -z "$lua" ]; then
  echo "skipped the lost-contribution stage: needs lua5.4"
  lost_note=" (lost-contribution stage SKIPPED: no lua5.4)"
else
  ip netns exec "$(tb_ns w0)" "$pcapgen" --appliance "$TB_MGMT_IP:4790" --token-file "$work/token" --job lost \
    --ranks "$RANKS" --dtype "$DTYPE" --payload "$PAYLOAD" --slots "$SLOTS" --rounds "$ROUNDS" \
    --iface "$TB_WORKER_IF" --src-ip "${TB_WORKER_IP[0]}" -o "$work/lost.pcap" --info "$work/lost.info" \
    --hold --verify-results >"$work/lostgen.log" 2>&1 &
  gen_pid=$!
  tb_wait_line "$work/lostgen.log" "ready:" 30 "$gen_pid" || fail "sumcast-pcapgen did not register the second job"
  # Rank 2's contribution to slot 3 of round ROUNDS-3 (the stream is round-major: round, slot, rank).
  lost_round=$((ROUNDS - 3)) lost_slot=3 lost_rank=$((RANKS > 2 ? 2 : 0))
  skip=$(((lost_round * SLOTS + lost_slot) * RANKS + lost_rank))
  stale=$((ROUNDS - lost_round - 1))
  lost_slot_rounds=$(sed -n 's/^slot_rounds=//p' "$work/lost.info")
  PKTGEN_MOCK_SENDER_0="ip netns exec $(tb_ns w0) /usr/bin/python3 $here/pcap_send.py $TB_WORKER_IF $work/lost.pcap $work/progress0 $skip" \
    PKTGEN_MOCK_PROGRESS_0="$work/progress0" SUMCAST_INFO="$work/lost.info" SUMCAST_RATE=1 SUMCAST_TIMEOUT=30 \
    SUMCAST_CTL="$sumcastctl --prefix $TB_PREFIX stats" SUMCAST_QUIT=1 \
    "$lua" -e "dofile('$here/pktgen_mock.lua')" "${SUMCAST_SOURCE_DIR:-$here/../..}/tools/pktgen/lua/replay.lua" \
    >"$work/profile.log" 2>&1 || { cat "$work/profile.log"; fail "replay.lua failed"; }
  grep '^sumcast: ' "$work/profile.log"
  want() { grep -qF "$1" "$work/profile.log" || fail "replay.lua's summary has no '$1'"; }
  want "sumcast: frames sent $((frames)) in "
  want "sumcast: slots completed $((lost_slot_rounds - 1 - stale)) of $lost_slot_rounds in the stream (INCOMPLETE)"
  want "sumcast: rounds lost: 1 (a contribution of each never reached the engines); rounds dropped because an earlier round of their slot was lost: $stale ($((stale * RANKS)) stale_round frames)"
  # (rx_packets also counts whatever else reached the port: ARP, ICMP.)
  grep -qE "^sumcast: appliance engines: counted [0-9]+ frames \(rx_packets\), $((frames - 1 - stale * RANKS)) contributions, $((stale * RANKS)) dropped as stale_round$" \
    "$work/profile.log" || fail "replay.lua's summary does not count $((frames - 1 - stale * RANKS)) contributions and $((stale * RANKS)) stale frames"
  [ "$(tail -n 1 "$work/profile.log")" = "mock: quit" ] || fail "SUMCAST_QUIT=1: replay.lua did not end with pktgen.quit()"
  kill -TERM "$gen_pid"
  wait "$gen_pid" 2>/dev/null || true
  gen_pid=""
fi

kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
pid=""
[ $rc -eq 0 ] || fail "sumcastd exited with $rc"
echo "PASS: $frames frames ($RANKS ranks x $SLOTS slots x $ROUNDS rounds, $DTYPE, $PAYLOAD-byte payloads, appliance" \
  "on net_$PMD, MTU $MTU) replayed through net_pcap: every slot round completed, every result exact$lost_note"
