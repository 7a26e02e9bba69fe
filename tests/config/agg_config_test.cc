// agg.conf parsing: defaults, every key, and one exact message per kind of bad input
// ("<file>:<line>: <key>: <what>", docs/agg.conf.md "Errors").
#include "sumcast/config/agg_config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config_test_util.h"
#include "sumcast/ipv4.h"

namespace sumcast::config {
namespace {

using testing::config_text;
using testing::line_containing;
using testing::TempDir;

constexpr const char* kName = "agg.conf";

std::string at(const std::string& text, const std::string& needle, const std::string& rest) {
  return std::string(kName) + ":" + std::to_string(line_containing(text, needle)) + ": " + rest;
}

TEST(AggConfigParse, AlmostEmptyFileTakesEveryDefault) {
  const std::string text =
      "port = { device = \"net_null0\"; ipv4 = \"10.0.0.1\"; };\n"
      "control = { token_file = \"/etc/sumcast/token\"; };\n";
  const Result<AggConfig> parsed = parse_agg_config(text, kName);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const AggConfig& c = *parsed;
  EXPECT_EQ(c.path, kName);
  // The defaults the header documents.
  EXPECT_EQ(c.eal.lcores, "0,1");
  EXPECT_EQ(c.eal.file_prefix, "sumcast");
  EXPECT_EQ(c.eal.memory_mb, 512u);
  EXPECT_EQ(c.eal.huge_pages, HugePages::kAuto);
  EXPECT_TRUE(c.eal.vdevs.empty());
  EXPECT_TRUE(c.eal.allow.empty());
  EXPECT_TRUE(c.eal.extra_args.empty());
  EXPECT_FALSE(c.port.mac.has_value());
  EXPECT_FALSE(c.port.gateway.has_value());
  EXPECT_EQ(c.port.mtu, 1500);
  EXPECT_EQ(c.port.rx_desc, 1024);
  EXPECT_EQ(c.port.tx_desc, 1024);
  EXPECT_EQ(c.dataplane.worker_cores, 1u);
  EXPECT_EQ(c.dataplane.burst_size, 32u);
  EXPECT_EQ(c.dataplane.tx_coalesce, 16u);
  EXPECT_FALSE(c.dataplane.idle_adaptive);
  EXPECT_EQ(c.dataplane.idle_sleep_us, 100u);
  EXPECT_EQ(c.dataplane.idle_after_us, 500u);
  EXPECT_EQ(c.dataplane.slots_per_job, 128u);
  EXPECT_EQ(c.dataplane.max_jobs, 16u);
  EXPECT_EQ(c.dataplane.max_ranks, 64u);
  EXPECT_EQ(c.dataplane.max_payload_bytes, 1024u);
  EXPECT_EQ(c.dataplane.dtypes, (std::vector<wire::Dtype>{wire::Dtype::kFp32, wire::Dtype::kFp16, wire::Dtype::kBf16,
                                                          wire::Dtype::kInt32, wire::Dtype::kFp64}));
  EXPECT_EQ(dtype_names(c.dataplane.dtypes), (std::vector<std::string>{"fp32", "fp16", "bf16", "int32", "fp64"}));
  EXPECT_TRUE(c.dataplane.verify_icrc);
  EXPECT_FALSE(c.dataplane.udp_checksum);
  EXPECT_FALSE(c.dataplane.multicast);
  EXPECT_EQ(format_ipv4(c.dataplane.multicast_group), "239.255.77.0");
  EXPECT_TRUE(c.dataplane.loss_notices);
  EXPECT_EQ(c.dataplane.mbufs, 16383u);
  EXPECT_EQ(c.control.listen_address, 0u);
  EXPECT_EQ(c.control.port, 4790);
  EXPECT_EQ(c.control.max_connections, 256u);
  EXPECT_EQ(c.control.job_timeout_ms, 10000u);
  EXPECT_EQ(c.control.register_timeout_ms, 60000u);
  EXPECT_EQ(c.control.io_timeout_ms, 5000u);
  EXPECT_TRUE(c.telemetry.dpdk_telemetry);
  EXPECT_FALSE(c.telemetry.prometheus_address.has_value());
  EXPECT_EQ(c.telemetry.stats_interval_ms, 0u);
  // What the file did set.
  EXPECT_EQ(c.port.device, "net_null0");
  EXPECT_EQ(c.port.ipv4, 0x0A000001u);
  EXPECT_EQ(c.control.token_file, "/etc/sumcast/token");
  EXPECT_EQ(c.key_lines.at("port.device"), 1);
  EXPECT_EQ(c.key_lines.at("control.token_file"), 2);
  EXPECT_EQ(c.key_lines.count("eal.lcores"), 0u);
}

TEST(AggConfigParse, EveryKeyIsReadIntoItsField) {
  const std::string text = R"(
eal = {
  lcores = "0-4";
  file_prefix = "sc1";
  memory_mb = 2048L;            // a 64-bit literal is an integer too
  huge_pages = "off";
  vdevs = ( "net_null0", "net_ring0" );   // a list
  allow = [ "0000:3b:00.0" ];            // an array
  extra_args = [ "--log-level=8" ];
};
port = {
  device = "net_ring0";
  mac = "02:00:00:00:00:01";
  ipv4 = "10.1.2.3";
  prefix_len = 24;
  gateway = "10.1.2.254";
  mtu = 9000;
  rx_desc = 4096;
  tx_desc = 0x100;              # hex
};
dataplane = {
  worker_cores = 4;
  burst_size = 64;
  tx_coalesce = 0;
  idle_poll = "adaptive";
  idle_sleep_us = 250;
  idle_after_us = 0;
  slots_per_job = 512;
  max_jobs = 8;
  max_ranks = 16;
  max_payload_bytes = 4096;
  dtypes = [ "bf16", "int32" ];
  verify_icrc = false;
  udp_checksum = true;
  multicast = true;
  multicast_group = "239.1.2.0";
  loss_notices = false;
  mbufs = 32767;
};
control = {
  listen_address = "127.0.0.1";
  port = 5000;
  token_file = "tok";
  max_connections = 1000;
  job_timeout_ms = 2000;
  register_timeout_ms = 3000;
  io_timeout_ms = 400;
};
telemetry = {
  dpdk_telemetry = false;
  prometheus_address = "127.0.0.1:9479";
  stats_interval_ms = 250;
};
)";
  const Result<AggConfig> parsed = parse_agg_config(text, kName);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const AggConfig& c = *parsed;
  EXPECT_EQ(c.eal.lcores, "0-4");
  EXPECT_EQ(c.eal.file_prefix, "sc1");
  EXPECT_EQ(c.eal.memory_mb, 2048u);
  EXPECT_EQ(c.eal.huge_pages, HugePages::kOff);
  EXPECT_EQ(c.eal.vdevs, (std::vector<std::string>{"net_null0", "net_ring0"}));
  EXPECT_EQ(c.eal.allow, (std::vector<std::string>{"0000:3b:00.0"}));
  EXPECT_EQ(c.eal.extra_args, (std::vector<std::string>{"--log-level=8"}));
  EXPECT_EQ(c.port.device, "net_ring0");
  EXPECT_EQ(c.port.mac, (MacAddress{0x02, 0, 0, 0, 0, 0x01}));
  EXPECT_EQ(c.port.ipv4, 0x0A010203u);
  EXPECT_EQ(c.port.prefix_len, 24);
  EXPECT_EQ(c.port.gateway, 0x0A0102FEu);
  EXPECT_EQ(c.port.mtu, 9000);
  EXPECT_EQ(c.port.rx_desc, 4096);
  EXPECT_EQ(c.port.tx_desc, 256);
  EXPECT_EQ(c.dataplane.worker_cores, 4u);
  EXPECT_EQ(c.dataplane.burst_size, 64u);
  EXPECT_EQ(c.dataplane.tx_coalesce, 0u);
  EXPECT_TRUE(c.dataplane.idle_adaptive);
  EXPECT_EQ(c.dataplane.idle_sleep_us, 250u);
  EXPECT_EQ(c.dataplane.idle_after_us, 0u);
  EXPECT_EQ(c.dataplane.slots_per_job, 512u);
  EXPECT_EQ(c.dataplane.max_jobs, 8u);
  EXPECT_EQ(c.dataplane.max_ranks, 16u);
  EXPECT_EQ(c.dataplane.max_payload_bytes, 4096u);
  EXPECT_EQ(c.dataplane.dtypes, (std::vector<wire::Dtype>{wire::Dtype::kBf16, wire::Dtype::kInt32}));
  EXPECT_FALSE(c.dataplane.verify_icrc);
  EXPECT_TRUE(c.dataplane.udp_checksum);
  EXPECT_TRUE(c.dataplane.multicast);
  EXPECT_EQ(c.dataplane.multicast_group, 0xEF010200u);
  EXPECT_FALSE(c.dataplane.loss_notices);
  EXPECT_EQ(c.dataplane.mbufs, 32767u);
  EXPECT_EQ(c.control.listen_address, 0x7F000001u);
  EXPECT_EQ(c.control.port, 5000);
  EXPECT_EQ(c.control.token_file, "tok");  // parse_agg_config leaves relative paths alone
  EXPECT_EQ(c.control.max_connections, 1000u);
  EXPECT_EQ(c.control.job_timeout_ms, 2000u);
  EXPECT_EQ(c.control.register_timeout_ms, 3000u);
  EXPECT_EQ(c.control.io_timeout_ms, 400u);
  EXPECT_FALSE(c.telemetry.dpdk_telemetry);
  EXPECT_EQ(c.telemetry.prometheus_address, (Ipv4Endpoint{0x7F000001u, 9479}));
  EXPECT_EQ(c.telemetry.prometheus_address->text(), "127.0.0.1:9479");
  EXPECT_EQ(c.telemetry.stats_interval_ms, 250u);
  EXPECT_EQ(c.key_lines.at("eal"), line_containing(text, "eal = {"));
  EXPECT_EQ(c.key_lines.at("port.mtu"), line_containing(text, "mtu = 9000"));
  EXPECT_EQ(c.key_lines.at("telemetry.stats_interval_ms"), line_containing(text, "stats_interval_ms"));
}

// The numeric keys with their documented ranges.
struct IntKey {
  const char* group;
  const char* key;
  int64_t lo;
  int64_t hi;
};
constexpr IntKey kIntKeys[] = {
    {"eal", "memory_mb", 64, 1048576},
    {"port", "prefix_len", 0, 32},
    {"port", "arp_refresh_ms", 1000, 3600000},
    {"port", "dscp", 0, 63},
    {"port", "cnp_interval_us", 0, 1000000},
    {"port", "mtu", 576, 9216},
    {"port", "rx_desc", 64, 16384},
    {"port", "tx_desc", 64, 16384},
    {"dataplane", "worker_cores", 1, 64},
    {"dataplane", "burst_size", 1, 512},
    {"dataplane", "tx_coalesce", 0, 32},
    {"dataplane", "idle_sleep_us", 1, 10000},
    {"dataplane", "idle_after_us", 0, 1000000},
    {"dataplane", "slots_per_job", 1, 65535},
    {"dataplane", "max_jobs", 1, 4096},
    {"dataplane", "max_ranks", 2, 4096},
    {"dataplane", "max_payload_bytes", 64, 4096},
    {"dataplane", "mbufs", 1023, 1048575},
    {"control", "port", 1, 65535},
    {"control", "max_connections", 1, 65536},
    {"control", "job_timeout_ms", 100, 3600000},
    {"control", "register_timeout_ms", 100, 3600000},
    {"control", "io_timeout_ms", 10, 600000},
    {"telemetry", "stats_interval_ms", 0, 3600000},
};

std::string range_message(const std::string& text, const IntKey& k, const std::string& value) {
  const std::string path = std::string(k.group) + "." + k.key;
  return at(text, "  " + std::string(k.key) + " = ",
            path + ": " + value + " is out of range " + std::to_string(k.lo) + ".." + std::to_string(k.hi));
}

TEST(AggConfigParse, EachIntegerKeyAcceptsBothBoundsAndRejectsOnePastEither) {
  for (const IntKey& k : kIntKeys) {
    SCOPED_TRACE(std::string(k.group) + "." + k.key);
    for (const int64_t ok : {k.lo, k.hi}) {
      const std::string text = config_text({{k.group, std::string(k.key) + " = " + std::to_string(ok) + ";"}});
      const Result<AggConfig> parsed = parse_agg_config(text, kName);
      EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    }
    for (const int64_t bad : {k.lo - 1, k.hi + 1}) {
      const std::string text = config_text({{k.group, std::string(k.key) + " = " + std::to_string(bad) + ";"}});
      const Result<AggConfig> parsed = parse_agg_config(text, kName);
      ASSERT_FALSE(parsed.ok());
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(parsed.status().message(), range_message(text, k, std::to_string(bad)));
    }
  }
}

TEST(AggConfigParse, EachIntegerKeyRejectsStringsFloatsAndBooleans) {
  const std::pair<const char*, const char*> kWrong[] = {
      {"\"100\"", "a string"}, {"100.0", "a float"}, {"1e3", "a float"}, {"true", "a boolean"}};
  for (const IntKey& k : kIntKeys) {
    for (const auto& [literal, type] : kWrong) {
      SCOPED_TRACE(std::string(k.group) + "." + k.key + " = " + literal);
      const std::string text = config_text({{k.group, std::string(k.key) + " = " + literal + ";"}});
      const Result<AggConfig> parsed = parse_agg_config(text, kName);
      ASSERT_FALSE(parsed.ok());
      EXPECT_EQ(parsed.status().message(),
                at(text, "  " + std::string(k.key) + " = ",
                   std::string(k.group) + "." + k.key + ": expected an integer, got " + type));
    }
  }
}

TEST(AggConfigParse, LiteralTooBigForLibconfigIntIsOutOfRangeNotTruncated) {
  // libconfig 1.5 keeps only the low 32 bits of these (4294967360 -> 64, in range).
  for (const char* literal : {"4294967360", "99999999999", "-4294967295", "0x100000040", "0xFFFFFFFF"}) {
    SCOPED_TRACE(literal);
    const std::string text = config_text({{"eal", std::string("memory_mb = ") + literal + ";"}});
    const Result<AggConfig> parsed = parse_agg_config(text, kName);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().message(),
              at(text, "memory_mb", std::string("eal.memory_mb: ") + literal + " is out of range 64..1048576"));
  }
  // With the L suffix libconfig keeps all 64 bits, and the range check sees the real value.
  const std::string text = config_text({{"eal", "memory_mb = 4294967360L;"}});
  const Result<AggConfig> parsed = parse_agg_config(text, kName);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), at(text, "memory_mb", "eal.memory_mb: 4294967360 is out of range 64..1048576"));
}

