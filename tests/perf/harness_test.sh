#!/usr/bin/env bash
# The benchmark harness end to end, at the smallest sizes (a check that each benchmark still runs
# and that its JSON, report and plot agree, not a measurement):
#   perf/memif/run      one try at n = 2 for a fraction of a second: sumcastd (results per rank and
#                       by multicast), testpmd io and the generator's two ceilings (rxonly,
#                       txonly); sumcastd summed every frame, and sent one result frame per slot
#                       round by multicast, n per round otherwise; its report of two tries shows
#                       each try's pair and says where testpmd's rate moved
#   perf/cluster/run    unshaped (CLUSTER_RATE=0), n = 4, 1 MiB, one iteration, two rounds, in the
#                       default configuration (CLUSTER_CONFIG=targets, which the result names): Sumcast
#                       (checked exactly), Open MPI default and ring, CPU seconds per GB of each,
#                       the medians of the rounds and each round's ratio (and, relabelled as a
#                       shaped result, each round's algbw in R); CLUSTER_QUEUES on a shaped bed (n = 2,
#                       50 Mbit/s, 4 MiB, CLUSTER_CONFIG=bed): both directions' queues sampled, and
#                       refused unshaped; an unknown CLUSTER_CONFIG refused; the report's line of the
#                       workers' resends
#   perf/transport/run  the veth path once, and once with UDP_SEGMENT trains (the loopback path is perf_plot's)
# then perf/report.py and perf/plot.py on what they wrote. Needs root (namespaces, hugepages),
# dpdk-testpmd and mpirun: exits 77 (skipped) saying which is missing.
#   usage: harness_test.sh     (SUMCAST_SOURCE_DIR, SUMCAST_BINARY_DIR: set by ctest)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
root=${SUMCAST_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
build=${SUMCAST_BINARY_DIR:-$root/build}
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (namespaces, hugepages)"
command -v dpdk-testpmd >/dev/null || skip "dpdk-testpmd not installed"
command -v mpirun >/dev/null || skip "mpirun not installed"
[ "$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)" -ge 256 ] || skip "fewer than 256 free hugepages"
for f in perf/memif/sumcast-memif-gen dataplane/sumcastd/sumcastd tools/sumcastctl/sumcastctl \
  tools/sumcast-allreduce/sumcast-allreduce perf/mpi/mpi_allreduce_bench perf/transport/sumcast-transport-bench; do
  [ -x "$build/$f" ] || fail "$build/$f not built"
done
work=$(mktemp -d /tmp/sumcast-harness.XXXXXX)
trap 'rm -rf "$work"' EXIT
export PERF_RESULTS=$work

MEMIF_RANKS=2 MEMIF_SECONDS=0.3 MEMIF_WARMUP=0.1 MEMIF_REPEAT=1 timeout 120 "$root/perf/memif/run" "$build" \
  >"$work/memif.log" 2>&1 || { cat "$work/memif.log"; fail "perf/memif/run failed"; }
jq -e '.summary[0] | .sumcastd_pps > 0 and .sumcastd_multicast_pps > 0 and .testpmd_pps > 0 and .gen_tx_ceiling_pps > 0
       and .gen_rx_ceiling_pps > 0 and .ratio_multicast > 0' \
  "$work/memif.json" >/dev/null || { cat "$work/memif.log"; fail "memif.json lacks a rate or a ceiling"; }
for kind in sumcastd sumcastd_multicast; do
  jq -e ".runs[0].$kind.appliance | .contributions > 0 and (.drops | length) == 0" "$work/memif.json" >/dev/null ||
    { jq ".runs[0].$kind.appliance" "$work/memif.json"; fail "$kind did not sum every frame it got"; }
done
# Results per rank: 2 frames per completed slot round; by multicast: 1 (one stats snapshot may
# fall between a round's completion and the count of its results, hence the slack of one round).
jq -e '.runs[0] | (.sumcastd.appliance | (.results_sent - 2 * .slots_completed) | fabs <= 2)
       and (.sumcastd_multicast.appliance | (.results_sent - .slots_completed) | fabs <= 1)
       and .sumcastd_multicast.multicast == true and .sumcastd.multicast == false' "$work/memif.json" >/dev/null ||
  { jq '.runs[0] | {u: .sumcastd.appliance, m: .sumcastd_multicast.appliance}' "$work/memif.json"
    fail "result frames per slot round: not n with results per rank, or not 1 by multicast"; }
grep -q "loop ceil" "$work/memif.log" || { cat "$work/memif.log"; fail "the memif table has no ceiling"; }
# The run verified every ICRC and the table judges it against the target; the same runs marked as
# made without the check (MEMIF_VERIFY_ICRC=0) are reported as a diagnostic, never as reaching it.
jq -e '.runs[0] | .sumcastd.verify_icrc == true and .sumcastd_multicast.verify_icrc == true' "$work/memif.json" \
  >/dev/null || fail "memif.json does not say that sumcastd verified the ICRC"
grep -q "(target" "$work/memif.log" || { cat "$work/memif.log"; fail "the memif table judges no row against the target"; }
jq -c '.runs[] | .sumcastd.verify_icrc = false | .sumcastd_multicast.verify_icrc = false' "$work/memif.json" |
  /usr/bin/python3 "$root/perf/report.py" memif - "$work/memif-no-icrc.json" >"$work/memif-no-icrc.log" ||
  fail "perf/report.py failed on runs without the ICRC check"
if grep -q "(target" "$work/memif-no-icrc.log" || ! grep -q "not counted against the target" "$work/memif-no-icrc.log"; then
  cat "$work/memif-no-icrc.log"
  fail "runs without the ICRC check are judged against the target"
fi
# Two tries whose testpmd rates differ by 2x (the try doubled): the report shows each try's pair and
# says that the machine's speed moved, instead of only medians.
{ jq -c '.runs[0] | .try = 0' "$work/memif.json"; jq -c '.runs[0] | .try = 1 | .testpmd.rx_pps *= 2' "$work/memif.json"; } |
  /usr/bin/python3 "$root/perf/report.py" memif - "$work/memif-drift.json" >"$work/memif-drift.log" ||
  fail "perf/report.py failed on two tries"
if ! grep -q "each try: sumcastd" "$work/memif-drift.log" || ! grep -q "testpmd's rate moved by 2.0x" "$work/memif-drift.log" ||
  ! jq -e '.summary[0] | (.pair_ratios | length) == 2 and .pair_ratios[0] > 1.9 * .pair_ratios[1]' \
    "$work/memif-drift.json" >/dev/null; then
  cat "$work/memif-drift.log"
  fail "the memif report does not show each try's pair where testpmd's rate moved"
fi

# The default CLUSTER_CONFIG (targets): jumbo frames, UDP_SEGMENT trains, results by multicast and
# adaptive polling, each named in the result's file name, its fields and its notes.
CLUSTER_RATE=0 CLUSTER_N=4 CLUSTER_MIN=1M CLUSTER_MAX=1M CLUSTER_ITERS=1 CLUSTER_WARMUP=1 CLUSTER_LOSS=0 CLUSTER_ROUNDS=2 \
  timeout 180 "$root/perf/cluster/run" "$build" >"$work/cluster.log" 2>&1 ||
  { cat "$work/cluster.log"; fail "perf/cluster/run failed"; }
cl=$work/cluster-mtu9000-gso-adaptive-multicast-unshaped.json
jq -e '.mtu == 9000 and .multicast == "on" and .idle_poll == "adaptive" and (.notes[0] | contains("CLUSTER_CONFIG=targets"))
       and (.notes[0] | contains("UDP GSO on"))' "$cl" >/dev/null ||
  { cat "$work/cluster.log"; ls "$work"; fail "the default run is not in the targets' configuration"; }
if CLUSTER_CONFIG=jumbo "$root/perf/cluster/run" "$build" >"$work/config-bad.log" 2>&1; then fail "CLUSTER_CONFIG=jumbo ran"; fi
grep -q "CLUSTER_CONFIG must be targets or bed, not jumbo" "$work/config-bad.log" || { cat "$work/config-bad.log"; fail "no reason given"; }
jq -e '.cases[0] | .rows[0].sumcast > 0 and .rows[0].wrong == 0 and .rows[0].mpi_default > 0 and .rows[0].mpi_ring > 0
       and .cpu_s_per_gb.sumcast_workers > 0 and .cpu_s_per_gb.appliance > 0 and .cpu_s_per_gb.mpi_default > 0
       and .cpu_s_per_gb.mpi_ring > 0' "$cl" >/dev/null ||
  { cat "$work/cluster.log"; fail "the unshaped result lacks algbw, an exact result or CPU per GB"; }
grep -q "ratio to the better MPI" "$work/cluster.log" || { cat "$work/cluster.log"; fail "no CPU-per-GB ratio printed"; }
# CPU inside the timed calls (sumcast-allreduce and allreduce_bench --cpu-log, every rank).
jq -e '.cases[0] | (.call_cpu_s_per_gb | .sumcast_workers > 0 and .mpi_default > 0 and .mpi_ring > 0)
       and (.rows[0].call_cpu_s_per_gb | .sumcast > 0 and .mpi_default > 0 and .mpi_ring > 0)' \
  "$cl" >/dev/null || { cat "$work/cluster.log"; fail "the unshaped result lacks the CPU per GB inside the calls"; }
grep -q "inside the timed calls alone" "$work/cluster.log" || { cat "$work/cluster.log"; fail "no CPU per GB inside the calls printed"; }
# CLUSTER_ROUNDS=2: both rounds kept, each algbw the median (here the mean) of the two, and each
# round's ratio printed.
jq -e '.cases[0] | .rows[0].sumcast as $median | .rounds == 2 and (.round_rows | length) == 2 and
       ([.round_rows[][0].sumcast] | add / 2 - $median | fabs) < 1e-9' "$cl" >/dev/null ||
  { cat "$work/cluster.log"; fail "the unshaped result lacks the two rounds or their median"; }
grep -Eq '^ +1 MiB \|.*x \| [0-9.]+x [0-9.]+x$' "$work/cluster.log" ||
  { cat "$work/cluster.log"; fail "no ratio per round printed"; }
# On a shaped bed each round's Sumcast algbw in R follows its ratio.
jq '.rate_mbit = 200' "$cl" >"$work/cluster-as-shaped.json"
/usr/bin/python3 "$root/perf/report.py" cluster "$work/cluster-as-shaped.json" >"$work/cluster-as-shaped.log" ||
  fail "perf/report.py failed on a shaped result with rounds"
grep -Eq '^ +1 MiB \|.*x \| [0-9.]+x \([0-9.]+ R\) [0-9.]+x \([0-9.]+ R\)$' "$work/cluster-as-shaped.log" ||
  { cat "$work/cluster-as-shaped.log"; fail "no algbw in R per round printed for a shaped bed"; }
# Frames the kernel dropped under net_af_packet (kernel_ring_drops) are counted as missed, as imissed is.
jq '.cases[0].appliance_port |= (.ipackets = 990 | .imissed = 3 | .kernel_ring_drops = 7)' "$cl" \
  >"$work/cluster-drops.json"
/usr/bin/python3 "$root/perf/report.py" cluster "$work/cluster-drops.json" >"$work/cluster-drops.log" ||
  fail "perf/report.py failed on a cluster result with drops"
grep -q "990 frames received, 10 missed (1.00%: imissed 3, kernel_ring_drops 7;" "$work/cluster-drops.log" ||
  { cat "$work/cluster-drops.log"; fail "the cluster report does not count the kernel ring's drops as missed"; }
# The workers' resend counters, per rank smallest-largest, and all resends per 1000 packets received.
jq '.cases[0].per_rank = [{"retransmissions": 5, "stall_probes": 4, "fast_retransmissions": 1, "notice_retransmissions": 4,
                           "spurious_retransmissions": 2, "rx_packets": 1000},
                          {"retransmissions": 9, "stall_probes": 0, "fast_retransmissions": 3, "notice_retransmissions": 0,
                           "spurious_retransmissions": 7, "tx_eagain": 1, "rx_packets": 2000}]' "$cl" >"$work/cluster-resends.json"
