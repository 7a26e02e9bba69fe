// docs/protocol.md against the code: the worked example of §2.3 parses to the values the text
// gives and is what write_frame_headers builds from them, its ICRC is the one the definition of
// §2.1 gives (independent CRC), and every named reason and code of §5, §6 and §8 is in the text.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sumcast/wire/control.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"
#include "wire_test_util.h"

namespace sumcast::wire {
namespace {

std::string read_doc() {
  std::ifstream in(SUMCAST_SOURCE_DIR "/docs/protocol.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The hex dump between the example-frame markers; each line is "OFFSET  xx xx ...".
std::vector<uint8_t> example_frame(const std::string& doc) {
  const std::string begin = "<!-- example-frame:begin -->", end = "<!-- example-frame:end -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return {};
  std::istringstream lines(doc.substr(b + begin.size(), e - b - begin.size()));
  std::string line, hex;
  size_t expect_offset = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line.rfind("```", 0) == 0) continue;
    const size_t sp = line.find(' ');
    if (std::stoul(line.substr(0, sp), nullptr, 16) != expect_offset) return {};  // offsets must be right
    const std::string bytes = line.substr(sp);
    hex += bytes;
    expect_offset += testing::from_hex(bytes).size();
  }
  return testing::from_hex(hex);
}

// The values §2.3 states in words.
Addressing example_addressing() {
  Addressing a;
  const uint8_t appliance[6] = {0x02, 0, 0, 0, 0, 0x01}, worker[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::memcpy(a.dst_mac, appliance, 6);
  std::memcpy(a.src_mac, worker, 6);
  a.src_ip = (10u << 24) | 2;  // 10.0.0.2
  a.dst_ip = (10u << 24) | 1;  // 10.0.0.1
  a.src_port = 49152;
  a.dst_port = 4791;
  a.dest_qp = 0x000101;  // core 5 % 2 = 1 of QPNs {0x100, 0x101}
  a.src_qp = 0x000042;
  a.qkey = 0x1234ABCD;
  a.psn = 29;
  return a;
}

SumcastHeader example_header() {
  SumcastHeader h;
  h.type = MsgType::kContribution;
  h.dtype = Dtype::kFp32;
  h.op = ReduceOp::kSum;
  h.job_id = 7;
  h.rank = 2;
  h.slot = 29 % 8;
  h.round = 29 / 8;
  h.coll_seq = 0;
  h.elem_count = 7428 - 29 * 256;
  h.flags = kFlagSlotVersion;  // round 3 is odd
  h.elem_offset = 29 * 256;
  return h;
}

TEST(ProtocolDoc, WorkedExampleParsesToTheStatedValues) {
  const auto f = example_frame(read_doc());
  ASSERT_EQ(f.size(), 114u) << "example frame missing or its offsets are wrong";
  ParsedPacket pp;
  ASSERT_STREQ(parse_error_name(parse_frame(f, &pp)), "ok");
  const Addressing a = example_addressing();
  EXPECT_EQ(std::memcmp(pp.dst_mac, a.dst_mac, 6), 0);
  EXPECT_EQ(std::memcmp(pp.src_mac, a.src_mac, 6), 0);
  EXPECT_EQ(pp.src_ip, a.src_ip);
  EXPECT_EQ(pp.dst_ip, a.dst_ip);
  EXPECT_EQ(pp.src_port, a.src_port);
  EXPECT_EQ(pp.dst_port, a.dst_port);
  EXPECT_EQ(pp.dest_qp, a.dest_qp);
  EXPECT_EQ(pp.src_qp, a.src_qp);
  EXPECT_EQ(pp.qkey, a.qkey);
  EXPECT_EQ(pp.psn, a.psn);
  EXPECT_EQ(pp.bth_flags, 0);
  const SumcastHeader h = example_header();
  EXPECT_EQ(pp.hdr.version, 1);
  EXPECT_EQ(pp.hdr.type, h.type);
  EXPECT_EQ(pp.hdr.dtype, h.dtype);
  EXPECT_EQ(pp.hdr.op, h.op);
  EXPECT_EQ(pp.hdr.job_id, h.job_id);
  EXPECT_EQ(pp.hdr.rank, h.rank);
  EXPECT_EQ(pp.hdr.slot, 5);
  EXPECT_EQ(pp.hdr.round, 3u);
  EXPECT_EQ(pp.hdr.coll_seq, h.coll_seq);
  EXPECT_EQ(pp.hdr.elem_count, 4);
  EXPECT_EQ(pp.hdr.flags, h.flags);
  EXPECT_EQ(pp.hdr.status, 0);
  EXPECT_EQ(pp.hdr.elem_offset, 7424u);
  ASSERT_EQ(pp.payload_len, 16u);
  const float want[4] = {1.0f, 2.0f, -3.0f, 0.5f};
  for (int i = 0; i < 4; ++i) {
    uint32_t bits = 0;
    for (int k = 3; k >= 0; --k) bits = bits << 8 | pp.payload[4 * i + k];  // little-endian
    float v;
    std::memcpy(&v, &bits, 4);
    EXPECT_EQ(v, want[i]) << i;
  }
  EXPECT_EQ(pp.ip_len, 100u);
}

TEST(ProtocolDoc, WorkedExampleIcrcFollowsTheDefinition) {
  const auto f = example_frame(read_doc());
  ASSERT_EQ(f.size(), 114u);
  const uint32_t c = testing::icrc_of_frame(f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f[110 + i], static_cast<uint8_t>(c >> (8 * i))) << i;
}

TEST(ProtocolDoc, WorkedExampleIsWhatTheBuilderWrites) {
  const auto f = example_frame(read_doc());
  ASSERT_EQ(f.size(), 114u);
  const float v[4] = {1.0f, 2.0f, -3.0f, 0.5f};
  std::vector<uint8_t> payload(16);
  for (int i = 0; i < 4; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    for (int k = 0; k < 4; ++k) payload[4 * i + k] = static_cast<uint8_t>(bits >> (8 * k));
  }
  const auto built = testing::build_frame(example_addressing(), example_header(), payload);
  ASSERT_EQ(built.size(), f.size());
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(built[i], f[i]) << "byte " << i;
}

TEST(ProtocolDoc, NamesEveryParseError) {
  const std::string doc = read_doc();
  for (int i = 1; i < kParseErrorCount; ++i) {
    const std::string name = std::string("`") + parse_error_name(static_cast<ParseError>(i)) + "`";
    EXPECT_NE(doc.find(name), std::string::npos) << name;
  }
}

TEST(ProtocolDoc, NamesEveryDtypeOpAndAbortReason) {
  const std::string doc = read_doc();
  for (int d = 0; d < kDtypeCount; ++d) {
    const std::string row = "| " + std::to_string(d) + " | " + dtype_name(static_cast<Dtype>(d)) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << row;
  }
  for (int o = 0; o < kReduceOpCount; ++o) {
    const std::string row = "| " + std::to_string(o) + " | " + reduce_op_name(static_cast<ReduceOp>(o)) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << row;
  }
  for (int r = 0; r <= 4; ++r) {
    const std::string row = "| " + std::to_string(r) + " | " + abort_reason_name(static_cast<AbortReason>(r)) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << row;
  }
}

TEST(ProtocolDoc, NamesEveryControlTypeAndRefuseCode) {
  const std::string doc = read_doc();
  for (int t = 1; t <= 10; ++t) {
    const std::string row = "| " + std::to_string(t) + " | " + control_type_name(static_cast<ControlType>(t)) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << row;
  }
  for (int c = 1; c <= kMaxRefuseCode; ++c) {
    const std::string row = "| " + std::to_string(c) + " | " + refuse_code_name(static_cast<RefuseCode>(c)) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << row;
  }
  EXPECT_NE(doc.find("0x53554D43"), std::string::npos);  // kControlMagic
}

}  // namespace
}  // namespace sumcast::wire
