#!/usr/bin/env bash
# The interposer of the wrong MPI flavour preloaded into an MPI program (on one host, 2 ranks):
# the program runs to the end with results identical to a run without the preload, and the job
# prints exactly one warning that names both flavours (the interposer passes every call on).
# usage: mpi_flavour_test.sh ompi|mpich WRONG_LIBSUMCAST_MPI PROGRAM [PROGRAM_ARGS...]
#   ompi|mpich: the flavour of the program's own MPI (its launcher is used)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
flavor=$1 lib=$2 prog=$3
shift 3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/mpi_lib.sh"
if [ "$flavor" = ompi ]; then command -v mpirun >/dev/null || { echo "skipped: no mpirun"; exit 77; }
else command -v mpiexec.mpich >/dev/null || { echo "skipped: no mpiexec.mpich"; exit 77; }; fi
work=$(mktemp -d /tmp/sumcast-mpi-flavour.XXXXXX)
cleanup() {
  local rc=$?
  if [ $rc -ne 0 ]; then for f in "$work"/*.log; do echo "--- $f"; tail -40 "$f"; done; fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The appliance address is never used: the interposer must not get as far as reading it.
for name in plain wrong; do
  env=(SUMCAST_NOTHING=1)
  [ $name = wrong ] && env=(LD_PRELOAD="$lib" SUMCAST_MPI_APPLIANCES=127.0.0.1:9 SUMCAST_MPI_STATS=1)
  mpi_launch "$flavor" 2 "" -- "${env[@]}" -- "$prog" "$@" >"$work/$name.log" 2>&1 || fail "$name: the program failed"
  grep -q "all exact" "$work/$name.log" || fail "$name: not every check exact"
done
check_lines "$work/wrong.log" | diff <(check_lines "$work/plain.log") - || fail "results differ from MPI's"
w=$(grep -c "sumcast-mpi: WARNING" "$work/wrong.log" || true)
[ "$w" = 1 ] || fail "$w warnings, want exactly 1"
grep -q "is built for .* but this process's MPI library .* is " "$work/wrong.log" || fail "the warning names no flavours"
! grep -q "sumcast-mpi: *MPI_Allreduce *taken" "$work/wrong.log" || fail "the interposer acted (statistics printed)"
grep "sumcast-mpi: WARNING" "$work/wrong.log"
echo "PASS: $(basename "$lib") in a $flavor program ($(basename "$prog")): $(check_lines "$work/plain.log" | wc -l)" \
  "checks identical to MPI's, one warning"
