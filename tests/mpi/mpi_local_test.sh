#!/usr/bin/env bash
# The MPI interposer on one host: an unmodified MPI program (mpi_correctness) under mpirun/mpiexec,
# 4 ranks, with the embedded summation service (sumcast_mpi_test_appliance) on a loopback address.
# Checks:
#   1. without the preload: the reference results (every check exact);
#   2. with LD_PRELOAD: every check exact, identical result hashes, and the statistics say the
#      interposer took exactly the calls a 64 KiB threshold admits (Allreduce, Iallreduce,
#      Reduce_scatter_block) and passed the rest;
#   3. the appliance down: results identical again, exactly one warning, nothing taken;
#   4. a configuration error (bad threshold): exactly one warning naming the variable;
#   5. SUMCAST_MPI_ENABLE=0: no warning, nothing taken.
#   6. with DEVICE_PROGRAM (mpi_device.c) and the fake CUDA driver it links: device buffers the CPU
#      cannot touch are staged (every call exact, each counted as staged); with
#      SUMCAST_MPI_DEVICE_BUFFERS=mpi (device memory made CPU-accessible for plain MPI) every such
#      call is passed to MPI, counted as device_buffer, still exact.
# usage: mpi_local_test.sh ompi|mpich LIBSUMCAST_MPI PROGRAM TEST_APPLIANCE [DEVICE_PROGRAM FAKE_CUDA]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
flavor=$1 lib=$2 prog=$3 appliance=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/mpi_lib.sh"
if [ "$flavor" = ompi ]; then command -v mpirun >/dev/null || { echo "skipped: no mpirun"; exit 77; }
else command -v mpiexec.mpich >/dev/null || { echo "skipped: no mpiexec.mpich"; exit 77; }; fi

