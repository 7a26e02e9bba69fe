#include "sumcast/engine/testing.h"

#include <cstring>

#include "sumcast/icrc/icrc.h"
#include "sumcast/kernels/kernels.h"
#include "sumcast/wire/packet.h"

namespace sumcast::engine {

size_t write_contribution_frame(uint8_t* out, const JobSpec& job, const EngineOptions& appliance,
                                const ContributionFields& f, std::span<const uint8_t> payload) {
  const Member& m = job.members[f.rank];
  wire::Addressing a;
  std::memcpy(a.src_mac, m.mac, 6);
  std::memcpy(a.dst_mac, appliance.local_mac, 6);
  a.src_ip = m.ip;
  a.dst_ip = appliance.local_ip;
  a.src_port = m.udp_port;
  a.dst_port = wire::kRoceUdpPort;
  a.dest_qp = appliance.qpn;
  a.src_qp = m.qpn;
  a.qkey = job.qkey;
  wire::SumcastHeader h;
  h.type = wire::MsgType::kContribution;
  h.dtype = job.dtype;
  h.op = job.op;
  h.job_id = job.job_id;
  h.rank = f.rank;
  h.slot = f.slot;
  h.round = f.round;
  h.coll_seq = f.coll_seq;
  h.elem_count = static_cast<uint16_t>(payload.size() / wire::dtype_size(job.dtype));
  h.flags = static_cast<uint8_t>(f.round & 1);
  wire::set_contribution_tx_seq(&h, f.tx_seq);
  h.elem_offset = f.elem_offset;
  uint8_t* p = wire::write_frame_headers(out, a, h, payload.size());
  if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());
  const size_t len = wire::frame_len(payload.size());
  icrc::stamp_frame(std::span<uint8_t>(out, len));
  return len;
}

std::vector<uint8_t> make_contribution_frame(const JobSpec& job, const EngineOptions& appliance,
                                             const ContributionFields& f, std::span<const uint8_t> payload) {
  std::vector<uint8_t> frame(wire::kMaxFrameLen);
  frame.resize(write_contribution_frame(frame.data(), job, appliance, f, payload));
  return frame;
}

void restamp_frame(std::span<uint8_t> frame) { icrc::stamp_frame(frame); }

std::vector<uint8_t> encode_elements(wire::Dtype dtype, std::span<const double> values) {
  const size_t size = wire::dtype_size(dtype);
  std::vector<uint8_t> out(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = out.data() + i * size;
    switch (dtype) {
      case wire::Dtype::kFp32: {
        const auto v = static_cast<float>(values[i]);
        std::memcpy(p, &v, 4);
        break;
      }
      case wire::Dtype::kFp16: {
        const uint16_t v = kernels::float_to_half(static_cast<float>(values[i]));
        std::memcpy(p, &v, 2);
        break;
      }
      case wire::Dtype::kBf16: {
        const uint16_t v = kernels::float_to_bf16(static_cast<float>(values[i]));
        std::memcpy(p, &v, 2);
        break;
      }
      case wire::Dtype::kInt32: {
        const auto v = static_cast<int32_t>(values[i]);
        std::memcpy(p, &v, 4);
        break;
      }
      case wire::Dtype::kFp64:
        std::memcpy(p, &values[i], 8);
        break;
    }
  }
  return out;
}

std::vector<double> decode_elements(wire::Dtype dtype, std::span<const uint8_t> bytes) {
  const size_t size = wire::dtype_size(dtype);
  std::vector<double> out(bytes.size() / size);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = bytes.data() + i * size;
    switch (dtype) {
      case wire::Dtype::kFp32: {
        float v;
        std::memcpy(&v, p, 4);
        out[i] = static_cast<double>(v);
        break;
      }
      case wire::Dtype::kFp16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        out[i] = static_cast<double>(kernels::half_to_float(v));
        break;
      }
      case wire::Dtype::kBf16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        out[i] = static_cast<double>(kernels::bf16_to_float(v));
        break;
      }
      case wire::Dtype::kInt32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        out[i] = static_cast<double>(v);
        break;
      }
      case wire::Dtype::kFp64:
        std::memcpy(&out[i], p, 8);
        break;
    }
  }
  return out;
}

}  // namespace sumcast::engine
