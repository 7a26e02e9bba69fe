// IPv4 addresses as text, for every component: agg.conf, the appliance, the control server, the
// worker library and the tools parse and print them with these two, so all accept the same forms.
// Addresses are host byte order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sumcast {

// "a.b.c.d", each part 0..255 in decimal without leading zeros (what inet_pton(AF_INET) takes);
// nullopt for anything else ("", names, "1.2.3", "01.2.3.4", trailing text).
inline std::optional<uint32_t> parse_ipv4(std::string_view text) {
  uint32_t address = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (text.empty() || text.front() != '.') return std::nullopt;
      text.remove_prefix(1);
    }
    size_t n = 0;
    uint32_t octet = 0;
    while (n < text.size() && text[n] >= '0' && text[n] <= '9') {
      octet = octet * 10 + static_cast<uint32_t>(text[n] - '0');
      if (octet > 255) return std::nullopt;
      ++n;
    }
    if (n == 0 || (n > 1 && text[0] == '0')) return std::nullopt;
    text.remove_prefix(n);
    address = (address << 8) | octet;
  }
  if (!text.empty()) return std::nullopt;
  return address;
}

// "a.b.c.d".
inline std::string format_ipv4(uint32_t address) {
  return std::to_string(address >> 24) + "." + std::to_string((address >> 16) & 0xFF) + "." +
         std::to_string((address >> 8) & 0xFF) + "." + std::to_string(address & 0xFF);
}

}  // namespace sumcast
