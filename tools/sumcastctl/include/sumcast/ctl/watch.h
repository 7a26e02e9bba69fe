// `sumcastctl stats --watch`: rates from two successive reads of a running sumcastd, and the
// terminal frame that shows them (per core, in total, drops by reason, per job).
//
// A Reading is what one refresh reads: /sumcast/stats,<i> for every core, /sumcast/jobs, and when.
// Rates are (after - before) / seconds; a counter that went down (sumcastd restarted, a job
// re-created under the same id) restarted from zero, so its increase is its new value, as
// Prometheus' rate() counts resets. A job absent from the earlier reading has no rate yet.
//
// Thread safety: values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sumcast/ctl/json.h"

namespace sumcast::ctl {

struct Reading {
  double seconds = 0;       // monotonic clock at the read
  std::vector<Json> cores;  // /sumcast/stats,<i> replies: {"core", "lcore", counters...}
  Json jobs;                // /sumcast/jobs reply: {"count", "job<id>": {...}, "server": {...}}
};

// Per second, reset-aware (see above). 0 when seconds <= 0.
double counter_rate(uint64_t before, uint64_t after, double seconds);

struct RateRow {
  std::string name;
  uint64_t value = 0;                // in the later reading
  std::optional<double> per_second;  // none when the earlier reading lacks the counter
};
// Every numeric member of `after` (an object) with its rate since `before` over `seconds`.
std::vector<RateRow> object_rates(const Json& before, const Json& after, double seconds);

struct CoreRates {
  uint64_t core = 0;
  uint64_t lcore = 0;
  double rx_pps = 0;
  double tx_pps = 0;
  double contributions_ps = 0;
  double summed_gbps = 0;  // payload_bytes x 8 / 1e9 per second
  double slots_ps = 0;
  double drops_ps = 0;  // every drop_<reason>
};

struct JobRates {
  uint64_t job_id = 0;
  std::string name;
  uint64_t world_size = 0;
  uint64_t registered = 0;
  bool running = false;
  uint64_t slots_completed = 0;
  std::optional<double> slots_ps;  // none for a job the earlier reading did not have
  uint64_t ms_since_progress = 0;
};

struct WatchRates {
  double seconds = 0;  // between the readings
  std::vector<CoreRates> cores;
  CoreRates total;                                       // core/lcore unused
  std::vector<std::pair<std::string, double>> drops_ps;  // reason -> rate over every core; non-zero only
  std::vector<JobRates> jobs;
};

// Rates between two readings of the same sumcastd (cores matched by position, jobs by id).
WatchRates compute_rates(const Reading& before, const Reading& after);

// The frame printed at each refresh (no terminal control codes; the caller clears the screen).
std::string format_watch(const WatchRates& rates, const std::string& title);
// The same rates as one JSON object (`stats --watch --json` prints one per refresh, one per line).
Json watch_json(const WatchRates& rates);

}  // namespace sumcast::ctl
