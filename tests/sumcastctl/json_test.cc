// sumcastctl's JSON (sumcast/ctl/json.h, nlohmann-json underneath): DPDK telemetry replies read
// through the helpers, integers exact, malformed input refused with its position, nesting bounded.
#include "sumcast/ctl/json.h"

#include <gtest/gtest.h>

#include <string>

namespace sumcast::ctl {
namespace {

TEST(JsonTest, ParsesATelemetryReplyKeepingKeyOrder) {
  const char* text = R"({"/sumcast/stats":{"cores":2,"total":{"rx_packets":969,"drop_bad_icrc":0},)"
                     R"("core0":{"rx_packets":500},"core1":{"rx_packets":469}}})";
  Result<Json> v = parse_json(text);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_TRUE(v->is_object());
  ASSERT_EQ(v->size(), 1u);
  const Json& stats = v->begin().value();
  EXPECT_EQ(uint_at(stats, "cores"), 2u);
  const Json* total = find(stats, "total");
  ASSERT_NE(total, nullptr);
  EXPECT_EQ(uint_at(*total, "rx_packets"), 969u);
  EXPECT_EQ(std::next(total->begin()).key(), "drop_bad_icrc") << "key order is kept";
  EXPECT_EQ(uint_at(*find(stats, "core1"), "rx_packets"), 469u);
  EXPECT_EQ(find(stats, "absent"), nullptr);
  EXPECT_EQ(uint_at(stats, "absent"), 0u);
  EXPECT_EQ(find(Json(3), "cores"), nullptr) << "not an object";
}

TEST(JsonTest, UnsignedReadsAreExactAndNeverNegative) {
  Result<Json> v = parse_json("[0, 18446744073709551615, -9223372036854775808, 1.5, -2e3, 1E+2, \"7\", null]");
  ASSERT_TRUE(v.ok());
  const Json& a = *v;
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(as_uint(a[0]), 0u);
  EXPECT_EQ(as_uint(a[1]), UINT64_MAX);
  EXPECT_EQ(a[2].get<int64_t>(), INT64_MIN);
  EXPECT_EQ(as_uint(a[2]), 0u) << "negative is not unsigned";
  EXPECT_EQ(as_uint(a[3]), 1u);
  EXPECT_EQ(as_uint(a[4]), 0u);
  EXPECT_EQ(as_uint(a[5]), 100u);
  EXPECT_EQ(as_uint(a[6]), 0u) << "a string is not a number";
  EXPECT_EQ(as_uint(a[7]), 0u);
}

TEST(JsonTest, StringsAndEscapes) {
  Result<Json> v = parse_json(R"({"a":"a\"b\\c\/d\n\t","b":"\u00e9\u20ac","c":"\ud83d\ude00","d":"","e":3})");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(string_at(*v, "a"), "a\"b\\c/d\n\t");
  EXPECT_EQ(string_at(*v, "b"), "\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(string_at(*v, "c"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(string_at(*v, "d"), "");
  EXPECT_EQ(string_at(*v, "e"), "?") << "not a string";
  EXPECT_EQ(string_at(*v, "z", "none"), "none");
}

TEST(JsonTest, RejectsMalformedInputWithItsPosition) {
  for (const char* text : {"", "{", "{\"a\" 1}", "{\"a\":1,}", "[1 2]", "[1,]", "\"abc", "\"a\x01\"", "\"\\q\"",
                           "\"\\ud800\"", "01", "-", "1.", "1e", "tru", "{} x"}) {
    Result<Json> v = parse_json(text);
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_NE(v.status().message().find("at byte "), std::string::npos) << text << ": " << v.status().message();
    EXPECT_NE(v.status().message().find("column"), std::string::npos) << text << ": " << v.status().message();
  }
}

TEST(JsonTest, NestingIsBounded) {
  std::string deep(65, '[');
  deep += std::string(65, ']');
  Result<Json> v = parse_json(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("nested deeper than 64"), std::string::npos) << v.status().message();
  std::string ok(64, '[');
  ok += std::string(64, ']');
  EXPECT_TRUE(parse_json(ok).ok());
}

TEST(JsonTest, WriterRoundTripsAndReplacesInvalidUtf8) {
  const char* text = R"({"a":[1,-2,3.25,"x\"y\n"],"b":{"c":null,"d":true},"e":18446744073709551615})";
  Result<Json> v = parse_json(text);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(to_json(*v), text);
  Result<Json> again = parse_json(to_json(*v, 2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(to_json(*again), text);
  EXPECT_NE(to_json(*v, 2).find("\n  \"b\": {"), std::string::npos);
  EXPECT_EQ(to_json(Json("a\xff")), "\"a\xEF\xBF\xBD\"") << "U+FFFD, not an exception";
}

}  // namespace
}  // namespace sumcast::ctl