/usr/bin/python3 "$root/perf/report.py" cluster "$work/cluster-resends.json" >"$work/cluster-resends.log" ||
  fail "perf/report.py failed on a cluster result with resends"
grep -qF "workers' resends over the Sumcast runs (per rank, smallest-largest of 2): on timeouts 5-9 (stall probes 0-4), fast 1-3, on loss notices 0-4; all resends 6.0-10.0 per 1000 packets received; answered twice (spurious) 2-7; send EAGAIN 0-1," \
  "$work/cluster-resends.log" || { cat "$work/cluster-resends.log"; fail "the cluster report does not show the workers' resends"; }
# The run itself printed that line from its ranks' statistics.
grep -q "^workers' resends over the Sumcast runs (per rank, smallest-largest of 4): " "$work/cluster.log" ||
  { cat "$work/cluster.log"; fail "perf/cluster/run printed no resend line"; }

# CLUSTER_QUEUES: refused on an unshaped bed (its figures are in R); on a shaped one (n = 2 at
# 50 Mbit/s, 4 MiB: about 0.7 s per call) the sampler saw both directions' queues and links busy.
if CLUSTER_RATE=0 CLUSTER_QUEUES=on "$root/perf/cluster/run" "$build" >"$work/queues-unshaped.log" 2>&1; then
  fail "CLUSTER_QUEUES=on ran on an unshaped bed"
