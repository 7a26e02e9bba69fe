// The scalar fp16/bf16 conversions of kernels.h against fp64 references (reference.h):
// exhaustive for widening, boundary cases and sweeps for narrowing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "reference.h"
#include "sumcast/kernels/kernels.h"

namespace sumcast::kernels {
namespace {

using testing::bf16_is_nan;
using testing::bf16_rounds_like_reference;
using testing::bits_of;
using testing::float_of;
using testing::half_is_nan;
using testing::half_rounds_like_reference;
using testing::hex;
using testing::ref_bf16_value;
using testing::ref_half_value;

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(HalfToFloat, IsExactForAll65536Patterns) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto p = static_cast<uint16_t>(h);
    const float f = half_to_float(p);
    if (half_is_nan(p)) {
      ASSERT_EQ(bits_of(f), testing::ref_half_nan_as_float_bits(p)) << hex(h);
    } else {
      ASSERT_EQ(static_cast<double>(f), ref_half_value(p)) << hex(h);
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << hex(h);
    }
  }
}

TEST(Bf16ToFloat, IsExactForAll65536Patterns) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto p = static_cast<uint16_t>(b);
    const float f = bf16_to_float(p);
    if (bf16_is_nan(p)) {
      ASSERT_EQ(bits_of(f), b << 16) << hex(b);  // a shift: the payload (and sNaN-ness) is kept
    } else {
      ASSERT_EQ(static_cast<double>(f), ref_bf16_value(p)) << hex(b);
      ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << hex(b);
    }
  }
}

struct Case {
  float in;
  uint16_t want;
};

// Expected bits worked out by hand from IEEE 754 (binary16: 10 fraction bits, emin -14, max 65504).
TEST(FloatToHalf, BoundaryCasesRoundToNearestEven) {
  const Case cases[] = {
      {1.0f, 0x3C00},
      {1.0f + 0x1p-11f, 0x3C00},             // tie between 0x3C00 and 0x3C01: even
      {1.0f + 0x3p-11f, 0x3C02},             // tie between 0x3C01 and 0x3C02: even
      {1.0f + 0x1p-11f + 0x1p-23f, 0x3C01},  // just above the tie
      {1.0f + 0x1p-11f - 0x1p-24f, 0x3C00},  // just below
      {-2.0f, 0xC000},
      {65504.0f, 0x7BFF},  // largest finite
      {std::nextafter(65520.0f, 0.0f), 0x7BFF},
      {65520.0f, 0x7C00},  // tie between 65504 (odd) and 65536: overflows
      {-65520.0f, 0xFC00},
      {65536.0f, 0x7C00},
      {std::numeric_limits<float>::max(), 0x7C00},
      {kInf, 0x7C00},
      {-kInf, 0xFC00},
      {0x1p-14f, 0x0400},             // smallest normal
      {0x1p-14f - 0x1p-24f, 0x03FF},  // largest subnormal
      {0x1p-14f - 0x1p-25f, 0x0400},  // tie between 0x03FF and 0x0400: even
      {0x1p-24f, 0x0001},             // smallest subnormal
      {0x1p-25f, 0x0000},             // tie between 0 and 0x0001: even
      {std::nextafter(0x1p-25f, 1.0f), 0x0001},
      {0x3p-25f, 0x0002},  // tie between 0x0001 and 0x0002: even
      {0x5p-25f, 0x0002},  // tie between 0x0002 and 0x0003: even
      {-0x1p-24f, 0x8001},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {std::numeric_limits<float>::denorm_min(), 0x0000},
      {-std::numeric_limits<float>::denorm_min(), 0x8000},
      {float_of(0x7FC00000u), 0x7E00},  // quiet NaN
      {float_of(0xFFC00000u), 0xFE00},
      {float_of(0x7F800001u), 0x7E00},  // signalling NaN: comes out quiet
      {float_of(0x7FA00000u), 0x7F00},  // payload's top bits kept
  };
  for (const Case& c : cases) {
    EXPECT_EQ(float_to_half(c.in), c.want) << hex(bits_of(c.in));
  }
}

