// The control server's job registry (sumcast/control/job_registry.h) driven directly, without
// sockets: a fake clock moved by the test, a fake MemberLink recording what each connection is
// sent, and the fake JobSink. The timeouts are checked at the last instant before they expire
// and at the first instant they do, so nothing here waits in real time. One end-to-end timeout
// over real sockets stays in server_test.cc.
#include "sumcast/control/job_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "control_test_util.h"

namespace sumcast::control {
namespace {

using std::chrono::milliseconds;
using testing::FakeSink;
using wire::AbortReason;
using wire::RefuseCode;

// Time as the test sets it; readable from any thread.
class FakeClock {
 public:
  Clock::time_point now() const { return base_ + std::chrono::nanoseconds(offset_ns_.load()); }
  void advance(milliseconds d) { offset_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }
  ClockFn fn() {
    return [this] { return now(); };
  }

 private:
  const Clock::time_point base_ = Clock::time_point() + std::chrono::hours(1);
  std::atomic<int64_t> offset_ns_{0};
};

// The connections, as ids: open until the test drops one; records what each was sent.
class FakeLink : public MemberLink {
 public:
  using Message = std::variant<wire::RefuseMsg, wire::GrantMsg, wire::AbortMsg>;

  bool connected(uint64_t id) const override { return open_.count(id) != 0; }
  void send(uint64_t id, const wire::RefuseMsg& m) override { record(id, m); }
  void send(uint64_t id, const wire::GrantMsg& m) override { record(id, m); }
  void send(uint64_t id, const wire::AbortMsg& m) override { record(id, m); }

  void open(uint64_t id) { open_.insert(id); }
  void drop(uint64_t id) { open_.erase(id); }
  const std::vector<Message>& sent(uint64_t id) { return sent_[id]; }
  // The last message sent to the connection, when it is an M.
  template <typename M>
  std::optional<M> last(uint64_t id) {
    auto it = sent_.find(id);
    if (it == sent_.end() || it->second.empty() || !std::holds_alternative<M>(it->second.back())) return std::nullopt;
    return std::get<M>(it->second.back());
  }

 private:
  void record(uint64_t id, Message m) {
    ASSERT_TRUE(connected(id)) << "sent to closed connection " << id;
    sent_[id].push_back(std::move(m));
  }
  std::set<uint64_t> open_;
  std::map<uint64_t, std::vector<Message>> sent_;
};

wire::RegisterMsg reg(const std::string& job, uint16_t world, uint16_t rank) {
  wire::RegisterMsg m;
  m.name = job;
  m.world_size = world;
  m.rank = rank;
  m.dtype = wire::Dtype::kFp32;
  m.op = wire::ReduceOp::kSum;
  m.payload_bytes = 1024;
  m.mac = {0x02, 0, 0, 0, static_cast<uint8_t>(world), static_cast<uint8_t>(rank)};
  m.ip = 0x0A000000u | (rank + 1u);
  m.udp_port = static_cast<uint16_t>(40000 + rank);
  m.qpn = 0x1000u + rank;
  return m;
}

class JobRegistryTest : public ::testing::Test {
 protected:
  JobRegistryTest() {
    opt_.token = "unused-by-the-registry";
    opt_.core_qpns = {0x11, 0x12};
    opt_.job_timeout_ms = 300;
    opt_.register_timeout_ms = 500;
  }

  JobRegistry& registry() {
    if (!registry_) registry_ = std::make_unique<JobRegistry>(opt_, &sink_, &link_, &counters_, clock_.fn());
    return *registry_;
  }
  // Connection `first + r` registers rank r of a `world`-rank job; returns the granted job id.
  uint32_t run_job(const std::string& name, uint16_t world, uint64_t first = 1) {
    for (uint16_t r = 0; r < world; ++r) {
      link_.open(first + r);
      registry().on_register(first + r, reg(name, world, r));
    }
    const auto g = link_.last<wire::GrantMsg>(first);
    EXPECT_TRUE(g.has_value()) << "job '" << name << "' not granted";
    return g ? g->job_id : 0;
  }
  // Moves time in steps of the server's tick, ticking the registry after each.
  void pass(milliseconds d, milliseconds step = milliseconds(100)) {
    for (milliseconds done{0}; done < d;) {
      const milliseconds s = std::min(step, d - done);
      clock_.advance(s);
      done += s;
      registry().tick();
    }
  }
  void expect_aborted(uint64_t conn, uint32_t job_id, AbortReason why) {
    const auto a = link_.last<wire::AbortMsg>(conn);
    ASSERT_TRUE(a.has_value()) << "connection " << conn << " was not sent an abort";
    EXPECT_EQ(a->job_id, job_id);
    EXPECT_EQ(a->reason, why);
  }

