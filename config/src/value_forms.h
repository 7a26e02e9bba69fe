// The textual forms agg.conf values take: dotted-quad IPv4, "ip:port", DPDK lcore lists and PCI
// addresses (MACs: sumcast/mac.h). Strict parsers: anything they do not fully consume is rejected.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sumcast/config/agg_config.h"
#include "sumcast/ipv4.h"
#include "sumcast/status.h"

namespace sumcast::config::detail {

// "a.b.c.d" (sumcast/ipv4.h: the one parser every component uses).
using ::sumcast::format_ipv4;
using ::sumcast::parse_ipv4;

// "a.b.c.d:port".
std::optional<Ipv4Endpoint> parse_host_port(std::string_view text);

// Lcore ids DPDK accepts by default (RTE_MAX_LCORE of a default 22.11 build) and CPU ids
// (CPU_SETSIZE) an lcore may be pinned to.
inline constexpr int kMaxLcoreId = 127;
inline constexpr int kMaxCpuId = 1023;

// Counts the lcores of an EAL --lcores argument: comma-separated elements, each an lcore set
// ("3", "0-3" or a group "(0-3,5)") with an optional "@cpu set" ("1@0", "(0,1)@(2-3)").
// Blanks around tokens are allowed. An lcore listed twice, a reversed range or an id out of
// range is an error; the Status message says what and where (without the key).
Result<int> count_lcores(std::string_view text);

// A PCI address "dddd:bb:dd.f" or "bb:dd.f" (domain 0000), normalised to lower-case
// "dddd:bb:dd.f"; nullopt when `text` is not one.
std::optional<std::string> normalize_pci_address(std::string_view text);

}  // namespace sumcast::config::detail
