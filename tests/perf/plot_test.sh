#!/usr/bin/env bash
# perf/plot.py on the JSON the Google Benchmark binaries write (engine, kernels, icrc): each runs a
# handful of its cases for a moment (a format check, not a measurement), and plot.py must draw
# every figure from them without failing (a benchmark run must not end in its plotting).
# memif.json, cluster*.json and scaleout*.json come from namespace runs of minutes and are not
# covered here (the script says so).
#   usage: plot_test.sh BENCH_ENGINE BENCH_KERNELS BENCH_ICRC
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
engine=$1 kernels=$2 icrc=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d /tmp/sumcast-plot.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {  # binary name filter
  "$1" --benchmark_filter="$3" --benchmark_min_time=0.001 --benchmark_out="$work/$2.json" \
    --benchmark_out_format=json >"$work/$2.log" 2>&1 || { tail -5 "$work/$2.log"; fail "$2 benchmark failed"; }
  [ "$(jq '.benchmarks | length' "$work/$2.json")" -gt 0 ] || fail "$2: no benchmark matched $3"
}
# Every family of row names each benchmark writes, the deterministic ones included.
run "$engine" engine '(engine|floor|deterministic)/fp32/payload:1024/icrc:on/n:8$|scale/ranks:(2|8)$|memory/'
run "$kernels" kernels '.'
run "$icrc" icrc '.'
/usr/bin/python3 "$root/perf/plot.py" "$work" >"$work/plot.log" 2>&1 || { cat "$work/plot.log"; fail "plot.py failed"; }
for png in engine engine_scaling engine_memory kernels icrc; do
  [ -s "$work/$png.png" ] || { cat "$work/plot.log"; fail "plot.py drew no $png.png"; }
done
echo "not covered: memif.json, cluster*.json, scaleout*.json (written by runs of minutes on the test bed)"
echo "PASS: plot.py drew engine, engine_scaling, engine_memory, kernels and icrc from real benchmark JSON"
