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

# sumcast-impair in every worker namespace: queue 1 contributions (OUTPUT), queue 2 results (INPUT).
IMPAIR_PIDS=()
impair_start() {  # SEED_BASE
  local i q
  IMPAIR_PIDS=()
  for ((i = 0; i < N; i++)); do
    for q in 1 2; do
      ip netns exec "$(tb_ns "w$i")" "$IMPAIR" --queue $q --seed $(($1 + i * 2 + q)) --duration-s 100 --loss 2 \
        --jitter-ms 1 --reorder 20 --reorder-ms 4 >"$IT_WORK/impair.$1.w$i.q$q.log" 2>&1 &
      IMPAIR_PIDS+=($!)
      IT_EXTRA_PIDS+=($!)
      tb_wait_line "$IT_WORK/impair.$1.w$i.q$q.log" "^sumcast-impair: queue" 10 $! || fail "sumcast-impair did not start"
    done
  done
}
# Stops them (SIGTERM: they release what they hold and print their counters) and sums their
# counters into IMP_REORDERED and IMP_DROPPED. Not in a subshell: it waits for its children.
impair_stop() {  # SEED_BASE
  local p i q v r=0 d=0 deadline=$((SECONDS + 10))
  for p in "${IMPAIR_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${IMPAIR_PIDS[@]}"; do
    while _it_alive "$p"; do
      [ $SECONDS -lt $deadline ] || fail "sumcast-impair $p did not stop"
      tb_pause 0.02
    done
    wait "$p" || fail "sumcast-impair $p exited with $?"
  done
  for ((i = 0; i < N; i++)); do
    for q in 1 2; do
      v=$(sed -n "s/^sumcast-impair: received .* reordered \([0-9]*\).*/\1/p" "$IT_WORK/impair.$1.w$i.q$q.log")
      r=$((r + ${v:-0}))
      v=$(sed -n "s/^sumcast-impair: received .* dropped \([0-9]*\).*/\1/p" "$IT_WORK/impair.$1.w$i.q$q.log")
      d=$((d + ${v:-0}))
    done
  done
  IMP_REORDERED=$r
  IMP_DROPPED=$d
}
for ((i = 0; i < N; i++)); do
  tb_exec "w$i" iptables -A OUTPUT -p udp --dport 4791 -j NFQUEUE --queue-num 1 --queue-bypass
  tb_exec "w$i" iptables -A INPUT -p udp --sport 4791 -j NFQUEUE --queue-num 2 --queue-bypass
done

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
