// The communicator under impairment and failure, against the embedded service on loopback:
// loss, duplication and reordering (a seeded decorator on every worker's transport) must not
// change a single bit of the results; a worker that stops sending, or the service stopping, must
// fail every pending call within the configured bound, and the service must free the job. Loss
// notices: against a scripted appliance (the test plays rank 0's data path, the service only
// registers the job), what a notice and a hole revealed by results make the rank resend, and when.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "shim_test_util.h"
#include "sumcast/kernels/kernels.h"
#include "sumcast/shim/communicator.h"

namespace sumcast::shim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers
using std::chrono::milliseconds;

class LossyAllreduce : public ::testing::TestWithParam<double> {};

// Loss (both directions), duplication and reordering at the given rate: results stay exact, the
// workers retransmitted, the engine saw duplicates or answered retransmissions, and it sent loss
// notices that reached the workers.
TEST_P(LossyAllreduce, ResultsStayExactAndRetransmissionsRepairLoss) {
  const double p = GetParam();
  constexpr int kWorld = 4;
  auto service = start_service();
  ASSERT_TRUE(service);
  const std::vector<size_t> counts = {size_t{1} << 18, 1000, size_t{1} << 17};
  std::vector<std::string> errors(kWorld);
  std::vector<CommStats> stats(kWorld);
  ImpairmentCounters impairments;
  Barrier done(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({service.get()}, "lossy", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    Impairment imp;
    imp.send_loss = p;
    imp.recv_loss = p;
    imp.send_dup = 0.01;
    imp.recv_dup = 0.01;
    imp.send_reorder = 0.01;
    imp.seed = 1000 + static_cast<uint64_t>(rank) + static_cast<uint64_t>(p * 1e6);
    c.wrap_transport = impair(imp, &impairments);
    c.slots = 32;
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      errors[static_cast<size_t>(rank)] = comm.status().to_string();
      done.arrive_and_wait();
      return;
    }
    int salt = 0;
    for (size_t count : counts) {
      ++salt;
      auto buf = make_input(wire::Dtype::kFp32, count, rank, salt);
      Status st = (*comm)->allreduce(buf.data(), buf.data(), count);
      const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, count, kWorld, salt);
      if (!st.ok() || first_mismatch(buf, want, 4) != -1) {
        errors[static_cast<size_t>(rank)] =
            "count " + std::to_string(count) + ": " + (st.ok() ? "wrong result" : st.to_string());
        break;
      }
    }
    stats[static_cast<size_t>(rank)] = (*comm)->stats();
    done.arrive_and_wait();  // nobody leaves while another rank may still need an answer
  });
  uint64_t retransmissions = 0, notices = 0;
  for (int r = 0; r < kWorld; ++r) {
    const CommStats& s = stats[static_cast<size_t>(r)];
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    retransmissions += s.retransmissions + s.fast_retransmissions + s.notice_retransmissions;
    notices += s.loss_notices;
  }
  EXPECT_GT(impairments.dropped_tx.load(), 0u);
  EXPECT_GT(impairments.dropped_rx.load(), 0u);
  EXPECT_GT(retransmissions, 0u);
  const auto& ec = service->engine_counters();
  EXPECT_GT(ec.retransmits_answered.load() + ec.duplicates.load(), 0u);
  EXPECT_GT(ec.retransmits_answered.load(), 0u);  // lost results were re-sent from shadow copies
  // Lost contributions drew loss notices (payload-less frames through the service's socket).
  EXPECT_GT(ec.loss_notices_sent.load(), 0u);
  EXPECT_GT(notices, 0u);
}

