#!/usr/bin/env bash
# Jumbo frames: the flat bed with every link at MTU 9000 (TB_MTU), the appliance on net_pcap
# (DPDK 22.11's net_af_packet takes no MTU above 1500) with port.mtu 9000 and 4096-byte payloads.
# n = 4, fp32 4 MiB calls with --check:
#   1. default payload: every rank asks for what its path MTU carries (4096) and gets it;
#   2. --payload 1024 on every rank: the explicit setting wins;
#   3. w3's link back at 1500 (both ends): w3 asks for 1024, the grant is the smallest any rank
#      asked for, so every rank chunks at 1024 and results stay exact.
# Every run exact, and the appliance dropped no frame for a bad ICRC (the kernel's IPv4 headers of
# the large datagrams are the ones the workers' ICRCs cover). Takes ~15 s.
#
# usage: jumbo_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
shift 4
WORLD=4

TB_MTU=9000 IT_PMD=pcap IT_JOB_TIMEOUT_MS=20000 it_begin "$WORLD"
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
echo "PASS: MTU 9000 bed, $WORLD ranks exact at 4096 (path MTU), 1024 (explicit) and 1024 (one rank at 1500);" \
  "no ICRC drop at the appliance"
