// Scale-out through the communicator (docs/scale-out.md): a job whose aggregator list holds
// "appliances" and "host aggregators" (here all embedded services on loopback), split by the
// optimal placement. Every chunk is summed exactly once, by the aggregator whose range holds it.
// With failover off, the loss of any one aggregator fails every rank's call with an error naming
// it; with failover (docs/failover.md), every call completes with the exact sum.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shim_test_util.h"
#include "sumcast/shim/placement.h"

namespace sumcast::shim {
namespace {

using namespace sumcast::shim::testing;  // NOLINT(google-build-using-namespace)

constexpr int kWorld = 4;

// k appliances (aggregators 0..k-1) then one aggregator per host (k..k+3), equal bandwidths.
PlacementInput cluster(int k) {
  PlacementInput in;
  in.host_bandwidth.assign(kWorld, 1.0);
  for (int j = 0; j < k; ++j) in.aggregators.push_back({AggregatorKind::kAppliance, 1.0, -1});
  for (int h = 0; h < kWorld; ++h) in.aggregators.push_back({AggregatorKind::kHost, 0, h});
  return in;
}

struct Job {
  std::vector<std::unique_ptr<embedded::Service>> services;  // one per aggregator
  std::vector<double> fraction;
};

Job start_job(int k) {
  Job job;
  auto p = optimal_placement(cluster(k));
  EXPECT_TRUE(p.ok());
  if (!p.ok()) return job;
  job.fraction = p->fraction;
  for (size_t x = 0; x < job.fraction.size(); ++x) {
    embedded::ServiceOptions so;
    so.job_timeout_ms = 60000;  // failures must come from the stopped aggregator, not a timeout
    job.services.push_back(start_service(so));
  }
  return job;
}

// The communicator's list: the aggregators with a share, weighted by it (as sumcast-allreduce does).
CommConfig config_for(const Job& job, const std::string& name, int rank, std::vector<size_t>* used) {
  CommConfig c = base_config({}, name, static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
  if (used != nullptr) used->clear();
  for (size_t x = 0; x < job.services.size(); ++x) {
    if (job.fraction[x] <= 1e-9) continue;
    c.appliances.push_back({job.services[x]->control_address(), job.fraction[x]});
    if (used != nullptr) used->push_back(x);
  }
  return c;
}

class MixedPlacement : public ::testing::TestWithParam<int> {};

// n = 4 ranks, k = 0, 1, 2, 4 appliances plus 4 host aggregators: exact results for sizes that do
// and do not divide evenly, and each aggregator's engine summed exactly its range of every call,
// once per rank.
TEST_P(MixedPlacement, EveryChunkIsSummedOnceByItsOwner) {
  const int k = GetParam();
  Job job = start_job(k);
  for (const auto& s : job.services) ASSERT_TRUE(s);
  const std::vector<size_t> counts = {1, 7, 1000, 65537, 300001};
  std::vector<size_t> used;
  (void)config_for(job, "mixed", 0, &used);
  // k >= n: the hosts get nothing; k = 0: only the hosts aggregate.
  EXPECT_EQ(used.size(), static_cast<size_t>(k >= kWorld ? k : k + kWorld));
  std::vector<std::string> errors(kWorld);
  run_ranks(kWorld, [&](int rank) {
    auto comm = Communicator::create(config_for(job, "mixed", rank, nullptr));
    if (!comm.ok()) {
      errors[static_cast<size_t>(rank)] = comm.status().to_string();
      return;
    }
    int salt = 0;
    for (size_t count : counts) {
      auto buf = make_input(wire::Dtype::kFp32, count, rank, ++salt);
      std::vector<uint8_t> out(buf.size(), 0xA5);
      Status st = (*comm)->allreduce(buf.data(), out.data(), count);
      const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, count, kWorld, salt);
      if (!st.ok() || first_mismatch(out, want, 4) != -1) {
        errors[static_cast<size_t>(rank)] = st.ok() ? "wrong result at count " + std::to_string(count) : st.to_string();
        return;
      }
    }
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  // What each aggregator must have summed: its contiguous range of every call, from every rank.
  std::vector<uint64_t> units;
  for (size_t x : used) units.push_back(weight_units(job.fraction[x]));
  std::vector<uint64_t> want(job.services.size(), 0);
  for (size_t count : counts) {
    const auto ranges = contiguous_ranges(count, units);
    for (size_t i = 0; i < used.size(); ++i) want[used[i]] += (ranges[i].second - ranges[i].first) * 4 * kWorld;
  }
  for (size_t x = 0; x < job.services.size(); ++x) {
    EXPECT_EQ(job.services[x]->engine_counters().payload_bytes.load(), want[x]) << "aggregator " << x;
  }
}

INSTANTIATE_TEST_SUITE_P(Appliances, MixedPlacement, ::testing::Values(0, 1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& i) { return "k" + std::to_string(i.param); });

// Whichever aggregator is lost mid-call (an appliance or a host's), every rank's call fails, and
// its error names that aggregator's address.
class AggregatorLost : public ::testing::TestWithParam<int> {};

TEST_P(AggregatorLost, EveryRankFailsNamingIt) {
  const int k = 2;
  Job job = start_job(k);
  for (const auto& s : job.services) ASSERT_TRUE(s);
  const auto victim = static_cast<size_t>(GetParam());  // 0: an appliance; k + 1: host 1's
  ASSERT_GT(job.fraction[victim], 0.0);
  const std::string victim_address = job.services[victim]->control_address();
  std::promise<void> stalled;
  std::future<void> stalled_f = stalled.get_future();
  std::atomic<bool> fired{false};
  ImpairmentCounters impairments;
  std::thread stopper([&] {
    stalled_f.wait();  // rank 3 stopped sending: no call can finish before the victim goes
    job.services[victim]->stop();
  });
  std::vector<Status> results(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = config_for(job, "lost", rank, nullptr);
    c.op_timeout_ms = 60000;
    c.failover = CommConfig::Failover::kOff;
    if (rank == 3) {
      Impairment imp;
      imp.blackhole_after = 200;
      imp.on_blackhole = [&] {
        if (!fired.exchange(true)) stalled.set_value();
      };
      c.wrap_transport = impair(imp, &impairments);
    }
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      results[static_cast<size_t>(rank)] = comm.status();
      return;
    }
    const size_t count = size_t{1} << 18;
    auto buf = make_input(wire::Dtype::kFp32, count, rank, 1);
    results[static_cast<size_t>(rank)] = (*comm)->allreduce(buf.data(), buf.data(), count);
  });
  if (!fired.exchange(true)) stalled.set_value();  // never stalled (a failure above): unblock the stopper
  stopper.join();
  for (int r = 0; r < kWorld; ++r) {
    const Status& st = results[static_cast<size_t>(r)];
    EXPECT_FALSE(st.ok()) << "rank " << r;
    EXPECT_NE(st.message().find(victim_address), std::string::npos) << "rank " << r << ": " << st.to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(Victims, AggregatorLost, ::testing::Values(0, 3), [](const ::testing::TestParamInfo<int>& i) {
  return i.param == 0 ? std::string("Appliance") : std::string("HostAggregator");
});

// Drops every packet to and from one transport peer once `cut` is set: the aggregator's link is
// gone while its control connection stays up (so only silence tells).
// With `deaf`, only what comes from it is dropped, and `dropped` counts the distinct rounds
// (slot, round) of the results dropped: repeated answers to this rank's probes of one round
// count once, so that the count says how many rounds it did not hear.
class CutPeer final : public ForwardingTransport {
 public:
  CutPeer(std::unique_ptr<Transport> inner, uint32_t peer, std::atomic<bool>* cut, bool deaf = false,
          std::atomic<uint64_t>* dropped = nullptr)
      : ForwardingTransport(std::move(inner)), peer_(peer), cut_(cut), deaf_(deaf), dropped_(dropped) {}
  Status send(std::span<const OutPacket> packets) override {
    if (deaf_ || !cut_->load()) return inner_->send(packets);
    std::vector<OutPacket> keep;
    for (const OutPacket& p : packets) {
      if (p.peer != peer_) keep.push_back(p);
    }
    return inner_->send(keep);
  }
  size_t receive(std::span<Received> out) override {
    const size_t n = inner_->receive(out);
    if (!cut_->load()) return n;
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      if (out[i].peer != peer_) {
        out[k++] = out[i];
      } else if (!out[i].cnp && out[i].hdr.type == wire::MsgType::kResult) {
        rounds_.insert((uint64_t{out[i].hdr.slot} << 32) | out[i].hdr.round);
      }
    }
    if (dropped_ != nullptr) *dropped_ = rounds_.size();
    return k;
  }

 private:
  uint32_t peer_;
  std::atomic<bool>* cut_;
  bool deaf_;
  std::atomic<uint64_t>* dropped_;
  std::set<uint64_t> rounds_;  // (slot, round) of the results dropped
};

// Counts the results read from one transport peer once `cut` is set.
class CountFrom final : public ForwardingTransport {
 public:
  CountFrom(std::unique_ptr<Transport> inner, uint32_t peer, std::atomic<bool>* cut, std::atomic<uint64_t>* count)
      : ForwardingTransport(std::move(inner)), peer_(peer), cut_(cut), count_(count) {}
  size_t receive(std::span<Received> out) override {
    const size_t n = inner_->receive(out);
    if (!cut_->load()) return n;
    for (size_t i = 0; i < n; ++i) {
      if (out[i].peer == peer_ && !out[i].cnp && out[i].hdr.type == wire::MsgType::kResult) ++*count_;
    }
    return n;
  }

 private:
  uint32_t peer_;
  std::atomic<bool>* cut_;
  std::atomic<uint64_t>* count_;
};

// Counts rank 0's packets and calls `fire` once, after `after` of them: mid-call.
class Trigger final : public ForwardingTransport {
 public:
  Trigger(std::unique_ptr<Transport> inner, uint64_t after, std::function<void()> fire)
      : ForwardingTransport(std::move(inner)), after_(after), fire_(std::move(fire)) {}
  Status send(std::span<const OutPacket> packets) override {
    sent_ += packets.size();
    if (!fired_ && sent_ >= after_) {
      fired_ = true;
      fire_();
    }
    return inner_->send(packets);
  }

 private:
  uint64_t after_;
  std::function<void()> fire_;
  uint64_t sent_ = 0;
  bool fired_ = false;
};

// kStopped: rank 0 stops hearing it, and once rank 0 missed a result, it stops (aborting its
// jobs); kCut: its link is cut; kDeafRank: rank 3 stops hearing it (so the other ranks complete
// rounds rank 3 lacks, and must replay them), then it stops.
enum class Loss { kStopped, kCut, kDeafRank };
struct FailoverCase {
  int k;          // appliances before the 4 host aggregators
  size_t victim;  // index among the aggregators used
  Loss loss;
  const char* name;
  // Deterministic summation and non-integer inputs of mixed magnitudes: every rank's result must
  // be bitwise the rank-order sum, which the lost aggregator would have produced.
  bool deterministic = false;
};

// A non-integer input of mixed magnitude (sums depend on the order of additions).
float real_input(int rank, size_t i, int call) {
  uint64_t h = (static_cast<uint64_t>(rank) << 48) ^ (static_cast<uint64_t>(call) << 40) ^ i;
  h *= 0x9E3779B97F4A7C15ull;
  h ^= h >> 31;
  const float v =
      std::ldexp(1.0f + static_cast<float>(h & 0xFFFFFF) / 16777216.0f, static_cast<int>((h >> 24) % 24) - 12);
  return (h >> 60) & 1 ? -v : v;
}

std::vector<uint8_t> real_inputs(size_t count, int rank, int call) {
  std::vector<uint8_t> v(count * 4);
  for (size_t i = 0; i < count; ++i) {
    const float x = real_input(rank, i, call);
    std::memcpy(v.data() + i * 4, &x, 4);
  }
  return v;
}

std::vector<uint8_t> rank_order_sums(size_t count, int call) {
  std::vector<uint8_t> v(count * 4);
  for (size_t i = 0; i < count; ++i) {
    float acc = real_input(0, i, call);
    for (int r = 1; r < kWorld; ++r) acc += real_input(r, i, call);
    std::memcpy(v.data() + i * 4, &acc, 4);
  }
  return v;
}

// The rank's communicator; nullptr where it could not be created, with the error recorded and the
// rank arrived at `done` (which every rank does before it leaves).
std::unique_ptr<Communicator> create_or_record(const CommConfig& c, std::string* error, Barrier* done) {
  auto comm = Communicator::create(c);
  if (comm.ok()) return std::move(comm).value();
  *error = comm.status().to_string();
  done->arrive_and_wait();
  return nullptr;
}

// What went wrong in call `i` (empty if nothing): its error, or the first element not `want`.
std::string call_error(int i, const Status& st, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (!st.ok()) return "call " + std::to_string(i) + ": " + st.to_string();
  if (long bad = first_mismatch(got, want, 4); bad != -1) {
    return "call " + std::to_string(i) + ": wrong sum at " + std::to_string(bad);
  }
  return "";
}

// n = 4, calls of integer-valued data; mid-way through the third call, one aggregator stops (its
// jobs abort) or its link is cut (it goes silent): every call on every rank completes with the
// exact sum, each rank failed over once, and the chunks some rank lacked were replayed.
class AggregatorFailover : public ::testing::TestWithParam<FailoverCase> {};

TEST_P(AggregatorFailover, EveryCallCompletesExactly) {
  const FailoverCase fc = GetParam();
  Job job = start_job(fc.k);
  for (const auto& s : job.services) ASSERT_TRUE(s);
  std::vector<size_t> used;
  (void)config_for(job, "failover", 0, &used);
  ASSERT_LT(fc.victim, used.size());
  const std::string victim_address = job.services[used[fc.victim]]->control_address();
  const size_t count = size_t{1} << 17;  // 512 KiB of fp32: 512 packets per rank per call
  const int calls = 8;
  std::atomic<bool> cut{false};
  std::atomic<uint64_t> deaf_dropped{0};
  std::array<std::atomic<uint64_t>, 3> heard_since_cut{};  // ranks 0-2: the victim's results read since
  std::promise<void> go;
  std::future<void> go_f = go.get_future();
  std::thread stopper([&] {
    go_f.wait();
    // When to stop it (bounded: the test checks that what it waits for happened).
    // kDeafRank: once the others completed rounds rank 3 does not hear, and read them (a result
    // still in a socket when the stop's abort is read is a round that rank lacks too, and with
    // every such round lacked by all, nobody replays a completed one).
    // kStopped: once rank 0 missed one result of it, so that rank 0 has a chunk outstanding on it
    // when the stop is read (a stop that falls between two calls' shares of the victim finds none
    // outstanding anywhere, and nothing is replayed: seen once in CI).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto heard = [&] {
      return std::all_of(heard_since_cut.begin(), heard_since_cut.end(), [](const auto& h) { return h.load() >= 8; });
    };
    auto ready = [&] {
      return fc.loss == Loss::kDeafRank ? deaf_dropped.load() >= 16 && heard() : deaf_dropped.load() >= 1;
    };
    while (fc.loss != Loss::kCut && !ready() && std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    if (fc.loss != Loss::kCut) job.services[used[fc.victim]]->stop();
  });
  std::atomic<bool> fired{false};
  auto fire = [&] {
    if (fired.exchange(true)) return;
    cut = true;
    go.set_value();
  };
  std::vector<std::string> errors(kWorld);
  std::vector<CommStats> stats(kWorld);
  std::vector<std::vector<FailoverEvent>> events(kWorld);
  Barrier done(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = config_for(job, "failover", rank, nullptr);
    c.failover_after_ms = 300;
    c.op_timeout_ms = 20000;
    c.failover_timeout_ms = 10000;
    c.deterministic = fc.deterministic;
    const auto peer = static_cast<uint32_t>(fc.victim);
    c.wrap_transport = [&, rank, peer](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
      if (fc.loss == Loss::kCut) t = std::make_unique<CutPeer>(std::move(t), peer, &cut);
      if ((fc.loss == Loss::kDeafRank && rank == 3) || (fc.loss == Loss::kStopped && rank == 0))
        t = std::make_unique<CutPeer>(std::move(t), peer, &cut, true, &deaf_dropped);
      if (fc.loss == Loss::kDeafRank && rank != 3)
        t = std::make_unique<CountFrom>(std::move(t), peer, &cut, &heard_since_cut[static_cast<size_t>(rank)]);
      if (rank == 0) t = std::make_unique<Trigger>(std::move(t), 2 * 512 + 200, fire);  // in the third call
      return t;
    };
    auto comm = create_or_record(c, &errors[static_cast<size_t>(rank)], &done);
    if (!comm) return;
    for (int i = 1; i <= calls && errors[static_cast<size_t>(rank)].empty(); ++i) {
      auto buf = fc.deterministic ? real_inputs(count, rank, i) : make_input(wire::Dtype::kFp32, count, rank, i);
      Status st = comm->allreduce(buf.data(), buf.data(), count);  // in place
      const auto want = fc.deterministic ? rank_order_sums(count, i)
                                         : make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, count, kWorld, i);
      errors[static_cast<size_t>(rank)] = call_error(i, st, buf, want);
    }
    stats[static_cast<size_t>(rank)] = comm->stats();
    events[static_cast<size_t>(rank)] = comm->failovers();
    done.arrive_and_wait();  // no rank leaves a job another still retransmits on
  });
  fire();  // never fired (a failure above): unblock the stopper
  stopper.join();
  uint64_t replayed = 0;
  for (int r = 0; r < kWorld; ++r) {
    const auto ri = static_cast<size_t>(r);
    EXPECT_EQ(errors[ri], "") << "rank " << r;
    EXPECT_EQ(stats[ri].failovers, 1u) << "rank " << r;
    ASSERT_EQ(events[ri].size(), 1u) << "rank " << r;
    EXPECT_EQ(events[ri][0].lost, victim_address) << "rank " << r;
    EXPECT_NE(events[ri][0].new_home, victim_address) << "rank " << r;
    EXPECT_FALSE(events[ri][0].reason.empty()) << "rank " << r;
    replayed += stats[ri].replayed_chunks;
    std::printf("rank %d: %s -> %s after %llu ms, %llu replayed: %s\n", r, events[ri][0].lost.c_str(),
                events[ri][0].new_home.c_str(), static_cast<unsigned long long>(events[ri][0].ms),
                static_cast<unsigned long long>(events[ri][0].replayed), events[ri][0].reason.c_str());
  }
  EXPECT_GT(replayed, 0u);
  // The others resent rounds they had completed, for rank 3. Rank 3 may resend some too: a result
  // the aggregator sent before the cut that another rank had not read when it heard of the stop
  // (on its control connection, before its socket's queue) is a round rank 3 has and that rank
  // lacks. Which rank lacks what is timing; that the resent rounds sum exactly is checked above.
  if (fc.loss == Loss::kDeafRank) {
    uint64_t held = 0;
    for (int r = 0; r < 3; ++r) held += stats[static_cast<size_t>(r)].replayed_completed;
    EXPECT_GT(held, 0u);
  }
  if (fc.loss == Loss::kCut) {  // some rank heard the silence; the others may have heard of it from the victim
    bool silence = false;
    for (const auto& e : events)
      silence = silence || (!e.empty() && e[0].reason.find("answered nothing") != std::string::npos);
    EXPECT_TRUE(silence);
  }
}

INSTANTIATE_TEST_SUITE_P(Losses, AggregatorFailover,
                         ::testing::Values(FailoverCase{2, 0, Loss::kStopped, "ApplianceStopped"},
                                           FailoverCase{2, 0, Loss::kCut, "ApplianceCut"},
                                           FailoverCase{2, 3, Loss::kStopped, "HostAggregatorStopped"},
                                           FailoverCase{1, 0, Loss::kStopped, "ApplianceToHosts"},
                                           FailoverCase{2, 0, Loss::kDeafRank, "RoundsOneRankLacks"},
                                           FailoverCase{2, 0, Loss::kDeafRank, "DeterministicBitwise", true}),
                         [](const ::testing::TestParamInfo<FailoverCase>& i) { return std::string(i.param.name); });

// A rank late to a call by several times failover_after_ms is no lost aggregator: the others'
// liveness probes are answered (the aggregators hold their last completed rounds), nobody fails
// over, every call is exact.
TEST(FailoverLiveness, ALateRankIsNoLoss) {
  Job job = start_job(2);
  for (const auto& s : job.services) ASSERT_TRUE(s);
  const size_t count = size_t{1} << 16;
  std::vector<std::string> errors(kWorld);
  std::vector<CommStats> stats(kWorld);
  Barrier done(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = config_for(job, "late", rank, nullptr);
    c.failover_after_ms = 200;
    auto comm = create_or_record(c, &errors[static_cast<size_t>(rank)], &done);
    if (!comm) return;
    for (int i = 1; i <= 4 && errors[static_cast<size_t>(rank)].empty(); ++i) {
      // The scenario, not a synchronisation: rank 3 computes for 1 s before its third call.
      if (rank == 3 && i == 3) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      auto buf = make_input(wire::Dtype::kFp32, count, rank, i);
      Status st = comm->allreduce(buf.data(), buf.data(), count);
      errors[static_cast<size_t>(rank)] =
          call_error(i, st, buf, make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, count, kWorld, i));
    }
    stats[static_cast<size_t>(rank)] = comm->stats();
    done.arrive_and_wait();
  });
  uint64_t probes = 0;
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(stats[static_cast<size_t>(r)].failovers, 0u) << "rank " << r;
    probes += stats[static_cast<size_t>(r)].liveness_probes;
  }
  EXPECT_GT(probes, 0u);  // the others did probe while rank 3 was away
}

