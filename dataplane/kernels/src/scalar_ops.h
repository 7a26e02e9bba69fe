// Element-wise building blocks shared by every ISA variant: bit casts, the exact fp16/bf16
// conversions, the three reduce ops with the semantics of kernels.h, and plain loops over them
// (the scalar variant, and the tails of the SIMD ones that have no masked loads).
//
// Everything here lives in an unnamed namespace on purpose: this header is compiled into
// translation units built with different ISA flags (kernels_avx2.cc, kernels_avx512.cc). An
// ordinary inline function or template instantiation would be emitted once per TU and merged by
// the linker, which could hand an AVX-512 copy to the scalar path. Internal linkage gives each
// TU its own copy. For the same reason this header includes no standard headers beyond
// <cstddef>/<cstdint> and uses builtins instead of <cstring>/<cmath> helpers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sumcast/kernels/kernels.h"

namespace sumcast::kernels::internal {
namespace {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

// --- fp16 (IEEE binary16) ------------------------------------------------------------------

// Exact: every binary16 value is an fp32 value. NaNs keep sign and payload and come out quiet
// (as vcvtph2ps does).
inline float half_to_float_inline(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) {  // Inf or NaN
    return f32_from_bits(sign | 0x7F800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u));
  }
  if (exp != 0) return f32_from_bits(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
  if (mant == 0) return f32_from_bits(sign);
  // Subnormal: mant * 2^-24 with its leading one at bit p (0..9) becomes 2^(p-24) * 1.f.
  const uint32_t p = 31u - static_cast<uint32_t>(__builtin_clz(mant));
  return f32_from_bits(sign | ((p + 103u) << 23) | ((mant << (23u - p)) & 0x7FFFFFu));
}

// Round-to-nearest-even. NaN: quiet, sign and the top 9 payload bits kept (as vcvtps2ph).
inline uint16_t float_to_half_inline(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520: Inf
  if (a >= 0x38800000u) {                                              // >= 2^-14: normal
    const uint32_t r = a - 0x38000000u;                                // rebias the exponent from 127 to 15
    return static_cast<uint16_t>(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
  }
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 (a tie): zero
  // Subnormal result: the value is m * 2^(e-150); in units of 2^-24 that is m >> (126 - e).
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u) != 0)) ++q;  // may carry into the min normal
  return static_cast<uint16_t>(sign | q);
}

// --- bf16 ----------------------------------------------------------------------------------

