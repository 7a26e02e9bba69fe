// sumcastctl's JSON reader/writer (sumcast/ctl/json.h): DPDK telemetry replies, the grammar's
// edges, and rejections with their byte offset.
#include "sumcast/ctl/json.h"

#include <gtest/gtest.h>

#include <string>

namespace sumcast::ctl {
namespace {

TEST(JsonTest, ParsesATelemetryReply) {
  const char* text = R"({"/sumcast/stats":{"cores":2,"total":{"rx_packets":969,"drop_bad_icrc":0},)"
                     R"("core0":{"rx_packets":500},"core1":{"rx_packets":469}}})";
  Result<JsonValue> v = parse_json(text);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_TRUE(v->is_object());
  ASSERT_EQ(v->members().size(), 1u);
  const JsonValue& stats = v->members()[0].second;
  EXPECT_EQ(stats.uint_at("cores"), 2u);
  const JsonValue* total = stats.find("total");
  ASSERT_NE(total, nullptr);
  EXPECT_EQ(total->uint_at("rx_packets"), 969u);
  EXPECT_EQ(total->members()[1].first, "drop_bad_icrc") << "key order is kept";
  EXPECT_EQ(stats.find("core1")->uint_at("rx_packets"), 469u);
  EXPECT_EQ(stats.find("absent"), nullptr);
  EXPECT_EQ(stats.uint_at("absent"), 0u);
}

TEST(JsonTest, NumbersKeepIntegersExact) {
  Result<JsonValue> v = parse_json("[0, 18446744073709551615, -9223372036854775808, 1.5, -2e3, 1E+2]");
  ASSERT_TRUE(v.ok());
  const auto& a = v->items();
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a[0].as_uint(), 0u);
  EXPECT_EQ(a[1].as_uint(), UINT64_MAX);
  EXPECT_EQ(a[2].as_int(), INT64_MIN);
  EXPECT_EQ(a[2].as_uint(), 0u) << "negative is not unsigned";
  EXPECT_DOUBLE_EQ(a[3].as_double(), 1.5);
  EXPECT_EQ(a[4].as_int(), -2000);
  EXPECT_EQ(a[5].as_uint(), 100u);
}

TEST(JsonTest, StringsAndEscapes) {
  Result<JsonValue> v = parse_json(R"(["a\"b\\c\/d\n\t", "\u00e9\u20ac", "\ud83d\ude00", ""])");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  const auto& a = v->items();
  EXPECT_EQ(a[0].as_string(), "a\"b\\c/d\n\t");
  EXPECT_EQ(a[1].as_string(), "\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(a[2].as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(a[3].as_string(), "");
}

TEST(JsonTest, LiteralsAndEmptyContainers) {
  Result<JsonValue> v = parse_json(" { \"t\" : true , \"f\":false,\"n\":null,\"o\":{},\"a\":[] } \n");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->find("t")->as_bool());
  EXPECT_FALSE(v->find("f")->as_bool());
  EXPECT_TRUE(v->find("n")->is_null());
  EXPECT_TRUE(v->find("o")->is_object());
  EXPECT_TRUE(v->find("a")->is_array());
  EXPECT_TRUE(v->find("a")->items().empty());
}

TEST(JsonTest, RejectsMalformedInputWithOffset) {
  struct Case {
    const char* text;
    const char* why;
  };
  const Case cases[] = {
      {"", "unexpected end"},           {"{", "expected a key"},
      {"{\"a\" 1}", "expected ':'"},    {"{\"a\":1,}", "expected a key"},
      {"[1 2]", "expected ',' or ']'"}, {"[1,]", "unexpected character"},
      {"\"abc", "unterminated string"}, {"\"a\x01\"", "control character"},
      {"\"\\q\"", "unknown escape"},    {"\"\\ud800\"", "lone surrogate"},
      {"01", "leading zero"},           {"-", "bad number"},
      {"1.", "bad fraction"},           {"1e", "bad exponent"},
      {"tru", "unknown literal"},       {"{} x", "trailing characters"},
  };
  for (const Case& c : cases) {
    Result<JsonValue> v = parse_json(c.text);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_NE(v.status().message().find(c.why), std::string::npos) << c.text << ": " << v.status().message();
    EXPECT_NE(v.status().message().find("at byte"), std::string::npos);
  }
}

TEST(JsonTest, NestingIsBounded) {
  std::string deep(65, '[');
  deep += std::string(65, ']');
  EXPECT_FALSE(parse_json(deep).ok());
  std::string ok(64, '[');
  ok += std::string(64, ']');
  EXPECT_TRUE(parse_json(ok).ok());
}

TEST(JsonTest, WriterRoundTrips) {
  const char* text = R"({"a":[1,-2,3.25,"x\"y\n"],"b":{"c":null,"d":true},"e":18446744073709551615})";
  Result<JsonValue> v = parse_json(text);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(to_json(*v), text);
  Result<JsonValue> again = parse_json(to_json(*v, 2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(to_json(*again), text);
  EXPECT_NE(to_json(*v, 2).find("\n  \"b\": {"), std::string::npos);
}

}  // namespace
}  // namespace sumcast::ctl
