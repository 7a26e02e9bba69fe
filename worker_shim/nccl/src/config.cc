#include "config.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "sumcast/shim/address.h"
#include "sumcast/token_file.h"

namespace sumcast::nccl {
namespace {

enum class Kind { kIfNames, kAppliances, kString, kTokenFile, kU32 };

struct Key {
  const char* name;
  Kind kind;
  uint32_t min;
  uint32_t max;
  const char* doc;
};

// The one table of settings (docs/nccl.md lists the same).
constexpr Key kKeys[] = {
    {"SUMCAST_NCCL_IFNAME", Kind::kIfNames, 0, 0, "interfaces for ncclNet/CollNet: prefixes, ^exclude, =exact"},
    {"SUMCAST_APPLIANCES", Kind::kAppliances, 0, 0, "host:port[@weight],... of the appliances' control servers"},
    {"SUMCAST_TOKEN", Kind::kString, 0, 0, "the appliances' shared secret"},
    {"SUMCAST_TOKEN_FILE", Kind::kTokenFile, 0, 0, "file whose first line is the shared secret"},
    {"SUMCAST_BIND_IP", Kind::kString, 0, 0, "local IPv4 of the all-reduce data socket"},
    {"SUMCAST_PAYLOAD_BYTES", Kind::kU32, 8, 4096, "payload bytes per packet wanted"},
    {"SUMCAST_SLOTS", Kind::kU32, 0, 65535, "window slots per appliance (0: appliance default)"},
    {"SUMCAST_MULTICAST", Kind::kU32, 0, 1, "1: ask for results by IPv4 multicast (the appliance must allow it)"},
    {"SUMCAST_RTO_US", Kind::kU32, 100, 10000000, "first retransmission timeout"},
    {"SUMCAST_BUSY_POLL_US", Kind::kU32, 0, 1000000, "SO_BUSY_POLL of the data sockets, microseconds (0: off)"},
    {"SUMCAST_UDP_GRO", Kind::kU32, 0, 1, "1: receive coalesced results (UDP_GRO) where the kernel allows it; 0: off"},
    {"SUMCAST_UDP_GSO", Kind::kU32, 0, 1, "1: send UDP_SEGMENT trains (segment k with IP ID k); 0: off"},
    {"SUMCAST_SEND_QUEUE_US", Kind::kU32, 0, 1000000,
     "new chunks wait while more than this many us of the result rate are queued below the socket (0: off)"},
    {"SUMCAST_LOSS_NOTICES", Kind::kU32, 0, 1, "1: ask the appliances for loss notices (docs/protocol.md §7); 0: off"},
    {"SUMCAST_DSCP", Kind::kU32, 0, 63, "DSCP of the contributions, for a fabric that classifies RoCE by it"},
    {"SUMCAST_ECN", Kind::kU32, 0, 1, "1: mark the contributions ECT(0); 0: not-ECT"},
    {"SUMCAST_REPAIR_DSCP", Kind::kU32, 0, 63, "DSCP of resends (retransmissions, probes); unset: SUMCAST_DSCP"},
    {"SUMCAST_CNP_REACTION", Kind::kU32, 0, 1, "1: a CNP from an appliance cuts the window toward it (UDP)"},
    {"SUMCAST_WINDOW_CUT", Kind::kU32, 1, 99, "percent of the window a CNP leaves (at least one slot)"},
    {"SUMCAST_WINDOW_STEP", Kind::kU32, 1, 65535, "slots regrown per window of results without a CNP"},
    {"SUMCAST_OP_TIMEOUT_MS", Kind::kU32, 0, 3600000, "no result this long fails the call (0: never)"},
    {"SUMCAST_REGISTER_TIMEOUT_MS", Kind::kU32, 100, 3600000, "all nodes must register within"},
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) {
    if (!cur.empty()) out.push_back(cur);
  }
  return out;
}

Status apply(const Key& key, const std::string& value, PluginConfig* c) {
  const std::string where = std::string(key.name) + "=" + value + ": ";
  switch (key.kind) {
    case Kind::kIfNames: {
      std::string v = value;
      c->if_exclude = !v.empty() && v[0] == '^';
      if (c->if_exclude) v.erase(0, 1);
      c->if_exact = !v.empty() && v[0] == '=';
      if (c->if_exact) v.erase(0, 1);
      c->if_names = split(v, ',');
      return Status();
    }
    case Kind::kAppliances: {
      c->appliances.clear();
      for (const std::string& item : split(value, ',')) {
        shim::ApplianceAddress a;
        SUMCAST_RETURN_IF_ERROR(shim::split_weight(item, &a.address, &a.weight));
        auto hp = shim::parse_host_port(a.address);
        if (!hp.ok()) return Status::invalid_argument(where + hp.status().message());
        c->appliances.push_back(a);
      }
      return Status();
    }
    case Kind::kString:
      if (std::string(key.name) == "SUMCAST_TOKEN") c->token = value;
      if (std::string(key.name) == "SUMCAST_BIND_IP") {
        auto ip = shim::parse_ipv4(value);
        if (!ip.ok()) return Status::invalid_argument(where + ip.status().message());
        c->bind_ip = value;
      }
      return Status();
    case Kind::kTokenFile: {
      Result<std::string> token = read_token_file(value);
      if (!token.ok()) return Status(token.status().code(), where + token.status().message());
      c->token = std::move(token.value());
      return Status();
    }
    case Kind::kU32: {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < key.min || v > key.max) {
        return Status::invalid_argument(where + "want an integer in " + std::to_string(key.min) + ".." +
                                        std::to_string(key.max) + " (" + key.doc + ")");
      }
      const std::string n = key.name;
      const auto u = static_cast<uint32_t>(v);
      if (n == "SUMCAST_PAYLOAD_BYTES") {
        c->payload_bytes = u;
        c->payload_explicit = true;
      }
      if (n == "SUMCAST_SLOTS") c->slots = u;
      if (n == "SUMCAST_MULTICAST") c->multicast = u != 0;
      if (n == "SUMCAST_RTO_US") c->rto_us = u;
      if (n == "SUMCAST_BUSY_POLL_US") c->busy_poll_us = u;
      if (n == "SUMCAST_UDP_GRO") c->udp_gro = u != 0;
      if (n == "SUMCAST_UDP_GSO") c->udp_gso = u != 0;
      if (n == "SUMCAST_SEND_QUEUE_US") c->send_queue_us = u;
      if (n == "SUMCAST_LOSS_NOTICES") c->loss_notices = u != 0;
      if (n == "SUMCAST_DSCP") c->dscp = static_cast<uint8_t>(u);
      if (n == "SUMCAST_ECN") c->ecn = u != 0;
      if (n == "SUMCAST_REPAIR_DSCP") c->repair_dscp = static_cast<int>(u);
      if (n == "SUMCAST_CNP_REACTION") c->cnp_reaction = u != 0;
      if (n == "SUMCAST_WINDOW_CUT") c->window_cut_percent = u;
      if (n == "SUMCAST_WINDOW_STEP") c->window_step = u;
      if (n == "SUMCAST_OP_TIMEOUT_MS") c->op_timeout_ms = u;
      if (n == "SUMCAST_REGISTER_TIMEOUT_MS") c->register_timeout_ms = u;
      return Status();
    }
  }
  return Status::internal(where + "unknown kind");
}

}  // namespace

