// Writes the seed corpora of the fuzzers (tests/fuzz/corpus/<fuzzer>/), a few small valid inputs
// each, from the project's own builders so that they follow the formats as the code has them:
//   sumcast_fuzz_seeds <corpus directory>      (normally tests/fuzz/corpus; see README.md)
// Existing files of the same name are overwritten; other files (reproducers) are left alone.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "sumcast/endian.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/wire/control.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace sumcast {
namespace {

using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

bool write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::fprintf(stderr, "%s: cannot write\n", path.c_str());
  return static_cast<bool>(out);
}

// ---- packet: whole frames ----------------------------------------------------------------------

Bytes frame(wire::MsgType type, wire::Dtype dtype, uint16_t count, uint8_t status = 0, size_t padding = 0) {
  wire::Addressing a;
  const uint8_t smac[6] = {0x02, 0x57, 0x4B, 0x01, 0x00, 0x00};
  const uint8_t dmac[6] = {0x02, 0x53, 0x43, 0x00, 0x00, 0x01};
  std::memcpy(a.src_mac, smac, 6);
  std::memcpy(a.dst_mac, dmac, 6);
  a.src_ip = 0x0A010001;
  a.dst_ip = 0x0A000001;
  a.src_port = 40000;
  a.dest_qp = 0x000101;
  a.src_qp = 0x010100;
  a.qkey = 0x2A2A2A2A;
  a.psn = 7;
  wire::SumcastHeader h;
  h.type = type;
  h.dtype = dtype;
  h.job_id = 0xA0000001;
  h.rank = 2;
  h.slot = 3;
  h.round = 5;
  h.coll_seq = 100;
  h.elem_count = type == wire::MsgType::kAbort ? 0 : count;
  h.flags = 1;
  h.status = status;
  h.elem_offset = 4096;
  // A notice names its round's elem_count but carries no payload, as an abort (protocol.md §5).
  const size_t payload_len = wire::carries_payload(type) ? size_t{h.elem_count} * wire::dtype_size(dtype) : 0;
  Bytes f(wire::frame_len(payload_len) + padding, 0);
  uint8_t* p = wire::write_frame_headers(f.data(), a, h, payload_len);
  for (size_t i = 0; i < payload_len; ++i) p[i] = static_cast<uint8_t>(i * 7 + 1);
  icrc::stamp_frame(std::span<uint8_t>(f.data(), wire::frame_len(payload_len)));
  return f;
}

Bytes arp_request() {
  Bytes f(60, 0);
  std::memset(f.data(), 0xFF, 6);
  const uint8_t smac[6] = {0x02, 0x57, 0x4B, 0x01, 0x00, 0x00};
  std::memcpy(f.data() + 6, smac, 6);
  store_be16(f.data() + 12, wire::kEtherTypeArp);
  uint8_t* a = f.data() + 14;
  store_be16(a, 1);
  store_be16(a + 2, wire::kEtherTypeIpv4);
  a[4] = 6;
  a[5] = 4;
  store_be16(a + 6, 1);
  std::memcpy(a + 8, smac, 6);
  store_be32(a + 14, 0x0A010001);
  store_be32(a + 24, 0x0A000001);
  return f;
}

bool packet_seeds(const fs::path& dir) {
  using wire::Dtype;
  using wire::MsgType;
  bool ok = true;
  ok &= write_file(dir / "contribution-fp32-4", frame(MsgType::kContribution, Dtype::kFp32, 4));
  ok &= write_file(dir / "contribution-fp16-3", frame(MsgType::kContribution, Dtype::kFp16, 3));
  ok &= write_file(dir / "contribution-bf16-1", frame(MsgType::kContribution, Dtype::kBf16, 1));
  ok &= write_file(dir / "contribution-int32-0", frame(MsgType::kContribution, Dtype::kInt32, 0));
  ok &= write_file(dir / "contribution-fp64-2-padded", frame(MsgType::kContribution, Dtype::kFp64, 2, 0, 9));
  ok &= write_file(dir / "result-fp32-16", frame(MsgType::kResult, Dtype::kFp32, 16));
  ok &= write_file(dir / "abort-timeout", frame(MsgType::kAbort, Dtype::kFp32, 0, 1));
  ok &= write_file(dir / "loss-notice-fp32-8", frame(MsgType::kLossNotice, Dtype::kFp32, 8));
  ok &= write_file(dir / "duplicate-notice-fp32-8", frame(MsgType::kDuplicateNotice, Dtype::kFp32, 8));
  Bytes truncated = frame(MsgType::kContribution, Dtype::kFp32, 4);
  truncated.resize(70);
  ok &= write_file(dir / "truncated-in-deth", truncated);
  ok &= write_file(dir / "arp-request", arp_request());
  Bytes ipv6 = frame(MsgType::kContribution, Dtype::kFp32, 1);
  store_be16(ipv6.data() + 12, wire::kEtherTypeIpv6);
  ok &= write_file(dir / "ipv6", ipv6);
  // BTH..ICRC alone, as a kernel socket receives it (parse_roce on the raw input).
  const Bytes whole = frame(MsgType::kContribution, Dtype::kInt32, 5);
  ok &= write_file(dir / "roce-only-int32-5", Bytes(whole.begin() + wire::kBthOffset, whole.end()));
  return ok;
}

