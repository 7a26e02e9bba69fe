// A reduction plan: the host's all-reduce of one buffer of `bytes` per GPU as stages of copy,
// reduce and exchange steps between buffers (docs/topology.md §3). Executors run plans; the cost
// model prices them; the planner builds and compares them.
//
// Buffers: a GPU's user buffer is {gpu node, slot 0} (input and, at the end, output: in place);
// host staging buffers are {NUMA node, slot k}, each `bytes` long, k < host_slots of that node.
// Offsets index into those buffers; every range is a multiple of elem_size.
//
// Stages run one after another. Within a stage, steps may run concurrently, except that steps
// writing the same buffer run in the order listed; no step reads a range that another step of
// the same stage writes. (Each builder keeps to that; validate_plan() checks it.)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sumcast/status.h"
#include "sumcast/topo/host_model.h"

namespace sumcast::topo {

enum class Strategy : uint8_t {
  kTrees = 0,        // MXNet-style balanced max-weight binary trees, one per root GPU, buffer split
  kRing = 1,         // two opposite rings: reduce-scatter then all-gather
  kFlat = 2,         // direct reduce-scatter / all-gather between all GPUs (NVSwitch)
  kCpuAssisted = 3,  // BytePS-style: reduce-scatter under each PCIe switch, CPU sums across switches
};
inline constexpr int kStrategyCount = 4;
const char* strategy_name(Strategy s);

enum class StepOp : uint8_t {
  kCopy = 0,      // dst[range] = src[range]
  kReduce = 1,    // dst[range] += src[range] (the plan's reduction op; sum)
  kExchange = 2,  // dst[range] (== src) goes out through `nic` and comes back reduced across hosts
};

struct BufferRef {
  int node = -1;  // a GPU or NUMA node id of the model
  int slot = 0;   // GPU: 0 (the user buffer); NUMA: staging buffer index
  auto operator<=>(const BufferRef&) const = default;
};

struct Step {
  StepOp op = StepOp::kCopy;
  BufferRef dst;
  BufferRef src;
  uint64_t offset = 0;
  uint64_t length = 0;
  int nic = -1;  // kExchange: the NIC node
};

struct Stage {
  std::string label;  // "reduce level 3", "copy shards to host", ...
  std::vector<Step> steps;
};

// MXNet's balanced binary tree over GPU indexes: levels[0] = {root}; levels[d+1] has twice the
// entries of levels[d]: entry 2i repeats levels[d][i] (a node stays), entry 2i+1 is the child that
// node receives from (or sends to, when broadcasting) at that depth, -1 if none. The last level
// lists every GPU of the tree once. Reduction runs from the last level up; broadcast down.
struct BinaryTree {
  int root = -1;
  std::vector<std::vector<int>> levels;

  int height() const { return static_cast<int>(levels.size()) - 1; }
  // (parent, child) GPU index pairs, top level first.
  std::vector<std::pair<int, int>> edges() const;
};

struct Plan {
  Strategy strategy = Strategy::kTrees;
  std::string name;    // "trees", "ring", ...
  std::string detail;  // parameters worth printing ("8 trees, penalty 0.7, exhaustive")
  uint64_t bytes = 0;
  uint32_t elem_size = 4;
  std::vector<Stage> stages;
  std::map<int, int> host_slots;  // NUMA node id -> staging buffers used there

  // What the strategy decided, for printing and drawing (GPU indexes).
  std::vector<BinaryTree> trees;
  std::vector<std::pair<uint64_t, uint64_t>> tree_ranges;  // (offset, length) per tree
  std::vector<int> ring;
  std::vector<std::vector<int>> groups;  // kCpuAssisted: GPUs per PCIe switch group
};

// Checks ranges, buffers and the within-stage rule above; names the stage and step on failure.
Status validate_plan(const HostModel& model, const Plan& plan);

// Splits [0, bytes) into `parts` element-aligned ranges as equal as possible (some may be empty).
std::vector<std::pair<uint64_t, uint64_t>> split_range(uint64_t offset, uint64_t bytes, uint32_t elem_size, int parts);

}  // namespace sumcast::topo
