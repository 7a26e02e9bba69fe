// config::settings, what `sumcastctl check --json` and /sumcast/config show: every key with the
// value parsed from the file, in the file's form (a file that sets every key to something other
// than its default), and the forms of unset optional keys.
#include "sumcast/config/settings.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace sumcast::config {
namespace {

using List = std::vector<std::string>;

std::map<std::string, SettingValue> shown(const AggConfig& c) {
  std::map<std::string, SettingValue> m;
  for (const Setting& s : settings(c)) {
    EXPECT_TRUE(m.emplace(std::string(s.section) + "." + s.key, s.value).second) << s.section << "." << s.key;
  }
  return m;
}

TEST(ConfigSettings, EveryKeyShowsWhatTheFileSet) {
  const char* text = R"(
eal = { lcores = "0-4"; file_prefix = "sc1"; memory_mb = 2048; huge_pages = "off";
        vdevs = [ "net_null0", "net_ring0" ]; allow = [ "0000:3b:00.0" ]; extra_args = [ "--log-level=8" ]; };
port = { device = "net_ring0"; mac = "02:00:00:00:00:01"; ipv4 = "10.1.2.3"; prefix_len = 24;
         gateway = "10.1.2.254"; routes = [ "10.9.0.0/16 via 10.1.2.253" ]; arp_refresh_ms = 5000; dscp = 26;
         ecn = true; cnp_interval_us = 7; mtu = 9000; rx_desc = 4096; tx_desc = 256; };
dataplane = { worker_cores = 4; burst_size = 64; tx_coalesce = 3; slots_per_job = 512; max_jobs = 8;
              max_ranks = 16; max_payload_bytes = 4096; dtypes = [ "bf16", "int32" ]; verify_icrc = false;
              udp_checksum = true; multicast = true; multicast_group = "239.1.2.0"; loss_notices = false;
              mbufs = 32767; idle_poll = "adaptive"; idle_sleep_us = 250; idle_after_us = 9; };
control = { listen_address = "127.0.0.1"; port = 5000; token_file = "tok"; max_connections = 1000;
            job_timeout_ms = 2000; register_timeout_ms = 3000; io_timeout_ms = 400; };
telemetry = { dpdk_telemetry = false; prometheus_address = "127.0.0.1:9479"; stats_interval_ms = 250; };
)";
  const Result<AggConfig> parsed = parse_agg_config(text, "agg.conf");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const std::map<std::string, SettingValue> want = {
      {"eal.lcores", std::string("0-4")},
      {"eal.file_prefix", std::string("sc1")},
      {"eal.memory_mb", uint64_t{2048}},
      {"eal.huge_pages", std::string("off")},
      {"eal.vdevs", List{"net_null0", "net_ring0"}},
      {"eal.allow", List{"0000:3b:00.0"}},
      {"eal.extra_args", List{"--log-level=8"}},
      {"port.device", std::string("net_ring0")},
      {"port.mac", std::string("02:00:00:00:00:01")},
      {"port.ipv4", std::string("10.1.2.3")},
      {"port.prefix_len", uint64_t{24}},
      {"port.gateway", std::string("10.1.2.254")},
      {"port.routes", List{"10.9.0.0/16 via 10.1.2.253"}},
      {"port.arp_refresh_ms", uint64_t{5000}},
      {"port.dscp", uint64_t{26}},
      {"port.ecn", true},
      {"port.cnp_interval_us", uint64_t{7}},
      {"port.mtu", uint64_t{9000}},
      {"port.rx_desc", uint64_t{4096}},
      {"port.tx_desc", uint64_t{256}},
      {"dataplane.worker_cores", uint64_t{4}},
      {"dataplane.burst_size", uint64_t{64}},
      {"dataplane.tx_coalesce", uint64_t{3}},
      {"dataplane.slots_per_job", uint64_t{512}},
      {"dataplane.max_jobs", uint64_t{8}},
      {"dataplane.max_ranks", uint64_t{16}},
      {"dataplane.max_payload_bytes", uint64_t{4096}},
      {"dataplane.dtypes", List{"bf16", "int32"}},
      {"dataplane.verify_icrc", false},
      {"dataplane.udp_checksum", true},
      {"dataplane.multicast", true},
      {"dataplane.multicast_group", std::string("239.1.2.0")},
      {"dataplane.loss_notices", false},
      {"dataplane.mbufs", uint64_t{32767}},
      {"dataplane.idle_poll", std::string("adaptive")},
      {"dataplane.idle_sleep_us", uint64_t{250}},
      {"dataplane.idle_after_us", uint64_t{9}},
      {"control.listen_address", std::string("127.0.0.1")},
      {"control.port", uint64_t{5000}},
      {"control.token_file", std::string("tok")},
      {"control.max_connections", uint64_t{1000}},
      {"control.job_timeout_ms", uint64_t{2000}},
      {"control.register_timeout_ms", uint64_t{3000}},
      {"control.io_timeout_ms", uint64_t{400}},
      {"telemetry.dpdk_telemetry", false},
      {"telemetry.prometheus_address", std::string("127.0.0.1:9479")},
      {"telemetry.stats_interval_ms", uint64_t{250}},
  };
  const std::map<std::string, SettingValue> got = shown(*parsed);
  EXPECT_EQ(got, want);
  // Each value differs from the default's, so a setting shown from the wrong field, or the default's,
  // fails above; this holds the file to that.
  const std::map<std::string, SettingValue> defaults = shown(AggConfig{});
  for (const auto& [key, value] : want) EXPECT_NE(defaults.at(key), value) << key;
}

TEST(ConfigSettings, UnsetOptionalKeysShowEmpty) {
  const std::map<std::string, SettingValue> got = shown(AggConfig{});
  EXPECT_EQ(got.at("port.mac"), SettingValue(std::string()));
  EXPECT_EQ(got.at("port.gateway"), SettingValue(std::string()));
  EXPECT_EQ(got.at("port.routes"), SettingValue(List{}));
  EXPECT_EQ(got.at("telemetry.prometheus_address"), SettingValue(std::string()));
  EXPECT_EQ(got.at("dataplane.idle_poll"), SettingValue(std::string("busy")));
  EXPECT_EQ(got.at("eal.huge_pages"), SettingValue(std::string("auto")));
}

}  // namespace
}  // namespace sumcast::config