// ---- engine: harness records (engine_fuzzer.cc documents the format) ---------------------------

// Builder of an engine_fuzzer input.
class EngineInput {
 public:
  EngineInput(uint8_t sel_a, uint8_t sel_b) : b_{sel_a, sel_b} {}
  EngineInput& legit(uint8_t n) {  // op 1: deliver n legitimate frames (1..8)
    b_.insert(b_.end(), {1, static_cast<uint8_t>(n - 1)});
    return *this;
  }
  EngineInput& flush() { return op(2); }
  EngineInput& replay(uint16_t index) {
    op(3);
    return u16(index);
  }
  EngineInput& corrupt(uint16_t index, int8_t grow, uint16_t pos, uint8_t x) {
    op(4);
    u16(index);
    b_.insert(b_.end(), {0, static_cast<uint8_t>(grow)});
    u16(pos);
    b_.push_back(x);
    return *this;
  }
  // op 6: a contribution of job B (which = 1) from `rank` to `slot`, round first + `delta`, with
  // `count` elements of fuzzed payload `fill`.
  EngineInput& b_contribution(uint8_t rank, uint8_t slot, uint8_t delta, uint8_t coll, uint16_t count,
                              size_t payload_bytes, uint8_t fill) {
    op(6);
    b_.insert(b_.end(), {1, 0, rank, slot, delta, coll, 0});
    u16(count);
    b_.insert(b_.end(), payload_bytes, fill);
    return *this;
  }
  // op 6 for job A (its source is made foreign by the harness).
  EngineInput& a_forgery(uint8_t rank, uint8_t slot, uint16_t count, size_t payload_bytes) {
    op(6);
    b_.insert(b_.end(), {0, 0, rank, slot, 0, 0, 0});
    u16(count);
    b_.insert(b_.end(), payload_bytes, 0x3F);
    return *this;
  }
  EngineInput& raw(const Bytes& f, bool stamp) {
    op(5);
    u16(static_cast<uint16_t>(f.size() | (stamp ? 0x8000 : 0)));
    b_.insert(b_.end(), f.begin(), f.end());
    return *this;
  }
  EngineInput& arp() {
    op(8);
    b_.insert(b_.end(), {0, 0x02, 0x57, 0x4B, 0x09, 0x00, 0x01, 10, 9, 0, 1});
    return *this;
  }
  EngineInput& reregister(uint8_t reason, uint8_t first) {
    op(9);
    b_.insert(b_.end(), {reason, first});
    return *this;
  }
  const Bytes& bytes() const { return b_; }

 private:
  EngineInput& op(uint8_t o) {
    b_.push_back(o);
    return *this;
  }
  EngineInput& u16(uint16_t v) {
    b_.insert(b_.end(), {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)});
    return *this;
  }
  Bytes b_;
};

// The first selector byte of engine_fuzzer (job A): dtype = sel % 5, op = (sel >> 3) % 3, bit 7:
// the first round is 2^32 - 1.
uint8_t sel_a(wire::Dtype dtype, wire::ReduceOp op, bool wrap) {
  for (unsigned s = 0; s < 256; ++s) {
    if (s % 5 == static_cast<unsigned>(dtype) && (s >> 3) % 3 == static_cast<unsigned>(op) && (s >= 0x80) == wrap) {
      return static_cast<uint8_t>(s);
    }
  }
  return 0;
}
// The second selector byte (job B): dtype and op as for A, max payload max(8, ((sel >> 5) & 3) *
// 512) bytes, bit 7: results by multicast.
uint8_t sel_b(wire::Dtype dtype, wire::ReduceOp op, unsigned payload_512s, bool multicast) {
  for (unsigned s = 0; s < 256; ++s) {
    if (s % 5 == static_cast<unsigned>(dtype) && (s >> 3) % 3 == static_cast<unsigned>(op) &&
        ((s >> 5) & 3) == payload_512s && (s >= 0x80) == multicast) {
      return static_cast<uint8_t>(s);
    }
  }
  return 0;
}

