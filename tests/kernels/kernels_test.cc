// Every kernel of every ISA this CPU supports, against an fp64 reference (reference.h) and
// against the scalar variant: all dtypes x ops, load and finish, lengths around the vector and
// unroll widths, unaligned buffers, special values, exhaustive widening, narrowing sweeps, and
// no access past either end.
#include "sumcast/kernels/kernels.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "reference.h"

namespace sumcast::kernels {

// Test names and messages show "avx512", not "1-byte object <02>" (found by ADL).
void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }  // NOLINT(readability-identifier-naming)

namespace {

using testing::bf16_is_nan;
using testing::bits_of;
using testing::double_of;
using testing::float_of;
using testing::half_is_nan;
using testing::hex;
using wire::Dtype;
using wire::ReduceOp;

constexpr Dtype kDtypes[] = {Dtype::kFp32, Dtype::kFp16, Dtype::kBf16, Dtype::kInt32, Dtype::kFp64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax};
constexpr size_t kLengths[] = {0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 257, 100003};
// (source offset, accumulator offset) in bytes from a 64-byte boundary; 30 is where a payload
// lands in an mbuf (headroom 128 + wire::kPayloadOffset 94).
constexpr std::pair<size_t, size_t> kOffsets[] = {{0, 0}, {30, 0},  {1, 0},   {63, 0}, {0, 1},
                                                  {2, 4}, {30, 60}, {63, 63}, {3, 17}};

size_t wire_size(Dtype d) { return wire::dtype_size(d); }
size_t acc_size(Dtype d) { return wire::accumulator_size(d); }
std::string describe(Dtype d, ReduceOp op, size_t n, size_t src_off, size_t acc_off) {
  return std::string(wire::dtype_name(d)) + " " + wire::reduce_op_name(op) + " n=" + std::to_string(n) + " src+" +
         std::to_string(src_off) + " acc+" + std::to_string(acc_off);
}

// Bytes at `offset` past a 64-byte boundary, with canary bytes before and after that must survive.
class Buffer {
 public:
  static constexpr size_t kGuard = 128;
  static constexpr uint8_t kCanary = 0xA5;

  Buffer(size_t bytes, size_t offset)
      : bytes_(bytes), offset_(offset), storage_(new uint8_t[kGuard + 64 + offset + bytes + kGuard]) {
    const auto base = reinterpret_cast<uintptr_t>(storage_.get()) + kGuard;
    data_ = reinterpret_cast<uint8_t*>((base + 63) / 64 * 64 + offset);
    std::memset(storage_.get(), kCanary, kGuard + 64 + offset + bytes + kGuard);
  }
  Buffer(const std::vector<uint8_t>& contents, size_t offset) : Buffer(contents.size(), offset) {
    if (!contents.empty()) std::memcpy(data_, contents.data(), contents.size());
  }
  uint8_t* data() { return data_; }
  std::vector<uint8_t> contents() const { return {data_, data_ + bytes_}; }
  ::testing::AssertionResult guards_intact() const {
    const uint8_t* begin = storage_.get();
    const uint8_t* end = data_ + bytes_ + kGuard;
    for (const uint8_t* p = begin; p < end; ++p) {
      if (p == data_) p += bytes_;
      if (p < end && *p != kCanary) {
        return ::testing::AssertionFailure() << "byte " << (p - data_) << " outside the buffer (" << bytes_
                                             << " bytes at +" << offset_ << ") was written";
      }
    }
    return ::testing::AssertionSuccess();
  }

 private:
  size_t bytes_;
  size_t offset_;
  std::unique_ptr<uint8_t[]> storage_;
  uint8_t* data_ = nullptr;
};

// --- random inputs with special values mixed in ----------------------------------------------

template <class T>
void put(std::vector<uint8_t>& v, size_t i, T x) {
  std::memcpy(v.data() + i * sizeof(T), &x, sizeof(T));
}
template <class T>
T get(const uint8_t* p, size_t i) {
  T x;
  std::memcpy(&x, p + i * sizeof(T), sizeof(T));
  return x;
}

constexpr uint32_t kSpecialF32[] = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
                                    0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000};
constexpr uint64_t kSpecialF64[] = {0x0ull,
                                    0x8000000000000000ull,
                                    0x7FF0000000000000ull,
                                    0xFFF0000000000000ull,
                                    0x7FF8000000000000ull,
                                    0xFFF8000000000001ull,
                                    0x7FF0000000000001ull,
                                    0x0000000000000001ull,
                                    0x800FFFFFFFFFFFFFull,
                                    0x7FEFFFFFFFFFFFFFull,
                                    0x3FF0000000000000ull};
constexpr uint16_t kSpecialF16[] = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01,
                                    0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00};
constexpr uint16_t kSpecialBf16[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81,
                                     0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80};

