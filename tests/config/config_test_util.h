// Helpers shared by the agg.conf tests: building config text with known line numbers, and a
// temporary directory (with a token file) removed at the end of the test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace sumcast::config::testing {

inline constexpr const char* kGroups[] = {"eal", "port", "dataplane", "control", "telemetry"};

// Text with every group present; `lines` are (group, "key = value;") put each on its own line
// inside that group. Holds the required keys (port.device "0000:00:01.0", port.ipv4 "10.0.0.1",
// control.token_file `token_file`) unless `with_required` is false or `lines` sets them.
inline std::string config_text(const std::vector<std::pair<std::string, std::string>>& lines,
                               const std::string& token_file = "/nonexistent/token", bool with_required = true) {
  const auto add_required = [&](const std::string& group, const std::string& key, const std::string& value) {
    if (!with_required) return std::string();
    for (const auto& [g, line] : lines) {
      if (g == group && line.rfind(key + " =", 0) == 0) return std::string();
    }
    return "  " + key + " = \"" + value + "\";\n";
  };
  std::string out = "# agg.conf under test\n";
  for (const char* group : kGroups) {
    out += std::string(group) + " = {\n";
    if (group == std::string("port")) {
      out += add_required("port", "device", "0000:00:01.0") + add_required("port", "ipv4", "10.0.0.1");
    }
    if (group == std::string("control")) out += add_required("control", "token_file", token_file);
    for (const auto& [g, line] : lines) {
      if (g == group) out += "  " + line + "\n";
    }
    out += "};\n";
  }
  return out;
}

// 1-based number of the first line of `text` that contains `needle`; 0 when none does.
inline int line_containing(const std::string& text, const std::string& needle) {
  int line = 1;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find('\n', start);
    const std::string current = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (current.find(needle) != std::string::npos) return line;
    if (end == std::string::npos) break;
    start = end + 1;
    ++line;
  }
  return 0;
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sumcast-config-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `content` to <dir>/<name>, readable by its owner only (as a token file must be), and
  // returns its path.
  std::string write(const std::string& name, const std::string& content) const {
    const std::filesystem::path file = path_ / name;
    {
      std::ofstream out(file, std::ios::binary);
      out << content;
    }
    std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

// A valid token: 32 bytes on the first line.
inline constexpr const char* kGoodToken = "0123456789abcdef0123456789abcdef\n";

}  // namespace sumcast::config::testing
