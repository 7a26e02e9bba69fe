#include "types.h"

#include <vector>

namespace sumcast::mpi {
namespace {

struct Entry {
  MPI_Datatype datatype;
  WireType type;
};

// Built on first use: with Open MPI the handles are addresses of the library's objects, not
// constants. int and unsigned are 32 bits on every platform MPI runs on here (checked below).
const std::vector<Entry>& table() {
  static const std::vector<Entry> t = [] {
    static_assert(sizeof(int) == 4 && sizeof(unsigned) == 4 && sizeof(float) == 4 && sizeof(double) == 8);
    std::vector<Entry> v = {
        {MPI_FLOAT, {wire::Dtype::kFp32, 1, 4, false}},
        {MPI_DOUBLE, {wire::Dtype::kFp64, 1, 8, false}},
        {MPI_INT, {wire::Dtype::kInt32, 1, 4, false}},
        {MPI_INT32_T, {wire::Dtype::kInt32, 1, 4, false}},
        // A wrapping 32-bit sum is the same bits signed or unsigned; MIN/MAX are not.
        {MPI_UNSIGNED, {wire::Dtype::kInt32, 1, 4, true}},
        {MPI_UINT32_T, {wire::Dtype::kInt32, 1, 4, true}},
        // Complex sums are element-wise sums of (re, im) pairs; complex MIN/MAX do not exist.
        {MPI_C_FLOAT_COMPLEX, {wire::Dtype::kFp32, 2, 8, true}},
        {MPI_C_DOUBLE_COMPLEX, {wire::Dtype::kFp64, 2, 16, true}},
#ifdef MPIX_C_FLOAT16
        {MPIX_C_FLOAT16, {wire::Dtype::kFp16, 1, 2, false}},  // MPICH's IEEE binary16
#endif
    };
    // Keep only the handles this library defines with the size we assume (a NULL handle, e.g. a
    // type the MPI library was built without, has no size).
    std::vector<Entry> out;
    for (const Entry& e : v) {
      if (e.datatype == MPI_DATATYPE_NULL) continue;
      int size = 0;
      if (PMPI_Type_size(e.datatype, &size) == MPI_SUCCESS && static_cast<size_t>(size) == e.type.mpi_size) {
        out.push_back(e);
      }
    }
    return out;
  }();
  return t;
}

}  // namespace

std::optional<WireType> wire_type(MPI_Datatype datatype) {
  for (const Entry& e : table()) {
    if (e.datatype == datatype) return e.type;
  }
  return std::nullopt;
}

std::optional<wire::ReduceOp> wire_op(MPI_Op op) {
  if (op == MPI_SUM) return wire::ReduceOp::kSum;
  if (op == MPI_MIN) return wire::ReduceOp::kMin;
  if (op == MPI_MAX) return wire::ReduceOp::kMax;
  return std::nullopt;
}

}  // namespace sumcast::mpi
