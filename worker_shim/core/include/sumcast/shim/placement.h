// Placement of a job's bytes over its aggregators (docs/scale-out.md): appliances (nodes of their
// own) and worker hosts that sum a share themselves with an embedded summation service.
//
// Load model (per unit of message, M = 1; every link full duplex, both directions carry the same
// load, so one direction is modelled). n worker hosts, host i with link bandwidth B_i; aggregator
// x owns a fraction f_x of every call's bytes.
//   - an appliance j (its own link, B_j) receives n contributions of its share and sends n
//     results: load n f_j, time n f_j / B_j;
//   - host i sends its contribution to every share but the one it owns itself (1 - H_i, where H_i
//     is what host i's own aggregator owns, 0 if it has none) and the results of its own share to
//     the n - 1 other hosts ((n - 1) H_i): load 1 + (n - 2) H_i, time (1 + (n - 2) H_i) / B_i.
// The call takes as long as its slowest link: T(f) = max over every link of its time.
// optimal_placement() returns the f minimising T. With k appliances and all n hosts
// aggregating, all of bandwidth B, the appliances get y = 2k(n-1)/(n^2+kn-2k) of the bytes and
// T = 2n(n-1)/((n^2+kn-2k)B) (BytePS, OSDI '20); k = 0 is all-reduce's 2(n-1)/(nB), k >= n a
// parameter server's 1/B (the hosts get nothing).
//
// Ties. Where several splits reach the optimum (the hosts' own floor 1/B_i binds, or n <= 2),
// optimal_placement() returns the one that gives every aggregator the same share of its capacity
// at the optimal time, so that no link is loaded more than it must be.
//
// Everything here is a pure function of its arguments: every rank computes the same placement,
// and contiguous_ranges() the same element ranges, from the same inputs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sumcast/status.h"

namespace sumcast::shim {

enum class AggregatorKind : uint8_t {
  kAppliance = 0,  // a node of its own (an appliance, or a CPU node running the service)
  kHost = 1,       // a worker host's embedded summation service: shares the host's link
};

struct Aggregator {
  AggregatorKind kind = AggregatorKind::kAppliance;
  double bandwidth = 0;  // kAppliance: its link's bandwidth (the hosts' unit; > 0); kHost: unused
  int host = -1;         // kHost: index of its worker host (at most one aggregator per host)
};

struct PlacementInput {
  std::vector<double> host_bandwidth;   // the n worker hosts' link bandwidths (> 0; any one unit)
  std::vector<Aggregator> aggregators;  // at least one; in the job's appliance order
};

struct Placement {
  std::vector<double> fraction;  // per aggregator, >= 0, summing to 1
  double time_per_byte = 0;      // T: the slowest link's time per byte of message (1 / unit)
  // Predicted algorithm bandwidth, 1 / T (in the bandwidths' unit); infinite when T = 0.
  double algbw() const;
};

// The slowest link's time per byte for the split `fraction` (one per aggregator) under the load
// model above. For tests and tools: it does not check its input.
double link_time(const PlacementInput& input, const std::vector<double>& fraction);

// Per-link times of a split, for reports: the n hosts' links first, then each appliance's.
std::vector<double> link_times(const PlacementInput& input, const std::vector<double>& fraction);

// The split that minimises link_time(); InvalidArgument names what is wrong with the input.
Result<Placement> optimal_placement(const PlacementInput& input);

// BytePS' closed form for k appliances and n hosts of equal bandwidth, every host aggregating: the
// appliances' total share y = 2k(n-1)/(n^2+kn-2k) (1 when k >= n).
double byteps_appliance_share(int n, int k);
// Its time per byte, in units of 1/B: 2n(n-1)/(n^2+kn-2k) (1 when k >= n).
double byteps_time(int n, int k);

// The fixed-point units a weight is split by (so that every rank rounds alike): round(w * 1e6),
// at least 1.
uint64_t weight_units(double weight);
// Contiguous element ranges [begin, end) of `count` elements in proportion to `units`: range i
// ends at floor(count * (u_0 + ... + u_i) / sum(u)). The communicator's own split.
std::vector<std::pair<uint64_t, uint64_t>> contiguous_ranges(uint64_t count, const std::vector<uint64_t>& units);

}  // namespace sumcast::shim
