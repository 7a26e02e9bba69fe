#!/usr/bin/env bash
# The interposer library exports exactly the MPI functions it defines (no C++ or worker-library
# symbol leaks into the program's namespace) and leaves no MPI symbol for the dynamic linker to
# resolve at load time: the MPI library is found at the first call (mpi_lib.h), so the library
# loads into programs that open MPI later (Python) and into programs of the other MPI flavour.
#   usage: mpi_symbols_test.sh LIBSUMCAST_MPI
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
lib=$1
want="MPI_Allreduce MPI_Comm_disconnect MPI_Comm_free MPI_Finalize MPI_Iallreduce MPI_Reduce_scatter_block
MPI_Request_free MPI_Request_get_status MPI_Test MPI_Testall MPI_Testany MPI_Testsome MPI_Wait MPI_Waitall
MPI_Waitany MPI_Waitsome"
got=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort)
exp=$(tr ' ' '\n' <<<"$want" | grep . | sort)
if [ "$got" != "$exp" ]; then
  echo "FAIL: exported symbols differ:"; diff <(echo "$exp") <(echo "$got"); exit 1
fi
# No MPI symbol at all among the undefined ones (Open MPI's predefined handles are data symbols:
# one of them left undefined kills every program that has not loaded MPI yet).
mpi=$(nm -D --undefined-only "$lib" | awk '{print $NF}' | grep -E '^(P?MPI_|MPIX?_|ompi_|OMPI_|MPIR_|mca_|opal_)' || true)
[ -z "$mpi" ] || { echo "FAIL: MPI symbols left for the dynamic linker:"; echo "$mpi"; exit 1; }
# Undefined symbols that are not versioned (libc, libstdc++, ...) must be ISA-L's (linked
# statically into the worker library's kernels), hwloc's (the topology library reads
# SUMCAST_MPI_TOPOLOGY files, hwloc XML among them; libhwloc is a NEEDED library, as it is of
# Open MPI and MPICH), libxml2's thread-local error hooks (NCCL XML topology files; libxml2 is
# NEEDED, and hwloc uses it too) or, in a sanitizer build, the sanitizer runtime's, which the
# executable provides.
odd=$(nm -D --undefined-only "$lib" | awk '$1 == "U" && $2 !~ /@/ {print $2}' |
      grep -Ev '^(crc32_|isal_|hwloc_|__xmlStructuredError|__(asan|ubsan|lsan|tsan|sanitizer|sancov)_)' || true)
[ -z "$odd" ] || { echo "FAIL: unexpected unresolved symbols:"; echo "$odd"; exit 1; }
# No MPI library is linked in: the one the process loaded provides PMPI_*.
if readelf -d "$lib" | grep -E 'NEEDED.*(libmpi|libmpich)'; then echo "FAIL: links an MPI library"; exit 1; fi
echo "PASS: $(wc -l <<<"$got") MPI symbols exported, nothing else"
