// CRC-32 combination (sumcast/icrc/combine.h).
//
// Carry-less product then Barrett reduction: for reflected operands a and b, clmul(a, b) << 1 is
// the 64-bit reflected product, and the Barrett step with P' = 0x1DB710641 (the polynomial with
// its x^32 term, reflected) and u = 0x1F7011641 (floor(x^64 / P), reflected) leaves a * b mod P
// in bits 32..63. Checked against the shift-and-add definition in tests/icrc/combine_test.cc.
#include "sumcast/icrc/combine.h"

#include <array>

#include "sumcast/cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SUMCAST_CRC_CLMUL 1
#endif

namespace sumcast::icrc::crc {
namespace {

constexpr uint32_t kPolyReflected = 0xEDB88320u;  // x^32 + x^26 + ... + 1, reflected, x^32 implied
constexpr uint32_t kOne = 0x80000000u;            // x^0
constexpr uint32_t kX = 0x40000000u;              // x^1

// The definition: add b * x^i for every coefficient i of a.
constexpr uint32_t multiply_scalar(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = kOne; m != 0; m >>= 1) {
    if ((a & m) != 0) product ^= b;
    b = (b & 1) != 0 ? (b >> 1) ^ kPolyReflected : b >> 1;  // b *= x
  }
  return product;
}

// kPowers[k] = x^(2^k) mod P.
constexpr std::array<uint32_t, 64> make_powers() {
  std::array<uint32_t, 64> t{};
  t[0] = kX;
  for (size_t k = 1; k < t.size(); ++k) t[k] = multiply_scalar(t[k - 1], t[k - 1]);
  return t;
}
constexpr std::array<uint32_t, 64> kPowers = make_powers();

#ifdef SUMCAST_CRC_CLMUL
__attribute__((target("pclmul,sse2"))) uint32_t multiply_clmul(uint32_t a, uint32_t b) {
  const __m128i k = _mm_set_epi64x(0x1F7011641LL, 0x1DB710641LL);  // u (high), P' (low)
  const __m128i low32 = _mm_cvtsi32_si128(-1);
  __m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(a)), _mm_cvtsi32_si128(static_cast<int>(b)), 0);
  p = _mm_slli_epi64(p, 1);
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(p, low32), k, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), k, 0x00);
  t = _mm_xor_si128(t, p);
  return static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_srli_si128(t, 4)));
}

const bool g_has_clmul = cpu_features().pclmul;
#endif

}  // namespace

uint32_t multiply(uint32_t a, uint32_t b) {
#ifdef SUMCAST_CRC_CLMUL
  if (g_has_clmul) return multiply_clmul(a, b);
#endif
  return multiply_scalar(a, b);
}

uint32_t shift_for(uint64_t bytes) {
  uint32_t r = kOne;
  uint64_t n = bytes * 8;
  for (size_t k = 0; n != 0; ++k, n >>= 1) {
    if ((n & 1) != 0) r = multiply(r, kPowers[k]);
  }
  return r;
}

}  // namespace sumcast::icrc::crc