template <class Array>
auto pick(const Array& a, std::mt19937_64& rng) {
  return a[rng() % std::size(a)];
}

uint32_t random_f32_bits(std::mt19937_64& rng) {
  const uint64_t r = rng();
  switch (r % 16) {
    case 0:
      return pick(kSpecialF32, rng);
    case 1:
      return static_cast<uint32_t>(rng() & 0x81FFFFFFu);  // subnormals and tiny normals
    case 2:
      return static_cast<uint32_t>((rng() & 0x807FFFFFu) | (0xFDu << 23));  // near overflow
    default: {
      const auto exponent = static_cast<uint32_t>(127 - 12 + (r >> 8) % 25);
      return static_cast<uint32_t>((rng() & 0x807FFFFFu) | (exponent << 23));
    }
  }
}
uint64_t random_f64_bits(std::mt19937_64& rng) {
  const uint64_t r = rng();
  switch (r % 16) {
    case 0:
      return pick(kSpecialF64, rng);
    case 1:
      return rng() & 0x801FFFFFFFFFFFFFull;
    case 2:
      return (rng() & 0x800FFFFFFFFFFFFFull) | (0x7FEull << 52);
    default:
      return (rng() & 0x800FFFFFFFFFFFFFull) | ((1023 - 30 + (r >> 8) % 61) << 52);
  }
}
uint16_t random_f16_bits(std::mt19937_64& rng) {
  const uint64_t r = rng();
  switch (r % 16) {
    case 0:
      return pick(kSpecialF16, rng);
    case 1:
      return static_cast<uint16_t>(rng());
    default:
      return static_cast<uint16_t>((rng() & 0x83FF) | ((4 + (r >> 8) % 24) << 10));
  }
}
uint16_t random_bf16_bits(std::mt19937_64& rng) {
  const uint64_t r = rng();
  switch (r % 16) {
    case 0:
      return pick(kSpecialBf16, rng);
    case 1:
      return static_cast<uint16_t>(rng());
    default:
      return static_cast<uint16_t>((rng() & 0x807F) | ((127 - 12 + (r >> 8) % 25) << 7));
  }
}
int32_t random_i32(std::mt19937_64& rng) {
  constexpr int32_t kSpecial[] = {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), -1, 0, 1};
  const uint64_t r = rng();
  if (r % 8 == 0) return pick(kSpecial, rng);
  return static_cast<int32_t>(static_cast<uint32_t>(r >> 16));
}

std::vector<uint8_t> random_wire(Dtype d, size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> v(n * wire_size(d));
  for (size_t i = 0; i < n; ++i) {
    switch (d) {
      case Dtype::kFp32:
        put(v, i, random_f32_bits(rng));
        break;
      case Dtype::kFp16:
        put(v, i, random_f16_bits(rng));
        break;
      case Dtype::kBf16:
        put(v, i, random_bf16_bits(rng));
        break;
      case Dtype::kInt32:
        put(v, i, random_i32(rng));
        break;
      case Dtype::kFp64:
        put(v, i, random_f64_bits(rng));
        break;
    }
  }
  return v;
}
std::vector<uint8_t> random_acc(Dtype d, size_t n, std::mt19937_64& rng) {
  if (d == Dtype::kFp16 || d == Dtype::kBf16) return random_wire(Dtype::kFp32, n, rng);
  return random_wire(d, n, rng);
}

// --- the reference -------------------------------------------------------------------------

// Widening by the reference; NaNs as the kernels define them (fp16 quieted, bf16 shifted).
float ref_widen_f16(uint16_t h) {
  return half_is_nan(h) ? float_of(testing::ref_half_nan_as_float_bits(h))
                        : static_cast<float>(testing::ref_half_value(h));
}
float ref_widen_bf16(uint16_t b) {
  return bf16_is_nan(b) ? float_of(static_cast<uint32_t>(b) << 16) : static_cast<float>(testing::ref_bf16_value(b));
}

// a op b in fp64 (exact for fp32 operands; one rounding to fp32 afterwards is then correct).
double ref_op(ReduceOp op, double a, double b) {
  if (op == ReduceOp::kSum) return a + b;
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) {  // includes -0 == +0: min takes the negative one, max the positive one
    const bool a_negative = std::signbit(a);
    if (op == ReduceOp::kMin) return a_negative ? a : b;
    return a_negative ? b : a;
  }
  if (op == ReduceOp::kMin) return a < b ? a : b;
  return a > b ? a : b;
}
int32_t ref_op(ReduceOp op, int32_t a, int32_t b) {
  const int64_t x = a;
  const int64_t y = b;
  switch (op) {
    case ReduceOp::kSum: {
      int64_t s = (x + y) & 0xFFFFFFFF;  // two's complement wrap
      if (s > std::numeric_limits<int32_t>::max()) s -= int64_t{1} << 32;
      return static_cast<int32_t>(s);
    }
    case ReduceOp::kMin:
      return static_cast<int32_t>(std::min(x, y));
    case ReduceOp::kMax:
      return static_cast<int32_t>(std::max(x, y));
  }
  return 0;
}

