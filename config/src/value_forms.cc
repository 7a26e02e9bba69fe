#include "value_forms.h"

#include <bitset>
#include <cctype>
#include <cstdio>

namespace sumcast::config::detail {
namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decimal without sign or leading zeros, at most `max`; consumes from `text`.
std::optional<uint32_t> take_decimal(std::string_view& text, uint32_t max) {
  size_t n = 0;
  uint64_t value = 0;
  while (n < text.size() && is_digit(text[n])) {
    value = value * 10 + static_cast<uint64_t>(text[n] - '0');
    if (value > max) return std::nullopt;
    ++n;
  }
  if (n == 0 || (n > 1 && text[0] == '0')) return std::nullopt;
  text.remove_prefix(n);
  return static_cast<uint32_t>(value);
}

bool take_char(std::string_view& text, char c) {
  if (text.empty() || text[0] != c) return false;
  text.remove_prefix(1);
  return true;
}

// Fixed-width hex field of `digits` digits; consumes from `text`.
std::optional<uint32_t> take_hex(std::string_view& text, size_t digits) {
  if (text.size() < digits) return std::nullopt;
  uint32_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const int h = hex_value(text[i]);
    if (h < 0) return std::nullopt;
    value = (value << 4) | static_cast<uint32_t>(h);
  }
  text.remove_prefix(digits);
  return value;
}

// Parser of an EAL --lcores argument (see count_lcores).
class LcoreParser {
 public:
  explicit LcoreParser(std::string_view text) : text_(text) {}

  Result<int> run() {
    skip_blanks();
    if (pos_ == text_.size()) return Status::invalid_argument("no lcores listed");
    while (true) {
      Status st = parse_element();
      if (!st.ok()) return st;
      skip_blanks();
      if (pos_ == text_.size()) break;
      if (text_[pos_] != ',') return unexpected("',' or '@'");
      ++pos_;
    }
    return static_cast<int>(lcores_.count());
  }

 private:
  // lcore_set [ '@' cpu_set ]
  Status parse_element() {
    std::bitset<kMaxCpuId + 1> set;
    SUMCAST_RETURN_IF_ERROR(parse_set(kMaxLcoreId, "lcore", &set));
    for (int id = 0; id <= kMaxLcoreId; ++id) {
      if (!set.test(static_cast<size_t>(id))) continue;
      if (lcores_.test(static_cast<size_t>(id))) {
        return Status::invalid_argument("lcore " + std::to_string(id) + " is listed twice");
      }
      lcores_.set(static_cast<size_t>(id));
    }
    skip_blanks();
    if (pos_ < text_.size() && text_[pos_] == '@') {
      ++pos_;
      std::bitset<kMaxCpuId + 1> cpus;
      SUMCAST_RETURN_IF_ERROR(parse_set(kMaxCpuId, "cpu", &cpus));
    }
    return {};
  }

  // number | number '-' number | '(' item { ',' item } ')'
  Status parse_set(int max_id, const char* what, std::bitset<kMaxCpuId + 1>* set) {
    skip_blanks();
    if (pos_ < text_.size() && text_[pos_] == '(') {
      ++pos_;
      while (true) {
        SUMCAST_RETURN_IF_ERROR(parse_range(max_id, what, set));
        skip_blanks();
        if (pos_ < text_.size() && text_[pos_] == ')') {
          ++pos_;
          return {};
        }
        if (pos_ >= text_.size() || text_[pos_] != ',') return unexpected("',' or ')'");
        ++pos_;
      }
    }
    return parse_range(max_id, what, set);
  }

  Status parse_range(int max_id, const char* what, std::bitset<kMaxCpuId + 1>* set) {
    int first = 0;
    SUMCAST_RETURN_IF_ERROR(parse_id(max_id, what, &first));
    int last = first;
    skip_blanks();
    if (pos_ < text_.size() && text_[pos_] == '-') {
      ++pos_;
      SUMCAST_RETURN_IF_ERROR(parse_id(max_id, what, &last));
      if (last < first) {
        return Status::invalid_argument("range " + std::to_string(first) + "-" + std::to_string(last) + " is reversed");
      }
    }
    for (int id = first; id <= last; ++id) set->set(static_cast<size_t>(id));
    return {};
  }

  Status parse_id(int max_id, const char* what, int* id) {
    skip_blanks();
    const size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < text_.size() && is_digit(text_[pos_]) && value <= static_cast<uint64_t>(max_id)) {
      value = value * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
    }
    if (pos_ == start) return unexpected(std::string(what) == "lcore" ? "an lcore number" : "a cpu number");
    if (value > static_cast<uint64_t>(max_id) || (pos_ < text_.size() && is_digit(text_[pos_]))) {
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
      return Status::invalid_argument(std::string(what) + " " + std::string(text_.substr(start, pos_ - start)) +
                                      " is above " + std::to_string(max_id));
    }
    *id = static_cast<int>(value);
    return {};
  }

  Status unexpected(const std::string& expected) const {
    const std::string found = pos_ < text_.size() ? "'" + std::string(1, text_[pos_]) + "'" : "the end";
    return Status::invalid_argument("expected " + expected + " at offset " + std::to_string(pos_) + ", found " + found);
  }

  void skip_blanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::bitset<kMaxLcoreId + 1> lcores_;
};

}  // namespace

std::optional<Ipv4Endpoint> parse_host_port(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::optional<uint32_t> address = parse_ipv4(text.substr(0, colon));
  std::string_view port_text = text.substr(colon + 1);
  const std::optional<uint32_t> port = take_decimal(port_text, 65535);
  if (!address || !port || !port_text.empty() || *port == 0) return std::nullopt;
  return Ipv4Endpoint{*address, static_cast<uint16_t>(*port)};
}

Result<int> count_lcores(std::string_view text) { return LcoreParser(text).run(); }

std::optional<std::string> normalize_pci_address(std::string_view text) {
  uint32_t domain = 0;
  if (text.size() == 12) {
    const std::optional<uint32_t> d = take_hex(text, 4);
    if (!d || !take_char(text, ':')) return std::nullopt;
    domain = *d;
  }
  const std::optional<uint32_t> bus = take_hex(text, 2);
  if (!bus || !take_char(text, ':')) return std::nullopt;
  const std::optional<uint32_t> device = take_hex(text, 2);
  if (!device || *device > 0x1F || !take_char(text, '.')) return std::nullopt;
  const std::optional<uint32_t> function = take_hex(text, 1);
  if (!function || *function > 7 || !text.empty()) return std::nullopt;
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%04x:%02x:%02x.%x", domain, *bus, *device, *function);
  return std::string(buffer);
}

}  // namespace sumcast::config::detail
