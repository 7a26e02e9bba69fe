// Private to the kernels library (and its tests): the per-ISA tables and the SUMCAST_ISA
// selection logic, split out of kernels_dispatch.cc so that tests can drive it directly.
#pragma once

#include <optional>
#include <string_view>

#include "sumcast/kernels/kernels.h"

namespace sumcast::kernels::internal {

// One table per ISA source file. Only call through kAvx2Table / kAvx512Table after
// cpu_supports() said yes: they are compiled with -mavx2 / -mavx512*.
extern const KernelTable kScalarTable;  // kernels_scalar.cc
extern const KernelTable kAvx2Table;    // kernels_avx2.cc
extern const KernelTable kAvx512Table;  // kernels_avx512.cc

// "scalar" | "avx2" | "avx512" (exactly, lower case) -> Isa; anything else -> nullopt.
std::optional<Isa> parse_isa(std::string_view name);

// The ISA to run given SUMCAST_ISA's value (nullptr when unset) and the best one the CPU
// supports: the request caps the choice (min(requested, best)); an unset, empty or unknown value
// leaves `best`. Sets *unknown (when not null) if a non-empty value was not recognised.
Isa choose_isa(const char* env_value, Isa best, bool* unknown = nullptr);

// The best ISA cpu_supports() accepts.
Isa best_supported_isa();

}  // namespace sumcast::kernels::internal
