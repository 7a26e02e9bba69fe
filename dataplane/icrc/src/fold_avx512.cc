// CRC-32 (zlib's, reflected) of the ICRC's masked prefix and the rest of a packet in one pass,
// with AVX-512 VPCLMULQDQ: 64-byte blocks folded by carry-less multiplication, four accumulators
// while at least 256 bytes remain (the multiplications' latency hidden), the last block a masked
// load padded with zeros, then one reduction to 32 bits. Compiled with -mavx512f -mavx512bw
// -mavx512vl -mvpclmulqdq -mpclmul; called only where fold_supported() (icrc.cc).
//
// Conventions. P = x^32 + 0x04C11DB7. A 16-byte lane loaded little-endian holds its bytes' bits in
// stream order (byte 0's bit 0 first), and stream bit j of the lane is the coefficient of
// x^(127 - j) of the lane's polynomial L; its 8-byte halves give L = LO * x^64 + HI. For a
// polynomial A of degree < 64, r64(A) is the 64-bit word whose bit i is the coefficient of
// x^(63 - i); then PCLMULQDQ(r64(A), r64(B)) is, in the lane convention, A * B * x (the product
// reflected lands one bit low), which the constants absorb: they are x^(e - 1) mod P where the
// fold needs x^e. zlib's register after a message M (initial value absorbed by complementing the
// first 4 bytes) is M * x^32 mod P, bit i holding the coefficient of x^(31 - i).
//
// The steps, for a stream of `total` bytes padded with k zero bytes to a multiple of 64:
//   - fold a lane D bytes forward: L * x^(8D) = LO * x^(8D + 64) + HI * x^(8D), two PCLMULQDQ with
//     the constants r64(x^(8D + 63) mod P) and r64(x^(8D - 1) mod P);
//   - the four lanes of the last block to one: lane i folded 48 - 16 i bytes forward;
//   - undo the padding and multiply by x^32 at once: W = L * x^(32 - 8k), exponents below 0
//     taken mod P through x^-1 = (P - 1) / x; W has degree < 96;
//   - W = WH * x^64 + WL to Z = WH * (x^64 mod P) + WL (degree < 64), then Barrett: q =
//     floor(floor(Z / x^32) * mu / x^32) with mu = floor(x^64 / P), remainder Z + q * P.
// tests/icrc's IcrcFold tests compare it with ISA-L at every length from 0 to 2 KiB and beyond.
#include "fold.h"

#ifdef SUMCAST_ICRC_FOLD

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's AVX-512 intrinsics pass an undefined operand made as `__m512i __Y = __Y;`, which
// -Wuninitialized then reports wherever they are inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <array>
#include <cstdint>

