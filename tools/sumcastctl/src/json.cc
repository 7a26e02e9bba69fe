#include "sumcast/ctl/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sumcast::ctl {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Result<JsonValue> parse_document() {
    JsonValue v;
    if (!parse_value(&v, 0)) return error();
    skip_ws();
    if (pos_ != s_.size()) {
      fail("trailing characters");
      return error();
    }
    return v;
  }

 private:
  Status error() const { return Status::invalid_argument("JSON: " + what_ + " at byte " + std::to_string(err_pos_)); }
  bool fail(const char* what) {
    if (what_.empty()) {
      what_ = what;
      err_pos_ = pos_;
    }
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("unknown literal");
    pos_ += word.size();
    return true;
  }

  bool parse_value(JsonValue* out, int depth) {
    if (depth >= kMaxDepth) return fail("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) return fail("unexpected end");
    const char c = s_[pos_];
    switch (c) {
      case '{':
        return parse_object(out, depth);
      case '[':
        return parse_array(out, depth);
      case '"': {
        std::string str;
        if (!parse_string(&str)) return false;
        *out = JsonValue::string(std::move(str));
        return true;
      }
      case 't':
        if (!literal("true")) return false;
        *out = JsonValue::boolean(true);
        return true;
      case 'f':
        if (!literal("false")) return false;
        *out = JsonValue::boolean(false);
        return true;
      case 'n':
        if (!literal("null")) return false;
        *out = JsonValue();
        return true;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(out);
        return fail("unexpected character");
    }
  }

  bool parse_object(JsonValue* out, int depth) {
    ++pos_;  // '{'
    std::vector<std::pair<std::string, JsonValue>> members;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      *out = JsonValue::object(std::move(members));
      return true;
    }
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a key");
      std::string key;
      if (!parse_string(&key)) return false;
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':'");
      ++pos_;
      JsonValue v;
      if (!parse_value(&v, depth + 1)) return false;
      members.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (pos_ >= s_.size()) return fail("unexpected end in object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        *out = JsonValue::object(std::move(members));
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool parse_array(JsonValue* out, int depth) {
    ++pos_;  // '['
    std::vector<JsonValue> items;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      *out = JsonValue::array(std::move(items));
      return true;
    }
    for (;;) {
      JsonValue v;
      if (!parse_value(&v, depth + 1)) return false;
      items.push_back(std::move(v));
      skip_ws();
      if (pos_ >= s_.size()) return fail("unexpected end in array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        *out = JsonValue::array(std::move(items));
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  static void put_utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool hex4(uint32_t* v) {
    if (pos_ + 4 > s_.size()) return fail("short \\u escape");
    uint32_t x = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      x <<= 4;
      if (h >= '0' && h <= '9') {
        x |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        x |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        x |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return fail("bad \\u escape");
      }
    }
    *v = x;
    return true;
  }

  bool parse_string(std::string* out) {
    ++pos_;  // '"'
    for (;;) {
      if (pos_ >= s_.size()) return fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {
            uint32_t lo = 0;
            if (s_.substr(pos_, 2) != "\\u") return fail("lone surrogate");
            pos_ += 2;
            if (!hex4(&lo)) return false;
            if (lo < 0xDC00 || lo >= 0xE000) return fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return fail("lone surrogate");
          }
          put_utf8(cp, out);
          break;
        }
        default:
          return fail("unknown escape");
      }
    }
  }

  bool parse_number(JsonValue* out) {
    const size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t b = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - b;
    };
    const size_t int_start = pos_;
    if (digits() == 0) return fail("bad number");
    if (s_[int_start] == '0' && pos_ - int_start > 1) return fail("leading zero");
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) return fail("bad fraction");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      integral = false;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return fail("bad exponent");
    }
    const std::string_view text = s_.substr(start, pos_ - start);
    if (integral) {
      if (text[0] != '-') {
        uint64_t u = 0;
        if (std::from_chars(text.data(), text.data() + text.size(), u).ec == std::errc()) {
          *out = JsonValue::unsigned_integer(u);
          return true;
        }
      } else {
        int64_t i = 0;
        if (std::from_chars(text.data(), text.data() + text.size(), i).ec == std::errc()) {
          *out = JsonValue::integer(i);
          return true;
        }
      }
    }
    const std::string copy(text);
    *out = JsonValue::number(std::strtod(copy.c_str(), nullptr));
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string what_;
  size_t err_pos_ = 0;
};

