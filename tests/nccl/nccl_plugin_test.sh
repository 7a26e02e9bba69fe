#!/usr/bin/env bash
# The NCCL plugin driven as NCCL drives it, by N processes (tests/nccl/nccl_harness.cc), for one
# exported ABI version: first the CollNet path (all-reduce chunks, all-gather and reduce-scatter
# windows through an appliance), then the ncclNet path (a TCP ring: grouped receives refused,
# several receives outstanding with sends in reverse tag order).
#
#   nccl_plugin_test.sh local   ABI HARNESS PLUGIN NCCL_TEST_APPLIANCE [N]
#       N processes on loopback; the appliance is the embedded service in its own process
#       (nccl_test_appliance), bound to 127.0.8.<ABI> so that versions can run side by side.
#       Then CollNet set-up failures, 2 processes each: the appliance down (nothing listens),
#       a wrong token, and a full appliance (a second one, max 1 job, on 127.0.18.<ABI>); each
#       must end in a clean error from connect and the ncclNet must go on.
#   nccl_plugin_test.sh testbed ABI HARNESS PLUGIN SUMCASTD [N]
#       the namespace test bed (tools/testbed/testbed.sh): sumcastd on net_af_packet in the
#       appliance namespace, rank i in namespace w<i>, ncclNet over the worker veths. Needs root
#       (exit 77, skipped, otherwise). Marks, counted per frame on the switch: every contribution
#       of the CollNet run must carry DSCP 26 and ECT(0), or 34 where it is a resend
#       (SUMCAST_REPAIR_DSCP=34), which ABI 8 and 9 ask for with NCCL_IB_TC=0x6a, 10 with
#       SUMCAST_DSCP=26 SUMCAST_ECN=1, 11 and 12 with NCCL's traffic class 106 to the harness
#       over SUMCAST_DSCP=10. From ABI 10 on the ncclNet run gets traffic class 106 too: every
#       TCP segment carrying data (v11+: every segment, both ends' sockets are the communicator's)
#       DSCP 26.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"

kind=$1 abi=$2 harness=$3 plugin=$4 appliance=$5 n=${6:-3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d /tmp/nccl-plugin-test.XXXXXX)
app_pid=""
full_pid=""
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in $app_pid $full_pid; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ "$kind" = testbed ]; then tb_down; rm -rf "/var/run/dpdk/$TB_PREFIX"; fi
  if [ $rc -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; }; done
  fi
  rm -rf "$work"
  exit $rc
}
fail() { echo "FAIL: $*" >&2; exit 1; }
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"; echo >>"$work/token"
chmod 600 "$work/token"

run_in() {  # rank command...
  local r=$1; shift
  if [ "$kind" = testbed ]; then tb_exec "w$r" "$@"; else "$@"; fi
}

wait_ready() {  # log pid: the appliance's "ready <address>" line, within 30 s
  local deadline=$((SECONDS + 30))
  until grep -q '^ready ' "$1" 2>/dev/null; do
    kill -0 "$2" 2>/dev/null || fail "the test appliance exited: $(cat "$1")"
    [ $SECONDS -lt $deadline ] || fail "the test appliance did not come up"
    read -rt 0.05 <> <(:) || true
  done
}

if [ "$kind" = local ]; then
  trap cleanup EXIT
  app_ip=127.0.8.$abi
  "$appliance" --bind "$app_ip" --token-file "$work/token" >"$work/appliance.log" 2>&1 &
  app_pid=$!
  wait_ready "$work/appliance.log" "$app_pid"
  export SUMCAST_APPLIANCES; SUMCAST_APPLIANCES=$(sed -n 's/^ready //p' "$work/appliance.log")
  export SUMCAST_NCCL_IFNAME="=lo"
elif [ "$kind" = testbed ]; then
  [ "$(id -u)" = 0 ] || { echo "skipped: needs root (network namespaces)"; exit 77; }
  # shellcheck source=../../tools/testbed/testbed.sh
  source "${SUMCAST_SOURCE_DIR:-$here/../..}/tools/testbed/testbed.sh"
  tb_up "$n"
  trap cleanup EXIT
  TB_HUGE=off tb_agg_conf "$work/agg.conf" "$work/token" af_packet
  ip netns exec "$(tb_ns app)" "$appliance" -c "$work/agg.conf" >"$work/sumcastd.log" 2>&1 &
  app_pid=$!
  tb_wait_line "$work/sumcastd.log" "^sumcastd: ready" 60 "$app_pid" || fail "sumcastd did not become ready"
  export SUMCAST_APPLIANCES="$TB_MGMT_IP:4790"
else
  fail "unknown kind '$kind' (local or testbed)"
fi
export SUMCAST_TOKEN_FILE="$work/token" SUMCAST_NCCL_CONF=/dev/null

run_ranks() {  # name count harness-args...: `count` harness processes, all of which must pass
  local name=$1 count=$2; shift 2
  pids=()
  for ((r = 0; r < count; r++)); do
    run_in "$r" "$harness" --plugin "$plugin" --abi "$abi" --rank "$r" --nranks "$count" \
      --bootstrap "$work/boot-$name.sock" --timeout 150 "$@" >"$work/$name-rank$r.log" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < count; r++)); do
    wait "${pids[$r]}" || fail "$name rank $r exited with $? ($(grep -m3 FAIL "$work/$name-rank$r.log" || tail -1 "$work/$name-rank$r.log"))"
  done
  pids=()
}

