// Unit tests of the CRC-32 combination (sumcast/icrc/combine.h): the
// product against its shift-and-add definition, and combined CRCs against the CRC of the whole
// string computed in one pass (ISA-L through icrc::crc32), for every length up to a 4 KiB payload.
#include "sumcast/icrc/combine.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "sumcast/icrc/icrc.h"

namespace sumcast::icrc::crc {
namespace {

// a * b mod P by the definition (reflected: bit 31 is x^0), written independently of the code.
uint32_t reference_multiply(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {
    if ((a >> (31 - i)) & 1) {
      uint32_t term = b;  // b * x^i
      for (int k = 0; k < i; ++k) term = (term & 1) ? (term >> 1) ^ 0xEDB88320u : term >> 1;
      product ^= term;
    }
  }
  return product;
}

TEST(CrcCombineTest, MultiplyMatchesTheDefinitionOnRandomAndEdgeOperands) {
  std::mt19937 rng(11);
  std::vector<uint32_t> values = {0u, 1u, 0x80000000u, 0x40000000u, 0xFFFFFFFFu, 0xEDB88320u};
  for (int i = 0; i < 2000; ++i) values.push_back(static_cast<uint32_t>(rng()));
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    ASSERT_EQ(multiply(values[i], values[i + 1]), reference_multiply(values[i], values[i + 1]))
        << std::hex << values[i] << " * " << values[i + 1];
  }
  EXPECT_EQ(multiply(0x12345678u, 0x80000000u), 0x12345678u) << "x^0 is the identity";
}

TEST(CrcCombineTest, ShiftOfZeroBytesIsTheIdentity) { EXPECT_EQ(shift_for(0), 0x80000000u); }

TEST(CrcCombineTest, CombinedCrcEqualsTheCrcOfTheConcatenationAtEveryLength) {
  std::vector<uint8_t> data(88 + 4100);
  std::mt19937 rng(3);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint32_t head = icrc::crc32(0, data.data(), 88);
  for (size_t len = 0; len <= 4100; ++len) {
    const uint32_t tail = icrc::crc32(0, data.data() + 88, len);
    const uint32_t whole = icrc::crc32(0, data.data(), 88 + len);
    ASSERT_EQ(multiply(head, shift_for(len)) ^ tail, whole) << "tail length " << len;
  }
}

TEST(CrcCombineTest, CrcDifferenceOfEqualLengthStringsDependsOnlyOnTheirDifference) {
  std::vector<uint8_t> a(84), b(84), c(84), d(84);
  std::mt19937 rng(9);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(rng());
    c[i] = static_cast<uint8_t>(rng());
  }
  b = a;
  d = c;
  for (const size_t i : {16u, 17u, 22u, 50u, 70u}) {
    const auto x = static_cast<uint8_t>(rng() | 1);
    b[i] ^= x;
    d[i] ^= x;
  }
  EXPECT_EQ(icrc::crc32(0, a.data(), a.size()) ^ icrc::crc32(0, b.data(), b.size()),
            icrc::crc32(0, c.data(), c.size()) ^ icrc::crc32(0, d.data(), d.size()));
}

}  // namespace
}  // namespace sumcast::icrc::crc
