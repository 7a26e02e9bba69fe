#include "sumcast/pktgen/stream.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "sumcast/engine/testing.h"
#include "sumcast/wire/packet.h"

namespace sumcast::pktgen {
namespace {

// pcap file format (classic): global header, then per record ts_sec, ts_usec, incl_len, orig_len.
constexpr uint32_t kPcapMagic = 0xA1B2C3D4;  // microsecond timestamps, written in host (little) order
constexpr uint16_t kPcapMajor = 2;
constexpr uint16_t kPcapMinor = 4;
constexpr uint32_t kPcapSnaplen = 65535;
constexpr uint32_t kLinkTypeEthernet = 1;

void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }  // little-endian host (x86)
void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

engine::EngineOptions appliance_core(const StreamSpec& spec, uint16_t slot) {
  engine::EngineOptions o;
  std::memcpy(o.local_mac, spec.appliance_mac, 6);
  o.local_ip = spec.appliance_ip;
  o.qpn = spec.core_qpns[slot % spec.core_qpns.size()];
  return o;
}

}  // namespace

Status validate(const StreamSpec& s) {
  const size_t esize = wire::dtype_size(s.dtype);
  if (!wire::is_valid_dtype(static_cast<uint8_t>(s.dtype))) return Status::invalid_argument("dtype: unknown");
  if (s.ranks.size() < 1 || s.ranks.size() > wire::kRankMulticast) {
    return Status::invalid_argument("ranks: " + std::to_string(s.ranks.size()) + " outside 1..65535");
  }
  if (s.slots == 0) return Status::invalid_argument("slots: must be at least 1");
  if (s.payload_bytes == 0 || s.payload_bytes % esize != 0 || s.payload_bytes > wire::kMaxPayloadBytes) {
    return Status::invalid_argument("payload: " + std::to_string(s.payload_bytes) + " bytes is not a multiple of " +
                                    std::to_string(esize) + " in 1.." + std::to_string(wire::kMaxPayloadBytes));
  }
  if (s.rounds == 0) return Status::invalid_argument("rounds: must be at least 1");
  if (s.core_qpns.empty()) return Status::invalid_argument("core QPNs: none");
  if (s.files == 0 || s.files > s.slots) {
    return Status::invalid_argument("files: " + std::to_string(s.files) + " outside 1..slots (" +
                                    std::to_string(s.slots) + ")");
  }
  const uint64_t last = (uint64_t{s.rounds} * s.slots) * (s.payload_bytes / esize);
  if (last > wire::kMaxElementIndex) return Status::invalid_argument("rounds x slots x payload: beyond 2^40 elements");
  return {};
}

double stream_element(uint32_t rank, uint32_t slot, uint32_t round, size_t i) {
  return static_cast<double>(static_cast<int>((i + slot + round + rank) % 3) - 1);
}

double stream_sum(uint32_t world, uint32_t slot, uint32_t round, size_t i) {
  double sum = 0;
  for (uint32_t k = 0; k < world; ++k) sum += stream_element(k, slot, round, i);
  return sum;
}

size_t stream_elements(const StreamSpec& s) { return s.payload_bytes / wire::dtype_size(s.dtype); }

uint64_t stream_frames(const StreamSpec& s, uint32_t file) {
  uint64_t slots = 0;
  for (uint32_t slot = file; slot < s.slots; slot += s.files) ++slots;
  return slots * s.rounds * s.ranks.size();
}

uint64_t stream_frames(const StreamSpec& s) { return uint64_t{s.slots} * s.rounds * s.ranks.size(); }

engine::JobSpec engine_job(const StreamSpec& s) {
  engine::JobSpec j;
  j.job_id = s.job_id;
  j.qkey = s.qkey;
  j.dtype = s.dtype;
  j.op = s.op;
  j.slot_count = s.slots;
  j.max_payload_bytes = s.payload_bytes;
  j.members = s.ranks;
  return j;
}

void for_each_frame(const StreamSpec& s, uint32_t file, const std::function<void(std::span<const uint8_t>)>& emit) {
  const engine::JobSpec job = engine_job(s);
  const size_t elems = stream_elements(s);
  std::vector<double> values(elems);
  std::vector<uint8_t> frame(wire::kMaxFrameLen);
  for (uint32_t round = 0; round < s.rounds; ++round) {
    for (uint32_t slot = file; slot < s.slots; slot += s.files) {
      const engine::EngineOptions core = appliance_core(s, static_cast<uint16_t>(slot));
      for (uint32_t rank = 0; rank < s.ranks.size(); ++rank) {
        for (size_t i = 0; i < elems; ++i) values[i] = stream_element(rank, slot, round, i);
        const std::vector<uint8_t> payload = engine::encode_elements(s.dtype, values);
        engine::ContributionFields f;
        f.rank = static_cast<uint16_t>(rank);
        f.slot = static_cast<uint16_t>(slot);
        f.round = round;
        f.coll_seq = round;
        f.elem_offset = (uint64_t{round} * s.slots + slot) * elems;
        const size_t len = engine::write_contribution_frame(frame.data(), job, core, f, payload);
        emit(std::span<const uint8_t>(frame.data(), len));
      }
    }
  }
}

