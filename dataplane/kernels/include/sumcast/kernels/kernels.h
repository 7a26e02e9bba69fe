// Summation kernels: acc (op)= x over one chunk, per wire dtype, with one implementation per ISA
// (scalar, AVX2+F16C, AVX-512), each compiled with its own target flags and picked once at
// start-up from CPUID. SUMCAST_ISA=scalar|avx2|avx512 in the environment caps the choice (for
// tests and benchmarks); asking for an ISA the CPU lacks falls back to the best it has.
//
// Accumulator element types (wire::accumulator_size): fp32 for fp32/fp16/bf16, fp64 for fp64,
// int32 for int32. Contributions are read from unaligned, little-endian packet payloads.
// Semantics (docs/protocol.md §4):
//   sum: IEEE addition in the accumulator type (int32 wraps, two's complement);
//   min/max: NaN in either operand gives NaN; -0 < +0.
//   fp16/bf16 are widened exactly to fp32; finish (FinishFn) rounds fp32 to fp16/bf16 once,
//   round-to-nearest-even, NaN stays NaN (quiet), ±Inf stays ±Inf, overflow gives ±Inf.
//   Subnormals are kept everywhere (no flush to zero; MXCSR's FTZ/DAZ are expected off).
//   NaN results of sum/min/max are quiet and carry the sign and payload of a NaN operand (which
//   one when both are NaN may differ between ISAs); Inf - Inf gives the default NaN. Widening
//   fp16 quiets a NaN (as vcvtph2ps); widening bf16 is a plain 16-bit shift (a signalling NaN
//   stays signalling in the accumulator until an op or finish quiets it). Narrowing keeps a
//   NaN's sign and the top payload bits and sets the quiet bit.
// No pointer needs any alignment (payloads start at odd offsets; accumulators are usually
// 64-byte aligned, which is faster but not required).
// All functions are thread-safe, allocation-free and accept n == 0 (pointers may then be null).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sumcast/wire/format.h"

namespace sumcast::kernels {

enum class Isa : uint8_t { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
inline constexpr int kIsaCount = 3;
const char* isa_name(Isa isa);

// acc[i] = widen(src[i])  (the first contribution of a round: no zeroing pass needed)
using LoadFn = void (*)(void* acc, const void* src, size_t n);
// acc[i] = acc[i] op widen(src[i])
using AccumulateFn = void (*)(void* acc, const void* src, size_t n);
// dst[i] = narrow(acc[i])  (wire dtype; identity copy for fp32/int32/fp64)
using FinishFn = void (*)(void* dst, const void* acc, size_t n);

struct KernelTable {
  Isa isa;
  LoadFn load[wire::kDtypeCount];
  AccumulateFn accumulate[wire::kDtypeCount][wire::kReduceOpCount];
  FinishFn finish[wire::kDtypeCount];
};

// True if this CPU (and OS) can run `isa`.
bool cpu_supports(Isa isa);
// The table for `isa`, or nullptr when cpu_supports(isa) is false.
const KernelTable* kernels_for(Isa isa);
// The table chosen once (first call) from CPUID and SUMCAST_ISA.
const KernelTable& active_kernels();

// Scalar conversions, shared by all variants' tails and by tests.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round-to-nearest-even
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);  // round-to-nearest-even, NaN kept quiet

}  // namespace sumcast::kernels