Result<PluginConfig> load_config(const std::function<const char*(const char*)>& get) {
  std::map<std::string, std::string> values;
  std::string source = "environment";
  const char* file_env = get("SUMCAST_NCCL_CONF");
  const std::string file = file_env != nullptr ? file_env : "/etc/sumcast/nccl.conf";
  std::ifstream in(file);
  if (in) {
    source += " and " + file;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      const size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos || line[start] == '#') continue;
      const size_t eq = line.find('=');
      const std::string where = file + ":" + std::to_string(lineno) + ": ";
      if (eq == std::string::npos) return Status::invalid_argument(where + "want KEY=VALUE");
      std::string k = line.substr(start, eq - start);
      while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
      bool known = false;
      for (const Key& key : kKeys) known |= k == key.name;
      if (!known) return Status::invalid_argument(where + "unknown key " + k);
      values[k] = line.substr(eq + 1);
    }
  } else if (file_env != nullptr) {
    return Status::not_found("SUMCAST_NCCL_CONF=" + file + ": cannot open it");
  }
  for (const Key& key : kKeys) {
    const char* v = get(key.name);
    if (v != nullptr) values[key.name] = v;
  }
  if (values.count("SUMCAST_NCCL_IFNAME") == 0) {
    const char* nccl_if = get("NCCL_SOCKET_IFNAME");
    if (nccl_if != nullptr) values["SUMCAST_NCCL_IFNAME"] = nccl_if;
  }
  // NCCL_IB_TC, the traffic class (IP TOS byte) of NCCL's own RoCE traffic, marks the
  // contributions where neither SUMCAST_DSCP nor SUMCAST_ECN is set. Read as NCCL reads it
  // (strtoll, base 0: 106, 0x6a); -1 is NCCL's "unset".
  const char* ib_tc = get("NCCL_IB_TC");
  if (ib_tc != nullptr && *ib_tc != '\0' && values.count("SUMCAST_DSCP") == 0 && values.count("SUMCAST_ECN") == 0) {
    char* end = nullptr;
    errno = 0;
    const long long tc = std::strtoll(ib_tc, &end, 0);
    if (errno != 0 || *end != '\0' || tc < -1 || tc > 255) {
      return Status::invalid_argument(std::string("NCCL_IB_TC=") + ib_tc +
                                      ": want a traffic class in 0..255 or -1 (its DSCP and ECN bits mark the "
                                      "contributions where SUMCAST_DSCP and SUMCAST_ECN are unset)");
    }
    if (tc >= 0) {
      values["SUMCAST_DSCP"] = std::to_string(traffic_class_dscp(static_cast<int>(tc)));
      values["SUMCAST_ECN"] = traffic_class_ecn(static_cast<int>(tc)) ? "1" : "0";
      source += "; DSCP and ECN from NCCL_IB_TC=" + std::string(ib_tc);
    }
  }
  PluginConfig c;
  c.source = source;
  for (const Key& key : kKeys) {  // table order: SUMCAST_TOKEN_FILE overrides SUMCAST_TOKEN
    auto it = values.find(key.name);
    if (it != values.end()) SUMCAST_RETURN_IF_ERROR(apply(key, it->second, &c));
  }
  return c;
}

Result<const PluginConfig*> plugin_config() {
  static std::once_flag once;
  static Result<PluginConfig> loaded = Status::internal("not loaded");
  std::call_once(once, [] { loaded = load_config([](const char* k) { return std::getenv(k); }); });
  if (!loaded.ok()) return loaded.status();
  return &loaded.value();
}

}  // namespace sumcast::nccl
