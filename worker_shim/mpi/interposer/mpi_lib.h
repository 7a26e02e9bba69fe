// The process's MPI library, found at run time. Every interposer source includes this header
// instead of <mpi.h>.
//
// The interposer links no MPI library and leaves no MPI symbol for the dynamic linker to resolve
// when it is loaded: a preloaded library with an unresolved data symbol (Open MPI's predefined
// handles are addresses of the library's objects, e.g. ompi_mpi_op_sum) kills a program that
// opens MPI only later, as Python does (mpi4py, Horovod, PyTorch's MPI backend). Instead:
// - PMPI functions are called through `pmpi`, a table looked up in the MPI library on the first
//   call into the interposer (mpi_lib.cc: the library that defines PMPI_Init, in the global
//   scope or among every loaded object, so a library opened RTLD_LOCAL is found too);
// - with Open MPI, each predefined handle (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) is looked up
//   by its symbol name in the same library at its first use (OMPI_PREDEFINED_GLOBAL below); with
//   MPICH they are integer constants already.
// tests/mpi/mpi_symbols_test.sh checks that the built libraries leave no MPI symbol unresolved.
#pragma once

#include <mpi.h>

namespace sumcast::mpi {

#define SUMCAST_PMPI_FUNCTIONS(X) \
  X(Abort)                        \
  X(Allreduce)                    \
  X(Barrier)                      \
  X(Bcast)                        \
  X(Comm_call_errhandler)         \
  X(Comm_create_keyval)           \
  X(Comm_disconnect)              \
  X(Comm_dup)                     \
  X(Comm_free)                    \
  X(Comm_get_attr)                \
  X(Comm_rank)                    \
  X(Comm_set_attr)                \
  X(Comm_set_errhandler)          \
  X(Comm_size)                    \
  X(Comm_split)                   \
  X(Comm_split_type)              \
  X(Comm_test_inter)              \
  X(Error_string)                 \
  X(Finalize)                     \
  X(Finalized)                    \
  X(Grequest_complete)            \
  X(Grequest_start)               \
  X(Iallreduce)                   \
  X(Info_create)                  \
  X(Info_free)                    \
  X(Info_set)                     \
  X(Initialized)                  \
  X(Reduce)                       \
  X(Reduce_scatter_block)         \
  X(Request_free)                 \
  X(Request_get_status)           \
  X(Status_set_cancelled)         \
  X(Status_set_elements)          \
  X(Test)                         \
  X(Testall)                      \
  X(Testany)                      \
  X(Testsome)                     \
  X(Type_size)                    \
  X(Wait)                         \
  X(Waitall)                      \
  X(Waitany)                      \
  X(Waitsome)                     \
  X(Win_allocate_shared)          \
  X(Win_free)                     \
  X(Win_lock_all)                 \
  X(Win_set_errhandler)           \
  X(Win_shared_query)             \
  X(Win_sync)                     \
  X(Win_unlock_all)

// PMPI_<name> of the process's MPI library, with this flavour's types. Filled before any
// interposer code runs with binding() == Binding::kNative (calls.h); never changed afterwards.
struct Pmpi {
#define SUMCAST_PMPI_POINTER(name) decltype(&::PMPI_##name) name = nullptr;
  SUMCAST_PMPI_FUNCTIONS(SUMCAST_PMPI_POINTER)
#undef SUMCAST_PMPI_POINTER
};
extern Pmpi pmpi;

// The address of the MPI library's object `symbol` (Open MPI's predefined handles). Aborts with
// a message when the library lacks it: a native binding found every handle the build uses.
void* mpi_object(const char* symbol);

}  // namespace sumcast::mpi

#ifdef OPEN_MPI
// Each use site looks its handle up once (a function-local static; thread-safe), after the
// binding: every use is inside an interposed call.
#undef OMPI_PREDEFINED_GLOBAL
#define OMPI_PREDEFINED_GLOBAL(type, global)                                 \
  (static_cast<type>([]() -> void* {                                         \
    static void* const sumcast_handle = ::sumcast::mpi::mpi_object(#global); \
    return sumcast_handle;                                                   \
  }()))
#endif
