// agg.conf cross-field checks: lcores vs worker_cores, address forms, frame vs MTU, multicast
// groups, the token file, the Prometheus endpoint, the port's device and its af_packet ring, the
// mempool size.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "config_test_util.h"
#include "sumcast/config/agg_config.h"
#include "sumcast/wire/format.h"

namespace sumcast::config {
namespace {

using testing::config_text;
using testing::line_containing;
using testing::TempDir;

constexpr const char* kName = "agg.conf";
using Lines = std::vector<std::pair<std::string, std::string>>;

class AggValidate : public ::testing::Test {
 protected:
  AggValidate() : token_(dir_.write("token", testing::kGoodToken)) {}

  // Parses (which must succeed) and validates a config made of `lines` plus the required keys.
  Status validate_lines(const Lines& lines, std::string* text_out = nullptr) const {
    const std::string text = config_text(lines, token_);
    if (text_out != nullptr) *text_out = text;
    const Result<AggConfig> parsed = parse_agg_config(text, kName);
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    if (!parsed.ok()) return parsed.status();
    return validate_agg_config(*parsed);
  }

  // Expects validation of `lines` to fail with "<kName>:<line of needle>: <message>".
  void expect_error(const Lines& lines, const std::string& needle, const std::string& message) const {
    std::string text;
    const Status st = validate_lines(lines, &text);
    ASSERT_FALSE(st.ok()) << text;
    const int line = needle.empty() ? 0 : line_containing(text, needle);
    ASSERT_TRUE(needle.empty() || line > 0) << "test bug: '" << needle << "' not in the text";
    EXPECT_EQ(st.message(), std::string(kName) + ":" + std::to_string(line) + ": " + message) << text;
  }

  // Expects parsing of `lines` to fail already, with "<kName>:<line of needle>: <message>": text
  // that is not the address it stands for never reaches the validator.
  void expect_parse_error(const Lines& lines, const std::string& needle, const std::string& message) const {
    const std::string text = config_text(lines, token_);
    const Result<AggConfig> parsed = parse_agg_config(text, kName);
    ASSERT_FALSE(parsed.ok()) << text;
    const int line = line_containing(text, needle);
    ASSERT_GT(line, 0) << "test bug: '" << needle << "' not in the text";
    EXPECT_EQ(parsed.status().message(), std::string(kName) + ":" + std::to_string(line) + ": " + message) << text;
  }

  void expect_ok(const Lines& lines) const {
    std::string text;
    const Status st = validate_lines(lines, &text);
    EXPECT_TRUE(st.ok()) << st.message() << "\n" << text;
  }