namespace sumcast::icrc::internal {
namespace {

constexpr uint64_t kPoly = 0x104C11DB7;  // P, bit i = coefficient of x^i

// x^e mod P (bit i = coefficient of x^i); e may be negative (x * x^-1 = 1 mod P since P(0) = 1).
constexpr uint32_t xpow(int64_t e) {
  uint64_t a = 1;
  for (int64_t i = 0; i < e; ++i) {
    a <<= 1;
    if ((a >> 32) & 1) a ^= kPoly;
  }
  for (int64_t i = 0; i < -e; ++i) {
    if (a & 1) a ^= kPoly;
    a >>= 1;
  }
  return static_cast<uint32_t>(a);
}

constexpr uint64_t reverse64(uint64_t v) {
  uint64_t r = 0;
  for (int i = 0; i < 64; ++i) r |= ((v >> i) & 1) << (63 - i);
  return r;
}

// r64(x^e mod P): the PCLMULQDQ operand that multiplies by x^(e + 1).
constexpr uint64_t k_of(int64_t e) { return reverse64(xpow(e)); }

// floor(x^64 / P), 33 bits.
constexpr uint64_t barrett_mu() {
  unsigned __int128 r = static_cast<unsigned __int128>(1) << 64;
  uint64_t q = 0;
  for (int i = 64; i >= 32; --i) {
    if (((r >> i) & 1) != 0) {
      r ^= static_cast<unsigned __int128>(kPoly) << (i - 32);
      q |= uint64_t{1} << (i - 32);
    }
  }
  return q;
}

struct Pair {
  uint64_t lo;  // multiplies a lane's first 8 bytes (LO)
  uint64_t hi;  // multiplies its last 8 bytes (HI)
};
constexpr Pair fold_by(int64_t bytes) { return {k_of(8 * bytes + 63), k_of(8 * bytes - 1)}; }

// Per zero bytes of padding k (0..63): the final multiplication by x^(32 - 8k).
constexpr std::array<Pair, 64> make_final() {
  std::array<Pair, 64> t{};
  for (int64_t k = 0; k < 64; ++k) t[static_cast<size_t>(k)] = {k_of(95 - 8 * k), k_of(31 - 8 * k)};
  return t;
}
alignas(16) constexpr std::array<Pair, 64> kFinal = make_final();

constexpr Pair kFold256 = fold_by(256);
// Folds by 0..7 blocks of 64 bytes.
constexpr std::array<Pair, 8> make_blocks() {
  std::array<Pair, 8> t{};
  for (int64_t b = 0; b < 8; ++b) t[static_cast<size_t>(b)] = fold_by(64 * b);
  return t;
}
alignas(16) constexpr std::array<Pair, 8> kBlocks = make_blocks();
// Lanes 0..3 of a block to its end: 48, 32, 16 and 0 bytes.
constexpr Pair kLane0 = fold_by(48);
constexpr Pair kLane1 = fold_by(32);
constexpr Pair kLane2 = fold_by(16);
constexpr Pair kLane3 = fold_by(0);
constexpr uint64_t kX64 = k_of(63);  // multiplies by x^64
constexpr uint64_t kMu = reverse64(barrett_mu());
constexpr uint64_t kP = reverse64(kPoly);

static_assert(xpow(32) == 0x04C11DB7u, "x^32 mod P");
static_assert(xpow(-1) == 0x82608EDBu, "x^-1 mod P = (P - 1) / x");
static_assert(barrett_mu() == 0x104D101DFu, "mu = floor(x^64 / P)");

inline __m512i broadcast(Pair k) {
  return _mm512_broadcast_i32x4(_mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo)));
}

inline __m512i by_blocks(size_t blocks) {
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(&kBlocks[blocks])));
}

// x's lanes each folded by the constants of their lane of k.
inline __m512i fold(__m512i x, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11));
}

// x folded by the lane constants in k, XORed with data.
inline __m512i fold_xor(__m512i x, __m512i k, __m512i data) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11), data,
                                   0x96);
}

inline __m512i load(const uint8_t* p) { return _mm512_loadu_si512(p); }

}  // namespace