// Deterministic mode (docs/fidelity.md) end to end: non-integer bf16 inputs of mixed magnitudes,
// whose sum depends on the order of the additions, under two different seeded impairments (loss,
// duplication, reordering). Both runs give the same bits on every rank, equal to the rank-order
// sum in fp32 rounded once.
TEST(DeterministicAllreduce, RealInputsGiveTheRankOrderSumBitForBitUnderAnyImpairment) {
  constexpr int kWorld = 5;
  constexpr size_t kCount = 50000;
  auto input = [](int rank, size_t i) {  // +-m * 2^e, e in [-10, 5]: a hash of (rank, i)
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank) + 7) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    const float v = std::ldexp(1.0f + static_cast<float>(h & 0xFFFF) / 65536.0f, static_cast<int>((h >> 16) % 16) - 10);
    return kernels::float_to_bf16((h >> 40) & 1 ? -v : v);
  };
  std::vector<uint16_t> want(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    float acc = kernels::bf16_to_float(input(0, i));
    for (int r = 1; r < kWorld; ++r) acc += kernels::bf16_to_float(input(r, i));
    want[i] = kernels::float_to_bf16(acc);
  }
  auto service = start_service();
  ASSERT_TRUE(service);
  for (const uint64_t seed : {11u, 12u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<std::string> errors(kWorld);
    std::vector<std::vector<uint16_t>> got(kWorld);
    ImpairmentCounters impairments;
    Barrier done(kWorld);
    run_ranks(kWorld, [&](int rank) {
      CommConfig c = base_config({service.get()}, "det-" + std::to_string(seed), static_cast<uint16_t>(rank), kWorld,
                                 wire::Dtype::kBf16);
      c.deterministic = true;
      Impairment imp;
      imp.send_loss = imp.recv_loss = 0.02;
      imp.send_dup = imp.recv_dup = 0.02;
      imp.send_reorder = 0.05;
      imp.seed = seed * 100 + static_cast<uint64_t>(rank);
      c.wrap_transport = impair(imp, &impairments);
      c.slots = 16;
      auto comm = Communicator::create(c);
      auto& out = got[static_cast<size_t>(rank)];
      if (comm.ok()) {
        out.resize(kCount);
        for (size_t i = 0; i < kCount; ++i) out[i] = input(rank, i);
        const Status st = (*comm)->allreduce(out.data(), out.data(), kCount);
        if (!st.ok()) errors[static_cast<size_t>(rank)] = st.to_string();
      } else {
        errors[static_cast<size_t>(rank)] = comm.status().to_string();
      }
      done.arrive_and_wait();
    });
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
      EXPECT_TRUE(got[static_cast<size_t>(r)] == want) << "rank " << r << " differs from the rank-order sum";
    }
    EXPECT_GT(impairments.dropped_tx.load() + impairments.dropped_rx.load(), 0u);
    EXPECT_GT(impairments.reordered_tx.load(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(LossRates, LossyAllreduce, ::testing::Values(0.01, 0.05),
                         [](const ::testing::TestParamInfo<double>& i) {
                           return "loss" + std::to_string(static_cast<int>(i.param * 100)) + "pct";
                         });

// One fp32 all-reduce of `count` elements by `world` ranks against `service`, each rank's config
// adjusted by `configure(rank, config)`: every rank's error ("" when exact) and statistics.
struct OneCall {
  std::vector<std::string> errors;
  std::vector<CommStats> stats;
};
OneCall one_fp32_call(const embedded::Service& service, const std::string& job, int world, size_t count, int salt,
                      const std::function<void(int, CommConfig&)>& configure) {
  OneCall out{std::vector<std::string>(static_cast<size_t>(world)), std::vector<CommStats>(static_cast<size_t>(world))};
  Barrier done(world);
  run_ranks(world, [&](int rank) {
    CommConfig c =
        base_config({&service}, job, static_cast<uint16_t>(rank), static_cast<uint16_t>(world), wire::Dtype::kFp32);
    configure(rank, c);
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      out.errors[static_cast<size_t>(rank)] = comm.status().to_string();
      done.arrive_and_wait();
      return;
    }
    auto buf = make_input(wire::Dtype::kFp32, count, rank, salt);
    Status st = (*comm)->allreduce(buf.data(), buf.data(), count);
    const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, count, world, salt);
    if (!st.ok() || first_mismatch(buf, want, 4) != -1) {
      out.errors[static_cast<size_t>(rank)] = st.ok() ? "wrong result" : st.to_string();
    }
    out.stats[static_cast<size_t>(rank)] = (*comm)->stats();
    done.arrive_and_wait();  // nobody leaves while another rank may still need an answer
  });
  return out;
}

// One contribution lost (rank 1's 6th packet) and one result lost (rank 2's 101st) in a call of
// many chunks, with retransmission timers far longer than the test: only fast retransmission (a
// later chunk answered first) can repair them, so the call completes exact with no timer expiry.
// The lost result is well after the lost contribution's repair: an early one could be that very
// chunk's result, which every rank has already fast-retransmitted (its third successor answered
// while the appliance lacked rank 1's copy), and a chunk is fast-retransmitted once per
// transmission, so only its timer could repair that (seen about once in 150 runs). Without loss
// notices every rank resends the hole of rank 1's lost contribution; with them rank 1 resends it
// (on its notice, or after the grace), and rank 2 its lost result after the grace.
TEST(CommunicatorFastRetransmit, LostContributionAndResultAreResentWithoutWaitingForTheTimer) {
  constexpr int kWorld = 3;
  auto service = start_service();
  ASSERT_TRUE(service);
  for (const bool notices : {false, true}) {
    SCOPED_TRACE(notices ? "loss notices" : "no loss notices");
    const uint64_t answered_before = service->engine_counters().retransmits_answered.load();
    ImpairmentCounters impairments;
    const OneCall r = one_fp32_call(*service, notices ? "fast-notices" : "fast", kWorld, size_t{1} << 16, 7,
                                    [&](int rank, CommConfig& c) {
                                      c.slots = 32;                   // 256 chunks of 1 KiB over 32 slots
                                      c.rto_initial_us = 60'000'000;  // a minute: no timer fires within the test
                                      c.rto_max_us = 60'000'000;
                                      c.op_timeout_ms = 120'000;
                                      c.loss_notices = notices;
                                      Impairment imp;
                                      if (rank == 1) imp.drop_tx_at = 5;
                                      if (rank == 2) imp.drop_rx_at = 100;
                                      c.wrap_transport = impair(imp, &impairments);
                                    });
    EXPECT_EQ(impairments.dropped_tx.load(), 1u);
    EXPECT_EQ(impairments.dropped_rx.load(), 1u);
    for (int i = 0; i < kWorld; ++i) {
      const CommStats& s = r.stats[static_cast<size_t>(i)];
      EXPECT_EQ(r.errors[static_cast<size_t>(i)], "") << "rank " << i;
      EXPECT_EQ(s.retransmissions, 0u) << "rank " << i << ": a timer fired";
      if (!notices) {
        EXPECT_GE(s.fast_retransmissions, 1u) << "rank " << i;
      }
    }
    if (notices) {
      // Only rank 1 can complete the round it lost its contribution to: on its notice, or after the
      // grace (no notice when the other ranks' copies of that chunk arrived after rank 1's chunk
      // 8, as can happen in the first window, which every rank sends at once when it starts).
      EXPECT_GE(r.stats[1].notice_retransmissions + r.stats[1].fast_retransmissions, 1u) << "rank 1";
      EXPECT_GE(r.stats[2].fast_retransmissions, 1u) << "rank 2's lost result";
    }
    // Rank 2's lost result was answered again from the round's stored result.
    EXPECT_GE(service->engine_counters().retransmits_answered.load(), answered_before + 1);
  }
}

// One rank loses a chunk's result and then the answer to that chunk's fast retransmission (the
// chunk 3 after it was answered long before): the chunks sent after the retransmission and
// answered first reveal the second loss, so the chunk is resent again without its timer, which
// is longer than the test. Resending only the chunk exactly fast_retransmit_after before each
// answered one left this hole to the timer: the call stalled until the service's job timeout.
TEST(CommunicatorFastRetransmit, LostAnswerToAFastRetransmissionIsResentWithoutWaitingForTheTimer) {
  constexpr int kWorld = 3;
  embedded::ServiceOptions so;
  so.job_timeout_ms = 3000;  // a hole left to the timer fails the job this soon
  auto service = start_service(so);
  ASSERT_TRUE(service);
  ImpairmentCounters impairments;
  // 1024 chunks: after the first resend the other slots go on for many round trips. With 256 the
  // call could run out of chunks sent a round trip after the resend (the ones that reveal its loss)
  // when round trips were long and the first resend waited its grace (ASan on a slow 2-CPU machine).
  const OneCall r = one_fp32_call(*service, "fast2", kWorld, size_t{1} << 18, 9, [&](int rank, CommConfig& c) {
    c.slots = 32;                   // 1024 chunks of 1 KiB over 32 slots: chunk 100 is slot 4, round 3
    c.rto_initial_us = 60'000'000;  // a minute: the timers never fire within the test
    c.rto_max_us = 60'000'000;
    c.op_timeout_ms = 120'000;
    Impairment imp;
    if (rank == 2) {
      imp.drop_rx_slot = 4;
      imp.drop_rx_round = 3;
      imp.drop_rx_round_times = 2;
    }
    c.wrap_transport = impair(imp, &impairments);
  });
  EXPECT_EQ(impairments.dropped_rx.load(), 2u);
  for (int i = 0; i < kWorld; ++i) {
    EXPECT_EQ(r.errors[static_cast<size_t>(i)], "") << "rank " << i;
    EXPECT_EQ(r.stats[static_cast<size_t>(i)].retransmissions, 0u) << "rank " << i << ": a timer fired";
  }
  EXPECT_GE(r.stats[2].fast_retransmissions, 2u);
  EXPECT_GE(service->engine_counters().retransmits_answered.load(), 2u);
}

// The same loss with fast retransmission off waits for the timer (the mechanism above is what
// repaired it, not something else).
TEST(CommunicatorFastRetransmit, OffLeavesTheLossToTheTimer) {
  constexpr int kWorld = 2;
  auto service = start_service();
  ASSERT_TRUE(service);
  ImpairmentCounters impairments;
  const OneCall r = one_fp32_call(*service, "slow", kWorld, size_t{1} << 14, 3, [&](int rank, CommConfig& c) {
    c.slots = 32;
    c.fast_retransmit_after = 0;
    c.loss_notices = false;  // which would repair it too
    Impairment imp;
    if (rank == 1) imp.drop_tx_at = 5;
    c.wrap_transport = impair(imp, &impairments);
  });
  EXPECT_EQ(impairments.dropped_tx.load(), 1u);
  uint64_t timer = 0;
  for (int i = 0; i < kWorld; ++i) {
    EXPECT_EQ(r.errors[static_cast<size_t>(i)], "") << "rank " << i;
    EXPECT_EQ(r.stats[static_cast<size_t>(i)].fast_retransmissions, 0u) << "rank " << i;
    timer += r.stats[static_cast<size_t>(i)].retransmissions;
  }
  EXPECT_GE(timer, 1u);
}

// A worker stops sending in the middle of a call (its thread is alive, its control connection
// open): the service fails the job after its no-progress timeout, every rank's call returns
// Aborted within that bound, and the service frees the job.
TEST(CommunicatorFailure, WorkerThatStopsSendingFailsEveryRankWithinTheJobTimeout) {
  constexpr int kWorld = 3;
  constexpr uint32_t kJobTimeoutMs = 600;
  constexpr auto kBound = milliseconds(kJobTimeoutMs + 3000);
  embedded::ServiceOptions so;
  so.job_timeout_ms = kJobTimeoutMs;
  auto service = start_service(so);
  ASSERT_TRUE(service);
  std::vector<Status> results(kWorld);
  std::vector<Clock::duration> took(kWorld);
  ImpairmentCounters impairments;
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({service.get()}, "stalled", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    c.retries = 0;  // no give-up on the worker side: only the service's abort ends the call
    c.op_timeout_ms = 0;
    c.rto_max_us = 50000;
    if (rank == 2) {
      Impairment imp;
      imp.blackhole_after = 20;
      c.wrap_transport = impair(imp, &impairments);
    }
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      results[static_cast<size_t>(rank)] = comm.status();
      return;
    }
    const size_t count = size_t{1} << 16;
    auto buf = make_input(wire::Dtype::kFp32, count, rank, 1);
    const auto t0 = Clock::now();
    results[static_cast<size_t>(rank)] = (*comm)->allreduce(buf.data(), buf.data(), count);
    took[static_cast<size_t>(rank)] = Clock::now() - t0;
    // Later calls fail at once with the same error.
    Status again = (*comm)->allreduce(buf.data(), buf.data(), count);
    EXPECT_EQ(again.code(), results[static_cast<size_t>(rank)].code());
  });
  for (int r = 0; r < kWorld; ++r) {
    const Status& st = results[static_cast<size_t>(r)];
    EXPECT_EQ(st.code(), StatusCode::kAborted) << "rank " << r << ": " << st.to_string();
    EXPECT_NE(st.message().find(service->control_address()), std::string::npos) << st.message();
    EXPECT_LT(took[static_cast<size_t>(r)], kBound) << "rank " << r;
  }
  EXPECT_TRUE(service->wait_until_no_jobs(3000));
  EXPECT_TRUE(wait_for([&] { return service->server_counters().jobs_failed == 1; }, milliseconds(3000)))
      << "jobs_failed " << service->server_counters().jobs_failed;
  EXPECT_GT(impairments.dropped_tx.load(), 0u);
}