  TempDir dir_;
  std::string token_;
};

TEST_F(AggValidate, DefaultsWithTheRequiredKeysAreValid) { expect_ok({}); }

TEST_F(AggValidate, LcoreFormsCountAsDpdkCountsThem) {
  const std::pair<const char*, int> kForms[] = {
      {"0,1", 2},         {"0-3", 4},         {"0@1,1@0", 2}, {"(0-3)@(0,1)", 4}, {"0 , 1", 2}, {"0-1,4@2", 3},
      {"1,(2,4-5)@1", 4}, {"0,1-2@(3-4)", 3}, {"127", 1},     {"0@1023", 1},      {"3,0", 2},   {"(0)", 1},
  };
  for (const auto& [form, count] : kForms) {
    SCOPED_TRACE(form);
    const std::string lcores = std::string("lcores = \"") + form + "\";";
    if (count > 1) {
      expect_ok({{"eal", lcores}, {"dataplane", "worker_cores = " + std::to_string(count - 1) + ";"}});
    }
    expect_error({{"eal", lcores}, {"dataplane", "worker_cores = " + std::to_string(count) + ";"}}, "lcores",
                 std::string("eal.lcores: \"") + form + "\" gives " + std::to_string(count) +
                     " lcore(s); dataplane.worker_cores = " + std::to_string(count) + " needs " +
                     std::to_string(count + 1) + " (main + workers)");
  }
}

TEST_F(AggValidate, TooFewDefaultLcoresNamesTheDefault) {
  expect_error({{"dataplane", "worker_cores = 2;"}}, "",
               "eal.lcores: \"0,1\" (the default) gives 2 lcore(s); dataplane.worker_cores = 2 needs 3 "
               "(main + workers)");
}

TEST_F(AggValidate, MalformedLcoreListsAreRejected) {
  const std::pair<const char*, const char*> kBad[] = {
      {"0-", "expected an lcore number at offset 2, found the end"},
      {"a", "expected an lcore number at offset 0, found 'a'"},
      {"0;1", "expected ',' or '@' at offset 1, found ';'"},
      {"1,1", "lcore 1 is listed twice"},
      {"0-2,2", "lcore 2 is listed twice"},
      {"3-1", "range 3-1 is reversed"},
      {"128", "lcore 128 is above 127"},
      {"0,1@1024", "cpu 1024 is above 1023"},
      {"(0,1", "expected ',' or ')' at offset 4, found the end"},
      {"0,", "expected an lcore number at offset 2, found the end"},
      {"0@", "expected a cpu number at offset 2, found the end"},
      {"  ", "no lcores listed"},
  };
  for (const auto& [form, what] : kBad) {
    SCOPED_TRACE(form);
    expect_error({{"eal", std::string("lcores = \"") + form + "\";"}}, "lcores",
                 std::string("eal.lcores: \"") + form + "\" is not an lcore list: " + what);
  }
}

TEST_F(AggValidate, PortIpv4MustBeAUnicastDottedQuad) {
  for (const char* bad : {"10.0.0.256", "10.0.0", "10.0.0.1.2", "010.0.0.1", "10.0.0.-1", " 10.0.0.1", "host"}) {
    SCOPED_TRACE(bad);
    expect_parse_error({{"port", std::string("ipv4 = \"") + bad + "\";"}}, "ipv4",
                       std::string("port.ipv4: \"") + bad + "\" is not a dotted-quad IPv4 address");
  }
  for (const char* bad : {"0.0.0.0", "127.0.0.1", "224.0.0.1", "255.255.255.255", "240.0.0.1"}) {
    SCOPED_TRACE(bad);
    expect_error({{"port", std::string("ipv4 = \"") + bad + "\";"}}, "ipv4",
                 std::string("port.ipv4: ") + bad + " is not a unicast host address");
  }
}

TEST_F(AggValidate, MacMustBeEmptyOrAUnicastAddress) {
  expect_ok({{"port", "mac = \"02:00:00:AA:bb:01\";"}});
  expect_ok({{"port", "mac = \"\";"}});
  expect_parse_error({{"port", "mac = \"02:00:00:00:00\";"}}, "mac",
                     "port.mac: \"02:00:00:00:00\" is not a MAC address (aa:bb:cc:dd:ee:ff)");
  expect_parse_error({{"port", "mac = \"02-00-00-00-00-01\";"}}, "mac",
                     "port.mac: \"02-00-00-00-00-01\" is not a MAC address (aa:bb:cc:dd:ee:ff)");
  expect_parse_error({{"port", "mac = \"02:00:00:00:00:0g\";"}}, "mac",
                     "port.mac: \"02:00:00:00:00:0g\" is not a MAC address (aa:bb:cc:dd:ee:ff)");
  expect_parse_error({{"port", "mac = \"02:00:00:00:00:01:\";"}}, "mac",
                     "port.mac: \"02:00:00:00:00:01:\" is not a MAC address (aa:bb:cc:dd:ee:ff)");
  // The message quotes the address as written (here in upper case).
  expect_parse_error({{"port", "mac = \"01:00:5E:00:00:01\";"}}, "mac",
                     "port.mac: 01:00:5E:00:00:01 is a multicast address");
  expect_parse_error({{"port", "mac = \"00:00:00:00:00:00\";"}}, "mac", "port.mac: 00:00:00:00:00:00 is all zeros");
}

TEST_F(AggValidate, MtuMustHoldTheLargestFrame) {
  // A frame is the payload plus kFrameOverhead bytes; the MTU counts all but the Ethernet header.
  const int needed = 1024 + static_cast<int>(wire::kFrameOverhead - wire::kEthHeaderLen);
  ASSERT_EQ(needed, 1108);
  expect_ok({{"port", "mtu = 1108;"}, {"dataplane", "max_payload_bytes = 1024;"}});
  expect_error({{"port", "mtu = 1107;"}, {"dataplane", "max_payload_bytes = 1024;"}}, "mtu",
               "port.mtu: 1107 is too small for dataplane.max_payload_bytes = 1024 (payload + 84 bytes of "
               "IPv4/UDP/RoCE headers and ICRC need an MTU of at least 1108)");
  // The default MTU (1500) cannot carry a 4096-byte payload.
  expect_error({{"dataplane", "max_payload_bytes = 4096;"}}, "",
               "port.mtu: 1500 is too small for dataplane.max_payload_bytes = 4096 (payload + 84 bytes of "
               "IPv4/UDP/RoCE headers and ICRC need an MTU of at least 4180)");
}

TEST_F(AggValidate, MulticastGroupMustBeMulticastWhenMulticastIsOn) {
  expect_ok({{"dataplane", "multicast = true;"}});
  expect_ok({{"dataplane", "multicast_group = \"10.0.0.1\";"}});  // unused while multicast is off
  expect_error({{"dataplane", "multicast = true;"}, {"dataplane", "multicast_group = \"10.0.0.1\";"}},
               "multicast_group",
               "dataplane.multicast_group: 10.0.0.1 is not in 224.0.0.0/4 (dataplane.multicast is on)");
  expect_error({{"dataplane", "multicast = true;"}, {"dataplane", "multicast_group = \"240.0.0.1\";"}},
               "multicast_group",
               "dataplane.multicast_group: 240.0.0.1 is not in 224.0.0.0/4 (dataplane.multicast is on)");
  expect_parse_error({{"dataplane", "multicast_group = \"239.1\";"}}, "multicast_group",
                     "dataplane.multicast_group: \"239.1\" is not a dotted-quad IPv4 address");
  // Job i uses group + i: the last job's group must still be multicast.
  expect_ok(
      {{"dataplane", "multicast = true; max_jobs = 16;"}, {"dataplane", "multicast_group = \"239.255.255.240\";"}});
  expect_error(
      {{"dataplane", "multicast = true; max_jobs = 16;"}, {"dataplane", "multicast_group = \"239.255.255.241\";"}},
      "multicast_group",
      "dataplane.multicast_group: 239.255.255.241 + dataplane.max_jobs 16 groups runs past 239.255.255.255");
}

TEST_F(AggValidate, ListenAddressMustBeADottedQuad) {
  expect_ok({{"control", "listen_address = \"127.0.0.1\";"}});
  expect_parse_error({{"control", "listen_address = \"localhost\";"}}, "listen_address",
                     "control.listen_address: \"localhost\" is not a dotted-quad IPv4 address");
  expect_parse_error({{"control", "listen_address = \"1.2.3.4:80\";"}}, "listen_address",
                     "control.listen_address: \"1.2.3.4:80\" is not a dotted-quad IPv4 address");
  expect_error({{"control", "listen_address = \"239.0.0.1\";"}}, "listen_address",
               "control.listen_address: 239.0.0.1 is not a unicast address");
}

TEST_F(AggValidate, MissingTokenFileIsNotFound) {
  const std::string missing = (dir_.path() / "absent").string();
  const std::string text = config_text({}, missing);
  const Result<AggConfig> parsed = parse_agg_config(text, kName);
  ASSERT_TRUE(parsed.ok());
  const Status st = validate_agg_config(*parsed);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), std::string(kName) + ":" + std::to_string(line_containing(text, "token_file")) +
                              ": control.token_file: " + missing + ": No such file or directory");
}

