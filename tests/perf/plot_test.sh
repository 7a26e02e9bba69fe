#!/usr/bin/env bash
# perf/plot.py on the JSON the benchmarks write: the Google Benchmark binaries (engine, kernels,
# icrc) each run a handful of their cases for a moment, perf/transport/run runs its loopback path
# once for a fraction of a second (format checks, not measurements), and plot.py must draw every
# figure from them without failing (a benchmark run must not end in its plotting); report.py must
# print the engine's ratio table from the same JSON.
# memif.json and cluster*.json (root, hugepages, DPDK processes, namespaces) are perf_harness's
# (tests/perf/harness_test.sh, integration); scaleout*.json (runs of minutes) is not covered.
#   usage: plot_test.sh BENCH_ENGINE BENCH_KERNELS BENCH_ICRC BENCH_TRANSPORT
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
engine=$1 kernels=$2 icrc=$3 transport=$4
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d /tmp/sumcast-plot.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {  # binary name filter
  "$1" --benchmark_filter="$3" --benchmark_min_time=0.001 --benchmark_out="$work/$2.json" \
    --benchmark_out_format=json >"$work/$2.log" 2>&1 || { tail -5 "$work/$2.log"; fail "$2 benchmark failed"; }
  [ "$(jq '.benchmarks | length' "$work/$2.json")" -gt 0 ] || fail "$2: no benchmark matched $3"
}
# Every family of row names each benchmark writes, the deterministic ones included (the timed
# ones are named .../manual_time by Google Benchmark, hence the optional suffix before the anchor).
run "$engine" engine '((engine|floor|deterministic)/fp32/payload:1024/icrc:on/n:8|memcpy/fp32/payload:1024/n:8|scale/ranks:(2|8))(/manual_time)?$|memory/'
# Every kernels family at its KiB sizes, and of the 64 MiB rows (9 s of buffer set-up for all of
# them) one of each name family: the figure's 64 MiB panel is drawn from what is there.
run "$kernels" kernels 'KiB$|^memcpy/64MiB$|^accumulate_sum/scalar/fp32/64MiB$'
run "$icrc" icrc '.'
# The transport benchmark's real JSON: its run script wants the binary under BUILD/perf/transport/.
mkdir -p "$work/build/perf/transport"
ln -s "$transport" "$work/build/perf/transport/sumcast-transport-bench"
PERF_RESULTS=$work TRANSPORT_PATHS=loopback TRANSPORT_SECONDS=0.2 TRANSPORT_WARMUP=0.05 TRANSPORT_REPEAT=1 \
  TRANSPORT_WORKER_CPU=0 TRANSPORT_REFLECTOR_CPU=$(($(nproc) > 1 ? 1 : 0)) \
  timeout 60 "$root/perf/transport/run" "$work/build" >"$work/transport.log" 2>&1 ||
  { cat "$work/transport.log"; fail "perf/transport/run failed"; }
[ "$(jq '.summary | length' "$work/transport.json")" -eq 1 ] || fail "transport.json has no loopback row"
/usr/bin/python3 "$root/perf/report.py" engine "$work/engine.json" >"$work/report.log" 2>&1 ||
  { cat "$work/report.log"; fail "report.py engine failed"; }
grep -q "engine/floor .*floor/memcpy" "$work/report.log" || { cat "$work/report.log"; fail "report.py printed no engine/floor and floor/memcpy ratios"; }
/usr/bin/python3 "$root/perf/plot.py" "$work" >"$work/plot.log" 2>&1 || { cat "$work/plot.log"; fail "plot.py failed"; }
for png in engine engine_scaling engine_memory kernels icrc transport; do
  [ -s "$work/$png.png" ] || { cat "$work/plot.log"; fail "plot.py drew no $png.png"; }
done
echo "not covered here: memif.json, cluster*.json (perf_harness covers them), scaleout*.json (runs of minutes)"
echo "PASS: plot.py drew engine, engine_scaling, engine_memory, kernels, icrc and transport from real benchmark JSON; report.py printed the engine ratios"
