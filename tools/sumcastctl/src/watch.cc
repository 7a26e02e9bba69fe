#include "sumcast/ctl/watch.h"

#include <cinttypes>
#include <cstdio>

namespace sumcast::ctl {
namespace {

// Rates with SI suffixes so that columns stay narrow: 950, 12.3k, 4.56M.
std::string human(double v) {
  char buf[32];
  if (v >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2fG", v / 1e9);
  } else if (v >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2fM", v / 1e6);
  } else if (v >= 1e4) {
    std::snprintf(buf, sizeof(buf), "%.1fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  }
  return buf;
}

const JsonValue* job_by_id(const JsonValue& jobs, uint64_t id) {
  for (const auto& [key, j] : jobs.members()) {
    if (key.rfind("job", 0) == 0 && j.is_object() && j.uint_at("job_id") == id && j.find("job_id") != nullptr) {
      return &j;
    }
  }
  return nullptr;
}

}  // namespace

double counter_rate(uint64_t before, uint64_t after, double seconds) {
  if (seconds <= 0) return 0;
  const uint64_t increase = after >= before ? after - before : after;  // a reset restarts from 0
  return static_cast<double>(increase) / seconds;
}

std::vector<RateRow> object_rates(const JsonValue& before, const JsonValue& after, double seconds) {
  std::vector<RateRow> rows;
  for (const auto& [key, v] : after.members()) {
    if (!v.is_number()) continue;
    RateRow r;
    r.name = key;
    r.value = v.as_uint();
    if (const JsonValue* b = before.find(key); b != nullptr && b->is_number()) {
      r.per_second = counter_rate(b->as_uint(), r.value, seconds);
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

WatchRates compute_rates(const Reading& before, const Reading& after) {
  WatchRates w;
  w.seconds = after.seconds - before.seconds;
  std::vector<std::pair<std::string, double>> drops;
  for (size_t i = 0; i < after.cores.size(); ++i) {
    static const JsonValue kEmpty = JsonValue::object({});
    const JsonValue& b = i < before.cores.size() ? before.cores[i] : kEmpty;
    const JsonValue& a = after.cores[i];
    CoreRates c;
    c.core = a.uint_at("core");
    c.lcore = a.uint_at("lcore");
    for (const RateRow& r : object_rates(b, a, w.seconds)) {
      const double ps = r.per_second.value_or(0);
      if (r.name == "rx_packets") {
        c.rx_pps = ps;
      } else if (r.name == "tx_packets") {
        c.tx_pps = ps;
      } else if (r.name == "contributions") {
        c.contributions_ps = ps;
      } else if (r.name == "payload_bytes") {
        c.summed_gbps = ps * 8 / 1e9;
      } else if (r.name == "slots_completed") {
        c.slots_ps = ps;
      } else if (r.name.rfind("drop_", 0) == 0) {
        c.drops_ps += ps;
        const std::string reason = r.name.substr(5);
        bool found = false;
        for (auto& [name, rate] : drops) {
          if (name == reason) {
            rate += ps;
            found = true;
          }
        }
        if (!found) drops.emplace_back(reason, ps);
      }
    }
    w.total.rx_pps += c.rx_pps;
    w.total.tx_pps += c.tx_pps;
    w.total.contributions_ps += c.contributions_ps;
    w.total.summed_gbps += c.summed_gbps;
    w.total.slots_ps += c.slots_ps;
    w.total.drops_ps += c.drops_ps;
    w.cores.push_back(c);
  }
  for (const auto& d : drops) {
    if (d.second > 0) w.drops_ps.push_back(d);
  }
  for (const auto& [key, j] : after.jobs.members()) {
    if (key.rfind("job", 0) != 0 || !j.is_object()) continue;
    JobRates r;
    r.job_id = j.uint_at("job_id");
    if (const JsonValue* n = j.find("name"); n != nullptr) r.name = n->as_string();
    r.world_size = j.uint_at("world_size");
    r.registered = j.uint_at("registered");
    r.running = j.uint_at("running") != 0;
    r.slots_completed = j.uint_at("slots_completed");
    r.ms_since_progress = j.uint_at("ms_since_progress");
    // Registering jobs have no id yet (0): no rate.
    if (const JsonValue* b = r.job_id != 0 ? job_by_id(before.jobs, r.job_id) : nullptr; b != nullptr) {
      r.slots_ps = counter_rate(b->uint_at("slots_completed"), r.slots_completed, w.seconds);
    }
    w.jobs.push_back(std::move(r));
  }
  return w;
}

std::string format_watch(const WatchRates& w, const std::string& title) {
  std::string out = title + "\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%-6s %6s %10s %10s %12s %10s %10s %10s\n", "core", "lcore", "rx pps", "tx pps",
                "contrib/s", "Gbit/s", "slots/s", "drops/s");
  out += line;
  auto row = [&](const std::string& name, const std::string& lcore, const CoreRates& c) {
    std::snprintf(line, sizeof(line), "%-6s %6s %10s %10s %12s %10.3f %10s %10s\n", name.c_str(), lcore.c_str(),
                  human(c.rx_pps).c_str(), human(c.tx_pps).c_str(), human(c.contributions_ps).c_str(), c.summed_gbps,
                  human(c.slots_ps).c_str(), human(c.drops_ps).c_str());
    out += line;
  };
  for (const CoreRates& c : w.cores) row(std::to_string(c.core), std::to_string(c.lcore), c);
  if (w.cores.size() > 1) row("total", "", w.total);
  if (w.drops_ps.empty()) {
    out += "drops: none\n";
  } else {
    out += "drops/s by reason:";
    for (const auto& [reason, rate] : w.drops_ps) out += " " + reason + " " + human(rate);
    out += "\n";
  }
  if (w.jobs.empty()) {
    out += "jobs: none\n";
    return out;
  }
  std::snprintf(line, sizeof(line), "%8s  %-20s %7s %8s %16s %10s %18s\n", "job_id", "name", "ranks", "running",
                "slots_completed", "slots/s", "ms_since_progress");
  out += line;
  for (const JobRates& j : w.jobs) {
    const std::string ranks = std::to_string(j.registered) + "/" + std::to_string(j.world_size);
    std::snprintf(line, sizeof(line), "%8" PRIu64 "  %-20s %7s %8s %16" PRIu64 " %10s %18" PRIu64 "\n", j.job_id,
                  j.name.c_str(), ranks.c_str(), j.running ? "yes" : "no", j.slots_completed,
                  j.slots_ps ? human(*j.slots_ps).c_str() : "-", j.ms_since_progress);
    out += line;
  }
  return out;
}

JsonValue watch_json(const WatchRates& w) {
  auto core_json = [](const CoreRates& c, bool with_ids) {
    std::vector<std::pair<std::string, JsonValue>> m;
    if (with_ids) {
      m.emplace_back("core", JsonValue::unsigned_integer(c.core));
      m.emplace_back("lcore", JsonValue::unsigned_integer(c.lcore));
    }
    m.emplace_back("rx_pps", JsonValue::number(c.rx_pps));
    m.emplace_back("tx_pps", JsonValue::number(c.tx_pps));
    m.emplace_back("contributions_ps", JsonValue::number(c.contributions_ps));
    m.emplace_back("summed_gbps", JsonValue::number(c.summed_gbps));
    m.emplace_back("slots_ps", JsonValue::number(c.slots_ps));
    m.emplace_back("drops_ps", JsonValue::number(c.drops_ps));
    return JsonValue::object(std::move(m));
  };
  std::vector<JsonValue> cores;
  for (const CoreRates& c : w.cores) cores.push_back(core_json(c, true));
  std::vector<std::pair<std::string, JsonValue>> drops;
  for (const auto& [reason, rate] : w.drops_ps) drops.emplace_back(reason, JsonValue::number(rate));
  std::vector<JsonValue> jobs;
  for (const JobRates& j : w.jobs) {
    jobs.push_back(JsonValue::object({
        {"job_id", JsonValue::unsigned_integer(j.job_id)},
        {"name", JsonValue::string(j.name)},
        {"world_size", JsonValue::unsigned_integer(j.world_size)},
        {"registered", JsonValue::unsigned_integer(j.registered)},
        {"running", JsonValue::boolean(j.running)},
        {"slots_completed", JsonValue::unsigned_integer(j.slots_completed)},
        {"slots_ps", j.slots_ps ? JsonValue::number(*j.slots_ps) : JsonValue()},
        {"ms_since_progress", JsonValue::unsigned_integer(j.ms_since_progress)},
    }));
  }
  return JsonValue::object({
      {"seconds", JsonValue::number(w.seconds)},
      {"cores", JsonValue::array(std::move(cores))},
      {"total", core_json(w.total, false)},
      {"drops_ps", JsonValue::object(std::move(drops))},
      {"jobs", JsonValue::array(std::move(jobs))},
  });
}

}  // namespace sumcast::ctl