TEST_F(AggValidate, TokenMustHaveSixteenBytesOnItsFirstLine) {
  const std::pair<const char*, size_t> kShort[] = {
      {"short\n", 5}, {"0123456789abcde\n0123456789abcdef\n", 15}, {"0123456789abcde\r\n", 15}};
  for (const auto& [content, bytes] : kShort) {
    SCOPED_TRACE(content);
    const std::string path = dir_.write("short-token", content);
    const std::string text = config_text({}, path);
    const Result<AggConfig> parsed = parse_agg_config(text, kName);
    ASSERT_TRUE(parsed.ok());
    const Status st = validate_agg_config(*parsed);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message(), std::string(kName) + ":" + std::to_string(line_containing(text, "token_file")) +
                                ": control.token_file: " + path + ": the first line (the token) has " +
                                std::to_string(bytes) + " bytes; at least 16 are needed");
  }
  for (const char* content : {"0123456789abcdef", "0123456789abcdef\n", "0123456789abcdef\r\n"}) {
    SCOPED_TRACE(content);
    const std::string path = dir_.write("ok-token", content);
    const Result<AggConfig> parsed = parse_agg_config(config_text({}, path), kName);
    ASSERT_TRUE(parsed.ok());
    EXPECT_TRUE(validate_agg_config(*parsed).ok());
  }
}