// got must equal want bit for bit; when want is NaN, got must be a quiet NaN and, if an
// operand was NaN, that operand quieted (either one when both were).
template <class F, class U>
bool fp_result_ok(F got, F want, F a, F b) {
  constexpr U kQuiet = U{1} << (std::numeric_limits<F>::digits - 2);
  const U g = bits_of(got);
  if (!std::isnan(want)) return g == bits_of(want);
  if (!std::isnan(got) || (g & kQuiet) == 0) return false;
  if (!std::isnan(a) && !std::isnan(b)) return true;
  return (std::isnan(a) && g == (bits_of(a) | kQuiet)) || (std::isnan(b) && g == (bits_of(b) | kQuiet));
}

// Checks out == acc_in op widen(src), element by element, by the fp64 reference.
::testing::AssertionResult accumulate_matches_reference(Dtype d, ReduceOp op, const std::vector<uint8_t>& acc_in,
                                                        const std::vector<uint8_t>& src,
                                                        const std::vector<uint8_t>& out, size_t n) {
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < n; ++i) {
    bool ok = true;
    std::string what;
    if (d == Dtype::kInt32) {
      const auto a = get<int32_t>(acc_in.data(), i);
      const auto x = get<int32_t>(src.data(), i);
      const auto g = get<int32_t>(out.data(), i);
      ok = g == ref_op(op, a, x);
      what = std::to_string(a) + " op " + std::to_string(x) + " -> " + std::to_string(g);
    } else if (d == Dtype::kFp64) {
      const auto a = get<double>(acc_in.data(), i);
      const auto x = get<double>(src.data(), i);
      const auto g = get<double>(out.data(), i);
      ok = fp_result_ok<double, uint64_t>(g, ref_op(op, a, x), a, x);
      what = hex(bits_of(a)) + " op " + hex(bits_of(x)) + " -> " + hex(bits_of(g));
    } else {
      const auto a = get<float>(acc_in.data(), i);
      float x = 0;
      switch (d) {
        case Dtype::kFp16:
          x = ref_widen_f16(get<uint16_t>(src.data(), i));
          break;
        case Dtype::kBf16:
          x = ref_widen_bf16(get<uint16_t>(src.data(), i));
          break;
        default:
          x = get<float>(src.data(), i);
          break;
      }
      const auto g = get<float>(out.data(), i);
      const auto want = static_cast<float>(ref_op(op, static_cast<double>(a), static_cast<double>(x)));
      ok = fp_result_ok<float, uint32_t>(g, want, a, x);
      what = hex(bits_of(a)) + " op " + hex(bits_of(x)) + " -> " + hex(bits_of(g)) + ", want " + hex(bits_of(want));
    }
    if (!ok && bad++ == 0) first = "element " + std::to_string(i) + ": " + what;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " wrong; first at " << first;
}

// Same bytes as the scalar variant, except that two NaNs (of the accumulator type) need not
// carry the same payload (fp_result_ok already pins down which payloads are allowed).
::testing::AssertionResult same_as_scalar(Dtype d, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                                          size_t n) {
  for (size_t i = 0; i < n; ++i) {
    bool ok;
    if (d == Dtype::kInt32) {
      ok = get<int32_t>(got.data(), i) == get<int32_t>(want.data(), i);
    } else if (d == Dtype::kFp64) {
      const auto g = get<double>(got.data(), i);
      const auto w = get<double>(want.data(), i);
      ok = (std::isnan(g) && std::isnan(w)) || bits_of(g) == bits_of(w);
    } else {
      const auto g = get<float>(got.data(), i);
      const auto w = get<float>(want.data(), i);
      ok = (std::isnan(g) && std::isnan(w)) || bits_of(g) == bits_of(w);
    }
    if (!ok) return ::testing::AssertionFailure() << "differs from scalar at element " << i;
  }
  return ::testing::AssertionSuccess();
}

// acc == widen(src) by the reference, bit for bit.
::testing::AssertionResult load_matches_reference(Dtype d, const std::vector<uint8_t>& src,
                                                  const std::vector<uint8_t>& acc, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    bool ok;
    if (d == Dtype::kFp16)
      ok = bits_of(get<float>(acc.data(), i)) == bits_of(ref_widen_f16(get<uint16_t>(src.data(), i)));
    else if (d == Dtype::kBf16)
      ok = bits_of(get<float>(acc.data(), i)) == bits_of(ref_widen_bf16(get<uint16_t>(src.data(), i)));
    else
      ok = std::memcmp(acc.data() + i * acc_size(d), src.data() + i * wire_size(d), acc_size(d)) == 0;
    if (!ok) return ::testing::AssertionFailure() << "element " << i << " widened wrong";
  }
  return ::testing::AssertionSuccess();
}