// A job that runs no collective for longer than the job timeout (compute phase, checkpoint) is
// idle, not stuck: the service keeps it, and the next call succeeds.
TEST(CommunicatorFailure, IdleJobOutlivesTheJobTimeout) {
  constexpr int kWorld = 2;
  constexpr uint32_t kJobTimeoutMs = 300;
  embedded::ServiceOptions so;
  so.job_timeout_ms = kJobTimeoutMs;
  auto service = start_service(so);
  ASSERT_TRUE(service);
  std::vector<Status> first(kWorld), second(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({service.get()}, "idle", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    auto comm = Communicator::create(c);
    ASSERT_TRUE(comm.ok()) << comm.status().to_string();
    const size_t count = 4096;
    auto buf = make_input(wire::Dtype::kFp32, count, rank, 1);
    first[static_cast<size_t>(rank)] = (*comm)->allreduce(buf.data(), buf.data(), count);
    // The scenario itself: three job timeouts without any collective.
    std::this_thread::sleep_for(milliseconds(3 * kJobTimeoutMs));
    second[static_cast<size_t>(rank)] = (*comm)->allreduce(buf.data(), buf.data(), count);
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(first[static_cast<size_t>(r)].ok()) << first[static_cast<size_t>(r)].to_string();
    EXPECT_TRUE(second[static_cast<size_t>(r)].ok()) << second[static_cast<size_t>(r)].to_string();
  }
  EXPECT_EQ(service->server_counters().jobs_failed, 0u);
}

// The service stops while a call is in flight: every rank's call returns an error promptly
// (abort packets and the control connection), long before any worker-side timeout.
TEST(CommunicatorFailure, ServiceStoppedMidCallFailsEveryRankPromptly) {
  constexpr int kWorld = 4;
  constexpr auto kBound = milliseconds(3000);
  embedded::ServiceOptions so;
  so.job_timeout_ms = 60000;  // the job timeout must not be what ends the calls
  auto service = start_service(so);
  ASSERT_TRUE(service);
  std::promise<void> stalled;
  std::atomic<bool> fired{false};
  std::vector<Status> results(kWorld);
  std::vector<Clock::time_point> ended(kWorld);
  std::vector<uint64_t> answered(kWorld);
  ImpairmentCounters impairments;
  std::thread stopper;
  auto stopped_at = std::make_shared<std::atomic<int64_t>>(0);
  std::future<void> stalled_f = stalled.get_future();
  stopper = std::thread([&] {
    stalled_f.wait();  // one worker stopped sending: the call cannot finish
    stopped_at->store(Clock::now().time_since_epoch().count());
    service->stop();
  });
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({service.get()}, "stopped", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    c.op_timeout_ms = 30000;
    if (rank == 3) {
      Impairment imp;
      imp.blackhole_after = 300;  // of 1024: well into the call
      imp.on_blackhole = [&] {
        if (!fired.exchange(true)) stalled.set_value();
      };
      c.wrap_transport = impair(imp, &impairments);
    }
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      results[static_cast<size_t>(rank)] = comm.status();
      ended[static_cast<size_t>(rank)] = Clock::now();
      return;
    }
    const size_t count = size_t{1} << 18;
    auto buf = make_input(wire::Dtype::kFp32, count, rank, 1);
    results[static_cast<size_t>(rank)] = (*comm)->allreduce(buf.data(), buf.data(), count);
    ended[static_cast<size_t>(rank)] = Clock::now();
    answered[static_cast<size_t>(rank)] = (*comm)->stats().results;
  });
  if (!fired.exchange(true)) stalled.set_value();  // never stalled (a failure above): unblock the stopper
  stopper.join();
  const Clock::time_point stop_time{Clock::duration(stopped_at->load())};
  for (int r = 0; r < kWorld; ++r) {
    const Status& st = results[static_cast<size_t>(r)];
    EXPECT_FALSE(st.ok()) << "rank " << r;
    EXPECT_TRUE(st.code() == StatusCode::kAborted || st.code() == StatusCode::kIoError)
        << "rank " << r << ": " << st.to_string();
    EXPECT_LT(ended[static_cast<size_t>(r)] - stop_time, kBound) << "rank " << r;
    EXPECT_GT(answered[static_cast<size_t>(r)], 0u) << "rank " << r << " had no result before the stop";
  }
  EXPECT_EQ(service->installed_jobs(), 0u);
}