TEST_F(AggValidate, TokenFileThatIsADirectoryIsRejected) {
  const std::string path = dir_.path().string();
  const std::string text = config_text({}, path);
  const Result<AggConfig> parsed = parse_agg_config(text, kName);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(validate_agg_config(*parsed).message(), std::string(kName) + ":" +
                                                        std::to_string(line_containing(text, "token_file")) +
                                                        ": control.token_file: " + path + " is not a regular file");
}

TEST_F(AggValidate, TokenPathThroughAFileIsAnIoError) {
  const std::string path = token_ + "/token";  // token_ is a regular file
  const std::string text = config_text({}, path);
  const Result<AggConfig> parsed = parse_agg_config(text, kName);
  ASSERT_TRUE(parsed.ok());
  const Status st = validate_agg_config(*parsed);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_EQ(st.message(), std::string(kName) + ":" + std::to_string(line_containing(text, "token_file")) +
                              ": control.token_file: " + path + ": Not a directory");
}

TEST_F(AggValidate, UnreadableTokenFileIsAnIoError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  const std::string path = dir_.write("locked-token", testing::kGoodToken);
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  const Result<AggConfig> parsed = parse_agg_config(config_text({}, path), kName);
  ASSERT_TRUE(parsed.ok());
  const Status st = validate_agg_config(*parsed);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find("control.token_file: " + path + ": Permission denied"), std::string::npos);
}

TEST_F(AggValidate, PrometheusAddressIsEmptyOrIpColonPort) {
  expect_ok({{"telemetry", "prometheus_address = \"127.0.0.1:9479\";"}});
  expect_ok({{"telemetry", "prometheus_address = \"0.0.0.0:65535\";"}});
  for (const char* bad :
       {"9479", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "localhost:9479", "127.0.0.1:94x"}) {
    SCOPED_TRACE(bad);
    expect_parse_error({{"telemetry", std::string("prometheus_address = \"") + bad + "\";"}}, "prometheus_address",
                       std::string("telemetry.prometheus_address: \"") + bad +
                           "\" is not \"ip:port\" (dotted quad, port 1..65535) or \"\"");
  }
}

TEST_F(AggValidate, PrometheusMustNotTakeTheControlPort) {
  expect_error({{"telemetry", "prometheus_address = \"127.0.0.1:4790\";"}}, "prometheus_address",
               "telemetry.prometheus_address: port 4790 is also control.port on the same address");
  // Different addresses may share a port number.
  expect_ok({{"control", "listen_address = \"10.0.0.1\";"}, {"telemetry", "prometheus_address = \"127.0.0.1:4790\";"}});
}

