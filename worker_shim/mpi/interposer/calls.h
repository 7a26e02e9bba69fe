// The MPI functions the interposer defines, in one list, with signatures that do not depend on
// the MPI library's ABI.
//
// Why ABI-neutral signatures: a preloaded libsumcast_mpi.so may find itself in a process whose MPI
// library is of the other flavour (an MPICH program, or a Python interpreter that opened Open MPI
// after start-up when libsumcast_mpich.so was preloaded). It must then pass every call on
// unchanged. Open MPI's handles are pointers and MPICH's are ints; declared with one flavour's
// types, a handle of the other flavour would be truncated or widened on the way through. Here
// every handle is a 64-bit integer (what one argument register carries on x86-64 and AArch64), so
// the exported function (entry.cc, which includes no mpi.h) forwards the caller's bits as they
// came, and converts to the flavour's types only when this build's flavour is the process's
// (calls.cc).
#pragma once

#include <cstdint>

namespace sumcast::mpi {

using Handle = uintptr_t;  // MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request by value, of either flavour

// X(name, parameters, arguments) for each exported MPI_<name>: the version script
// (libsumcast_mpi.map) and tests/mpi/mpi_symbols_test.sh list the same names.
#define SUMCAST_MPI_INTERPOSED(X)                                                                                      \
  X(Allreduce, (const void* send, void* recv, int count, Handle type, Handle op, Handle comm),                         \
    (send, recv, count, type, op, comm))                                                                               \
  X(Iallreduce, (const void* send, void* recv, int count, Handle type, Handle op, Handle comm, void* request),         \
    (send, recv, count, type, op, comm, request))                                                                      \
  X(Reduce_scatter_block, (const void* send, void* recv, int count, Handle type, Handle op, Handle comm),              \
    (send, recv, count, type, op, comm))                                                                               \
  X(Wait, (void* request, void* status), (request, status))                                                            \
  X(Test, (void* request, int* flag, void* status), (request, flag, status))                                           \
  X(Waitall, (int count, void* requests, void* statuses), (count, requests, statuses))                                 \
  X(Testall, (int count, void* requests, int* flag, void* statuses), (count, requests, flag, statuses))                \
  X(Waitany, (int count, void* requests, int* index, void* status), (count, requests, index, status))                  \
  X(Testany, (int count, void* requests, int* index, int* flag, void* status), (count, requests, index, flag, status)) \
  X(Waitsome, (int count, void* requests, int* outcount, int* indices, void* statuses),                                \
    (count, requests, outcount, indices, statuses))                                                                    \
  X(Testsome, (int count, void* requests, int* outcount, int* indices, void* statuses),                                \
    (count, requests, outcount, indices, statuses))                                                                    \
  X(Request_get_status, (Handle request, int* flag, void* status), (request, flag, status))                            \
  X(Request_free, (void* request), (request))                                                                          \
  X(Comm_free, (void* comm), (comm))                                                                                   \
  X(Comm_disconnect, (void* comm), (comm))                                                                             \
  X(Finalize, (void), ())

// The interposer's implementation of each (calls.cc): only called when the process's MPI library
// is this build's flavour.
namespace calls {
#define SUMCAST_MPI_DECLARE_CALL(name, params, args) int name params;
SUMCAST_MPI_INTERPOSED(SUMCAST_MPI_DECLARE_CALL)
#undef SUMCAST_MPI_DECLARE_CALL
}  // namespace calls

// The MPI library's own PMPI_<name> for each, with the same neutral signatures: what a process of
// the other flavour gets, unchanged. A member is null when the library lacks the function.
struct ForwardTable {
#define SUMCAST_MPI_FORWARD_POINTER(name, params, args) int(*name) params = nullptr;
  SUMCAST_MPI_INTERPOSED(SUMCAST_MPI_FORWARD_POINTER)
#undef SUMCAST_MPI_FORWARD_POINTER
};

// How this process's MPI library relates to this build. Decided on the first call into the
// interposer (the MPI library may have been opened after start-up: Python, dlopen), then fixed.
enum class Binding : uint8_t {
  kNative,   // the library is this build's flavour: the interposer acts
  kForeign,  // the other flavour: every call goes to forward_table() unchanged (one warning)
  kNone,     // no MPI library is loaded at all: every call fails with an error message
};
Binding binding();
const ForwardTable& forward_table();
// kNone: prints "MPI_<name> called but no MPI library is loaded" once and returns an error code.
int no_mpi_library(const char* function);

}  // namespace sumcast::mpi
