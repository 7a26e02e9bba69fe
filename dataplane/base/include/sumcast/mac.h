// Ethernet MAC addresses as text, for every component: agg.conf's port.mac is parsed and the
// appliance's logs and telemetry print addresses with these two, so all use the same form.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace sumcast {

using MacAddress = std::array<uint8_t, 6>;

// "aa:bb:cc:dd:ee:ff": six two-digit hex bytes (either case) separated by ':'; nullopt for
// anything else ("02-00-...", five bytes, trailing text).
inline std::optional<MacAddress> parse_mac(std::string_view text) {
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.size() != 17) return std::nullopt;
  MacAddress mac{};
  for (size_t i = 0; i < mac.size(); ++i) {
    const size_t at = i * 3;
    if (i > 0 && text[at - 1] != ':') return std::nullopt;
    const int hi = hex(text[at]);
    const int lo = hex(text[at + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    mac[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return mac;
}

// "aa:bb:cc:dd:ee:ff" (lower case).
inline std::string format_mac(const uint8_t mac[6]) {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
  return buf;
}
inline std::string format_mac(const MacAddress& mac) { return format_mac(mac.data()); }

}  // namespace sumcast
