// The non-blocking engine behind MPI_Iallreduce, with ranks as threads against the embedded
// service: calls finish through the background thread alone (the program never waits), through
// wait/test without it, in any completion order, and a failed job completes every call with its
// error.
#include "sumcast/mpi/async_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "shim_test_util.h"

namespace sumcast::mpi {
namespace {

using shim::testing::Barrier;
using shim::testing::base_config;
using shim::testing::first_mismatch;
using shim::testing::make_expected;
using shim::testing::make_input;
using shim::testing::run_ranks;
using shim::testing::start_service;
using shim::testing::wait_for;

std::shared_ptr<Job> make_job(const embedded::Service& svc, const std::string& name, int rank, int world,
                              wire::Dtype dtype) {
  auto c = shim::Communicator::create(
      base_config({&svc}, name, static_cast<uint16_t>(rank), static_cast<uint16_t>(world), dtype));
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return nullptr;
  auto job = std::make_shared<Job>();
  job->comm = std::move(c).value();
  job->name = name;
  return job;
}

TEST(AsyncEngine, BackgroundThreadFinishesCallsTheProgramNeverWaitsFor) {
  auto svc = start_service();
  ASSERT_TRUE(svc);
  constexpr int kWorld = 3;
  constexpr size_t kCount = 200000;  // hundreds of packets per rank: many window turns
  Barrier done_barrier(kWorld);
  run_ranks(kWorld, [&](int r) {
    auto job = make_job(*svc, "bg", r, kWorld, wire::Dtype::kFp32);
    ASSERT_TRUE(job);
    AsyncEngine engine(true);
    auto in = make_input(wire::Dtype::kFp32, kCount, r, 1);
    std::vector<uint8_t> out(in.size());
    auto p = engine.start(job, in.data(), out.data(), kCount);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    // Only look at the flag: no test(), no wait(). Every turn of the window is the thread's.
    EXPECT_TRUE(wait_for([&] { return (*p)->done(); }, std::chrono::seconds(60)));
    EXPECT_TRUE((*p)->status().ok()) << (*p)->status().to_string();
    EXPECT_EQ(first_mismatch(out, make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, kCount, kWorld, 1), 4), -1);
    EXPECT_EQ(engine.outstanding(), 0u);
    done_barrier.arrive_and_wait();
  });
}

TEST(AsyncEngine, WithoutTheThreadWaitAndTestDriveTheCalls) {
  auto svc = start_service();
  ASSERT_TRUE(svc);
  constexpr int kWorld = 2;
  constexpr size_t kCount = 50000;
  Barrier barrier(kWorld);
  run_ranks(kWorld, [&](int r) {
    auto job = make_job(*svc, "fg", r, kWorld, wire::Dtype::kInt32);
    ASSERT_TRUE(job);
    AsyncEngine engine(false);
    auto in = make_input(wire::Dtype::kInt32, kCount, r, 2);
    std::vector<uint8_t> out(in.size());
    auto p = engine.start(job, in.data(), out.data(), kCount);
    ASSERT_TRUE(p.ok());
    if (r == 0) {
      while (!engine.step(**p, 5)) {
      }
    } else {
      engine.wait(**p);
    }
    EXPECT_TRUE((*p)->done());
    EXPECT_TRUE((*p)->status().ok()) << (*p)->status().to_string();
    EXPECT_EQ(first_mismatch(out, make_expected(wire::Dtype::kInt32, wire::ReduceOp::kSum, kCount, kWorld, 2), 4), -1);
    barrier.arrive_and_wait();
  });
}

TEST(AsyncEngine, ACallCannotFinishBeforeEveryRankStartedIt) {
  auto svc = start_service();
  ASSERT_TRUE(svc);
  Barrier started0(2), checked(2);
  run_ranks(2, [&](int r) {
    auto job = make_job(*svc, "late", r, 2, wire::Dtype::kFp64);
    ASSERT_TRUE(job);
    AsyncEngine engine(false);
    auto in = make_input(wire::Dtype::kFp64, 1000, r, 3);
    std::vector<uint8_t> out(in.size());
    if (r == 0) {
      auto p = engine.start(job, in.data(), out.data(), 1000);
      ASSERT_TRUE(p.ok());
      EXPECT_FALSE(engine.step(**p, 20));  // rank 1 has not started: nothing can complete
      EXPECT_FALSE((*p)->done());
      checked.arrive_and_wait();
      engine.wait(**p);
      EXPECT_TRUE((*p)->status().ok());
    } else {
      checked.arrive_and_wait();
      auto p = engine.start(job, in.data(), out.data(), 1000);
      ASSERT_TRUE(p.ok());
      engine.wait(**p);
      EXPECT_TRUE((*p)->status().ok());
    }
    EXPECT_EQ(first_mismatch(out, make_expected(wire::Dtype::kFp64, wire::ReduceOp::kSum, 1000, 2, 3), 8), -1);
    started0.arrive_and_wait();
  });
}

TEST(AsyncEngine, OutstandingCallsCompleteInReverseWaitOrder) {
  auto svc = start_service();
  ASSERT_TRUE(svc);
  constexpr int kWorld = 2, kCalls = 4;
  constexpr size_t kCount = 30000;
  Barrier barrier(kWorld);
  run_ranks(kWorld, [&](int r) {
    auto job = make_job(*svc, "many", r, kWorld, wire::Dtype::kFp32);
    ASSERT_TRUE(job);
    AsyncEngine engine(true);
    std::vector<std::vector<uint8_t>> in, out;
    std::vector<std::shared_ptr<Pending>> ps;
    for (int c = 0; c < kCalls; ++c) {
      in.push_back(make_input(wire::Dtype::kFp32, kCount, r, 10 + c));
      out.emplace_back(in.back().size());
    }
    for (int c = 0; c < kCalls; ++c) {
      auto p = engine.start(job, in[c].data(), out[c].data(), kCount);
      ASSERT_TRUE(p.ok());
      ps.push_back(*p);
    }
    for (int c = kCalls - 1; c >= 0; --c) {
      engine.wait(*ps[c]);
      EXPECT_TRUE(ps[c]->status().ok());
      EXPECT_EQ(
          first_mismatch(out[c], make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, kCount, kWorld, 10 + c), 4),
          -1)
          << "call " << c;
    }
    barrier.arrive_and_wait();
  });
}

TEST(AsyncEngine, AFailedJobCompletesThePendingCallWithItsError) {
  auto svc = start_service();
  ASSERT_TRUE(svc);
  Barrier registered(2), stopped(2);
  run_ranks(2, [&](int r) {
    auto job = make_job(*svc, "doomed", r, 2, wire::Dtype::kFp32);
    ASSERT_TRUE(job);
    AsyncEngine engine(true);
    auto in = make_input(wire::Dtype::kFp32, 5000, r, 4);
    std::vector<uint8_t> out(in.size());
    registered.arrive_and_wait();
    if (r == 0) {
      svc->stop();  // every job fails: members get an abort
      stopped.arrive_and_wait();
      auto p = engine.start(job, in.data(), out.data(), 5000);
      if (p.ok()) {
        engine.wait(**p);
        EXPECT_FALSE((*p)->status().ok());
      }  // or the abort arrived first and start itself failed: also a clean error
    } else {
      stopped.arrive_and_wait();
    }
  });
}

}  // namespace
}  // namespace sumcast::mpi