// An embedded service in a forked process of its own, so that it can be frozen (SIGSTOP): its
// connections stay up, it answers nothing and aborts nothing. Killed on destruction.
class FrozenableService {
 public:
  FrozenableService() {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {  // the child: serve until killed (by the destructor, or with its parent)
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      close(fds[0]);
      embedded::ServiceOptions so;
      so.job_timeout_ms = 60000;
      const auto s = start_service(so);
      const std::string address = s ? s->control_address() : "";
      (void)!write(fds[1], address.c_str(), address.size() + 1);
      for (;;) pause();
    }
    (void)unique_loopback_ip();  // the address the child took first: not this process's next service's
    close(fds[1]);
    char buf[64] = {};
    size_t got = 0;
    pollfd p{fds[0], POLLIN, 0};
    while (pid_ > 0 && got < sizeof(buf) - 1 && poll(&p, 1, 20000) == 1) {
      const ssize_t n = read(fds[0], buf + got, sizeof(buf) - 1 - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
      if (std::memchr(buf, '\0', got) != nullptr) break;
    }
    close(fds[0]);
    address_ = buf;
  }
  ~FrozenableService() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  FrozenableService(const FrozenableService&) = delete;
  FrozenableService& operator=(const FrozenableService&) = delete;
  const std::string& address() const { return address_; }  // empty: it did not start
  void freeze() const { kill(pid_, SIGSTOP); }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

// A rank one call behind when an aggregator freezes: rank 3 hears nothing from aggregator A
// (results lost to it) in call 2, which ranks 0-2 complete; they freeze A and go on to call 3,
// one element, which goes to aggregator B only and waits there for rank 3. Nothing of theirs is
// outstanding on A, yet rank 3's agreement on B needs them: they must notice A's silence from
// probes of their own. They used not to, the agreement timed out and every rank failed (as a
// clean-clone run of allreduce_failover_loss1 did once, whose barrier calls are such calls).
TEST(FailoverLiveness, RanksAheadNoticeAFrozenAggregatorTheyWaitNothingOn) {
  FrozenableService a;
  ASSERT_FALSE(a.address().empty()) << "the forked service did not start";
  auto b = start_service([] {
    embedded::ServiceOptions so;
    so.job_timeout_ms = 60000;
    return so;
  }());
  ASSERT_TRUE(b);
  const size_t count = 4096;  // 8 KiB per aggregator: one window, all of it sent at the call's start
  std::atomic<bool> deaf{false};
  std::promise<void> frozen;
  std::shared_future<void> frozen_f = frozen.get_future().share();
  Barrier ahead(3);
  std::vector<std::string> errors(kWorld);
  std::vector<CommStats> stats(kWorld);
  std::vector<std::vector<FailoverEvent>> events(kWorld);
  Barrier done(kWorld);
  run_ranks(kWorld, [&](int rank) {
    const auto ri = static_cast<size_t>(rank);
    CommConfig c = base_config({}, "behind", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    c.appliances = {{a.address(), 1.0}, {b->control_address(), 1.0}};
    c.failover_after_ms = 300;
    c.op_timeout_ms = 20000;
    c.failover_timeout_ms = 5000;  // what the agreement waited for before every rank failed
    if (rank == 3) {
      c.wrap_transport = [&](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
        return std::make_unique<CutPeer>(std::move(t), /*peer=*/0, &deaf, /*deaf=*/true);
      };
    }
    auto comm = create_or_record(c, &errors[ri], &done);
    if (!comm) return;
    auto call = [&](int i, size_t n) {
      auto buf = make_input(wire::Dtype::kFp32, n, rank, i);
      Status st;
      if (rank == 3 && i == 2) {
        // Its contributions go out with the call's start; its communicator then does nothing
        // (so declares nothing) until A is frozen: the order of events is fixed.
        deaf = true;
        auto id = comm->start_allreduce(buf.data(), buf.data(), n);
        frozen_f.wait();
        st = id.ok() ? comm->wait(*id) : id.status();
      } else {
        st = comm->allreduce(buf.data(), buf.data(), n);
      }
      errors[ri] = call_error(i, st, buf, make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, n, kWorld, i));
    };
    call(1, count);  // every rank completes rounds on both (what liveness probes resend)
    if (errors[ri].empty()) call(2, count);
    if (rank != 3) {
      ahead.arrive_and_wait();
      if (rank == 0) {
        a.freeze();
        frozen.set_value();
      }
    }
    if (errors[ri].empty()) call(3, 1);
    if (errors[ri].empty()) call(4, count);  // the job goes on over B alone
    stats[ri] = comm->stats();
    events[ri] = comm->failovers();
    done.arrive_and_wait();
  });
  for (int r = 0; r < kWorld; ++r) {
    const auto ri = static_cast<size_t>(r);
    EXPECT_EQ(errors[ri], "") << "rank " << r;
    ASSERT_EQ(events[ri].size(), 1u) << "rank " << r;
    EXPECT_EQ(events[ri][0].lost, a.address()) << "rank " << r;
    EXPECT_EQ(events[ri][0].new_home, b->control_address()) << "rank " << r;
    if (r != 3) {
      EXPECT_NE(events[ri][0].reason.find("while a call waited elsewhere"), std::string::npos)
          << "rank " << r << ": " << events[ri][0].reason;
    }
    std::printf("rank %d: %s lost after %llu ms (%s), %llu replayed\n", r, events[ri][0].lost.c_str(),
                static_cast<unsigned long long>(events[ri][0].ms), events[ri][0].reason.c_str(),
                static_cast<unsigned long long>(events[ri][0].replayed));
  }
}

// Runs `stop` on a thread of its own once fire() was called (by a transport, mid-call). finish()
// fires it if nothing did (a failure before) and joins.
class StopOnFire {
 public:
  explicit StopOnFire(std::function<void()> stop)
      : stop_(std::move(stop)), thread_([this] {
          go_f_.wait();
          stop_();
        }) {}
  ~StopOnFire() { finish(); }
  void fire() {
    if (!fired_.exchange(true)) go_.set_value();
  }
  void finish() {
    fire();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::promise<void> go_;
  std::future<void> go_f_ = go_.get_future();
  std::atomic<bool> fired_{false};
  std::function<void()> stop_;
  std::thread thread_;
};

// Two aggregators, no hosts; failures must come from a stopped one, not a job timeout.
std::vector<std::unique_ptr<embedded::Service>> two_services() {
  std::vector<std::unique_ptr<embedded::Service>> services;
  for (int x = 0; x < 2; ++x) {
    embedded::ServiceOptions so;
    so.job_timeout_ms = 60000;
    services.push_back(start_service(so));
  }
  return services;
}

// Past failover's bounds the calls fail, naming what was lost: two aggregators (no hosts), the
// first stopped mid-call with failover_max 0, or both stopped.
class FailoverBounds : public ::testing::TestWithParam<bool> {};

TEST_P(FailoverBounds, TheCallFailsNamingWhatWasLost) {
  const bool both = GetParam();
  std::vector<std::unique_ptr<embedded::Service>> services = two_services();
  for (const auto& sv : services) ASSERT_TRUE(sv);
  const std::string first = services[0]->control_address(), second = services[1]->control_address();
  StopOnFire stopper([&] {
    services[0]->stop();
    if (both) services[1]->stop();
  });
  auto fire = [&] { stopper.fire(); };
  std::vector<Status> results(kWorld);
  std::vector<bool> all_lost(kWorld, false);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({services[0].get(), services[1].get()}, "bounds", static_cast<uint16_t>(rank), kWorld,
                               wire::Dtype::kFp32);
    c.failover = CommConfig::Failover::kOn;
    c.failover_after_ms = 300;
    c.failover_timeout_ms = 5000;
    if (!both) c.failover_max = 0;
    if (rank == 0) {
      c.wrap_transport = [&](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
        return std::make_unique<Trigger>(std::move(t), 700, fire);
      };
    }
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      results[static_cast<size_t>(rank)] = comm.status();
      return;
    }
    const size_t count = size_t{1} << 17;
    Status st;
    for (int i = 1; i <= 8 && st.ok(); ++i) {
      auto buf = make_input(wire::Dtype::kFp32, count, rank, i);
      st = (*comm)->allreduce(buf.data(), buf.data(), count);
    }
    results[static_cast<size_t>(rank)] = st;
    all_lost[static_cast<size_t>(rank)] = (*comm)->every_aggregator_lost();
  });
  stopper.finish();
  for (int r = 0; r < kWorld; ++r) {
    const Status& st = results[static_cast<size_t>(r)];
    EXPECT_FALSE(st.ok()) << "rank " << r;
    EXPECT_NE(st.message().find(first + " lost"), std::string::npos) << "rank " << r << ": " << st.to_string();
    EXPECT_EQ(all_lost[static_cast<size_t>(r)], both) << "rank " << r;  // what a fall-back looks for
    if (both) {
      EXPECT_NE(st.message().find(second + " lost"), std::string::npos) << st.to_string();
      EXPECT_NE(st.message().find("every aggregator is lost"), std::string::npos) << st.to_string();
    } else {
      EXPECT_NE(st.message().find("failover_max 0"), std::string::npos) << st.to_string();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bounds, FailoverBounds, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("BothLost") : std::string("FailoverMaxZero");
                         });

// Drops the first packet sent to one transport peer (that peer only exists after a failover: the
// new home is a peer of its own), and counts it.
class DropFirstTo final : public ForwardingTransport {
 public:
  DropFirstTo(std::unique_ptr<Transport> inner, uint32_t peer, std::atomic<uint64_t>* dropped)
      : ForwardingTransport(std::move(inner)), peer_(peer), dropped_(dropped) {}
  Status send(std::span<const OutPacket> packets) override {
    if (*dropped_ != 0) return inner_->send(packets);
    std::vector<OutPacket> keep;
    for (const OutPacket& p : packets) {
      if (p.peer == peer_ && *dropped_ == 0) {
        ++*dropped_;
        continue;
      }
      keep.push_back(p);
    }
    return inner_->send(keep);
  }

