// The fused ICRC kernel (fold_avx512.cc), private to sumcast::icrc. icrc.cc builds the 48-byte
// masked prefix in three SSE registers; this kernel folds those registers and the rest of the
// packet in one pass, where the ISA-L path stores the prefix on the stack and makes two calls.
#pragma once

#if defined(__x86_64__) && defined(__SSE2__) && !defined(SUMCAST_ICRC_SCALAR)
#define SUMCAST_ICRC_FOLD 1

#include <emmintrin.h>

#include <cstddef>
#include <cstdint>

namespace sumcast::icrc::internal {

// zlib's crc32(0, ...) of prefix bytes c0 | c1 | c2 (48 bytes, in memory order) followed by
// rest[0, n). Needs AVX-512 F/BW/VL and VPCLMULQDQ (fold_supported()); reads no byte outside
// rest[0, n) (the last partial block is a masked load).
uint32_t crc_prefixed_avx512(__m128i c0, __m128i c1, __m128i c2, const uint8_t* rest, size_t n);

// True if this CPU and OS run crc_prefixed_avx512 (AVX-512 F, BW and VL with zmm state enabled,
// VPCLMULQDQ, PCLMULQDQ). Compiled with baseline flags.
bool fold_supported();

}  // namespace sumcast::icrc::internal

#endif