TEST(AggConfigParse, OverflowIsPinnedToTheRightKeyAmongOthers) {
  // Integers in comments, strings and names must not confuse the pairing of literals to keys.
  const std::string text = config_text({
      {"eal", "lcores = \"0-1\"; # 99999999999 in a comment"},
      {"eal", "/* 5 */ memory_mb = 1024;"},
      {"dataplane", "dtypes = [\"fp32\"]; burst_size = 16; max_jobs = 4294967297;"},
      {"control", "port = 4790;"},
  });
  const Result<AggConfig> parsed = parse_agg_config(text, kName);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), at(text, "max_jobs", "dataplane.max_jobs: 4294967297 is out of range 1..4096"));
}

TEST(AggConfigParse, DescriptorCountsMustBePowersOfTwo) {
  for (const char* key : {"rx_desc", "tx_desc"}) {
    const std::string text = config_text({{"port", std::string(key) + " = 1000;"}});
    const Result<AggConfig> parsed = parse_agg_config(text, kName);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().message(), at(text, key, std::string("port.") + key + ": 1000 is not a power of two"));
  }
}

TEST(AggConfigParse, PayloadMustBeAMultipleOf64) {
  const std::string text = config_text({{"dataplane", "max_payload_bytes = 1000;"}});
  const Result<AggConfig> parsed = parse_agg_config(text, kName);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            at(text, "max_payload_bytes", "dataplane.max_payload_bytes: 1000 is not a multiple of 64"));
}