Result<PcapWriter> PcapWriter::create(const std::string& path) {
  PcapWriter w;
  w.path_ = path;
  w.f_ = std::fopen(path.c_str(), "wb");
  if (w.f_ == nullptr) return Status::from_errno("pcap " + path + ": open");
  uint8_t h[24];
  put32(h, kPcapMagic);
  put16(h + 4, kPcapMajor);
  put16(h + 6, kPcapMinor);
  put32(h + 8, 0);   // thiszone
  put32(h + 12, 0);  // sigfigs
  put32(h + 16, kPcapSnaplen);
  put32(h + 20, kLinkTypeEthernet);
  if (std::fwrite(h, sizeof(h), 1, w.f_) != 1) return Status::from_errno("pcap " + path + ": write");
  return w;
}

PcapWriter::PcapWriter(PcapWriter&& o) noexcept
    : f_(std::exchange(o.f_, nullptr)), path_(std::move(o.path_)), frames_(o.frames_) {}

PcapWriter& PcapWriter::operator=(PcapWriter&& o) noexcept {
  if (this != &o) {
    if (f_ != nullptr) std::fclose(f_);
    f_ = std::exchange(o.f_, nullptr);
    path_ = std::move(o.path_);
    frames_ = o.frames_;
  }
  return *this;
}

PcapWriter::~PcapWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

Status PcapWriter::write(std::span<const uint8_t> frame, uint64_t timestamp_ns) {
  if (f_ == nullptr) return Status::internal("pcap " + path_ + ": closed");
  uint8_t r[16];
  put32(r, static_cast<uint32_t>(timestamp_ns / 1000000000u));
  put32(r + 4, static_cast<uint32_t>(timestamp_ns % 1000000000u / 1000u));
  put32(r + 8, static_cast<uint32_t>(frame.size()));
  put32(r + 12, static_cast<uint32_t>(frame.size()));
  if (std::fwrite(r, sizeof(r), 1, f_) != 1 || std::fwrite(frame.data(), frame.size(), 1, f_) != 1) {
    return Status::from_errno("pcap " + path_ + ": write");
  }
  ++frames_;
  return {};
}

Status PcapWriter::close() {
  if (f_ == nullptr) return {};
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) return Status::from_errno("pcap " + path_ + ": close");
  return {};
}

std::vector<std::string> pcap_paths(const std::string& output, uint32_t files) {
  if (files <= 1) return {output};
  std::string stem = output;
  std::string ext;
  if (const size_t dot = output.rfind('.'); dot != std::string::npos && output.find('/', dot) == std::string::npos) {
    stem = output.substr(0, dot);
    ext = output.substr(dot);
  }
  std::vector<std::string> paths;
  for (uint32_t f = 0; f < files; ++f) paths.push_back(stem + "-" + std::to_string(f) + ext);
  return paths;
}

Result<uint64_t> write_pcaps(const StreamSpec& spec, const std::vector<std::string>& paths, double pps) {
  SUMCAST_RETURN_IF_ERROR(validate(spec));
  if (paths.size() != spec.files) {
    return Status::invalid_argument(std::to_string(paths.size()) + " paths for " + std::to_string(spec.files) +
                                    " files");
  }
  uint64_t total = 0;
  for (uint32_t f = 0; f < spec.files; ++f) {
    Result<PcapWriter> w = PcapWriter::create(paths[f]);
    if (!w.ok()) return w.status();
    Status st;
    uint64_t n = 0;
    for_each_frame(spec, f, [&](std::span<const uint8_t> frame) {
      if (!st.ok()) return;
      const uint64_t ts = pps > 0 ? static_cast<uint64_t>(static_cast<double>(n) * 1e9 / pps) : 0;
      st = w->write(frame, ts);
      ++n;
    });
    SUMCAST_RETURN_IF_ERROR(st);
    SUMCAST_RETURN_IF_ERROR(w->close());
    total += n;
  }
  return total;
}

bool result_is_exact(const StreamSpec& s, const wire::SumcastHeader& h, std::span<const uint8_t> payload) {
  const size_t elems = stream_elements(s);
  if (h.job_id != s.job_id || h.slot >= s.slots || h.round >= s.rounds || h.elem_count != elems ||
      h.elem_offset != (uint64_t{h.round} * s.slots + h.slot) * elems) {
    return false;
  }
  const std::vector<double> got = engine::decode_elements(s.dtype, payload);
  if (got.size() != elems) return false;
  const auto world = static_cast<uint32_t>(s.ranks.size());
  for (size_t i = 0; i < elems; ++i) {
    if (got[i] != stream_sum(world, h.slot, h.round, i)) return false;
  }
  return true;
}

}  // namespace sumcast::pktgen
