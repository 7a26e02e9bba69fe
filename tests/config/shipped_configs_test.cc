// The shipped config/agg.conf and config/examples/*.conf parse and validate (with a token file
// made here: the shipped ones point at /etc/sumcast/token), config/agg.conf sets every key to
// the default its comment states (bar the keys the test bed needs), and docs/agg.conf.md
// documents every key.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "config_test_util.h"
#include "sumcast/config/agg_config.h"
#include "sumcast/config/settings.h"
#include "sumcast/ipv4.h"

namespace sumcast::config {
namespace {

using testing::TempDir;

const std::filesystem::path kSource = SUMCAST_SOURCE_DIR;

// Every key agg_config.h declares.
const std::vector<std::string> kAllKeys = {
    "eal.lcores",
    "eal.file_prefix",
    "eal.memory_mb",
    "eal.huge_pages",
    "eal.vdevs",
    "eal.allow",
    "eal.extra_args",
    "port.device",
    "port.mac",
    "port.ipv4",
    "port.prefix_len",
    "port.gateway",
    "port.routes",
    "port.arp_refresh_ms",
    "port.dscp",
    "port.ecn",
    "port.cnp_interval_us",
    "port.mtu",
    "port.rx_desc",
    "port.tx_desc",
    "dataplane.worker_cores",
    "dataplane.burst_size",
    "dataplane.tx_coalesce",
    "dataplane.slots_per_job",
    "dataplane.max_jobs",
    "dataplane.max_ranks",
    "dataplane.max_payload_bytes",
    "dataplane.dtypes",
    "dataplane.verify_icrc",
    "dataplane.udp_checksum",
    "dataplane.multicast",
    "dataplane.multicast_group",
    "dataplane.loss_notices",
    "dataplane.mbufs",
    "dataplane.idle_poll",
    "dataplane.idle_sleep_us",
    "dataplane.idle_after_us",
    "control.listen_address",
    "control.port",
    "control.token_file",
    "control.max_connections",
    "control.job_timeout_ms",
    "control.register_timeout_ms",
    "control.io_timeout_ms",
    "telemetry.dpdk_telemetry",
    "telemetry.prometheus_address",
    "telemetry.stats_interval_ms",
};

std::vector<std::filesystem::path> shipped_files() {
  std::vector<std::filesystem::path> files = {kSource / "config/agg.conf"};
  for (const auto& entry : std::filesystem::directory_iterator(kSource / "config/examples")) {
    if (entry.path().extension() == ".conf") files.push_back(entry.path());
  }
  std::sort(files.begin() + 1, files.end());
  return files;
}

TEST(ShippedConfigs, ThereAreARealNicAndAMemifExample) {
  EXPECT_TRUE(std::filesystem::exists(kSource / "config/examples/real-nic.conf"));
  EXPECT_TRUE(std::filesystem::exists(kSource / "config/examples/memif.conf"));
  EXPECT_GE(shipped_files().size(), 3u);
}

TEST(ShippedConfigs, EachParsesAndValidatesGivenItsTokenFile) {
  TempDir dir;
  const std::string token = dir.write("token", testing::kGoodToken);
  for (const std::filesystem::path& file : shipped_files()) {
    SCOPED_TRACE(file.string());
    Result<AggConfig> loaded = load_agg_config(file.string());
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ(loaded->control.token_file, "/etc/sumcast/token");
    loaded->control.token_file = token;
    const Status st = validate_agg_config(*loaded);
    EXPECT_TRUE(st.ok()) << st.message();
  }
}

TEST(ShippedConfigs, RealNicExampleRequiresHugepagesAndUsesAPciDevice) {
  const Result<AggConfig> loaded = load_agg_config((kSource / "config/examples/real-nic.conf").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->eal.huge_pages, HugePages::kOn);
  EXPECT_EQ(loaded->port.device, "0000:3b:00.0");
  EXPECT_EQ(loaded->eal.allow, std::vector<std::string>{"0000:3b:00.0"});
}

TEST(ShippedConfigs, MemifExampleUsesAMemifVdev) {
  const Result<AggConfig> loaded = load_agg_config((kSource / "config/examples/memif.conf").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->eal.vdevs.size(), 1u);
  EXPECT_EQ(loaded->eal.vdevs[0].rfind("net_memif0,", 0), 0u);
  EXPECT_EQ(loaded->port.device, "net_memif0");
}

TEST(ShippedConfigs, AggConfSetsEveryKey) {
  const Result<AggConfig> loaded = load_agg_config((kSource / "config/agg.conf").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  for (const std::string& key : kAllKeys) EXPECT_EQ(loaded->key_lines.count(key), 1u) << key;
}

// What sumcastctl check --json and /sumcast/config show (config::settings): every key, once, in
// this list's order.
TEST(ShippedConfigs, SettingsShowEveryKeyInOrder) {
  const Result<AggConfig> loaded = load_agg_config((kSource / "config/agg.conf").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  std::vector<std::string> keys;
  for (const Setting& s : settings(*loaded)) keys.push_back(std::string(s.section) + "." + s.key);
  EXPECT_EQ(keys, kAllKeys);
}

TEST(ShippedConfigs, AggConfKeepsTheDefaultsApartFromTheTestBedKeys) {
  Result<AggConfig> loaded = load_agg_config((kSource / "config/agg.conf").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const AggConfig defaults;
  AggConfig& c = *loaded;
  // The test bed's keys: its af_packet port and its management address.
  EXPECT_EQ(c.eal.vdevs, std::vector<std::string>{"net_af_packet0,iface=d0,qpairs=1"});
  EXPECT_EQ(c.port.device, "net_af_packet0");
  EXPECT_EQ(format_ipv4(c.port.ipv4), "10.77.0.1");
  EXPECT_EQ(format_ipv4(c.control.listen_address), "10.77.0.2");
  // Compare the rest field by field against a default-constructed struct.
  EXPECT_EQ(c.eal.lcores, defaults.eal.lcores);
  EXPECT_EQ(c.eal.file_prefix, defaults.eal.file_prefix);
  EXPECT_EQ(c.eal.memory_mb, defaults.eal.memory_mb);
  EXPECT_EQ(c.eal.huge_pages, defaults.eal.huge_pages);
  EXPECT_EQ(c.eal.allow, defaults.eal.allow);
  EXPECT_EQ(c.eal.extra_args, defaults.eal.extra_args);
  EXPECT_EQ(c.port.mac, defaults.port.mac);
  EXPECT_EQ(c.port.prefix_len, defaults.port.prefix_len);
  EXPECT_EQ(c.port.gateway, defaults.port.gateway);
  EXPECT_TRUE(c.port.routes.empty());
  EXPECT_EQ(c.port.arp_refresh_ms, defaults.port.arp_refresh_ms);
  EXPECT_EQ(c.port.dscp, defaults.port.dscp);
  EXPECT_EQ(c.port.ecn, defaults.port.ecn);
  EXPECT_EQ(c.port.cnp_interval_us, defaults.port.cnp_interval_us);
  EXPECT_EQ(c.port.mtu, defaults.port.mtu);
  EXPECT_EQ(c.port.rx_desc, defaults.port.rx_desc);
  EXPECT_EQ(c.port.tx_desc, defaults.port.tx_desc);
  EXPECT_EQ(c.dataplane.worker_cores, defaults.dataplane.worker_cores);
  EXPECT_EQ(c.dataplane.burst_size, defaults.dataplane.burst_size);
  EXPECT_EQ(c.dataplane.tx_coalesce, defaults.dataplane.tx_coalesce);
  EXPECT_EQ(c.dataplane.idle_adaptive, defaults.dataplane.idle_adaptive);
  EXPECT_EQ(c.dataplane.idle_sleep_us, defaults.dataplane.idle_sleep_us);
  EXPECT_EQ(c.dataplane.idle_after_us, defaults.dataplane.idle_after_us);
  EXPECT_EQ(c.dataplane.slots_per_job, defaults.dataplane.slots_per_job);
  EXPECT_EQ(c.dataplane.max_jobs, defaults.dataplane.max_jobs);
  EXPECT_EQ(c.dataplane.max_ranks, defaults.dataplane.max_ranks);
  EXPECT_EQ(c.dataplane.max_payload_bytes, defaults.dataplane.max_payload_bytes);
  EXPECT_EQ(c.dataplane.dtypes, defaults.dataplane.dtypes);
  EXPECT_EQ(c.dataplane.verify_icrc, defaults.dataplane.verify_icrc);
  EXPECT_EQ(c.dataplane.udp_checksum, defaults.dataplane.udp_checksum);
  EXPECT_EQ(c.dataplane.multicast, defaults.dataplane.multicast);
  EXPECT_EQ(c.dataplane.multicast_group, defaults.dataplane.multicast_group);
  EXPECT_EQ(c.dataplane.loss_notices, defaults.dataplane.loss_notices);
  EXPECT_EQ(c.dataplane.mbufs, defaults.dataplane.mbufs);
  EXPECT_EQ(c.control.port, defaults.control.port);
  EXPECT_EQ(c.control.max_connections, defaults.control.max_connections);
  EXPECT_EQ(c.control.job_timeout_ms, defaults.control.job_timeout_ms);
  EXPECT_EQ(c.control.register_timeout_ms, defaults.control.register_timeout_ms);
  EXPECT_EQ(c.control.io_timeout_ms, defaults.control.io_timeout_ms);
  EXPECT_EQ(c.telemetry.dpdk_telemetry, defaults.telemetry.dpdk_telemetry);
  EXPECT_EQ(c.telemetry.prometheus_address, defaults.telemetry.prometheus_address);
  EXPECT_EQ(c.telemetry.stats_interval_ms, defaults.telemetry.stats_interval_ms);
}

TEST(ShippedConfigs, ReferenceDocumentsEveryKey) {
  std::ifstream in(kSource / "docs/agg.conf.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  for (const std::string& key : kAllKeys) {
    EXPECT_NE(text.str().find("`" + key + "`"), std::string::npos) << key << " is not in docs/agg.conf.md";
  }
}

}  // namespace
}  // namespace sumcast::config
