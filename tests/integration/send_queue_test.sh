#!/usr/bin/env bash
# The worker's send queue (worker_shim communicator.h, "Send queue"; docs/deployment.md). Each
# worker's own link is the bottleneck here: its veth's egress is tbf-shaped to 40 Mbit/s, where
# a window of 256 slots of 1 KiB chunks would otherwise wait in the worker's qdisc. n = 2, fp32
# 1M-element calls with --check, sumcastd with 256 slots per job:
#   1. default (--send-queue-us 2000): exact; every rank held new chunks back
#      (send_queue_holds > 0) and never saw more than 4 x 128 KiB of socket memory queued below
#      its socket (send_queue_peak; a chunk's datagram is charged about twice its length);
#   2. --send-queue-us 0: exact, nothing held, the queue never looked at;
#   3. repairs skip the queue: the links' tbf serving DSCP 34 first (the bed's TB_REPAIR_DSCP)
#      under 2% loss on the switch, --repair-dscp 34: exact, some resends, and each rank's resends
#      (retransmissions, fast and notice retransmissions, liveness probes) are exactly what left
#      through its link's DSCP 34 class: every resend carried the repair DSCP, nothing else did.
# Takes ~12 s.
#
# usage: send_queue_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
shift 4
WORLD=2
RATE=40mbit
LIMIT=$((128 * 1024))  # the floor of the limit (communicator.cc, kSendQueueFloor): at 40 Mbit/s it applies

TB_SLOTS=256 IT_JOB_TIMEOUT_MS=20000 it_begin "$WORLD"
for ((i = 0; i < WORLD; i++)); do _tb_shape "$(tb_ns "w$i")" "$TB_WORKER_IF" "$RATE"; done
it_start_appliance

it_ranks held sq "$WORLD" --check --counts 1M --iters 2 --warmup 1 --op-timeout-ms 20000
it_wait 60 || fail "held: no result within 60 s"
it_expect_exact held "$WORLD" 1
for ((i = 0; i < WORLD; i++)); do
  holds=$(it_counter held "$i" send_queue_holds) peak=$(it_counter held "$i" send_queue_peak)
  note "rank $i: send_queue_holds=$holds send_queue_peak=$peak window_now=$(it_counter held "$i" window_now)"
  [ "$holds" -gt 0 ] || fail "rank $i held nothing back behind a ${RATE} link (send_queue_peak $peak)"
  [ "$peak" -gt 0 ] && [ "$peak" -le $((4 * LIMIT)) ] ||
    fail "rank $i: send_queue_peak $peak, want 1..$((4 * LIMIT)) bytes"
done

it_ranks unlimited sq2 "$WORLD" --check --counts 1M --iters 2 --warmup 1 --op-timeout-ms 20000 --send-queue-us 0
it_wait 60 || fail "unlimited: no result within 60 s"
it_expect_exact unlimited "$WORLD" 1
for ((i = 0; i < WORLD; i++)); do
  for n in send_queue_holds send_queue_peak; do
    [ "$(it_counter unlimited "$i" $n)" = 0 ] || fail "rank $i: $n = $(it_counter unlimited "$i" $n) with --send-queue-us 0"
  done
done
note "both runs exact; the send queue held chunks back only where it was on"

for ((i = 0; i < WORLD; i++)); do TB_REPAIR_DSCP=34 _tb_shape "$(tb_ns "w$i")" "$TB_WORKER_IF" "$RATE"; done
tb_loss 2
it_ranks repair sq3 "$WORLD" --check --counts 1M --iters 2 --warmup 1 --op-timeout-ms 20000 --repair-dscp 34
it_wait 60 || fail "repair: no result within 60 s"
it_expect_exact repair "$WORLD" 1
total=0
for ((i = 0; i < WORLD; i++)); do
  resends=0
  for n in retransmissions fast_retransmissions notice_retransmissions liveness_probes; do
    resends=$((resends + $(it_counter repair "$i" $n)))
  done
  class=$(tb_exec "w$i" tc -s class show dev "$TB_WORKER_IF" classid 10:1 | awk '$1 == "Sent" { print $4; exit }')
  note "rank $i: $resends resends, $class packets through the DSCP 34 class"
  [ "$class" = "$resends" ] || fail "rank $i: $class packets left through the repair class, $resends resends counted"
  total=$((total + resends))
done
[ "$total" -gt 0 ] || fail "no resend under 2% loss: nothing was checked"
note "every resend left through the repair class, nothing else did"