TEST_F(AggValidate, DeviceMustBeAVdevOrAnAllowedPciAddress) {
  expect_ok({{"port", "device = \"net_null0\";"}, {"eal", "vdevs = [ \"net_ring0\", \"net_null0,size=64\" ];"}});
  expect_error({{"port", "device = \"net_null0\";"}, {"eal", "vdevs = [ \"net_null1\" ];"}}, "device",
               "port.device: \"net_null0\" is neither a PCI address nor the name of one of eal.vdevs");
  expect_ok({{"port", "device = \"3b:00.0\";"}, {"eal", "allow = [ \"0000:3B:00.0,txq_inline=64\" ];"}});
  expect_error({{"port", "device = \"0000:3b:00.0\";"}, {"eal", "allow = [ \"0000:3c:00.0\" ];"}}, "device",
               "port.device: 0000:3b:00.0 is not in eal.allow (EAL probes only the devices listed there)");
  // A device created by an extra EAL argument is accepted.
  expect_ok({{"port", "device = \"net_tap0\";"}, {"eal", "extra_args = [ \"--vdev=net_tap0,iface=t0\" ];"}});
}

TEST_F(AggValidate, AfPacketRingFramesMustHoldAFrameOfTheMtu) {
  const auto lines = [](const std::string& vdev, int mtu) -> Lines {
    return {{"port", "device = \"net_af_packet0\"; mtu = " + std::to_string(mtu) + ";"},
            {"eal", "vdevs = [ \"" + vdev + "\" ];"}};
  };
  // The PMD's defaults (framesz 2048) hold a 1500-byte MTU's frame (1584 bytes from the ring
  // frame's start, with a VLAN tag), not a 9000-byte one's.
  expect_ok(lines("net_af_packet0,iface=d0", 1500));
  expect_error(lines("net_af_packet0,iface=d0", 9000), "vdevs",
               "eal.vdevs: net_af_packet0: framesz=2048 holds no frame of port.mtu = 9000: set framesz >= 9088 (a "
               "ring frame holds one whole frame, 66 bytes in) and blocksz a multiple of it");
  expect_ok(lines("net_af_packet0,iface=d0,framesz=9216,blocksz=36864", 9000));
  expect_error(lines("net_af_packet0,iface=d0,framesz=9072,blocksz=36288", 9000), "vdevs",
               "eal.vdevs: net_af_packet0: framesz=9072, blocksz=36288: blocksz must be a multiple of the page size (" +
                   std::to_string(sysconf(_SC_PAGESIZE)) + ")");
  // The PMD's alias, and a frame just large enough.
  expect_ok({{"port", "device = \"eth_af_packet0\"; mtu = 9000;"},
             {"eal", "vdevs = [ \"eth_af_packet0,iface=d0,framesz=9088,blocksz=290816\" ];"}});
  expect_error(lines("net_af_packet0,iface=d0,framesz=9216,blocksz=16384", 9000), "vdevs",
               "eal.vdevs: net_af_packet0: framesz=9216, blocksz=16384: blocksz must be a multiple of framesz (the "
               "PMD finds frame i at i x framesz)");
  expect_error(lines("net_af_packet0,iface=d0,framesz=2050,blocksz=4100", 1500), "vdevs",
               "eal.vdevs: net_af_packet0: framesz=2050, blocksz=4100: framesz must be a multiple of 16");
  expect_error(lines("net_af_packet0,iface=d0,framesz=big", 1500), "vdevs",
               "eal.vdevs: net_af_packet0: framesz=big is not a number of bytes (1..2^30)");
  // A ring of whole blocks (named with file, line and key like every other error).
  expect_error(lines("net_af_packet0,iface=d0,framesz=9216,blocksz=36864,framecnt=1025", 9000), "vdevs",
               "eal.vdevs: net_af_packet0: framesz=9216, blocksz=36864, framecnt=1025: framecnt must be a multiple of "
               "the frames per block (blocksz / framesz = 4): the kernel takes whole blocks");
  expect_ok(lines("net_af_packet0,iface=d0,framesz=9216,blocksz=36864,framecnt=1024", 9000));
  // Other PMDs' frame sizes are theirs to check.
  expect_ok({{"port", "device = \"net_pcap0\"; mtu = 9000;"}, {"eal", "vdevs = [ \"net_pcap0,iface=d0\" ];"}});
}

