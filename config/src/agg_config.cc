// agg.conf parsing and type checking (docs/agg.conf.md). Cross-field checks: agg_validate.cc.
#include "sumcast/config/agg_config.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <libconfig.h++>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "literal_scan.h"
#include "located_error.h"
#include "sumcast/wire/format.h"
#include "value_forms.h"

namespace sumcast::config {
namespace {

using libconfig::Setting;

const char* type_name(Setting::Type type) {
  switch (type) {
    case Setting::TypeInt:
    case Setting::TypeInt64:
      return "an integer";
    case Setting::TypeFloat:
      return "a float";
    case Setting::TypeString:
      return "a string";
    case Setting::TypeBoolean:
      return "a boolean";
    case Setting::TypeGroup:
      return "a group";
    case Setting::TypeArray:
      return "an array";
    case Setting::TypeList:
      return "a list";
    case Setting::TypeNone:
      break;
  }
  return "nothing";
}

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string range_text(int64_t lo, int64_t hi) { return std::to_string(lo) + ".." + std::to_string(hi); }

// What an integer key accepts beyond its range.
enum class IntRule : uint8_t { kAny, kPowerOfTwo, kMultipleOf64 };

// One key of a group: its name and how to read it into the config.
struct Field {
  const char* key;
  std::function<Status(const Setting&, const std::string& path)> read;
};

// Keys that must be present, as (group, key).
constexpr std::pair<const char*, const char*> kRequired[] = {
    {"port", "device"}, {"port", "ipv4"}, {"control", "token_file"}};

constexpr const char* kGroupNames = "eal, port, dataplane, control or telemetry";

class Parser {
 public:
  Parser(std::string name, std::map<const Setting*, std::string> overflows, AggConfig* out)
      : name_(std::move(name)), overflows_(std::move(overflows)), out_(out) {}

  Status parse(const Setting& root) {
    const std::map<std::string, std::vector<Field>> groups = {{"eal", eal_fields()},
                                                              {"port", port_fields()},
                                                              {"dataplane", dataplane_fields()},
                                                              {"control", control_fields()},
                                                              {"telemetry", telemetry_fields()}};
    for (int i = 0; i < root.getLength(); ++i) {
      const Setting& group = root[i];
      const std::string group_name = group.getName();
      const auto it = groups.find(group_name);
      if (it == groups.end()) {
        return error(group, group_name, std::string("unknown group (expected ") + kGroupNames + ")");
      }
      if (!group.isGroup()) return type_error(group, group_name, "a group");
      out_->key_lines[group_name] = line_of(group);
      SUMCAST_RETURN_IF_ERROR(read_group(group, group_name, it->second));
    }
    for (const auto& [group, key] : kRequired) {
      const std::string path = std::string(group) + "." + key;
      if (out_->key_lines.count(path) != 0) continue;
      const auto group_line = out_->key_lines.find(group);
      const int line = group_line == out_->key_lines.end() ? 0 : group_line->second;
      return detail::located_error(StatusCode::kInvalidArgument, name_, line, path, "required key is missing");
    }
    return {};
  }

 private:
  static int line_of(const Setting& s) { return static_cast<int>(s.getSourceLine()); }

  Status error(const Setting& s, const std::string& path, std::string_view what) const {
    return detail::located_error(StatusCode::kInvalidArgument, name_, line_of(s), path, what);
  }

  Status type_error(const Setting& s, const std::string& path, const char* expected) const {
    return error(s, path, std::string("expected ") + expected + ", got " + type_name(s.getType()));
  }

  Status read_group(const Setting& group, const std::string& group_name, const std::vector<Field>& fields) {
    for (int i = 0; i < group.getLength(); ++i) {
      const Setting& s = group[i];
      const std::string path = group_name + "." + s.getName();
      const Field* field = nullptr;
      for (const Field& f : fields) {
        if (f.key == std::string_view(s.getName())) field = &f;
      }
      if (field == nullptr) return error(s, path, "unknown key");
      out_->key_lines[path] = line_of(s);
      SUMCAST_RETURN_IF_ERROR(field->read(s, path));
    }
    return {};
  }

