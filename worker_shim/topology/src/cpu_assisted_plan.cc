// make_cpu_assisted_plan (strategies.h): BytePS-style aggregation for PCIe-switch machines, on
// PCIe trees of any depth.
//
// Groups: the GPUs under one top-level PCIe switch (a GPU on a root port is a group of its own).
// Shards: without the network one per NUMA node with GPUs, summed there; with the network one
// per NIC, summed on the NIC's NUMA node and completed on the GPUs of the NIC's switch (its owner
// group) so that neither direction of any switch uplink carries more than the buffer size.
//
// Inside a group the reduce-scatter follows the tree, lowest switches first: under a switch whose
// children (GPUs or sub-switches) have already reduced every range among their own GPUs, each
// range is cut into equal parts, one per child (the owner group's NIC shard goes whole to the
// child the NIC hangs under); every other child sends each child its partial sums of that
// child's part. So the partial of every byte leaves each subtree exactly once (to a sibling, or
// at the end to host memory): the reduce stages put exactly M (the buffer) up every uplink, the
// broadcast stages M down, and a top-level switch's uplink carries M each way in all.
//
// Stages (empty ones dropped):
//   1 reduce-scatter under the switches, one stage per tree level, lowest first
//   2 each group copies its partial pieces of the shards it does not own up to a staging buffer
//   3 each NUMA node's CPU sums its groups' partials, per shard
//   4 the shard's home NUMA node sums the other NUMA nodes' partials (over SMP)
//   5 (network) the owner group adds that host sum into its own partial pieces
//   6 (network) exchange: owner GPUs (or the home node's buffer) through the shard's NIC
//   7 (network) the owner group copies the result up to the home node
//   8 the home node copies the result to the other NUMA nodes
//   9 each group copies the results it does not own down to its GPUs
//  10 all-gather under the switches, the same levels in reverse (top first)
#include <algorithm>
#include <map>

#include "strategy_util.h"
#include "sumcast/topo/strategies.h"

namespace sumcast::topo {
namespace {

using Range = std::pair<uint64_t, uint64_t>;

struct Group {
  int top = -1;           // its top-level switch; -1 for a GPU on a root port
  std::vector<int> gpus;  // node ids
  int numa = -1;
  int slot = -1;  // staging buffer on its NUMA node
  // pieces[j][k]: the ranges of shard k whose partial sum over the group gpus[j] holds after the
  // reduce-scatter (each shard split evenly over the GPUs below each switch, so the owner group's
  // work and each GPU's link load are balanced).
  std::vector<std::vector<std::vector<Range>>> pieces;
};

// A range to reduce under a switch; `pin` (a NIC node, or -1) sends it whole to the child the NIC
// hangs under, so that the NIC's shard is completed next to the NIC.
struct Segment {
  Range range;
  int pin = -1;
};

// GPU node -> the ranges it holds the partial sum (over some subtree) of.
using Owned = std::map<int, std::vector<Range>>;

Range intersect(Range a, Range b) {
  uint64_t lo = std::max(a.first, b.first), hi = std::min(a.first + a.second, b.first + b.second);
  return hi > lo ? Range{lo, hi - lo} : Range{lo, 0};
}

struct Shard {
  Range range;
  int home = -1;   // NUMA node that sums it
  int owner = -1;  // group index, -1 if none
  int nic = -1;
  BufferRef total;                 // where the host-side sum ends up (home node)
  std::map<int, BufferRef> local;  // NUMA node -> its partial (first contributing group's slot)
};

class Builder {
 public:
  Builder(const Router& router, const PlanRequest& request)
      : model_(router.model()), request_(request), plan_(internal::new_plan(Strategy::kCpuAssisted, request)) {}

  Result<Plan> build() {
    make_groups();
    SUMCAST_RETURN_IF_ERROR(make_shards());
    make_tree();
    make_pieces();
    for (Stage& st : reduce_levels_) plan_.stages.push_back(std::move(st));
    stage_copy_up();
    stage_local_sums();
    stage_cross_numa_sums();
    if (request_.network) {
      stage_owner_add();
      stage_exchange();
      stage_owner_up();
    }
    stage_cross_numa_broadcast();
    stage_copy_down();
    stage_group_all_gather();  // from the reduce levels' transfers, top level first
    internal::drop_empty_stages(plan_);
    for (const Group& g : groups_) {
      std::vector<int> idx;
      for (int n : g.gpus) idx.push_back(model_.node(n).index);
      plan_.groups.push_back(idx);
    }
    plan_.detail = std::to_string(groups_.size()) + " PCIe switch groups, " +
                   (levels() > 1 ? std::to_string(levels()) + " switch levels, " : std::string()) +
                   std::to_string(shards_.size()) + " shards summed by the CPUs" +
                   (request_.network ? ", one per NIC" : ", one per NUMA node");
    return std::move(plan_);
  }

