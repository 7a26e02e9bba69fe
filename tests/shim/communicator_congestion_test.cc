// The communicator's congestion window against the embedded service on loopback: real CNP
// datagrams, sent to a rank's UDP socket from the service's address as the appliance sends them
// for CE-marked contributions, must cut that rank's window (fewer chunks outstanding), which then
// grows back to the slot count, and never change a bit of the results, whatever the other ranks'
// windows; a CNP that fails its ICRC, or arrives with the reaction off, changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "appliance_socket.h"
#include "shim_test_util.h"
#include "sumcast/shim/communicator.h"
#include "sumcast/wire/packet.h"

namespace sumcast::shim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

// When to send a CNP, and what the decorator saw (read after the rank's thread is done).
struct CnpPlan {
  uint32_t count = 3;  // CNPs to send: the first after `gap` results, each next one `gap` results
  uint64_t gap = 8;    // after the previous one was handed on (so that each can cut)
  bool corrupt_icrc = false;
  uint64_t late_from = 40, late_to = 60;  // results after the last CNP over which peak_late is taken
};
struct CnpSeen {
  uint64_t sent = 0;               // CNP datagrams sent
  uint64_t handed_on = 0;          // ... the transport handed to the communicator
  uint64_t peak_before_first = 0;  // most chunks outstanding before the first CNP was handed on
  uint64_t peak_late = 0;          // ... between late_from and late_to results after the last one
};

// Wraps the rank's UDP transport: counts its chunks outstanding (sent, result not yet received)
// and sends CNPs at it from a socket on the appliance's address, as the plan says.
class CnpInjector final : public ForwardingTransport {
 public:
  CnpInjector(std::unique_ptr<Transport> inner, CnpPlan plan, CnpSeen* seen)
      : ForwardingTransport(std::move(inner)), plan_(std::move(plan)), seen_(seen) {}

  Result<uint32_t> add_peer(const PeerSpec& spec) override {
    if (!from_) from_ = std::make_unique<ApplianceSocket>(spec.ip);  // the transport takes CNPs from there only
    return inner_->add_peer(spec);
  }

  Status send(std::span<const OutPacket> packets) override {
    for (const OutPacket& p : packets) {
      wire::ParsedPacket pp;
      if (wire::parse_roce(std::span<const uint8_t>(p.data, p.len), &pp) != wire::ParseError::kOk) continue;
      outstanding_.insert(key(pp.hdr));
    }
    const uint64_t now = outstanding_.size();
    if (seen_->handed_on == 0) seen_->peak_before_first = std::max(seen_->peak_before_first, now);
    if (seen_->handed_on == plan_.count && results_ >= last_cnp_at_ + plan_.late_from &&
        results_ < last_cnp_at_ + plan_.late_to) {
      seen_->peak_late = std::max(seen_->peak_late, now);
    }
    return inner_->send(packets);
  }

  size_t receive(std::span<Received> out) override {
    const size_t n = inner_->receive(out);
    for (size_t i = 0; i < n; ++i) {
      const Received& r = out[i];
      if (r.cnp) {
        ++seen_->handed_on;
        last_cnp_at_ = results_;
        continue;
      }
      if (r.hdr.type != wire::MsgType::kResult) continue;
      if (outstanding_.erase(key(r.hdr)) != 0) ++results_;
      if (seen_->sent < plan_.count && seen_->sent == seen_->handed_on && results_ >= last_cnp_at_ + plan_.gap) {
        send_cnp();
      }
    }
    return n;
  }

 private:
  static uint64_t key(const wire::SumcastHeader& h) { return uint64_t{h.slot} << 32 | h.round; }
  void send_cnp() {
    const Endpoint me = inner_->local_endpoint();
    auto b = from_->cnp(me, me.qpn);
    if (plan_.corrupt_icrc) b.back() ^= 0x5A;
    from_->send_to(me, b);
    ++seen_->sent;
  }

  CnpPlan plan_;
  CnpSeen* seen_;
  std::unique_ptr<ApplianceSocket> from_;  // on the first appliance's address
  std::set<uint64_t> outstanding_;         // (slot, round) of chunks sent and not answered
  uint64_t results_ = 0;
  uint64_t last_cnp_at_ = 0;  // results when the latest CNP was handed on
};

constexpr int kWorld = 2;
constexpr uint16_t kSlots = 32;
constexpr size_t kCount = size_t{1} << 18;  // 1024 chunks of 1 KiB: enough to regrow from 4 to 32

struct Outcome {
  std::vector<std::string> errors;
  std::vector<CommStats> stats;
  std::vector<std::vector<std::pair<std::string, uint64_t>>> lists;
};

