#!/usr/bin/env bash
# UDP GSO and GRO on the workers. GRO (sumcast-allreduce --udp-gro, on by default) with GRO on
# every worker's link (ethtool): the worker sockets take coalesced buffers, whatever sends the
# results. GSO (--udp-gso on): contributions leave in UDP_SEGMENT trains, segment k with IP ID k,
# and sumcastd, which checks the ICRC on the IPv4 header it received, takes them. n = 4, fp32
# 1M-element calls with --check, every link at MTU (the argument) 9000 (the appliance on net_pcap,
# 4096-byte payloads) or 1500 (1024-byte payloads):
#   1. sumcastd as the appliance: exact, no ICRC drop on either side;
#   2. the same with --udp-gso on: exact, segmented sends counted, still no ICRC drop at sumcastd;
#   3. sumcast-serve (a kernel-UDP aggregator) on an aggregation node: exact, no ICRC drop;
#   4. the same with --udp-gro off: exact, nothing coalesced; UDP_GRO refused nowhere;
#  4b. sumcast-serve --multicast --udp-trains, the workers --multicast: exact, every
#      rank granted multicast and given results on the group, result trains sent; at MTU 1500
#      also with the workers' trains cut on the way (--udp-gso on): exact, the service taking each
#      datagram of a cut train for its IP ID (counted), none failing its ICRC;
#   5. sumcastd again, with dataplane.udp_checksum = true and each worker's veth set up to
#      coalesce as a NIC's GRO does (tb_gro: GRO with threaded NAPI, TSO off on its switch port):
#      exact, no datagram dropped by a worker's kernel for a bad checksum (Udp InCsumErrors),
#      and results coalesced (Linux merges only datagrams with a checksum, so none would be
#      without it).
# In 1-4 what the kernel coalesced is printed, and not required: sumcastd's results carry UDP
# checksum 0, which UDP GRO never merges, and without threaded NAPI a veth hands GRO one datagram
# at a time. The splitting of coalesced buffers is also checked by the unit tests
# (shim_udp_transport_test, UdpTransport.Gro*), where loopback delivers a segmented send whole.
# Takes ~15-20 s.
#
# usage: gso_gro_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR SERVE MTU
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
SERVE=$5
MTU=$6
shift 6
WORLD=4
case "$MTU" in
  9000) pmd=pcap ;;  # DPDK 22.11's net_af_packet takes no frame above 1518 bytes
  1500) pmd=${IT_PMD:-} ;;
  *) fail "MTU must be 9000 or 1500, got '$MTU'" ;;
esac

TB_MTU=$MTU  # also for the aggregation node added below
IT_PMD=$pmd IT_JOB_TIMEOUT_MS=20000 it_begin "$WORLD"
# GRO on every worker's link; UDP segmentation offload off, so the kernel cuts a worker's GSO
# trains where they leave it, as for a NIC without USO (a veth would pass a train on whole, and the
# appliance's PMD reads frames of at most one MTU).
for ((i = 0; i < WORLD; i++)); do
  tb_exec "w$i" ethtool -K "$TB_WORKER_IF" gro on tx-udp-segmentation off >/dev/null
done
[ "$(tb_exec w0 ethtool -k "$TB_WORKER_IF" | sed -n 's/^generic-receive-offload: //p')" = on ] ||
  fail "w0's $TB_WORKER_IF did not take GRO on"
it_start_appliance
agg_ip="$TB_SUBNET.101"
tb_add_node a1 "$agg_ip" || fail "aggregation node a1 did not come up"
serve_pid= serve_log= serve_starts=0
start_serve() {  # sumcast-serve options...
  # A log of its own per start: a new process truncates a reused one only once it has forked, so
  # the wait below could still read the previous one's "ready".
  serve_starts=$((serve_starts + 1))
  serve_log=$IT_WORK/serve-$serve_starts.log
  ip netns exec "$(tb_ns a1)" "$SERVE" --bind "$agg_ip" --token-file "$IT_WORK/token" --job-timeout-ms 20000 "$@" \
    >"$serve_log" 2>&1 &
  serve_pid=$!
  IT_EXTRA_PIDS+=("$serve_pid")
  tb_wait_line "$serve_log" "^sumcast-serve: ready" 20 "$serve_pid" || fail "sumcast-serve $* did not start"
}
start_serve

