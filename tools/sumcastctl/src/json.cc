// sumcastctl's JSON (json.h): nlohmann-json, with errors as Status and the readers telemetry needs.
#include "sumcast/ctl/json.h"

namespace sumcast::ctl {

namespace {

constexpr int kMaxDepth = 64;  // telemetry replies nest 3 deep; anything far deeper is not one

struct TooDeep {
  size_t depth;
};

}  // namespace

Result<Json> parse_json(std::string_view text) {
  // The parser calls back at every value; one that opens a container deeper than the limit ends
  // the parse (nlohmann-json itself has no depth limit).
  const Json::parser_callback_t limit = [](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxDepth) {
      throw TooDeep{static_cast<size_t>(depth) + 1};
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), limit);
  } catch (const Json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    return Status::invalid_argument("JSON: " + std::string(e.what()) + " (at byte " + std::to_string(e.byte) + ")");
  } catch (const TooDeep& e) {
    return Status::invalid_argument("JSON: nested deeper than " + std::to_string(kMaxDepth) + " levels (" +
                                    std::to_string(e.depth) + ")");
  }
}

std::string to_json(const Json& v, int indent) { return v.dump(indent, ' ', false, Json::error_handler_t::replace); }

const Json* find(const Json& v, std::string_view key) {
  if (!v.is_object()) return nullptr;
  auto it = v.find(key);
  return it == v.end() ? nullptr : &*it;
}

uint64_t as_uint(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    return i < 0 ? 0 : static_cast<uint64_t>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return d > 0 && d < 18446744073709551616.0 ? static_cast<uint64_t>(d) : 0;
  }
  return 0;
}

uint64_t uint_at(const Json& v, std::string_view key) {
  const Json* m = find(v, key);
  return m ? as_uint(*m) : 0;
}

std::string string_at(const Json& v, std::string_view key, std::string_view fallback) {
  const Json* m = find(v, key);
  return m != nullptr && m->is_string() ? m->get<std::string>() : std::string(fallback);
}

}  // namespace sumcast::ctl
