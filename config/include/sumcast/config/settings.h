// A loaded agg.conf as users are shown it: `sumcastctl check --json` and sumcastd's
// /sumcast/config (DPDK telemetry) both walk settings(), so that neither leaves a key out or
// shows one in another form. Every key the parser reads, section by section in a fixed order,
// with the value it has after parsing (defaults filled in), in the form the file takes: counts
// as numbers, switches as booleans, addresses, MACs, names and choices as strings (an unset
// optional one as ""), lists as lists of strings. The token file's path, never its contents.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "sumcast/config/agg_config.h"

namespace sumcast::config {

using SettingValue = std::variant<uint64_t, bool, std::string, std::vector<std::string>>;

struct Setting {
  const char* section;  // "eal", "port", "dataplane", "control", "telemetry"
  const char* key;      // the key inside it, as in agg.conf
  SettingValue value;
};

std::vector<Setting> settings(const AggConfig& c);

}  // namespace sumcast::config
