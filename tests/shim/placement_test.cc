// Placement (worker_shim/core/include/sumcast/shim/placement.h): the optimal split of a job's bytes
// over appliances and host-side aggregators, checked against (1) a brute-force search over splits
// scored by this file's own flow-by-flow link model, (2) BytePS' closed form for equal bandwidths,
// and (3) the split the communicator makes from the resulting weights.
#include "sumcast/shim/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace sumcast::shim {
namespace {

// The test's own link model, built from flows rather than from the header's formula: every host
// sends f_x of its contribution to aggregator x and receives f_x of the result from it; a flow
// between a host and the aggregator on that same host crosses no link. Returns the largest
// (bytes / bandwidth) over every link direction.
double flow_time(const PlacementInput& in, const std::vector<double>& f) {
  const size_t n = in.host_bandwidth.size();
  std::vector<double> host_up(n, 0), host_down(n, 0);
  std::vector<double> agg_up(in.aggregators.size(), 0), agg_down(in.aggregators.size(), 0);
  for (size_t x = 0; x < in.aggregators.size(); ++x) {
    const Aggregator& a = in.aggregators[x];
    for (size_t h = 0; h < n; ++h) {
      if (a.kind == AggregatorKind::kHost && static_cast<size_t>(a.host) == h) continue;  // local
      host_up[h] += f[x];                                                                 // contribution h -> x
      host_down[h] += f[x];                                                               // result x -> h
      if (a.kind == AggregatorKind::kHost) {
        const auto at = static_cast<size_t>(a.host);
        host_down[at] += f[x];  // contribution arrives at x's host
        host_up[at] += f[x];    // result leaves x's host
      } else {
        agg_down[x] += f[x];
        agg_up[x] += f[x];
      }
    }
  }
  double t = 0;
  for (size_t h = 0; h < n; ++h)
    t = std::max({t, host_up[h] / in.host_bandwidth[h], host_down[h] / in.host_bandwidth[h]});
  for (size_t x = 0; x < in.aggregators.size(); ++x) {
    if (in.aggregators[x].kind != AggregatorKind::kAppliance) continue;
    const double b = in.aggregators[x].bandwidth;
    t = std::max({t, agg_up[x] / b, agg_down[x] / b});
  }
  return t;
}

// Calls `fn` with every split of 1 into m parts that are multiples of 1/steps.
void for_each_grid_split(size_t m, int steps, const std::function<void(const std::vector<double>&)>& fn) {
  std::vector<int> parts(m, 0);
  std::vector<double> f(m, 0);
  std::function<void(size_t, int)> rec = [&](size_t i, int left) {
    if (i + 1 == m) {
      parts[i] = left;
      for (size_t j = 0; j < m; ++j) f[j] = static_cast<double>(parts[j]) / steps;
      fn(f);
      return;
    }
    for (int v = 0; v <= left; ++v) {
      parts[i] = v;
      rec(i + 1, left - v);
    }
  };
  rec(0, steps);
}

int grid_steps(size_t m) { return m <= 3 ? 120 : m == 4 ? 60 : m == 5 ? 36 : m == 6 ? 22 : m == 7 ? 15 : 11; }

struct Search {
  double best = 1e300;
  std::vector<double> best_split;
};

// Brute force: the grid, then random splits (uniform on the simplex), then random local moves
// from the best. None may beat the placement.
Search brute_force(const PlacementInput& in, uint32_t seed) {
  Search s;
  const size_t m = in.aggregators.size();
  auto consider = [&](const std::vector<double>& f) {
    const double t = flow_time(in, f);
    if (t < s.best) s.best = t, s.best_split = f;
  };
  for_each_grid_split(m, grid_steps(m), consider);
  std::mt19937 rng(seed);
  std::exponential_distribution<double> ex(1.0);
  std::vector<double> f(m);
  for (int i = 0; i < 20000; ++i) {
    double sum = 0;
    for (auto& v : f) sum += v = ex(rng);
    for (auto& v : f) v /= sum;
    consider(f);
  }
  // Random perturbations of the best so far (several coordinates at once, so that the search
  // also moves along the kinks of the max), with shrinking scale.
  std::normal_distribution<double> gauss(0.0, 1.0);
  for (double scale = 0.1; scale > 1e-7; scale /= 2) {
    for (int i = 0; i < 3000; ++i) {
      std::vector<double> g = s.best_split;
      double sum = 0;
      for (auto& v : g) sum += v = std::max(0.0, v + scale * gauss(rng));
      if (sum <= 0) continue;
      for (auto& v : g) v /= sum;
      consider(g);
    }
  }
  return s;
}

void expect_valid_split(const Placement& p, size_t m) {
  ASSERT_EQ(p.fraction.size(), m);
  double sum = 0;
  for (double f : p.fraction) {
    EXPECT_GE(f, 0.0);
    sum += f;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

PlacementInput equal_cluster(int n, int k, int host_aggs, double b = 1.0) {
  PlacementInput in;
  in.host_bandwidth.assign(static_cast<size_t>(n), b);
  for (int j = 0; j < k; ++j) in.aggregators.push_back({AggregatorKind::kAppliance, b, -1});
  for (int h = 0; h < host_aggs; ++h) in.aggregators.push_back({AggregatorKind::kHost, 0, h});
  return in;
}

double appliance_share(const PlacementInput& in, const Placement& p) {
  double y = 0;
  for (size_t x = 0; x < in.aggregators.size(); ++x) {
    if (in.aggregators[x].kind == AggregatorKind::kAppliance) y += p.fraction[x];
  }
  return y;
}

// Equal bandwidths, every host aggregating: BytePS' y = 2k(n-1)/(n^2+kn-2k) to the appliances
// and T = 2n(n-1)/((n^2+kn-2k)B), evaluated here from the formula, not from the code.
TEST(Placement, EqualBandwidthsMatchTheBytePsFormula) {
  for (int n : {2, 3, 4, 5, 8, 16}) {
    for (int k = 0; k <= n + 2; ++k) {
      const double b = 2.5;
      const PlacementInput in = equal_cluster(n, k, n, b);
      auto p = optimal_placement(in);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      expect_valid_split(*p, in.aggregators.size());
      const double nd = n, kd = k;
      const double y = k >= n ? 1.0 : 2 * kd * (nd - 1) / (nd * nd + kd * nd - 2 * kd);
      const double t = (k >= n ? 1.0 : 2 * nd * (nd - 1) / (nd * nd + kd * nd - 2 * kd)) / b;
      SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
      EXPECT_NEAR(p->time_per_byte, t, 1e-12);
      EXPECT_NEAR(flow_time(in, p->fraction), t, 1e-12);
      if (n >= 3) {  // n <= 2: any appliance share up to y ties
        EXPECT_NEAR(appliance_share(in, *p), y, 1e-12);
      }
      EXPECT_NEAR(byteps_appliance_share(n, k), y, 1e-15);
      EXPECT_NEAR(byteps_time(n, k), t * b, 1e-15);
    }
  }
}

// The end points: k = 0 is all-reduce (each host owns 1/n, T = 2(n-1)/(nB)); no host aggregators
// is a parameter server (shares in proportion to the appliances' bandwidths).
TEST(Placement, EndPointsAreAllReduceAndParameterServer) {
  auto ar = optimal_placement(equal_cluster(4, 0, 4));
  ASSERT_TRUE(ar.ok());
  for (double f : ar->fraction) EXPECT_NEAR(f, 0.25, 1e-12);
  EXPECT_NEAR(ar->time_per_byte, 2.0 * 3 / 4, 1e-12);

  PlacementInput ps;
  ps.host_bandwidth = {1, 1, 1, 1};
  ps.aggregators = {{AggregatorKind::kAppliance, 1, -1}, {AggregatorKind::kAppliance, 3, -1}};
  auto p = optimal_placement(ps);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->fraction[0], 0.25, 1e-12);
  EXPECT_NEAR(p->fraction[1], 0.75, 1e-12);
  EXPECT_NEAR(p->time_per_byte, 1.0, 1e-12);  // 4 x 0.25 / 1: the appliances' n x share
}

void expect_optimal(const PlacementInput& in, uint32_t seed, const std::string& what) {
  SCOPED_TRACE(what);
  auto p = optimal_placement(in);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  expect_valid_split(*p, in.aggregators.size());
  const double t = flow_time(in, p->fraction);
  EXPECT_NEAR(p->time_per_byte, t, 1e-12 * std::max(1.0, t));
  const Search s = brute_force(in, seed);
  // Nothing the search found is faster, and the search gets (near) the placement's time: the
  // placement is the optimum, not merely a feasible split.
  EXPECT_LE(t, s.best * (1 + 1e-9)) << "a split " << s.best << " beats the placement " << t;
  EXPECT_LE(s.best, t * (1 + 1e-2)) << "search did not get near the placement's time";
}

TEST(Placement, EqualBandwidthsAreOptimalByBruteForce) {
  for (int k = 0; k <= 4; ++k) {
    expect_optimal(equal_cluster(4, k, 4), 11u + static_cast<uint32_t>(k), "n=4 k=" + std::to_string(k));
  }
  expect_optimal(equal_cluster(3, 1, 3), 5, "n=3 k=1");
  expect_optimal(equal_cluster(5, 2, 0), 6, "n=5 k=2, no host aggregators");
  expect_optimal(equal_cluster(4, 1, 2), 7, "n=4 k=1, two host aggregators");
}

// Unequal bandwidths: fixed cases (a slow appliance, one slow host, one fast host, a fast
// appliance that takes everything) and seeded random clusters.
TEST(Placement, UnequalBandwidthsAreOptimalByBruteForce) {
  {
    PlacementInput in = equal_cluster(4, 0, 4);
    in.aggregators.push_back({AggregatorKind::kAppliance, 0.3, -1});
    expect_optimal(in, 21, "slow appliance");
  }
  {
    PlacementInput in = equal_cluster(4, 1, 4);
    in.host_bandwidth[2] = 0.4;
    expect_optimal(in, 22, "one slow host");
  }
  {
    PlacementInput in = equal_cluster(4, 1, 4);
    in.host_bandwidth[0] = 5;
    expect_optimal(in, 23, "one fast host");
  }
  {
    PlacementInput in = equal_cluster(4, 1, 4);
    in.aggregators[0].bandwidth = 20;  // n x B and more: the appliance alone reaches the floor
    expect_optimal(in, 24, "fast appliance");
  }
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> bw(0.3, 4.0);
  for (int c = 0; c < 24; ++c) {
    const int n = 2 + c % 4;                                    // 2..5 hosts
    const int k = c % 3;                                        // 0..2 appliances
    const int h = std::max(k == 0 ? 1 : 0, (c / 3) % (n + 1));  // host aggregators on hosts 0..h-1
    if (k + h > 6) continue;
    PlacementInput in = equal_cluster(n, k, h);
    for (auto& b : in.host_bandwidth) b = bw(rng);
    for (auto& a : in.aggregators) {
      if (a.kind == AggregatorKind::kAppliance) a.bandwidth = bw(rng);
    }
    expect_optimal(in, 100u + static_cast<uint32_t>(c),
                   "random case " + std::to_string(c) + ": n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       " host aggregators=" + std::to_string(h));
  }
}

// One host summing locally needs no link at all.
TEST(Placement, SingleHostKeepsEverythingLocal) {
  PlacementInput in = equal_cluster(1, 1, 1);
  auto p = optimal_placement(in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->fraction[0], 0.0);
  EXPECT_EQ(p->fraction[1], 1.0);
  EXPECT_EQ(p->time_per_byte, 0.0);
}

TEST(Placement, BadInputIsRejectedNamingIt) {
  PlacementInput in = equal_cluster(4, 1, 1);
  in.aggregators[1].host = 4;
  auto p = optimal_placement(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("host 4"), std::string::npos) << p.status().message();

  in = equal_cluster(4, 0, 2);
  in.aggregators[1].host = 0;
  p = optimal_placement(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("two aggregators on host 0"), std::string::npos) << p.status().message();

  in = equal_cluster(4, 1, 0);
  in.aggregators[0].bandwidth = 0;
  EXPECT_FALSE(optimal_placement(in).ok());
  in = equal_cluster(4, 1, 0);
  in.host_bandwidth[3] = -1;
  EXPECT_FALSE(optimal_placement(in).ok());
  EXPECT_FALSE(optimal_placement(equal_cluster(4, 0, 0)).ok());
  EXPECT_FALSE(optimal_placement(equal_cluster(0, 1, 0)).ok());
}

// The ranges every rank cuts: contiguous, covering [0, count), in proportion to the units, and
// the same for the same input (no state).
TEST(Placement, ContiguousRangesFollowTheWeights) {
  const PlacementInput in = equal_cluster(4, 2, 4);
  auto p = optimal_placement(in);
  ASSERT_TRUE(p.ok());
  std::vector<uint64_t> units;
  for (double f : p->fraction) units.push_back(weight_units(f));
  for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1000003}, uint64_t{1} << 40}) {
    const auto r = contiguous_ranges(count, units);
    ASSERT_EQ(r.size(), units.size());
    uint64_t at = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_EQ(r[i].first, at) << "range " << i << " of " << count;
      EXPECT_LE(r[i].first, r[i].second);
      // Within one element of the exact share.
      const double want = static_cast<double>(count) * p->fraction[i];
      EXPECT_NEAR(static_cast<double>(r[i].second - r[i].first), want, 1.0 + 2e-6 * static_cast<double>(count));
      at = r[i].second;
    }
    EXPECT_EQ(at, count);
    EXPECT_EQ(contiguous_ranges(count, units), r);
  }
  EXPECT_EQ(weight_units(1e-9), 1u);  // never zero: every listed aggregator gets a range
  EXPECT_EQ(weight_units(0.25), 250000u);
}

}  // namespace
}  // namespace sumcast::shim
