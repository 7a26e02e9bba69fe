// The one cost model (docs/topology.md §2). A plan puts bytes on resources: each direction of
// each link (a step's bytes on every link of its route; an exchange also crosses the NIC's
// network link both ways) and each NUMA node's CPU summation (bytes a host-side reduce reads).
// Everything is pipelined, so the slowest resource decides:
//
//   time = max over resources (bytes / bandwidth) + stages x step_latency
//
// The latency term makes the data size matter: plans with fewer sequential stages win on small
// buffers. `intra_seconds` is the same figure without network links (what the intra-host plan
// itself costs, used to break ties when a NIC is the bottleneck of every plan).
#pragma once

#include <string>
#include <vector>

#include "sumcast/topo/host_model.h"
#include "sumcast/topo/plan.h"
#include "sumcast/topo/router.h"

namespace sumcast::topo {

struct CostOptions {
  // Bytes per second one NUMA node's cores sum (contributions read), GB/s. Default 25: a few
  // cores with the AVX2/AVX-512 kernels, memory bound.
  double cpu_sum_gbps = 25;
  // Fixed cost per stage (launch, synchronisation), microseconds. Default 10.
  double step_latency_us = 10;
};

struct ResourceLoad {
  std::string name;  // "PCIe SW0->GPU3", "NVLink GPU0->GPU1", "CPU sum NUMA0"
  int link = -1;     // link id, or -1 for a CPU
  bool forward = true;
  int numa = -1;  // CPU: NUMA node id
  double bytes = 0;
  double gbps = 0;
  double seconds = 0;
};

struct Prediction {
  double seconds = 0;        // bandwidth term + latency term
  double intra_seconds = 0;  // the same without network links
  double bandwidth_seconds = 0;
  double latency_seconds = 0;
  int stages = 0;
  ResourceLoad bottleneck;
  std::vector<ResourceLoad> resources;  // every loaded resource, slowest first
};

// Prices a plan. Unlimited links carry bytes but never decide.
Prediction predict(const Router& router, const Plan& plan, const CostOptions& options);

// The bytes a plan puts on one direction of a link (a small helper for tests and drawings).
double link_bytes(const Prediction& p, int link, bool forward);

// "PCIe SW0->GPU3" for a link direction.
std::string link_dir_name(const HostModel& model, int link, bool forward);

}  // namespace sumcast::topo
