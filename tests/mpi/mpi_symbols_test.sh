#!/usr/bin/env bash
# The interposer library exports exactly the MPI functions it defines (no C++ or worker-library
# symbol leaks into the program's namespace) and leaves only MPI's own symbols unresolved for the
# MPI library to provide.   usage: mpi_symbols_test.sh LIBSUMCAST_MPI
set -euo pipefail
lib=$1
want="MPI_Allreduce MPI_Comm_disconnect MPI_Comm_free MPI_Finalize MPI_Iallreduce MPI_Reduce_scatter_block
MPI_Request_free MPI_Request_get_status MPI_Test MPI_Testall MPI_Testany MPI_Testsome MPI_Wait MPI_Waitall
MPI_Waitany MPI_Waitsome"
got=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort)
exp=$(tr ' ' '\n' <<<"$want" | grep . | sort)
if [ "$got" != "$exp" ]; then
  echo "FAIL: exported symbols differ:"; diff <(echo "$exp") <(echo "$got"); exit 1
fi
# Undefined symbols that are neither versioned (libc, libstdc++, ...) nor weak must be MPI's (or,
# in a sanitizer build, the sanitizer runtime's, which the executable provides).
odd=$(nm -D --undefined-only "$lib" | awk '$1 == "U" && $2 !~ /@/ {print $2}' |
      grep -Ev '^(PMPI_|MPI_|ompi_|OMPI_|crc32_|isal_|__(asan|ubsan|lsan|tsan|sanitizer|sancov)_)' || true)
[ -z "$odd" ] || { echo "FAIL: unexpected unresolved symbols:"; echo "$odd"; exit 1; }
# No MPI library is linked in: the program's own one provides PMPI_*.
if readelf -d "$lib" | grep -E 'NEEDED.*(libmpi|libmpich)'; then echo "FAIL: links an MPI library"; exit 1; fi
echo "PASS: $(wc -l <<<"$got") MPI symbols exported, nothing else"
