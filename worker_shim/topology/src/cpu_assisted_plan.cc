// make_cpu_assisted_plan (strategies.h): BytePS-style aggregation for PCIe-switch machines.
//
// Groups: the GPUs under one top-level PCIe switch (a GPU on a root port is a group of its own).
// Shards: without the network one per NUMA node with GPUs, summed there; with the network one
// per NIC, summed on the NIC's NUMA node and completed on the GPUs of the NIC's switch (its owner
// group) so that neither direction of any switch uplink carries more than the buffer size.
// Stages (empty ones dropped):
//   1 reduce-scatter inside each group (GPU g_j of a group of s owns piece j of s)
//   2 each group copies its partial pieces of the shards it does not own up to a staging buffer
//   3 each NUMA node's CPU sums its groups' partials, per shard
//   4 the shard's home NUMA node sums the other NUMA nodes' partials (over SMP)
//   5 (network) the owner group adds that host sum into its own partial pieces
//   6 (network) exchange: owner GPUs (or the home node's buffer) through the shard's NIC
//   7 (network) the owner group copies the result up to the home node
//   8 the home node copies the result to the other NUMA nodes
//   9 each group copies the results it does not own down to its GPUs
//  10 all-gather inside each group
#include <algorithm>
#include <map>

#include "strategy_util.h"
#include "sumcast/topo/strategies.h"

namespace sumcast::topo {
namespace {

using Range = std::pair<uint64_t, uint64_t>;

struct Group {
  std::vector<int> gpus;  // node ids
  int numa = -1;
  int slot = -1;  // staging buffer on its NUMA node
  // pieces[j][k]: the part of shard k that gpus[j] reduces (each shard split evenly over the
  // group, so the owner group's work and each GPU's link load are balanced).
  std::vector<std::vector<Range>> pieces;
};

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
    make_pieces();
    stage_group_reduce_scatter();
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
    stage_group_all_gather();
    internal::drop_empty_stages(plan_);
    for (const Group& g : groups_) {
      std::vector<int> idx;
      for (int n : g.gpus) idx.push_back(model_.node(n).index);
      plan_.groups.push_back(idx);
    }
    plan_.detail = std::to_string(groups_.size()) + " PCIe switch groups, " + std::to_string(shards_.size()) +
                   " shards summed by the CPUs" + (request_.network ? ", one per NIC" : ", one per NUMA node");
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
      grp.gpus.push_back(g);
      grp.numa = model_.node(g).numa;
      groups_.push_back(grp);
    }
    for (Group& g : groups_) g.slot = new_slot(g.numa);
  }

  void make_pieces() {
    for (Group& g : groups_) {
      g.pieces.assign(g.gpus.size(), {});
      for (const Shard& s : shards_) {
        auto parts = split_range(s.range.first, s.range.second, plan_.elem_size, static_cast<int>(g.gpus.size()));
        for (size_t j = 0; j < g.gpus.size(); ++j) g.pieces[j].push_back(parts[j]);
      }
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

  void stage_group_reduce_scatter() {
    Stage st;
    st.label = "reduce-scatter under each PCIe switch";
    for (const Group& g : groups_) {
      for (size_t j = 0; j < g.gpus.size(); ++j) {
        for (size_t i = 0; i < g.gpus.size(); ++i) {
          if (i == j) continue;
          for (const Range& r : g.pieces[j]) {
            if (r.second) st.steps.push_back({StepOp::kReduce, {g.gpus[j], 0}, {g.gpus[i], 0}, r.first, r.second, -1});
          }
        }
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_copy_up() {
    Stage st;
    st.label = "copy partial sums to host memory";
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      const Group& g = groups_[gi];
      for (const Shard& s : shards_) {
        if (!contributes(gi, s)) continue;
        for (size_t j = 0; j < g.gpus.size(); ++j) {
          Range r = g.pieces[j][index_of(s)];
          if (r.second) st.steps.push_back({StepOp::kCopy, {g.numa, g.slot}, {g.gpus[j], 0}, r.first, r.second, -1});
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
        Range r = g.pieces[j][index_of(s)];
        if (r.second) st.steps.push_back({StepOp::kReduce, {g.gpus[j], 0}, s.total, r.first, r.second, -1});
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
          Range r = g.pieces[j][index_of(s)];
          if (r.second)
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
        Range r = g.pieces[j][index_of(s)];
        if (r.second) st.steps.push_back({StepOp::kCopy, s.total, {g.gpus[j], 0}, r.first, r.second, -1});
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
          Range r = g.pieces[j][index_of(s)];
          if (r.second) st.steps.push_back({StepOp::kCopy, {g.gpus[j], 0}, from, r.first, r.second, -1});
        }
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  void stage_group_all_gather() {
    Stage st;
    st.label = "all-gather under each PCIe switch";
    for (const Group& g : groups_) {
      for (size_t j = 0; j < g.gpus.size(); ++j) {
        for (size_t i = 0; i < g.gpus.size(); ++i) {
          if (i == j) continue;
          for (const Range& r : g.pieces[j]) {
            if (r.second) st.steps.push_back({StepOp::kCopy, {g.gpus[i], 0}, {g.gpus[j], 0}, r.first, r.second, -1});
          }
        }
      }
    }
    plan_.stages.push_back(std::move(st));
  }

  const HostModel& model_;
  const PlanRequest& request_;
  Plan plan_;
  std::vector<Group> groups_;
  std::vector<Shard> shards_;
};

}  // namespace

Result<Plan> make_cpu_assisted_plan(const Router& router, const PlanRequest& request) {
  return Builder(router, request).build();
}

}  // namespace sumcast::topo