// One bad file: its text, the substring that marks the line the error is on ("" = line 0),
// and the message after "<file>:<line>: ".
struct BadFile {
  const char* what;
  std::string text;
  std::string line_of;
  std::string message;
};

std::vector<BadFile> bad_files() {
  return {
      {"unknown key", config_text({{"eal", "lcore = \"0,1\";"}}), "lcore =", "eal.lcore: unknown key"},
      {"unknown key in telemetry", config_text({{"telemetry", "prometheus = \"\";"}}),
       "prometheus =", "telemetry.prometheus: unknown key"},
      {"unknown group", config_text({}) + "engine = {\n  cores = 2;\n};\n", "engine = {",
       "engine: unknown group (expected eal, port, dataplane, control or telemetry)"},
      {"unknown top-level scalar", "verbose = true;\n" + config_text({}), "verbose",
       "verbose: unknown group (expected eal, port, dataplane, control or telemetry)"},
      {"group that is not a group", "port = 5;\n", "port = 5", "port: expected a group, got an integer"},
      {"group given as a list", "telemetry = ( 1 );\n", "telemetry", "telemetry: expected a group, got a list"},
      {"string key given an integer", config_text({{"eal", "lcores = 3;"}}), "lcores",
       "eal.lcores: expected a string, got an integer"},
      {"boolean given an integer", config_text({{"dataplane", "verify_icrc = 1;"}}), "verify_icrc",
       "dataplane.verify_icrc: expected a boolean, got an integer"},
      {"boolean given a string", config_text({{"telemetry", "dpdk_telemetry = \"yes\";"}}), "dpdk_telemetry",
       "telemetry.dpdk_telemetry: expected a boolean, got a string"},
      {"list given a string", config_text({{"eal", "vdevs = \"net_null0\";"}}), "vdevs",
       "eal.vdevs: expected a list of strings, got a string"},
      {"list given a group", config_text({{"eal", "extra_args = { a = 1; };"}}), "extra_args",
       "eal.extra_args: expected a list of strings, got a group"},
      {"list element not a string", config_text({{"eal", "allow = ( \"0000:3b:00.0\",\n    7 );"}}), "    7 )",
       "eal.allow[1]: expected a string, got an integer"},
      {"list element empty", config_text({{"eal", "vdevs = [ \"\" ];"}}), "vdevs", "eal.vdevs[0]: must not be empty"},
      {"missing port.device", config_text({{"port", "mtu = 1500;"}}, "/t", false), "port = {",
       "port.device: required key is missing"},
      {"missing port.ipv4", "port = {\n  device = \"net_null0\";\n};\ncontrol = { token_file = \"/t\"; };\n",
       "port = {", "port.ipv4: required key is missing"},
      {"missing control.token_file",
       "port = { device = \"net_null0\"; ipv4 = \"10.0.0.1\"; };\n\ncontrol = {\n  port = 1;\n};\n", "control = {",
       "control.token_file: required key is missing"},
      {"missing group holding a required key", "control = { token_file = \"/t\"; };\n", "",
       "port.device: required key is missing"},
      {"empty file", "", "", "port.device: required key is missing"},
      {"required key empty", config_text({}, ""), "token_file", "control.token_file: must not be empty"},
      {"empty lcores", config_text({{"eal", "lcores = \"\";"}}), "lcores", "eal.lcores: must not be empty"},
      {"file prefix with a slash", config_text({{"eal", "file_prefix = \"../x\";"}}), "file_prefix",
       "eal.file_prefix: \"../x\" must not contain '/'"},
      {"bad huge_pages", config_text({{"eal", "huge_pages = \"yes\";"}}), "huge_pages",
       "eal.huge_pages: \"yes\" is not one of \"auto\", \"on\", \"off\""},
      {"bad idle_poll", config_text({{"dataplane", "idle_poll = \"lazy\";"}}), "idle_poll",
       "dataplane.idle_poll: \"lazy\" is not one of \"busy\", \"adaptive\""},
      {"huge_pages given a boolean", config_text({{"eal", "huge_pages = true;"}}), "huge_pages",
       "eal.huge_pages: expected a string, got a boolean"},
      {"bad dtype name", config_text({{"dataplane", "dtypes = [ \"fp32\",\n    \"fp8\" ];"}}), "\"fp8\"",
       "dataplane.dtypes[1]: \"fp8\" is not a dtype (fp32, fp16, bf16, int32, fp64)"},
      {"dtype in the wrong case", config_text({{"dataplane", "dtypes = [ \"FP32\" ];"}}), "FP32",
       "dataplane.dtypes[0]: \"FP32\" is not a dtype (fp32, fp16, bf16, int32, fp64)"},
      {"duplicate dtype", config_text({{"dataplane", "dtypes = ( \"fp32\", \"bf16\",\n    \"fp32\" );"}}),
       "    \"fp32\" )", "dataplane.dtypes[2]: \"fp32\" is listed twice"},
      {"no dtypes", config_text({{"dataplane", "dtypes = [ ];"}}), "dtypes",
       "dataplane.dtypes: must list at least one dtype"},
      {"dtypes given a string", config_text({{"dataplane", "dtypes = \"fp32\";"}}), "dtypes",
       "dataplane.dtypes: expected a list of strings, got a string"},
      {"syntax error", config_text({{"port", "mtu = ;"}}), "mtu = ;", "syntax error"},
      {"two values for one key", config_text({{"port", "mtu = 1500 9000;"}}), "mtu", "syntax error"},
      {"stray closing brace", config_text({}) + "};  # stray\n", "# stray", "syntax error"},
      {"duplicate key", config_text({{"port", "mtu = 1500;"}, {"port", "mtu = 9000;"}}), "mtu = 9000",
       "duplicate setting name"},
      {"duplicate group", config_text({}) + "port = { # again\n};\n", "# again", "duplicate setting name"},
      {"mixed array", config_text({{"eal", "allow = [ \"a\", 1 ];"}}), "allow", "mismatched element type in array"},
      {"route without via", config_text({{"port", "routes = [ \"10.78.0.0/16 10.79.0.254\" ];"}}), "routes",
       "port.routes[0]: \"10.78.0.0/16 10.79.0.254\" is not \"prefix/len via gateway\" (e.g. \"10.78.0.0/16 via "
       "10.79.0.254\")"},
      {"route with a bad prefix",
       config_text({{"port", "routes = [ \"10.78.0.0/16 via 10.79.0.254\",\n    \"10.78.0/24 via 10.79.0.254\" ];"}}),
       "10.78.0/24", "port.routes[1]: \"10.78.0/24 via 10.79.0.254\" has no dotted-quad prefix before '/'"},
      {"route with a bad length", config_text({{"port", "routes = [ \"10.78.0.0/33 via 10.79.0.254\" ];"}}), "routes",
       "port.routes[0]: \"10.78.0.0/33 via 10.79.0.254\" has a prefix length that is not 0..32"},
      {"route with host bits", config_text({{"port", "routes = [ \"10.78.1.0/16 via 10.79.0.254\" ];"}}), "routes",
       "port.routes[0]: \"10.78.1.0/16 via 10.79.0.254\" has host bits set in its prefix (the network is "
       "10.78.0.0/16)"},
      {"route with a bad gateway", config_text({{"port", "routes = [ \"10.78.0.0/16 via router\" ];"}}), "routes",
       "port.routes[0]: \"10.78.0.0/16 via router\" has no dotted-quad gateway after \"via\""},
      {"routes given a string", config_text({{"port", "routes = \"10.78.0.0/16 via 10.79.0.254\";"}}), "routes",
       "port.routes: expected a list of strings, got a string"},
      {"@include", "@include \"other.conf\"\n" + config_text({}), "@include",
       "@include: not supported (agg.conf is a single file)"},
  };
}