// A result that is lost for good (the worker discards every result) exhausts the retry budget:
// the call fails with Timeout naming the appliance, well within the budget's bound. The deaf rank
// starts its call once the service holds rank 0's contribution, so that its first transmission
// completes the round and each of its retransmissions finds the stored result.
TEST(CommunicatorFailure, RetryBudgetExhaustionFailsTheCallNamingTheAppliance) {
  constexpr int kWorld = 2;
  auto service = start_service();
  ASSERT_TRUE(service);
  std::vector<Status> results(kWorld);
  ImpairmentCounters impairments;
  Barrier done(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({service.get()}, "deaf", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kInt32);
    if (rank == 1) {  // rank 0 keeps the default budget: it waits for the deaf rank to start
      c.rto_initial_us = 1000;
      c.rto_max_us = 4000;
      c.retries = 5;
      Impairment imp;
      imp.recv_loss = 1.0;
      c.wrap_transport = impair(imp, &impairments);
    }
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      results[static_cast<size_t>(rank)] = comm.status();
      done.arrive_and_wait();
      return;
    }
    auto buf = make_input(wire::Dtype::kInt32, 10, rank, 1);
    if (rank == 1) {
      const bool first =
          wait_for([&] { return service->engine_counters().contributions.load() >= 1; }, milliseconds(5000));
      EXPECT_TRUE(first) << "rank 0's contribution never reached the service";
      if (first) results[1] = (*comm)->allreduce(buf.data(), buf.data(), 10);
    }
    if (rank == 0) results[0] = (*comm)->allreduce(buf.data(), buf.data(), 10);
    done.arrive_and_wait();
  });
  EXPECT_TRUE(results[0].ok()) << results[0].to_string();
  EXPECT_EQ(results[1].code(), StatusCode::kTimeout) << results[1].to_string();
  EXPECT_NE(results[1].message().find(service->control_address()), std::string::npos) << results[1].message();
  EXPECT_NE(results[1].message().find("5 retransmissions"), std::string::npos) << results[1].message();
  // The deaf rank's losses were on its receive side: the service answered its retransmissions from
  // the stored result, all 5 sent after the round completed (a late resend of rank 0 may add one).
  // The service counts on its own thread, possibly after the deaf rank gave up: wait, bounded.
  EXPECT_TRUE(wait_for([&] { return service->engine_counters().retransmits_answered.load() >= 5; }, milliseconds(5000)))
      << service->engine_counters().retransmits_answered.load() << " retransmissions answered, want 5";
}

