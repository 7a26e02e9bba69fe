// Fuzzer of the agg.conf loader (sumcast/config/agg_config.h): config::parse_agg_config on
// arbitrary text, then config::validate_agg_config on what it accepts.
//
// Invariants checked on every input (any violation aborts):
//   - No crash, no sanitizer finding, no exception escaping (the parser catches libconfig's).
//   - Every error has the one documented shape "<name>:<line>: ..." with <name> the name given
//     and 0 <= <line> <= the number of lines of the text + 1.
//   - An accepted file has every integer within the range its field documents (agg_config.h),
//     the required keys set, and key_lines only for lines of the text.
//   - Parsing is deterministic: the same text gives the same answer twice.
// validate_agg_config opens control.token_file: the harness points it at a token file of its own
// (created once) so that a fuzzed path never opens a device or a FIFO.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz_check.h"
#include "sumcast/config/agg_config.h"

namespace sumcast::config {
namespace {

constexpr const char* kName = "fuzz.conf";

// A readable token file, made once per process.
const std::string& token_file() {
  static const std::string path = [] {
    char name[] = "/tmp/sumcast-fuzz-token-XXXXXX";
    const int fd = ::mkstemp(name);
    SUMCAST_FUZZ_CHECK(fd >= 0, "mkstemp failed");
    const char token[] = "fuzz-token-0123456789abcdef\n";
    SUMCAST_FUZZ_CHECK(::write(fd, token, sizeof token - 1) == static_cast<ssize_t>(sizeof token - 1), "write");
    ::close(fd);
    return std::string(name);
  }();
  return path;
}

void remove_token_file() { ::unlink(token_file().c_str()); }

// "<kName>:<line>: ..." with a line in [0, lines + 1].
void check_message(const Status& s, size_t lines) {
  const std::string& m = s.message();
  const std::string prefix = std::string(kName) + ":";
  SUMCAST_FUZZ_CHECK(m.compare(0, prefix.size(), prefix) == 0, "message without the file name: %s", m.c_str());
  size_t i = prefix.size();
  uint64_t line = 0;
  size_t digits = 0;
  while (i < m.size() && m[i] >= '0' && m[i] <= '9' && digits < 12) line = line * 10 + (m[i++] - '0'), ++digits;
  SUMCAST_FUZZ_CHECK(digits > 0 && i < m.size() && m[i] == ':', "message without a line: %s", m.c_str());
  SUMCAST_FUZZ_CHECK(line <= lines + 1, "line %llu of a %zu-line text: %s", static_cast<unsigned long long>(line),
                     lines, m.c_str());
}

template <typename T>
void check_range(const char* key, T value, int64_t lo, int64_t hi) {
  const auto v = static_cast<int64_t>(value);
  SUMCAST_FUZZ_CHECK(v >= lo && v <= hi, "%s = %lld outside %lld..%lld", key, static_cast<long long>(v),
                     static_cast<long long>(lo), static_cast<long long>(hi));
}

bool power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

void check_accepted(const AggConfig& c, size_t lines) {
  check_range("eal.memory_mb", c.eal.memory_mb, 64, 1048576);
  check_range("port.mtu", c.port.mtu, 576, 9216);
  check_range("port.rx_desc", c.port.rx_desc, 64, 16384);
  check_range("port.tx_desc", c.port.tx_desc, 64, 16384);
  SUMCAST_FUZZ_CHECK(power_of_two(c.port.rx_desc) && power_of_two(c.port.tx_desc), "descriptors %u/%u", c.port.rx_desc,
                     c.port.tx_desc);
  const DataplaneConfig& d = c.dataplane;
  check_range("dataplane.worker_cores", d.worker_cores, 1, 64);
  check_range("dataplane.burst_size", d.burst_size, 1, 512);
  check_range("dataplane.tx_coalesce", d.tx_coalesce, 0, 32);
  check_range("dataplane.slots_per_job", d.slots_per_job, 1, 65535);
  check_range("dataplane.max_jobs", d.max_jobs, 1, 4096);
  check_range("dataplane.max_ranks", d.max_ranks, 2, 4096);
  check_range("dataplane.max_payload_bytes", d.max_payload_bytes, 64, 4096);
  SUMCAST_FUZZ_CHECK(d.max_payload_bytes % 64 == 0, "max_payload_bytes %u", d.max_payload_bytes);
  check_range("dataplane.mbufs", d.mbufs, 1023, 1048575);
  SUMCAST_FUZZ_CHECK(!d.dtypes.empty() && d.dtypes.size() <= 5, "%zu dtypes", d.dtypes.size());
  for (size_t i = 0; i < d.dtypes.size(); ++i) {
    for (size_t j = 0; j < i; ++j) SUMCAST_FUZZ_CHECK(d.dtypes[i] != d.dtypes[j], "dtype listed twice");
  }
  check_range("control.port", c.control.port, 1, 65535);
  check_range("control.max_connections", c.control.max_connections, 1, 65536);
  check_range("control.job_timeout_ms", c.control.job_timeout_ms, 100, 3600000);
  check_range("control.register_timeout_ms", c.control.register_timeout_ms, 100, 3600000);
  check_range("control.io_timeout_ms", c.control.io_timeout_ms, 10, 600000);
  check_range("telemetry.stats_interval_ms", c.telemetry.stats_interval_ms, 0, 3600000);
  for (const char* key : {"port.device", "port.ipv4", "control.token_file"}) {
    SUMCAST_FUZZ_CHECK(c.key_lines.count(key) == 1, "required %s accepted absent", key);
  }
  for (const auto& [key, line] : c.key_lines) {
    SUMCAST_FUZZ_CHECK(line >= 1 && static_cast<size_t>(line) <= lines + 1, "%s at line %d of %zu", key.c_str(), line,
                       lines);
  }
  SUMCAST_FUZZ_CHECK(c.path == kName, "path %s", c.path.c_str());
}

void check_text(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return;  // a config is a few KiB; larger inputs only slow the search
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  Result<AggConfig> parsed = parse_agg_config(text, kName);
  Result<AggConfig> again = parse_agg_config(text, kName);
  SUMCAST_FUZZ_CHECK(parsed.ok() == again.ok(), "parsing is not deterministic");
  if (!parsed.ok()) {
    SUMCAST_FUZZ_CHECK(parsed.status().message() == again.status().message(), "messages differ: %s / %s",
                       parsed.status().message().c_str(), again.status().message().c_str());
    check_message(parsed.status(), lines);
    return;
  }
  AggConfig& config = *parsed;
  check_accepted(config, lines);
  config.control.token_file = token_file();
  const Status valid = validate_agg_config(config);
  if (!valid.ok()) check_message(valid, lines);
}

}  // namespace
}  // namespace sumcast::config

// libconfig 1.5 (Debian 12's libconfig++9) leaks the buffer of a string literal when the parse
// fails right after it (scanner.l's strbuf is not freed on a syntax error): its leaks are not ours.
// LeakSanitizer reads this hook at start-up (libFuzzer and the replay driver alike). As libFuzzer
// runs a full leak check after every input that leaked, these leaks make fuzzing ~13x slower:
// tools/fuzz and the "fuzz" test run this fuzzer with -detect_leaks=0 and then leak-check every
// input it kept in one replay (-runs=0 -detect_leaks=1).
extern "C" const char* __lsan_default_suppressions() { return "leak:libconfig\n"; }

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  sumcast::config::token_file();
  std::atexit(sumcast::config::remove_token_file);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sumcast::config::check_text(data, size);
  return 0;
}