fi
grep -q "CLUSTER_QUEUES needs a shaped bed" "$work/queues-unshaped.log" || { cat "$work/queues-unshaped.log"; fail "no reason given"; }
mkdir -p "$work/queues"
# This one in the bed's own configuration (CLUSTER_CONFIG=bed: MTU 1500, results per rank, busy
# polling), whose result keeps the plain name.
CLUSTER_CONFIG=bed CLUSTER_RATE=50 CLUSTER_QUEUES=on CLUSTER_N=2 CLUSTER_MIN=4M CLUSTER_MAX=4M CLUSTER_ITERS=1 \
  CLUSTER_WARMUP=1 CLUSTER_LOSS=0 PERF_RESULTS="$work/queues" timeout 120 "$root/perf/cluster/run" "$build" \
  >"$work/queues.log" 2>&1 || { cat "$work/queues.log"; fail "perf/cluster/run failed with CLUSTER_QUEUES=on"; }
jq -e '.cases[0].queues[0] | .up.active_intervals > 0 and .up.backlog_max > 0 and .up.use_mean > 0.1
       and .down.active_intervals > 0 and .down.use_mean > 0.1' "$work/queues/cluster.json" >/dev/null ||
  { cat "$work/queues.log"; fail "cluster.json lacks the queues of both directions"; }