  ServerOptions opt_;
  FakeSink sink_;
  FakeLink link_;
  CounterBoard counters_;
  FakeClock clock_;
  std::unique_ptr<JobRegistry> registry_;
};

TEST_F(JobRegistryTest, RegistrationTimeoutCountsFromTheFirstRankAndRefusesEveryPendingMember) {
  link_.open(1);
  link_.open(2);
  registry().on_register(1, reg("slow", 3, 0));
  pass(milliseconds(200));
  registry().on_register(2, reg("slow", 3, 2));  // a later rank does not restart the window
  pass(milliseconds(299));
  EXPECT_TRUE(link_.sent(1).empty());
  EXPECT_TRUE(link_.sent(2).empty());
  pass(milliseconds(1));
  for (uint64_t c : {1u, 2u}) {
    const auto r = link_.last<wire::RefuseMsg>(c);
    ASSERT_TRUE(r.has_value()) << "connection " << c;
    EXPECT_EQ(r->code, RefuseCode::kRegisterTimeout);
    EXPECT_EQ(r->text, "registration timed out: 2 of 3 ranks of job 'slow' registered within 500 ms");
  }
  registry().publish();
  EXPECT_TRUE(registry().jobs().empty());
  EXPECT_TRUE(sink_.installs().empty());
  EXPECT_EQ(counters_.read().registrations_refused, 2u);
  // The connections are free again: the same one may register anew.
  registry().on_register(1, reg("again", 2, 0));
  EXPECT_EQ(link_.sent(1).size(), 1u);  // only the timeout's refusal
  registry().publish();
  EXPECT_EQ(registry().jobs().size(), 1u);
}

TEST_F(JobRegistryTest, NoProgressAbortsEveryMemberExactlyAtTheJobTimeout) {
  const uint32_t id = run_job("stuck", 3);
  ASSERT_NE(id, 0u);
  pass(milliseconds(299), milliseconds(299));
  EXPECT_TRUE(sink_.removals().empty());
  pass(milliseconds(1));
  for (uint64_t c = 1; c <= 3; ++c) expect_aborted(c, id, AbortReason::kTimeout);
  const auto a = link_.last<wire::AbortMsg>(1);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->text, "job 'stuck' (id " + std::to_string(id) + ") made no progress for 300 ms");
  ASSERT_EQ(sink_.removals().size(), 1u);
  EXPECT_EQ(sink_.removals()[0].reason, AbortReason::kTimeout);
  EXPECT_EQ(counters_.read().jobs_failed, 1u);
  registry().publish();
  EXPECT_TRUE(registry().jobs().empty());
}

TEST_F(JobRegistryTest, ProgressKeepsJobAliveThenSilenceFailsIt) {
  const uint32_t id = run_job("busy", 2);
  ASSERT_NE(id, 0u);
  // Progress before every tick, 200 ms apart, for ten job timeouts: it lives throughout.
  for (int i = 0; i < 15; ++i) {
    sink_.add_progress(id);
    pass(milliseconds(200), milliseconds(200));
  }
  EXPECT_TRUE(sink_.removals().empty());
  registry().publish();
  ASSERT_EQ(registry().jobs().size(), 1u);
  EXPECT_EQ(registry().jobs()[0].slots_completed, 15u);
  // The last tick saw progress; 300 ms of silence from then fails it, not one less.
  pass(milliseconds(299), milliseconds(299));
  EXPECT_TRUE(sink_.removals().empty());
  pass(milliseconds(1));
  expect_aborted(1, id, AbortReason::kTimeout);
  expect_aborted(2, id, AbortReason::kTimeout);
}

TEST_F(JobRegistryTest, IdleJobWithNoRoundWaitingIsNotTimedOut) {
  const uint32_t id = run_job("idle", 2);
  ASSERT_NE(id, 0u);
  sink_.set_waiting_rounds(id, 0);  // between collectives: nothing is waiting for a rank
  pass(milliseconds(3000));
  EXPECT_TRUE(sink_.removals().empty());
  EXPECT_TRUE(!link_.last<wire::AbortMsg>(1));
  // A round opens and stalls: the timeout applies from the last idle tick.
  sink_.set_waiting_rounds(id, 1);
  pass(milliseconds(299), milliseconds(299));
  EXPECT_TRUE(sink_.removals().empty());
  pass(milliseconds(1));
  expect_aborted(1, id, AbortReason::kTimeout);
}

TEST_F(JobRegistryTest, TimeSinceProgressIsReadOnTheInjectedClock) {
  link_.open(1);
  registry().on_register(1, reg("pending", 2, 0));
  registry().publish();
  clock_.advance(milliseconds(1234));
  ASSERT_EQ(registry().jobs().size(), 1u);
  EXPECT_EQ(registry().jobs()[0].ms_since_progress, 1234u);
  const wire::StatusReplyMsg st = registry().status();
  ASSERT_EQ(st.jobs.size(), 1u);
  EXPECT_EQ(st.jobs[0].ms_since_progress, 1234u);
  EXPECT_FALSE(st.jobs[0].running);
}

TEST_F(JobRegistryTest, LostConnectionWithdrawsAPendingRankAndFailsARunningJob) {
  link_.open(1);
  registry().on_register(1, reg("p", 2, 0));
  link_.drop(1);
  registry().on_connection_lost(1);
  registry().publish();
  EXPECT_TRUE(registry().jobs().empty());  // its only rank left: the pending job is gone

  const uint32_t id = run_job("r", 3, 10);
  link_.drop(11);
  registry().on_connection_lost(11);
  expect_aborted(10, id, AbortReason::kMemberLeft);
  expect_aborted(12, id, AbortReason::kMemberLeft);
  EXPECT_TRUE(!link_.last<wire::AbortMsg>(11));  // nothing to a closed connection
  EXPECT_EQ(link_.last<wire::AbortMsg>(10).value_or(wire::AbortMsg{}).text,
            "rank 1 of job 'r' closed its control connection");
  EXPECT_EQ(counters_.read().jobs_failed, 1u);
}

}  // namespace
}  // namespace sumcast::control
