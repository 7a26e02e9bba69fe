// Test-only references for the kernels, built differently from the code under test: values are
// decoded and rounded with fp64 arithmetic (ldexp / nearbyint) instead of bit manipulation.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

namespace sumcast::kernels::testing {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline uint64_t bits_of(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline double double_of(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

inline bool half_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }
inline bool bf16_is_nan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x007F) != 0; }

// Value of a non-NaN binary16 pattern: (-1)^s * 2^(e-15) * (1 + m/2^10), or 2^-14 * m/2^10.
inline double ref_half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  double v;
  if (e == 0x1F)
    v = std::numeric_limits<double>::infinity();
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), -24);
  else
    v = std::ldexp(1.0 + m / 1024.0, e - 15);
  return (h & 0x8000) != 0 ? -v : v;
}

// Value of a non-NaN bfloat16 pattern: 8-bit exponent (bias 127), 7-bit fraction.
inline double ref_bf16_value(uint16_t b) {
  const int e = (b >> 7) & 0xFF;
  const int m = b & 0x7F;
  double v;
  if (e == 0xFF)
    v = std::numeric_limits<double>::infinity();
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), -133);
  else
    v = std::ldexp(1.0 + m / 128.0, e - 127);
  return (b & 0x8000) != 0 ? -v : v;
}

// Rounds finite x to the nearest value (ties to even) of a binary format with `fraction_bits`
// stored fraction bits and minimum normal exponent `emin`; ±Inf when the result exceeds
// `max_finite`. Works by scaling to the format's quantum at x's binade and calling nearbyint
// (the default rounding mode is to-nearest-even). Keeps the sign of zero.
inline double ref_round(double x, int fraction_bits, int emin, double max_finite) {
  if (x == 0 || std::isinf(x)) return x;
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| = f * 2^e with f in [0.5, 1): leading bit at 2^(e-1)
  const double quantum = std::ldexp(1.0, std::max(e - 1, emin) - fraction_bits);
  const double r = std::nearbyint(std::fabs(x) / quantum) * quantum;
  if (r > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return std::copysign(r, x);
}
inline double ref_round_half(double x) { return ref_round(x, 10, -14, 65504.0); }
inline double ref_round_bf16(double x) { return ref_round(x, 7, -126, std::ldexp(255.0, 120)); }

// fp32 bits of the widened NaN: sign, payload shifted into place, quiet bit set.
inline uint32_t ref_half_nan_as_float_bits(uint16_t h) {
  return (static_cast<uint32_t>(h & 0x8000) << 16) | 0x7FC00000u | (static_cast<uint32_t>(h & 0x3FF) << 13);
}

inline std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// got == RNE(f) by the fp64 reference; for NaN f: a quiet NaN with f's sign and top payload bits.
inline ::testing::AssertionResult half_rounds_like_reference(float f, uint16_t got) {
  const uint32_t u = bits_of(f);
  if (std::isnan(f)) {
    const bool ok = half_is_nan(got) && (got & 0x200) != 0 && (got & 0x8000) == ((u >> 16) & 0x8000) &&
                    (got & 0x1FF) == ((u >> 13) & 0x1FF);
    if (ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "NaN " << hex(u) << " -> " << hex(got);
  }
  const double want = ref_round_half(static_cast<double>(f));
  const double have = half_is_nan(got) ? std::nan("") : ref_half_value(got);
  if (have == want && std::signbit(have) == std::signbit(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << hex(u) << " (" << f << ") -> " << hex(got) << " = " << have << ", want "
                                       << want;
}

inline ::testing::AssertionResult bf16_rounds_like_reference(float f, uint16_t got) {
  const uint32_t u = bits_of(f);
  if (std::isnan(f)) {
    const bool ok = bf16_is_nan(got) && (got & 0x40) != 0 && (got & 0x8000) == ((u >> 16) & 0x8000) &&
                    (got & 0x3F) == ((u >> 16) & 0x3F);
    if (ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "NaN " << hex(u) << " -> " << hex(got);
  }
  const double want = ref_round_bf16(static_cast<double>(f));
  const double have = bf16_is_nan(got) ? std::nan("") : ref_bf16_value(got);
  if (have == want && std::signbit(have) == std::signbit(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << hex(u) << " (" << f << ") -> " << hex(got) << " = " << have << ", want "
                                       << want;
}

}  // namespace sumcast::kernels::testing
