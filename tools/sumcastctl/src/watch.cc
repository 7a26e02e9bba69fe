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

const Json* job_by_id(const Json& jobs, uint64_t id) {
  for (const auto& [key, j] : jobs.items()) {
    if (key.rfind("job", 0) == 0 && j.is_object() && uint_at(j, "job_id") == id && find(j, "job_id") != nullptr) {
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

std::vector<RateRow> object_rates(const Json& before, const Json& after, double seconds) {
  std::vector<RateRow> rows;
  for (const auto& [key, v] : after.items()) {
    if (!v.is_number()) continue;
    RateRow r;
    r.name = key;
    r.value = as_uint(v);
    if (const Json* b = find(before, key); b != nullptr && b->is_number()) {
      r.per_second = counter_rate(as_uint(*b), r.value, seconds);
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
    static const Json kEmpty = Json::object();
    const Json& b = i < before.cores.size() ? before.cores[i] : kEmpty;
    const Json& a = after.cores[i];
    CoreRates c;
    c.core = uint_at(a, "core");
    c.lcore = uint_at(a, "lcore");
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
  for (const auto& [key, j] : after.jobs.items()) {
    if (key.rfind("job", 0) != 0 || !j.is_object()) continue;
    JobRates r;
    r.job_id = uint_at(j, "job_id");
    if (const Json* n = find(j, "name"); n != nullptr) r.name = n->get_ref<const std::string&>();
    r.world_size = uint_at(j, "world_size");
    r.registered = uint_at(j, "registered");
    r.running = uint_at(j, "running") != 0;
    r.slots_completed = uint_at(j, "slots_completed");
    r.ms_since_progress = uint_at(j, "ms_since_progress");
    // Registering jobs have no id yet (0): no rate.
    if (const Json* b = r.job_id != 0 ? job_by_id(before.jobs, r.job_id) : nullptr; b != nullptr) {
      r.slots_ps = counter_rate(uint_at(*b, "slots_completed"), r.slots_completed, w.seconds);
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

Json watch_json(const WatchRates& w) {
  auto core_json = [](const CoreRates& c, bool with_ids) {
    Json m = Json::object();
    if (with_ids) {
      m["core"] = c.core;
      m["lcore"] = c.lcore;
    }
    m["rx_pps"] = c.rx_pps;
    m["tx_pps"] = c.tx_pps;
    m["contributions_ps"] = c.contributions_ps;
    m["summed_gbps"] = c.summed_gbps;
    m["slots_ps"] = c.slots_ps;
    m["drops_ps"] = c.drops_ps;
    return m;
  };
  std::vector<Json> cores;
  for (const CoreRates& c : w.cores) cores.push_back(core_json(c, true));
  Json drops = Json::object();
  for (const auto& [reason, rate] : w.drops_ps) drops[reason] = rate;
  std::vector<Json> jobs;
  for (const JobRates& j : w.jobs) {
    jobs.push_back(Json::object({
        {"job_id", Json(j.job_id)},
        {"name", Json(j.name)},
        {"world_size", Json(j.world_size)},
        {"registered", Json(j.registered)},
        {"running", Json(j.running)},
        {"slots_completed", Json(j.slots_completed)},
        {"slots_ps", j.slots_ps ? Json(*j.slots_ps) : Json()},
        {"ms_since_progress", Json(j.ms_since_progress)},
    }));
  }
  return Json::object({
      {"seconds", Json(w.seconds)},
      {"cores", std::move(cores)},
      {"total", core_json(w.total, false)},
      {"drops_ps", std::move(drops)},
      {"jobs", std::move(jobs)},
  });
}

}  // namespace sumcast::ctl
