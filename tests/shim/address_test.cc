// Address parsing for appliance lists ("host:port[@weight]") and local address discovery.
#include "sumcast/shim/address.h"

#include <gtest/gtest.h>

namespace sumcast::shim {
namespace {

TEST(Address, HostPortParsesDottedQuadAndPort) {
  auto hp = parse_host_port("10.1.2.3:4790");
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(hp->host, "10.1.2.3");
  EXPECT_EQ(hp->ip, 0x0A010203u);
  EXPECT_EQ(hp->port, 4790);
}

TEST(Address, HostPortResolvesLocalhost) {
  auto hp = parse_host_port("localhost:1");
  ASSERT_TRUE(hp.ok()) << hp.status().to_string();
  EXPECT_EQ(hp->ip >> 24, 127u);
}

TEST(Address, HostPortRejectsMissingOrBadPorts) {
  for (const char* bad : {"10.0.0.1", "10.0.0.1:", ":80", "10.0.0.1:0", "10.0.0.1:65536", "10.0.0.1:12x"}) {
    auto hp = parse_host_port(bad);
    EXPECT_FALSE(hp.ok()) << bad;
    EXPECT_EQ(hp.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(Address, UnresolvableHostIsNotFound) {
  auto hp = parse_host_port("no-such-host.invalid:4790");
  ASSERT_FALSE(hp.ok());
  EXPECT_NE(hp.status().message().find("no-such-host.invalid"), std::string::npos);
}

TEST(Address, WeightSuffixIsOptionalAndPositive) {
  std::string hp;
  double w = 0;
  ASSERT_TRUE(split_weight("a:1", &hp, &w).ok());
  EXPECT_EQ(hp, "a:1");
  EXPECT_EQ(w, 1.0);
  ASSERT_TRUE(split_weight("a:1@2.5", &hp, &w).ok());
  EXPECT_EQ(hp, "a:1");
  EXPECT_EQ(w, 2.5);
  for (const char* bad : {"a:1@", "a:1@0", "a:1@-1", "a:1@x", "a:1@nan", "a:1@inf"}) {
    EXPECT_FALSE(split_weight(bad, &hp, &w).ok()) << bad;
  }
}

TEST(Address, Ipv4ParsesOnlyDottedQuads) {
  EXPECT_EQ(*parse_ipv4("192.168.1.20"), 0xC0A80114u);
  EXPECT_FALSE(parse_ipv4("").ok());
  EXPECT_FALSE(parse_ipv4("localhost").ok());
  EXPECT_FALSE(parse_ipv4("1.2.3.256").ok());
  EXPECT_EQ(format_ipv4(0xC0A80114u), "192.168.1.20");
}

TEST(Address, SourceTowardLoopbackIsALoopbackAddress) {
  auto src = source_ip_toward(0x7F000001u);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  EXPECT_EQ(*src >> 24, 127u);
  uint8_t mac[6] = {1, 2, 3, 4, 5, 6};
  mac_of_local_ip(0x7F000001u, mac);  // loopback has an all-zero hardware address
  for (uint8_t b : mac) EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace sumcast::shim
