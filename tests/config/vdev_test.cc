// eal.vdevs entries: name and options, the port's vdev by name, and net_af_packet's ring geometry
// (framesz/blocksz as the kernel and the PMD take them, the frame size an MTU needs).
#include "sumcast/config/vdev.h"

#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <unistd.h>

#include <algorithm>
#include <string>

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
  // framecnt= in whole blocks: the kernel refuses a ring whose frames do not fill its blocks.
  auto r = af_packet_ring(parse_vdev("net_af_packet0,framesz=2048,blocksz=8192,framecnt=1026"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("framecnt must be a multiple of the frames per block (blocksz / framesz = 4)"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE(af_packet_ring(parse_vdev("net_af_packet0,framecnt=0")).ok());
  EXPECT_NE(af_packet_ring(parse_vdev("net_af_packet0,framecnt=x"))
                .status()
                .message()
                .find("framecnt=x is not a number of frames"),
            std::string::npos);
  r = af_packet_ring(parse_vdev("net_af_packet0,framesz=2048,blocksz=8192,framecnt=1028"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->frame_count, 1028u);
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

// The ring size sumcastd asks for where the vdev names none: 4096 frames, fewer where the blocks
// would take more than 32 MiB of kernel memory (the kernel allocates a block in a power of two of
// pages), always whole blocks; a framecnt= given is kept.
TEST(VdevTest, AfPacketFrameCount) {
  const auto count = [](const char* v) {
    auto r = af_packet_ring(parse_vdev(v));
    EXPECT_TRUE(r.ok()) << v << ": " << r.status().message();
    return r.ok() ? af_packet_frame_count(*r) : 0u;
  };
  EXPECT_EQ(count("net_af_packet0,iface=d0"), kAfPacketRingFrames);                   // 2048 blocks of 4 KiB
  EXPECT_EQ(count("net_af_packet0,framesz=1024,blocksz=8192"), kAfPacketRingFrames);  // 8 per block
  EXPECT_EQ(count("net_af_packet0,framesz=9216,blocksz=36864"), 2048u);               // 512 blocks of 64 KiB
  EXPECT_EQ(count("net_af_packet0,framesz=3072,blocksz=12288"), 4096u);               // 1024 blocks of 16 KiB
  EXPECT_EQ(count("net_af_packet0,framesz=12288,blocksz=12288"), 2048u);              // 1 per 16 KiB block
  EXPECT_EQ(count("net_af_packet0,framesz=65536,blocksz=1048576"), 512u);             // 32 blocks of 1 MiB
  EXPECT_EQ(count("net_af_packet0,framesz=2048,blocksz=67108864"), 32768u);           // one block, however large
  EXPECT_EQ(count("net_af_packet0,framesz=9216,blocksz=36864,framecnt=1024"), 1024u);
  for (const char* v : {"net_af_packet0,framesz=1584,blocksz=405504", "net_af_packet0,framesz=9216,blocksz=36864",
                        "net_af_packet0,framesz=5120,blocksz=20480", "net_af_packet0,iface=d0"}) {
    auto r = af_packet_ring(parse_vdev(v));
    ASSERT_TRUE(r.ok()) << v;
    const uint32_t n = af_packet_frame_count(*r);
    EXPECT_EQ(n % r->frames_per_block(), 0u) << v;
    EXPECT_LE(n, kAfPacketRingFrames) << v;
    EXPECT_LE(uint64_t{n} / r->frames_per_block() * af_packet_block_memory(*r), kAfPacketRingBytes) << v;
  }
}

}  // namespace
}  // namespace sumcast::config