// ---- Loss notices against a scripted appliance --------------------------------------------------

// Rank 0's data path played by the test: the embedded service registers the job (and grants loss
// notices when the ranks ask), but what rank 0 sends never reaches it; the test sees every
// packet rank 0 sends and decides what rank 0 receives (results, loss notices), and when.
struct Script {
  struct Sent {
    wire::SumcastHeader hdr;
    std::vector<uint8_t> bytes;  // the packet as handed to send()
    std::vector<uint8_t> payload;
    Clock::time_point at;
    uint32_t dest_qp = 0;  // the appliance core's QP it went to
  };
  std::vector<Sent> sent;
  std::deque<Received> inbox;                 // what rank 0's next receive() returns
  std::deque<std::vector<uint8_t>> payloads;  // the inbox results' payloads (stable addresses)

  // The transmissions of (slot, round), in order.
  std::vector<const Sent*> of(uint16_t slot, uint32_t round) const {
    std::vector<const Sent*> out;
    for (const Sent& s : sent) {
      if (s.hdr.slot == slot && s.hdr.round == round) out.push_back(&s);
    }
    return out;
  }
  // Queues the result (the contribution's own payload: only rank 0's answer matters here) for
  // what `s` carried, as the appliance would send it to rank 0.
  void answer(const Sent& s) {
    Received r = reply(s, wire::MsgType::kResult);
    payloads.push_back(s.payload);
    r.payload = payloads.back().data();
    r.payload_len = static_cast<uint32_t>(payloads.back().size());
    inbox.push_back(r);
  }
  // Queues a loss notice naming the number `s` carries, from the core it went to (or `src_qp`),
  // as the appliance sends it (protocol.md §5, §7); `flags` its flags (an appliance of the
  // revision that named chunks sends no kFlagNoticeSeq).
  void notify(const Sent& s, std::optional<uint32_t> src_qp = std::nullopt,
              std::optional<uint8_t> flags = std::nullopt) {
    Received r;
    r.peer = 0;
    r.hdr.type = wire::MsgType::kLossNotice;
    r.hdr.dtype = s.hdr.dtype;
    r.hdr.op = s.hdr.op;
    r.hdr.job_id = s.hdr.job_id;
    r.hdr.rank = s.hdr.rank;
    r.hdr.round = wire::contribution_tx_seq(s.hdr);
    r.hdr.flags = flags.value_or(static_cast<uint8_t>(wire::kFlagNoticeSeq | (r.hdr.round & 1)));
    r.src_qp = src_qp.value_or(s.dest_qp);
    inbox.push_back(r);
  }
  // Queues a duplicate notice for what `s` carried (a resend of it found its round holding rank
  // 0's contribution), from the core it went to, as the appliance sends it (protocol.md §5, §7).
  void duplicate(const Sent& s) { inbox.push_back(reply(s, wire::MsgType::kDuplicateNotice)); }

 private:
  // A frame of `type` echoing the chunk `s` carried, from the core it went to, without payload.
  static Received reply(const Sent& s, wire::MsgType type) {
    Received r;
    r.peer = 0;
    r.hdr = s.hdr;
    r.hdr.type = type;
    r.hdr.status = 0;
    r.hdr.flags = static_cast<uint8_t>(s.hdr.round & 1);
    r.src_qp = s.dest_qp;
    return r;
  }
};

class ScriptedAppliance final : public ForwardingTransport {
 public:
  ScriptedAppliance(std::unique_ptr<Transport> inner, Script* script)
      : ForwardingTransport(std::move(inner)), s_(script) {}
  Status send(std::span<const OutPacket> packets) override {
    for (const OutPacket& p : packets) {
      wire::ParsedPacket pp;
      const wire::ParseError e = wire::parse_roce(std::span<const uint8_t>(p.data, p.len), &pp);
      EXPECT_EQ(e, wire::ParseError::kOk) << "rank 0 sent a packet that does not parse";
      if (e != wire::ParseError::kOk) continue;
      s_->sent.push_back(
          {pp.hdr, {p.data, p.data + p.len}, {pp.payload, pp.payload + pp.payload_len}, Clock::now(), pp.dest_qp});
    }
    return {};
  }
  size_t receive(std::span<Received> out) override {
    size_t n = 0;
    for (; n < out.size() && !s_->inbox.empty(); ++n) {
      out[n] = s_->inbox.front();
      s_->inbox.pop_front();
    }
    return n;
  }

