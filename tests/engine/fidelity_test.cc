// Numerical fidelity of the engine (docs/fidelity.md), as properties over random data fed through
// the in-memory port in shuffled arrival orders with duplicates and retransmissions:
//   - default mode: fp16/bf16 (and fp32) sums are within the bound of one fp32 accumulation plus
//     one final rounding of the exact sum (computed here in fp64, every addition checked exact by
//     TwoSum); the test prints how a simulated ring all-reduce in the same dtype (n - 1 roundings)
//     compares;
//   - deterministic mode: identical bits across 100 arrival orders for fp16, bf16, fp32 and fp64,
//     equal to the rank-order fold computed here from the definition;
//   - deterministic mode's staging memory is allocated (and refused) at registration.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sumcast/endian.h"
#include "sumcast/engine/engine.h"
#include "sumcast/engine/memory_port.h"
#include "sumcast/engine/testing.h"
#include "sumcast/kernels/kernels.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast::engine {
namespace {

using wire::Dtype;
using wire::ReduceOp;

constexpr uint8_t kApplianceMac[6] = {0x02, 0x53, 0x43, 0x00, 0x00, 0x01};
constexpr uint32_t kApplianceIp = 0x0A000001;
constexpr uint16_t kPayload = 1024;

EngineOptions appliance() {
  EngineOptions o;
  std::memcpy(o.local_mac, kApplianceMac, 6);
  o.local_ip = kApplianceIp;
  o.max_ranks = 256;
  return o;
}

JobSpec job_spec(Dtype dtype, uint32_t world, bool deterministic, uint16_t slots = 2) {
  JobSpec j;
  j.job_id = 7;
  j.qkey = 0x51000007u;
  j.dtype = dtype;
  j.op = ReduceOp::kSum;
  j.slot_count = slots;
  j.max_payload_bytes = kPayload;
  j.deterministic = deterministic;
  for (uint32_t r = 0; r < world; ++r) {
    Member m;
    const uint8_t mac[6] = {0x02, 0x57, 0x4B, 0x00, static_cast<uint8_t>(r >> 8), static_cast<uint8_t>(r)};
    std::memcpy(m.mac, mac, 6);
    m.ip = 0x0A010000 + r + 1;
    m.udp_port = static_cast<uint16_t>(50000 + r);
    m.qpn = 0x001000 + r;
    j.members.push_back(m);
  }
  return j;
}

// ---- Reference arithmetic, from the definitions -----------------------------------------------

// The dtype's unit roundoff (half an ulp at 1) and half its smallest subnormal spacing: rounding x
// to the dtype errs by at most max(u |x|, eta) (0 for fp32, which the engine does not round).
double unit_roundoff(Dtype d) {
  return d == Dtype::kFp16 ? std::ldexp(1.0, -11) : d == Dtype::kBf16 ? std::ldexp(1.0, -8) : 0;
}
double half_min_spacing(Dtype d) {
  return d == Dtype::kFp16 ? std::ldexp(1.0, -25) : d == Dtype::kBf16 ? std::ldexp(1.0, -134) : 0;
}
// The spacing of the dtype's numbers at |x| (one ulp).
double ulp(Dtype d, double x) {
  const int mant = d == Dtype::kFp16 ? 10 : d == Dtype::kBf16 ? 7 : d == Dtype::kFp32 ? 23 : 52;
  const int emin = d == Dtype::kFp16 ? -14 : d == Dtype::kFp64 ? -1022 : -126;
  const int e = x == 0 ? emin : std::max(std::ilogb(x), emin);
  return std::ldexp(1.0, e - mant);
}

// The exact sum rounded to the dtype, to nearest even (q is a power of two: s / q is exact).
double round_to_dtype(Dtype d, double s) {
  const double q = ulp(d, s);
  return std::nearbyint(s / q) * q;
}

// Payloads are little-endian, as is this host (encode_elements writes them so too).
uint16_t bits16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// One element of the dtype, by its bits, widened.
float widen(Dtype d, const uint8_t* p) {
  switch (d) {
    case Dtype::kFp16:
      return kernels::half_to_float(bits16(p));
    case Dtype::kBf16:
      return kernels::bf16_to_float(bits16(p));
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}
// fp32 -> the dtype's bits (RNE), as the kernels' finish does for the engine.
void narrow(Dtype d, float f, uint8_t* out) {
  if (d == Dtype::kFp16 || d == Dtype::kBf16) {
    const uint16_t v = d == Dtype::kFp16 ? kernels::float_to_half(f) : kernels::float_to_bf16(f);
    std::memcpy(out, &v, 2);
  } else {
    std::memcpy(out, &f, 4);
  }
}

// The exact sum of `xs` in fp64, asserting with TwoSum that no addition rounded.
double exact_sum(const std::vector<double>& xs) {
  double s = 0;
  for (double x : xs) {
    const double t = s + x;
    const double bp = t - s;
    const double err = (s - (t - bp)) + (x - bp);
    EXPECT_EQ(err, 0.0) << "test data too wide for an exact fp64 sum";
    s = t;
  }
  return s;
}

// ---- Test data --------------------------------------------------------------------------------

enum class Shape { kMixed, kCancel, kPairs, kSwamp };
const char* shape_name(Shape s) {
  switch (s) {
    case Shape::kMixed:
      return "mixed";
    case Shape::kCancel:
      return "cancel";
    case Shape::kPairs:
      return "pairs";
    case Shape::kSwamp:
      return "swamp";
  }
  return "?";
}

// Binades of the values: wide enough to mix magnitudes (and reach fp16 subnormals), narrow enough
// that every partial sum of up to 256 values is exact in fp64 and fp16 sums do not overflow.
void exponent_range(Dtype d, uint32_t n, int* lo, int* hi) {
  int log_n = 0;
  while ((1u << log_n) < n) ++log_n;
  if (d == Dtype::kFp16) {
    *lo = -24;
    *hi = 14 - log_n;  // n values below 2^(hi+1) sum below 2^15 < 65504
  } else if (d == Dtype::kBf16) {
    *lo = -20;  // 8-bit significands: lsb >= 2^-27, sums < 2^25: 52 bits
    *hi = 16;
  } else {
    *lo = -20;  // 24-bit significands: lsb >= 2^-43, sums < 2^9
    *hi = 0;
  }
}

// `world` contributions of `elems` elements, in wire format, per the shape.
std::vector<std::vector<uint8_t>> make_data(Dtype d, uint32_t world, size_t elems, Shape shape, std::mt19937_64& rng) {
  int lo = 0;
  int hi = 0;
  exponent_range(d, world, &lo, &hi);
  std::uniform_int_distribution<int> exp(lo, hi);
  std::uniform_int_distribution<int> small_exp(lo, lo + (hi - lo) / 3);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::bernoulli_distribution neg(0.5);
  auto value = [&](bool small) {
    const double v = std::ldexp(mant(rng), small ? small_exp(rng) : exp(rng));
    return neg(rng) ? -v : v;
  };
  // Rounded to a multiple of the smallest value's lsb (so that fp64 sums stay exact), then to the
  // dtype, as the decoded (exact) value.
  const int mant_bits = d == Dtype::kFp16 ? 10 : d == Dtype::kBf16 ? 7 : 23;
  const double q = std::ldexp(1.0, lo - mant_bits);
  auto in_dtype = [&](double v) {
    const double one[1] = {std::nearbyint(v / q) * q};
    return decode_elements(d, encode_elements(d, one))[0];
  };
  std::vector<std::vector<double>> vals(world, std::vector<double>(elems));
  for (size_t i = 0; i < elems; ++i) {
    switch (shape) {
      case Shape::kMixed:
        for (uint32_t r = 0; r < world; ++r) vals[r][i] = value(false);
        break;
      case Shape::kCancel: {  // the last rank cancels the others' (exact) sum to a few ulps
        double s = 0;
        for (uint32_t r = 0; r + 1 < world; ++r) s += vals[r][i] = value(false);
        vals[world - 1][i] = world > 1 ? in_dtype(-s) : value(false);
        break;
      }
      case Shape::kPairs:  // +x, -x + small, ...: large terms cancel, small ones remain
        for (uint32_t r = 0; r < world; ++r) {
          vals[r][i] = r % 2 == 0 || r + 1 == world ? value(false) : in_dtype(-vals[r - 1][i] + value(true));
        }
        break;
      case Shape::kSwamp:  // one large value among small ones of a quarter of its ulp each
        for (uint32_t r = 0; r < world; ++r) {
          vals[r][i] = std::ldexp(mant(rng), r == i % world ? hi : hi - mant_bits - 2);
        }
        break;
    }
  }
  std::vector<std::vector<uint8_t>> out;
  for (const auto& v : vals) out.push_back(encode_elements(d, v));
  return out;
}

// ---- Feeding the engine -----------------------------------------------------------------------

// Parses a result frame the engine sent (to any member's UDP port).
bool parse_result(const MemoryTxSink::Frame& f, wire::ParsedPacket* p) {
  const uint8_t* ip = f.data + wire::kIpOffset;
  const size_t total = load_be16(ip + 2);
  if (f.len < wire::kBthOffset || wire::kIpOffset + total > f.len) return false;
  return wire::parse_roce(
             std::span<const uint8_t>(f.data + wire::kBthOffset, total - wire::kIpv4HeaderLen - wire::kUdpHeaderLen),
             p) == wire::ParseError::kOk &&
         p->hdr.type == wire::MsgType::kResult;
}

struct Feeder {
  const EngineOptions opt = appliance();
  Engine engine{opt};
  MemoryTxSink tx{4096};
  JobSpec job;

  explicit Feeder(const JobSpec& j) : job(j) { EXPECT_TRUE(engine.add_job(job).ok()); }

  // One round of `slot` (rounds of a slot must come in order): every rank's `data` in a random order, with random
  // duplicates before completion, random retransmissions after it, in random burst sizes. Returns the result payload;
  // every result frame sent for the round (to every rank, and the retransmission answers) must carry the same bytes.
  std::vector<uint8_t> round(uint16_t slot, uint32_t round, const std::vector<std::vector<uint8_t>>& data,
                             std::mt19937_64& rng) {
    const auto world = static_cast<uint32_t>(data.size());
    std::vector<std::vector<uint8_t>> frames;
    for (uint32_t r = 0; r < world; ++r) {
      frames.push_back(make_contribution_frame(job, opt, {static_cast<uint16_t>(r), slot, round, round, 0}, data[r]));
    }
    std::vector<uint32_t> order(world);
    for (uint32_t r = 0; r < world; ++r) order[r] = r;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<uint32_t> sends;
    std::bernoulli_distribution dup(0.25);
    for (uint32_t k = 0; k < world; ++k) {
      if (k != 0 && dup(rng)) sends.push_back(order[std::uniform_int_distribution<uint32_t>(0, k - 1)(rng)]);
      sends.push_back(order[k]);
    }
    for (int k = 0; k < 3; ++k) sends.push_back(std::uniform_int_distribution<uint32_t>(0, world - 1)(rng));
    const uint64_t retransmits_before = engine.counters().retransmits_answered.load();
    tx.clear();
    for (size_t at = 0; at < sends.size();) {
      const size_t burst = std::min(sends.size() - at, std::uniform_int_distribution<size_t>(1, 32)(rng));
      std::vector<PacketView> views;
      for (size_t k = at; k < at + burst; ++k) {
        const auto& f = frames[sends[k]];
        views.push_back({f.data(), static_cast<uint32_t>(f.size())});
      }
      engine.process_burst(views, tx);
      at += burst;
    }
    EXPECT_EQ(engine.counters().retransmits_answered.load() - retransmits_before, 3u);
    std::vector<uint8_t> result;
    size_t results = 0;
    for (const auto& f : tx.frames()) {
      wire::ParsedPacket p;
      if (!parse_result(f, &p) || p.hdr.slot != slot || p.hdr.round != round) continue;
      std::vector<uint8_t> bytes(p.payload, p.payload + p.payload_len);
      if (results++ == 0) {
        result = std::move(bytes);
      } else {
        EXPECT_EQ(bytes, result) << "result frames of one round differ";
      }
    }
    EXPECT_EQ(results, world + 3) << "one result per rank and one per retransmission";
    return result;
  }
};

// ---- Default mode: the error bound ------------------------------------------------------------

// What the summary line of one case holds.
struct ErrorStats {
  double max_ulps = 0;
  double sum_ulps = 0;
  size_t correctly_rounded = 0;
  size_t count = 0;
  void add(double err, double ulp_at, bool exact_rounding) {
    max_ulps = std::max(max_ulps, err / ulp_at);
    sum_ulps += err / ulp_at;
    correctly_rounded += exact_rounding ? 1 : 0;
    ++count;
  }
};

// Ring all-reduce in the dtype: the chunk's partial sum travels rank c+1, c+2, ..., c (mod n),
// each hop adding its own value in fp32 and rounding the partial back to the dtype (n - 1
// roundings), as reduce-scatter kernels that compute in fp32 and store the dtype do.
float ring_sum(Dtype d, const std::vector<std::vector<uint8_t>>& data, size_t i, uint32_t start) {
  const auto world = static_cast<uint32_t>(data.size());
  const size_t es = wire::dtype_size(d);
  uint8_t partial[4];
  std::memcpy(partial, data[start % world].data() + i * es, es);
  for (uint32_t k = 1; k < world; ++k) {
    const float s = widen(d, partial) + widen(d, data[(start + k) % world].data() + i * es);
    narrow(d, s, partial);
  }
  return widen(d, partial);
}

TEST(FidelityTest, DefaultModeIsWithinOneFp32AccumulationAndOneRoundingOfTheExactSum) {
  std::mt19937_64 rng(0x5EED0013);
  const uint32_t worlds[] = {2, 3, 8, 31, 64, 255, 256};
  const Shape shapes[] = {Shape::kMixed, Shape::kCancel, Shape::kPairs, Shape::kSwamp};
  std::printf("%-5s %4s %-7s | %-34s | %-34s\n", "dtype", "n", "data", "appliance: max/mean ulp, exact-RNE %",
              "ring (n-1 roundings): same");
  for (const Dtype d : {Dtype::kFp16, Dtype::kBf16, Dtype::kFp32}) {
    const size_t es = wire::dtype_size(d);
    const size_t elems = kPayload / es;
    const double u = unit_roundoff(d);
    const double eta = half_min_spacing(d);
    for (const uint32_t n : worlds) {
      Feeder feeder(job_spec(d, n, /*deterministic=*/false));
      uint32_t round = 0;
      for (const Shape shape : shapes) {
        SCOPED_TRACE(std::string(wire::dtype_name(d)) + " n=" + std::to_string(n) + " " + shape_name(shape));
        ErrorStats appliance_err;
        ErrorStats ring_err;
        for (int rep = 0; rep < 2; ++rep, ++round) {
          const auto data = make_data(d, n, elems, shape, rng);
          const auto got = feeder.round(0, round, data, rng);
          ASSERT_EQ(got.size(), elems * es);
          for (size_t i = 0; i < elems; ++i) {
            std::vector<double> xs(n);
            double abs_sum = 0;
            for (uint32_t r = 0; r < n; ++r) {
              xs[r] = widen(d, data[r].data() + i * es);
              abs_sum += std::fabs(xs[r]);
            }
            const double s = exact_sum(xs);
            // (n - 1) u32 sum|x| for the fp32 accumulation in any order (Jeannerod-Rump), then the
            // final rounding: u |s_hat| or eta, with |s_hat| <= |s| + E. Slack 2^-40 for the
            // bound's own fp64 arithmetic.
            const double e32 = (n - 1) * std::ldexp(1.0, -24) * abs_sum;
            const double bound = ((1 + u) * e32 + u * std::fabs(s) + eta) * (1 + std::ldexp(1.0, -40));
            const double result = widen(d, got.data() + i * es);
            const double err = std::fabs(result - s);
            ASSERT_LE(err, bound) << "element " << i << ": exact " << s << ", got " << result;
            const double rne = round_to_dtype(d, s);  // the correctly rounded sum
            appliance_err.add(err, ulp(d, s), result == rne);
            const double ring = ring_sum(d, data, i, static_cast<uint32_t>(i));
            ring_err.add(std::fabs(ring - s), ulp(d, s), ring == rne);
          }
        }
        std::printf("%-5s %4u %-7s | %9.2f %9.3f %12.1f%% | %9.2f %9.3f %12.1f%%\n", wire::dtype_name(d), n,
                    shape_name(shape), appliance_err.max_ulps, appliance_err.sum_ulps / appliance_err.count,
                    100.0 * appliance_err.correctly_rounded / appliance_err.count, ring_err.max_ulps,
                    ring_err.sum_ulps / ring_err.count, 100.0 * ring_err.correctly_rounded / ring_err.count);
      }
      EXPECT_EQ(feeder.engine.counters().slots_completed.load(), round);
    }
  }
}

// ---- Deterministic mode -----------------------------------------------------------------------

// The documented deterministic result: ((x_0 + x_1) + x_2) ... + x_{n-1} in the accumulator type
// (fp32; fp64 for fp64), rounded once to the dtype.
std::vector<uint8_t> rank_order_fold(Dtype d, const std::vector<std::vector<uint8_t>>& data) {
  const size_t es = wire::dtype_size(d);
  const size_t elems = data[0].size() / es;
  std::vector<uint8_t> out(data[0].size());
  for (size_t i = 0; i < elems; ++i) {
    if (d == Dtype::kFp64) {
      double acc = 0;
      for (size_t r = 0; r < data.size(); ++r) {
        double x;
        std::memcpy(&x, data[r].data() + i * es, 8);
        acc = r == 0 ? x : acc + x;
      }
      std::memcpy(out.data() + i * es, &acc, 8);
    } else {
      float acc = 0;
      for (size_t r = 0; r < data.size(); ++r) {
        const float x = widen(d, data[r].data() + i * es);
        acc = r == 0 ? x : acc + x;
      }
      narrow(d, acc, out.data() + i * es);
    }
  }
  return out;
}

// fp64 data: mixed magnitudes over 80 binades with cancellation (exactness is not needed here).
std::vector<std::vector<uint8_t>> make_fp64_data(uint32_t world, size_t elems, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> exp(-40, 40);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::vector<std::vector<double>> vals(world, std::vector<double>(elems));
  for (size_t i = 0; i < elems; ++i) {
    double s = 0;
    for (uint32_t r = 0; r < world; ++r) {
      vals[r][i] = std::ldexp(mant(rng), exp(rng)) * (rng() & 1 ? -1 : 1);
      if (r + 1 == world && i % 2 == 0) vals[r][i] = -s;  // cancellation on every other element
      s += vals[r][i];
    }
  }
  std::vector<std::vector<uint8_t>> out;
  for (const auto& v : vals) out.push_back(encode_elements(Dtype::kFp64, v));
  return out;
}

TEST(FidelityTest, DeterministicModeGivesIdenticalBitsAcross100ArrivalOrders) {
  constexpr int kPermutations = 100;
  std::mt19937_64 rng(0xDE7E0013);
  for (const uint32_t n : {5u, 64u}) {
    for (const Dtype d : {Dtype::kFp16, Dtype::kBf16, Dtype::kFp32, Dtype::kFp64}) {
      SCOPED_TRACE(std::string(wire::dtype_name(d)) + " n=" + std::to_string(n));
      const size_t elems = kPayload / wire::dtype_size(d);
      // Data whose sum depends on the order in the accumulator type: mixed magnitudes with
      // cancellation (the default mode's results below prove it).
      const auto data = d == Dtype::kFp64 ? make_fp64_data(n, elems, rng) : make_data(d, n, elems, Shape::kCancel, rng);
      const auto want = rank_order_fold(d, data);
      Feeder det(job_spec(d, n, /*deterministic=*/true));
      Feeder def(job_spec(d, n, /*deterministic=*/false));
      std::set<std::vector<uint8_t>> default_results;
      for (uint32_t p = 0; p < kPermutations; ++p) {
        const auto got = det.round(0, p, data, rng);
        ASSERT_EQ(got, want) << "permutation " << p;
        default_results.insert(def.round(0, p, data, rng));
      }
      EXPECT_EQ(det.engine.counters().slots_completed.load(), uint64_t{kPermutations});
      EXPECT_GT(det.engine.counters().duplicates.load(), 0u);
      // Without deterministic mode the same data gives several different results.
      EXPECT_GT(default_results.size(), 1u);
      std::printf("%-5s n=%-3u deterministic: 1 distinct result in %d orders; default mode: %zu distinct\n",
                  wire::dtype_name(d), n, kPermutations, default_results.size());
    }
  }
}

TEST(FidelityTest, DeterministicModeIsTheSameOnEveryIsa) {
  std::mt19937_64 rng(0x15A0013);
  const auto data = make_data(Dtype::kBf16, 17, kPayload / 2, Shape::kMixed, rng);
  const auto want = rank_order_fold(Dtype::kBf16, data);
  for (const kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
    const kernels::KernelTable* kt = kernels::kernels_for(isa);
    if (kt == nullptr) continue;
    // The engine's deterministic sum, with this ISA's kernels.
    std::vector<float> acc(kPayload / 2);
    kt->load[static_cast<size_t>(Dtype::kBf16)](acc.data(), data[0].data(), acc.size());
    for (size_t r = 1; r < data.size(); ++r) {
      kt->accumulate[static_cast<size_t>(Dtype::kBf16)][0](acc.data(), data[r].data(), acc.size());
    }
    std::vector<uint8_t> got(kPayload);
    kt->finish[static_cast<size_t>(Dtype::kBf16)](got.data(), acc.data(), acc.size());
    EXPECT_EQ(got, want) << kernels::isa_name(isa);
  }
}

// ---- Memory: accounted at registration --------------------------------------------------------

struct CountingAllocator {
  size_t limit = SIZE_MAX;
  size_t last_request = 0;
  static void* allocate(size_t bytes, void* ctx) {
    auto* self = static_cast<CountingAllocator*>(ctx);
    self->last_request = bytes;
    if (bytes > self->limit) return nullptr;
    return ::operator new (bytes, std::align_val_t{64}, std::nothrow);
  }
  static void release(void* p, void*) { ::operator delete (p, std::align_val_t{64}); }
};

TEST(FidelityTest, DeterministicJobAllocatesItsStagingAtRegistrationAndIsRefusedWhenItCannot) {
  constexpr uint32_t kWorld = 24;
  constexpr uint16_t kSlots = 10;
  constexpr uint16_t kOddPayload = 1000;  // staging rounds each rank's payload up to 64 bytes
  CountingAllocator alloc;
  EngineOptions o = appliance();
  o.core_count = 3;  // this core (0) owns slots 0, 3, 6, 9
  o.allocate = CountingAllocator::allocate;
  o.release = CountingAllocator::release;
  o.alloc_ctx = &alloc;
  MemoryTxSink tx;
  Engine e(o);
  JobSpec plain = job_spec(Dtype::kFp16, kWorld, false, kSlots);
  plain.max_payload_bytes = kOddPayload;
  ASSERT_TRUE(e.add_job(plain).ok());
  const size_t plain_bytes = alloc.last_request;
  e.remove_job(plain.job_id, wire::AbortReason::kNone, tx);
  JobSpec det = plain;
  det.deterministic = true;
  ASSERT_TRUE(e.add_job(det).ok());
  EXPECT_EQ(alloc.last_request - plain_bytes, size_t{4} * kWorld * 1024);
  e.remove_job(det.job_id, wire::AbortReason::kNone, tx);

  alloc.limit = plain_bytes;  // room for the job, not for its staging
  const Status st = e.add_job(det);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("deterministic"), std::string::npos) << st.message();
  // Nothing was installed: its packets are unknown_job drops, not packet-time failures.
  std::mt19937_64 rng(1);
  const auto data = make_data(Dtype::kFp16, kWorld, 8, Shape::kMixed, rng);
  const auto f = make_contribution_frame(det, o, {0, 0, 0, 0, 0}, data[0]);  // slot 0: this core's
  const PacketView v{f.data(), static_cast<uint32_t>(f.size())};
  e.process_burst(std::span<const PacketView>(&v, 1), tx);
  EXPECT_EQ(e.counters().drops[static_cast<size_t>(DropReason::kUnknownJob)].load(), 1u);
  ASSERT_TRUE(e.add_job(plain).ok()) << "the plain job still fits";
}

}  // namespace
}  // namespace sumcast::engine