 private:
  uint32_t peer_;
  std::atomic<uint64_t>* dropped_;
};

// A round replayed to the new home that is lost once is resent (docs/failover.md section 3). Two
// aggregators, one chunk each per call. Rank 3 never hears the first aggregator, so it lacks call
// 1's chunk there while ranks 0-2 complete call 1; then that aggregator stops. At the new home rank
// 0's first packet, its replay of that round (the "held" round rank 3 needs), is dropped, and
// nothing else rank 0 has outstanding there can be answered first: its call-2 chunk waits for rank
// 3, which waits for that round. Only a resend of the held round itself (as the stall probe) lets
// the job go on; without it rank 3 declared the new home lost as well (a second failover), as a
// clean-clone run of allreduce_failover_loss1 once did.
TEST(FailoverReplay, AReplayLostAtTheNewHomeIsResent) {
  std::vector<std::unique_ptr<embedded::Service>> services = two_services();
  for (const auto& sv : services) ASSERT_TRUE(sv);
  const std::string lost = services[0]->control_address();
  const size_t count = 64;  // 32 elements, one chunk, per aggregator
  const int calls = 3;
  std::atomic<bool> deaf{false};
  std::atomic<uint64_t> deaf_dropped{0}, replay_dropped{0};
  std::vector<std::string> errors(kWorld);
  std::vector<CommStats> stats(kWorld);
  std::vector<std::vector<FailoverEvent>> events(kWorld);
  Barrier done(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({services[0].get(), services[1].get()}, "replay", static_cast<uint16_t>(rank), kWorld,
                               wire::Dtype::kFp32);
    c.failover = CommConfig::Failover::kOn;
    c.failover_after_ms = 300;
    c.failover_timeout_ms = 10000;
    c.wrap_transport = [&, rank](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
      if (rank == 3) t = std::make_unique<CutPeer>(std::move(t), 0, &deaf, true, &deaf_dropped);
      if (rank == 0) t = std::make_unique<DropFirstTo>(std::move(t), 2, &replay_dropped);  // peer 2: the new home
      return t;
    };
    auto comm = create_or_record(c, &errors[static_cast<size_t>(rank)], &done);
    if (!comm) return;
    if (rank == 3) deaf = true;  // before its first contribution: no call completes before this
    for (int i = 1; i <= calls && errors[static_cast<size_t>(rank)].empty(); ++i) {
      auto buf = make_input(wire::Dtype::kFp32, count, rank, i);
      Status st = comm->allreduce(buf.data(), buf.data(), count);
      errors[static_cast<size_t>(rank)] =
          call_error(i, st, buf, make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, count, kWorld, i));
      if (rank == 0 && i == 1) services[0]->stop();  // rank 0 has call 1's round there; rank 3 lacks it
    }
    stats[static_cast<size_t>(rank)] = comm->stats();
    events[static_cast<size_t>(rank)] = comm->failovers();
    done.arrive_and_wait();  // no rank leaves a job another still retransmits on
  });
  EXPECT_GT(deaf_dropped.load(), 0u);  // rank 3 did miss a result
  EXPECT_EQ(replay_dropped.load(), 1u);
  for (int r = 0; r < kWorld; ++r) {
    const auto ri = static_cast<size_t>(r);
    EXPECT_EQ(errors[ri], "") << "rank " << r;
    EXPECT_EQ(stats[ri].failovers, 1u) << "rank " << r;
    ASSERT_FALSE(events[ri].empty()) << "rank " << r;
    EXPECT_EQ(events[ri][0].lost, lost) << "rank " << r;
    std::printf(
        "rank %d: %zu failover(s), first after %llu ms, %llu replayed (%llu completed rounds); "
        "%llu retransmissions, %llu stall probes: %s\n",
        r, events[ri].size(), static_cast<unsigned long long>(events[ri][0].ms),
        static_cast<unsigned long long>(stats[ri].replayed_chunks),
        static_cast<unsigned long long>(stats[ri].replayed_completed),
        static_cast<unsigned long long>(stats[ri].retransmissions),
        static_cast<unsigned long long>(stats[ri].stall_probes), events[ri][0].reason.c_str());
    for (size_t e = 1; e < events[ri].size(); ++e) std::printf("  then: %s\n", events[ri][e].reason.c_str());
  }
  EXPECT_EQ(stats[0].replayed_completed, 1u);  // the dropped packet was that replay
  EXPECT_EQ(stats[3].replayed_completed, 0u);
  EXPECT_GT(stats[0].stall_probes, 0u);  // and it went out again as the stall probe
}

