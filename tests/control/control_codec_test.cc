// The control-protocol codec (sumcast/wire/control.h, docs/protocol.md §8): byte layout against
// hand-derived encodings, round trips of every message, and rejection of every truncation,
// extension, oversize header and malformed field, each by its named reason. Decoders always get
// exactly-sized heap copies, so an over-read is visible to ASan/valgrind.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "sumcast/wire/control.h"

namespace sumcast::wire {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename M>
Bytes enc(const M& m) {
  Bytes b(encoded_size(m));
  size_t n = 0;
  EXPECT_EQ(encode(m, std::span<uint8_t>(b), &n), ControlError::kOk) << control_type_name(M::kType);
  EXPECT_EQ(n, b.size());
  return b;
}

HelloMsg sample_hello() { return HelloMsg{"s3cret-token"}; }
RegisterMsg sample_register() {
  RegisterMsg m;
  m.world_size = 8;
  m.rank = 5;
  m.dtype = Dtype::kBf16;
  m.op = ReduceOp::kMin;
  m.payload_bytes = 4096;
  m.slots = 77;
  m.mac = {0x02, 0x01, 0x02, 0x03, 0x04, 0x05};
  m.ip = 0xC0A80A05;
  m.udp_port = 50001;
  m.qpn = 0xABCDEF;
  m.name = "resnet50-step";
  return m;
}
GrantMsg sample_grant() {
  GrantMsg m;
  m.job_id = 0xDEADBEEF;
  m.qkey = 0x7ABCDEF1;
  m.slot_count = 512;
  m.payload_bytes = 1024;
  m.mac = {0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F};
  m.ip = 0x0A000001;
  m.udp_port = kRoceUdpPort;
  m.multicast = true;
  m.multicast_ip = 0xEFFF4D03;
  m.core_qpns = {0x100, 0x101, 0x102};
  return m;
}
RefuseMsg sample_refuse() { return RefuseMsg{RefuseCode::kJobMismatch, "world size 4 != 8"}; }
LeaveMsg sample_leave() { return LeaveMsg{0x01020304}; }
AbortMsg sample_abort() { return AbortMsg{42, AbortReason::kMemberLeft, "rank 3 closed its connection"}; }
StatusReplyMsg sample_status() {
  StatusReplyMsg m;
  m.truncated = true;
  JobStatusEntry a;
  a.job_id = 3;
  a.world_size = 4;
  a.registered = 4;
  a.dtype = Dtype::kFp32;
  a.op = ReduceOp::kSum;
  a.running = true;
  a.slots_completed = 0x0102030405060708ull;
  a.ms_since_progress = 12;
  a.name = "a";
  JobStatusEntry b;
  b.world_size = 16;
  b.registered = 2;
  b.dtype = Dtype::kInt32;
  b.op = ReduceOp::kMax;
  b.name = std::string(kMaxJobNameLen, 'n');
  m.jobs = {a, b};
  return m;
}

// One sample of every message type, encoded, with a checker that decodes a span as that type.
struct Sample {
  const char* name;
  Bytes bytes;
  std::function<ControlError(std::span<const uint8_t>)> decode_as;
};

template <typename M>
Sample make_sample(const char* name, const M& m) {
  return Sample{name, enc(m), [](std::span<const uint8_t> s) {
                  M out;
                  return decode(s, &out);
                }};
}

std::vector<Sample> all_samples() {
  return {
      make_sample("HELLO", sample_hello()),
      make_sample("AUTH_OK", AuthOkMsg{}),
      make_sample("AUTH_FAIL", AuthFailMsg{}),
      make_sample("REGISTER", sample_register()),
      make_sample("GRANT", sample_grant()),
      make_sample("REFUSE", sample_refuse()),
      make_sample("LEAVE", sample_leave()),
      make_sample("ABORT", sample_abort()),
      make_sample("STATUS_REQUEST", StatusRequestMsg{}),
      make_sample("STATUS_REPLY", sample_status()),
      make_sample("STATUS_REPLY_EMPTY", StatusReplyMsg{}),
  };
}

template <typename M>
void expect_round_trip(const M& m) {
  const Bytes b = enc(m);
  M out;
  ASSERT_EQ(decode(std::span<const uint8_t>(b), &out), ControlError::kOk) << control_type_name(M::kType);
  EXPECT_TRUE(out == m) << control_type_name(M::kType);
}

// ---- Layout against the table in control.h (bytes derived by hand from the table) ----------

TEST(ControlCodecLayout, HelloMatchesTable) {
  const Bytes want = {0x53, 0x55, 0x4D, 0x43, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00,
                      0x00, 0x07, 0x00, 0x03, 0x00, 0x00, 'a',  'b',  'c'};
  EXPECT_EQ(enc(HelloMsg{"abc"}), want);
}

TEST(ControlCodecLayout, RegisterMatchesTable) {
  RegisterMsg m;
  m.world_size = 4;
  m.rank = 2;
  m.dtype = Dtype::kFp16;
  m.op = ReduceOp::kMax;
  m.payload_bytes = 1024;
  m.slots = 16;
  m.mac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  m.ip = (10u << 24) | 3u;
  m.udp_port = 4791;
  m.qpn = 0x123;
  m.name = "jb";
  const Bytes want = {0x53, 0x55, 0x4D, 0x43, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1E,  // header
                      0x00, 0x04, 0x00, 0x02, 0x01, 0x02, 0x04, 0x00, 0x00, 0x10,              // 0..9
                      0x02, 0x11, 0x22, 0x33, 0x44, 0x55,                                      // 10 mac
                      0x0A, 0x00, 0x00, 0x03, 0x12, 0xB7,                                      // 16 ip, 20 port
                      0x00, 0x00, 0x01, 0x23, 0x02, 0x00, 'j',  'b'};                          // 22 qpn, 26 len
  EXPECT_EQ(enc(m), want);
}

TEST(ControlCodecLayout, GrantMatchesTable) {
  GrantMsg m;
  m.job_id = 7;
  m.qkey = 0x12345678;
  m.slot_count = 128;
  m.payload_bytes = 1024;
  m.mac = {0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE};
  m.ip = (10u << 24) | 100u;
  m.udp_port = 4791;
  m.multicast = true;
  m.multicast_ip = 0xEFFF4D01;
  m.core_qpns = {0x100, 0x101};
  const Bytes want = {0x53, 0x55, 0x4D, 0x43, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x28,  // header
                      0x00, 0x00, 0x00, 0x07, 0x12, 0x34, 0x56, 0x78, 0x00, 0x80, 0x04, 0x00,  // 0..11
                      0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0x0A, 0x00, 0x00, 0x64, 0x12, 0xB7,  // 12..23
                      0x01, 0x00, 0x00, 0x02, 0xEF, 0xFF, 0x4D, 0x01,                          // 24..31
                      0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x01};                         // qpns
  EXPECT_EQ(enc(m), want);
}

TEST(ControlCodecLayout, DeterministicFlagIsRegisterByte27Bit0AndGrantByte24Bit1) {
  RegisterMsg r = sample_register();
  r.deterministic = true;
  const Bytes reg = enc(r);
  EXPECT_EQ(reg[kControlHeaderLen + 27], 0x01);
  r.deterministic = false;
  EXPECT_EQ(enc(r)[kControlHeaderLen + 27], 0x00) << "a default registration is what older appliances accept";
  RegisterMsg rd;
  ASSERT_EQ(decode(std::span<const uint8_t>(reg), &rd), ControlError::kOk);
  EXPECT_TRUE(rd.deterministic);

  GrantMsg g = sample_grant();
  g.multicast = false;
  g.deterministic = true;
  const Bytes grant = enc(g);
  EXPECT_EQ(grant[kControlHeaderLen + 24], 0x02);
  g.multicast = true;
  EXPECT_EQ(enc(g)[kControlHeaderLen + 24], 0x03);
  GrantMsg gd;
  ASSERT_EQ(decode(std::span<const uint8_t>(grant), &gd), ControlError::kOk);
  EXPECT_TRUE(gd.deterministic);
  EXPECT_FALSE(gd.multicast);
}

TEST(ControlCodecLayout, MulticastWishIsRegisterByte27Bit1) {
  RegisterMsg r = sample_register();
  r.multicast = true;
  const Bytes reg = enc(r);
  EXPECT_EQ(reg[kControlHeaderLen + 27], 0x02);
  r.deterministic = true;
  EXPECT_EQ(enc(r)[kControlHeaderLen + 27], 0x03);
  RegisterMsg rd;
  ASSERT_EQ(decode(std::span<const uint8_t>(reg), &rd), ControlError::kOk);
  EXPECT_TRUE(rd.multicast);
  EXPECT_FALSE(rd.deterministic);
  RegisterMsg plain;
  ASSERT_EQ(decode(std::span<const uint8_t>(enc(sample_register())), &plain), ControlError::kOk);
  EXPECT_FALSE(plain.multicast) << "a registration without the bit keeps unicast results";
}

// A message with loss_notices set and the other flags off: the flag byte at `byte` (after the
// header) is 0x04, 0x07 with multicast and deterministic too, and decodes to loss_notices alone;
// without any flag the byte is 0x00 (as before the bit existed) and decodes without it.
template <class Msg>
void expect_loss_notice_bit(Msg m, size_t byte) {
  m.multicast = m.deterministic = false;
  m.loss_notices = true;
  const Bytes with = enc(m);
  EXPECT_EQ(with[kControlHeaderLen + byte], 0x04);
  m.deterministic = m.multicast = true;
  EXPECT_EQ(enc(m)[kControlHeaderLen + byte], 0x07);
  Msg d;
  ASSERT_EQ(decode(std::span<const uint8_t>(with), &d), ControlError::kOk);
  EXPECT_TRUE(d.loss_notices);
  EXPECT_FALSE(d.multicast);
  EXPECT_FALSE(d.deterministic);
  m.loss_notices = m.multicast = m.deterministic = false;
  const Bytes without = enc(m);
  EXPECT_EQ(without[kControlHeaderLen + byte], 0x00);
  Msg n;
  ASSERT_EQ(decode(std::span<const uint8_t>(without), &n), ControlError::kOk);
  EXPECT_FALSE(n.loss_notices);
}

// Loss notices: REGISTER byte 27 bit 2 asks, GRANT byte 24 bit 2 grants; each alone and with the
// other flags, both ways; a message without the bit is byte-identical to one from before it.
TEST(ControlCodecLayout, LossNoticesAreRegisterByte27Bit2AndGrantByte24Bit2) {
  {
    SCOPED_TRACE("REGISTER");
    expect_loss_notice_bit(sample_register(), 27);
  }
  {
    SCOPED_TRACE("GRANT");
    expect_loss_notice_bit(sample_grant(), 24);
  }
  EXPECT_EQ(enc(sample_register())[kControlHeaderLen + 27], 0x00) << "the sample asks for no flag";
}

TEST(ControlCodecLayout, AbortMatchesTable) {
  const Bytes want = {0x53, 0x55, 0x4D, 0x43, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00,
                      0x09, 0x00, 0x00, 0x00, 0x09, 0x01, 0x00, 0x00, 0x01, 't'};
  EXPECT_EQ(enc(AbortMsg{9, AbortReason::kTimeout, "t"}), want);
}

TEST(ControlCodecLayout, RefuseLeaveAndEmptyBodiesMatchTable) {
  EXPECT_EQ(enc(RefuseMsg{RefuseCode::kRankTaken, "x"}),
            (Bytes{0x53, 0x55, 0x4D, 0x43, 0x01, 0x06, 0, 0, 0, 0, 0, 5, 12, 0, 0, 1, 'x'}));
  EXPECT_EQ(enc(LeaveMsg{0x0A0B0C0D}),
            (Bytes{0x53, 0x55, 0x4D, 0x43, 0x01, 0x07, 0, 0, 0, 0, 0, 4, 0x0A, 0x0B, 0x0C, 0x0D}));
  EXPECT_EQ(enc(AuthOkMsg{}), (Bytes{0x53, 0x55, 0x4D, 0x43, 0x01, 0x02, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(enc(AuthFailMsg{}), (Bytes{0x53, 0x55, 0x4D, 0x43, 0x01, 0x03, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(enc(StatusRequestMsg{}), (Bytes{0x53, 0x55, 0x4D, 0x43, 0x01, 0x09, 0, 0, 0, 0, 0, 0}));
}

TEST(ControlCodecLayout, StatusEntryMatchesTable) {
  StatusReplyMsg m;
  JobStatusEntry e;
  e.job_id = 1;
  e.world_size = 2;
  e.registered = 2;
  e.dtype = Dtype::kFp64;
  e.op = ReduceOp::kSum;
  e.running = true;
  e.slots_completed = 0x1FF;
  e.ms_since_progress = 0x10;
  e.name = "z";
  m.jobs = {e};
  const Bytes want = {0x53, 0x55, 0x4D, 0x43, 0x01, 0x0A, 0,    0,    0, 0, 0, 29,          // 4 + 24 + 1
                      0x00, 0x01, 0x00, 0x00,                                               // count, flags, reserved
                      0,    0,    0,    1,    0,    2,    0,    2,    4, 0, 1, 1,           // entry 0..11
                      0,    0,    0,    0,    0,    0,    0x01, 0xFF, 0, 0, 0, 0x10, 'z'};  // 12..24
  EXPECT_EQ(enc(m), want);
}

// ---- Round trips ------------------------------------------------------------------------------

TEST(ControlCodecRoundTrip, EveryMessageType) {
  expect_round_trip(sample_hello());
  expect_round_trip(AuthOkMsg{});
  expect_round_trip(AuthFailMsg{});
  expect_round_trip(sample_register());
  RegisterMsg det_register = sample_register();
  det_register.deterministic = true;
  expect_round_trip(det_register);
  expect_round_trip(sample_grant());
  GrantMsg det_grant = sample_grant();
  det_grant.deterministic = true;
  expect_round_trip(det_grant);
  expect_round_trip(sample_refuse());
  expect_round_trip(sample_leave());
  expect_round_trip(sample_abort());
  expect_round_trip(StatusRequestMsg{});
  expect_round_trip(sample_status());
  expect_round_trip(StatusReplyMsg{});
}

TEST(ControlCodecRoundTrip, FieldLimitsAtTheirMaximum) {
  expect_round_trip(HelloMsg{std::string(kMaxTokenLen, '\xff')});
  RegisterMsg r = sample_register();
  r.name = std::string(kMaxJobNameLen, 'j');
  r.qpn = kMaxQpn;
  r.world_size = 0xFFFF;
  r.rank = 0xFFFF;
  r.dtype = Dtype::kFp64;
  r.op = ReduceOp::kMax;
  expect_round_trip(r);
  r.name.clear();  // empty names are representable; the server refuses them
  expect_round_trip(r);
  GrantMsg g = sample_grant();
  g.core_qpns.assign(kMaxCoreQpns, kMaxQpn);
  g.multicast = false;
  expect_round_trip(g);
  expect_round_trip(RefuseMsg{RefuseCode::kShuttingDown, std::string(kMaxTextLen, 't')});
  expect_round_trip(RefuseMsg{RefuseCode::kBadRequest, ""});
  expect_round_trip(AbortMsg{1, AbortReason::kAdmin, std::string(kMaxTextLen, 'a')});
  expect_round_trip(AbortMsg{1, AbortReason::kApplianceStop, ""});
}

TEST(ControlCodecRoundTrip, StreamOfMessagesSplitsInOrder) {
  Bytes stream;
  ASSERT_EQ(encode_append(sample_hello(), &stream), ControlError::kOk);
  ASSERT_EQ(encode_append(sample_register(), &stream), ControlError::kOk);
  ASSERT_EQ(encode_append(LeaveMsg{5}, &stream), ControlError::kOk);
  std::vector<ControlType> types;
  std::span<const uint8_t> rest(stream);
  for (;;) {
    ControlHeader h;
    std::span<const uint8_t> body;
    const ControlError e = split_control_message(rest, &h, &body);
    if (e == ControlError::kTruncatedHeader && rest.empty()) break;
    ASSERT_EQ(e, ControlError::kOk);
    types.push_back(h.type);
    rest = rest.subspan(kControlHeaderLen + h.body_len);
  }
  EXPECT_EQ(types, (std::vector<ControlType>{ControlType::kHello, ControlType::kRegister, ControlType::kLeave}));
}

// ---- Truncation, extension, oversize ----------------------------------------------------------

TEST(ControlCodecReject, EveryTruncatedMessage) {
  for (const Sample& s : all_samples()) {
    for (size_t len = 0; len < s.bytes.size(); ++len) {
      const Bytes cut(s.bytes.begin(), s.bytes.begin() + static_cast<std::ptrdiff_t>(len));
      const ControlError e = s.decode_as(cut);
      const ControlError want = len < kControlHeaderLen ? ControlError::kTruncatedHeader : ControlError::kTruncatedBody;
      EXPECT_EQ(e, want) << s.name << " cut to " << len;
    }
    EXPECT_EQ(s.decode_as(s.bytes), ControlError::kOk) << s.name;
  }
}

// The header's body_len shrunk to every shorter length, with the body cut to match.
TEST(ControlCodecReject, EveryShortenedBody) {
  for (const Sample& s : all_samples()) {
    const size_t body = s.bytes.size() - kControlHeaderLen;
    for (size_t k = 0; k < body; ++k) {
      Bytes cut(s.bytes.begin(), s.bytes.begin() + static_cast<std::ptrdiff_t>(kControlHeaderLen + k));
      store_be32(cut.data() + 8, static_cast<uint32_t>(k));
      const ControlError e = s.decode_as(cut);
      EXPECT_NE(e, ControlError::kOk) << s.name << " body " << k << " of " << body;
      EXPECT_NE(e, ControlError::kTruncatedBody) << s.name;  // a complete message: a real rejection
    }
  }
}

TEST(ControlCodecReject, EveryLengthenedBody) {
  for (const Sample& s : all_samples()) {
    for (size_t extra = 1; extra <= 8; ++extra) {
      Bytes longer = s.bytes;
      longer.resize(longer.size() + extra, 0);
      store_be32(longer.data() + 8, static_cast<uint32_t>(longer.size() - kControlHeaderLen));
      EXPECT_EQ(s.decode_as(longer), ControlError::kBadBodyLength) << s.name << " +" << extra;
    }
  }
}

TEST(ControlCodecReject, BytesAfterTheMessage) {
  for (const Sample& s : all_samples()) {
    Bytes more = s.bytes;
    more.push_back(0x53);
    EXPECT_EQ(s.decode_as(more), ControlError::kTrailingBytes) << s.name;
  }
}

TEST(ControlCodecReject, OversizeBodyFromHeaderAlone) {
  Bytes h(kControlHeaderLen);
  write_control_header(h.data(), ControlType::kRegister, static_cast<uint32_t>(kMaxControlBodyLen));
  ControlHeader out;
  EXPECT_EQ(decode_control_header(h, &out), ControlError::kOk);
  EXPECT_EQ(out.body_len, kMaxControlBodyLen);
  for (uint32_t len : {static_cast<uint32_t>(kMaxControlBodyLen + 1), 0x10000u, 0xFFFFFFFFu}) {
    write_control_header(h.data(), ControlType::kRegister, len);
    EXPECT_EQ(decode_control_header(h, &out), ControlError::kTooLarge) << len;
    std::span<const uint8_t> body;
    EXPECT_EQ(split_control_message(h, &out, &body), ControlError::kTooLarge) << len;
    RegisterMsg r;
    EXPECT_EQ(decode(std::span<const uint8_t>(h), &r), ControlError::kTooLarge) << len;
  }
}

TEST(ControlCodecReject, HeaderFields) {
  const Bytes good = enc(sample_leave());
  LeaveMsg out;
  auto with = [&](size_t at, uint8_t v) {
    Bytes b = good;
    b[at] = v;
    return decode(std::span<const uint8_t>(b), &out);
  };
  EXPECT_EQ(with(0, 0x00), ControlError::kBadMagic);
  EXPECT_EQ(with(3, 0x44), ControlError::kBadMagic);
  EXPECT_EQ(with(4, 0x00), ControlError::kBadVersion);
  EXPECT_EQ(with(4, 0x02), ControlError::kBadVersion);
  EXPECT_EQ(with(5, 0x00), ControlError::kBadType);
  EXPECT_EQ(with(5, 11), ControlError::kBadType);
  EXPECT_EQ(with(5, 0xFF), ControlError::kBadType);
  EXPECT_EQ(with(6, 0x01), ControlError::kBadReserved);
  EXPECT_EQ(with(7, 0x80), ControlError::kBadReserved);
  EXPECT_EQ(with(5, static_cast<uint8_t>(ControlType::kAbort)), ControlError::kUnexpectedType);
}

TEST(ControlCodecReject, BodyFields) {
  // Byte offsets below are body offsets from the table in control.h.
  auto corrupt = [](Bytes b, size_t body_off, std::initializer_list<uint8_t> v) {
    size_t i = kControlHeaderLen + body_off;
    for (uint8_t x : v) b[i++] = x;
    return b;
  };
  auto dec = [](const Bytes& b, auto* out) { return decode(std::span<const uint8_t>(b), out); };
  HelloMsg h;
  const Bytes hello = enc(sample_hello());
  EXPECT_EQ(dec(corrupt(hello, 2, {0, 1}), &h), ControlError::kBadReserved);
  Bytes empty_token = {0x53, 0x55, 0x4D, 0x43, 1, 1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0};
  EXPECT_EQ(dec(empty_token, &h), ControlError::kBadTokenLength);
  Bytes long_token(kControlHeaderLen + 4 + kMaxTokenLen + 1, 'x');
  write_control_header(long_token.data(), ControlType::kHello, static_cast<uint32_t>(4 + kMaxTokenLen + 1));
  store_be16(long_token.data() + 12, static_cast<uint16_t>(kMaxTokenLen + 1));
  store_be16(long_token.data() + 14, 0);
  EXPECT_EQ(dec(long_token, &h), ControlError::kBadTokenLength);

  RegisterMsg r;
  const Bytes reg = enc(sample_register());
  EXPECT_EQ(dec(corrupt(reg, 4, {kDtypeCount}), &r), ControlError::kBadDtype);
  EXPECT_EQ(dec(corrupt(reg, 5, {kReduceOpCount}), &r), ControlError::kBadOp);
  EXPECT_EQ(dec(corrupt(reg, 22, {0x01}), &r), ControlError::kBadQpn);
  EXPECT_EQ(dec(corrupt(reg, 26, {kMaxJobNameLen + 1}), &r), ControlError::kBadNameLength);
  EXPECT_EQ(dec(corrupt(reg, 27, {0x08}), &r), ControlError::kBadReserved);  // bits 0..2 are flags
  EXPECT_EQ(dec(corrupt(reg, 27, {0x0F}), &r), ControlError::kBadReserved);
  EXPECT_EQ(dec(corrupt(reg, 27, {0x81}), &r), ControlError::kBadReserved);

  GrantMsg g;
  const Bytes grant = enc(sample_grant());
  EXPECT_EQ(dec(corrupt(grant, 0, {0, 0, 0, 0}), &g), ControlError::kBadJobId);
  EXPECT_EQ(dec(corrupt(grant, 24, {0x08}), &g), ControlError::kBadReserved);  // bits 0..2 are flags
  EXPECT_EQ(dec(corrupt(grant, 24, {0x0F}), &g), ControlError::kBadReserved);
  EXPECT_EQ(dec(corrupt(grant, 24, {0x83}), &g), ControlError::kBadReserved);
  EXPECT_EQ(dec(corrupt(grant, 25, {0x01}), &g), ControlError::kBadReserved);
  EXPECT_EQ(dec(corrupt(grant, 26, {0, 0}), &g), ControlError::kBadQpnCount);
  EXPECT_EQ(dec(corrupt(grant, 26, {0x01, 0x01}), &g), ControlError::kBadQpnCount);  // 257
  EXPECT_EQ(dec(corrupt(grant, 32 + 4, {0x01}), &g), ControlError::kBadQpn);

  RefuseMsg f;
  const Bytes refuse = enc(sample_refuse());
  EXPECT_EQ(dec(corrupt(refuse, 0, {0}), &f), ControlError::kBadRefuseCode);
  EXPECT_EQ(dec(corrupt(refuse, 0, {kMaxRefuseCode + 1}), &f), ControlError::kBadRefuseCode);
  EXPECT_EQ(dec(corrupt(refuse, 1, {1}), &f), ControlError::kBadReserved);
  EXPECT_EQ(dec(corrupt(refuse, 2, {0x02, 0x01}), &f), ControlError::kBadTextLength);  // 513

  AbortMsg a;
  const Bytes abort = enc(sample_abort());
  EXPECT_EQ(dec(corrupt(abort, 4, {0}), &a), ControlError::kBadAbortReason);  // kNone is not an abort
  EXPECT_EQ(dec(corrupt(abort, 4, {5}), &a), ControlError::kBadAbortReason);
  EXPECT_EQ(dec(corrupt(abort, 5, {1}), &a), ControlError::kBadReserved);
  EXPECT_EQ(dec(corrupt(abort, 6, {0x02, 0x01}), &a), ControlError::kBadTextLength);

  StatusReplyMsg st;
  const Bytes status = enc(sample_status());
  EXPECT_EQ(dec(corrupt(status, 2, {0x02}), &st), ControlError::kBadReserved);
  EXPECT_EQ(dec(corrupt(status, 3, {0x01}), &st), ControlError::kBadReserved);
  EXPECT_EQ(dec(corrupt(status, 4 + 10, {2}), &st), ControlError::kBadJobState);
  EXPECT_EQ(dec(corrupt(status, 4 + 6, {0, 5}), &st), ControlError::kBadJobState);  // registered 5 > world 4
  EXPECT_EQ(dec(corrupt(status, 4 + 8, {kDtypeCount}), &st), ControlError::kBadDtype);
  EXPECT_EQ(dec(corrupt(status, 4 + 9, {kReduceOpCount}), &st), ControlError::kBadOp);
  EXPECT_EQ(dec(corrupt(status, 4 + 11, {kMaxJobNameLen + 1}), &st), ControlError::kBadNameLength);
  EXPECT_EQ(dec(corrupt(status, 0, {0, 3}), &st), ControlError::kBadBodyLength);  // count says 3, 2 present
  EXPECT_EQ(dec(corrupt(status, 0, {0, 1}), &st), ControlError::kBadBodyLength);  // count says 1, 2 present
}

// Random bytes behind a valid header of every type, at every length up to 300: never accepted
// unless the structure really is valid, never read past the copy (run under ASan to see it).
TEST(ControlCodecReject, RandomBodiesNeverOverread) {
  std::mt19937 rng(20240607);
  size_t accepted = 0, total = 0;
  for (uint8_t type = 1; type <= 10; ++type) {
    for (size_t len = 0; len <= 300; ++len) {
      Bytes b(kControlHeaderLen + len);
      write_control_header(b.data(), static_cast<ControlType>(type), static_cast<uint32_t>(len));
      for (size_t i = kControlHeaderLen; i < b.size(); ++i) b[i] = static_cast<uint8_t>(rng());
      for (const Sample& s : all_samples()) {
        const ControlError e = s.decode_as(b);
        ++total;
        if (e == ControlError::kOk) ++accepted;
      }
    }
  }
  // Only empty bodies of the empty types can be accepted by chance with any real probability.
  EXPECT_LE(accepted, 10u) << "of " << total;
}

TEST(ControlCodecReject, RandomStreamsNeverOverread) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    Bytes b(rng() % 64);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    if (b.size() >= 4 && (round & 1)) store_be32(b.data(), kControlMagic);
    ControlHeader h;
    std::span<const uint8_t> body;
    const ControlError e = split_control_message(b, &h, &body);
    if (e == ControlError::kOk) {
      EXPECT_LE(body.data() + body.size(), b.data() + b.size());
    }
  }
}

// ---- Encoding ---------------------------------------------------------------------------------

TEST(ControlCodecEncode, EveryShortBufferIsNoSpaceAndUntouched) {
  for (const Sample& s : all_samples()) {
    for (size_t cap = 0; cap < s.bytes.size(); ++cap) {
      Bytes buf(s.bytes.size() + 16, 0xA5);
      size_t written = 12345;
      ControlError e = ControlError::kOk;
      // Re-encode from the decoded message so that every type goes through encode().
      ControlHeader h;
      std::span<const uint8_t> body;
      ASSERT_EQ(split_control_message(s.bytes, &h, &body), ControlError::kOk);
      std::span<uint8_t> out(buf.data(), cap);
      switch (h.type) {
#define CASE(T, M)                                       \
  case ControlType::T: {                                 \
    M m;                                                 \
    ASSERT_EQ(decode_body(body, &m), ControlError::kOk); \
    e = encode(m, out, &written);                        \
    break;                                               \
  }
        CASE(kHello, HelloMsg)
        CASE(kAuthOk, AuthOkMsg)
        CASE(kAuthFail, AuthFailMsg)
        CASE(kRegister, RegisterMsg)
        CASE(kGrant, GrantMsg)
        CASE(kRefuse, RefuseMsg)
        CASE(kLeave, LeaveMsg)
        CASE(kAbort, AbortMsg)
        CASE(kStatusRequest, StatusRequestMsg)
        CASE(kStatusReply, StatusReplyMsg)
#undef CASE
      }
      EXPECT_EQ(e, ControlError::kNoSpace) << s.name << " cap " << cap;
      EXPECT_EQ(written, 12345u);
      for (uint8_t x : buf) ASSERT_EQ(x, 0xA5) << s.name << " cap " << cap;
    }
  }
}

TEST(ControlCodecEncode, InvalidFieldsAreRefused) {
  Bytes buf(kMaxControlMessageLen * 2);
  size_t n = 0;
  std::span<uint8_t> out(buf);
  EXPECT_EQ(encode(HelloMsg{""}, out, &n), ControlError::kBadTokenLength);
  EXPECT_EQ(encode(HelloMsg{std::string(kMaxTokenLen + 1, 't')}, out, &n), ControlError::kBadTokenLength);
  RegisterMsg r = sample_register();
  r.name = std::string(kMaxJobNameLen + 1, 'n');
  EXPECT_EQ(encode(r, out, &n), ControlError::kBadNameLength);
  r = sample_register();
  r.qpn = kMaxQpn + 1;
  EXPECT_EQ(encode(r, out, &n), ControlError::kBadQpn);
  r = sample_register();
  r.dtype = static_cast<Dtype>(kDtypeCount);
  EXPECT_EQ(encode(r, out, &n), ControlError::kBadDtype);
  r = sample_register();
  r.op = static_cast<ReduceOp>(kReduceOpCount);
  EXPECT_EQ(encode(r, out, &n), ControlError::kBadOp);
  GrantMsg g = sample_grant();
  g.core_qpns.clear();
  EXPECT_EQ(encode(g, out, &n), ControlError::kBadQpnCount);
  g.core_qpns.assign(kMaxCoreQpns + 1, 1);
  EXPECT_EQ(encode(g, out, &n), ControlError::kBadQpnCount);
  g = sample_grant();
  g.core_qpns[1] = kMaxQpn + 1;
  EXPECT_EQ(encode(g, out, &n), ControlError::kBadQpn);
  g = sample_grant();
  g.job_id = 0;
  EXPECT_EQ(encode(g, out, &n), ControlError::kBadJobId);
  EXPECT_EQ(encode(RefuseMsg{static_cast<RefuseCode>(0), ""}, out, &n), ControlError::kBadRefuseCode);
  EXPECT_EQ(encode(RefuseMsg{RefuseCode::kBadName, std::string(kMaxTextLen + 1, 'x')}, out, &n),
            ControlError::kBadTextLength);
  EXPECT_EQ(encode(AbortMsg{1, AbortReason::kNone, ""}, out, &n), ControlError::kBadAbortReason);
  EXPECT_EQ(encode(AbortMsg{1, AbortReason::kAdmin, std::string(kMaxTextLen + 1, 'x')}, out, &n),
            ControlError::kBadTextLength);
  StatusReplyMsg st;
  JobStatusEntry e;
  e.world_size = 1;
  e.registered = 2;
  st.jobs = {e};
  EXPECT_EQ(encode(st, out, &n), ControlError::kBadJobState);
  // More entries than fit in one message.
  st.jobs.assign(kMaxControlBodyLen / kStatusEntryFixedLen + 1, JobStatusEntry{});
  EXPECT_EQ(encode(st, out, &n), ControlError::kTooLarge);
  EXPECT_EQ(n, 0u);  // never written by any failed encode above
}

TEST(ControlCodecEncode, AppendLeavesBufferUnchangedOnError) {
  Bytes b = {1, 2, 3};
  EXPECT_EQ(encode_append(HelloMsg{""}, &b), ControlError::kBadTokenLength);
  EXPECT_EQ(b, (Bytes{1, 2, 3}));
  EXPECT_EQ(encode_append(LeaveMsg{1}, &b), ControlError::kOk);
  EXPECT_EQ(b.size(), 3 + kControlHeaderLen + kLeaveLen);
}

TEST(ControlCodecNames, EveryErrorAndCodeHasAName) {
  for (int i = 0; i < kControlErrorCount; ++i) {
    EXPECT_STRNE(control_error_name(static_cast<ControlError>(i)), "?") << i;
  }
  for (int c = 1; c <= kMaxRefuseCode; ++c) {
    ASSERT_TRUE(is_valid_refuse_code(static_cast<uint8_t>(c)));
    EXPECT_STRNE(refuse_code_name(static_cast<RefuseCode>(c)), "?") << c;
  }
  EXPECT_FALSE(is_valid_refuse_code(0));
  EXPECT_FALSE(is_valid_refuse_code(kMaxRefuseCode + 1));
  for (int t = 1; t <= 10; ++t) EXPECT_STRNE(control_type_name(static_cast<ControlType>(t)), "?");
}

}  // namespace
}  // namespace sumcast::wire
