// A small JSON reader and writer for what DPDK telemetry sends (RFC 8259 subset that DPDK
// produces, plus the rest of the grammar so that any well-formed reply parses): objects keep
// their key order; numbers keep their integer value when they are integers.
//
// Limits: nesting depth 64; \u escapes outside the BMP are decoded from surrogate pairs.
// Thread safety: values; parse/serialise are reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sumcast/status.h"

namespace sumcast::ctl {

class JsonValue {
 public:
  enum class Type : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

  JsonValue() = default;
  static JsonValue boolean(bool b);
  static JsonValue number(double d);
  static JsonValue integer(int64_t i);
  static JsonValue unsigned_integer(uint64_t u);
  static JsonValue string(std::string s);
  static JsonValue array(std::vector<JsonValue> items);
  static JsonValue object(std::vector<std::pair<std::string, JsonValue>> members);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_object() const { return type_ == Type::kObject; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }

  bool as_bool() const { return bool_; }
  double as_double() const { return number_; }
  // The number as an integer (exact when it was written as one in range); 0 for non-numbers.
  int64_t as_int() const { return is_number() ? integer_ : 0; }
  // The number as unsigned (exact up to 2^64 - 1 when written as an integer); 0 when negative.
  uint64_t as_uint() const { return is_number() ? uinteger_ : 0; }
  const std::string& as_string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }

  // Member `key` of an object, or nullptr.
  const JsonValue* find(std::string_view key) const;
  // Member `key` as unsigned (0 when absent or not a number).
  uint64_t uint_at(std::string_view key) const;

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  int64_t integer_ = 0;
  uint64_t uinteger_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// Parses exactly one JSON value (surrounding whitespace allowed). Errors name the byte offset.
Result<JsonValue> parse_json(std::string_view text);
// Compact JSON (indent < 0) or pretty-printed with `indent` spaces per level.
std::string to_json(const JsonValue& v, int indent = -1);

}  // namespace sumcast::ctl
