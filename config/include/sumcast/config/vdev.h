// DPDK vdev arguments as agg.conf's eal.vdevs holds them, and what sumcastd needs to know of one
// before the EAL runs: the ring geometry of a net_af_packet vdev (docs/agg.conf.md, "Jumbo frames
// on net_af_packet").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sumcast/status.h"

namespace sumcast::config {

// One "key=value" option list of a DPDK vdev argument, e.g.
// "net_af_xdp0,iface=d0,xdp_prog=/x.o" -> name "net_af_xdp0", {iface: d0, xdp_prog: /x.o}.
struct VdevArgs {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;
  // The value of `key`, or "" when absent.
  std::string get(const std::string& key) const;
};
VdevArgs parse_vdev(const std::string& vdev);
// The vdev among `vdevs` whose name is `device`; name "" when none.
VdevArgs find_vdev(const std::vector<std::string>& vdevs, const std::string& device);

// A net_af_packet vdev (by its name, or the PMD's alias eth_af_packet).
bool is_af_packet(const VdevArgs& vdev);

// net_af_packet's ring geometry: framesz= and blocksz= (the PMD's defaults, 2048 and the page
// size, where absent) and framecnt=. An error says which value the kernel or the PMD would refuse:
// frames aligned to 16 bytes, blocks of whole pages holding whole frames (the PMD finds frame i at
// i x framesz), a frame count of whole blocks (the kernel refuses a ring of part of a block).
struct AfPacketRing {
  uint32_t frame_size = 2048;
  uint32_t block_size = 0;
  uint32_t frame_count = 0;  // framecnt=; 0 where absent (see af_packet_frame_count)
  uint32_t frames_per_block() const { return block_size / frame_size; }
  // Frame bytes one ring frame carries (the PMD's tx limit, and what it requires of an rx mbuf):
  // the frame less TPACKET_V2's header.
  uint32_t frame_data() const;
};
Result<AfPacketRing> af_packet_ring(const VdevArgs& vdev);
// The smallest framesz= whose ring frames hold a whole frame, with a VLAN tag, of an interface of
// this MTU: the kernel writes a received frame 66 bytes into its ring frame (TPACKET_V2).
uint32_t af_packet_frame_size_for(uint32_t mtu);

// The frames of each of the port's rings (one rx and one tx ring per queue pair) when its vdev names
// no framecnt=: the PMD's own default, 512, is overrun whenever the engine lcore is descheduled
// while the workers' windows are full (an appliance sharing its CPUs: 1.4-2.2% of the frames of
// the MPI namespace test lost in the kernel with 512, none with 2048). sumcastd asks for
// kAfPacketRingFrames, in whole blocks, or fewer where that would take more than
// kAfPacketRingBytes of kernel memory per ring (at least one block).
inline constexpr uint32_t kAfPacketRingFrames = 4096;
inline constexpr uint64_t kAfPacketRingBytes = uint64_t{32} << 20;
// The kernel memory of one ring block: the kernel allocates blocks in powers of two of pages.
uint64_t af_packet_block_memory(const AfPacketRing& ring);
uint32_t af_packet_frame_count(const AfPacketRing& ring);

}  // namespace sumcast::config
