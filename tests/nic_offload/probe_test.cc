// Probing a real (virtual) PMD in-process: net_ring has no rte_flow, so the probe must record the
// refusal and the plan must fall back to RSS + software dispatch; installing rules there fails
// cleanly and leaves nothing behind. (rte_flow acceptance itself needs a NIC: docs/nic_offload.md.)
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sumcast/nic_offload/capabilities.h"
#include "sumcast/nic_offload/flow_installer.h"

namespace sumcast::nic_offload {
namespace {

constexpr uint32_t kApplianceIp = 0x0A000001;
constexpr uint16_t kQueues = 2;

// EAL with net_ring0 configured with kQueues queue pairs (not started), once per process.
int ring_port() {
  static const int port = []() -> int {
    const std::string prefix = "scprobe" + std::to_string(getpid());
    static std::vector<std::string> storage = {
        "probe_test",    "-l",   "0",      "--no-huge", "-m",          "64",           "--no-pci", "--no-telemetry",
        "--file-prefix", prefix, "--vdev", "net_ring0", "--log-level", "lib.eal:error"};
    static std::vector<char*> argv;
    for (std::string& s : storage) argv.push_back(s.data());
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) return -1;
    uint16_t id = 0;
    if (rte_eth_dev_get_port_by_name("net_ring0", &id) != 0) return -1;
    rte_mempool* pool = rte_pktmbuf_pool_create("probe_pool", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    if (pool == nullptr) return -1;
    rte_eth_conf conf{};
    if (rte_eth_dev_configure(id, kQueues, kQueues, &conf) != 0) return -1;
    for (uint16_t q = 0; q < kQueues; ++q) {
      if (rte_eth_rx_queue_setup(id, q, 64, 0, nullptr, pool) != 0) return -1;
      if (rte_eth_tx_queue_setup(id, q, 64, 0, nullptr) != 0) return -1;
    }
    return id;
  }();
  return port;
}

class EalEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (ring_port() < 0) return;
    const std::string dir = rte_eal_get_runtime_dir();
    rte_eth_dev_close(static_cast<uint16_t>(ring_port()));
    rte_eal_cleanup();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new EalEnvironment);

TEST(ProbeTest, RingPortWithoutRteFlowIsRefusedAndFallsBackToSoftwareDispatch) {
  const int port = ring_port();
  ASSERT_GE(port, 0) << "EAL or net_ring0 set-up failed";
  const auto id = static_cast<uint16_t>(port);
  PortCapabilities caps = probe_device(id, parse_vdev("net_ring0"));
  EXPECT_EQ(caps.driver, "net_ring");
  EXPECT_GE(caps.max_rx_queues, kQueues);
  EXPECT_FALSE(caps.xdp_program);
  EXPECT_EQ(caps.steering, FlowSupport::kNotProbed);

  probe_flows(id, kApplianceIp, 2, kQueues, 0x100, false, &caps);
  EXPECT_EQ(caps.steering, FlowSupport::kRefused);
  EXPECT_EQ(caps.filter, FlowSupport::kRefused);
  EXPECT_NE(caps.steering_refusal.find("steer qpn 0x000100 -> queue 0"), std::string::npos) << caps.steering_refusal;
  EXPECT_FALSE(caps.filter_refusal.empty());

  const OffloadPlan plan = choose_plan(caps, 2, kQueues);
  EXPECT_EQ(plan.mode, SteeringMode::kRssSoftwareDispatch);
  EXPECT_TRUE(plan.software_dispatch);
  EXPECT_FALSE(plan.install_steering);
  EXPECT_FALSE(plan.install_filter);
  EXPECT_NE(plan.reason.find("rte_flow_validate refused"), std::string::npos) << plan.reason;
}

TEST(ProbeTest, OneCoreProbesOnlyTheFilter) {
  const int port = ring_port();
  ASSERT_GE(port, 0);
  PortCapabilities caps = probe_device(static_cast<uint16_t>(port), {});
  probe_flows(static_cast<uint16_t>(port), kApplianceIp, 1, 1, 0x100, false, &caps);
  EXPECT_EQ(caps.steering, FlowSupport::kNotProbed);
  EXPECT_EQ(caps.filter, FlowSupport::kRefused);
  EXPECT_EQ(choose_plan(caps, 1, 1).mode, SteeringMode::kSingleCore);
}

TEST(ProbeTest, InstallOnAPortWithoutRteFlowFailsAndLeavesNothing) {
  const int port = ring_port();
  ASSERT_GE(port, 0);
  FlowInstaller installer;
  const Status st = installer.install(static_cast<uint16_t>(port), filter_rules(kApplianceIp, kQueues, false));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("accept roce"), std::string::npos) << st.message();
  EXPECT_EQ(installer.installed(), 0u);
}

}  // namespace
}  // namespace sumcast::nic_offload