# sum TAG COUNTER: the counter summed over the ranks.
sum() {
  local i s=0
  for ((i = 0; i < WORLD; i++)); do s=$((s + $(it_counter "$1" "$i" "$2"))); done
  echo "$s"
}
# run TAG AGGREGATOR options...: one job on every rank, exact, no ICRC drop at any worker.
run() {
  local tag=$1 agg=$2 i
  shift 2
  for ((i = 0; i < WORLD; i++)); do
    ip netns exec "$(tb_ns "w$i")" "$ALLREDUCE" --appliance "$agg:4790" --token-file "$IT_WORK/token" \
      --job "$tag" --rank "$i" --world "$WORLD" --bind "${TB_WORKER_IP[$i]}" \
      --check --counts 1M --iters 2 --warmup 1 "$@" >"$IT_WORK/$tag.r$i.log" 2>&1 &
    IT_PIDS+=($!)
  done
  it_wait 60 || fail "$tag: no result within 60 s"
  it_expect_exact "$tag" "$WORLD" 1
  [ "$(sum "$tag" drop_bad_icrc)" = 0 ] || fail "$tag: the workers dropped $(sum "$tag" drop_bad_icrc) bad ICRCs"
  [ "$(sum "$tag" gro_refused)" = 0 ] || fail "$tag: a worker's kernel refused UDP_GRO (this kernel has it)"
  note "$tag: exact on $WORLD ranks, payload $(it_counter "$tag" 0 payload_bytes)," \
    "rank 0 $(awk '$1 ~ /^[0-9]+$/ { bw = $6 } END { print bw }' "$IT_WORK/$tag.r0.log") GB/s; coalesced receives" \
    "$(sum "$tag" gro_receives) holding $(sum "$tag" gro_segments) of $(sum "$tag" rx_packets) datagrams" \
    "(printed, not required)"
}

run sumcastd "$TB_MGMT_IP"
run sumcastd-gso "$TB_MGMT_IP" --udp-gso on
note "sumcastd-gso: $(sum sumcastd-gso gso_sends) segmented sends carried $(sum sumcastd-gso gso_segments) of" \
  "$(sum sumcastd-gso tx_packets) packets"
[ "$(sum sumcastd-gso gso_segments)" -gt 0 ] || fail "sumcastd-gso: no segmented send with --udp-gso on"
bad_icrc=$(it_stat drop_bad_icrc)
[ "$bad_icrc" = 0 ] || fail "the appliance dropped $bad_icrc frames for a bad ICRC"
run serve "$agg_ip"
run serve-off "$agg_ip" --udp-gro off
[ "$(sum serve-off gro_receives)" = 0 ] && [ "$(sum serve-off gro_segments)" = 0 ] ||
  fail "serve-off: results coalesced with --udp-gro off"

# 4b. sumcast-serve --multicast --udp-trains, the workers asking for multicast (their own sends
# one datagram each: this bed cuts trains on the workers' links, which --udp-trains does not take):
# exact, every rank granted multicast and its results taken from the group, the service's result
# trains counted when it stops.
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "sumcast-serve exited $? on SIGTERM"
start_serve --multicast --udp-trains
run serve-mc "$agg_ip" --multicast
for ((i = 0; i < WORLD; i++)); do
  [ "$(it_counter serve-mc "$i" multicast)" = 1 ] || fail "serve-mc: rank $i was not granted multicast"
  [ "$(it_counter serve-mc "$i" rx_group_results)" -gt 0 ] || fail "serve-mc: rank $i received no result on the group"
done
# 4c (MTU 1500 only). The same service while the workers send trains (--udp-gso on), which this
# bed cuts on their links and the service's veth does not coalesce again. Datagram k > 0 of a train
# arrives alone, stamped for IP ID k, which its socket does not show: the service finds k
# (docs/protocol.md §2.2) and counts it as of a cut train; none fails its ICRC (checked below, from
# the counters it prints when it stops), and the job is exact.
if [ "$MTU" = 1500 ]; then
  run serve-cut "$agg_ip" --multicast --udp-gso on --counts 256K  # the later --counts wins
  [ "$(sum serve-cut gso_segments)" -gt 0 ] || fail "serve-cut: no train sent with --udp-gso on"
  cut_sent=$(($(sum serve-cut gso_segments) - $(sum serve-cut gso_sends)))
  note "serve-cut: $(sum serve-cut gso_segments) datagrams sent in $(sum serve-cut gso_sends) trains," \
    "$(sum serve-cut retransmissions) resends"