 private:
  int new_slot(int numa) { return plan_.host_slots[numa]++; }

  void make_groups() {
    std::map<int, size_t> by_switch;
    for (int g : model_.gpus()) {
      int sw = model_.top_switch(g);
      if (sw >= 0 && by_switch.count(sw)) {
        groups_[by_switch[sw]].gpus.push_back(g);
        continue;
      }
      if (sw >= 0) by_switch[sw] = groups_.size();
      Group grp;
      grp.top = sw;
      grp.gpus.push_back(g);
      grp.numa = model_.node(g).numa;
      groups_.push_back(grp);
    }
    for (Group& g : groups_) g.slot = new_slot(g.numa);
  }

  // The part of the PCIe tree below the top switches that leads to GPUs: children (in GPU order),
  // GPUs below each node and each node's height (a GPU 0, a switch 1 + its highest child).
  void make_tree() {
    for (const Group& g : groups_) {
      for (int gpu : g.gpus) {
        ++below_[gpu];
        int child = gpu;
        for (int up : model_.pcie_ancestors(gpu)) {
          if (g.top < 0) break;
          auto& kids = children_[up];
          if (std::find(kids.begin(), kids.end(), child) == kids.end()) kids.push_back(child);
          ++below_[up];
          if (up == g.top) break;
          child = up;
        }
      }
    }
  }

  int height(int node) const {
    auto it = children_.find(node);
    if (it == children_.end()) return 0;
    int h = 0;
    for (int c : it->second) h = std::max(h, height(c));
    return h + 1;
  }

  int levels() const {
    int h = 0;
    for (const Group& g : groups_) h = std::max(h, g.top < 0 ? 0 : height(g.top));
    return h;
  }

  bool is_below(int node, int ancestor) const {
    if (node == ancestor) return true;
    for (int up : model_.pcie_ancestors(node)) {
      if (up == ancestor) return true;
    }
    return false;
  }

  Stage& level_stage(int h) {
    while (static_cast<int>(reduce_levels_.size()) < h) {
      Stage st;
      reduce_levels_.push_back(std::move(st));
      gather_steps_.emplace_back();
    }
    return reduce_levels_[static_cast<size_t>(h - 1)];
  }

  // Reduce-scatters `segments` over the GPUs below `node` (see the file comment); returns who
  // holds the subtree's partial sum of what. Steps go to the stage of the node's level; the
  // reverse copies of the all-gather are recorded with them.
  Owned reduce_below(int node, const std::vector<Segment>& segments) {
    Owned out;
    if (model_.node(node).kind == NodeKind::kGpu) {
      auto& mine = out[node];
      for (const Segment& s : segments) {
        if (s.range.second) mine.push_back(s.range);
      }
      return out;
    }
    const std::vector<int>& kids = children_.at(node);
    // Equal shares: a child owning the share f of the ranges carries (1 + f) M over its link (or
    // its own GPU link): M of partials out and, in the all-gather, f M of results to its
    // siblings; equal shares keep the busiest of equal links lowest.
    std::vector<std::vector<Segment>> parts(kids.size());
    for (const Segment& s : segments) {
      int to = -1;
      for (size_t i = 0; s.pin >= 0 && i < kids.size(); ++i) {
        if (is_below(s.pin, kids[i])) to = static_cast<int>(i);
      }
      if (to >= 0) {
        parts[static_cast<size_t>(to)].push_back(s);
        continue;
      }
      auto cut = split_range(s.range.first, s.range.second, plan_.elem_size, static_cast<int>(kids.size()));
      size_t c = 0;
      for (size_t i = 0; i < kids.size(); ++i) {
        Range r{cut[c].first, 0};
        r.second += cut[c++].second;
        if (r.second) parts[i].push_back({r, s.pin});
      }
    }
    std::vector<Segment> all;
    for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    std::vector<Owned> own;
    for (int kid : kids) own.push_back(reduce_below(kid, all));
    const int h = height(node);
    level_stage(h);
    Stage& st = reduce_levels_[static_cast<size_t>(h - 1)];
    auto& gather = gather_steps_[static_cast<size_t>(h - 1)];
    for (size_t j = 0; j < kids.size(); ++j) {
      for (const auto& [gpu, ranges] : own[j]) {
        for (const Range& b : ranges) {
          for (const Segment& p : parts[j]) {
            const Range q = intersect(b, p.range);
            if (!q.second) continue;
            out[gpu].push_back(q);
            for (size_t i = 0; i < kids.size(); ++i) {
              if (i == j) continue;
              for (const auto& [from, theirs] : own[i]) {
                for (const Range& a : theirs) {
                  const Range t = intersect(a, q);
                  if (!t.second) continue;
                  st.steps.push_back({StepOp::kReduce, {gpu, 0}, {from, 0}, t.first, t.second, -1});
                  gather.push_back({StepOp::kCopy, {from, 0}, {gpu, 0}, t.first, t.second, -1});
                }
              }
            }
          }
        }
      }
    }
    return out;
  }

