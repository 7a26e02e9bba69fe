// Helpers for tests and benchmarks of the engine: build the contribution frames a job's members
// would send, and convert integer-valued test data to and from wire dtypes.
//
// Not for the data path (these allocate). Thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sumcast/engine/engine.h"
#include "sumcast/wire/format.h"

namespace sumcast::engine {

// Where one contribution belongs (the rest comes from the job and the member).
struct ContributionFields {
  uint16_t rank = 0;
  uint16_t slot = 0;
  uint32_t round = 0;
  uint32_t coll_seq = 0;
  uint64_t elem_offset = 0;
  uint32_t tx_seq = 0;  // the member's number of this first transmission (loss notices, protocol.md §7)
};

// Writes the frame that member `f.rank` of `job` sends to the appliance core `appliance`: from
// the member's MAC/IPv4/UDP port/QPN to appliance.local_mac/local_ip, port 4791, BTH DestQP
// appliance.qpn; the job's Q_Key, dtype and op; the round's version flag and the transmission
// number (wire::set_contribution_tx_seq); `payload` in wire
// format (elem_count = payload.size() / dtype size); ICRC stamped. `out` holds at least
// wire::kMaxFrameLen bytes. Returns the frame length. Precondition: f.rank < job.members.size().
size_t write_contribution_frame(uint8_t* out, const JobSpec& job, const EngineOptions& appliance,
                                const ContributionFields& f, std::span<const uint8_t> payload);
std::vector<uint8_t> make_contribution_frame(const JobSpec& job, const EngineOptions& appliance,
                                             const ContributionFields& f, std::span<const uint8_t> payload);

// Re-stamps the ICRC of a frame a test has edited (the IPv4 total length says where it is).
void restamp_frame(std::span<uint8_t> frame);

// `values` in wire format of `dtype` (little-endian; fp16/bf16 rounded to nearest even).
std::vector<uint8_t> encode_elements(wire::Dtype dtype, std::span<const double> values);
// The elements of a wire-format payload, widened to double.
std::vector<double> decode_elements(wire::Dtype dtype, std::span<const uint8_t> bytes);

}  // namespace sumcast::engine
