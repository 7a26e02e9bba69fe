#!/usr/bin/env bash
# The Sumcast XDP program on the test bed (docs/nic_offload.md §3): sumcastd on net_af_xdp with
# xdp_prog=sumcast_xdp.o; the appliance's data veth also gets a kernel address (KERNEL_IP). Checks:
#   - sumcastd reports the XDP path (start-up log and `sumcastctl port`);
#   - the kernel side of the data veth answers ARP and ping while the appliance runs, before and
#     during a job, and those frames go through the program (xdp_passed) but never reach the
#     appliance's counters (rx_packets grows only by the ARP requests for the appliance's own
#     address, which it answers; no drop of any reason);
#   - UDP to the appliance address on another port, and UDP 4791 to the kernel's address, are
#     left to the kernel too;
#   - a WORLD-rank all-reduce with --check is exact, and the appliance received exactly the
#     contributions plus the ARP requests it answered.
#
# With CORES = 2 the appliance runs two engine cores on the one AF_XDP queue (software dispatch
# behind the XDP program): each core must have summed its slots' share.
#
# usage: xdp_prog_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR XDP_OBJECT [CORES]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../integration/lib.sh
source "$here/../integration/lib.sh"
shift 4
XDP_OBJ=${1:-}
CORES=${2:-1}
if [ -z "$XDP_OBJ" ] || [ ! -f "$XDP_OBJ" ]; then
  echo "skipped: the XDP program was not built (no clang?)"
  exit 77
fi
WORLD=2
KERNEL_IP=$TB_SUBNET.250

export TB_XDP_PROG=$XDP_OBJ
IT_PMD=af_xdp IT_JOB_TIMEOUT_MS=20000 it_begin "$WORLD"
if [ "$CORES" -gt 1 ]; then
  sed -i "s/worker_cores = 1;/worker_cores = $CORES;/" "$IT_WORK/agg.conf"
  lc="0@0"; for ((c = 1; c <= CORES; c++)); do lc="$lc,$c@$((c % 2))"; done
  sed -i "s/lcores = \"[^\"]*\";/lcores = \"$lc\";/" "$IT_WORK/agg.conf"
fi
# The kernel's own address on the data veth. arp_ignore=1: each interface answers ARP only for its
# own addresses (else the management veth, on the same bridge, would answer for KERNEL_IP too);
# rp_filter off: replies may leave by the management veth (same subnet).
tb_exec app ip addr add "$KERNEL_IP/24" dev "$TB_APP_DATA_IF"
for k in all default "$TB_APP_DATA_IF" "$TB_APP_MGMT_IF"; do
  tb_exec app sysctl -qw "net.ipv4.conf.$k.arp_ignore=1" "net.ipv4.conf.$k.rp_filter=0"
done
data_mac=$(tb_exec app cat "/sys/class/net/$TB_APP_DATA_IF/address")
it_start_appliance

grep -q "^sumcastd: nic_offload: path xdp_program" "$IT_WORK/sumcastd.log" ||
  fail "sumcastd did not log the XDP path: $(grep nic_offload "$IT_WORK/sumcastd.log" || true)"
"$SUMCASTCTL" --prefix "$TB_PREFIX" port | tee "$IT_WORK/port.txt"
grep -q "path xdp_program" "$IT_WORK/port.txt" || fail "sumcastctl port does not show the XDP path"
grep -q "^xdp program [0-9]" "$IT_WORK/port.txt" || fail "sumcastctl port does not show the XDP program"
port_json() { "$SUMCASTCTL" --prefix "$TB_PREFIX" port --json; }
xdp() { port_json | jq -r ".xdp_$1"; }

# --- Before any job: ARP and ping to the kernel side; stray UDP. None of it reaches sumcastd.
rx0=$(it_stat rx_packets)
arp0=$(it_stat arp_replies)
passed0=$(xdp passed)
tb_exec w0 ping -c 5 -i 0.2 -W 2 -q "$KERNEL_IP" >"$IT_WORK/ping0.log" 2>&1 ||
  fail "the kernel side of the data veth does not answer ping: $(tail -2 "$IT_WORK/ping0.log")"
grep -q " 0% packet loss" "$IT_WORK/ping0.log" || fail "ping lost packets: $(tail -2 "$IT_WORK/ping0.log")"
tb_exec w0 ip neigh show "$KERNEL_IP" | grep -q "lladdr $data_mac" ||
  fail "w0 did not learn $KERNEL_IP at $data_mac (kernel ARP on the data veth): $(tb_exec w0 ip neigh show)"
