#!/usr/bin/env bash
# Jumbo frames: the flat bed with every link at MTU 9000 (TB_MTU), the appliance on PMD (net_pcap,
# or net_af_packet with ring frames that hold a 9000-byte frame, tb_agg_conf's framesz=) with
# port.mtu 9000 and 4096-byte payloads. n = 4, fp32 4 MiB calls with --check:
#   1. default payload: every rank asks for what its path MTU carries (4096) and gets it;
#   2. --payload 1024 on every rank: the explicit setting wins;
#   3. w3's link back at 1500 (both ends): w3 asks for 1024, the grant is the smallest any rank
#      asked for, so every rank chunks at 1024 and results stay exact.
# Every run exact, and the appliance dropped no frame for a bad ICRC (the kernel's IPv4 headers of
# the large datagrams are the ones the workers' ICRCs cover); on net_af_packet the kernel's ring
# dropped none and every frame the port received is one the engine counted. Takes ~15 s.
#
# usage: jumbo_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR PMD
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
shift 4
PMD=${1:-}
case $PMD in pcap | af_packet) ;; *) fail "PMD must be pcap or af_packet, got '$PMD'" ;; esac
WORLD=4

TB_MTU=9000 IT_PMD=$PMD IT_JOB_TIMEOUT_MS=20000 it_begin "$WORLD"
grep -q "mtu = 9000;" "$IT_WORK/agg.conf" && grep -q "max_payload_bytes = 4096;" "$IT_WORK/agg.conf" ||
  fail "tb_agg_conf did not follow TB_MTU=9000: $(grep -E 'mtu|max_payload' "$IT_WORK/agg.conf" | tr -s ' \n' ' ')"
[ "$(tb_exec w0 cat /sys/class/net/"$TB_WORKER_IF"/mtu)" = 9000 ] || fail "w0's link is not at MTU 9000"
it_start_appliance

# run TAG WANT_PAYLOAD options...: one job on every rank, exact, each rank's grant WANT_PAYLOAD.
run() {
  local tag=$1 want=$2 i p
  shift 2
  it_ranks "$tag" "$tag" "$WORLD" --check --counts 1M --iters 2 --warmup 1 "$@"
  it_wait 60 || fail "$tag: no result within 60 s"
  it_expect_exact "$tag" "$WORLD" 1
  for ((i = 0; i < WORLD; i++)); do
    p=$(it_counter "$tag" "$i" payload_bytes)
    [ "$p" = "$want" ] || fail "$tag: rank $i was granted $p-byte payloads, want $want"
  done
  note "$tag: exact on $WORLD ranks with $want-byte payloads"
}

run path-mtu 4096
run explicit 1024 --payload 1024
tb_exec w3 ip link set "$TB_WORKER_IF" mtu 1500
tb_exec sw ip link set p3 mtu 1500
run one-at-1500 1024

bad_icrc=$(it_stat drop_bad_icrc)
[ "$bad_icrc" = 0 ] || fail "the appliance dropped $bad_icrc frames for a bad ICRC"
[ "$(it_stat contributions)" -gt 0 ] || fail "the appliance counted no contributions"
if [ "$PMD" = af_packet ]; then
  grep -q "framesz=9216," "$IT_WORK/agg.conf" || fail "tb_agg_conf gave net_af_packet no 9 KiB ring frames"
  port=$(it_stats_json | jq -c '.port')
  ring_drops=$(jq -r '.kernel_ring_drops' <<<"$port")
  [ "$ring_drops" = 0 ] || fail "the kernel's ring under net_af_packet dropped $ring_drops frames: $port"
  # Every frame the port took reached the engine whole (a truncated jumbo frame would be counted as
  # received and dropped by the parser). Both counts from one snapshot, retried for a few seconds:
  # the port counts a burst when the lcore polls it and the engine as it handles each frame, so a
  # snapshot taken while a late frame (a spurious retransmission) is in between sees them differ.
  port_matches_engine() {
    local s
    s=$(it_stats_json)
    port=$(jq -c '.port' <<<"$s")
    [ "$(jq -r '.port.ipackets' <<<"$s")" = "$(jq -r '.total.rx_packets // 0' <<<"$s")" ]
  }
  it_until 5 port_matches_engine ||
    fail "port and engine disagree for 5 s: port $port, engine rx_packets $(it_stat rx_packets)"
  [ "$(it_stat drop_truncated)" = 0 ] || fail "the engine dropped $(it_stat drop_truncated) truncated frames"
fi
echo "PASS: MTU 9000 bed on net_$PMD, $WORLD ranks exact at 4096 (path MTU), 1024 (explicit) and 1024 (one rank" \
  "at 1500); no ICRC drop at the appliance"
