// The one shape of every agg.conf error: "<file>:<line>: <key path>: <what>" (docs/agg.conf.md).
#pragma once

#include <string>
#include <string_view>

#include "sumcast/status.h"

namespace sumcast::config::detail {

inline std::string location(std::string_view file, int line, std::string_view key) {
  std::string out;
  out.reserve(file.size() + key.size() + 16);
  out.append(file).append(":").append(std::to_string(line)).append(": ");
  if (!key.empty()) out.append(key).append(": ");
  return out;
}

inline Status located_error(StatusCode code, std::string_view file, int line, std::string_view key,
                            std::string_view what) {
  return Status(code, location(file, line, key).append(what));
}

}  // namespace sumcast::config::detail