TEST_F(AggValidate, MempoolMustFillEveryWorkersRings) {
  const Lines base = {
      {"eal", "lcores = \"0-2\";"}, {"dataplane", "worker_cores = 2;"}, {"port", "rx_desc = 1024; tx_desc = 1024;"}};
  Lines ok = base;
  ok.push_back({"dataplane", "mbufs = 4096;"});
  expect_ok(ok);
  Lines bad = base;
  bad.push_back({"dataplane", "mbufs = 4095;"});
  expect_error(bad, "mbufs",
               "dataplane.mbufs: 4095 is fewer than the 4096 descriptors of the workers' rings "
               "(dataplane.worker_cores x (port.rx_desc + port.tx_desc))");
}

TEST_F(AggValidate, ConfigBuiltInCodeReportsLineZero) {
  AggConfig config;
  config.port.device = "net_null0";
  config.eal.vdevs = {"net_null0"};
  config.port.ipv4 = 0x0A000001;  // 10.0.0.1
  config.control.token_file = token_;
  EXPECT_TRUE(validate_agg_config(config).ok());
  config.path = "built-in";
  config.port.ipv4 = 0x7F000001;
  EXPECT_EQ(validate_agg_config(config).message(), "built-in:0: port.ipv4: 127.0.0.1 is not a unicast host address");
}

TEST_F(AggValidate, GatewayAndRoutesMustBeOnLinkHosts) {
  // The test config's port.ipv4 is 10.0.0.1.
  expect_ok({{"port", "prefix_len = 24;"},
             {"port", "gateway = \"10.0.0.254\";"},
             {"port", "routes = [ \"10.78.0.0/16 via 10.0.0.2\", \"0.0.0.0/0 via 10.0.0.3\" ];"}});
  expect_error({{"port", "gateway = \"10.0.0.254\";"}}, "gateway",
               "port.gateway: 10.0.0.254 needs the port's subnet: set port.prefix_len (the length of 10.0.0.1's "
               "subnet) so that the gateway is on-link");
  expect_error({{"port", "prefix_len = 24;"}, {"port", "gateway = \"10.0.1.254\";"}}, "gateway",
               "port.gateway: 10.0.1.254 is not in the port's subnet 10.0.0.0/24 (a gateway must be on-link)");
  expect_error({{"port", "prefix_len = 24;"}, {"port", "gateway = \"10.0.0.1\";"}}, "gateway",
               "port.gateway: 10.0.0.1 is port.ipv4 itself");
  expect_error({{"port", "prefix_len = 24;"}, {"port", "gateway = \"10.0.0.255\";"}}, "gateway",
               "port.gateway: 10.0.0.255 is the subnet's network or broadcast address");
  expect_parse_error({{"port", "prefix_len = 24;"}, {"port", "gateway = \"router\";"}}, "gateway",
                     "port.gateway: \"router\" is not a dotted-quad IPv4 address");
  expect_error({{"port", "prefix_len = 24;"},
                {"port", "routes = [ \"10.78.0.0/16 via 10.0.0.2\",\n    \"10.79.0.0/16 via 10.9.0.2\" ];"}},
               "10.79.0.0/16",
               "port.routes[1]: \"10.79.0.0/16 via 10.9.0.2\": gateway 10.9.0.2 is not in the port's subnet "
               "10.0.0.0/24 (a gateway must be on-link)");
  expect_error({{"port", "prefix_len = 24;"},
                {"port", "routes = [ \"10.78.0.0/16 via 10.0.0.2\",\n    \"10.78.0.0/16 via 10.0.0.3\" ];"}},
               "via 10.0.0.3",
               "port.routes[1]: \"10.78.0.0/16 via 10.0.0.3\" routes the same prefix as port.routes[0]");
}

}  // namespace
}  // namespace sumcast::config