# UDP to the appliance's address but not RoCE, and RoCE's port on the kernel's address.
tb_exec w0 bash -c "for i in 1 2 3; do echo x >/dev/udp/$TB_APP_IP/9999; echo y >/dev/udp/$KERNEL_IP/4791; done"
it_until 10 bash -c "[ \$('$SUMCASTCTL' --prefix '$TB_PREFIX' port --json | jq -r .xdp_passed) -ge $((passed0 + 11)) ]" ||
  fail "the XDP program passed $(($(xdp passed) - passed0)) frames, want >= 11 (5 pings, ARP, 6 UDP)"
# The UDP to the appliance's address needed its MAC: ARP requests for it are the appliance's to answer.
rx1=$(it_stat rx_packets)
arp1=$(it_stat arp_replies)
[ $((rx1 - rx0)) = $((arp1 - arp0)) ] ||
  fail "non-RoCE traffic reached the appliance: rx_packets $rx0 -> $rx1 with ARP replies $arp0 -> $arp1"
note "kernel answered ARP and 5 pings on the data veth; XDP passed $(($(xdp passed) - passed0)) frames; appliance received only the $((arp1 - arp0)) ARP request(s) for its address"

# --- A job, exact, with the kernel side pinged all along.
tb_exec w1 ping -c 25 -i 0.2 -W 2 -q "$KERNEL_IP" >"$IT_WORK/ping1.log" 2>&1 &
ping_pid=$!
IT_EXTRA_PIDS+=("$ping_pid")
it_ranks xdp xdp "$WORLD" --check --iters 2 --warmup 1 --dtype fp32 --counts 1,255,256,257,65536,1048576
it_wait 90 || fail "no result within 90 s"
it_expect_exact xdp "$WORLD" 6
wait "$ping_pid" || fail "ping during the job failed: $(tail -2 "$IT_WORK/ping1.log")"
grep -q " 0% packet loss" "$IT_WORK/ping1.log" || fail "ping during the job lost packets: $(tail -2 "$IT_WORK/ping1.log")"
chunks=0
for ((i = 0; i < WORLD; i++)); do chunks=$((chunks + $(it_counter xdp "$i" chunks))); done

"$SUMCASTCTL" --prefix "$TB_PREFIX" stats --json >"$IT_WORK/stats.json"
st() { jq -r ".total.$1" "$IT_WORK/stats.json"; }
[ "$(st contributions)" = "$chunks" ] || fail "appliance contributions $(st contributions), workers sent $chunks chunks"
drops=$(jq -r '[.total | to_entries[] | select(.key | startswith("drop_")) | select(.value != 0) | "\(.key)=\(.value)"] | join(" ")' "$IT_WORK/stats.json")
[ -z "$drops" ] || fail "the appliance dropped frames (non-RoCE traffic reached it?): $drops"
# Everything the appliance received was a contribution, an ARP request for its address, or an ARP
# reply to its own requests for the members' addresses (arp_learned).
accounted=$(($(st contributions) + $(st duplicates) + $(st retransmits_answered) + $(st arp_replies) + $(st arp_learned)))
[ "$(st rx_packets)" = "$accounted" ] ||
  fail "appliance rx_packets $(st rx_packets) != contributions + duplicates + retransmits + ARP replies + ARP learned ($accounted)"
if [ "$CORES" -gt 1 ]; then
  [ "$(port_json | jq -r .software_dispatch)" = 1 ] || fail "software dispatch is off with $CORES cores"
  for ((c = 0; c < CORES; c++)); do
    pcv=$(jq -r ".per_core[$c].contributions" "$IT_WORK/stats.json")
    [ "$pcv" -gt 0 ] || fail "core $c summed no contribution"
    [ "$(jq -r ".per_core[$c].drop_wrong_core" "$IT_WORK/stats.json")" = 0 ] || fail "core $c: wrong_core drops"
  done
fi
[ "$(xdp redirect_failed)" = 0 ] || fail "the XDP program found no socket for $(xdp redirect_failed) frames"
[ "$(xdp redirected)" -ge "$(st rx_packets)" ] || fail "XDP redirected $(xdp redirected) < appliance rx $(st rx_packets)"
echo "PASS: XDP program, $CORES core(s): $WORLD ranks exact ($chunks contributions), kernel answered ARP and ping on the data veth," \
  "XDP redirected $(xdp redirected), passed $(xdp passed); appliance saw only RoCEv2 and its ARP"
