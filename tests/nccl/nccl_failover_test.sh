#!/usr/bin/env bash
# The NCCL plugin across the loss of an appliance, driven as NCCL drives it (tests/nccl/
# nccl_harness.cc --mode failover): N processes on loopback, two appliances (the embedded service
# in processes of their own, nccl_test_appliance), three CollNet lanes per process driven from one
# thread. Once rank 0 holds (the other ranks' chunks outstanding), the first appliance gets SIGNAL
# (KILL: its connections drop; STOP: it goes silent and is found out by the liveness probes), then
# rank 0 goes on. Every chunk must be exact, no call may fail and no WARN be logged, and each
# process's closeColl line must report one failover per lane, with chunks replayed on some rank.
#
#   nccl_failover_test.sh ABI HARNESS PLUGIN NCCL_TEST_APPLIANCE KILL|STOP [N]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"

abi=$1 harness=$2 plugin=$3 appliance=$4 sig=$5 n=${6:-3}
case $sig in
  KILL) net=28 ;;
  STOP) net=29 ;;
  *) echo "unknown signal '$sig' (KILL or STOP)" >&2; exit 2 ;;
esac
work=$(mktemp -d /tmp/nccl-failover-test.XXXXXX)
app_pids=()
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${app_pids[@]}"; do
    kill -CONT "$p" 2>/dev/null || true
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  if [ $rc -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; }; done
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"; echo >>"$work/token"
chmod 600 "$work/token"

wait_file() {  # path what pids...: the file appears within 60 s while the pids live
  local path=$1 what=$2; shift 2
  local deadline=$((SECONDS + 60))
  until [ -e "$path" ]; do
    for p in "$@"; do kill -0 "$p" 2>/dev/null || fail "$what: process $p exited first"; done
    [ $SECONDS -lt $deadline ] || fail "$what: not within 60 s"
    read -rt 0.05 <> <(:) || true
  done
}

addresses=()
for a in 1 2; do
  "$appliance" --bind "127.0.$net.$a$abi" --token-file "$work/token" >"$work/appliance$a.log" 2>&1 &
  app_pids+=($!)
  until grep -q '^ready ' "$work/appliance$a.log" 2>/dev/null; do
    kill -0 "${app_pids[-1]}" 2>/dev/null || fail "test appliance $a exited: $(cat "$work/appliance$a.log")"
    read -rt 0.05 <> <(:) || true
  done
  addresses+=("$(sed -n 's/^ready //p' "$work/appliance$a.log")")
done
lost=${addresses[0]}
export SUMCAST_APPLIANCES="${addresses[0]},${addresses[1]}" SUMCAST_TOKEN_FILE="$work/token"
export SUMCAST_NCCL_IFNAME="=lo" SUMCAST_NCCL_CONF=/dev/null

start=$SECONDS
for ((r = 0; r < n; r++)); do
  "$harness" --plugin "$plugin" --abi "$abi" --rank "$r" --nranks "$n" --bootstrap "$work/boot.sock" --timeout 90 \
    --mode failover --hold "$work/hold" >"$work/rank$r.log" 2>&1 &
  pids+=($!)
done
wait_file "$work/hold.ready" "rank 0's hold" "${pids[@]}"
kill "-$sig" "${app_pids[0]}"
echo "SIG$sig to the appliance at $lost while rank 0 holds"
: >"$work/hold.go"
for ((r = 0; r < n; r++)); do
  wait "${pids[$r]}" || fail "rank $r exited with $? ($(grep -m3 'FAIL\|WARN' "$work/rank$r.log" || tail -1 "$work/rank$r.log"))"
done
pids=()

replayed=0
for ((r = 0; r < n; r++)); do
  log=$work/rank$r.log
  grep -q "PASS: ABI v$abi failover" "$log" || fail "rank $r did not pass"
  ! grep -q "WARN" "$log" || fail "rank $r logged a WARN: $(grep -m1 WARN "$log")"
  line=$(grep -m1 "CollNet closeColl rank $r/$n" "$log") || fail "rank $r: no closeColl summary from the plugin"
  lanes=$(grep -o '([0-9]* failover, [0-9]* chunks replayed)' <<<"$line" | wc -l)
  [ "$lanes" = 3 ] || fail "rank $r: $lanes lanes report a failover, want 3: $line"
  ! grep -q '([02-9][0-9]* failover' <<<"$line" || fail "rank $r: a lane failed over more than once: $line"
  for k in $(grep -o '[0-9]* chunks replayed' <<<"$line" | cut -d' ' -f1); do replayed=$((replayed + k)); done
  grep -q "failover 1: $lost lost" "$log" || fail "rank $r: no failover of $lost reported"
  grep -h "exact\|failover 1:" "$log" | sed -n '1,8p'
done
[ "$replayed" -gt 0 ] || fail "no rank replayed a chunk"
echo "PASS: NCCL plugin ABI v$abi, $n ranks, 3 lanes from one thread each, SIG$sig to an appliance mid-run:" \
  "every chunk exact, no error, one failover per lane, $replayed chunks replayed ($((SECONDS - start)) s)"
