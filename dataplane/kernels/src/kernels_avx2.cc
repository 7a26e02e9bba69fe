// The AVX2 + FMA + F16C variant: 8 accumulator lanes per vector, 4 vectors per iteration, then
// single vectors, then a scalar tail (scalar_ops.h). Compiled with -mavx2 -mfma -mf16c (see
// CMakeLists.txt); reached only through kAvx2Table after cpu_supports(Isa::kAvx2).
#include <immintrin.h>

#include "kernels_internal.h"
#include "scalar_ops.h"

namespace sumcast::kernels::internal {
namespace {

// Round-to-nearest-even whatever MXCSR says.
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT;

// --- per-dtype vector traits: wire bytes <-> 8 accumulator lanes ------------------------------

struct F32Acc {
  using V = __m256;
  static V load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static void store(uint8_t* p, V v) { _mm256_storeu_ps(reinterpret_cast<float*>(p), v); }
};

struct Fp32V : F32Acc {
  using Elem = Fp32Elem;
  static constexpr size_t kLanes = 8;
  static V widen(const uint8_t* p) { return load(p); }
};

struct Fp16V : F32Acc {
  using Elem = Fp16Elem;
  static constexpr size_t kLanes = 8;
  static V widen(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void narrow(uint8_t* p, V v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, kRne)); }
};

struct Bf16V : F32Acc {
  using Elem = Bf16Elem;
  static constexpr size_t kLanes = 8;
  static V widen(const uint8_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  // Same arithmetic as float_to_bf16_inline, 8 lanes at a time.
  static void narrow(uint8_t* p, V v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    const __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
};

struct Int32V {
  using Elem = Int32Elem;
  using V = __m256i;
  static constexpr size_t kLanes = 8;
  static V load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static void store(uint8_t* p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static V widen(const uint8_t* p) { return load(p); }
};

struct Fp64V {
  using Elem = Fp64Elem;
  using V = __m256d;
  static constexpr size_t kLanes = 4;
  static V load(const uint8_t* p) { return _mm256_loadu_pd(reinterpret_cast<const double*>(p)); }
  static void store(uint8_t* p, V v) { _mm256_storeu_pd(reinterpret_cast<double*>(p), v); }
  static V widen(const uint8_t* p) { return load(p); }
};

// --- ops (kernels.h semantics; see OpMin/OpMax in scalar_ops.h) --------------------------------
// min/max: vminps/vmaxps return the second operand when either is NaN or both are zero. Equal
// operands (which includes +0/-0) are fixed by OR (min: -0 wins) / AND (max: +0 wins) of the
// bits; unordered ones by a + b, which yields a quiet NaN from a NaN operand.

struct VSum {
  using Scalar = OpSum;
  static __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256d apply(__m256d a, __m256d b) { return _mm256_add_pd(a, b); }
  static __m256i apply(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
};

struct VMin {
  using Scalar = OpMin;
  static __m256 apply(__m256 a, __m256 b) {
    const __m256 m = _mm256_blendv_ps(_mm256_min_ps(a, b), _mm256_or_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_ps(m, _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  static __m256d apply(__m256d a, __m256d b) {
    const __m256d m = _mm256_blendv_pd(_mm256_min_pd(a, b), _mm256_or_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_pd(m, _mm256_add_pd(a, b), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
  }
  static __m256i apply(__m256i a, __m256i b) { return _mm256_min_epi32(a, b); }
};

struct VMax {
  using Scalar = OpMax;
  static __m256 apply(__m256 a, __m256 b) {
    const __m256 m = _mm256_blendv_ps(_mm256_max_ps(a, b), _mm256_and_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_ps(m, _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  static __m256d apply(__m256d a, __m256d b) {
    const __m256d m = _mm256_blendv_pd(_mm256_max_pd(a, b), _mm256_and_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_pd(m, _mm256_add_pd(a, b), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
  }
  static __m256i apply(__m256i a, __m256i b) { return _mm256_max_epi32(a, b); }
};

// --- loops -----------------------------------------------------------------------------------

template <class T, class Op>
void accumulate(void* acc, const void* src, size_t n) {
  constexpr size_t kW = T::kLanes;
  constexpr size_t kAccSize = sizeof(typename T::Elem::Acc);
  constexpr size_t kSrcSize = T::Elem::kWireSize;
  auto* a = static_cast<uint8_t*>(acc);
  const auto* s = static_cast<const uint8_t*>(src);
  size_t i = 0;
  for (; i + 4 * kW <= n; i += 4 * kW) {
    const auto x0 = T::widen(s + (i + 0 * kW) * kSrcSize);
    const auto x1 = T::widen(s + (i + 1 * kW) * kSrcSize);
    const auto x2 = T::widen(s + (i + 2 * kW) * kSrcSize);
    const auto x3 = T::widen(s + (i + 3 * kW) * kSrcSize);
    T::store(a + (i + 0 * kW) * kAccSize, Op::apply(T::load(a + (i + 0 * kW) * kAccSize), x0));
    T::store(a + (i + 1 * kW) * kAccSize, Op::apply(T::load(a + (i + 1 * kW) * kAccSize), x1));
    T::store(a + (i + 2 * kW) * kAccSize, Op::apply(T::load(a + (i + 2 * kW) * kAccSize), x2));
    T::store(a + (i + 3 * kW) * kAccSize, Op::apply(T::load(a + (i + 3 * kW) * kAccSize), x3));
  }
  for (; i + kW <= n; i += kW) {
    T::store(a + i * kAccSize, Op::apply(T::load(a + i * kAccSize), T::widen(s + i * kSrcSize)));
  }
  accumulate_loop<typename T::Elem, typename Op::Scalar>(a + i * kAccSize, s + i * kSrcSize, n - i);
}

template <class T>
void widen_load(void* acc, const void* src, size_t n) {
  constexpr size_t kW = T::kLanes;
  constexpr size_t kAccSize = sizeof(typename T::Elem::Acc);
  constexpr size_t kSrcSize = T::Elem::kWireSize;
  auto* a = static_cast<uint8_t*>(acc);
  const auto* s = static_cast<const uint8_t*>(src);
  size_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    T::store(a + i * kAccSize, T::widen(s + i * kSrcSize));
    T::store(a + (i + kW) * kAccSize, T::widen(s + (i + kW) * kSrcSize));
  }
  for (; i + kW <= n; i += kW) T::store(a + i * kAccSize, T::widen(s + i * kSrcSize));
  load_loop<typename T::Elem>(a + i * kAccSize, s + i * kSrcSize, n - i);
}

template <class T>
void narrow_finish(void* dst, const void* acc, size_t n) {
  constexpr size_t kW = T::kLanes;
  constexpr size_t kAccSize = sizeof(typename T::Elem::Acc);
  constexpr size_t kDstSize = T::Elem::kWireSize;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* a = static_cast<const uint8_t*>(acc);
  size_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    T::narrow(d + i * kDstSize, T::load(a + i * kAccSize));
    T::narrow(d + (i + kW) * kDstSize, T::load(a + (i + kW) * kAccSize));
  }
  for (; i + kW <= n; i += kW) T::narrow(d + i * kDstSize, T::load(a + i * kAccSize));
  finish_loop<typename T::Elem>(d + i * kDstSize, a + i * kAccSize, n - i);
}

}  // namespace

// Rows in wire::Dtype order, columns in wire::ReduceOp order (static_asserts in kernels_scalar.cc).
extern const KernelTable kAvx2Table = {
    Isa::kAvx2,
    {copy_load<Fp32Elem>, widen_load<Fp16V>, widen_load<Bf16V>, copy_load<Int32Elem>, copy_load<Fp64Elem>},
    {
        {accumulate<Fp32V, VSum>, accumulate<Fp32V, VMin>, accumulate<Fp32V, VMax>},
        {accumulate<Fp16V, VSum>, accumulate<Fp16V, VMin>, accumulate<Fp16V, VMax>},
        {accumulate<Bf16V, VSum>, accumulate<Bf16V, VMin>, accumulate<Bf16V, VMax>},
        {accumulate<Int32V, VSum>, accumulate<Int32V, VMin>, accumulate<Int32V, VMax>},
        {accumulate<Fp64V, VSum>, accumulate<Fp64V, VMin>, accumulate<Fp64V, VMax>},
    },
    {copy_finish<Fp32Elem>, narrow_finish<Fp16V>, narrow_finish<Bf16V>, copy_finish<Int32Elem>, copy_finish<Fp64Elem>},
};

}  // namespace sumcast::kernels::internal