TEST(AggConfigParse, BadFilesGiveExactMessages) {
  for (const BadFile& bad : bad_files()) {
    SCOPED_TRACE(bad.what);
    const Result<AggConfig> parsed = parse_agg_config(bad.text, kName);
    ASSERT_FALSE(parsed.ok()) << bad.text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    const int line = bad.line_of.empty() ? 0 : line_containing(bad.text, bad.line_of);
    ASSERT_TRUE(bad.line_of.empty() || line > 0) << "test bug: '" << bad.line_of << "' not in the text";
    EXPECT_EQ(parsed.status().message(), std::string(kName) + ":" + std::to_string(line) + ": " + bad.message)
        << bad.text;
  }
}

TEST(AggConfigParse, FirstErrorInDocumentOrderIsReported) {
  const std::string text = config_text({{"eal", "memory_mb = 1;"}, {"port", "mtu = 1;"}});
  const Result<AggConfig> parsed = parse_agg_config(text, kName);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), at(text, "memory_mb", "eal.memory_mb: 1 is out of range 64..1048576"));
}

TEST(AggConfigParse, ErrorsNameTheGivenName) {
  const Result<AggConfig> parsed = parse_agg_config("port = 1;\n", "/etc/sumcast/agg.conf");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "/etc/sumcast/agg.conf:1: port: expected a group, got an integer");
}