  Status read_int(const Setting& s, const std::string& path, int64_t lo, int64_t hi, int64_t* value) const {
    // Every range in agg.conf lies within 32 bits, so a literal libconfig truncated is out of it.
    if (const auto it = overflows_.find(&s); it != overflows_.end()) {
      return error(s, path, it->second + " is out of range " + range_text(lo, hi));
    }
    if (s.getType() == Setting::TypeInt) {
      *value = static_cast<int>(s);
    } else if (s.getType() == Setting::TypeInt64) {
      *value = static_cast<long long>(s);
    } else {
      return type_error(s, path, "an integer");
    }
    if (*value < lo || *value > hi) {
      return error(s, path, std::to_string(*value) + " is out of range " + range_text(lo, hi));
    }
    return {};
  }

  template <typename T>
  Field int_field(const char* key, T* dst, int64_t lo, int64_t hi, IntRule rule = IntRule::kAny) {
    return {key, [this, dst, lo, hi, rule](const Setting& s, const std::string& path) -> Status {
              int64_t value = 0;
              SUMCAST_RETURN_IF_ERROR(read_int(s, path, lo, hi, &value));
              if (rule == IntRule::kPowerOfTwo && (value & (value - 1)) != 0) {
                return error(s, path, std::to_string(value) + " is not a power of two");
              }
              if (rule == IntRule::kMultipleOf64 && value % 64 != 0) {
                return error(s, path, std::to_string(value) + " is not a multiple of 64");
              }
              *dst = static_cast<T>(value);
              return {};
            }};
  }

  Status read_string(const Setting& s, const std::string& path, std::string* dst) const {
    if (s.getType() != Setting::TypeString) return type_error(s, path, "a string");
    *dst = s.c_str();
    return {};
  }

  // `non_empty`: "" is an error. `no_slash`: '/' is an error (file names).
  Field string_field(const char* key, std::string* dst, bool non_empty, bool no_slash = false) {
    return {key, [this, dst, non_empty, no_slash](const Setting& s, const std::string& path) -> Status {
              std::string value;
              SUMCAST_RETURN_IF_ERROR(read_string(s, path, &value));
              if (non_empty && value.empty()) return error(s, path, "must not be empty");
              if (no_slash && value.find('/') != std::string::npos) {
                return error(s, path, in_quotes(value) + " must not contain '/'");
              }
              *dst = std::move(value);
              return {};
            }};
  }

  // A string key that stands for a typed value: `store` converts the text and stores it, or returns
  // what is wrong with it (the message after the key). "" is an error unless `allow_empty`; then
  // it leaves the default (unset) in place.
  using Store = std::function<std::optional<std::string>(const std::string& text)>;
  Field typed_field(const char* key, bool allow_empty, Store store) {
    return {key, [this, allow_empty, store = std::move(store)](const Setting& s, const std::string& path) -> Status {
              std::string value;
              SUMCAST_RETURN_IF_ERROR(read_string(s, path, &value));
              if (value.empty()) return allow_empty ? Status() : error(s, path, "must not be empty");
              if (const std::optional<std::string> wrong = store(value)) return error(s, path, *wrong);
              return {};
            }};
  }

  // A dotted quad, into `dst` (a uint32_t or an optional one).
  template <typename T>
  Field ipv4_field(const char* key, T* dst, bool allow_empty) {
    return typed_field(key, allow_empty, [dst](const std::string& text) -> std::optional<std::string> {
      const std::optional<uint32_t> address = detail::parse_ipv4(text);
      if (!address) return in_quotes(text) + " is not a dotted-quad IPv4 address";
      *dst = *address;
      return std::nullopt;
    });
  }

  // port.mac: a unicast address the port can take as its own.
  Field mac_field(const char* key, std::optional<MacAddress>* dst) {
    return typed_field(key, true, [dst](const std::string& text) -> std::optional<std::string> {
      const std::optional<MacAddress> mac = parse_mac(text);
      if (!mac) return in_quotes(text) + " is not a MAC address (aa:bb:cc:dd:ee:ff)";
      if (((*mac)[0] & 0x01) != 0) return text + " is a multicast address";
      if (*mac == MacAddress{}) return text + " is all zeros";
      *dst = *mac;
      return std::nullopt;
    });
  }

  Field bool_field(const char* key, bool* dst) {
    return {key, [this, dst](const Setting& s, const std::string& path) -> Status {
              if (s.getType() != Setting::TypeBoolean) return type_error(s, path, "a boolean");
              *dst = static_cast<bool>(s);
              return {};
            }};
  }

