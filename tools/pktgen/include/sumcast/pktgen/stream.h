// A stress job's contribution streams, as frames and as pcap files for dpdk-pktgen (or any pcap
// replayer: DPDK's net_pcap, tcpreplay).
//
// The stream of one job: for every round r < rounds, for every slot s < slots, for every rank, the
// contribution of that rank to chunk (r, s) — round-major, so that replayed in order and without
// loss every slot round completes before the next round of that slot opens (docs/protocol.md §7:
// a round opens only once the slot's previous round completed). It is open-loop: nobody waits for
// results, which is what a packet generator can do. Split over several files (`files` > 1), file f
// carries the slots with s % files == f, each file still round-major: ports replaying different
// files independently never break the order a slot needs.
//
// Element i of rank k's contribution to (slot s, round r) is ((i + s + r + k) % 3) - 1, so sums are
// small integers, exact in every dtype for up to 256 ranks (bf16 holds integers up to 256).
//
// Thread safety: values and reentrant functions.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sumcast/engine/engine.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::pktgen {

struct StreamSpec {
  // The job, as the appliance granted it (or as given on the command line).
  uint32_t job_id = 0;
  uint32_t qkey = 0;
  wire::Dtype dtype = wire::Dtype::kFp32;
  wire::ReduceOp op = wire::ReduceOp::kSum;
  uint16_t slots = 0;          // slots used, 0..slots-1 (at most the grant's slot count)
  uint16_t payload_bytes = 0;  // per contribution, a multiple of the dtype's size
  uint32_t rounds = 1;         // rounds of every slot
  uint8_t appliance_mac[6] = {};
  uint32_t appliance_ip = 0;          // host order
  std::vector<uint32_t> core_qpns;    // slot s goes to core_qpns[s % size()]
  std::vector<engine::Member> ranks;  // the senders (size = world size): MAC, IPv4, UDP source port, QPN
  uint32_t files = 1;                 // split by slot (see above)
};

// Checks the spec (sizes, limits of the wire format). Errors name the field.
Status validate(const StreamSpec& spec);

// The element value and the exact sum over `world` ranks (see above).
double stream_element(uint32_t rank, uint32_t slot, uint32_t round, size_t i);
double stream_sum(uint32_t world, uint32_t slot, uint32_t round, size_t i);
// Elements per contribution.
size_t stream_elements(const StreamSpec& spec);
// Frames in file `file` (and in all of them).
uint64_t stream_frames(const StreamSpec& spec, uint32_t file);
uint64_t stream_frames(const StreamSpec& spec);

// The job as the appliance's engines hold it (for in-memory replays in tests).
engine::JobSpec engine_job(const StreamSpec& spec);

// Calls `emit` with every frame of file `file` in replay order. Precondition: validate() passed.
void for_each_frame(const StreamSpec& spec, uint32_t file, const std::function<void(std::span<const uint8_t>)>& emit);

// A classic pcap file (microsecond timestamps, Ethernet link type), written by hand.
class PcapWriter {
 public:
  static Result<PcapWriter> create(const std::string& path);
  PcapWriter(PcapWriter&& other) noexcept;
  PcapWriter& operator=(PcapWriter&& other) noexcept;
  ~PcapWriter();  // closes (errors at close are lost: call close())
  Status write(std::span<const uint8_t> frame, uint64_t timestamp_ns);
  Status close();
  uint64_t frames() const { return frames_; }

 private:
  PcapWriter() = default;
  std::FILE* f_ = nullptr;
  std::string path_;
  uint64_t frames_ = 0;
};

// Writes every file of the stream: paths[f] gets file f. Timestamps are spaced 1/pps apart
// (pps <= 0: all zero). Returns the frames written.
Result<uint64_t> write_pcaps(const StreamSpec& spec, const std::vector<std::string>& paths, double pps);

// The file names for `files` files from one output name: "x.pcap" stays for 1 file, else
// "x-0.pcap", "x-1.pcap", ...
std::vector<std::string> pcap_paths(const std::string& output, uint32_t files);

// Checks one result frame's payload (from the appliance, as a worker receives it: BTH..ICRC
// already parsed) against the exact sums. False when any element differs.
bool result_is_exact(const StreamSpec& spec, const wire::SumcastHeader& h, std::span<const uint8_t> payload);

}  // namespace sumcast::pktgen
