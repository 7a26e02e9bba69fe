// Which MPI datatypes and reduction ops the interposer can hand to the appliance, and as what.
// Only predefined handles: MPI requires every rank of a reduction to pass the same datatype and
// op, so a decision made from them is the same on every rank.
#pragma once

#include <cstddef>
#include <optional>

#include "mpi_lib.h"
#include "sumcast/wire/format.h"

namespace sumcast::mpi {

struct WireType {
  wire::Dtype dtype = wire::Dtype::kFp32;
  size_t mult = 1;        // wire elements per MPI element (2 for complex types)
  size_t mpi_size = 4;    // bytes of one MPI element
  bool sum_only = false;  // MIN/MAX are not the same operation on the wire type (unsigned, complex)
};

// nullopt when the datatype is not one the wire has exactly.
std::optional<WireType> wire_type(MPI_Datatype datatype);
// nullopt when the op is not MPI_SUM, MPI_MIN or MPI_MAX.
std::optional<wire::ReduceOp> wire_op(MPI_Op op);

}  // namespace sumcast::mpi