jq -e '.mtu == 1500 and .multicast == "off" and .idle_poll == "busy" and (.notes[0] | contains("CLUSTER_CONFIG=bed"))
       and (.notes[0] | contains("UDP GSO off"))' "$work/queues/cluster.json" >/dev/null ||
  { cat "$work/queues.log"; fail "CLUSTER_CONFIG=bed did not run the bed's own configuration"; }
grep -q "^queues, contributions (workers' egress), [0-9]* active intervals" "$work/queues.log" ||
  { cat "$work/queues.log"; fail "no queue line printed"; }

TRANSPORT_PATHS=veth TRANSPORT_SECONDS=0.2 TRANSPORT_WARMUP=0.05 TRANSPORT_REPEAT=1 timeout 60 \
  "$root/perf/transport/run" "$build" >"$work/transport.log" 2>&1 ||
  { cat "$work/transport.log"; fail "perf/transport/run failed"; }
jq -e '.summary[0] | .path == "veth" and .udp_w2r_gbps > 0 and .udp_r2w_gbps > 0 and .tcp_w2r_gbps > 0' \
  "$work/transport.json" >/dev/null || { cat "$work/transport.log"; fail "transport.json has no veth row"; }
# With TRANSPORT_GSO=on the worker's packets leave in UDP_SEGMENT trains (its own counter).
mkdir -p "$work/gso"
TRANSPORT_GSO=on TRANSPORT_MTU=9000 TRANSPORT_PAYLOAD=4096 TRANSPORT_PATHS=veth TRANSPORT_SECONDS=0.2 \
  TRANSPORT_WARMUP=0.05 TRANSPORT_REPEAT=1 PERF_RESULTS="$work/gso" timeout 60 \
  "$root/perf/transport/run" "$build" >"$work/transport-gso.log" 2>&1 ||
  { cat "$work/transport-gso.log"; fail "perf/transport/run failed with TRANSPORT_GSO=on"; }
jq -e '.summary[0] | .gso and .udp_tx_in_trains_share > 0.5 and .udp_r2w_gbps > 0' "$work/gso/transport.json" \
  >/dev/null || { cat "$work/transport-gso.log"; fail "TRANSPORT_GSO=on: the worker sent no UDP_SEGMENT trains"; }

/usr/bin/python3 "$root/perf/plot.py" "$work" >"$work/plot.log" 2>&1 || { cat "$work/plot.log"; fail "plot.py failed"; }
for png in memif cluster-mtu9000-gso-adaptive-multicast-unshaped transport; do
  [ -s "$work/$png.png" ] || { cat "$work/plot.log"; fail "plot.py drew no $png.png"; }
done
echo "PASS: memif (results per rank and by multicast, with the generator's ceilings), cluster (unshaped in the targets' configuration, CPU per GB, two rounds; shaped in the bed's with its queues sampled) and transport (veth, with and without trains) ran end to end; report and plots drawn"