  void make_pieces() {
    const int depth = levels();
    for (Group& g : groups_) {
      std::vector<Segment> segments;
      for (const Shard& s : shards_) segments.push_back({s.range, s.nic});
      Owned owned = reduce_below(g.top >= 0 ? g.top : g.gpus.front(), segments);
      g.pieces.assign(g.gpus.size(), std::vector<std::vector<Range>>(shards_.size()));
      for (size_t j = 0; j < g.gpus.size(); ++j) {
        for (const Range& r : owned[g.gpus[j]]) {
          for (size_t k = 0; k < shards_.size(); ++k) {
            if (intersect(r, shards_[k].range).second == r.second) g.pieces[j][k].push_back(r);
          }
        }
      }
    }
    for (int h = 1; h <= static_cast<int>(reduce_levels_.size()); ++h) {
      reduce_levels_[static_cast<size_t>(h - 1)].label =
          depth <= 1 ? std::string("reduce-scatter under each PCIe switch")
                     : "reduce-scatter under the level-" + std::to_string(h) + " PCIe switches";
    }
  }

  int group_of_switch(int sw) const {
    if (sw < 0) return -1;
    for (size_t i = 0; i < groups_.size(); ++i) {
      if (model_.top_switch(groups_[i].gpus.front()) == sw) return static_cast<int>(i);
    }
    return -1;
  }

  Status make_shards() {
    if (request_.network) {
      std::vector<int> nics = internal::fastest_nics(model_);
      if (nics.empty()) return Status::unavailable("the host has no NIC for the network exchange");
      auto ranges = split_range(0, plan_.bytes, plan_.elem_size, static_cast<int>(nics.size()));
      for (size_t k = 0; k < nics.size(); ++k) {
        Shard s;
        s.range = ranges[k];
        s.nic = nics[k];
        s.home = model_.node(nics[k]).numa;
        s.owner = group_of_switch(model_.top_switch(nics[k]));
        shards_.push_back(s);
      }
    } else {
      std::vector<int> homes;
      for (const Group& g : groups_) {
        if (std::find(homes.begin(), homes.end(), g.numa) == homes.end()) homes.push_back(g.numa);
      }
      auto ranges = split_range(0, plan_.bytes, plan_.elem_size, static_cast<int>(homes.size()));
      for (size_t k = 0; k < homes.size(); ++k) {
        Shard s;
        s.range = ranges[k];
        s.home = homes[k];
        shards_.push_back(s);
      }
    }
    // Which buffer holds each NUMA node's partial of each shard, and the home's total.
    for (Shard& s : shards_) {
      for (size_t g = 0; g < groups_.size(); ++g) {
        if (static_cast<int>(g) == s.owner || s.local.count(groups_[g].numa)) continue;
        s.local[groups_[g].numa] = BufferRef{groups_[g].numa, groups_[g].slot};
      }
      auto it = s.local.find(s.home);
      s.total = it != s.local.end() ? it->second : BufferRef{s.home, -1};
    }
    return Status();
  }

  bool contributes(size_t g, const Shard& s) const { return static_cast<int>(g) != s.owner; }
  size_t index_of(const Shard& s) const { return static_cast<size_t>(&s - shards_.data()); }

