#!/usr/bin/env bash
# Deterministic summation (docs/fidelity.md) through the real appliance on impaired links: 4 ranks,
# non-integer inputs of mixed magnitudes (--inputs real: their sums depend on the order of the
# additions), sumcast-impair on every worker (NFQUEUE both ways, seeded differently in each run:
# 2% loss, 0..1 ms jitter, 20% of packets held 4 ms more: reordered, and retransmitted). For each
# dtype the same job runs twice; asserts:
#   - every result equals the documented deterministic result, the rank-order sum in the
#     accumulator type rounded once (--check with --deterministic);
#   - every rank of a run and both runs dumped the same bytes (cmp of --dump files);
#   - the impairment happened (packets reordered and dropped, ranks retransmitted).
#
# usage: deterministic_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
shift 4
N=4

it_begin $N
it_start_appliance

# sumcast-impair in every worker namespace (lib.sh's it_impair_start), a new one per run with its
# own seeds; its counters summed into IMP_REORDERED and IMP_DROPPED when stopped.
impair_start() { it_impair_start "$1." "$1" 100 --loss 2 --jitter-ms 1 --reorder 20 --reorder-ms 4; }
impair_stop() {  # SEED_BASE
  it_impair_stop
  IMP_REORDERED=$(($(it_impair_sum "$1." reordered 1) + $(it_impair_sum "$1." reordered 2)))
  IMP_DROPPED=$(($(it_impair_sum "$1." dropped 1) + $(it_impair_sum "$1." dropped 2)))
}
it_impair_rules

counts="1,257,16385,100000"
for dtype in bf16 fp32; do
  for run in 1 2; do
    tag="$dtype.$run"
    impair_start $((run * 100))
    t=$SECONDS
    it_ranks "$tag" "det-$tag" $N --dtype "$dtype" --deterministic --inputs real --check --counts "$counts" \
      --iters 2 --warmup 0 --op-timeout-ms 20000 --dump "$IT_WORK/$tag.r%r.bin"
    it_wait 60 || fail "$tag: hung (no result within 60 s)"
    it_expect_exact "$tag" $N 4
    impair_stop $((run * 100))
    reordered=$IMP_REORDERED dropped=$IMP_DROPPED
    retx=0
    for ((i = 0; i < N; i++)); do retx=$((retx + $(it_counter "$tag" $i retransmissions))); done
    note "$tag: rank-order results on every rank ($((SECONDS - t)) s); $reordered reordered, $dropped dropped, $retx retransmissions"
    [ "$reordered" -gt 0 ] || fail "$tag: nothing was reordered"
    if [ "$dropped" -eq 0 ] || [ "$retx" -eq 0 ]; then fail "$tag: nothing was dropped and retransmitted"; fi
    for ((i = 0; i < N; i++)); do
      [ -s "$IT_WORK/$tag.r$i.bin" ] || fail "$tag: rank $i dumped nothing"
      cmp -s "$IT_WORK/$tag.r0.bin" "$IT_WORK/$tag.r$i.bin" || fail "$tag: ranks 0 and $i got different bytes"
    done
  done
  cmp "$IT_WORK/$dtype.1.r0.bin" "$IT_WORK/$dtype.2.r0.bin" || fail "$dtype: the two runs' results differ"
  note "$dtype: both runs bitwise identical ($(stat -c %s "$IT_WORK/$dtype.1.r0.bin") bytes)"
done
echo "PASS: deterministic: bf16 and fp32 results bitwise identical across ranks and runs under loss and reordering"