uint32_t crc_prefixed_avx512(__m128i c0, __m128i c1, __m128i c2, const uint8_t* rest, size_t n) {
  // zlib's initial register (all ones) is the first 4 bytes complemented.
  c0 = _mm_xor_si128(c0, _mm_cvtsi32_si128(-1));
  const size_t head = n < 16 ? n : 16;
  const __m128i r0 = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << head) - 1), rest);
  __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(c0), c1, 1)),
                                 _mm256_inserti128_si256(_mm256_castsi128_si256(c2), r0, 1), 1);
  const uint8_t* p = rest + head;
  size_t m = n - head;
  const size_t pad = (64 - (48 + n) % 64) % 64;

  // Every block ends up folded forward to the last one, by a distance known once the number of
  // blocks after it is: with four accumulators, each folds by 256 bytes per round; what remains
  // after the rounds (r < 5 blocks, the last one masked) and the accumulators are then folded
  // independently by their own distances and XORed.
  const bool four = m >= 192 + 256;
  __m512i x1 = x, x2 = x, x3 = x;  // used where `four`
  if (four) {
    x1 = load(p);
    x2 = load(p + 64);
    x3 = load(p + 128);
    p += 192;
    m -= 192;
    const __m512i k256 = broadcast(kFold256);
    while (m >= 256) {
      x = fold_xor(x, k256, load(p));
      x1 = fold_xor(x1, k256, load(p + 64));
      x2 = fold_xor(x2, k256, load(p + 128));
      x3 = fold_xor(x3, k256, load(p + 192));
      p += 256;
      m -= 256;
    }
  }
  const size_t r = (m + 63) / 64;  // blocks left, the last one partial or full: four ? <= 4 : <= 7
  __m512i sum;
  if (four) {
    sum = _mm512_ternarylogic_epi64(fold(x, by_blocks(r + 3)), fold(x1, by_blocks(r + 2)), fold(x2, by_blocks(r + 1)),
                                    0x96);
    sum = _mm512_xor_si512(sum, r == 0 ? x3 : fold(x3, by_blocks(r)));
  } else {
    sum = r == 0 ? x : fold(x, by_blocks(r));
  }
  for (size_t i = 1; i < r; ++i, p += 64, m -= 64) sum = _mm512_xor_si512(sum, fold(load(p), by_blocks(r - i)));
  if (r > 0) sum = _mm512_xor_si512(sum, _mm512_maskz_loadu_epi8(_cvtu64_mask64(~uint64_t{0} >> (64 - m)), p));
  x = sum;

  // The block's four lanes to one.
  const __m512i lanes = _mm512_set_epi64(static_cast<long long>(kLane3.hi), static_cast<long long>(kLane3.lo),
                                         static_cast<long long>(kLane2.hi), static_cast<long long>(kLane2.lo),
                                         static_cast<long long>(kLane1.hi), static_cast<long long>(kLane1.lo),
                                         static_cast<long long>(kLane0.hi), static_cast<long long>(kLane0.lo));
  const __m512i t = fold(x, lanes);
  const __m256i y = _mm256_xor_si256(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
  const __m128i l = _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));

  // W = L * x^(32 - 8 pad), degree < 96: bits 32..127.
  const __m128i kf = _mm_load_si128(reinterpret_cast<const __m128i*>(&kFinal[pad]));
  const __m128i w = _mm_xor_si128(_mm_clmulepi64_si128(l, kf, 0x00), _mm_clmulepi64_si128(l, kf, 0x11));
  // Z = WH * x^64 + WL: WH (the low word) times x^64 mod P lands in the high word.
  const __m128i v = _mm_clmulepi64_si128(w, _mm_cvtsi64_si128(static_cast<long long>(kX64)), 0x00);
  const uint64_t z = static_cast<uint64_t>(_mm_extract_epi64(_mm_xor_si128(w, v), 1));
  // Barrett: q from the top 32 coefficients of Z, then Z + q * P below x^32.
  const __m128i prod1 = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(z << 32)),
                                             _mm_cvtsi64_si128(static_cast<long long>(kMu)), 0x00);
  const auto p1lo = static_cast<uint64_t>(_mm_cvtsi128_si64(prod1));
  const auto p1hi = static_cast<uint64_t>(_mm_extract_epi64(prod1, 1));
  const uint64_t q = ((p1lo >> 31) | (p1hi << 33)) & 0xFFFFFFFF00000000u;
  const __m128i prod2 = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(q)),
                                             _mm_cvtsi64_si128(static_cast<long long>(kP)), 0x00);
  const auto p2hi = static_cast<uint64_t>(_mm_extract_epi64(prod2, 1));
  const auto reg = static_cast<uint32_t>(z >> 32) ^ static_cast<uint32_t>(p2hi >> 31);
  return ~reg;
}

}  // namespace sumcast::icrc::internal

#endif  // SUMCAST_ICRC_FOLD