 private:
  Script* s_;
};

// A job of two ranks, 8 slots of 1 KiB, timers far longer than the test, loss notices asked for
// or not; rank 0's data path is `script`, and `body` drives rank 0 (rank 1 only registers).
// `tweak`, if given, changes rank 0's configuration last.
void with_scripted_rank0(const std::string& job, bool notices, const std::function<void(Communicator&, Script&)>& body,
                         const std::function<void(CommConfig&)>& tweak = {}) {
  auto service = start_service();
  ASSERT_TRUE(service);
  Script script;
  Barrier done(2);
  run_ranks(2, [&](int rank) {
    CommConfig c = base_config({service.get()}, job, static_cast<uint16_t>(rank), 2, wire::Dtype::kFp32);
    c.slots = 8;
    c.payload_bytes = 1024;
    c.payload_explicit = true;
    c.rto_initial_us = 60'000'000;  // a minute: no timer fires within the test
    c.rto_max_us = 60'000'000;
    c.op_timeout_ms = 120'000;
    c.loss_notices = notices;
    if (rank == 0) {
      c.wrap_transport = [&script](std::unique_ptr<Transport> inner) {
        return std::make_unique<ScriptedAppliance>(std::move(inner), &script);
      };
      if (tweak) tweak(c);
    }
    auto comm = Communicator::create(c);
    EXPECT_TRUE(comm.ok()) << comm.status().to_string();
    if (comm.ok() && rank == 0) {
      EXPECT_EQ((*comm)->appliances().at(0).grant.loss_notices, notices);
      body(**comm, script);
    }
    done.arrive_and_wait();
  });
}

// Calls test() on `id` (which must not finish) until `until` holds or `timeout` passed.
bool drive(Communicator& comm, uint64_t id, const std::function<bool()>& until, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (until()) return true;
    if (Clock::now() >= deadline) return false;
    Status st;
    if (comm.test(id, &st)) {
      ADD_FAILURE() << "the call finished: " << st.to_string();
      return false;
    }
  }
}

constexpr auto kRtt = milliseconds(50);  // the round trip the scripted appliance makes

// Starts a call of 16 chunks (chunks 0..7 go out) and waits kRtt: results queued after that give
// round-trip samples of at least kRtt.
uint64_t start_sixteen_chunks(Communicator& comm, Script& script, std::vector<float>& buf) {
  buf.assign(16 * 256, 1.0f);
  auto id = comm.start_allreduce(buf.data(), buf.data(), buf.size());
  EXPECT_TRUE(id.ok()) << id.status().to_string();
  if (!id.ok()) return 0;
  EXPECT_EQ(script.sent.size(), 8u);
  const auto t0 = Clock::now();
  drive(
      comm, *id, [&] { return Clock::now() >= t0 + kRtt; }, kRtt * 2);
  return *id;
}

// start_sixteen_chunks, then drives rank 0 until its timers resend chunk 0 as the stall probe
// (within 4 RTOs of `rto`), which must be all that went out again; 0 when it did not come.
uint64_t start_until_stall_probe(Communicator& comm, Script& script, std::vector<float>& buf, milliseconds rto) {
  const uint64_t id = start_sixteen_chunks(comm, script, buf);
  if (id == 0) return 0;
  if (!drive(
          comm, id, [&] { return script.of(0, 0).size() >= 2; }, rto * 4)) {
    ADD_FAILURE() << "no stall probe";
    return 0;
  }
  EXPECT_EQ(script.sent.size(), 9u) << "more than the probe went out";
  return id;
}

// One progress step of rank 0: it takes what the script queued (the call must not finish).
void step(Communicator& comm, uint64_t id) {
  Status st;
  EXPECT_FALSE(comm.test(id, &st)) << "the call finished: " << st.to_string();
}

// Answers chunks 1..7 (round 0 of slots 1..7), leaving chunk 0 a hole, and hands them over.
void answer_all_but_chunk0(Communicator& comm, uint64_t id, Script& script) {
  for (uint16_t slot = 1; slot < 8; ++slot) script.answer(*script.of(slot, 0).at(0));
  step(comm, id);
}

