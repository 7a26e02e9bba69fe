// eal.vdevs entries: name and options, the port's vdev by name, and net_af_packet's ring geometry
// (framesz/blocksz as the kernel and the PMD take them, the frame size an MTU needs).
#include "sumcast/config/vdev.h"

#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <unistd.h>

namespace sumcast::config {
namespace {

TEST(VdevTest, ParsesNameAndOptions) {
  const VdevArgs a = parse_vdev("net_af_xdp0,iface=d0,start_queue=0,xdp_prog=/opt/x.o");
  EXPECT_EQ(a.name, "net_af_xdp0");
  EXPECT_EQ(a.get("iface"), "d0");
  EXPECT_EQ(a.get("xdp_prog"), "/opt/x.o");
  EXPECT_EQ(a.get("queue_count"), "");
  EXPECT_EQ(parse_vdev("net_null0").options.size(), 0u);
  const VdevArgs found = find_vdev({"net_ring0", "net_af_xdp0,iface=d0"}, "net_af_xdp0");
  EXPECT_EQ(found.get("iface"), "d0");
  EXPECT_EQ(find_vdev({"net_ring0"}, "net_af_xdp0").name, "");
}

TEST(VdevTest, AfPacketByNameOrAlias) {
  EXPECT_TRUE(is_af_packet(parse_vdev("net_af_packet0,iface=d0")));
  EXPECT_TRUE(is_af_packet(parse_vdev("eth_af_packet1")));
  EXPECT_FALSE(is_af_packet(parse_vdev("net_af_xdp0,iface=d0")));
  EXPECT_FALSE(is_af_packet(parse_vdev("net_pcap0,iface=d0")));
}

TEST(VdevTest, AfPacketRingDefaultsAreThePmds) {
  auto r = af_packet_ring(parse_vdev("net_af_packet0,iface=d0"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->frame_size, 2048u);
  EXPECT_EQ(r->block_size, static_cast<uint32_t>(sysconf(_SC_PAGESIZE)));
  // The PMD counts a ring frame less TPACKET_V2's header and sockaddr_ll as frame data.
  EXPECT_EQ(r->frame_data(), 2048u - (TPACKET2_HDRLEN - sizeof(sockaddr_ll)));
  r = af_packet_ring(parse_vdev("net_af_packet0,iface=d0,framesz=9216,blocksz=36864,framecnt=1024"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->frame_size, 9216u);
  EXPECT_EQ(r->block_size, 36864u);
}

TEST(VdevTest, AfPacketRingRefusesWhatTheKernelOrPmdWould) {
  for (const char* bad : {"framesz=0", "framesz=-16", "framesz=16x", "blocksz=", "framesz=2147483648"}) {
    SCOPED_TRACE(bad);
    const std::string v = std::string("net_af_packet0,") + bad;
    // An empty value stands for the default, as the PMD reads it.
    if (std::string(bad) == "blocksz=") {
      EXPECT_TRUE(af_packet_ring(parse_vdev(v)).ok());
      continue;
    }
    EXPECT_FALSE(af_packet_ring(parse_vdev(v)).ok());
  }
  EXPECT_FALSE(af_packet_ring(parse_vdev("net_af_packet0,framesz=2056,blocksz=4112")).ok());  // not 16-byte aligned
  EXPECT_FALSE(af_packet_ring(parse_vdev("net_af_packet0,framesz=3072,blocksz=4096")).ok());  // frames do not fill
  EXPECT_FALSE(af_packet_ring(parse_vdev("net_af_packet0,framesz=8192,blocksz=4096")).ok());  // frame > block
  EXPECT_TRUE(af_packet_ring(parse_vdev("net_af_packet0,framesz=3072,blocksz=12288")).ok());
}

TEST(VdevTest, FrameSizeForAnMtuHoldsTheFrameWhereTheKernelWritesIt) {
  // The MAC header 66 bytes in, 14 + 4 (VLAN) + MTU bytes of frame, rounded to 16.
  EXPECT_EQ(TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14, 66u);
  EXPECT_EQ(af_packet_frame_size_for(1500), 1584u);
  EXPECT_EQ(af_packet_frame_size_for(9000), 9088u);
  EXPECT_EQ(af_packet_frame_size_for(9001), 9088u);
  EXPECT_EQ(af_packet_frame_size_for(9005), 9104u);
  for (uint32_t mtu = 576; mtu <= 9216; mtu += 37) {
    const uint32_t f = af_packet_frame_size_for(mtu);
    EXPECT_EQ(f % TPACKET_ALIGNMENT, 0u);
    EXPECT_GE(f, 66u + 18u + mtu);
    EXPECT_LT(f, 66u + 18u + mtu + TPACKET_ALIGNMENT);
  }
}

}  // namespace
}  // namespace sumcast::config
