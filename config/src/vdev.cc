#include "sumcast/config/vdev.h"

#include <linux/if_packet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>

namespace sumcast::config {
namespace {

constexpr uint32_t kEtherHeader = 14;
constexpr uint32_t kVlanTag = 4;
// Where tpacket_rcv writes a frame's MAC header in a TPACKET_V2 ring frame: the network header at
// TPACKET_ALIGN(TPACKET2_HDRLEN + 16), the MAC header before it.
constexpr uint32_t kMacOffset = TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - kEtherHeader;

uint32_t page_size() { return static_cast<uint32_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

std::string VdevArgs::get(const std::string& key) const {
  for (const auto& [k, v] : options) {
    if (k == key) return v;
  }
  return "";
}

VdevArgs parse_vdev(const std::string& vdev) {
  VdevArgs out;
  size_t start = 0;
  bool first = true;
  while (start <= vdev.size()) {
    size_t end = vdev.find(',', start);
    if (end == std::string::npos) end = vdev.size();
    const std::string part = vdev.substr(start, end - start);
    if (first) {
      out.name = part;
      first = false;
    } else if (!part.empty()) {
      const size_t eq = part.find('=');
      if (eq == std::string::npos) {
        out.options.emplace_back(part, "");
      } else {
        out.options.emplace_back(part.substr(0, eq), part.substr(eq + 1));
      }
    }
    start = end + 1;
  }
  return out;
}

VdevArgs find_vdev(const std::vector<std::string>& vdevs, const std::string& device) {
  for (const std::string& v : vdevs) {
    VdevArgs a = parse_vdev(v);
    if (a.name == device) return a;
  }
  return {};
}

bool is_af_packet(const VdevArgs& vdev) {
  return vdev.name.starts_with("net_af_packet") || vdev.name.starts_with("eth_af_packet");
}

uint32_t AfPacketRing::frame_data() const {
  constexpr uint32_t kHeader = TPACKET2_HDRLEN - sizeof(sockaddr_ll);
  return frame_size > kHeader ? frame_size - kHeader : 0;
}

Result<AfPacketRing> af_packet_ring(const VdevArgs& vdev) {
  AfPacketRing r;
  r.block_size = page_size();
  const auto number = [&](const char* key, uint32_t* out, const char* what) -> Status {
    const std::string v = vdev.get(key);
    if (v.empty()) return {};
    char* end = nullptr;
    const unsigned long x = std::strtoul(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0' || x == 0 || x > (1ul << 30)) {
      return Status::invalid_argument(vdev.name + ": " + key + "=" + v + " is not a number of " + what + " (1..2^30)");
    }
    *out = static_cast<uint32_t>(x);
    return {};
  };
  SUMCAST_RETURN_IF_ERROR(number("framesz", &r.frame_size, "bytes"));
  SUMCAST_RETURN_IF_ERROR(number("blocksz", &r.block_size, "bytes"));
  SUMCAST_RETURN_IF_ERROR(number("framecnt", &r.frame_count, "frames"));
  const std::string sizes =
      vdev.name + ": framesz=" + std::to_string(r.frame_size) + ", blocksz=" + std::to_string(r.block_size);
  if (r.frame_size % TPACKET_ALIGNMENT != 0) {
    return Status::invalid_argument(sizes + ": framesz must be a multiple of " + std::to_string(TPACKET_ALIGNMENT));
  }
  if (r.block_size % page_size() != 0) {
    return Status::invalid_argument(sizes + ": blocksz must be a multiple of the page size (" +
                                    std::to_string(page_size()) + ")");
  }
  if (r.block_size % r.frame_size != 0) {
    return Status::invalid_argument(sizes + ": blocksz must be a multiple of framesz (the PMD finds frame i at " +
                                    "i x framesz)");
  }
  if (r.frame_count % r.frames_per_block() != 0) {
    return Status::invalid_argument(sizes + ", framecnt=" + std::to_string(r.frame_count) +
                                    ": framecnt must be a multiple of the frames per block (blocksz / framesz = " +
                                    std::to_string(r.frames_per_block()) + "): the kernel takes whole blocks");
  }
  return r;
}

uint32_t af_packet_frame_size_for(uint32_t mtu) {
  const uint32_t need = kMacOffset + kEtherHeader + kVlanTag + mtu;
  return (need + TPACKET_ALIGNMENT - 1) / TPACKET_ALIGNMENT * TPACKET_ALIGNMENT;
}

uint64_t af_packet_block_memory(const AfPacketRing& ring) { return std::bit_ceil(uint64_t{ring.block_size}); }

uint32_t af_packet_frame_count(const AfPacketRing& ring) {
  if (ring.frame_count != 0) return ring.frame_count;
  const uint32_t per_block = ring.frames_per_block();
  const uint64_t blocks =
      std::min<uint64_t>(kAfPacketRingFrames / per_block, kAfPacketRingBytes / af_packet_block_memory(ring));
  return static_cast<uint32_t>(std::max<uint64_t>(blocks, 1) * per_block);
}

}  // namespace sumcast::config
