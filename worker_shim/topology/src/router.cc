// Router (router.h): per endpoint pair, the widest bottleneck bandwidth first (a max-min Dijkstra),
// then a breadth-first search restricted to links at least that wide for the fewest hops.
#include "sumcast/topo/router.h"

#include <algorithm>
#include <deque>
#include <queue>

namespace sumcast::topo {
namespace {

bool is_endpoint(NodeKind k) {
  return k == NodeKind::kGpu || k == NodeKind::kNic || k == NodeKind::kNuma || k == NodeKind::kNetwork;
}
// Data may pass through these; GPUs, NICs and the network are ends only.
bool is_transit(NodeKind k) {
  return k == NodeKind::kNuma || k == NodeKind::kHostBridge || k == NodeKind::kPciSwitch || k == NodeKind::kNvSwitch;
}

}  // namespace

Router::Router(const HostModel& model) : model_(model), slot_(model.nodes().size(), -1) {
  for (size_t i = 0; i < model.nodes().size(); ++i) {
    if (is_endpoint(model.nodes()[i].kind)) {
      slot_[i] = static_cast<int>(endpoints_.size());
      endpoints_.push_back(static_cast<int>(i));
    }
  }
  routes_.resize(endpoints_.size() * endpoints_.size());
  for (size_t a = 0; a < endpoints_.size(); ++a) {
    for (size_t b = 0; b < endpoints_.size(); ++b) {
      if (a != b) routes_[a * endpoints_.size() + b] = compute(endpoints_[a], endpoints_[b]);
    }
  }
}

const Route& Router::route(int from, int to) const {
  static const Route kEmpty{{}, kUnlimited};
  int a = slot(from), b = slot(to);
  if (a < 0 || b < 0 || a == b) return kEmpty;
  return routes_[static_cast<size_t>(a) * endpoints_.size() + static_cast<size_t>(b)];
}

bool Router::nvlink_only(int from, int to) const {
  const Route& r = route(from, to);
  if (r.hops.empty()) return false;
  return std::all_of(r.hops.begin(), r.hops.end(),
                     [&](const LinkDir& h) { return is_nvlink_class(model_.link(h.link).kind); });
}

Route Router::compute(int from, int to) const {
  size_t n = model_.nodes().size();
  auto may_enter = [&](int v) { return v == to || is_transit(model_.node(v).kind); };
  // 1. Widest bottleneck from `from` to `to`.
  std::vector<double> width(n, -1);
  using Item = std::pair<double, int>;
  std::priority_queue<Item> pq;
  width[static_cast<size_t>(from)] = kUnlimited;
  pq.push({kUnlimited, from});
  while (!pq.empty()) {
    auto [w, u] = pq.top();
    pq.pop();
    if (w < width[static_cast<size_t>(u)] || u == to) continue;
    if (u != from && !is_transit(model_.node(u).kind)) continue;
    for (int id : model_.links_of(u)) {
      const Link& l = model_.link(id);
      int v = l.a == u ? l.b : l.a;
      if (!may_enter(v)) continue;
      double nw = std::min(w, l.gbps);
      if (nw > width[static_cast<size_t>(v)]) {
        width[static_cast<size_t>(v)] = nw;
        pq.push({nw, v});
      }
    }
  }
  Route route;
  double best = width[static_cast<size_t>(to)];
  if (best < 0) return route;  // unreachable: empty route, gbps 0
  // 2. Fewest hops over links at least `best` wide.
  std::vector<int> via(n, -1);  // link used to reach each node
  std::vector<bool> seen(n, false);
  std::deque<int> queue{from};
  seen[static_cast<size_t>(from)] = true;
  while (!queue.empty() && !seen[static_cast<size_t>(to)]) {
    int u = queue.front();
    queue.pop_front();
    if (u != from && !is_transit(model_.node(u).kind)) continue;
    for (int id : model_.links_of(u)) {
      const Link& l = model_.link(id);
      int v = l.a == u ? l.b : l.a;
      if (seen[static_cast<size_t>(v)] || l.gbps < best || !may_enter(v)) continue;
      seen[static_cast<size_t>(v)] = true;
      via[static_cast<size_t>(v)] = id;
      queue.push_back(v);
    }
  }
  for (int v = to; v != from;) {
    int id = via[static_cast<size_t>(v)];
    const Link& l = model_.link(id);
    int u = l.a == v ? l.b : l.a;
    route.hops.push_back({id, l.a == u});
    v = u;
  }
  std::reverse(route.hops.begin(), route.hops.end());
  route.gbps = best;
  return route;
}

}  // namespace sumcast::topo
