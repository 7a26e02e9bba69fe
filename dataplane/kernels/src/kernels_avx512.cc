// The AVX-512 (F/BW/VL/DQ) variant: 16 fp32/int32 or 8 fp64 accumulator lanes per zmm, 4 vectors
// per iteration, then single vectors, then one masked vector for the tail (masked-off lanes are
// neither read nor written, so a tail never touches bytes past the end). Compiled with its own
// -mavx512* flags (see CMakeLists.txt); reached only through kAvx512Table after
// cpu_supports(Isa::kAvx512).

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports once inlined (a known GCC 12 false positive); the warning is silenced for that header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "kernels_internal.h"
#include "scalar_ops.h"

namespace sumcast::kernels::internal {
namespace {

// Round-to-nearest-even whatever MXCSR says, no exceptions.
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// --- per-dtype vector traits: wire bytes <-> one zmm of accumulator lanes -----------------------

struct F32Acc {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr size_t kLanes = 16;
  static V load(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static V load(const uint8_t* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(uint8_t* p, V v) { _mm512_storeu_ps(p, v); }
  static void store(uint8_t* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
};

struct Fp32V : F32Acc {
  using Elem = Fp32Elem;
  static V widen(const uint8_t* p) { return load(p); }
  static V widen(const uint8_t* p, Mask m) { return load(p, m); }
};

struct Fp16V : F32Acc {
  using Elem = Fp16Elem;
  static V widen(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static V widen(const uint8_t* p, Mask m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
  static __m256i to_wire(V v) { return _mm512_cvtps_ph(v, kRne); }
};

struct Bf16V : F32Acc {
  using Elem = Bf16Elem;
  static V from_bits(__m256i w) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w), 16)); }
  static V widen(const uint8_t* p) { return from_bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static V widen(const uint8_t* p, Mask m) { return from_bits(_mm256_maskz_loadu_epi16(m, p)); }
  // Same arithmetic as float_to_bf16_inline, 16 lanes at a time. (vcvtneps2bf16 would flush
  // subnormals to zero, so it is not used.)
  static __m256i to_wire(V v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i hi = _mm512_srli_epi32(u, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i r = _mm512_mask_or_epi32(rounded, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
  }
};

// fp16/bf16 wire stores: 16 x 16 bits.
struct Half16Store {
  static void store_wire(uint8_t* p, __m256i w) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), w); }
  static void store_wire(uint8_t* p, __mmask16 m, __m256i w) { _mm256_mask_storeu_epi16(p, m, w); }
};
struct Fp16Out : Fp16V, Half16Store {};
struct Bf16Out : Bf16V, Half16Store {};

struct Int32V {
  using Elem = Int32Elem;
  using V = __m512i;
  using Mask = __mmask16;
  static constexpr size_t kLanes = 16;
  static V load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static V load(const uint8_t* p, Mask m) { return _mm512_maskz_loadu_epi32(m, p); }
  static void store(uint8_t* p, V v) { _mm512_storeu_si512(p, v); }
  static void store(uint8_t* p, Mask m, V v) { _mm512_mask_storeu_epi32(p, m, v); }
  static V widen(const uint8_t* p) { return load(p); }
  static V widen(const uint8_t* p, Mask m) { return load(p, m); }
};

struct Fp64V {
  using Elem = Fp64Elem;
  using V = __m512d;
  using Mask = __mmask8;
  static constexpr size_t kLanes = 8;
  static V load(const uint8_t* p) { return _mm512_loadu_pd(p); }
  static V load(const uint8_t* p, Mask m) { return _mm512_maskz_loadu_pd(m, p); }
  static void store(uint8_t* p, V v) { _mm512_storeu_pd(p, v); }
  static void store(uint8_t* p, Mask m, V v) { _mm512_mask_storeu_pd(p, m, v); }
  static V widen(const uint8_t* p) { return load(p); }
  static V widen(const uint8_t* p, Mask m) { return load(p, m); }
};

// --- ops (kernels.h semantics; see OpMin/OpMax in scalar_ops.h) --------------------------------
// min/max: vrangeps/pd with imm 0b01xx selects min (00) or max (01) and takes the sign from the
// comparison, which orders -0 < +0; it does not propagate NaN, so lanes where either operand is
// NaN get a + b instead (a quiet NaN from a NaN operand).

struct VSum {
  static __m512 apply(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512d apply(__m512d a, __m512d b) { return _mm512_add_pd(a, b); }
  static __m512i apply(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }
};

template <int kImm>
struct VRange {
  static __m512 apply(__m512 a, __m512 b) {
    return _mm512_mask_add_ps(_mm512_range_ps(a, b, kImm), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
  }
  static __m512d apply(__m512d a, __m512d b) {
    return _mm512_mask_add_pd(_mm512_range_pd(a, b, kImm), _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q), a, b);
  }
};
struct VMin : VRange<0x04> {
  using VRange<0x04>::apply;
  static __m512i apply(__m512i a, __m512i b) { return _mm512_min_epi32(a, b); }
};
struct VMax : VRange<0x05> {
  using VRange<0x05>::apply;
  static __m512i apply(__m512i a, __m512i b) { return _mm512_max_epi32(a, b); }
};

template <class T>
typename T::Mask tail_mask(size_t r) {  // r < kLanes
  return static_cast<typename T::Mask>((1u << r) - 1u);
}

// --- loops -----------------------------------------------------------------------------------

// The hot loop: 4 zmm per iteration, source loads first. Measured with sumcast_bench_kernels
// (perf/kernels; accumulator 64-byte aligned, source 30 bytes past a line as a payload in an
// mbuf, so every 64-byte source load splits a line) on one core of the shared 2-vCPU Xeon test
// VM (Sapphire Rapids class), taskset, median of 5; GB/s (1e9) of source consumed per second and
// the ratio to memcpy of the same source bytes in the same run:
//              16 KiB (L1)      256 KiB (L2)     64 MiB (DRAM)
//   memcpy     169              45.9             6.6
//   fp32 sum   133   (0.79x)    48.5  (1.06x)    7.4  (1.12x)
//   fp16 sum    63   (0.37x)    27.2  (0.59x)    4.2  (0.63x)
//   bf16 sum    61   (0.36x)    27.1  (0.59x)    4.7  (0.70x)
//   int32 sum  138   (0.81x)    51.3  (1.12x)    7.6  (1.14x)
//   fp64 sum   143   (0.84x)    50.3  (1.10x)    7.4  (1.11x)
// fp16/bf16 read and write 4 accumulator bytes per 2 source bytes, so about 0.6x is their L2
// ceiling. 256-bit vectors (the AVX2 table) were ~10% faster at L2 on this machine but ~30%
// slower at L1; deeper unrolling and software prefetch did not help.
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
  if (i < n) {
    const auto m = tail_mask<T>(n - i);
    T::store(a + i * kAccSize, m, Op::apply(T::load(a + i * kAccSize, m), T::widen(s + i * kSrcSize, m)));
  }
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
  if (i < n) {
    const auto m = tail_mask<T>(n - i);
    T::store(a + i * kAccSize, m, T::widen(s + i * kSrcSize, m));
  }
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
    T::store_wire(d + i * kDstSize, T::to_wire(T::load(a + i * kAccSize)));
    T::store_wire(d + (i + kW) * kDstSize, T::to_wire(T::load(a + (i + kW) * kAccSize)));
  }
  for (; i + kW <= n; i += kW) T::store_wire(d + i * kDstSize, T::to_wire(T::load(a + i * kAccSize)));
  if (i < n) {
    const auto m = tail_mask<T>(n - i);
    T::store_wire(d + i * kDstSize, m, T::to_wire(T::load(a + i * kAccSize, m)));
  }
}

}  // namespace

// Rows in wire::Dtype order, columns in wire::ReduceOp order (static_asserts in kernels_scalar.cc).
extern const KernelTable kAvx512Table = {
    Isa::kAvx512,
    {copy_load<Fp32Elem>, widen_load<Fp16V>, widen_load<Bf16V>, copy_load<Int32Elem>, copy_load<Fp64Elem>},
    {
        {accumulate<Fp32V, VSum>, accumulate<Fp32V, VMin>, accumulate<Fp32V, VMax>},
        {accumulate<Fp16V, VSum>, accumulate<Fp16V, VMin>, accumulate<Fp16V, VMax>},
        {accumulate<Bf16V, VSum>, accumulate<Bf16V, VMin>, accumulate<Bf16V, VMax>},
        {accumulate<Int32V, VSum>, accumulate<Int32V, VMin>, accumulate<Int32V, VMax>},
        {accumulate<Fp64V, VSum>, accumulate<Fp64V, VMin>, accumulate<Fp64V, VMax>},
    },
    {copy_finish<Fp32Elem>, narrow_finish<Fp16Out>, narrow_finish<Bf16Out>, copy_finish<Int32Elem>,
     copy_finish<Fp64Elem>},
};

}  // namespace sumcast::kernels::internal
