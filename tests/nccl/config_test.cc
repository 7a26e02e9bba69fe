// Plugin settings (config.h): defaults, environment over file, and errors that name the key.
#include "config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "sumcast/shim/communicator.h"

namespace sumcast::nccl {
namespace {

struct Env {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> getter() {
    return [this](const char* k) -> const char* {
      auto it = vars.find(k);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string write_file(const std::string& text) {
  char path[] = "/tmp/nccl-config-test.XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::FILE* f = fdopen(fd, "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

TEST(PluginConfig, DefaultsWithoutEnvironmentOrFile) {
  Env env{{{"SUMCAST_NCCL_CONF", "/dev/null"}}};
  auto c = load_config(env.getter());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->appliances.empty());
  EXPECT_EQ(c->payload_bytes, 1024u);
  EXPECT_TRUE(c->if_names.empty());
}

TEST(PluginConfig, EnvironmentOverridesTheFile) {
  const std::string file = write_file(
      "# admin settings\nSUMCAST_APPLIANCES=10.0.0.1:4790@2,10.0.0.2:4790\n"
      "SUMCAST_PAYLOAD_BYTES=512\n");
  Env env{{{"SUMCAST_NCCL_CONF", file}, {"SUMCAST_PAYLOAD_BYTES", "2048"}, {"NCCL_SOCKET_IFNAME", "^docker,lo"}}};
  auto c = load_config(env.getter());
  std::remove(file.c_str());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->appliances.size(), 2u);
  EXPECT_EQ(c->appliances[0].address, "10.0.0.1:4790");
  EXPECT_EQ(c->appliances[0].weight, 2.0);
  EXPECT_EQ(c->payload_bytes, 2048u);
  EXPECT_TRUE(c->if_exclude);
  EXPECT_EQ(c->if_names, (std::vector<std::string>{"docker", "lo"}));
}

TEST(PluginConfig, UnknownKeyInTheFileIsAnErrorWithItsLine) {
  const std::string file = write_file("SUMCAST_PAYLOAD_BYTES=512\nSUMCAST_APPLIANCE=10.0.0.1:4790\n");
  Env env{{{"SUMCAST_NCCL_CONF", file}}};
  auto c = load_config(env.getter());
  std::remove(file.c_str());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(":2: unknown key SUMCAST_APPLIANCE"), std::string::npos) << c.status().message();
}

TEST(PluginConfig, OutOfRangeValueNamesTheKey) {
  Env env{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"SUMCAST_PAYLOAD_BYTES", "4097"}}};
  auto c = load_config(env.getter());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("SUMCAST_PAYLOAD_BYTES=4097"), std::string::npos) << c.status().message();
}

TEST(PluginConfig, MulticastIsAskedForWithOneAndRefusesOtherValues) {
  Env off{{{"SUMCAST_NCCL_CONF", "/dev/null"}}};
  auto c = load_config(off.getter());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->multicast);
  Env on{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"SUMCAST_MULTICAST", "1"}}};
  c = load_config(on.getter());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->multicast);
  Env bad{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"SUMCAST_MULTICAST", "yes"}}};
  c = load_config(bad.getter());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("SUMCAST_MULTICAST=yes"), std::string::npos) << c.status().message();
}

TEST(PluginConfig, CongestionWindowKnobsDefaultAndParse) {
  Env dflt{{{"SUMCAST_NCCL_CONF", "/dev/null"}}};
  auto c = load_config(dflt.getter());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->cnp_reaction);
  EXPECT_EQ(c->window_cut_percent, 50u);
  EXPECT_EQ(c->window_step, 1u);
  Env set{{{"SUMCAST_NCCL_CONF", "/dev/null"},
           {"SUMCAST_CNP_REACTION", "0"},
           {"SUMCAST_WINDOW_CUT", "25"},
           {"SUMCAST_WINDOW_STEP", "4"}}};
  c = load_config(set.getter());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->cnp_reaction);
  EXPECT_EQ(c->window_cut_percent, 25u);
  EXPECT_EQ(c->window_step, 4u);
  Env bad{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"SUMCAST_WINDOW_CUT", "100"}}};
  c = load_config(bad.getter());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("SUMCAST_WINDOW_CUT=100"), std::string::npos) << c.status().message();
}

// The send queue (shim/communicator.h): on by default at the library's 2000 us, 0 turns it off,
// and a bound past 1 s is refused by name.
TEST(PluginConfig, SendQueueDefaultsToTheLibrarysAndParses) {
  Env dflt{{{"SUMCAST_NCCL_CONF", "/dev/null"}}};
  auto c = load_config(dflt.getter());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->send_queue_us, shim::CommConfig{}.send_queue_us);
  Env off{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"SUMCAST_SEND_QUEUE_US", "0"}}};
  c = load_config(off.getter());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->send_queue_us, 0u);
  Env bad{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"SUMCAST_SEND_QUEUE_US", "1000001"}}};
  c = load_config(bad.getter());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("SUMCAST_SEND_QUEUE_US"), std::string::npos) << c.status().message();
}