// dst == narrow(acc) by the reference (round-to-nearest-even by fp64 arithmetic for fp16/bf16).
::testing::AssertionResult finish_matches_reference(Dtype d, const std::vector<uint8_t>& acc,
                                                    const std::vector<uint8_t>& dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (d == Dtype::kFp16 || d == Dtype::kBf16) {
      const auto f = get<float>(acc.data(), i);
      const auto g = get<uint16_t>(dst.data(), i);
      auto r =
          d == Dtype::kFp16 ? testing::half_rounds_like_reference(f, g) : testing::bf16_rounds_like_reference(f, g);
      if (!r) return r << " (element " << i << ")";
    } else if (std::memcmp(dst.data() + i * wire_size(d), acc.data() + i * acc_size(d), acc_size(d)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << " not copied";
    }
  }
  return ::testing::AssertionSuccess();
}

// --- the fixture: one instance per ISA, skipped where the CPU lacks it ---------------------

class KernelsTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!cpu_supports(GetParam())) GTEST_SKIP() << isa_name(GetParam()) << " not supported by this CPU";
    table_ = kernels_for(GetParam());
    scalar_ = kernels_for(Isa::kScalar);
    ASSERT_NE(table_, nullptr);
    ASSERT_NE(scalar_, nullptr);
  }

  static int di(Dtype d) { return static_cast<int>(d); }
  static int oi(ReduceOp op) { return static_cast<int>(op); }

  // Runs accumulate on copies placed at the given offsets; checks reference, scalar and guards.
  void check_accumulate(Dtype d, ReduceOp op, size_t n, size_t src_off, size_t acc_off, std::mt19937_64& rng) {
    SCOPED_TRACE(describe(d, op, n, src_off, acc_off));
    const std::vector<uint8_t> src = random_wire(d, n, rng);
    const std::vector<uint8_t> acc_in = random_acc(d, n, rng);
    Buffer src_buf(src, src_off);
    Buffer acc_buf(acc_in, acc_off);
    table_->accumulate[di(d)][oi(op)](acc_buf.data(), src_buf.data(), n);
    const std::vector<uint8_t> out = acc_buf.contents();
    EXPECT_TRUE(acc_buf.guards_intact());
    EXPECT_TRUE(src_buf.guards_intact());
    EXPECT_EQ(src_buf.contents(), src) << "source modified";
    EXPECT_TRUE(accumulate_matches_reference(d, op, acc_in, src, out, n));
    std::vector<uint8_t> scalar_out = acc_in;
    scalar_->accumulate[di(d)][oi(op)](scalar_out.data(), src.data(), n);
    EXPECT_TRUE(same_as_scalar(d, out, scalar_out, n));
  }

  void check_load(Dtype d, const std::vector<uint8_t>& src, size_t n, size_t src_off, size_t acc_off) {
    SCOPED_TRACE(describe(d, ReduceOp::kSum, n, src_off, acc_off) + " (load)");
    Buffer src_buf(src, src_off);
    Buffer acc_buf(n * acc_size(d), acc_off);
    table_->load[di(d)](acc_buf.data(), src_buf.data(), n);
    EXPECT_TRUE(acc_buf.guards_intact());
    EXPECT_TRUE(load_matches_reference(d, src, acc_buf.contents(), n));
  }

  void check_finish(Dtype d, const std::vector<uint8_t>& acc, size_t n, size_t dst_off, size_t acc_off) {
    SCOPED_TRACE(describe(d, ReduceOp::kSum, n, dst_off, acc_off) + " (finish)");
    Buffer acc_buf(acc, acc_off);
    Buffer dst_buf(n * wire_size(d), dst_off);
    table_->finish[di(d)](dst_buf.data(), acc_buf.data(), n);
    EXPECT_TRUE(dst_buf.guards_intact());
    const std::vector<uint8_t> dst = dst_buf.contents();
    EXPECT_TRUE(finish_matches_reference(d, acc, dst, n));
    std::vector<uint8_t> scalar_dst(n * wire_size(d));
    scalar_->finish[di(d)](scalar_dst.data(), acc.data(), n);
    EXPECT_EQ(dst, scalar_dst) << "differs from scalar";
  }

  const KernelTable* table_ = nullptr;
  const KernelTable* scalar_ = nullptr;
};