bool engine_seeds(const fs::path& dir) {
  using wire::Dtype;
  using wire::ReduceOp;
  bool ok = true;
  const uint8_t b_int32 = sel_b(Dtype::kInt32, ReduceOp::kSum, 1, false);
  ok &=
      write_file(dir / "legit-only-fp32-sum", EngineInput(sel_a(Dtype::kFp32, ReduceOp::kSum, false), b_int32).bytes());
  ok &= write_file(dir / "legit-only-int32-min-wrap",
                   EngineInput(sel_a(Dtype::kInt32, ReduceOp::kMin, true), b_int32).bytes());
  ok &=
      write_file(dir / "legit-only-fp16-max", EngineInput(sel_a(Dtype::kFp16, ReduceOp::kMax, false), b_int32).bytes());
  ok &=
      write_file(dir / "legit-only-bf16-sum", EngineInput(sel_a(Dtype::kBf16, ReduceOp::kSum, false), b_int32).bytes());
  ok &= write_file(dir / "legit-only-fp64-sum-wrap",
                   EngineInput(sel_a(Dtype::kFp64, ReduceOp::kSum, true), b_int32).bytes());
  EngineInput mixed(sel_a(Dtype::kInt32, ReduceOp::kSum, false), b_int32);
  mixed.legit(4)
      .replay(1)
      .corrupt(2, 0, 70, 0x10)
      .legit(8)
      .flush()
      .a_forgery(0, 1, 1, 4)
      .b_contribution(0, 1, 0, 0, 4, 16, 0x01)
      .b_contribution(1, 1, 0, 0, 4, 16, 0x02)
      .b_contribution(2, 1, 0, 0, 4, 16, 0x03)
      .b_contribution(1, 1, 0, 0, 4, 16, 0x02)
      .flush()
      .legit(8)
      .arp()
      .replay(5)
      .reregister(1, 0)
      .legit(8);
  ok &= write_file(dir / "mixed-int32", mixed.bytes());
  EngineInput multicast(sel_a(Dtype::kFp32, ReduceOp::kSum, false), sel_b(Dtype::kFp32, ReduceOp::kSum, 1, true));
  multicast.b_contribution(0, 3, 0, 1, 2, 8, 0x10)
      .b_contribution(1, 3, 0, 1, 2, 8, 0x20)
      .b_contribution(2, 3, 0, 1, 2, 8, 0x30)
      .b_contribution(0, 3, 1, 2, 2, 8, 0x10)
      .legit(8)
      .flush()
      .reregister(2, 7);
  ok &= write_file(dir / "b-multicast-fp32", multicast.bytes());
  EngineInput raw(sel_a(Dtype::kFp32, ReduceOp::kSum, false), b_int32);
  raw.raw(frame(wire::MsgType::kContribution, wire::Dtype::kFp32, 4), true).raw(arp_request(), false).legit(8);
  ok &= write_file(dir / "raw-frames", raw.bytes());
  return ok;
}

// ---- control: encoded messages -----------------------------------------------------------------

template <typename M>
Bytes encoded(const M& m) {
  Bytes out;
  if (wire::encode_append(m, &out) != wire::ControlError::kOk) std::fprintf(stderr, "a seed does not encode\n");
  return out;
}

