// JSON for sumcastctl: DPDK telemetry replies and every --json output, with nlohmann-json
// (ordered_json: objects keep their key order, as DPDK writes them; integers stay exact up to
// 2^64 - 1). The helpers below read telemetry replies, whose counters are unsigned integers.
//
// Thread safety: values; parse/serialise are reentrant.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sumcast/status.h"

namespace sumcast::ctl {

using Json = nlohmann::ordered_json;

// Parses exactly one JSON value (surrounding whitespace allowed). Errors name the byte offset.
Result<Json> parse_json(std::string_view text);
// Compact JSON (indent < 0) or pretty-printed with `indent` spaces per level; invalid UTF-8 in
// strings is replaced (U+FFFD), never thrown.
std::string to_json(const Json& v, int indent = -1);

// Member `key` of an object, or nullptr (also when `v` is not an object).
const Json* find(const Json& v, std::string_view key);
// The number as unsigned: exact when it is a non-negative integer; 0 when negative or not a number.
uint64_t as_uint(const Json& v);
// Member `key` as unsigned (0 when absent or not a number).
uint64_t uint_at(const Json& v, std::string_view key);
// Member `key` as a string, or `fallback` when absent or not a string.
std::string string_at(const Json& v, std::string_view key, std::string_view fallback = "?");

}  // namespace sumcast::ctl
