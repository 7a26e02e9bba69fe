// The min-max split of docs/scale-out.md §2. For t at or above the hosts' floor max_i 1/B_i (every
// host sends and receives at least the whole message), aggregator x can own at most cap_x(t):
//   appliance j:      t B_j / n
//   host i (n >= 3):  (t B_i - 1) / (n - 2)
//   host i (n <= 2):  unbounded (its link carries the whole message whatever it owns; t B_i is
//                     used as its weight for the tie-break)
// Every cap is linear in t there, so the least t with sum_x cap_x(t) >= 1 has a closed form; the
// split is the caps at that t, scaled to sum to 1 (exactly the caps unless the floor binds).
#include "sumcast/shim/placement.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sumcast::shim {

double Placement::algbw() const {
  return time_per_byte > 0 ? 1.0 / time_per_byte : std::numeric_limits<double>::infinity();
}

std::vector<double> link_times(const PlacementInput& input, const std::vector<double>& fraction) {
  const size_t n = input.host_bandwidth.size();
  std::vector<double> owned(n, 0.0);  // H_i
  std::vector<double> times;
  times.reserve(n + input.aggregators.size());
  for (size_t x = 0; x < input.aggregators.size() && x < fraction.size(); ++x) {
    const Aggregator& a = input.aggregators[x];
    if (a.kind == AggregatorKind::kHost && a.host >= 0 && static_cast<size_t>(a.host) < n) {
      owned[static_cast<size_t>(a.host)] += fraction[x];
    }
  }
  const double nd = static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) times.push_back((1.0 + (nd - 2.0) * owned[i]) / input.host_bandwidth[i]);
  for (size_t x = 0; x < input.aggregators.size() && x < fraction.size(); ++x) {
    const Aggregator& a = input.aggregators[x];
    if (a.kind == AggregatorKind::kAppliance) times.push_back(nd * fraction[x] / a.bandwidth);
  }
  return times;
}

double link_time(const PlacementInput& input, const std::vector<double>& fraction) {
  const auto times = link_times(input, fraction);
  return times.empty() ? 0.0 : *std::max_element(times.begin(), times.end());
}

namespace {

bool positive(double v) { return std::isfinite(v) && v > 0; }

Status validate(const PlacementInput& in) {
  const size_t n = in.host_bandwidth.size();
  if (n == 0) return Status::invalid_argument("placement: no worker hosts");
  for (size_t i = 0; i < n; ++i) {
    if (!positive(in.host_bandwidth[i])) {
      return Status::invalid_argument("placement: host " + std::to_string(i) + " bandwidth must be > 0");
    }
  }
  if (in.aggregators.empty()) return Status::invalid_argument("placement: no aggregators");
  std::vector<bool> has_agg(n, false);
  for (size_t x = 0; x < in.aggregators.size(); ++x) {
    const Aggregator& a = in.aggregators[x];
    if (a.kind == AggregatorKind::kAppliance) {
      if (!positive(a.bandwidth)) {
        return Status::invalid_argument("placement: aggregator " + std::to_string(x) +
                                        " (appliance) bandwidth must be > 0");
      }
      continue;
    }
    if (a.host < 0 || static_cast<size_t>(a.host) >= n) {
      return Status::invalid_argument("placement: aggregator " + std::to_string(x) + " is on host " +
                                      std::to_string(a.host) + ", not one of the " + std::to_string(n) + " hosts");
    }
    if (has_agg[static_cast<size_t>(a.host)]) {
      return Status::invalid_argument("placement: two aggregators on host " + std::to_string(a.host));
    }
    has_agg[static_cast<size_t>(a.host)] = true;
  }
  return Status();
}

}  // namespace

Result<Placement> optimal_placement(const PlacementInput& in) {
  if (Status st = validate(in); !st.ok()) return st;
  const size_t n = in.host_bandwidth.size();
  const double nd = static_cast<double>(n);
  const size_t m = in.aggregators.size();
  Placement p;
  p.fraction.assign(m, 0.0);

  bool any_host = false;
  for (const Aggregator& a : in.aggregators) any_host |= a.kind == AggregatorKind::kHost;
  if (n == 1 && any_host) {
    // One host summing its own share needs no network at all: everything stays local.
    for (size_t x = 0; x < m; ++x) p.fraction[x] = in.aggregators[x].kind == AggregatorKind::kHost ? 1.0 : 0.0;
    p.time_per_byte = link_time(in, p.fraction);
    return p;
  }

  double floor_t = 0;  // every host's link carries at least the whole message
  for (double b : in.host_bandwidth) floor_t = std::max(floor_t, 1.0 / b);
  // sum_x cap_x(t) = slope * t - offset, for t >= floor_t.
  double slope = 0, offset = 0;
  for (const Aggregator& a : in.aggregators) {
    if (a.kind == AggregatorKind::kAppliance) {
      slope += a.bandwidth / nd;
    } else if (n >= 3) {
      slope += in.host_bandwidth[static_cast<size_t>(a.host)] / (nd - 2.0);
      offset += 1.0 / (nd - 2.0);
    } else {
      slope += in.host_bandwidth[static_cast<size_t>(a.host)];
    }
  }
  const double t = std::max(floor_t, (1.0 + offset) / slope);
  double sum = 0;
  for (size_t x = 0; x < m; ++x) {
    const Aggregator& a = in.aggregators[x];
    double cap = 0;
    if (a.kind == AggregatorKind::kAppliance) {
      cap = t * a.bandwidth / nd;
    } else {
      const double b = in.host_bandwidth[static_cast<size_t>(a.host)];
      cap = n >= 3 ? std::max(0.0, (t * b - 1.0) / (nd - 2.0)) : t * b;
    }
    p.fraction[x] = cap;
    sum += cap;
  }
  for (double& f : p.fraction) f /= sum;
  p.time_per_byte = link_time(in, p.fraction);
  return p;
}

double byteps_appliance_share(int n, int k) {
  if (k >= n) return 1.0;
  return 2.0 * k * (n - 1) / (static_cast<double>(n) * n + static_cast<double>(k) * n - 2.0 * k);
}

double byteps_time(int n, int k) {
  if (k >= n) return 1.0;
  return 2.0 * n * (n - 1) / (static_cast<double>(n) * n + static_cast<double>(k) * n - 2.0 * k);
}

uint64_t weight_units(double weight) {
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(weight * 1e6)));
}

std::vector<std::pair<uint64_t, uint64_t>> contiguous_ranges(uint64_t count, const std::vector<uint64_t>& units) {
  unsigned __int128 total = 0;
  for (uint64_t u : units) total += u;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  ranges.reserve(units.size());
  unsigned __int128 cum = 0;
  uint64_t begin = 0;
  for (uint64_t u : units) {
    cum += u;
    const auto end = total == 0 ? count : static_cast<uint64_t>(static_cast<unsigned __int128>(count) * cum / total);
    ranges.emplace_back(begin, end);
    begin = end;
  }
  return ranges;
}

}  // namespace sumcast::shim