TEST(FloatToBf16, BoundaryCasesRoundToNearestEven) {
  const Case cases[] = {
      {1.0f, 0x3F80},
      {float_of(0x3F808000u), 0x3F80},  // tie between 0x3F80 and 0x3F81: even
      {float_of(0x3F818000u), 0x3F82},  // tie between 0x3F81 and 0x3F82: even
      {float_of(0x3F808001u), 0x3F81},
      {float_of(0x3F807FFFu), 0x3F80},
      {float_of(0x7F7F0000u), 0x7F7F},  // largest finite
      {float_of(0x7F7F7FFFu), 0x7F7F},
      {float_of(0x7F7F8000u), 0x7F80},  // tie between 0x7F7F (odd) and Inf: overflows
      {std::numeric_limits<float>::max(), 0x7F80},
      {-std::numeric_limits<float>::max(), 0xFF80},
      {kInf, 0x7F80},
      {-kInf, 0xFF80},
      {float_of(0x00010000u), 0x0001},  // subnormals are kept (not flushed)
      {float_of(0x00008000u), 0x0000},  // tie between 0 and 0x0001: even
      {float_of(0x00018000u), 0x0002},  // tie between 0x0001 and 0x0002: even
      {float_of(0x00010001u), 0x0001},
      {float_of(0x007FFFFFu), 0x0080},  // largest fp32 subnormal rounds up to the min normal
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {float_of(0x7FC00000u), 0x7FC0},
      {float_of(0xFFC00000u), 0xFFC0},
      {float_of(0x7F800001u), 0x7FC0},  // signalling NaN: comes out quiet, not as Inf
      {float_of(0xFF810000u), 0xFFC1},
      {float_of(0x7FFFFFFFu), 0x7FFF},  // never rounds a NaN over into the sign bit
  };
  for (const Case& c : cases) {
    EXPECT_EQ(float_to_bf16(c.in), c.want) << hex(bits_of(c.in));
  }
}

// Every representable value, the midpoint to its successor and the floats either side of it.
template <class Value, class Convert, class Check>
void sweep_midpoints(int count, Value value, Convert convert, Check check) {
  for (int h = 0; h < count; ++h) {
    const double lo = value(h);
    const double hi = value(h + 1);  // for the largest finite: the first value past it (2^16, 2^128)
    const auto mid = static_cast<float>((lo + hi) / 2);  // exact: fits in fp32's 24 bits
    const float inputs[] = {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)};
    for (float f : inputs) {
      if (std::isinf(f)) continue;
      ASSERT_TRUE(check(f, convert(f)));
      ASSERT_TRUE(check(-f, convert(-f)));
    }
  }
}

TEST(FloatToHalf, EveryMidpointMatchesFp64Reference) {
  sweep_midpoints(
      0x7C00, [](int h) { return h == 0x7C00 ? 65536.0 : ref_half_value(static_cast<uint16_t>(h)); }, float_to_half,
      half_rounds_like_reference);
}

TEST(FloatToBf16, EveryMidpointMatchesFp64Reference) {
  sweep_midpoints(
      0x7F80, [](int b) { return b == 0x7F80 ? std::ldexp(1.0, 128) : ref_bf16_value(static_cast<uint16_t>(b)); },
      float_to_bf16, bf16_rounds_like_reference);
}

// Random bit patterns: all of fp32 (NaN, Inf, subnormals included), then the binades that
// round to fp16's range (where its subnormals and overflow live).
TEST(FloatToHalf, RandomSweepMatchesFp64Reference) {
  std::mt19937 rng(1);
  for (int i = 0; i < (1 << 21); ++i) {
    const float f = float_of(static_cast<uint32_t>(rng()));
    ASSERT_TRUE(half_rounds_like_reference(f, float_to_half(f)));
  }
  std::uniform_int_distribution<uint32_t> exponent(127 - 27, 127 + 16);
  for (int i = 0; i < (1 << 21); ++i) {
    const uint32_t u = (rng() & 0x807FFFFFu) | (exponent(rng) << 23);
    const float f = float_of(u);
    ASSERT_TRUE(half_rounds_like_reference(f, float_to_half(f)));
  }
}

TEST(FloatToBf16, RandomSweepMatchesFp64Reference) {
  std::mt19937 rng(2);
  for (int i = 0; i < (1 << 22); ++i) {
    const float f = float_of(static_cast<uint32_t>(rng()));
    ASSERT_TRUE(bf16_rounds_like_reference(f, float_to_bf16(f)));
  }
}

// Narrowing what was widened gives the pattern back (NaNs come back quiet).
TEST(FloatToHalf, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto p = static_cast<uint16_t>(h);
    const uint16_t want = half_is_nan(p) ? static_cast<uint16_t>(p | 0x200) : p;
    ASSERT_EQ(float_to_half(half_to_float(p)), want) << hex(h);
  }
}

TEST(FloatToBf16, RoundTripsEveryBf16) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto p = static_cast<uint16_t>(b);
    const uint16_t want = bf16_is_nan(p) ? static_cast<uint16_t>(p | 0x40) : p;
    ASSERT_EQ(float_to_bf16(bf16_to_float(p)), want) << hex(b);
  }
}

}  // namespace
}  // namespace sumcast::kernels