  // A list ( ... ) or array [ ... ] of non-empty strings; `lines` gets each element's line.
  Status read_string_list(const Setting& s, const std::string& path, std::vector<std::string>* dst,
                          std::vector<int>* lines = nullptr) const {
    if (!s.isArray() && !s.isList()) return type_error(s, path, "a list of strings");
    std::vector<std::string> values;
    for (int i = 0; i < s.getLength(); ++i) {
      const Setting& element = s[i];
      const std::string element_path = path + "[" + std::to_string(i) + "]";
      std::string value;
      SUMCAST_RETURN_IF_ERROR(read_string(element, element_path, &value));
      if (value.empty()) return error(element, element_path, "must not be empty");
      values.push_back(std::move(value));
      if (lines != nullptr) lines->push_back(line_of(element));
    }
    *dst = std::move(values);
    return {};
  }

  Field string_list_field(const char* key, std::vector<std::string>* dst) {
    return {key, [this, dst](const Setting& s, const std::string& path) { return read_string_list(s, path, dst); }};
  }

  std::vector<Field> eal_fields() {
    EalConfig& eal = out_->eal;
    return {
        string_field("lcores", &eal.lcores, true),
        string_field("file_prefix", &eal.file_prefix, true, true),
        int_field("memory_mb", &eal.memory_mb, 64, 1048576),
        {"huge_pages",
         [this, &eal](const Setting& s, const std::string& path) -> Status {
           std::string value;
           SUMCAST_RETURN_IF_ERROR(read_string(s, path, &value));
           if (value == "auto") {
             eal.huge_pages = HugePages::kAuto;
           } else if (value == "on") {
             eal.huge_pages = HugePages::kOn;
           } else if (value == "off") {
             eal.huge_pages = HugePages::kOff;
           } else {
             return error(s, path, in_quotes(value) + " is not one of \"auto\", \"on\", \"off\"");
           }
           return {};
         }},
        string_list_field("vdevs", &eal.vdevs),
        string_list_field("allow", &eal.allow),
        string_list_field("extra_args", &eal.extra_args),
    };
  }

  std::vector<Field> port_fields() {
    PortConfig& port = out_->port;
    return {
        string_field("device", &port.device, true),
        mac_field("mac", &port.mac),
        ipv4_field("ipv4", &port.ipv4, false),
        int_field("prefix_len", &port.prefix_len, 0, 32),
        ipv4_field("gateway", &port.gateway, true),
        {"routes", [this, &port](const Setting& s, const std::string& path) { return read_routes(s, path, &port); }},
        int_field("arp_refresh_ms", &port.arp_refresh_ms, 1000, 3600000),
        int_field("dscp", &port.dscp, 0, 63),
        bool_field("ecn", &port.ecn),
        int_field("cnp_interval_us", &port.cnp_interval_us, 0, 1000000),
        int_field("mtu", &port.mtu, 576, 9216),
        int_field("rx_desc", &port.rx_desc, 64, 16384, IntRule::kPowerOfTwo),
        int_field("tx_desc", &port.tx_desc, 64, 16384, IntRule::kPowerOfTwo),
    };
  }

  std::vector<Field> dataplane_fields() {
    DataplaneConfig& dp = out_->dataplane;
    return {
        int_field("worker_cores", &dp.worker_cores, 1, 64),
        int_field("burst_size", &dp.burst_size, 1, 512),
        int_field("tx_coalesce", &dp.tx_coalesce, 0, 32),
        int_field("slots_per_job", &dp.slots_per_job, 1, 65535),
        int_field("max_jobs", &dp.max_jobs, 1, 4096),
        int_field("max_ranks", &dp.max_ranks, 2, 4096),
        int_field("max_payload_bytes", &dp.max_payload_bytes, 64, static_cast<int64_t>(wire::kMaxPayloadBytes),
                  IntRule::kMultipleOf64),
        {"dtypes", [this, &dp](const Setting& s, const std::string& path) { return read_dtypes(s, path, &dp.dtypes); }},
        bool_field("verify_icrc", &dp.verify_icrc),
        bool_field("udp_checksum", &dp.udp_checksum),
        bool_field("multicast", &dp.multicast),
        ipv4_field("multicast_group", &dp.multicast_group, false),
        bool_field("loss_notices", &dp.loss_notices),
        int_field("mbufs", &dp.mbufs, 1023, 1048575),
        {"idle_poll",
         [this, &dp](const Setting& s, const std::string& path) -> Status {
           std::string value;
           SUMCAST_RETURN_IF_ERROR(read_string(s, path, &value));
           if (value != "busy" && value != "adaptive") {
             return error(s, path, in_quotes(value) + " is not one of \"busy\", \"adaptive\"");
           }
           dp.idle_adaptive = value == "adaptive";
           return {};
         }},
        int_field("idle_sleep_us", &dp.idle_sleep_us, 1, 10000),
        int_field("idle_after_us", &dp.idle_after_us, 0, 1000000),
    };
  }

