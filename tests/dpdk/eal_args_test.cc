// EAL argument building (sumcast/dpdk/eal_args.h): config to argv, command-line overrides, the
// hugepage decision and its edges.
#include "sumcast/dpdk/eal_args.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace sumcast::dpdk {
namespace {

config::AggConfig base_config() {
  config::AggConfig c;
  c.path = "agg.conf";
  c.eal.lcores = "0,1";
  c.eal.file_prefix = "scx";
  c.eal.memory_mb = 512;
  c.eal.vdevs = {"net_af_packet0,iface=d0,framecnt=2048"};  // a ring size given: no note (see below)
  c.port.device = "net_af_packet0";
  c.port.ipv4 = 0x0A000001;  // 10.0.0.1
  return c;
}

HugePageState hugepages(uint64_t free_pages) { return HugePageState{{"/dev/hugepages"}, free_pages}; }

bool has(const std::vector<std::string>& args, const std::string& a) {
  return std::find(args.begin(), args.end(), a) != args.end();
}
// The argument right after `a`, or "".
std::string after(const std::vector<std::string>& args, const std::string& a) {
  auto it = std::find(args.begin(), args.end(), a);
  return it != args.end() && it + 1 != args.end() ? *(it + 1) : "";
}

TEST(EalArgsTest, ConfigBecomesArguments) {
  config::AggConfig c = base_config();
  c.eal.allow = {};
  c.eal.extra_args = {"--log-level=lib.eal:notice"};
  Result<EalPlan> plan = plan_eal(c, hugepages(1024), {}, "sumcastd");
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const auto& a = plan->args;
  EXPECT_EQ(a.front(), "sumcastd");
  EXPECT_EQ(after(a, "-l"), "0,1");
  EXPECT_EQ(after(a, "--file-prefix"), "scx");
  EXPECT_EQ(after(a, "-m"), "512");
  EXPECT_EQ(after(a, "--vdev"), "net_af_packet0,iface=d0,framecnt=2048");
  EXPECT_TRUE(has(a, "--no-pci")) << "the port is a vdev and nothing is allowed";
  EXPECT_EQ(a.back(), "--log-level=lib.eal:notice");
  EXPECT_EQ(plan->file_prefix, "scx");
}

// The port's net_af_packet rings get sumcastd's size where the vdev names none (config/vdev.h);
// a size the operator gave, another vdev and other PMDs are left as they are.
TEST(EalArgsTest, AfPacketPortRingsGetSumcastdsSize) {
  const auto vdev_args = [](const config::AggConfig& c) {
    Result<EalPlan> plan = plan_eal(c, hugepages(1024), {});
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    std::vector<std::string> out;
    for (size_t i = 0; plan.ok() && i + 1 < plan->args.size(); ++i) {
      if (plan->args[i] == "--vdev") out.push_back(plan->args[i + 1]);
    }
    return std::make_pair(out, plan.ok() ? plan->notes : std::vector<std::string>{});
  };
  config::AggConfig c = base_config();
  c.eal.vdevs = {"net_af_packet0,iface=d0"};
  auto [args, notes] = vdev_args(c);
  ASSERT_EQ(args.size(), 1u);
  EXPECT_EQ(args[0], "net_af_packet0,iface=d0,framecnt=4096");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("net_af_packet0: framecnt=4096 added (8192 KiB of kernel memory per ring;", 0), 0u)
      << notes[0];

