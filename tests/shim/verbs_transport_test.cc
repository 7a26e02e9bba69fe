// The verbs transport's device-free parts: GID mapping, the GRH's IPv4 source, message framing
// and validation (the same rules as the UDP path's parser); and open() failing cleanly, naming
// the reason, where there is no RDMA device (or no libibverbs).
#include "sumcast/shim/verbs_transport.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
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

// ---- The multicast seam: GroupMembership over fake attach / detach operations -------------------

struct FakeQp {
  int attach_rc = 0;  // what the next attach returns
  int detach_rc = 0;
  std::vector<std::vector<uint8_t>> attached;  // GIDs, in order
  std::vector<std::vector<uint8_t>> detached;
  std::vector<uint16_t> lids;
};
int fake_attach(void* qp, const uint8_t gid[16], uint16_t lid) {
  auto* q = static_cast<FakeQp*>(qp);
  q->lids.push_back(lid);
  if (q->attach_rc != 0) return q->attach_rc;
  q->attached.emplace_back(gid, gid + 16);
  return 0;
}
int fake_detach(void* qp, const uint8_t gid[16], uint16_t /*lid*/) {
  auto* q = static_cast<FakeQp*>(qp);
  q->detached.emplace_back(gid, gid + 16);
  return q->detach_rc;
}
std::vector<uint8_t> mapped(uint32_t ip) {
  std::vector<uint8_t> g(16);
  verbs::ipv4_mapped_gid(ip, g.data());
  return g;
}

TEST(VerbsMulticast, JoinAttachesTheIpv4MappedGidOnceAndLeaveDetachesEach) {
  FakeQp qp;
  verbs::GroupMembership m({fake_attach, fake_detach}, &qp);
  ASSERT_TRUE(m.join(0xEFFF4D03).ok());
  ASSERT_TRUE(m.join(0xEFFF4D03).ok());  // already attached: no second attach
  ASSERT_TRUE(m.join(0xEFFF4D04).ok());
  ASSERT_EQ(qp.attached.size(), 2u);
  EXPECT_EQ(qp.attached[0], mapped(0xEFFF4D03));
  EXPECT_EQ(qp.attached[1], mapped(0xEFFF4D04));
  EXPECT_EQ(qp.lids, (std::vector<uint16_t>{0, 0}));  // RoCE: no multicast LID
  EXPECT_EQ(m.groups().size(), 2u);
  m.leave_all();
  m.leave_all();  // idempotent
  ASSERT_EQ(qp.detached.size(), 2u);
  EXPECT_EQ(qp.detached[0], mapped(0xEFFF4D03));
  EXPECT_EQ(qp.detached[1], mapped(0xEFFF4D04));
  EXPECT_TRUE(m.groups().empty());
  EXPECT_EQ(m.detach_failures(), 0u);
}

TEST(VerbsMulticast, AFailedAttachNamesTheGroupAndTheErrorAndJoinsNothing) {
  FakeQp qp;
  qp.attach_rc = EPERM;
  verbs::GroupMembership m({fake_attach, fake_detach}, &qp);
  const Status st = m.join(0xEFFF4D05);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("239.255.77.5"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("ibv_attach_mcast"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find(std::strerror(EPERM)), std::string::npos) << st.to_string();
  EXPECT_TRUE(m.groups().empty());
  m.leave_all();
  EXPECT_TRUE(qp.detached.empty()) << "nothing was attached, nothing to detach";
  // Not a group at all: refused before the QP is touched.
  qp.lids.clear();
  const Status bad = m.join(0x0A000001);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(qp.lids.empty());
}

TEST(VerbsMulticast, AFailedDetachIsCountedAndTheGroupForgotten) {
  FakeQp qp;
  verbs::GroupMembership m({fake_attach, fake_detach}, &qp);
  ASSERT_TRUE(m.join(0xEFFF4D06).ok());
  qp.detach_rc = EINVAL;
  m.leave_all();
  EXPECT_EQ(m.detach_failures(), 1u);
  EXPECT_TRUE(m.groups().empty());
  m.leave_all();
  EXPECT_EQ(qp.detached.size(), 1u);
  EXPECT_EQ(m.detach_failures(), 1u);
}

}  // namespace
}  // namespace sumcast::shim