  // port.routes: each "a.b.c.d/len via a.b.c.d"; each element's line goes into key_lines
  // ("port.routes[i]") for the validator's messages about its gateway.
  Status read_routes(const Setting& s, const std::string& path, PortConfig* port) {
    std::vector<std::string> texts;
    std::vector<int> lines;
    SUMCAST_RETURN_IF_ERROR(read_string_list(s, path, &texts, &lines));
    std::vector<RouteConfig> routes;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string element_path = path + "[" + std::to_string(i) + "]";
      out_->key_lines[element_path] = lines[i];
      const std::string& t = texts[i];
      const auto bad = [&](const std::string& what) {
        return detail::located_error(StatusCode::kInvalidArgument, name_, lines[i], element_path,
                                     in_quotes(t) + " " + what);
      };
      const size_t slash = t.find('/');
      const size_t via = t.find(" via ");
      if (slash == std::string::npos || via == std::string::npos || via < slash) {
        return bad("is not \"prefix/len via gateway\" (e.g. \"10.78.0.0/16 via 10.79.0.254\")");
      }
      RouteConfig r;
      r.text = t;
      const std::optional<uint32_t> prefix = detail::parse_ipv4(t.substr(0, slash));
      if (!prefix) return bad("has no dotted-quad prefix before '/'");
      const std::string len = t.substr(slash + 1, via - slash - 1);
      if (len.empty() || len.size() > 2 || len.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(len) > 32) {
        return bad("has a prefix length that is not 0..32");
      }
      r.len = static_cast<uint8_t>(std::stoi(len));
      const uint32_t mask = r.len == 0 ? 0 : ~uint32_t{0} << (32 - r.len);
      if ((*prefix & ~mask) != 0)
        return bad("has host bits set in its prefix (the network is " + detail::format_ipv4(*prefix & mask) + "/" +
                   len + ")");
      r.prefix = *prefix;
      const std::optional<uint32_t> gw = detail::parse_ipv4(t.substr(via + 5));
      if (!gw) return bad("has no dotted-quad gateway after \"via\"");
      r.via = *gw;
      routes.push_back(std::move(r));
    }
    port->routes = std::move(routes);
    return {};
  }

  Status read_dtypes(const Setting& s, const std::string& path, std::vector<wire::Dtype>* dst) const {
    std::vector<std::string> names;
    std::vector<int> lines;
    SUMCAST_RETURN_IF_ERROR(read_string_list(s, path, &names, &lines));
    if (names.empty()) return error(s, path, "must list at least one dtype");
    std::string known;
    for (int d = 0; d < wire::kDtypeCount; ++d) {
      known += std::string(d == 0 ? "" : ", ") + wire::dtype_name(static_cast<wire::Dtype>(d));
    }
    std::vector<wire::Dtype> dtypes;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string element_path = path + "[" + std::to_string(i) + "]";
      bool is_known = false;
      for (int d = 0; d < wire::kDtypeCount && !is_known; ++d) {
        is_known = names[i] == wire::dtype_name(static_cast<wire::Dtype>(d));
        if (is_known) dtypes.push_back(static_cast<wire::Dtype>(d));
      }
      if (!is_known) {
        return detail::located_error(StatusCode::kInvalidArgument, name_, lines[i], element_path,
                                     in_quotes(names[i]) + " is not a dtype (" + known + ")");
      }
      for (size_t j = 0; j < i; ++j) {
        if (names[j] == names[i]) {
          return detail::located_error(StatusCode::kInvalidArgument, name_, lines[i], element_path,
                                       in_quotes(names[i]) + " is listed twice");
        }
      }
    }
    *dst = std::move(dtypes);
    return {};
  }