fi
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "sumcast-serve --multicast exited $? on SIGTERM"
stopped=$(grep '^sumcast-serve: stopped' "$serve_log") || fail "sumcast-serve printed no counters when stopped"
trains=$(sed -n 's/.*tx [0-9]* datagrams ([0-9]* in \([0-9]*\) trains).*/\1/p' <<<"$stopped")
[ "${trains:-0}" -gt 0 ] || fail "serve-mc: sumcast-serve sent no result train: $stopped"
bad=$(sed -n 's/.*rx bad ICRC \([0-9]*\),.*/\1/p' <<<"$stopped")
[ "$bad" = 0 ] || fail "sumcast-serve --multicast --udp-trains dropped ${bad:-?} datagrams for a bad ICRC: $stopped"
if [ "$MTU" = 1500 ]; then
  # Every datagram after a train's first came alone and was taken (the cut trains of 4c; nothing
  # else sent trains to this service).
  cut=$(sed -n 's/.*, \([0-9]*\) of cut trains).*/\1/p' <<<"$stopped")
  [ "${cut:-}" = "$cut_sent" ] || fail "serve-cut: sumcast-serve took ${cut:-?} datagrams of cut trains, the workers" \
    "sent $cut_sent after the first of a train: $stopped"
fi
engine=$(grep '^sumcast-serve: engine:' "$serve_log") || fail "sumcast-serve printed no engine counters when stopped"
contributions=$(sed -n 's/.*engine: contributions \([0-9]*\),.*/\1/p' <<<"$engine")
[ "${contributions:-0}" -gt 0 ] || fail "sumcast-serve's engine counted no contribution: $engine"
note "serve-mc: $(sum serve-mc rx_group_results) results from the group; $stopped; $engine"

# 5. Checksummed results, coalesced on the workers.
# csum_errors: Udp InCsumErrors summed over the workers' namespaces (each has its own counters).
csum_errors() {
  local i s=0
  for ((i = 0; i < WORLD; i++)); do
    s=$((s + $(tb_exec "w$i" awk '$1 == "Udp:" && !h { for (k = 2; k <= NF; k++) if ($k == "InCsumErrors") c = k; h = 1; next }
      $1 == "Udp:" { print $c }' /proc/net/snmp)))
  done
  echo "$s"
}
kill -TERM "$IT_APP_PID"
wait "$IT_APP_PID" || fail "sumcastd exited $? on SIGTERM"
IT_APP_PID=
TB_JOB_TIMEOUT_MS=20000 tb_agg_conf "$IT_WORK/agg.conf" "$IT_WORK/token" "${pmd:-af_packet}" "udp_checksum = true;"
tb_gro || fail "tb_gro could not set the workers' links up for GRO"
it_start_appliance
# A veth's GRO merges only what its NAPI thread finds queued together, which depends on scheduling:
# runs here coalesced 336 to 5,895 of ~12,500 results, and once none. Up to three jobs, each
# exact and without a checksum error; at least one must coalesce (none ever would without
# checksums, and all would fail the kernels' check with wrong ones).
errors0=$(csum_errors)
coalesced=0
for attempt in 1 2 3; do
  run "sumcastd-csum$attempt" "$TB_MGMT_IP"
  [ "$(csum_errors)" = "$errors0" ] ||
    fail "sumcastd-csum: the workers' kernels dropped $(($(csum_errors) - errors0)) results for a bad UDP checksum"
  if [ "$(sum "sumcastd-csum$attempt" gro_segments)" -gt "$(sum "sumcastd-csum$attempt" gro_receives)" ]; then
    coalesced=1
    break
  fi
  note "sumcastd-csum$attempt: nothing coalesced this time (scheduling); another job"
done
[ $coalesced = 1 ] || fail "sumcastd-csum: nothing coalesced from checksummed results in 3 jobs"
echo "PASS: MTU $MTU bed, $WORLD ranks exact with UDP GRO on (sumcastd, sumcast-serve) and off, and with" \
  "UDP GSO toward sumcastd; no ICRC drop; sumcastd's checksummed results pass the kernels' check and coalesce"