bool control_seeds(const fs::path& dir) {
  using namespace wire;
  bool ok = true;
  HelloMsg hello;
  hello.token = "0123456789abcdef-token";
  RegisterMsg reg;
  reg.world_size = 4;
  reg.rank = 1;
  reg.dtype = Dtype::kBf16;
  reg.payload_bytes = 1024;
  reg.slots = 64;
  reg.mac = {0x02, 0x57, 0x4B, 0x01, 0x00, 0x01};
  reg.ip = 0x0A010002;
  reg.udp_port = 40001;
  reg.qpn = 0x010101;
  reg.name = "resnet50";
  GrantMsg grant;
  grant.job_id = 7;
  grant.qkey = 0x2A2A2A2A;
  grant.slot_count = 128;
  grant.payload_bytes = 1024;
  grant.mac = {0x02, 0x53, 0x43, 0x00, 0x00, 0x01};
  grant.ip = 0x0A000001;
  grant.udp_port = 4791;
  grant.multicast = true;
  grant.multicast_ip = 0xEFFF4D07;
  grant.core_qpns = {0x100, 0x101};
  RefuseMsg refuse;
  refuse.code = RefuseCode::kRankTaken;
  refuse.text = "rank 1 is already registered";
  LeaveMsg leave;
  leave.job_id = 7;
  AbortMsg abort;
  abort.job_id = 7;
  abort.reason = AbortReason::kMemberLeft;
  abort.text = "rank 3 left";
  StatusReplyMsg status;
  status.truncated = true;
  JobStatusEntry running;
  running.job_id = 7;
  running.world_size = 4;
  running.registered = 4;
  running.running = true;
  running.slots_completed = 123456;
  running.ms_since_progress = 12;
  running.name = "resnet50";
  JobStatusEntry pending;
  pending.world_size = 8;
  pending.registered = 3;
  pending.dtype = Dtype::kFp16;
  pending.op = ReduceOp::kMax;
  pending.name = "bert";
  status.jobs = {running, pending};

  ok &= write_file(dir / "hello", encoded(hello));
  ok &= write_file(dir / "auth-ok", encoded(AuthOkMsg{}));
  ok &= write_file(dir / "auth-fail", encoded(AuthFailMsg{}));
  ok &= write_file(dir / "register", encoded(reg));
  ok &= write_file(dir / "grant", encoded(grant));
  ok &= write_file(dir / "refuse", encoded(refuse));
  ok &= write_file(dir / "leave", encoded(leave));
  ok &= write_file(dir / "abort", encoded(abort));
  ok &= write_file(dir / "status-request", encoded(StatusRequestMsg{}));
  ok &= write_file(dir / "status-reply", encoded(status));
  Bytes stream = encoded(hello);
  for (const Bytes& b : {encoded(reg), encoded(leave), encoded(StatusRequestMsg{})}) {
    stream.insert(stream.end(), b.begin(), b.end());
  }
  ok &= write_file(dir / "stream-hello-register-leave-status", stream);
  return ok;
}

// ---- agg_config: the shipped configurations and a minimal one ----------------------------------

bool agg_config_seeds(const fs::path& dir) {
  bool ok = true;
  const fs::path source(SUMCAST_SOURCE_DIR);
  for (const char* name : {"agg.conf", "examples/memif.conf", "examples/real-nic.conf"}) {
    std::ifstream in(source / "config" / name, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    if (!in || s.empty()) {
      std::fprintf(stderr, "%s: cannot read\n", (source / "config" / name).c_str());
      ok = false;
      continue;
    }
    std::string file = std::string("shipped-") + fs::path(name).filename().string();
    ok &= write_file(dir / file, Bytes(s.begin(), s.end()));
  }
  const std::string minimal =
      "port = { device = \"net_memif0\"; ipv4 = \"10.0.0.1\"; };\n"
      "control = { token_file = \"token\"; };\n";
  ok &= write_file(dir / "minimal", Bytes(minimal.begin(), minimal.end()));
  const std::string forms =
      "eal = { lcores = \"(0-1)@0,2@(1,3)\"; vdevs = [\"net_memif0,role=server\"]; huge_pages = \"off\"; };\n"
      "port = { device = \"net_memif0\"; ipv4 = \"10.0.0.1\"; mac = \"02:53:43:00:00:01\"; mtu = 9000; };\n"
      "dataplane = { worker_cores = 2; dtypes = (\"fp32\", \"int32\"); multicast = true; };\n"
      "control = { token_file = \"/tmp/token\"; port = 4790; job_timeout_ms = 100; };\n"
      "telemetry = { prometheus_address = \"127.0.0.1:9100\"; stats_interval_ms = 1000; };\n";
  ok &= write_file(dir / "forms", Bytes(forms.begin(), forms.end()));
  return ok;
}

}  // namespace
}  // namespace sumcast

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIRECTORY   (normally tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path root(argv[1]);
  bool ok = true;
  for (const char* name : {"packet", "engine", "control", "agg_config"}) {
    std::error_code ec;
    fs::create_directories(root / name, ec);
    if (ec) {
      std::fprintf(stderr, "%s: %s\n", (root / name).c_str(), ec.message().c_str());
      return 1;
    }
  }
  ok &= sumcast::packet_seeds(root / "packet");
  ok &= sumcast::engine_seeds(root / "engine");
  ok &= sumcast::control_seeds(root / "control");
  ok &= sumcast::agg_config_seeds(root / "agg_config");
  return ok ? 0 : 1;
}