  std::vector<Field> control_fields() {
    ControlConfig& control = out_->control;
    return {
        ipv4_field("listen_address", &control.listen_address, false),
        int_field("port", &control.port, 1, 65535),
        string_field("token_file", &control.token_file, true),
        int_field("max_connections", &control.max_connections, 1, 65536),
        int_field("job_timeout_ms", &control.job_timeout_ms, 100, 3600000),
        int_field("register_timeout_ms", &control.register_timeout_ms, 100, 3600000),
        int_field("io_timeout_ms", &control.io_timeout_ms, 10, 600000),
    };
  }

  std::vector<Field> telemetry_fields() {
    TelemetryConfig& telemetry = out_->telemetry;
    return {
        bool_field("dpdk_telemetry", &telemetry.dpdk_telemetry),
        typed_field("prometheus_address", true,
                    [&telemetry](const std::string& text) -> std::optional<std::string> {
                      telemetry.prometheus_address = detail::parse_host_port(text);
                      if (telemetry.prometheus_address) return std::nullopt;
                      return in_quotes(text) + " is not \"ip:port\" (dotted quad, port 1..65535) or \"\"";
                    }),
        int_field("stats_interval_ms", &telemetry.stats_interval_ms, 0, 3600000),
    };
  }

  std::string name_;
  std::map<const Setting*, std::string> overflows_;
  AggConfig* out_;
};

// Every TypeInt setting in document order (libconfig keeps the order of the text).
void collect_int_settings(const Setting& s, std::vector<const Setting*>* out) {
  if (s.getType() == Setting::TypeInt) out->push_back(&s);
  if (s.isAggregate()) {
    for (int i = 0; i < s.getLength(); ++i) collect_int_settings(s[i], out);
  }
}

// Pairs the lexer's plain integer literals with libconfig's TypeInt settings and returns the
// settings whose literal overflowed 32 bits (libconfig kept a truncated value), with the text.
// When the two lists disagree in length the lexer misread something: then nothing is reported.
std::map<const Setting*, std::string> find_overflows(const Setting& root, const detail::LiteralScan& scan) {
  std::vector<const Setting*> settings;
  collect_int_settings(root, &settings);
  std::map<const Setting*, std::string> overflows;
  if (settings.size() != scan.ints.size()) return overflows;
  for (size_t i = 0; i < settings.size(); ++i) {
    if (scan.ints[i].overflows) overflows.emplace(settings[i], scan.ints[i].text);
  }
  return overflows;
}

}  // namespace

std::string Ipv4Endpoint::text() const { return format_ipv4(address) + ":" + std::to_string(port); }

std::vector<std::string> dtype_names(const std::vector<wire::Dtype>& dtypes) {
  std::vector<std::string> names;
  names.reserve(dtypes.size());
  for (const wire::Dtype d : dtypes) names.emplace_back(wire::dtype_name(d));
  return names;
}

Result<AggConfig> parse_agg_config(const std::string& text, const std::string& name) {
  const detail::LiteralScan scan = detail::scan_literals(text);
  if (scan.include_line != 0) {
    return detail::located_error(StatusCode::kInvalidArgument, name, scan.include_line, "@include",
                                 "not supported (agg.conf is a single file)");
  }
  AggConfig config;
  config.path = name;
  try {
    libconfig::Config parsed;
    try {
      parsed.readString(text);
    } catch (const libconfig::ParseException& e) {
      return detail::located_error(StatusCode::kInvalidArgument, name, e.getLine(), "", e.getError());
    }
    const Setting& root = parsed.getRoot();
    Parser parser(name, find_overflows(root, scan), &config);
    SUMCAST_RETURN_IF_ERROR(parser.parse(root));
  } catch (const libconfig::ConfigException& e) {  // not expected: every access is type-checked
    return Status::internal(name + ": libconfig: " + e.what());
  }
  return config;
}

Result<AggConfig> load_agg_config(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    return detail::located_error(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError, path, 0, "",
                                 std::string("cannot read: ") + std::strerror(err));
  }
  std::string text;
  char buffer[8192];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  const int err = std::ferror(file) != 0 ? errno : 0;
  std::fclose(file);
  if (err != 0) {
    return detail::located_error(StatusCode::kIoError, path, 0, "", std::string("cannot read: ") + std::strerror(err));
  }
  Result<AggConfig> config = parse_agg_config(text, path);
  if (!config.ok()) return config;
  const std::filesystem::path token(config->control.token_file);
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (token.is_relative() && !dir.empty()) config->control.token_file = (dir / token).string();
  return config;
}

}  // namespace sumcast::config