// DSCP and ECN (docs/deployment.md, "DSCP, PFC and ECN"): unset, the library's defaults (DSCP 0,
// not-ECT, resends with the contributions' DSCP); set, parsed into the fields the lanes copy into
// their CommConfig; a DSCP past 63 is refused by name.
TEST(PluginConfig, DscpEcnAndRepairDscpDefaultToTheLibrarysAndParse) {
  Env dflt{{{"SUMCAST_NCCL_CONF", "/dev/null"}}};
  auto c = load_config(dflt.getter());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const shim::CommConfig lib;
  EXPECT_EQ(c->dscp, lib.dscp);
  EXPECT_EQ(c->ecn, lib.ecn);
  EXPECT_EQ(c->repair_dscp, lib.repair_dscp);
  Env set{{{"SUMCAST_NCCL_CONF", "/dev/null"},
           {"SUMCAST_DSCP", "26"},
           {"SUMCAST_ECN", "1"},
           {"SUMCAST_REPAIR_DSCP", "34"}}};
  c = load_config(set.getter());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->dscp, 26);
  EXPECT_TRUE(c->ecn);
  EXPECT_EQ(c->repair_dscp, 34);
  for (const char* key : {"SUMCAST_DSCP", "SUMCAST_REPAIR_DSCP"}) {
    Env bad{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {key, "64"}}};
    c = load_config(bad.getter());
    ASSERT_FALSE(c.ok()) << key;
    EXPECT_NE(c.status().message().find(std::string(key) + "=64"), std::string::npos) << c.status().message();
  }
  Env ecn{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"SUMCAST_ECN", "2"}}};
  EXPECT_FALSE(load_config(ecn.getter()).ok());
}

// NCCL_IB_TC (NCCL's own RoCE traffic class) marks the contributions where SUMCAST_DSCP and
// SUMCAST_ECN are both unset: its DSCP bits and, where its ECN bits are not 0, ECT(0).
TEST(PluginConfig, NcclIbTcMarksTheContributionsWhereNeitherDscpNorEcnIsSet) {
  struct Case {
    const char* tc;
    const char* dscp;  // SUMCAST_DSCP, or nullptr
    const char* ecn;   // SUMCAST_ECN, or nullptr
    int want_dscp;
    bool want_ecn;
  };
  for (const Case& k : {Case{"106", nullptr, nullptr, 26, true}, Case{"0x68", nullptr, nullptr, 26, false},
                        Case{"-1", nullptr, nullptr, 0, false}, Case{"106", "10", nullptr, 10, false},
                        Case{"106", nullptr, "0", 0, false}}) {
    std::map<std::string, std::string> vars{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"NCCL_IB_TC", k.tc}};
    if (k.dscp != nullptr) vars["SUMCAST_DSCP"] = k.dscp;
    if (k.ecn != nullptr) vars["SUMCAST_ECN"] = k.ecn;
    Env env{vars};
    auto c = load_config(env.getter());
    ASSERT_TRUE(c.ok()) << k.tc << ": " << c.status().to_string();
    EXPECT_EQ(c->dscp, k.want_dscp) << k.tc;
    EXPECT_EQ(c->ecn, k.want_ecn) << k.tc;
    const bool taken = k.dscp == nullptr && k.ecn == nullptr && std::string(k.tc) != "-1";
    EXPECT_EQ(c->source.find("from NCCL_IB_TC") != std::string::npos, taken) << c->source;
  }
  for (const char* bad : {"256", "-2", "26x", "ef"}) {
    Env env{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"NCCL_IB_TC", bad}}};
    auto c = load_config(env.getter());
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find(std::string("NCCL_IB_TC=") + bad), std::string::npos) << c.status().message();
  }
}

TEST(PluginConfig, MissingExplicitFileIsAnError) {
  Env env{{{"SUMCAST_NCCL_CONF", "/nonexistent/nccl.conf"}}};
  EXPECT_FALSE(load_config(env.getter()).ok());
}

TEST(PluginConfig, TokenFileGivesTheFirstLine) {
  const std::string file = write_file("s3cret-of-16-bytes\r\nignored\n");
  Env env{{{"SUMCAST_NCCL_CONF", "/dev/null"}, {"SUMCAST_TOKEN", "x"}, {"SUMCAST_TOKEN_FILE", file}}};
  auto c = load_config(env.getter());
  std::remove(file.c_str());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->token, "s3cret-of-16-bytes");
}

}  // namespace
}  // namespace sumcast::nccl