// One exact fp32 all-reduce; rank 0's transport gets CNPs by `plan`, and `configure` adjusts every
// rank's config (wrap_transport is rank 0's injector unless configure replaces it).
Outcome run(const std::string& job, const CnpPlan& plan, CnpSeen* seen,
            const std::function<void(int, CommConfig&)>& configure = {}) {
  auto service = start_service();
  Outcome out{std::vector<std::string>(kWorld), std::vector<CommStats>(kWorld),
              std::vector<std::vector<std::pair<std::string, uint64_t>>>(kWorld)};
  if (!service) return out;
  Barrier done(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({service.get()}, job, static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    c.slots = kSlots;
    c.window_cut_interval_us = 1;  // every CNP cuts: the test controls how many arrive
    if (rank == 0) {
      c.wrap_transport = [plan, seen](std::unique_ptr<Transport> inner) {
        return std::make_unique<CnpInjector>(std::move(inner), plan, seen);
      };
    }
    if (configure) configure(rank, c);
    auto comm = Communicator::create(c);
    const auto r = static_cast<size_t>(rank);
    if (!comm.ok()) {
      out.errors[r] = comm.status().to_string();
      done.arrive_and_wait();
      return;
    }
    auto buf = make_input(wire::Dtype::kFp32, kCount, rank, 5);
    Status st = (*comm)->allreduce(buf.data(), buf.data(), kCount);
    const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, kCount, kWorld, 5);
    if (!st.ok() || first_mismatch(buf, want, 4) != -1) out.errors[r] = st.ok() ? "wrong result" : st.to_string();
    out.stats[r] = (*comm)->stats();
    out.lists[r] = (*comm)->stat_list();
    done.arrive_and_wait();  // nobody leaves while another rank may still need an answer
  });
  return out;
}