  // Jumbo frames: as many as 32 MiB of kernel memory holds (4 frames of 9216 bytes per block, a block 64 KiB).
  c.eal.vdevs = {"net_af_packet0,iface=d0,framesz=9216,blocksz=36864", "net_af_packet1,iface=d1"};
  std::tie(args, notes) = vdev_args(c);
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(args[0], "net_af_packet0,iface=d0,framesz=9216,blocksz=36864,framecnt=2048");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("framecnt=2048 added (32768 KiB of kernel memory per ring;"), std::string::npos) << notes[0];
  EXPECT_EQ(args[1], "net_af_packet1,iface=d1") << "not the port: left to the PMD";

  c.eal.vdevs = {"net_af_packet0,iface=d0,framecnt=1024"};
  std::tie(args, notes) = vdev_args(c);
  EXPECT_EQ(args[0], "net_af_packet0,iface=d0,framecnt=1024") << "the operator's size is kept";
  EXPECT_TRUE(notes.empty());

  c.eal.vdevs = {"net_af_xdp0,iface=d0"};
  c.port.device = "net_af_xdp0";
  std::tie(args, notes) = vdev_args(c);
  EXPECT_EQ(args[0], "net_af_xdp0,iface=d0");
  EXPECT_TRUE(notes.empty());
}

