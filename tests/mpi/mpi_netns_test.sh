#!/usr/bin/env bash
# The MPI interposer across emulated hosts: the namespace test bed (tools/testbed), sumcastd on
# the appliance namespace's veth (net_af_packet), and an unmodified MPI program (mpi_correctness)
# with 3 ranks on each of 2 worker namespaces, launched by mpirun/mpiexec through the netns agent.
# Checks, each against a run without the preload (identical result hashes, every check exact):
#   1. LD_PRELOAD with the intra-node path (shared-memory reduce-scatter per host, each local rank
#      a member of its own cross-host job; pieces of 64 KiB so calls span many pieces): the
#      interposer took exactly the calls the threshold admits, some of them intra-node;
#   2. LD_PRELOAD with SUMCAST_MPI_TOPOLOGY: each namespace "is" a host of two NUMA nodes (an NCCL
#      topology file written here, the first half of the local ranks on NUMA0): with two or more
#      ranks on some node the reduce runs within each node first (verbose says so, the statistics
#      count the stages and the bytes read across nodes), else in one stage; results identical;
#   3. LD_PRELOAD with SUMCAST_MPI_INTRANODE=0 (every rank a member of one job), and with
#      SUMCAST_MPI_DSCP=26, _ECN=1, _REPAIR_DSCP=34: every contribution crossing the switch is
#      ECT(0) with DSCP 26, or 34 where it is a resend (nftables counters on the bridge);
#   4. sumcastd stopped: results identical, exactly one warning.
# MPICH additionally checks MPIX_C_FLOAT16 in run 1 (see mpi_correctness.c).
# PROGRAM is mpi_correctness or any program that prints the same lines (mpi_python.py: a Python
# program that opens MPI at run time); PER_HOST (default 3) ranks per namespace; PROGRAM_ARGS
# are passed to every run of PROGRAM.
# usage: mpi_netns_test.sh ompi|mpich LIBSUMCAST_MPI PROGRAM SUMCASTD [PER_HOST [PROGRAM_ARGS...]]
#        (root; exit 77 otherwise)
# MPI_NETNS_RUNS (default "intranode numa flat down") picks the runs after the reference.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
flavor=$1 lib=$2 prog=$3 sumcastd=$4
per_host=${5:-3}
shift $(($# < 5 ? $# : 5))
fixed_args=("$@")
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (network namespaces)"; exit 77; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=${SUMCAST_SOURCE_DIR:-$here/../..}
source "$root/tools/testbed/testbed.sh"
source "$here/mpi_lib.sh"
if [ "$flavor" = ompi ]; then command -v mpirun >/dev/null || { echo "skipped: no mpirun"; exit 77; }
else command -v mpiexec.mpich >/dev/null || { echo "skipped: no mpiexec.mpich"; exit 77; }; fi

HOSTS=2 PER_HOST=$per_host
NP=$((HOSTS * PER_HOST))
work=$(mktemp -d /tmp/sumcast-mpi-netns.XXXXXX)
app_pid=""
cleanup() {
  local rc=$?
  [ -n "$app_pid" ] && { kill "$app_pid" 2>/dev/null; wait "$app_pid" 2>/dev/null || true; }
  tb_down
  rm -rf "/var/run/dpdk/$TB_PREFIX"
  if [ $rc -ne 0 ]; then for f in "$work"/*.log; do echo "--- $f"; tail -40 "$f"; done; fi
  rm -rf "$work" /tmp/sumcast-mpi-hosts.*
  exit $rc
}
fail() { echo "FAIL: $*" >&2; exit 1; }

tb_up $HOSTS
trap cleanup EXIT
export TB_PREFIX
MPI_AGENT=$root/tools/testbed/netns-agent
MPI_CIDR=$TB_SUBNET.0/24
MPI_IFACE=$TB_WORKER_IF
MPI_LAUNCH_NS=$(tb_ns w0)
hosts=""
for ((i = 0; i < HOSTS; i++)); do hosts+="${hosts:+,}w$i:$PER_HOST"; done

tb_token "$work/token"
TB_JOB_TIMEOUT_MS=30000 tb_agg_conf "$work/agg.conf" "$work/token" af_packet "max_jobs = 64;"
# Not through tb_exec: `&` on a shell function forks a subshell, and $! would be the subshell's pid.
ip netns exec "$(tb_ns app)" "$sumcastd" -c "$work/agg.conf" >"$work/sumcastd.log" 2>&1 &
app_pid=$!
tb_wait_line "$work/sumcastd.log" "^sumcastd: ready" 60 "$app_pid" || fail "sumcastd did not become ready"

threshold=65536
common=(SUMCAST_MPI_APPLIANCES="$TB_MGMT_IP:4790" SUMCAST_MPI_TOKEN_FILE="$work/token" SUMCAST_MPI_BIND="$TB_WORKER_IF"
        SUMCAST_MPI_THRESHOLD=$threshold SUMCAST_MPI_CALLS=all SUMCAST_MPI_STATS=1 SUMCAST_MPI_SHM_BYTES=64K
        SUMCAST_MPI_REGISTER_TIMEOUT_MS=30000)
run() {  # name env... : output in $work/name.log (extra program arguments in $prog_args)
  local name=$1 try; shift
  for try in 1 2 3; do
    mpi_launch "$flavor" $NP "$hosts" -- "$@" -- "$prog" "${fixed_args[@]}" --threshold $threshold ${prog_args:-} \
      >"$work/$name.log" 2>&1 && break
    # mpirun's daemons now and then fail to connect back over the namespaces before any rank
    # started (a loaded host): launch once more; a program that started and failed is a failure.
    grep -q "^# world" "$work/$name.log" || [ $try = 3 ] || { echo "$name: MPI did not start, once more"; continue; }
    fail "$name: the program failed"
  done
  grep -q "all exact" "$work/$name.log" || fail "$name: not every check exact"
}
same_as_plain() { check_lines "$work/$1.log" | diff "$work/plain.checks" - || fail "$1: results differ from MPI's"; }
took_eligible() {
  local kind taken want
  for kind in MPI_Allreduce:allreduce MPI_Iallreduce:iallreduce MPI_Reduce_scatter_block:reduce_scatter_block; do
    taken=$(stat_calls "$work/$1.log" "${kind%%:*}")
    want=$(eligible "$work/$1.log" "${kind#*:}")
    # (the statistics leave out a call kind the program never made)
    [ "${taken:-0}" = "$want" ] || fail "$1: ${kind%%:*} took ${taken:-none}, the threshold admits $want"
  done
  grep -q "^sumcast-mpi: statistics" "$work/$1.log" || fail "$1: no statistics printed"
  ! grep -q "sumcast-mpi: WARNING" "$work/$1.log" || fail "$1: unexpected warning"
  echo "$1: took every eligible call (Allreduce $(stat_calls "$work/$1.log" MPI_Allreduce), Iallreduce" \
    "$(stat_calls "$work/$1.log" MPI_Iallreduce), Reduce_scatter_block $(stat_calls "$work/$1.log" \
    MPI_Reduce_scatter_block)), results identical to MPI's"
}

run plain SUMCAST_NOTHING=1
grep -q "^# world $NP hosts $HOSTS ranks-per-host $PER_HOST" "$work/plain.log" ||
  fail "ranks are not spread $PER_HOST per host over $HOSTS namespaces: $(grep '^# world' "$work/plain.log")"
check_lines "$work/plain.log" >"$work/plain.checks"
echo "reference: $(wc -l <"$work/plain.checks") checks exact, $NP ranks on $HOSTS namespaces"

runs=" ${MPI_NETNS_RUNS:-intranode numa flat down} "
if [[ $runs == *" intranode "* ]]; then
run intranode LD_PRELOAD="$lib" "${common[@]}"
same_as_plain intranode
took_eligible intranode
intra=$(sed -n 's/.*intra-node calls \([0-9]*\).*/\1/p' "$work/intranode.log")
[ "${intra:-0}" -gt 0 ] || fail "no call took the intra-node path"
echo "intranode: $intra calls reduced in shared memory per host first"
if [ "$flavor" = mpich ] && [[ $(basename "$prog") == mpi_correctness* ]]; then
  prog_args=--fp16-only run fp16 LD_PRELOAD="$lib" "${common[@]}"
  echo "fp16: MPIX_C_FLOAT16 exact in $(grep -c '^check' "$work/fp16.log") checks"
fi
fi

if [[ $runs == *" numa "* ]]; then
  # The host of every namespace: PER_HOST GPUs (one per local rank) on two NUMA nodes.
  {
    echo '<system version="1">'
    for node in 0 1; do
      echo "  <cpu numaid=\"$node\" arch=\"x86_64\">"
      for ((g = 0; g < PER_HOST; g++)); do
        [ $((g < (PER_HOST + 1) / 2 ? 0 : 1)) = $node ] || continue
        printf '    <pci busid="0000:%02x:00.0" class="0x030200" vendor="0x10de" device="0x2236" link_speed="16 GT/s" link_width="16"/>\n' $((16 + g))
      done
      echo "  </cpu>"
    done
    echo '</system>'
  } >"$work/host-topology.xml"
  run numa LD_PRELOAD="$lib" "${common[@]}" SUMCAST_MPI_TOPOLOGY="$work/host-topology.xml" SUMCAST_MPI_VERBOSE=1
  same_as_plain numa
  took_eligible numa
  plan=$(grep -m1 -o "plan: [^)]*)" "$work/numa.log" || true)
  [ -n "$plan" ] || fail "numa: the intra-node plan was not printed"
  line=$(grep "intra-node plan:" "$work/numa.log" || true)
  [ -n "$line" ] || fail "numa: no intra-node plan statistics"
  within=$(sed -n 's/.*intra-node plan: \([0-9]*\) reduces within.*/\1/p' <<<"$line")
  if [ "$PER_HOST" -ge 3 ]; then
    [[ $plan == "plan: within NUMA nodes first"* ]] || fail "numa: $PER_HOST ranks on two nodes, but $plan"
    [ "${within:-0}" -gt 0 ] || fail "numa: the reduce within NUMA nodes never ran: $line"
  else
    [[ $plan == "plan: one stage"* ]] || fail "numa: one rank per node needs no first stage, but $plan"
    [ "${within:-1}" = 0 ] || fail "numa: one rank per node, yet $line"
  fi
  grep -q "across NUMA nodes (SMP)" <<<"$line" || fail "numa: no SMP bytes in $line"
  echo "numa: $plan; $line"
fi

if [[ $runs == *" flat "* ]]; then
  # With SUMCAST_MPI_DSCP, _ECN and _REPAIR_DSCP: every contribution that crosses the switch
  # carries DSCP 26 and ECT(0), or DSCP 34 and ECT(0) (a resend), and most DSCP 26.
  tb_marks_count 26 34
  run flat LD_PRELOAD="$lib" "${common[@]}" SUMCAST_MPI_INTRANODE=0 SUMCAST_MPI_DSCP=26 SUMCAST_MPI_ECN=1 \
    SUMCAST_MPI_REPAIR_DSCP=34
  same_as_plain flat
  took_eligible flat
  tb_marks_check flat 26 34 || fail "flat: DSCP and ECN of the contributions"
fi
[[ $runs == *" down "* ]] || { echo "PASS (runs:$runs)"; exit 0; }

kill -INT "$app_pid"
wait "$app_pid" 2>/dev/null || true
app_pid=""
tail -20 "$work/sumcastd.log" | grep -i -E "drop|job|rx|tx" | sed 's/^/sumcastd at exit: /' || true
run down LD_PRELOAD="$lib" "${common[@]}" SUMCAST_MPI_CONNECT_TIMEOUT_MS=2000
same_as_plain down
w=$(grep -c "sumcast-mpi: WARNING" "$work/down.log" || true)
[ "$w" = 1 ] || fail "appliance down: $w warnings, want exactly 1"
grep "sumcast-mpi: WARNING" "$work/down.log"
echo "PASS: $flavor, $(basename "$prog") across $HOSTS namespaces x $PER_HOST ranks: identical results, one warning with the appliance down"
