// Plan helpers (plan.h): tree edges, range splitting, plan validation.
#include "sumcast/topo/plan.h"

#include <algorithm>

namespace sumcast::topo {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kTrees:
      return "trees";
    case Strategy::kRing:
      return "ring";
    case Strategy::kFlat:
      return "flat";
    case Strategy::kCpuAssisted:
      return "cpu-assisted";
  }
  return "?";
}

std::vector<std::pair<int, int>> BinaryTree::edges() const {
  std::vector<std::pair<int, int>> out;
  for (size_t d = 0; d + 1 < levels.size(); ++d) {
    for (size_t i = 0; i < levels[d].size(); ++i) {
      int child = levels[d + 1][2 * i + 1];
      if (levels[d][i] >= 0 && child >= 0) out.emplace_back(levels[d][i], child);
    }
  }
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> split_range(uint64_t offset, uint64_t bytes, uint32_t elem_size, int parts) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (parts <= 0) return out;
  uint64_t elems = bytes / elem_size;
  uint64_t base = elems / static_cast<uint64_t>(parts), extra = elems % static_cast<uint64_t>(parts);
  uint64_t at = offset;
  for (int i = 0; i < parts; ++i) {
    uint64_t n = (base + (static_cast<uint64_t>(i) < extra ? 1 : 0)) * elem_size;
    out.emplace_back(at, n);
    at += n;
  }
  return out;
}

namespace {

struct Access {
  BufferRef buf;
  uint64_t begin, end;
  size_t step;
};

bool overlaps(const Access& a, const Access& b) { return a.buf == b.buf && a.begin < b.end && b.begin < a.end; }

}  // namespace

Status validate_plan(const HostModel& model, const Plan& plan) {
  if (plan.elem_size == 0 || plan.bytes % plan.elem_size != 0) {
    return Status::invalid_argument("plan " + plan.name + ": bytes not a multiple of the element size");
  }
  auto check_buf = [&](const BufferRef& b, const std::string& where) -> Status {
    if (b.node < 0 || static_cast<size_t>(b.node) >= model.nodes().size()) {
      return Status::invalid_argument(where + ": buffer on no node");
    }
    NodeKind k = model.node(b.node).kind;
    if (k == NodeKind::kGpu && b.slot == 0) return Status();
    if (k == NodeKind::kNuma) {
      auto it = plan.host_slots.find(b.node);
      if (b.slot >= 0 && it != plan.host_slots.end() && b.slot < it->second) return Status();
    }
    return Status::invalid_argument(where + ": no buffer " + std::to_string(b.slot) + " on " + model.node(b.node).name);
  };
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    std::vector<Access> reads, writes;
    for (size_t i = 0; i < stage.steps.size(); ++i) {
      const Step& st = stage.steps[i];
      std::string where =
          "plan " + plan.name + ", stage " + std::to_string(s) + " (" + stage.label + "), step " + std::to_string(i);
      if (st.offset % plan.elem_size || st.length % plan.elem_size || st.offset + st.length > plan.bytes) {
        return Status::invalid_argument(where + ": range outside the buffer or not element-aligned");
      }
      SUMCAST_RETURN_IF_ERROR(check_buf(st.dst, where));
      SUMCAST_RETURN_IF_ERROR(check_buf(st.src, where));
      if (st.op == StepOp::kExchange) {
        if (!(st.src == st.dst) || st.nic < 0 || model.node(st.nic).kind != NodeKind::kNic) {
          return Status::invalid_argument(where + ": an exchange needs src == dst and a NIC");
        }
      } else if (st.src == st.dst) {
        return Status::invalid_argument(where + ": copy or reduce onto itself");
      }
      if (st.length == 0) continue;
      writes.push_back({st.dst, st.offset, st.offset + st.length, i});
      if (st.op != StepOp::kExchange) reads.push_back({st.src, st.offset, st.offset + st.length, i});
    }
    for (const Access& r : reads) {
      for (const Access& w : writes) {
        if (r.step != w.step && overlaps(r, w)) {
          return Status::invalid_argument("plan " + plan.name + ", stage " + std::to_string(s) + " (" + stage.label +
                                          "): step " + std::to_string(r.step) + " reads what step " +
                                          std::to_string(w.step) + " writes");
        }
      }
    }
  }
  return Status();
}

}  // namespace sumcast::topo
