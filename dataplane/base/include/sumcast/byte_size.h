// Byte counts as text ("65536", "64K", "4M", "1G", "2KiB"), for every command line and environment
// variable that takes a size, so that all accept the same forms and refuse the same mistakes.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>

namespace sumcast {

// A decimal count with an optional binary suffix K, M or G (either case, optionally followed by
// "B" or "iB"); nullopt for anything else ("", "K", "1.5M", "12Q", leading or trailing text) and
// for counts that do not fit 64 bits.
inline std::optional<uint64_t> parse_byte_size(std::string_view text) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view rest = text.substr(static_cast<size_t>(end - text.data()));
  unsigned shift = 0;
  if (!rest.empty()) {
    switch (rest.front()) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      default:
        return std::nullopt;
    }
    rest.remove_prefix(1);
    if (rest == "B" || rest == "b" || rest == "iB" || rest == "ib") rest = {};
    if (!rest.empty()) return std::nullopt;
  }
  if (shift != 0 && v > (~uint64_t{0} >> shift)) return std::nullopt;
  return v << shift;
}

}  // namespace sumcast