uint64_t stat(const std::vector<std::pair<std::string, uint64_t>>& list, const std::string& name) {
  for (const auto& [n, v] : list) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

// Three CNPs early in a call: rank 0's window halves three times (32 -> 4), fewer chunks are
// outstanding afterwards than before, the window grows back to 32 within the call, and both
// ranks' results are exact although their windows differ.
TEST(CommunicatorCongestion, CnpsCutTheWindowWhichRegrowsAndResultsStayExact) {
  CnpSeen seen;
  const Outcome o = run("cnp-cut", CnpPlan{}, &seen);
  for (int i = 0; i < kWorld; ++i) EXPECT_EQ(o.errors[static_cast<size_t>(i)], "") << "rank " << i;
  EXPECT_EQ(seen.sent, 3u);
  EXPECT_EQ(seen.handed_on, 3u);
  const CommStats& s = o.stats[0];
  EXPECT_EQ(s.transport.cnps, 3u);
  EXPECT_EQ(s.window_cuts, 3u);
  EXPECT_LE(s.window_min, 8u);  // 32 -> 16 -> 8 -> 4, or one slot more where it grew between two cuts
  EXPECT_GE(s.window_grows, 20u);
  EXPECT_EQ(s.window_now, kSlots) << "the window did not grow back to the slot count";
  EXPECT_EQ(seen.peak_before_first, kSlots);
  EXPECT_GE(seen.peak_late, 1u);
  EXPECT_LE(seen.peak_late, 16u) << "the cut window did not limit the chunks outstanding";
  // The same counters by name, as tools and the C API list them.
  EXPECT_EQ(stat(o.lists[0], "cnps_received"), 3u);
  EXPECT_EQ(stat(o.lists[0], "window_cuts"), 3u);
  EXPECT_EQ(stat(o.lists[0], "window_now"), kSlots);
  EXPECT_EQ(stat(o.lists[0], "window_min"), s.window_min);
  // Rank 1 got no CNP: its window never moved.
  EXPECT_EQ(o.stats[1].transport.cnps, 0u);
  EXPECT_EQ(o.stats[1].window_cuts, 0u);
  EXPECT_EQ(o.stats[1].window_min, kSlots);
}

// CNPs whose ICRC is wrong are dropped and counted as bad_icrc: no cut.
TEST(CommunicatorCongestion, CnpWithABadIcrcIsDroppedAndCounted) {
  CnpSeen seen;
  CnpPlan plan;
  plan.count = 1;  // a dropped CNP is never handed on, so the next would never be sent
  plan.corrupt_icrc = true;
  const Outcome o = run("cnp-bad", plan, &seen);
  EXPECT_EQ(o.errors[0], "");
  EXPECT_EQ(o.errors[1], "");
  EXPECT_EQ(seen.sent, 1u);
  EXPECT_EQ(seen.handed_on, 0u);
  EXPECT_EQ(o.stats[0].transport.cnps, 0u);
  EXPECT_EQ(o.stats[0].transport.drops[static_cast<size_t>(DropReason::kBadIcrc)], 1u);
  EXPECT_EQ(o.stats[0].window_cuts, 0u);
  EXPECT_EQ(o.stats[0].window_min, kSlots);
}

// With the reaction off, CNPs are counted and the window stays at the slot count.
TEST(CommunicatorCongestion, ReactionOffCountsCnpsOnly) {
  CnpSeen seen;
  const Outcome o = run("cnp-off", CnpPlan{}, &seen, [](int, CommConfig& c) { c.cnp_reaction = false; });
  EXPECT_EQ(o.errors[0], "");
  EXPECT_EQ(o.errors[1], "");
  EXPECT_EQ(o.stats[0].transport.cnps, 3u);
  EXPECT_EQ(o.stats[0].window_cuts, 0u);
  EXPECT_EQ(o.stats[0].window_min, kSlots);
}

// Marks the results numbered [from, to) (in arrival order) as having arrived with ECN = CE, as
// the UDP transport does when IP_RECVTOS says so (its own test checks that part).
class CeMarker final : public ForwardingTransport {
 public:
  CeMarker(std::unique_ptr<Transport> inner, uint64_t from, uint64_t to)
      : ForwardingTransport(std::move(inner)), from_(from), to_(to) {}
  size_t receive(std::span<Received> out) override {
    const size_t n = inner_->receive(out);
    for (size_t i = 0; i < n; ++i) {
      if (out[i].cnp || out[i].hdr.type != wire::MsgType::kResult) continue;
      out[i].ce = results_ >= from_ && results_ < to_;
      ++results_;
    }
    return n;
  }

 private:
  uint64_t from_, to_;
  uint64_t results_ = 0;
};

// Results marked CE cut the window as CNPs do (a burst of them within the cut interval once),
// and the window grows back; with the reaction off they change nothing. Exact either way.
TEST(CommunicatorCongestion, CeMarkedResultsCutTheWindowOnceAnInterval) {
  for (const bool reaction : {true, false}) {
    SCOPED_TRACE(reaction ? "reaction on" : "reaction off");
    CnpSeen seen;
    CnpPlan none;
    none.count = 0;
    const Outcome o = run("ce-results", none, &seen, [&](int rank, CommConfig& c) {
      c.cnp_reaction = reaction;
      c.window_cut_interval_us = 60'000'000;  // the five marks fall into one interval: one cut
      if (rank == 0) {
        c.wrap_transport = [](std::unique_ptr<Transport> inner) {
          return std::make_unique<CeMarker>(std::move(inner), 10, 15);
        };
      }
    });
    EXPECT_EQ(o.errors[0], "");
    EXPECT_EQ(o.errors[1], "");
    EXPECT_EQ(o.stats[0].window_cuts, reaction ? 1u : 0u);
    EXPECT_EQ(o.stats[0].window_min, reaction ? kSlots / 2 : kSlots);
    EXPECT_EQ(o.stats[0].window_now, kSlots);
    EXPECT_EQ(o.stats[1].window_cuts, 0u);
  }
}

// Small windows on both ranks (one slot at times, and different from each other) under loss
// both ways: every chunk still completes exactly. A rank whose window is full of later chunks
// while the oldest one waits would deadlock with a rank whose one slot holds that oldest chunk,
// if the window could hold back the oldest chunk not yet answered; and with one slot a lost
// chunk has no later one to reveal it, so only the stall probe resends it.
TEST(CommunicatorCongestion, SmallWindowsUnderLossStayExactWithoutDeadlock) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    CnpSeen seen0, seen1;
    ImpairmentCounters impairments;
    CnpPlan plan;
    plan.count = 40;
    plan.gap = 3;
    const Outcome o = run("cnp-loss", plan, &seen0, [&](int rank, CommConfig& c) {
      c.window_cut_percent = 10;  // 32 -> 3 -> 1
      c.rto_initial_us = 2000;
      c.op_timeout_ms = 10000;
      Impairment imp;
      imp.send_loss = 0.02;
      imp.recv_loss = 0.05;
      imp.seed = seed * 10 + static_cast<uint64_t>(rank);
      auto wrap = c.wrap_transport;
      if (rank == 1) {
        CnpPlan p1 = plan;
        p1.gap = 5;
        wrap = [p1, s = &seen1](std::unique_ptr<Transport> inner) {
          return std::make_unique<CnpInjector>(std::move(inner), p1, s);
        };
      }
      c.wrap_transport = [wrap, imp, &impairments](std::unique_ptr<Transport> inner) {
        std::unique_ptr<Transport> t = std::make_unique<ImpairedTransport>(std::move(inner), imp, &impairments);
        return wrap(std::move(t));
      };
    });
    EXPECT_EQ(o.errors[0], "");
    EXPECT_EQ(o.errors[1], "");
    EXPECT_GE(impairments.dropped_tx.load() + impairments.dropped_rx.load(), 1u);
    for (int i = 0; i < kWorld; ++i) {
      EXPECT_GE(o.stats[static_cast<size_t>(i)].transport.cnps, 2u) << "rank " << i;
      EXPECT_EQ(o.stats[static_cast<size_t>(i)].window_min, 1u) << "rank " << i;
    }
  }
}

}  // namespace
}  // namespace sumcast::shim
