// The verbs transport's device-free parts: GID mapping, the GRH's IPv4 source, message framing
// and validation (the same rules as the UDP path's parser); and open() failing cleanly, naming
// the reason, where there is no RDMA device (or no libibverbs).
#include "sumcast/shim/verbs_transport.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "sumcast/shim/communicator.h"
#include "sumcast/shim/verbs_format.h"

namespace sumcast::shim {
namespace {

TEST(VerbsFormat, Ipv4MappedGidRoundTrips) {
  uint8_t gid[16];
  verbs::ipv4_mapped_gid(0x0A000102, gid);
  const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 1, 2};
  EXPECT_EQ(std::memcmp(gid, want, 16), 0);
  uint32_t ip = 0;
  ASSERT_TRUE(verbs::gid_ipv4(gid, &ip));
  EXPECT_EQ(ip, 0x0A000102u);
  gid[0] = 0xFE;  // a link-local (RoCEv1 / IPv6) GID is not IPv4-mapped
  EXPECT_FALSE(verbs::gid_ipv4(gid, &ip));
}

TEST(VerbsFormat, GrhSourceIsTheIpv4HeadersSourceAddress) {
  uint8_t grh[40] = {};
  grh[20] = 0x45;
  grh[32] = 192;
  grh[33] = 168;
  grh[34] = 7;
  grh[35] = 9;
  EXPECT_EQ(verbs::grh_ipv4_source(grh), 0xC0A80709u);
}

wire::SumcastHeader header(wire::MsgType type, wire::Dtype dtype, uint16_t count) {
  wire::SumcastHeader h;
  h.type = type;
  h.dtype = dtype;
  h.job_id = 5;
  h.rank = 2;
  h.slot = 7;
  h.round = 9;
  h.flags = 1;
  h.coll_seq = 3;
  h.elem_count = count;
  h.elem_offset = 4096;
  return h;
}

TEST(VerbsFormat, BuiltMessageCarriesItsDestinationAndParsesBack) {
  const uint16_t payload[5] = {1, 2, 3, 4, 5};
  std::vector<uint8_t> buf(verbs::message_capacity(10));
  const auto h = header(wire::MsgType::kContribution, wire::Dtype::kBf16, 5);
  const size_t len = verbs::build_message(buf.data(), 0xABCDE, h, reinterpret_cast<const uint8_t*>(payload));
  ASSERT_EQ(len, verbs::kTagLen + 32 + 10);
  EXPECT_EQ(verbs::message_dest_qp(buf.data()), 0xABCDEu);
  wire::SumcastHeader got;
  const uint8_t* p = nullptr;
  size_t plen = 0;
  ASSERT_EQ(verbs::parse_message(std::span<const uint8_t>(buf.data() + verbs::kTagLen, len - verbs::kTagLen), &got, &p,
                                 &plen),
            wire::ParseError::kOk);
  EXPECT_EQ(got.slot, 7);
  EXPECT_EQ(got.round, 9u);
  EXPECT_EQ(got.elem_offset, 4096u);
  ASSERT_EQ(plen, 10u);
  EXPECT_EQ(std::memcmp(p, payload, 10), 0);
}

TEST(VerbsFormat, ParseRejectsWhatTheWireParserRejects) {
  std::vector<uint8_t> m(32 + 8, 0);
  auto h = header(wire::MsgType::kResult, wire::Dtype::kFp32, 2);
  wire::SumcastHeader got;
  const uint8_t* p = nullptr;
  size_t plen = 0;
  auto parse = [&](size_t len) {
    return verbs::parse_message(std::span<const uint8_t>(m.data(), len), &got, &p, &plen);
  };
  wire::encode_sumcast_header(h, m.data());
  EXPECT_EQ(parse(40), wire::ParseError::kOk);
  EXPECT_EQ(parse(31), wire::ParseError::kTruncatedHeader);
  EXPECT_EQ(parse(36), wire::ParseError::kBadLength);  // one element short
  m[0] = 2;
  EXPECT_EQ(parse(40), wire::ParseError::kBadVersion);
  m[0] = 1;
  m[1] = 9;
  EXPECT_EQ(parse(40), wire::ParseError::kBadType);
  m[1] = 2;
  m[2] = 5;
  EXPECT_EQ(parse(40), wire::ParseError::kBadDtype);
  m[2] = 0;
  m[3] = 3;
  EXPECT_EQ(parse(40), wire::ParseError::kBadOp);
  m[3] = 0;
  h.elem_offset = wire::kMaxElementIndex - 1;
  wire::encode_sumcast_header(h, m.data());
  EXPECT_EQ(parse(40), wire::ParseError::kBadRange);
  auto abort = header(wire::MsgType::kAbort, wire::Dtype::kFp32, 0);
  wire::encode_sumcast_header(abort, m.data());
  EXPECT_EQ(parse(32), wire::ParseError::kOk);
  EXPECT_EQ(parse(36), wire::ParseError::kBadLength);  // aborts carry no payload
}

// Here (no RDMA device, or no libibverbs) open() fails with Unavailable or NotFound and a message.
TEST(VerbsTransport, OpenWithoutADeviceFailsCleanly) {
  VerbsTransportOptions o;
  o.bind_ip = 0x7F000001;
  auto t = VerbsTransport::open(o);
  if (t.ok()) GTEST_SKIP() << "this host has a RoCE device with 127.0.0.1 in its GID table";
  EXPECT_TRUE(t.status().code() == StatusCode::kUnavailable || t.status().code() == StatusCode::kNotFound)
      << t.status().to_string();
  EXPECT_NE(t.status().message().find("verbs"), std::string::npos);
  o.bind_ip = 0;
  EXPECT_EQ(VerbsTransport::open(o).status().code(),
            verbs_transport_built() ? StatusCode::kInvalidArgument : StatusCode::kUnavailable);
}

// A communicator asked for the verbs transport reports the transport's failure before it
// contacts any appliance.
TEST(VerbsTransport, CommunicatorReportsAVerbsTransportThatCannotOpen) {
  CommConfig c;
  c.job_name = "verbs";
  c.world_size = 2;
  c.appliances.push_back({"127.0.0.1:1", 1.0});
  c.bind_ip = "127.0.0.1";
  c.transport = TransportKind::kVerbs;
  auto r = Communicator::create(c);
  if (r.ok()) GTEST_SKIP() << "a RoCE device holds 127.0.0.1";
  EXPECT_NE(r.status().message().find("verbs"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace sumcast::shim
