// The MPI functions libsumcast_mpi.so / libsumcast_mpich.so export (the version script exports
// exactly these). Compiled without any mpi.h: each takes its arguments with ABI-neutral types
// (calls.h) and either runs the interposer (calls.cc) when the process's MPI library is this
// build's flavour, or passes the caller's arguments, bit for bit, to the library's PMPI_ function.
#include "calls.h"

using sumcast::mpi::Handle;

#define SUMCAST_MPI_EXPORT extern "C" __attribute__((visibility("default")))

#define SUMCAST_MPI_ENTRY(name, params, args)                \
  SUMCAST_MPI_EXPORT int MPI_##name params {                 \
    using sumcast::mpi::Binding;                             \
    switch (sumcast::mpi::binding()) {                       \
      case Binding::kNative:                                 \
        return sumcast::mpi::calls::name args;               \
      case Binding::kForeign:                                \
        if (sumcast::mpi::forward_table().name != nullptr) { \
          return sumcast::mpi::forward_table().name args;    \
        }                                                    \
        break;                                               \
      case Binding::kNone:                                   \
        break;                                               \
    }                                                        \
    return sumcast::mpi::no_mpi_library(#name);              \
  }
SUMCAST_MPI_INTERPOSED(SUMCAST_MPI_ENTRY)