// Rank 0 numbers its first transmissions 0, 1, 2, ... (one appliance core here), each in the
// packet (wire::contribution_tx_seq). A loss notice naming a number it sent, not answered and not
// resent since, resends that contribution at once, the identical packet; nothing else does: a
// second notice for it after the resend, a notice for an answered contribution, one from a QP
// that is no core of this job's, one without kFlagNoticeSeq (an appliance that named chunks).
TEST(CommunicatorLossNotices, ANoticeResendsTheContributionItNamesAtOnce) {
  with_scripted_rank0("notice", true, [](Communicator& comm, Script& script) {
    std::vector<float> buf;
    const uint64_t id = start_sixteen_chunks(comm, script, buf);
    ASSERT_NE(id, 0u);
    for (uint16_t slot = 0; slot < 8; ++slot) {
      ASSERT_EQ(script.of(slot, 0).size(), 1u);
      EXPECT_EQ(wire::contribution_tx_seq(script.of(slot, 0)[0]->hdr), slot) << "numbered in the order sent";
    }
    script.notify(*script.of(0, 0)[0]);
    step(comm, id);
    auto chunk0 = script.of(0, 0);
    ASSERT_EQ(chunk0.size(), 2u) << "the notice did not resend chunk 0 at once";
    EXPECT_EQ(chunk0[1]->bytes, chunk0[0]->bytes) << "the resend is not the identical contribution";
    EXPECT_EQ(script.sent.size(), 9u) << "only chunk 0 was resent";
    CommStats s = comm.stats();
    EXPECT_EQ(s.loss_notices, 1u);
    EXPECT_EQ(s.notice_retransmissions, 1u);
    EXPECT_EQ(s.fast_retransmissions, 0u);
    EXPECT_EQ(s.retransmissions, 0u);

    script.notify(*chunk0[0]);  // resent already: the resend may be on its way
    step(comm, id);
    EXPECT_EQ(script.of(0, 0).size(), 2u) << "a second notice resent it again";

    answer_all_but_chunk0(comm, id, script);  // chunks 9..15 go out, numbers 8..14
    ASSERT_EQ(script.of(1, 1).size(), 1u);
    EXPECT_EQ(wire::contribution_tx_seq(script.of(1, 1)[0]->hdr), 8u);
    script.answer(*chunk0[0]);  // chunk 8 goes out, number 15
    step(comm, id);
    ASSERT_EQ(script.of(0, 1).size(), 1u) << "chunk 8";
    EXPECT_EQ(wire::contribution_tx_seq(script.of(0, 1)[0]->hdr), 15u);
    script.notify(*script.of(1, 0)[0]);                                   // chunk 1: answered
    script.notify(*script.of(0, 1)[0], script.of(0, 1)[0]->dest_qp + 1);  // no core of this job
    script.notify(*script.of(0, 1)[0], std::nullopt, uint8_t{0});         // no kFlagNoticeSeq
    step(comm, id);
    EXPECT_EQ(script.of(1, 0).size(), 1u);
    EXPECT_EQ(script.of(0, 1).size(), 1u) << "chunk 8 resent on a notice that names nothing";
    script.notify(*script.of(0, 1)[0]);  // chunk 8, number 15
    step(comm, id);
    EXPECT_EQ(script.of(0, 1).size(), 2u) << "chunk 8 was not resent on its notice";
    s = comm.stats();
    EXPECT_EQ(s.results, 8u);
    EXPECT_EQ(s.loss_notices, 6u);
    EXPECT_EQ(s.notice_retransmissions, 2u);
    EXPECT_EQ(s.fast_retransmissions, 0u) << "chunk 0's resend left after chunks 1..7: it was no hole";
    EXPECT_EQ(s.transport.drops[static_cast<size_t>(DropReason::kBadType)], 0u);
  });
}

// A stall, not a loss: rank 0's timers expire while the appliance waits for a late rank, and
// chunk 0 goes out again as the stall probe. Its round completes (the answer may be the first
// transmission's), and the rounds of chunks 1..7, sent with chunk 0's first transmission, complete
// one by one as the late rank catches up, each well within an RTO of the last but all of them
// over two RTOs. None of chunks 1..7 is presumed lost: every retransmission is a stall probe
// (taking the answered probe as evidence one RTO after its answer resent the chunks still
// unanswered then, all spurious).
// Then nothing more is answered (results lost): the chunks sent before the latest answered
// probe are presumed lost and resent once its RTO passed after the last answer, not before.
TEST(CommunicatorTimers, AnAnsweredStallProbeIsNoEvidenceWhileTheChunksSentWithItKeepBeingAnswered) {
  constexpr auto kRto = milliseconds(200);
  with_scripted_rank0(
      "stallprobe", false,
      [kRto](Communicator& comm, Script& script) {
        std::vector<float> buf;
        const uint64_t id = start_until_stall_probe(comm, script, buf, kRto);
        ASSERT_NE(id, 0u);
        script.answer(*script.of(0, 0).at(0));
        step(comm, id);
        auto last_answer = Clock::now();
        for (uint16_t slot = 1; slot < 8; ++slot) {  // the late rank catches up: a round every 60 ms
          const auto t = Clock::now();
          drive(
              comm, id, [&] { return Clock::now() >= t + kRto * 3 / 10; }, kRto);
          script.answer(*script.of(slot, 0).at(0));
          last_answer = Clock::now();
          step(comm, id);
        }
        CommStats s = comm.stats();
        EXPECT_EQ(s.results, 8u);
        EXPECT_GE(s.retransmissions, 1u);
        EXPECT_EQ(s.retransmissions, s.stall_probes)
            << s.retransmissions - s.stall_probes << " chunks presumed lost while the stall cleared";

        // Chunks 8..15 are out, some of them first sent before a probe answered above, and
        // nothing more is answered (results lost).
        ASSERT_TRUE(drive(
            comm, id,
            [&] {
              const CommStats now = comm.stats();
              return now.retransmissions - now.stall_probes > s.retransmissions - s.stall_probes;
            },
            kRto * 10))
            << "the chunks sent before an answered probe were never presumed lost";
        EXPECT_GE(Clock::now() - last_answer, kRto) << "presumed lost within the probe's RTO";
      },
      [kRto](CommConfig& c) {
        c.rto_initial_us = static_cast<uint32_t>(std::chrono::microseconds(kRto).count());
        c.rto_max_us = c.rto_initial_us;  // backoffs stay at kRto: the trickle spans two of them
      });
}