TEST_P(KernelsTest, TableIsCompleteAndNamesItsIsa) {
  EXPECT_EQ(table_->isa, GetParam());
  for (Dtype d : kDtypes) {
    EXPECT_NE(table_->load[di(d)], nullptr);
    EXPECT_NE(table_->finish[di(d)], nullptr);
    for (ReduceOp op : kOps) EXPECT_NE(table_->accumulate[di(d)][oi(op)], nullptr);
  }
}

TEST_P(KernelsTest, ZeroLengthAcceptsNullPointers) {
  for (Dtype d : kDtypes) {
    table_->load[di(d)](nullptr, nullptr, 0);
    table_->finish[di(d)](nullptr, nullptr, 0);
    for (ReduceOp op : kOps) table_->accumulate[di(d)][oi(op)](nullptr, nullptr, 0);
  }
}

TEST_P(KernelsTest, AccumulateMatchesReferenceAtEveryLength) {
  std::mt19937_64 rng(10);
  for (Dtype d : kDtypes) {
    for (ReduceOp op : kOps) {
      for (size_t n : kLengths) {
        for (const auto& [src_off, acc_off] : kOffsets) {
          check_accumulate(d, op, n, src_off, acc_off, rng);
          if (n > 1000) break;  // the large length once (aligned) is enough
        }
      }
    }
  }
}

TEST_P(KernelsTest, AccumulateMatchesReferenceAtEveryOffset) {
  std::mt19937_64 rng(11);
  for (Dtype d : kDtypes) {
    for (ReduceOp op : kOps) {
      for (size_t k = 0; k < 64; ++k) check_accumulate(d, op, 257, k, (k * 37) % 64, rng);
    }
  }
}

TEST_P(KernelsTest, AccumulateLargeChunkUnaligned) {
  std::mt19937_64 rng(12);
  for (Dtype d : kDtypes) {
    for (ReduceOp op : kOps) check_accumulate(d, op, 100003, 30, 8, rng);
  }
}

TEST_P(KernelsTest, LoadAndFinishMatchReferenceAtEveryLengthAndOffset) {
  std::mt19937_64 rng(13);
  for (Dtype d : kDtypes) {
    for (size_t n : kLengths) {
      for (const auto& [src_off, acc_off] : kOffsets) {
        check_load(d, random_wire(d, n, rng), n, src_off, acc_off);
        check_finish(d, random_acc(d, n, rng), n, src_off, acc_off);
      }
    }
  }
}

TEST_P(KernelsTest, LoadWidensAll65536Fp16AndBf16Patterns) {
  for (Dtype d : {Dtype::kFp16, Dtype::kBf16}) {
    std::vector<uint8_t> src(65536 * 2);
    for (uint32_t h = 0; h < 65536; ++h) put(src, h, static_cast<uint16_t>(h));
    check_load(d, src, 65536, 1, 0);  // odd address: not even 2-byte aligned
    check_load(d, src, 65536, 30, 4);
  }
}

// Accumulating every pattern onto -0 and +0 (x + -0 == x exactly) goes through the same widening.
TEST_P(KernelsTest, AccumulateWidensAll65536Fp16AndBf16Patterns) {
  for (Dtype d : {Dtype::kFp16, Dtype::kBf16}) {
    std::vector<uint8_t> src(65536 * 2);
    for (uint32_t h = 0; h < 65536; ++h) put(src, h, static_cast<uint16_t>(h));
    for (float zero : {-0.0f, 0.0f}) {
      std::vector<uint8_t> acc_in(65536 * 4);
      for (size_t i = 0; i < 65536; ++i) put(acc_in, i, zero);
      for (ReduceOp op : kOps) {
        SCOPED_TRACE(std::string(wire::dtype_name(d)) + " " + wire::reduce_op_name(op));
        Buffer acc_buf(acc_in, 0);
        Buffer src_buf(src, 30);
        table_->accumulate[di(d)][oi(op)](acc_buf.data(), src_buf.data(), 65536);
        EXPECT_TRUE(accumulate_matches_reference(d, op, acc_in, src, acc_buf.contents(), 65536));
      }
    }
  }
}