# The ncclNet's TCP segments on the switch: all of them, those carrying data (an IP length over
# 100: a pure ACK, SACK blocks included, is at most 80), and of each those with DSCP $1.
tcp_marks_count() {
  tb_exec sw nft -f - <<NFT
table bridge sumcast_tcp_marks {
  counter seg_all { }
  counter seg_marked { }
  counter data_all { }
  counter data_marked { }
  chain count {
    type filter hook forward priority -10; policy accept;
    ether type ip ip protocol tcp counter name seg_all
    ether type ip ip protocol tcp ip dscp $1 counter name seg_marked
    ether type ip ip protocol tcp ip length > 100 counter name data_all
    ether type ip ip protocol tcp ip length > 100 ip dscp $1 counter name data_marked
  }
}
NFT
}
tcp_marks_check() {  # DSCP: v10 marks the sending end only, v11+ both ends
  local all marked data_all data_marked
  all=$(tb_nft_packets sw bridge sumcast_tcp_marks seg_all)
  marked=$(tb_nft_packets sw bridge sumcast_tcp_marks seg_marked)
  data_all=$(tb_nft_packets sw bridge sumcast_tcp_marks data_all)
  data_marked=$(tb_nft_packets sw bridge sumcast_tcp_marks data_marked)
  tb_exec sw nft delete table bridge sumcast_tcp_marks
  [ "$data_all" -gt 0 ] || fail "ncclNet: no TCP segment with data crossed the switch"
  [ "$data_marked" -eq "$data_all" ] ||
    fail "ncclNet: $((data_all - data_marked)) of $data_all TCP segments with data without DSCP $1"
  if [ "$abi" -ge 11 ] && [ "$marked" -ne "$all" ]; then
    fail "ncclNet: $((all - marked)) of $all TCP segments without DSCP $1 (v11+: both ends are the communicator's)"
  fi
  echo "ncclNet: $all TCP segments, $marked with DSCP $1 ($data_all of them with data, all marked)"
}

for mode in collnet net; do
  if [ "$kind" = local ]; then
    run_ranks "$mode" "$n" --mode "$mode"
  elif [ "$mode" = collnet ]; then
    tb_marks_count 26 34
    if [ "$abi" -ge 11 ]; then
      SUMCAST_DSCP=10 SUMCAST_REPAIR_DSCP=34 run_ranks "$mode" "$n" --mode "$mode" --traffic-class 106
      grep -q "NCCL's traffic class 106 marks the contributions: DSCP 26, ECT(0), resends DSCP 34" \
        "$work/$mode-rank0.log" || fail "no line from the plugin on the traffic class it took"
    elif [ "$abi" -eq 10 ]; then
      SUMCAST_DSCP=26 SUMCAST_ECN=1 SUMCAST_REPAIR_DSCP=34 run_ranks "$mode" "$n" --mode "$mode"
    else
      NCCL_IB_TC=0x6a SUMCAST_REPAIR_DSCP=34 run_ranks "$mode" "$n" --mode "$mode"
      grep -q "DSCP and ECN from NCCL_IB_TC=0x6a" "$work/$mode-rank0.log" || fail "no line from the plugin on NCCL_IB_TC"
    fi
    tb_marks_check collnet 26 34 || fail "DSCP and ECN of the contributions"
  elif [ "$abi" -ge 10 ]; then
    tcp_marks_count 26
    run_ranks "$mode" "$n" --mode "$mode" --traffic-class 106
    tcp_marks_check 26
  else
    run_ranks "$mode" "$n" --mode "$mode"
  fi
  grep -h "exact\|PASS\|net device" "$work/$mode-rank0.log"
  if [ "$mode" = collnet ]; then
    grep -q "CollNet closeColl rank 0/$n" "$work/$mode-rank0.log" || fail "no closeColl summary from the plugin"
  fi
done

if [ "$kind" = local ]; then
  # CollNet set-up failures, each case in processes of its own (the plugin reads its settings once).
  "$appliance" --bind "127.0.18.$abi" --token-file "$work/token" --max-jobs 1 >"$work/full-appliance.log" 2>&1 &
  full_pid=$!
  wait_ready "$work/full-appliance.log" "$full_pid"
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/wrong-token"; echo >>"$work/wrong-token"
  chmod 600 "$work/wrong-token"
  good=$SUMCAST_APPLIANCES
  for expect in down token full; do
    case $expect in
      down) apps="127.0.8.$abi:1" token_file=$work/token ;;  # nothing listens on port 1 there
      token) apps=$good token_file=$work/wrong-token ;;
      full) apps=$(sed -n 's/^ready //p' "$work/full-appliance.log") token_file=$work/token ;;
    esac
    SUMCAST_APPLIANCES=$apps SUMCAST_TOKEN_FILE=$token_file run_ranks "setupfail-$expect" 2 --mode setupfail \
      --expect "$expect"
    grep -h "set-up failed cleanly" "$work/setupfail-$expect-rank0.log"
    grep -q "PASS" "$work/setupfail-$expect-rank0.log" || fail "setupfail $expect: rank 0 did not pass"
  done
else
  echo "CollNet set-up failures: run by the local variant only (they need appliances of their own)"
fi
if [ "$kind" = testbed ]; then
  grep -q "SIGTERM\|stopped" "$work/sumcastd.log" || true
fi
echo "PASS: NCCL plugin ABI v$abi, $kind, $n ranks: CollNet and ncclNet exact$([ "$kind" = local ] && echo "; CollNet set-up failures clean")"