// The same stall, with notices granted, and then nothing more answered: chunk 0's stall probe
// answered, but chunks 1..7's rounds still wait for the late rank. The answer is the first
// transmission's, no evidence against chunks 1..7, where the appliance said so (a duplicate
// notice: the probe found chunk 0's round holding its first copy) or where the probe's own answer
// came after that (the round had completed before the probe arrived, and its answer repeats the
// result): over three RTOs every retransmission stays a stall probe. Without either, the answered
// probe is evidence once its RTO passed, and chunks 1..7 are presumed lost and resent (what the
// notice is for: allreduce_drops under ASan, where a rank stalled again for longer than that after
// its probe's answer).
TEST(CommunicatorTimers, AProbeTheRoundHeldAlreadyIsNoEvidenceAgainstTheChunksSentBeforeIt) {
  constexpr auto kRto = milliseconds(200);
  enum class Then { kDuplicateNotice, kAnsweredTwice, kNothing };
  for (const Then then : {Then::kDuplicateNotice, Then::kAnsweredTwice, Then::kNothing}) {
    const bool first_copys = then != Then::kNothing;  // the answer is known to be the first copy's
    const char* name = then == Then::kDuplicateNotice ? "dupnotice"
                       : then == Then::kAnsweredTwice ? "twice"
                                                      : "nothing";
    SCOPED_TRACE(name);
    with_scripted_rank0(
        name, true,
        [kRto, then, first_copys](Communicator& comm, Script& script) {
          std::vector<float> buf;
          const uint64_t id = start_until_stall_probe(comm, script, buf, kRto);
          ASSERT_NE(id, 0u);
          ASSERT_EQ(script.sent.size(), 9u);
          // Before the answers are given: the communicator cannot take them earlier, and it may
          // take them well before step() returns (ASan, busy CPUs: 4 ms once).
          const auto answered = Clock::now();
          if (then == Then::kDuplicateNotice) script.duplicate(*script.of(0, 0).at(1));
          script.answer(*script.of(0, 0).at(0));
          if (then == Then::kAnsweredTwice) script.answer(*script.of(0, 0).at(1));
          step(comm, id);
          const bool settled = drive(
              comm, id,
              [&] {
                const CommStats now = comm.stats();
                return now.retransmissions > now.stall_probes || Clock::now() >= answered + kRto * 3;
              },
              kRto * 4);
          ASSERT_TRUE(settled);
          const CommStats s = comm.stats();
          if (first_copys) {
            EXPECT_EQ(s.retransmissions, s.stall_probes)
                << s.retransmissions - s.stall_probes << " chunks presumed lost on a probe the round held";
            EXPECT_GE(s.stall_probes, 2u) << "the next oldest chunk was not probed";
            for (uint16_t slot = 2; slot < 8; ++slot) {  // chunk 1, the oldest, is the probe
              EXPECT_EQ(script.of(slot, 0).size(), 1u) << "chunk " << slot << " resent";
            }
          } else {
            EXPECT_GT(s.retransmissions, s.stall_probes) << "the answered probe was never taken as evidence";
            EXPECT_GE(Clock::now() - answered, kRto) << "presumed lost within the probe's RTO";
          }
          EXPECT_EQ(s.transport.drops[static_cast<size_t>(DropReason::kBadType)], 0u);
        },
        [kRto](CommConfig& c) {
          c.rto_initial_us = static_cast<uint32_t>(std::chrono::microseconds(kRto).count());
          c.rto_max_us = c.rto_initial_us;
        });
  }
}

// With notices granted, a hole that results reveal (chunk 0 unanswered while chunks 1..7 are
// answered) is another rank's loss far more often than this rank's: it is not resent on the
// results, only once it stayed unanswered for the grace (at least the smoothed RTT, here >= kRtt),
// then by the timer path, exactly once, as the identical contribution.
TEST(CommunicatorLossNotices, AHoleRevealedByResultsIsResentOnlyAfterTheRttGrace) {
  with_scripted_rank0("grace", true, [](Communicator& comm, Script& script) {
    std::vector<float> buf;
    const uint64_t id = start_sixteen_chunks(comm, script, buf);
    ASSERT_NE(id, 0u);
    const auto revealed_by = Clock::now();
    answer_all_but_chunk0(comm, id, script);
    EXPECT_EQ(comm.stats().results, 7u);
    EXPECT_EQ(script.of(0, 0).size(), 1u) << "resent on the results, before the grace";
    EXPECT_EQ(script.sent.size(), 15u) << "chunks 9..15 follow their slots' results";
    ASSERT_TRUE(drive(
        comm, id, [&] { return script.of(0, 0).size() >= 2; }, milliseconds(5000)))
        << "the hole was never resent";
    const auto chunk0 = script.of(0, 0);
    EXPECT_EQ(chunk0[1]->bytes, chunk0[0]->bytes);
    EXPECT_GE(chunk0[1]->at - revealed_by, kRtt) << "resent within the grace";
    const CommStats s = comm.stats();
    EXPECT_EQ(s.fast_retransmissions, 1u);
    EXPECT_EQ(s.retransmissions, 0u) << "a timer fired";
    EXPECT_EQ(s.notice_retransmissions, 0u);
  });
}

// Without the grant the rule is as before notices: the hole is resent on the result that reveals
// it; and a message of type 4 from that appliance is an unknown type, dropped as bad_type.
TEST(CommunicatorLossNotices, WithoutTheGrantHolesAreResentAtOnceAndNoticesAreBadType) {
  with_scripted_rank0("nonotice", false, [](Communicator& comm, Script& script) {
    std::vector<float> buf;
    const uint64_t id = start_sixteen_chunks(comm, script, buf);
    ASSERT_NE(id, 0u);
    answer_all_but_chunk0(comm, id, script);
    EXPECT_EQ(script.of(0, 0).size(), 2u) << "not resent at once on the revealing result";
    EXPECT_EQ(comm.stats().fast_retransmissions, 1u);
    script.notify(*script.of(0, 0)[0]);
    step(comm, id);
    EXPECT_EQ(script.of(0, 0).size(), 2u);
    const CommStats s = comm.stats();
    EXPECT_EQ(s.transport.drops[static_cast<size_t>(DropReason::kBadType)], 1u);
    EXPECT_EQ(s.loss_notices, 0u);
    EXPECT_EQ(s.notice_retransmissions, 0u);
  });
}

}  // namespace
}  // namespace sumcast::shim