TEST(AggConfigLoad, MissingFileIsNotFound) {
  TempDir dir;
  const std::string path = (dir.path() / "absent.conf").string();
  const Result<AggConfig> loaded = load_agg_config(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(loaded.status().message(), path + ":0: cannot read: No such file or directory");
}

TEST(AggConfigLoad, DirectoryIsAnIoError) {
  TempDir dir;
  const Result<AggConfig> loaded = load_agg_config(dir.path().string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kIoError);
  EXPECT_EQ(loaded.status().message(), dir.path().string() + ":0: cannot read: Is a directory");
}

TEST(AggConfigLoad, ErrorsNameThePath) {
  TempDir dir;
  const std::string path = dir.write("bad.conf", "# comment\n\nport = {\n  mtu = \"big\";\n};\n");
  const Result<AggConfig> loaded = load_agg_config(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().message(), path + ":4: port.mtu: expected an integer, got a string");
}

TEST(AggConfigLoad, RelativeTokenFileIsResolvedAgainstTheConfigDirectory) {
  TempDir dir;
  const std::string path = dir.write("agg.conf", config_text({}, "secrets/token"));
  const Result<AggConfig> loaded = load_agg_config(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->path, path);
  EXPECT_EQ(loaded->control.token_file, (dir.path() / "secrets/token").string());
}

TEST(AggConfigLoad, AbsoluteTokenFileIsKept) {
  TempDir dir;
  const std::string path = dir.write("agg.conf", config_text({}, "/etc/sumcast/token"));
  const Result<AggConfig> loaded = load_agg_config(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->control.token_file, "/etc/sumcast/token");
}

}  // namespace
}  // namespace sumcast::config