TEST(EalArgsTest, MappedLcoresUseLongOption) {
  config::AggConfig c = base_config();
  c.eal.lcores = "0@1,1@0";
  Result<EalPlan> plan = plan_eal(c, hugepages(1024), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(after(plan->args, "--lcores"), "0@1,1@0");
  EXPECT_FALSE(has(plan->args, "-l"));
}

TEST(EalArgsTest, PciPortKeepsPciProbing) {
  config::AggConfig c = base_config();
  c.eal.vdevs.clear();
  c.eal.allow = {"0000:3b:00.0"};
  c.port.device = "0000:3b:00.0";
  Result<EalPlan> plan = plan_eal(c, hugepages(1024), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(after(plan->args, "-a"), "0000:3b:00.0");
  EXPECT_FALSE(has(plan->args, "--no-pci"));
}

TEST(EalArgsTest, AutoUsesHugepagesAtExactlyHalfTheMemory) {
  config::AggConfig c = base_config();  // 512 MB: 256 pages
  Result<EalPlan> plan = plan_eal(c, hugepages(256), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->hugepages);
  EXPECT_FALSE(has(plan->args, "--no-huge"));
  EXPECT_NE(plan->memory_note.find("hugepages"), std::string::npos);
}

TEST(EalArgsTest, AutoFallsBackToNoHugeOnePageShort) {
  config::AggConfig c = base_config();
  Result<EalPlan> plan = plan_eal(c, hugepages(255), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->hugepages);
  EXPECT_TRUE(has(plan->args, "--no-huge"));
  EXPECT_NE(plan->memory_note.find("--no-huge"), std::string::npos);
}

TEST(EalArgsTest, AutoFallsBackToNoHugeWhenNothingMounted) {
  config::AggConfig c = base_config();
  Result<EalPlan> plan = plan_eal(c, HugePageState{{}, 4096}, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(has(plan->args, "--no-huge"));
  EXPECT_NE(plan->memory_note.find("no hugetlbfs"), std::string::npos);
}

TEST(EalArgsTest, OnFailsWithoutHugepagesNamingTheKey) {
  config::AggConfig c = base_config();
  c.eal.huge_pages = config::HugePages::kOn;
  Result<EalPlan> plan = plan_eal(c, hugepages(10), {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(plan.status().message().find("agg.conf: eal.huge_pages"), std::string::npos);
}

TEST(EalArgsTest, OffAlwaysAddsNoHuge) {
  config::AggConfig c = base_config();
  c.eal.huge_pages = config::HugePages::kOff;
  Result<EalPlan> plan = plan_eal(c, hugepages(100000), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(has(plan->args, "--no-huge"));
}

TEST(EalArgsTest, InMemoryIsDroppedWithNoHuge) {
  config::AggConfig c = base_config();
  c.eal.huge_pages = config::HugePages::kOff;
  c.eal.extra_args = {"--in-memory"};
  const std::vector<std::string> overrides = {"--in-memory"};
  Result<EalPlan> plan = plan_eal(c, hugepages(0), overrides);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(has(plan->args, "--in-memory"));
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_NE(plan->notes[0].find("--in-memory"), std::string::npos);
}

TEST(EalArgsTest, InMemoryKeptWithHugepages) {
  config::AggConfig c = base_config();
  c.eal.extra_args = {"--in-memory"};
  Result<EalPlan> plan = plan_eal(c, hugepages(1024), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(has(plan->args, "--in-memory"));
}

TEST(EalArgsTest, OverridesReplaceConfigOptions) {
  config::AggConfig c = base_config();
  const std::vector<std::string> overrides = {"-l", "0,3", "--file-prefix=other", "-m", "1024", "--vdev", "net_null0"};
  Result<EalPlan> plan = plan_eal(c, hugepages(512), overrides);
  ASSERT_TRUE(plan.ok());
  const auto& a = plan->args;
  EXPECT_EQ(std::count(a.begin(), a.end(), "-l"), 1);
  EXPECT_EQ(after(a, "-l"), "0,3");
  EXPECT_FALSE(has(a, "--file-prefix"));
  EXPECT_TRUE(has(a, "--file-prefix=other"));
  EXPECT_EQ(plan->file_prefix, "other");
  EXPECT_EQ(std::count(a.begin(), a.end(), "-m"), 1);
  EXPECT_EQ(after(a, "-m"), "1024");
  // Hugepages judged against the overriding 1024 MB: 512 pages are just enough.
  EXPECT_TRUE(plan->hugepages);
  // vdevs add up.
  EXPECT_EQ(std::count(a.begin(), a.end(), "--vdev"), 2);
  EXPECT_EQ(plan->notes.size(), 3u);
}

TEST(EalArgsTest, AttachedShortOptionOverrides) {
  config::AggConfig c = base_config();
  const std::vector<std::string> overrides = {"-l2,3", "-m2048"};
  Result<EalPlan> plan = plan_eal(c, hugepages(1023), overrides);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(has(plan->args, "-l"));
  EXPECT_FALSE(has(plan->args, "-m"));
  EXPECT_FALSE(plan->hugepages) << "2048 MB needs 1024 pages";
}

TEST(EalArgsTest, NoHugeOnCommandLineWins) {
  config::AggConfig c = base_config();
  c.eal.huge_pages = config::HugePages::kOn;
  const std::vector<std::string> overrides = {"--no-huge"};
  Result<EalPlan> plan = plan_eal(c, hugepages(0), overrides);
  ASSERT_TRUE(plan.ok()) << "an explicit --no-huge is not an error even with huge_pages = on";
  EXPECT_FALSE(plan->hugepages);
  EXPECT_EQ(std::count(plan->args.begin(), plan->args.end(), "--no-huge"), 1);
}

TEST(EalArgsTest, TelemetryOffAddsNoTelemetry) {
  config::AggConfig c = base_config();
  c.telemetry.dpdk_telemetry = false;
  Result<EalPlan> plan = plan_eal(c, hugepages(1024), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(has(plan->args, "--no-telemetry"));
}

TEST(EalArgsTest, HugetlbfsMountsFromProcMounts) {
  const char* text =
      "proc /proc proc rw 0 0\n"
      "nodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n"
      "tmpfs /run tmpfs rw 0 0\n"
      "none /mnt/huge1g hugetlbfs rw,pagesize=1024M 0 0\n"
      "garbage\n";
  const std::vector<std::string> m = hugetlbfs_mounts(text);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], "/dev/hugepages");
  EXPECT_EQ(m[1], "/mnt/huge1g");
  EXPECT_TRUE(hugetlbfs_mounts("").empty());
}

TEST(EalArgsTest, JoinArgs) {
  const std::vector<std::string> a = {"x", "-l", "0,1"};
  EXPECT_EQ(join_args(a), "x -l 0,1");
  EXPECT_EQ(join_args(std::vector<std::string>{}), "");
}

}  // namespace
}  // namespace sumcast::dpdk