  void stage_copy_up() {
    Stage st;
    st.label = "copy partial sums to host memory";
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      const Group& g = groups_[gi];
      for (const Shard& s : shards_) {
        if (!contributes(gi, s)) continue;
        for (size_t j = 0; j < g.gpus.size(); ++j) {
          for (const Range& r : g.pieces[j][index_of(s)])
            st.steps.push_back({StepOp::kCopy, {g.numa, g.slot}, {g.gpus[j], 0}, r.first, r.second, -1});
        }
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_local_sums() {
    Stage st;
    st.label = "CPU sums the switches of each NUMA node";
    for (const Shard& s : shards_) {
      for (size_t gi = 0; gi < groups_.size(); ++gi) {
        const Group& g = groups_[gi];
        if (!contributes(gi, s)) continue;
        BufferRef acc = s.local.at(g.numa);
        if (acc == BufferRef{g.numa, g.slot}) continue;
        st.steps.push_back({StepOp::kReduce, acc, {g.numa, g.slot}, s.range.first, s.range.second, -1});
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_cross_numa_sums() {
    Stage st;
    st.label = "CPU sums across NUMA nodes (SMP)";
    for (Shard& s : shards_) {
      bool fresh = s.total.slot < 0;
      if (fresh && !s.local.empty()) s.total.slot = new_slot(s.home);
      for (const auto& [numa, buf] : s.local) {
        if (numa == s.home) continue;
        st.steps.push_back({fresh ? StepOp::kCopy : StepOp::kReduce, s.total, buf, s.range.first, s.range.second, -1});
        fresh = false;
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_owner_add() {
    Stage st;
    st.label = "owner switch adds the host sum of the other switches";
    for (const Shard& s : shards_) {
      if (s.owner < 0 || s.total.slot < 0) continue;
      const Group& g = groups_[static_cast<size_t>(s.owner)];
      for (size_t j = 0; j < g.gpus.size(); ++j) {
        for (const Range& r : g.pieces[j][index_of(s)])
          st.steps.push_back({StepOp::kReduce, {g.gpus[j], 0}, s.total, r.first, r.second, -1});
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_exchange() {
    Stage st;
    st.label = "exchange through the NICs";
    for (const Shard& s : shards_) {
      if (s.owner >= 0) {
        const Group& g = groups_[static_cast<size_t>(s.owner)];
        for (size_t j = 0; j < g.gpus.size(); ++j) {
          for (const Range& r : g.pieces[j][index_of(s)])
            st.steps.push_back({StepOp::kExchange, {g.gpus[j], 0}, {g.gpus[j], 0}, r.first, r.second, s.nic});
        }
      } else if (s.total.slot >= 0) {
        st.steps.push_back({StepOp::kExchange, s.total, s.total, s.range.first, s.range.second, s.nic});
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_owner_up() {
    Stage st;
    st.label = "owner switch copies the result to host memory";
    for (const Shard& s : shards_) {
      if (s.owner < 0 || s.total.slot < 0) continue;
      const Group& g = groups_[static_cast<size_t>(s.owner)];
      for (size_t j = 0; j < g.gpus.size(); ++j) {
        for (const Range& r : g.pieces[j][index_of(s)])
          st.steps.push_back({StepOp::kCopy, s.total, {g.gpus[j], 0}, r.first, r.second, -1});
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_cross_numa_broadcast() {
    Stage st;
    st.label = "copy results to the other NUMA nodes (SMP)";
    for (const Shard& s : shards_) {
      for (const auto& [numa, buf] : s.local) {
        if (numa != s.home) st.steps.push_back({StepOp::kCopy, buf, s.total, s.range.first, s.range.second, -1});
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_copy_down() {
    Stage st;
    st.label = "copy results down to the GPUs";
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      const Group& g = groups_[gi];
      for (const Shard& s : shards_) {
        if (!contributes(gi, s)) continue;
        BufferRef from = g.numa == s.home ? s.total : s.local.at(g.numa);
        for (size_t j = 0; j < g.gpus.size(); ++j) {
          for (const Range& r : g.pieces[j][index_of(s)])
            st.steps.push_back({StepOp::kCopy, {g.gpus[j], 0}, from, r.first, r.second, -1});
        }
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_group_all_gather() {
    const int depth = static_cast<int>(gather_steps_.size());
    for (int h = depth; h >= 1; --h) {
      Stage st;
      st.label = depth <= 1 ? std::string("all-gather under each PCIe switch")
                            : "all-gather under the level-" + std::to_string(h) + " PCIe switches";
      st.steps = std::move(gather_steps_[static_cast<size_t>(h - 1)]);
      plan_.stages.push_back(std::move(st));
    }
  }

  const HostModel& model_;
  const PlanRequest& request_;
  Plan plan_;
  std::vector<Group> groups_;
  std::vector<Shard> shards_;
  std::map<int, std::vector<int>> children_;     // switch node -> children leading to GPUs
  std::map<int, int> below_;                     // node -> GPUs below it (a GPU: 1)
  std::vector<Stage> reduce_levels_;             // [h - 1]: reduce-scatter under the level-h switches
  std::vector<std::vector<Step>> gather_steps_;  // [h - 1]: their reverse copies (all-gather)
};

}  // namespace

Result<Plan> make_cpu_assisted_plan(const Router& router, const PlanRequest& request) {
  return Builder(router, request).build();
}

}  // namespace sumcast::topo
