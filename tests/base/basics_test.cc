// The other header-only basics: IPv4 and MAC text (the one parser of each that every component
// uses) and Status's
// detail, which lets callers tell causes apart without reading messages.
#include <gtest/gtest.h>

#include <string>

#include "sumcast/byte_size.h"
#include "sumcast/ipv4.h"
#include "sumcast/mac.h"
#include "sumcast/status.h"

namespace sumcast {
namespace {

TEST(Ipv4, ParsesDottedQuadsOnly) {
  EXPECT_EQ(parse_ipv4("10.0.0.1"), 0x0A000001u);
  EXPECT_EQ(parse_ipv4("0.0.0.0"), 0u);
  EXPECT_EQ(parse_ipv4("255.255.255.255"), 0xFFFFFFFFu);
  for (const char* bad : {"", "10.0.0", "10.0.0.1.", "10.0.0.256", "010.0.0.1", "10.0.0.01", "10.0.0.1 ", " 10.0.0.1",
                          "10..0.1", "a.b.c.d", "localhost", "10.0.0.-1", "4294967297.0.0.1"}) {
    EXPECT_FALSE(parse_ipv4(bad).has_value()) << bad;
  }
}

TEST(Ipv4, FormatIsTheInverseOfParse) {
  for (const char* text : {"10.0.0.1", "0.0.0.0", "255.255.255.255", "192.168.1.20", "239.1.2.3"}) {
    const auto ip = parse_ipv4(text);
    ASSERT_TRUE(ip.has_value()) << text;
    EXPECT_EQ(format_ipv4(*ip), text);
  }
}

TEST(ByteSize, CountsWithBinarySuffixes) {
  EXPECT_EQ(sumcast::parse_byte_size("0"), 0u);
  EXPECT_EQ(sumcast::parse_byte_size("65536"), 65536u);
  EXPECT_EQ(sumcast::parse_byte_size("64K"), 65536u);
  EXPECT_EQ(sumcast::parse_byte_size("64k"), 65536u);
  EXPECT_EQ(sumcast::parse_byte_size("4M"), 4u << 20);
  EXPECT_EQ(sumcast::parse_byte_size("1G"), 1u << 30);
  EXPECT_EQ(sumcast::parse_byte_size("2KiB"), 2048u);
  EXPECT_EQ(sumcast::parse_byte_size("3MB"), 3u << 20);
  EXPECT_EQ(sumcast::parse_byte_size("17179869183G"), 17179869183ull << 30);
  for (const char* bad : {"", "K", "12Q", "1.5M", "-1", " 4M", "4M ", "4MiBs", "17179869184G", "99999999999999999999"})
    EXPECT_FALSE(sumcast::parse_byte_size(bad).has_value()) << bad;
}

TEST(Mac, ParsesSixHexBytesInEitherCase) {
  EXPECT_EQ(parse_mac("02:00:00:aa:BB:0f"), (MacAddress{0x02, 0x00, 0x00, 0xAA, 0xBB, 0x0F}));
  EXPECT_EQ(parse_mac("ff:ff:ff:ff:ff:ff"), (MacAddress{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}));
  for (const char* bad : {"", "02:00:00:00:00", "02:00:00:00:00:01:", "02-00-00-00-00-01", "02:00:00:00:00:0g",
                          "2:00:00:00:00:01:", "02:00:00:00:00:001", " 02:00:00:00:00:01", "02:00:00:00:0:001"}) {
    EXPECT_FALSE(parse_mac(bad).has_value()) << bad;
  }
}

TEST(Mac, FormatIsLowerCaseAndParsesBack) {
  const MacAddress mac{0x02, 0x00, 0x5E, 0xAB, 0xCD, 0xEF};
  EXPECT_EQ(format_mac(mac), "02:00:5e:ab:cd:ef");
  EXPECT_EQ(format_mac(mac.data()), "02:00:5e:ab:cd:ef");
  EXPECT_EQ(parse_mac(format_mac(mac)), mac);
}

TEST(StatusDetail, IsKeptThroughContextAndAbsentByDefault) {
  const Status plain = Status::aborted("job 1 aborted");
  EXPECT_EQ(plain.detail(), 0u);
  const Status st = Status::aborted("job 1 aborted (member_left)", 2);
  EXPECT_EQ(st.detail(), 2u);
  const Status wrapped = st.with_context("appliance a:4790: ");
  EXPECT_EQ(wrapped.code(), StatusCode::kAborted);
  EXPECT_EQ(wrapped.detail(), 2u);
  EXPECT_EQ(wrapped.message(), "appliance a:4790: job 1 aborted (member_left)");
  EXPECT_TRUE(Status().with_context("x: ").ok());
  EXPECT_EQ(Status(StatusCode::kOk, "ignored", 5).detail(), 0u);
}

}  // namespace
}  // namespace sumcast
