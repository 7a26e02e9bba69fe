// Finding the process's MPI library and binding to it (mpi_lib.h, calls.h).
#include "mpi_lib.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "calls.h"

namespace sumcast::mpi {

Pmpi pmpi;

namespace {

#ifdef OPEN_MPI
constexpr bool kBuiltForOpenMpi = true;
#else
constexpr bool kBuiltForOpenMpi = false;
#endif

struct Found {
  void* handle = nullptr;  // dlopen handle of the object that defines PMPI_Init
  std::string path;
};

// The object that defines the symbol at `address`, as a handle of its own (so that dlsym on it
// searches that library first, not the global scope where this interposer would answer).
Found object_of(void* address) {
  Found f;
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return f;
  f.handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (f.handle == nullptr) {
    // The executable itself (MPI linked statically and exported): its handle is dlopen(NULL).
    void* self = dlopen(nullptr, RTLD_LAZY);
    if (self != nullptr && dlsym(self, "PMPI_Init") == address) f.handle = self;
  }
  if (f.handle != nullptr) f.path = info.dli_fname;
  return f;
}

int find_in_loaded_object(struct dl_phdr_info* info, size_t, void* data) {
  auto* found = static_cast<Found*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  void* h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return 0;
  void* sym = dlsym(h, "PMPI_Init");
  dlclose(h);
  if (sym == nullptr) return 0;
  *found = object_of(sym);
  return found->handle != nullptr ? 1 : 0;
}

// The library a program linked with (or opened with RTLD_GLOBAL) is in the global scope; one
// opened RTLD_LOCAL (a Python extension module's dependency) only among the loaded objects.
Found find_mpi_library() {
  Found f = object_of(dlsym(RTLD_DEFAULT, "PMPI_Init"));
  if (f.handle == nullptr) dl_iterate_phdr(find_in_loaded_object, &f);
  return f;
}

std::string this_library() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&find_mpi_library), &info) == 0 || info.dli_fname == nullptr) {
    return "the Sumcast MPI interposer";
  }
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash != nullptr ? slash + 1 : info.dli_fname;
}

// One message per job: printed by the process the launcher calls rank 0 (or by every process
// when no launcher variable says).
bool launcher_rank_zero() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MPI_LOCALRANKID"}) {
    const char* v = std::getenv(name);
    if (v != nullptr) return std::strcmp(v, "0") == 0;
  }
  return true;
}

struct State {
  Binding binding = Binding::kNone;
  ForwardTable forward;
  void* handle = nullptr;
};

State bind() {
  State s;
  const Found lib = find_mpi_library();
  if (lib.handle == nullptr) return s;
  s.handle = lib.handle;
#define SUMCAST_MPI_RESOLVE_FORWARD(name, params, args) \
  s.forward.name = reinterpret_cast<decltype(s.forward.name)>(dlsym(lib.handle, "PMPI_" #name));
  SUMCAST_MPI_INTERPOSED(SUMCAST_MPI_RESOLVE_FORWARD)
#undef SUMCAST_MPI_RESOLVE_FORWARD

  // Open MPI's handles are its objects; an MPICH-ABI library (MPICH, Intel MPI, MVAPICH) has none.
  const bool is_open_mpi = dlsym(lib.handle, "ompi_mpi_comm_world") != nullptr;
  std::string missing;
  if (is_open_mpi == kBuiltForOpenMpi) {
#define SUMCAST_PMPI_RESOLVE(name)                                                     \
  pmpi.name = reinterpret_cast<decltype(pmpi.name)>(dlsym(lib.handle, "PMPI_" #name)); \
  if (pmpi.name == nullptr && missing.empty()) missing = "PMPI_" #name;
    SUMCAST_PMPI_FUNCTIONS(SUMCAST_PMPI_RESOLVE)
#undef SUMCAST_PMPI_RESOLVE
    if (missing.empty()) {
      s.binding = Binding::kNative;
      return s;
    }
  }
  s.binding = Binding::kForeign;
  if (launcher_rank_zero()) {
    const char* mine = kBuiltForOpenMpi ? "Open MPI" : "MPICH-ABI libraries";
    const char* theirs = is_open_mpi ? "Open MPI" : "an MPICH-ABI library";
    const char* other = kBuiltForOpenMpi ? "libsumcast_mpich.so" : "libsumcast_mpi.so";
    if (missing.empty()) {
      std::fprintf(stderr,
                   "sumcast-mpi: WARNING: %s is built for %s, but this process's MPI library %s is %s; every "
                   "call goes to MPI unchanged (preload %s for this MPI)\n",
                   this_library().c_str(), mine, lib.path.c_str(), theirs, other);
    } else {
      std::fprintf(stderr,
                   "sumcast-mpi: WARNING: this process's MPI library %s lacks %s; every call goes to MPI "
                   "unchanged\n",
                   lib.path.c_str(), missing.c_str());
    }
    std::fflush(stderr);
  }
  return s;
}

const State& state() {
  static const State s = bind();
  return s;
}

}  // namespace

Binding binding() { return state().binding; }

const ForwardTable& forward_table() { return state().forward; }

int no_mpi_library(const char* function) {
  static std::atomic<bool> printed{false};
  if (!printed.exchange(true)) {
    std::fprintf(stderr, "sumcast-mpi: ERROR: MPI_%s called, but no MPI library is loaded in this process\n", function);
    std::fflush(stderr);
  }
  return MPI_ERR_OTHER;
}

void* mpi_object(const char* symbol) {
  // The global scope first: an executable linked with the MPI library holds copies of the
  // library's objects that it references (copy relocations), and the library uses those copies;
  // the library's own definition, which dlsym on its handle returns, is then unused. A library
  // opened RTLD_LOCAL is in no global scope: its handle then.
  void* p = nullptr;
  if (state().binding == Binding::kNative) {
    p = dlsym(RTLD_DEFAULT, symbol);
    if (p == nullptr) p = dlsym(state().handle, symbol);
  }
  if (p == nullptr) {
    std::fprintf(stderr, "sumcast-mpi: FATAL: the MPI library has no object %s\n", symbol);
    std::abort();
  }
  return p;
}

}  // namespace sumcast::mpi