inline float bf16_to_float_inline(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// Round-to-nearest-even on the bit pattern (bf16 shares fp32's exponent, so subnormals and the
// overflow to Inf come out right). NaN: quiet, sign and the top 6 payload bits kept.
inline uint16_t float_to_bf16_inline(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// --- reduce ops (kernels.h semantics) ------------------------------------------------------

// NaN in either operand: a quiet NaN carrying one of the NaN operands (IEEE addition's rule).
struct OpSum {
  static float apply(float a, float b) { return a + b; }
  static double apply(double a, double b) { return a + b; }
  static int32_t apply(int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
};

template <class T, class Bits>
inline T or_bits(T a, T b) {
  Bits x, y;
  __builtin_memcpy(&x, &a, sizeof x);
  __builtin_memcpy(&y, &b, sizeof y);
  x |= y;
  __builtin_memcpy(&a, &x, sizeof a);
  return a;
}
template <class T, class Bits>
inline T and_bits(T a, T b) {
  Bits x, y;
  __builtin_memcpy(&x, &a, sizeof x);
  __builtin_memcpy(&y, &b, sizeof y);
  x &= y;
  __builtin_memcpy(&a, &x, sizeof a);
  return a;
}

struct OpMin {
  template <class T>
  static T min_fp(T a, T b) {
    if (a != a || b != b) return a + b;  // quiet NaN from a NaN operand
    if (a == b) {                        // equal, or +0/-0: -0 wins
      if constexpr (sizeof(T) == 4) {
        return or_bits<T, uint32_t>(a, b);
      } else {
        return or_bits<T, uint64_t>(a, b);
      }
    }
    return a < b ? a : b;
  }
  static float apply(float a, float b) { return min_fp(a, b); }
  static double apply(double a, double b) { return min_fp(a, b); }
  static int32_t apply(int32_t a, int32_t b) { return a < b ? a : b; }
};

struct OpMax {
  template <class T>
  static T max_fp(T a, T b) {
    if (a != a || b != b) return a + b;
    if (a == b) {  // equal, or +0/-0: +0 wins
      if constexpr (sizeof(T) == 4) {
        return and_bits<T, uint32_t>(a, b);
      } else {
        return and_bits<T, uint64_t>(a, b);
      }
    }
    return a > b ? a : b;
  }
  static float apply(float a, float b) { return max_fp(a, b); }
  static double apply(double a, double b) { return max_fp(a, b); }
  static int32_t apply(int32_t a, int32_t b) { return a > b ? a : b; }
};

// --- wire element types: widen (wire -> accumulator) and narrow (accumulator -> wire) -------
// All accesses go through memcpy: neither side is assumed aligned.

template <class T>
inline T load_as(const void* p) {
  T v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store_as(void* p, T v) {
  __builtin_memcpy(p, &v, sizeof v);
}

template <class AccT>
struct IdentityElem {
  using Acc = AccT;
  static constexpr size_t kWireSize = sizeof(AccT);
  static Acc widen(const uint8_t* p) { return load_as<Acc>(p); }
  static void narrow(uint8_t* p, Acc v) { store_as(p, v); }
};
using Fp32Elem = IdentityElem<float>;
using Int32Elem = IdentityElem<int32_t>;
using Fp64Elem = IdentityElem<double>;

struct Fp16Elem {
  using Acc = float;
  static constexpr size_t kWireSize = 2;
  static Acc widen(const uint8_t* p) { return half_to_float_inline(load_as<uint16_t>(p)); }
  static void narrow(uint8_t* p, Acc v) { store_as(p, float_to_half_inline(v)); }
};
struct Bf16Elem {
  using Acc = float;
  static constexpr size_t kWireSize = 2;
  static Acc widen(const uint8_t* p) { return bf16_to_float_inline(load_as<uint16_t>(p)); }
  static void narrow(uint8_t* p, Acc v) { store_as(p, float_to_bf16_inline(v)); }
};

// --- plain loops -----------------------------------------------------------------------------

template <class E>
void load_loop(void* acc, const void* src, size_t n) {
  auto* a = static_cast<uint8_t*>(acc);
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) store_as(a + i * sizeof(typename E::Acc), E::widen(s + i * E::kWireSize));
}

template <class E, class Op>
void accumulate_loop(void* acc, const void* src, size_t n) {
  using Acc = typename E::Acc;
  auto* a = static_cast<uint8_t*>(acc);
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* ap = a + i * sizeof(Acc);
    store_as(ap, Op::apply(load_as<Acc>(ap), E::widen(s + i * E::kWireSize)));
  }
}

template <class E>
void finish_loop(void* dst, const void* acc, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* a = static_cast<const uint8_t*>(acc);
  for (size_t i = 0; i < n; ++i)
    E::narrow(d + i * E::kWireSize, load_as<typename E::Acc>(a + i * sizeof(typename E::Acc)));
}

// Identity load/finish (fp32, int32, fp64): a copy.
template <class E>
void copy_load(void* acc, const void* src, size_t n) {
  if (n != 0) __builtin_memcpy(acc, src, n * sizeof(typename E::Acc));
}
template <class E>
void copy_finish(void* dst, const void* acc, size_t n) {
  if (n != 0) __builtin_memcpy(dst, acc, n * sizeof(typename E::Acc));
}

}  // namespace
}  // namespace sumcast::kernels::internal