work=$(mktemp -d /tmp/sumcast-mpi-local.XXXXXX)
app_pid=""
cleanup() {
  local rc=$?
  [ -n "$app_pid" ] && { exec 9>&-; wait "$app_pid" 2>/dev/null || true; }
  if [ $rc -ne 0 ]; then for f in "$work"/*.log; do echo "--- $f"; tail -40 "$f"; done; fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"; echo >>"$work/token"
chmod 600 "$work/token"
# A loopback address of our own (127.x.y.z), so parallel runs do not share port 4791.
ip_addr="127.$((1 + $$ % 200)).$(( ($$ / 200) % 250 + 1)).$((RANDOM % 200 + 20))"
port=$((20000 + RANDOM % 20000))
exec 9> >("$appliance" "$ip_addr" "$port" "$work/token" >"$work/appliance.log" 2>&1)
app_pid=$!
deadline=$((SECONDS + 20))
until grep -q '^ready' "$work/appliance.log" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "test appliance did not start"
  read -rt 0.05 <> <(:) || true
done

threshold=65536
common=(SUMCAST_MPI_THRESHOLD=$threshold SUMCAST_MPI_TOKEN_FILE="$work/token" SUMCAST_MPI_CALLS=all
        SUMCAST_MPI_REGISTER_TIMEOUT_MS=20000)
run() {  # name env... : runs the program (extra arguments in $prog_args), output in $work/name.log
  local name=$1; shift
  mpi_launch "$flavor" 4 "" -- "$@" -- ${run_prog:-"$prog" --threshold $threshold ${prog_args:-}} \
    >"$work/$name.log" 2>&1 || fail "$name: the program failed"
  grep -q "all exact" "$work/$name.log" || fail "$name: not every check exact"
}

# 1. reference
run plain SUMCAST_NOTHING=1
check_lines "$work/plain.log" >"$work/plain.checks"
n=$(wc -l <"$work/plain.checks")
[ "$n" -gt 100 ] || fail "only $n checks ran"
echo "reference: $n checks exact"

# 2. through the appliance
run preload LD_PRELOAD="$lib" SUMCAST_MPI_APPLIANCES="$ip_addr:$port" SUMCAST_MPI_STATS=1 "${common[@]}"
check_lines "$work/preload.log" | diff "$work/plain.checks" - || fail "results differ from the run without the preload"
for kind in MPI_Allreduce:allreduce MPI_Iallreduce:iallreduce MPI_Reduce_scatter_block:reduce_scatter_block; do
  taken=$(stat_calls "$work/preload.log" "${kind%%:*}")
  want=$(eligible "$work/preload.log" "${kind#*:}")
  [ -n "$taken" ] && [ "$taken" = "$want" ] || fail "${kind%%:*}: took ${taken:-none}, the threshold admits $want"
  echo "preload: ${kind%%:*} took $taken calls (= eligible), results identical"
done
grep -q "passed because:.* datatype [1-9].* op [1-9].* small [1-9]" "$work/preload.log" ||
  fail "user ops, derived types, MPI_PROD and small calls were not all passed through"
! grep -q WARNING "$work/preload.log" || fail "unexpected warning"
if [ "$flavor" = mpich ]; then  # MPIX_C_FLOAT16: MPICH cannot reduce it itself (see mpi_correctness.c)
  prog_args=--fp16-only run fp16 LD_PRELOAD="$lib" SUMCAST_MPI_APPLIANCES="$ip_addr:$port" SUMCAST_MPI_STATS=1 \
    "${common[@]}"
  taken=$(stat_calls "$work/fp16.log" MPI_Allreduce)
  [ "$taken" = "$(eligible "$work/fp16.log" allreduce)" ] || fail "fp16: took $taken calls"
  echo "preload: MPIX_C_FLOAT16 exact in $(grep -c '^check' "$work/fp16.log") checks ($taken all-reduces taken)"
fi

# 3. appliance down: nobody listens on this port
run down LD_PRELOAD="$lib" SUMCAST_MPI_APPLIANCES="$ip_addr:$((port + 1))" SUMCAST_MPI_STATS=1 "${common[@]}"
check_lines "$work/down.log" | diff "$work/plain.checks" - || fail "appliance down: results differ"
w=$(grep -c "sumcast-mpi: WARNING" "$work/down.log" || true)
[ "$w" = 1 ] || fail "appliance down: $w warnings, want exactly 1"
grep "sumcast-mpi: WARNING" "$work/down.log"
[ "$(stat_calls "$work/down.log" MPI_Allreduce)" = 0 ] || fail "appliance down: calls were taken"

# 4. a configuration error
run badcfg LD_PRELOAD="$lib" SUMCAST_MPI_APPLIANCES="$ip_addr:$port" SUMCAST_MPI_THRESHOLD=12Q \
  SUMCAST_MPI_TOKEN_FILE="$work/token"
w=$(grep -c "sumcast-mpi: WARNING" "$work/badcfg.log" || true)
[ "$w" = 1 ] || fail "configuration error: $w warnings, want exactly 1"
grep -q "SUMCAST_MPI_THRESHOLD='12Q'" "$work/badcfg.log" || fail "the warning does not name the variable"
check_lines "$work/badcfg.log" | diff "$work/plain.checks" - || fail "configuration error: results differ"

# 5. disabled
run off LD_PRELOAD="$lib" SUMCAST_MPI_ENABLE=0 SUMCAST_MPI_STATS=1
! grep -q "sumcast-mpi: WARNING" "$work/off.log" || fail "SUMCAST_MPI_ENABLE=0 warned"
[ "$(stat_calls "$work/off.log" MPI_Allreduce)" = 0 ] || fail "SUMCAST_MPI_ENABLE=0 took calls"
check_lines "$work/off.log" | diff "$work/plain.checks" - || fail "disabled: results differ"
# 6. CUDA device buffers
if [ -n "${5:-}" ]; then
  dev_env=(LD_PRELOAD="$lib" SUMCAST_MPI_APPLIANCES="$ip_addr:$port" SUMCAST_MPI_STATS=1 SUMCAST_MPI_CUDA_DRIVER="$6"
           "${common[@]}")
  run_prog=$5 run device "${dev_env[@]}"
  calls=$(sed -n 's/^# calls \([0-9]*\)/\1/p' "$work/device.log")
  staged=$(sed -n 's/.*device buffers staged through host memory: \([0-9]*\) calls.*/\1/p' "$work/device.log")
  [ -n "$calls" ] && [ "${staged:-0}" = "$calls" ] || fail "device: ${staged:-no} calls staged, want $calls"
  echo "device buffers: $calls calls staged through host memory, every result exact"
  run_prog=$5 run device_mpi "${dev_env[@]}" SUMCAST_MPI_DEVICE_BUFFERS=mpi FAKE_CUDA_ACCESSIBLE=1
  passed=$(sed -n 's/.*passed because:.* device_buffer \([0-9]*\).*/\1/p' "$work/device_mpi.log")
  [ "${passed:-0}" = "$calls" ] || fail "SUMCAST_MPI_DEVICE_BUFFERS=mpi: ${passed:-no} calls passed, want $calls"
  ! grep -q "device buffers staged" "$work/device_mpi.log" || fail "SUMCAST_MPI_DEVICE_BUFFERS=mpi staged calls"
  echo "device buffers with SUMCAST_MPI_DEVICE_BUFFERS=mpi: $passed calls passed to MPI, every result exact"
fi
echo "PASS: $flavor: identical results with and without the interposer; one warning when the appliance is down"
