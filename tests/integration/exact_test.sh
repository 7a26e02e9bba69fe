#!/usr/bin/env bash
# Exact results through the real appliance: sumcastd (net_af_packet, or IT_PMD=af_xdp; appliance namespace) and WORLD
# sumcast-allreduce processes, one per worker namespace. For every dtype (fp32 fp16 bf16 int32
# fp64), out of place and in place, one job runs these element counts with --check (every result of
# every iteration compared with the exact sum; each iteration has new inputs; an out-of-place receive
# buffer is poisoned first): 1, 2, 3; a chunk (c = 1024 B / element size) -1, 0, +1; the window
# (64 slots x c) -1, 0, +1; 3 windows and a half chunk (a partial last round); 1 MiB; 4 MiB.
# BIG (optional: out, in or both) adds an fp32 64 MiB all-reduce, out of place, in place or both.
# Then the appliance's own counters must account for exactly the workers' traffic: its
# contributions equal the sum of every rank's chunks, each chunk's slot completed once, a result
# sent per contribution, and no job left active.
#
# usage: exact_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR WORLD [BIG]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
shift 4
WORLD=$1 BIG=${2:-}
SLOTS=64  # tb_agg_conf's slots_per_job
PAYLOAD=1024

# A rank may start a call seconds after another while it prepares 64 MiB of inputs and expected
# sums on 2 busy CPUs: the job timeout must not fire then (failures have their own tests).
IT_JOB_TIMEOUT_MS=20000 it_begin "$WORLD"
it_start_appliance

total_chunks=0  # every rank's chunks, summed over runs
total_rounds=0  # rank 0's chunks (one slot round each), summed over runs
runs=0
# run TAG ROWS options...: one job, every rank checked; adds its chunks to the totals.
run() {
  local tag=$1 rows=$2 t=$SECONDS i c
  shift 2
  it_ranks "$tag" "$tag" "$WORLD" --check --iters 2 --warmup 1 "$@"
  it_wait 60 || fail "$tag: no result within 60 s"
  it_expect_exact "$tag" "$WORLD" "$rows"
  for ((i = 0; i < WORLD; i++)); do
    c=$(it_counter "$tag" "$i" chunks)
    [ "$c" -gt 0 ] || fail "$tag: rank $i reports no chunks"
    total_chunks=$((total_chunks + c))
  done
  total_rounds=$((total_rounds + $(it_counter "$tag" 0 chunks)))
  runs=$((runs + 1))
  note "$tag: $rows sizes exact on $WORLD ranks ($((SECONDS - t)) s)"
}

for dtype in fp32 fp16 bf16 int32 fp64; do
  case $dtype in fp16 | bf16) es=2 ;; fp64) es=8 ;; *) es=4 ;; esac
  c=$((PAYLOAD / es))
  w=$((SLOTS * c))
  counts="1,2,3,$((c - 1)),$c,$((c + 1)),$((w - 1)),$w,$((w + 1)),$((3 * w + c / 2)),$(((1 << 20) / es)),$(((4 << 20) / es))"
  rows=$(($(tr -cd , <<<"$counts" | wc -c) + 1))
  run "$dtype-out" "$rows" --dtype "$dtype" --counts "$counts"
  run "$dtype-in" "$rows" --dtype "$dtype" --counts "$counts" --in-place
done
case $BIG in
  out | in | both | "") ;;
  *) fail "BIG must be out, in or both" ;;
esac
# 64 MiB of fp32 is 16 Mi elements.
if [ "$BIG" = out ] || [ "$BIG" = both ]; then run fp32-64M-out 1 --dtype fp32 --counts 16M --iters 1 --warmup 0; fi
if [ "$BIG" = in ] || [ "$BIG" = both ]; then run fp32-64M-in 1 --dtype fp32 --counts 16M --iters 1 --warmup 0 --in-place; fi

# The appliance summed exactly what the workers sent, once each.
"$SUMCASTCTL" --prefix "$TB_PREFIX" stats --json >"$IT_WORK/stats.json"
st() { jq -r ".total.$1" "$IT_WORK/stats.json"; }
[ "$(st contributions)" = "$total_chunks" ] || fail "appliance contributions $(st contributions), workers sent $total_chunks chunks"
[ "$(st slots_completed)" = "$total_rounds" ] || fail "appliance slots_completed $(st slots_completed), want $total_rounds"
[ "$(st results_sent)" = "$total_chunks" ] || fail "appliance results_sent $(st results_sent), want $total_chunks"
[ "$(st aborts_sent)" = 0 ] || fail "appliance sent aborts"
# Jobs end when their ranks leave: none active, every one started.
it_until 10 bash -c "[ \"\$('$SUMCASTCTL' --prefix '$TB_PREFIX' stats --json | jq -r .total.jobs_active)\" = 0 ]" ||
  fail "jobs still active on the appliance"
started=$("$SUMCASTCTL" --prefix "$TB_PREFIX" jobs --json | jq -r '.server.jobs_started')
[ "$started" = "$runs" ] || fail "appliance started $started jobs, want $runs"
echo "PASS: $WORLD ranks, $runs jobs exact (5 dtypes, in and out of place${BIG:+, 64 MiB ($BIG)}); appliance counted $total_chunks contributions"
