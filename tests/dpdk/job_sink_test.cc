// LcoreJobSink (sumcast/dpdk/job_sink.h): jobs reach every core's engine through the control
// rings and come back acked; a core that does not answer makes install fail within the timeout
// and undo itself everywhere; engine refusals come back with their code; late acks are reaped.
// No EAL needed: the rings live in plain memory (rte_ring_init) and engines use operator new.
#include "sumcast/dpdk/job_sink.h"

#include <gtest/gtest.h>
#include <rte_ring.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

namespace sumcast::dpdk {
namespace {

struct RingDeleter {
  void operator()(rte_ring* r) const { std::free(r); }
};
using RingPtr = std::unique_ptr<rte_ring, RingDeleter>;

RingPtr make_ring(const char* name) {
  const ssize_t size = rte_ring_get_memsize(kControlRingSize);
  void* mem = std::aligned_alloc(64, static_cast<size_t>((size + 63) / 64 * 64));
  auto* r = static_cast<rte_ring*>(mem);
  if (rte_ring_init(r, name, kControlRingSize, RING_F_SP_ENQ | RING_F_SC_DEQ) != 0) {
    std::free(mem);
    return nullptr;
  }
  return RingPtr(r);
}

// Cores with engines and control/ack rings, but no port: drain_control() is driven by the test.
class Cores {
 public:
  Cores(uint32_t n, uint32_t max_jobs) {
    for (uint32_t i = 0; i < n; ++i) {
      auto c = std::make_unique<LcoreContext>();
      c->core_index = i;
      c->core_count = n;
      rings_.push_back(make_ring(("c" + std::to_string(i)).c_str()));
      rings_.push_back(make_ring(("a" + std::to_string(i)).c_str()));
      c->control_ring = rings_[rings_.size() - 2].get();
      c->ack_ring = rings_.back().get();
      engine::EngineOptions o;
      o.core_index = i;
      o.core_count = n;
      o.max_jobs = max_jobs;
      c->engine = std::make_unique<engine::Engine>(o);
      // Job removal without an abort sends nothing, so the sink never touches DPDK.
      c->tx = std::make_unique<DpdkTxSink>(0, 0, nullptr, nullptr);
      cores_.push_back(std::move(c));
    }
  }
  ~Cores() {
    stop_driving();  // the sink's destructor requires stopped lcores
    sink_.reset();
  }

  LcoreJobSink& sink(uint32_t ack_timeout_ms) {
    sink_ = std::make_unique<LcoreJobSink>(pointers(), ack_timeout_ms);
    return *sink_;
  }

  std::vector<LcoreContext*> pointers() {
    std::vector<LcoreContext*> p;
    for (auto& c : cores_) p.push_back(c.get());
    return p;
  }
  LcoreContext& core(size_t i) { return *cores_[i]; }

  // A thread plays the lcores in `which`: it drains their control rings until stop_driving().
  void drive(std::vector<size_t> which) {
    stop_driving();
    stop_ = false;
    driver_ = std::thread([this, which] {
      while (!stop_.load()) {
        for (size_t i : which) drain_control(*cores_[i]);
        std::this_thread::yield();
      }
    });
  }
  void stop_driving() {
    stop_ = true;
    if (driver_.joinable()) driver_.join();
  }

  bool has_job(size_t core, uint32_t job_id) {
    for (const engine::JobProgress& p : cores_[core]->engine->progress()) {
      if (p.job_id == job_id) return true;
    }
    return false;
  }

 private:
  std::vector<RingPtr> rings_;
  std::vector<std::unique_ptr<LcoreContext>> cores_;
  std::unique_ptr<LcoreJobSink> sink_;
  std::thread driver_;
  std::atomic<bool> stop_{false};
};

engine::JobSpec job(uint32_t id) {
  engine::JobSpec s;
  s.job_id = id;
  s.qkey = 0x1234;
  s.slot_count = 8;
  s.max_payload_bytes = 1024;
  s.members.resize(2);
  return s;
}

TEST(LcoreJobSinkTest, InstallAndRemoveReachEveryCore) {
  Cores cores(3, 4);
  LcoreJobSink& sink = cores.sink(2000);
  cores.drive({0, 1, 2});
  ASSERT_TRUE(sink.install(job(7)).ok());
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(cores.has_job(i, 7)) << "core " << i;
  EXPECT_EQ(sink.progress(7), 0u);
  sink.remove(7, wire::AbortReason::kNone);
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(cores.has_job(i, 7)) << "core " << i;
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(cores.core(i).counters.control_msgs.load(), 2u);
}

TEST(LcoreJobSinkTest, SilentCoreTimesOutAndInstallIsUndone) {
  Cores cores(2, 4);
  LcoreJobSink& sink = cores.sink(100);
  cores.drive({0});  // core 1 never answers
  const auto t0 = std::chrono::steady_clock::now();
  Status st = sink.install(job(9));
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  EXPECT_NE(st.message().find("core 1"), std::string::npos) << st.message();
  EXPECT_LT(waited, std::chrono::seconds(2)) << "bounded by the ack timeout (twice: install, undo)";
  EXPECT_FALSE(cores.has_job(0, 9)) << "the core that installed it removed it again";

  // Core 1 wakes up late: it runs the add and then the undo, in ring order.
  cores.stop_driving();
  drain_control(cores.core(1));
  EXPECT_FALSE(cores.has_job(1, 9));
  EXPECT_EQ(cores.core(1).counters.control_msgs.load(), 2u);

  // The late acks are reaped and the next job goes through on both cores.
  cores.drive({0, 1});
  ASSERT_TRUE(sink.install(job(10)).ok());
  EXPECT_TRUE(cores.has_job(0, 10));
  EXPECT_TRUE(cores.has_job(1, 10));
}

TEST(LcoreJobSinkTest, EngineRefusalComesBackWithItsCode) {
  Cores cores(2, 1);  // one job per core at most
  LcoreJobSink& sink = cores.sink(2000);
  cores.drive({0, 1});
  ASSERT_TRUE(sink.install(job(1)).ok());
  Status st = sink.install(job(2));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kRefused);
  EXPECT_NE(st.message().find("max_jobs"), std::string::npos) << st.message();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(cores.has_job(i, 1));
    EXPECT_FALSE(cores.has_job(i, 2));
  }
}

TEST(LcoreJobSinkTest, PartialRefusalIsUndoneOnTheOtherCores) {
  Cores cores(2, 4);
  LcoreJobSink& sink = cores.sink(2000);
  cores.drive({0, 1});
  ASSERT_TRUE(sink.install(job(5)).ok());
  sink.remove(5, wire::AbortReason::kNone);
  // Job 5 again, but core 1 still has it (installed behind the sink's back): core 1 refuses,
  // core 0 accepts and must be undone.
  cores.stop_driving();
  ASSERT_TRUE(cores.core(1).engine->add_job(job(5)).ok());
  cores.drive({0, 1});
  Status st = sink.install(job(5));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("core 1"), std::string::npos) << st.message();
  EXPECT_FALSE(cores.has_job(0, 5));
}

TEST(LcoreJobSinkTest, ClosedSinkRefusesWithoutPosting) {
  Cores cores(1, 4);
  LcoreJobSink& sink = cores.sink(100);
  sink.close();
  Status st = sink.install(job(3));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  sink.remove(3, wire::AbortReason::kAdmin);
  EXPECT_EQ(rte_ring_count(cores.core(0).control_ring), 0u);
}

}  // namespace
}  // namespace sumcast::dpdk