// fp32 inputs that probe the rounding: every fp16 (bf16) value, the midpoint to the next one and
// the floats either side of that midpoint, both signs; fp32 specials; random bit patterns.
std::vector<uint8_t> narrowing_inputs(Dtype d, std::mt19937_64& rng) {
  std::vector<float> v;
  const int count = d == Dtype::kFp16 ? 0x7C00 : 0x7F80;
  for (int h = 0; h < count; ++h) {
    const auto p = static_cast<uint16_t>(h);
    const double lo = d == Dtype::kFp16 ? testing::ref_half_value(p) : testing::ref_bf16_value(p);
    const double hi = h + 1 == count ? (d == Dtype::kFp16 ? 65536.0 : std::ldexp(1.0, 128))
                                     : (d == Dtype::kFp16 ? testing::ref_half_value(static_cast<uint16_t>(h + 1))
                                                          : testing::ref_bf16_value(static_cast<uint16_t>(h + 1)));
    const auto mid = static_cast<float>((lo + hi) / 2);
    for (float f : {static_cast<float>(lo), mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, std::numeric_limits<float>::infinity())}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  for (uint32_t u : kSpecialF32) v.push_back(float_of(u));
  for (int i = 0; i < (1 << 20); ++i) v.push_back(float_of(static_cast<uint32_t>(rng())));
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

TEST_P(KernelsTest, FinishRoundsFp16AtEveryBoundaryAndOnRandomInputs) {
  std::mt19937_64 rng(14);
  const std::vector<uint8_t> acc = narrowing_inputs(Dtype::kFp16, rng);
  check_finish(Dtype::kFp16, acc, acc.size() / 4, 30, 0);
}

TEST_P(KernelsTest, FinishRoundsBf16AtEveryBoundaryAndOnRandomInputs) {
  std::mt19937_64 rng(15);
  const std::vector<uint8_t> acc = narrowing_inputs(Dtype::kBf16, rng);
  check_finish(Dtype::kBf16, acc, acc.size() / 4, 30, 0);
}

// Hand-worked cases (IEEE 754 and the min/max rules of kernels.h), each repeated over 100 lanes
// so that it lands in the unrolled loop, the single-vector loop and the tail.
struct Special {
  Dtype dtype;
  ReduceOp op;
  uint64_t acc;   // accumulator bits
  uint64_t src;   // wire bits
  uint64_t want;  // accumulator bits
  bool want_nan;  // then `want` is ignored: any quiet NaN
};

constexpr uint64_t kF32NaN = 0x7FC00001;
constexpr uint64_t kF64NaN = 0x7FF8000000000001ull;
constexpr uint64_t kF64NegZero = 0x8000000000000000ull;
constexpr uint64_t kF64One = 0x3FF0000000000000ull;
constexpr uint64_t kF64Inf = 0x7FF0000000000000ull;

constexpr Special kSpecials[] = {
    // fp32 sum: Inf - Inf, NaN in, subnormals not flushed, overflow, signed zeros, ties to even.
    {Dtype::kFp32, ReduceOp::kSum, 0x7F800000, 0xFF800000, 0, true},
    {Dtype::kFp32, ReduceOp::kSum, 0x3F800000, kF32NaN, 0, true},
    {Dtype::kFp32, ReduceOp::kSum, 0x7F800001, 0x3F800000, 0, true},  // signalling NaN in the accumulator
    {Dtype::kFp32, ReduceOp::kSum, 0x00000001, 0x00000001, 0x00000002, false},
    {Dtype::kFp32, ReduceOp::kSum, 0x00800000, 0x80000001, 0x007FFFFF, false},
    {Dtype::kFp32, ReduceOp::kSum, 0x7F7FFFFF, 0x7F7FFFFF, 0x7F800000, false},
    {Dtype::kFp32, ReduceOp::kSum, 0x80000000, 0x80000000, 0x80000000, false},
    {Dtype::kFp32, ReduceOp::kSum, 0x80000000, 0x00000000, 0x00000000, false},
    {Dtype::kFp32, ReduceOp::kSum, 0x3F800000, 0x33800000, 0x3F800000, false},  // 1 + 2^-24: tie, even
    {Dtype::kFp32, ReduceOp::kSum, 0x3F800000, 0x33800001, 0x3F800001, false},
    // fp32 min/max: signed zeros both ways round, NaN on either side, subnormals, infinities.
    {Dtype::kFp32, ReduceOp::kMin, 0x80000000, 0x00000000, 0x80000000, false},
    {Dtype::kFp32, ReduceOp::kMin, 0x00000000, 0x80000000, 0x80000000, false},
    {Dtype::kFp32, ReduceOp::kMax, 0x80000000, 0x00000000, 0x00000000, false},
    {Dtype::kFp32, ReduceOp::kMax, 0x00000000, 0x80000000, 0x00000000, false},
    {Dtype::kFp32, ReduceOp::kMin, kF32NaN, 0x3F800000, 0, true},
    {Dtype::kFp32, ReduceOp::kMin, 0x3F800000, kF32NaN, 0, true},
    {Dtype::kFp32, ReduceOp::kMin, 0xFF800000, kF32NaN, 0, true},
    {Dtype::kFp32, ReduceOp::kMax, kF32NaN, 0x3F800000, 0, true},
    {Dtype::kFp32, ReduceOp::kMax, 0x3F800000, kF32NaN, 0, true},
    {Dtype::kFp32, ReduceOp::kMax, 0x7F800000, kF32NaN, 0, true},
    {Dtype::kFp32, ReduceOp::kMin, 0x00000001, 0x00000000, 0x00000000, false},
    {Dtype::kFp32, ReduceOp::kMin, 0x80000001, 0x00000000, 0x80000001, false},
    {Dtype::kFp32, ReduceOp::kMax, 0x00000001, 0x80000000, 0x00000001, false},
    {Dtype::kFp32, ReduceOp::kMin, 0xFF800000, 0x7F800000, 0xFF800000, false},
    {Dtype::kFp32, ReduceOp::kMax, 0xBF800000, 0xC0000000, 0xBF800000, false},
    // fp16 contributions (fp32 accumulator).
    {Dtype::kFp16, ReduceOp::kSum, 0x00000000, 0x0001, 0x33800000, false},  // 2^-24
    {Dtype::kFp16, ReduceOp::kSum, 0x80000000, 0x8000, 0x80000000, false},
    {Dtype::kFp16, ReduceOp::kSum, 0x477FE000, 0x7BFF, 0x47FFE000, false},  // 65504 + 65504 stays finite in fp32
    {Dtype::kFp16, ReduceOp::kSum, 0x3F800000, 0x7C00, 0x7F800000, false},
    {Dtype::kFp16, ReduceOp::kSum, 0x7F800000, 0xFC00, 0, true},
    {Dtype::kFp16, ReduceOp::kSum, 0x3F800000, 0x7E00, 0, true},
    {Dtype::kFp16, ReduceOp::kSum, 0x3F800000, 0x7C01, 0, true},  // signalling fp16 NaN
    {Dtype::kFp16, ReduceOp::kMin, 0x00000000, 0x8000, 0x80000000, false},
    {Dtype::kFp16, ReduceOp::kMax, 0x80000000, 0x0000, 0x00000000, false},
    {Dtype::kFp16, ReduceOp::kMin, 0x3F800000, 0x7E00, 0, true},
    {Dtype::kFp16, ReduceOp::kMax, kF32NaN, 0x3C00, 0, true},
    {Dtype::kFp16, ReduceOp::kMin, 0x3F800000, 0x83FF, 0xB87FC000, false},  // largest negative subnormal
    // bf16 contributions.
    {Dtype::kBf16, ReduceOp::kSum, 0x00000000, 0x0001, 0x00010000, false},  // 2^-133, an fp32 subnormal
    {Dtype::kBf16, ReduceOp::kSum, 0x3F800000, 0x7F80, 0x7F800000, false},
    {Dtype::kBf16, ReduceOp::kSum, 0x3F800000, 0x7FC0, 0, true},
    {Dtype::kBf16, ReduceOp::kSum, 0x3F800000, 0x7F81, 0, true},
    {Dtype::kBf16, ReduceOp::kMin, 0x00000000, 0x8000, 0x80000000, false},
    {Dtype::kBf16, ReduceOp::kMax, 0x80000000, 0x0000, 0x00000000, false},
    {Dtype::kBf16, ReduceOp::kMax, 0x3F800000, 0xFFC0, 0, true},
    // int32: wraps, extremes.
    {Dtype::kInt32, ReduceOp::kSum, 0x7FFFFFFF, 0x00000001, 0x80000000, false},
    {Dtype::kInt32, ReduceOp::kSum, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFF, false},
    {Dtype::kInt32, ReduceOp::kSum, 0xFFFFFFFF, 0x00000001, 0x00000000, false},
    {Dtype::kInt32, ReduceOp::kMin, 0x80000000, 0x00000000, 0x80000000, false},
    {Dtype::kInt32, ReduceOp::kMin, 0xFFFFFFFF, 0x00000001, 0xFFFFFFFF, false},
    {Dtype::kInt32, ReduceOp::kMax, 0xFFFFFFFF, 0x00000000, 0x00000000, false},
    {Dtype::kInt32, ReduceOp::kMax, 0x7FFFFFFF, 0x80000000, 0x7FFFFFFF, false},
    // fp64.
    {Dtype::kFp64, ReduceOp::kSum, kF64Inf, kF64Inf | kF64NegZero, 0, true},
    {Dtype::kFp64, ReduceOp::kSum, kF64One, kF64NaN, 0, true},
    {Dtype::kFp64, ReduceOp::kSum, 1, 1, 2, false},
    {Dtype::kFp64, ReduceOp::kSum, kF64NegZero, kF64NegZero, kF64NegZero, false},
    {Dtype::kFp64, ReduceOp::kSum, 0x7FEFFFFFFFFFFFFFull, 0x7FEFFFFFFFFFFFFFull, kF64Inf, false},
    {Dtype::kFp64, ReduceOp::kMin, kF64NegZero, 0, kF64NegZero, false},
    {Dtype::kFp64, ReduceOp::kMin, 0, kF64NegZero, kF64NegZero, false},
    {Dtype::kFp64, ReduceOp::kMax, kF64NegZero, 0, 0, false},
    {Dtype::kFp64, ReduceOp::kMax, 0, kF64NegZero, 0, false},
    {Dtype::kFp64, ReduceOp::kMin, kF64NaN, kF64One, 0, true},
    {Dtype::kFp64, ReduceOp::kMin, kF64One, kF64NaN, 0, true},
    {Dtype::kFp64, ReduceOp::kMax, kF64NaN, kF64One, 0, true},
    {Dtype::kFp64, ReduceOp::kMax, kF64One, kF64NaN, 0, true},
    {Dtype::kFp64, ReduceOp::kMin, 1 | kF64NegZero, 0, 1 | kF64NegZero, false},
};

TEST_P(KernelsTest, SpecialValuesInEveryLane) {
  constexpr size_t kN = 100;
  for (const Special& s : kSpecials) {
    SCOPED_TRACE(std::string(wire::dtype_name(s.dtype)) + " " + wire::reduce_op_name(s.op) + " acc " + hex(s.acc) +
                 " src " + hex(s.src));
    const size_t as = acc_size(s.dtype);
    const size_t ws = wire_size(s.dtype);
    std::vector<uint8_t> acc(kN * as);
    std::vector<uint8_t> src(kN * ws);
    for (size_t i = 0; i < kN; ++i) {
      std::memcpy(acc.data() + i * as, &s.acc, as);  // little-endian: the low bytes
      std::memcpy(src.data() + i * ws, &s.src, ws);
    }
    Buffer acc_buf(acc, 0);
    Buffer src_buf(src, 30);
    table_->accumulate[di(s.dtype)][oi(s.op)](acc_buf.data(), src_buf.data(), kN);
    const std::vector<uint8_t> out = acc_buf.contents();
    for (size_t i = 0; i < kN; ++i) {
      uint64_t got = 0;
      std::memcpy(&got, out.data() + i * as, as);
      if (s.want_nan) {
        const bool nan = as == 4 ? std::isnan(float_of(static_cast<uint32_t>(got))) : std::isnan(double_of(got));
        const uint64_t quiet = as == 4 ? 0x00400000u : 0x0008000000000000ull;
        ASSERT_TRUE(nan && (got & quiet) != 0) << "lane " << i << ": " << hex(got) << " is not a quiet NaN";
      } else {
        ASSERT_EQ(got, s.want) << "lane " << i << ": " << hex(got) << ", want " << hex(s.want);
      }
    }
  }
}

// Buffers that end exactly where an inaccessible page begins: a kernel that reads or writes one
// byte past the end of its source, accumulator or destination crashes the test.
class GuardedRegion {
 public:
  GuardedRegion() : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    size_ = 2 * page_;
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    base_ = static_cast<uint8_t*>(p);
    if (mprotect(base_ + page_, page_, PROT_NONE) != 0) {
      munmap(base_, size_);
      base_ = nullptr;
    }
  }
  ~GuardedRegion() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  GuardedRegion(const GuardedRegion&) = delete;
  GuardedRegion& operator=(const GuardedRegion&) = delete;
  bool ok() const { return base_ != nullptr; }
  size_t capacity() const { return page_; }
  uint8_t* ending_at_guard(size_t bytes) { return base_ + page_ - bytes; }

 private:
  size_t page_;
  size_t size_ = 0;
  uint8_t* base_ = nullptr;
};

TEST_P(KernelsTest, NeverTouchesBytesPastTheEnd) {
  GuardedRegion src_region;
  GuardedRegion acc_region;
  ASSERT_TRUE(src_region.ok() && acc_region.ok());
  std::mt19937_64 rng(16);
  for (Dtype d : kDtypes) {
    for (size_t n = 1; n <= 257; n = n < 80 ? n + 1 : n + 59) {
      ASSERT_LE(n * 8, acc_region.capacity());
      SCOPED_TRACE(std::string(wire::dtype_name(d)) + " n=" + std::to_string(n));
      const std::vector<uint8_t> src = random_wire(d, n, rng);
      uint8_t* s = src_region.ending_at_guard(src.size());
      uint8_t* a = acc_region.ending_at_guard(n * acc_size(d));
      std::memcpy(s, src.data(), src.size());
      table_->load[di(d)](a, s, n);
      for (ReduceOp op : kOps) table_->accumulate[di(d)][oi(op)](a, s, n);
      table_->finish[di(d)](src_region.ending_at_guard(n * wire_size(d)), a, n);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, KernelsTest, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
                         [](const ::testing::TestParamInfo<Isa>& param_info) {
                           return std::string(isa_name(param_info.param));
                         });

}  // namespace
}  // namespace sumcast::kernels
