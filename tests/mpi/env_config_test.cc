// The interposer's environment table: defaults, parsing of every type, one status listing every
// problem, the rank-agreement fingerprint, the generated documentation, SUMCAST_MPI_BIND lookup.
#include "sumcast/mpi/env_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "sumcast/shim/communicator.h"

namespace sumcast::mpi {
namespace {

LoadedConfig load(const std::map<std::string, std::string>& env) {
  return load_config([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(EnvConfig, DefaultsApplyWhenOnlyTheApplianceIsGiven) {
  const LoadedConfig lc = load({{"SUMCAST_MPI_APPLIANCES", "10.0.0.1:4790"}});
  ASSERT_TRUE(lc.status.ok()) << lc.status.to_string();
  const MpiConfig& c = lc.config;
  const MpiConfig defaults;
  EXPECT_TRUE(c.enable);
  ASSERT_EQ(c.appliances.size(), 1u);
  EXPECT_EQ(c.appliances[0].address, "10.0.0.1:4790");
  EXPECT_EQ(c.appliances[0].weight, 1.0);
  EXPECT_EQ(c.threshold_bytes, defaults.threshold_bytes);
  EXPECT_EQ(c.calls, call_bit(CallKind::kAllreduce) | call_bit(CallKind::kIallreduce));
  EXPECT_TRUE(c.intranode);
  EXPECT_EQ(c.token, "");
}

TEST(EnvConfig, CongestionWindowKnobsDefaultAndParse) {
  const MpiConfig defaults;
  EXPECT_TRUE(defaults.cnp_reaction);
  EXPECT_EQ(defaults.window_cut, 50u);
  EXPECT_EQ(defaults.window_step, 1u);
  const LoadedConfig lc = load({{"SUMCAST_MPI_APPLIANCES", "10.0.0.1:4790"},
                                {"SUMCAST_MPI_CNP_REACTION", "0"},
                                {"SUMCAST_MPI_WINDOW_CUT", "20"},
                                {"SUMCAST_MPI_WINDOW_STEP", "3"}});
  ASSERT_TRUE(lc.status.ok()) << lc.status.to_string();
  EXPECT_FALSE(lc.config.cnp_reaction);
  EXPECT_EQ(lc.config.window_cut, 20u);
  EXPECT_EQ(lc.config.window_step, 3u);
  const LoadedConfig bad = load({{"SUMCAST_MPI_APPLIANCES", "10.0.0.1:4790"}, {"SUMCAST_MPI_WINDOW_CUT", "0"}});
  EXPECT_FALSE(bad.status.ok());
  EXPECT_NE(bad.status.message().find("SUMCAST_MPI_WINDOW_CUT"), std::string::npos) << bad.status.message();
}

// The send queue (shim/communicator.h): the library's default, 0 turns it off, past 1 s refused.
TEST(EnvConfig, SendQueueDefaultsToTheLibrarysAndParses) {
  EXPECT_EQ(MpiConfig{}.send_queue_us, shim::CommConfig{}.send_queue_us);
  const LoadedConfig lc = load({{"SUMCAST_MPI_APPLIANCES", "10.0.0.1:4790"}, {"SUMCAST_MPI_SEND_QUEUE_US", "0"}});
  ASSERT_TRUE(lc.status.ok()) << lc.status.to_string();
  EXPECT_EQ(lc.config.send_queue_us, 0u);
  const LoadedConfig bad =
      load({{"SUMCAST_MPI_APPLIANCES", "10.0.0.1:4790"}, {"SUMCAST_MPI_SEND_QUEUE_US", "1000001"}});
  EXPECT_FALSE(bad.status.ok());
  EXPECT_NE(bad.status.message().find("SUMCAST_MPI_SEND_QUEUE_US"), std::string::npos) << bad.status.message();
}

// DSCP, ECN and the repair DSCP (shim/communicator.h): the library's defaults (the repair DSCP
// unset: the contributions'), each parsed, each range refused naming its variable.
TEST(EnvConfig, DscpEcnAndRepairDscpDefaultToTheLibrarysAndParse) {
  const shim::CommConfig lib;
  EXPECT_EQ(MpiConfig{}.dscp, lib.dscp);
  EXPECT_EQ(MpiConfig{}.ecn, lib.ecn);
  EXPECT_EQ(MpiConfig{}.repair_dscp, lib.repair_dscp);
  const LoadedConfig lc = load({{"SUMCAST_MPI_APPLIANCES", "10.0.0.1:4790"},
                                {"SUMCAST_MPI_DSCP", "26"},
                                {"SUMCAST_MPI_ECN", "1"},
                                {"SUMCAST_MPI_REPAIR_DSCP", "34"}});
  ASSERT_TRUE(lc.status.ok()) << lc.status.to_string();
  EXPECT_EQ(lc.config.dscp, 26);
  EXPECT_TRUE(lc.config.ecn);
  EXPECT_EQ(lc.config.repair_dscp, 34);
  for (const char* name : {"SUMCAST_MPI_DSCP", "SUMCAST_MPI_REPAIR_DSCP"}) {
    for (const char* value : {"64", "-1"}) {
      const LoadedConfig bad = load({{"SUMCAST_MPI_APPLIANCES", "10.0.0.1:4790"}, {name, value}});
      EXPECT_FALSE(bad.status.ok()) << name << "=" << value;
      EXPECT_NE(bad.status.message().find(name), std::string::npos) << bad.status.message();
    }
  }
}

TEST(EnvConfig, MissingApplianceListIsTheProblem) {
  const LoadedConfig lc = load({});
  ASSERT_FALSE(lc.status.ok());
  EXPECT_NE(lc.status.message().find("SUMCAST_MPI_APPLIANCES is not set"), std::string::npos);
}

TEST(EnvConfig, ExplicitDisableIsNotAProblem) {
  const LoadedConfig lc = load({{"SUMCAST_MPI_ENABLE", "0"}});
  EXPECT_TRUE(lc.status.ok()) << lc.status.to_string();
  EXPECT_FALSE(lc.config.enable);
}

TEST(EnvConfig, EveryProblemIsListedInOneStatus) {
  const LoadedConfig lc = load({{"SUMCAST_MPI_APPLIANCES", "10.0.0.1:4790"},
                                {"SUMCAST_MPI_THRESHOLD", "12Q"},
                                {"SUMCAST_MPI_INTRANODE", "maybe"},
                                {"SUMCAST_MPI_PAYLOAD", "5000"}});
  ASSERT_FALSE(lc.status.ok());
  const std::string& m = lc.status.message();
  EXPECT_NE(m.find("SUMCAST_MPI_THRESHOLD='12Q'"), std::string::npos) << m;
  EXPECT_NE(m.find("SUMCAST_MPI_INTRANODE='maybe'"), std::string::npos) << m;
  EXPECT_NE(m.find("SUMCAST_MPI_PAYLOAD='5000': outside 8..4096"), std::string::npos) << m;
  // The variables that failed keep their defaults.
  EXPECT_EQ(lc.config.threshold_bytes, MpiConfig{}.threshold_bytes);
}

TEST(EnvConfig, ByteCountsTakeBinarySuffixes) {
  EXPECT_EQ(*parse_bytes("0"), 0u);
  EXPECT_EQ(*parse_bytes("65536"), 65536u);
  EXPECT_EQ(*parse_bytes("64K"), 65536u);
  EXPECT_EQ(*parse_bytes("64k"), 65536u);
  EXPECT_EQ(*parse_bytes(" 4M "), 4u << 20);
  EXPECT_EQ(*parse_bytes("1G"), 1u << 30);
  EXPECT_EQ(*parse_bytes("2KiB"), 2048u);
  EXPECT_FALSE(parse_bytes("").ok());
  EXPECT_FALSE(parse_bytes("K").ok());
  EXPECT_FALSE(parse_bytes("12Q").ok());
  EXPECT_FALSE(parse_bytes("1KK").ok());
  EXPECT_FALSE(parse_bytes("-1").ok());
  EXPECT_FALSE(parse_bytes("99999999999999999999").ok());
  EXPECT_FALSE(parse_bytes("17179869184G").ok());  // 2^34 GiB overflows 64 bits
}

TEST(EnvConfig, BooleansTakeTheUsualSpellings) {
  for (const char* t : {"1", "true", "YES", "on"}) EXPECT_TRUE(*parse_bool(t)) << t;
  for (const char* f : {"0", "false", "No", "OFF"}) EXPECT_FALSE(*parse_bool(f)) << f;
  EXPECT_FALSE(parse_bool("2").ok());
  EXPECT_FALSE(parse_bool("").ok());
}

TEST(EnvConfig, CallListNamesEachCall) {
  EXPECT_EQ(*parse_calls("allreduce"), call_bit(CallKind::kAllreduce));
  EXPECT_EQ(*parse_calls("iallreduce, reduce_scatter_block"),
            call_bit(CallKind::kIallreduce) | call_bit(CallKind::kReduceScatterBlock));
  EXPECT_EQ(*parse_calls("all"), 7u);
  EXPECT_EQ(*parse_calls("none"), 0u);
  EXPECT_FALSE(parse_calls("allgather").ok());
  EXPECT_FALSE(parse_calls(",").ok());
}

TEST(EnvConfig, ApplianceListTakesWeightsAndRejectsMissingPorts) {
  LoadedConfig lc = load({{"SUMCAST_MPI_APPLIANCES", "10.0.0.1:4790@2, app2:4791"}});
  ASSERT_TRUE(lc.status.ok()) << lc.status.to_string();
  ASSERT_EQ(lc.config.appliances.size(), 2u);
  EXPECT_EQ(lc.config.appliances[0].weight, 2.0);
  EXPECT_EQ(lc.config.appliances[1].address, "app2:4791");
  for (const char* bad : {"10.0.0.1", "10.0.0.1:0", "10.0.0.1:70000", ":4790", "10.0.0.1:4790@0", ","}) {
    lc = load({{"SUMCAST_MPI_APPLIANCES", bad}});
    EXPECT_FALSE(lc.status.ok()) << bad;
  }
}

TEST(EnvConfig, TokenIsTheFirstLineOfTheFile) {
  char path[] = "/tmp/sumcast-mpi-token.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "s3cret-of-16-bytes  \nsecond line\n";
  LoadedConfig lc = load({{"SUMCAST_MPI_APPLIANCES", "a:1"}, {"SUMCAST_MPI_TOKEN_FILE", path}});
  EXPECT_TRUE(lc.status.ok()) << lc.status.to_string();
  EXPECT_EQ(lc.config.token, "s3cret-of-16-bytes");
  std::ofstream(path) << "\n";
  lc = load({{"SUMCAST_MPI_APPLIANCES", "a:1"}, {"SUMCAST_MPI_TOKEN_FILE", path}});
  EXPECT_FALSE(lc.status.ok());
  std::remove(path);
  lc = load({{"SUMCAST_MPI_APPLIANCES", "a:1"}, {"SUMCAST_MPI_TOKEN_FILE", path}});
  ASSERT_FALSE(lc.status.ok());
  EXPECT_NE(lc.status.message().find(std::string(path) + ": No such file or directory"), std::string::npos)
      << lc.status.message();
}

TEST(EnvConfig, FingerprintCoversExactlyTheSharedSettings) {
  const auto fp = [](const std::map<std::string, std::string>& extra) {
    std::map<std::string, std::string> env = {{"SUMCAST_MPI_APPLIANCES", "a:1"}};
    for (const auto& [k, v] : extra) env.insert_or_assign(k, v);
    return fingerprint(load(env).config);
  };
  const uint64_t base = fp({});
  EXPECT_EQ(base, fp({}));
  EXPECT_NE(base, fp({{"SUMCAST_MPI_THRESHOLD", "1M"}}));
  EXPECT_NE(base, fp({{"SUMCAST_MPI_CALLS", "allreduce"}}));
  EXPECT_NE(base, fp({{"SUMCAST_MPI_INTRANODE", "0"}}));
  EXPECT_NE(base, fp({{"SUMCAST_MPI_APPLIANCES", "a:2"}}));
  EXPECT_NE(base, fp({{"SUMCAST_MPI_ENABLE", "0"}}));
  EXPECT_NE(base, fp({{"SUMCAST_MPI_DEVICE_BUFFERS", "mpi"}}));
  EXPECT_EQ(base, fp({{"SUMCAST_MPI_DEVICE_BUFFERS", "stage"}}));  // the default
  EXPECT_NE(base, fp({{"SUMCAST_MPI_FAILOVER_FALLBACK", "mpi"}}));
  EXPECT_EQ(base, fp({{"SUMCAST_MPI_FAILOVER_FALLBACK", "error"}}));  // the default
  EXPECT_NE(base, fp({{"SUMCAST_MPI_FAILOVER", "off"}}));
  EXPECT_NE(base, fp({{"SUMCAST_MPI_FAILOVER", "on"}}));
  EXPECT_EQ(base, fp({{"SUMCAST_MPI_FAILOVER", "auto"}}));  // the default
  // Per-rank settings may differ.
  EXPECT_EQ(base, fp({{"SUMCAST_MPI_STATS", "2"}}));
  EXPECT_EQ(base, fp({{"SUMCAST_MPI_BIND", "eth0"}}));
  EXPECT_EQ(base, fp({{"SUMCAST_MPI_PROGRESS_THREAD", "0"}}));
  EXPECT_EQ(base, fp({{"SUMCAST_MPI_CUDA_DRIVER", "/opt/cuda/libcuda.so.1"}}));
}

TEST(EnvConfig, DeviceBuffersIsStageOrMpi) {
  std::map<std::string, std::string> env = {{"SUMCAST_MPI_APPLIANCES", "a:1"}};
  EXPECT_TRUE(load(env).config.device_stage);
  env["SUMCAST_MPI_DEVICE_BUFFERS"] = "mpi";
  EXPECT_FALSE(load(env).config.device_stage);
  env["SUMCAST_MPI_DEVICE_BUFFERS"] = "gpu";
  auto lc = load(env);
  ASSERT_FALSE(lc.status.ok());
  EXPECT_NE(lc.status.message().find("SUMCAST_MPI_DEVICE_BUFFERS='gpu': must be stage or mpi"), std::string::npos)
      << lc.status.message();
}

TEST(EnvConfig, FailoverFallbackIsErrorOrMpi) {
  std::map<std::string, std::string> env = {{"SUMCAST_MPI_APPLIANCES", "a:1"}};
  EXPECT_FALSE(load(env).config.fallback_mpi);
  env["SUMCAST_MPI_FAILOVER_FALLBACK"] = "mpi";
  EXPECT_TRUE(load(env).config.fallback_mpi);
  env["SUMCAST_MPI_FAILOVER_FALLBACK"] = "pmpi";
  auto lc = load(env);
  ASSERT_FALSE(lc.status.ok());
  EXPECT_NE(lc.status.message().find("SUMCAST_MPI_FAILOVER_FALLBACK='pmpi': must be error or mpi"), std::string::npos)
      << lc.status.message();
}

TEST(EnvConfig, TableNamesAreUniqueAndDocumented) {
  std::set<std::string> names;
  const std::string md = env_table_markdown();
  for (const EnvVar& v : env_table()) {
    EXPECT_EQ(std::string(v.name).rfind("SUMCAST_MPI_", 0), 0u) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << "duplicate " << v.name;
    EXPECT_NE(md.find(std::string("`") + v.name + "`"), std::string::npos) << v.name;
    EXPECT_GT(std::string(v.doc).size(), 10u) << v.name;
  }
}

TEST(EnvConfig, ReadmeTableIsTheGeneratedOne) {
  std::ifstream f(std::string(SUMCAST_SOURCE_DIR) + "/worker_shim/mpi/README.md");
  ASSERT_TRUE(f) << "worker_shim/mpi/README.md";
  std::string text, line;
  while (std::getline(f, line)) text += line + "\n";
  const std::string begin = "<!-- env-table begin -->\n", end = "<!-- env-table end -->";
  const size_t b = text.find(begin), e = text.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(text.substr(b + begin.size(), e - b - begin.size()), env_table_markdown())
      << "regenerate the README's table from env_table() (SUMCAST_MPI_HELP=1 prints it)";
}

TEST(EnvConfig, BindTakesAnAddressOrAnInterfaceName) {
  EXPECT_EQ(*resolve_bind(""), "");
  EXPECT_EQ(*resolve_bind("10.1.2.3"), "10.1.2.3");
  auto lo = resolve_bind("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().to_string();
  EXPECT_EQ(*lo, "127.0.0.1");
  auto none = resolve_bind("nosuchif9");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace sumcast::mpi