// Two communicators ("lanes", as the NCCL plugin drives several) from one thread per rank, over the
// same two aggregators; the first is stopped mid-call, so each lane fails over. Rank 0 drives lane
// A first, rank 1 lane B first, so each rank meets the lanes' failovers in the opposite order.
// A failover that blocked its thread (as the agreement's second step and the re-registration once
// did) would then hold rank 0 in lane A's agreement while rank 1 waits in lane B's: both stuck
// until failover_timeout_ms, then failed. Made of progress steps, both lanes complete exactly.
TEST(FailoverLanes, TwoLanesOnOneThreadFailOverInOppositeOrders) {
  constexpr int kRanks = 2;
  constexpr int kLanes = 2;
  std::vector<std::unique_ptr<embedded::Service>> services = two_services();
  for (const auto& sv : services) ASSERT_TRUE(sv);
  const std::string lost = services[0]->control_address();
  StopOnFire stopper([&] { services[0]->stop(); });
  auto fire = [&] { stopper.fire(); };
  const size_t count = size_t{1} << 16;  // 256 packets per rank, lane and call
  const int calls = 6;
  std::vector<std::string> errors(kRanks * kLanes);
  std::vector<CommStats> stats(kRanks * kLanes);
  std::vector<std::vector<FailoverEvent>> events(kRanks * kLanes);
  Barrier done(kRanks);
  run_ranks(kRanks, [&](int rank) {
    std::vector<std::unique_ptr<Communicator>> lanes;
    for (int l = 0; l < kLanes; ++l) {
      CommConfig c = base_config({services[0].get(), services[1].get()}, "lane" + std::to_string(l),
                                 static_cast<uint16_t>(rank), kRanks, wire::Dtype::kFp32);
      c.failover_after_ms = 300;
      c.op_timeout_ms = 20000;
      c.failover_timeout_ms = 5000;  // what a blocking failover would wait for, then fail
      if (rank == 0 && l == 0) {
        c.wrap_transport = [&](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
          return std::make_unique<Trigger>(std::move(t), 2 * 256 + 100, fire);  // in the third call
        };
      }
      auto comm = Communicator::create(c);
      if (!comm.ok()) {
        errors[static_cast<size_t>(rank * kLanes + l)] = comm.status().to_string();
        done.arrive_and_wait();
        return;
      }
      lanes.push_back(std::move(comm).value());
    }
    for (int i = 1; i <= calls; ++i) {
      std::vector<std::vector<uint8_t>> bufs(kLanes);
      std::vector<uint64_t> ids(kLanes);
      std::vector<bool> open(kLanes, false);
      for (int l = 0; l < kLanes; ++l) {
        bufs[static_cast<size_t>(l)] = make_input(wire::Dtype::kFp32, count, rank, i * kLanes + l);
        auto id = lanes[static_cast<size_t>(l)]->start_allreduce(bufs[static_cast<size_t>(l)].data(),
                                                                 bufs[static_cast<size_t>(l)].data(), count);
        if (!id.ok()) {
          errors[static_cast<size_t>(rank * kLanes + l)] = "call " + std::to_string(i) + ": " + id.status().to_string();
          continue;
        }
        ids[static_cast<size_t>(l)] = *id;
        open[static_cast<size_t>(l)] = true;
      }
      // Interleaved test() calls, rank 0 lane A first, rank 1 lane B first; nothing blocks.
      while (std::find(open.begin(), open.end(), true) != open.end()) {
        for (int k = 0; k < kLanes; ++k) {
          const auto l = static_cast<size_t>(rank == 0 ? k : kLanes - 1 - k);
          Status st;
          if (!open[l] || !lanes[l]->test(ids[l], &st)) continue;
          open[l] = false;
          const auto want =
              make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, count, kRanks, i * kLanes + static_cast<int>(l));
          std::string& err = errors[static_cast<size_t>(rank * kLanes) + l];
          if (!st.ok()) {
            if (err.empty()) err = "call " + std::to_string(i) + ": " + st.to_string();
          } else if (long bad = first_mismatch(bufs[l], want, 4); bad != -1 && err.empty()) {
            err = "call " + std::to_string(i) + ": wrong sum at " + std::to_string(bad);
          }
        }
      }
    }
    for (int l = 0; l < kLanes; ++l) {
      stats[static_cast<size_t>(rank * kLanes + l)] = lanes[static_cast<size_t>(l)]->stats();
      events[static_cast<size_t>(rank * kLanes + l)] = lanes[static_cast<size_t>(l)]->failovers();
    }
    done.arrive_and_wait();  // no rank leaves a job another still retransmits on
  });
  stopper.finish();
  for (size_t x = 0; x < errors.size(); ++x) {
    const std::string who = "rank " + std::to_string(x / kLanes) + " lane " + std::to_string(x % kLanes);
    EXPECT_EQ(errors[x], "") << who;
    EXPECT_EQ(stats[x].failovers, 1u) << who;
    ASSERT_EQ(events[x].size(), 1u) << who;
    EXPECT_EQ(events[x][0].lost, lost) << who;
    std::printf("%s: %s -> %s after %llu ms, %llu replayed: %s\n", who.c_str(), events[x][0].lost.c_str(),
                events[x][0].new_home.c_str(), static_cast<unsigned long long>(events[x][0].ms),
                static_cast<unsigned long long>(events[x][0].replayed), events[x][0].reason.c_str());
  }
}

}  // namespace
}  // namespace sumcast::shim