void write_string(const std::string& s, std::string* out) {
  out->push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void newline(int indent, int depth, std::string* out) {
  if (indent < 0) return;
  out->push_back('\n');
  out->append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
}

void write_value(const JsonValue& v, int indent, int depth, std::string* out) {
  switch (v.type()) {
    case JsonValue::Type::kNull:
      *out += "null";
      break;
    case JsonValue::Type::kBool:
      *out += v.as_bool() ? "true" : "false";
      break;
    case JsonValue::Type::kNumber: {
      const double d = v.as_double();
      if (d >= 0 && static_cast<double>(v.as_uint()) == d) {
        *out += std::to_string(v.as_uint());
      } else if (d < 0 && static_cast<double>(v.as_int()) == d) {
        *out += std::to_string(v.as_int());
      } else if (std::isfinite(d)) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.17g", d);
        *out += buf;
      } else {
        *out += "null";
      }
      break;
    }
    case JsonValue::Type::kString:
      write_string(v.as_string(), out);
      break;
    case JsonValue::Type::kArray: {
      out->push_back('[');
      bool first = true;
      for (const JsonValue& item : v.items()) {
        if (!first) out->push_back(',');
        first = false;
        newline(indent, depth + 1, out);
        write_value(item, indent, depth + 1, out);
      }
      if (!v.items().empty()) newline(indent, depth, out);
      out->push_back(']');
      break;
    }
    case JsonValue::Type::kObject: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, value] : v.members()) {
        if (!first) out->push_back(',');
        first = false;
        newline(indent, depth + 1, out);
        write_string(key, out);
        *out += indent < 0 ? ":" : ": ";
        write_value(value, indent, depth + 1, out);
      }
      if (!v.members().empty()) newline(indent, depth, out);
      out->push_back('}');
      break;
    }
  }
}

}  // namespace

JsonValue JsonValue::boolean(bool b) {
  JsonValue v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}

JsonValue JsonValue::number(double d) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.number_ = d;
  if (std::isfinite(d) && d >= -9.2e18 && d <= 9.2e18) v.integer_ = static_cast<int64_t>(d);
  if (std::isfinite(d) && d >= 0 && d <= 1.8e19) v.uinteger_ = static_cast<uint64_t>(d);
  return v;
}

JsonValue JsonValue::integer(int64_t i) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.number_ = static_cast<double>(i);
  v.integer_ = i;
  v.uinteger_ = i > 0 ? static_cast<uint64_t>(i) : 0;
  return v;
}

JsonValue JsonValue::unsigned_integer(uint64_t u) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.number_ = static_cast<double>(u);
  v.uinteger_ = u;
  v.integer_ = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  return v;
}

JsonValue JsonValue::string(std::string s) {
  JsonValue v;
  v.type_ = Type::kString;
  v.string_ = std::move(s);
  return v;
}

JsonValue JsonValue::array(std::vector<JsonValue> items) {
  JsonValue v;
  v.type_ = Type::kArray;
  v.items_ = std::move(items);
  return v;
}

JsonValue JsonValue::object(std::vector<std::pair<std::string, JsonValue>> members) {
  JsonValue v;
  v.type_ = Type::kObject;
  v.members_ = std::move(members);
  return v;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : members_) {
    if (k == key) return &v;
  }
  return nullptr;
}

uint64_t JsonValue::uint_at(std::string_view key) const {
  const JsonValue* v = find(key);
  return v != nullptr ? v->as_uint() : 0;
}

Result<JsonValue> parse_json(std::string_view text) { return Parser(text).parse_document(); }

std::string to_json(const JsonValue& v, int indent) {
  std::string out;
  write_value(v, indent, 0, &out);
  return out;
}

}  // namespace sumcast::ctl
