// The communicator against the embedded summation service on loopback: exact results for every
// dtype, sizes from 1 element to 64 MiB (less under ThreadSanitizer: below), in place and not,
// world sizes 2..8, several calls in flight, two jobs at once, several appliances sharing a call
// by weight.
#include "sumcast/shim/communicator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "shim_test_util.h"

namespace sumcast::shim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

// tools/test's tsan pass runs this suite for its threads. Under ThreadSanitizer every socket call
// and memory access is intercepted, and the bulk of this file's time there (ctest: 224 s, against
// 23 s under ASan, on the 2-CPU VM of 2026-12-05) went to moving the large counts, which add
// rounds of the same code, not new interleavings; the main and asan passes run them in full.
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
constexpr size_t kLargeCount = size_t{1} << 20;
constexpr size_t kLargeCountTsan = size_t{1} << 18;  // fp32: 256 chunks of 4 KiB, twice the 128 slots

std::string param_name(const ::testing::TestParamInfo<std::tuple<int, wire::Dtype>>& info) {
  return "world" + std::to_string(std::get<0>(info.param)) + "_" + wire::dtype_name(std::get<1>(info.param));
}

class AllreduceExact : public ::testing::TestWithParam<std::tuple<int, wire::Dtype>> {};

// Every rank gets the exact sum for counts around the chunk boundaries and a large one, out of
// place and in place, through one communicator (so rounds carry over from call to call).
TEST_P(AllreduceExact, EverySizeInAndOutOfPlaceIsExact) {
  const int world = std::get<0>(GetParam());
  const wire::Dtype dtype = std::get<1>(GetParam());
  const size_t es = wire::dtype_size(dtype);
  auto service = start_service();
  ASSERT_TRUE(service);
  const size_t large = kThreadSanitizer ? kLargeCountTsan : kLargeCount;
  if (kThreadSanitizer) {
    std::printf("note: ThreadSanitizer build: the large count is %zu elements here; the main and asan passes run %zu\n",
                large, kLargeCount);
  }
  const std::vector<size_t> counts = {1, 3, 0, 1000, 1024 / es, 1024 / es + 1, large};
  std::vector<std::string> errors(static_cast<size_t>(world));
  Barrier done(world);
  run_ranks(world, [&](int rank) {
    auto comm = Communicator::create(
        base_config({service.get()}, "exact", static_cast<uint16_t>(rank), static_cast<uint16_t>(world), dtype));
    if (!comm.ok()) {
      errors[static_cast<size_t>(rank)] = comm.status().to_string();
      done.arrive_and_wait();
      return;
    }
    int salt = 0;
    for (size_t count : counts) {
      for (bool in_place : {false, true}) {
        ++salt;
        const auto input = make_input(dtype, count, rank, salt);
        const auto want = make_expected(dtype, wire::ReduceOp::kSum, count, world, salt);
        std::vector<uint8_t> recv(count * es, 0xA5);
        std::vector<uint8_t> buf = input;
        Status st = in_place ? (*comm)->allreduce(buf.data(), buf.data(), count)
                             : (*comm)->allreduce(input.data(), recv.data(), count);
        const auto& got = in_place ? buf : recv;
        const long bad = st.ok() ? first_mismatch(got, want, es) : -2;
        if (bad != -1 && errors[static_cast<size_t>(rank)].empty()) {
          errors[static_cast<size_t>(rank)] = "count " + std::to_string(count) + (in_place ? " in place" : "") + ": " +
                                              (st.ok() ? "element " + std::to_string(bad) + " wrong" : st.to_string());
        }
      }
    }
    done.arrive_and_wait();
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(WorldsAndDtypes, AllreduceExact,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8),
                                            ::testing::Values(wire::Dtype::kFp32, wire::Dtype::kFp16,
                                                              wire::Dtype::kBf16, wire::Dtype::kInt32,
                                                              wire::Dtype::kFp64)),
                         param_name);

// One 64 MiB fp32 all-reduce (4 KiB payloads on loopback).
TEST(Communicator, SixtyFourMebibyteFp32IsExact) {
  if (kThreadSanitizer) {
    GTEST_SKIP() << "ThreadSanitizer build: 64 MiB adds data, not interleavings; the main and asan passes run it";
  }
  constexpr int kWorld = 2;
  constexpr size_t kCount = (size_t{64} << 20) / 4;
  auto service = start_service();
  ASSERT_TRUE(service);
  const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, kCount, kWorld, 5);
  std::vector<std::string> errors(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({service.get()}, "big", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    c.payload_bytes = 4096;
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      errors[static_cast<size_t>(rank)] = comm.status().to_string();
      return;
    }
    EXPECT_EQ((*comm)->appliances()[0].chunk_elems, 1024u);
    auto buf = make_input(wire::Dtype::kFp32, kCount, rank, 5);
    Status st = (*comm)->allreduce(buf.data(), buf.data(), kCount);
    if (!st.ok()) {
      errors[static_cast<size_t>(rank)] = st.to_string();
    } else if (first_mismatch(buf, want, 4) != -1) {
      errors[static_cast<size_t>(rank)] = "element " + std::to_string(first_mismatch(buf, want, 4)) + " wrong";
    }
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

// A default payload follows the path MTU (loopback: 4096, as much as the service grants); one the
// user chose is asked for as is, even when it equals the default.
TEST(Communicator, DefaultPayloadFollowsThePathMtuAndAChosenOneWins) {
  auto service = start_service();
  ASSERT_TRUE(service);
  for (const bool chosen : {false, true}) {
    std::vector<uint32_t> granted(2);
    run_ranks(2, [&](int rank) {
      CommConfig c = base_config({service.get()}, chosen ? "payload-chosen" : "payload-default",
                                 static_cast<uint16_t>(rank), 2, wire::Dtype::kFp32);
      c.payload_explicit = chosen;  // payload_bytes stays 1024, the default
      auto comm = Communicator::create(c);
      ASSERT_TRUE(comm.ok()) << comm.status().to_string();
      granted[static_cast<size_t>(rank)] = (*comm)->appliances()[0].grant.payload_bytes;
      std::vector<float> buf(5000, 1.0f);
      ASSERT_TRUE((*comm)->allreduce(buf.data(), buf.data(), buf.size()).ok());
      EXPECT_EQ(buf[4999], 2.0f);
    });
    for (const uint32_t g : granted) EXPECT_EQ(g, chosen ? 1024u : 4096u) << (chosen ? "chosen" : "default");
  }
}

// Min and max reach the appliance's kernels through the same path.
TEST(Communicator, MinAndMaxAreExact) {
  constexpr int kWorld = 3;
  auto service = start_service();
  ASSERT_TRUE(service);
  for (const auto& pair :
       {std::pair{wire::Dtype::kInt32, wire::ReduceOp::kMax}, std::pair{wire::Dtype::kFp32, wire::ReduceOp::kMin}}) {
    const wire::Dtype dtype = pair.first;  // not a structured binding: clang 14 cannot capture those
    const wire::ReduceOp op = pair.second;
    const size_t count = 5000;
    const auto want = make_expected(dtype, op, count, kWorld, 3);
    std::vector<std::string> errors(kWorld);
    run_ranks(kWorld, [&](int rank) {
      CommConfig c = base_config({service.get()}, std::string("minmax-") + wire::reduce_op_name(op),
                                 static_cast<uint16_t>(rank), kWorld, dtype);
      c.op = op;
      auto comm = Communicator::create(c);
      if (!comm.ok()) {
        errors[static_cast<size_t>(rank)] = comm.status().to_string();
        return;
      }
      auto in = make_input(dtype, count, rank, 3);
      std::vector<uint8_t> out(in.size());
      Status st = (*comm)->allreduce(in.data(), out.data(), count);
      if (!st.ok() || first_mismatch(out, want, wire::dtype_size(dtype)) != -1) {
        errors[static_cast<size_t>(rank)] = st.ok() ? "wrong result" : st.to_string();
      }
    });
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_EQ(errors[static_cast<size_t>(r)], "") << wire::reduce_op_name(op) << " rank " << r;
    }
  }
}

// Several calls in flight share the window; each completes exactly, whichever order they are
// waited for in, and test() reports completion without blocking.
TEST(Communicator, OutstandingCallsCompleteInAnyWaitOrder) {
  constexpr int kWorld = 3;
  auto service = start_service();
  ASSERT_TRUE(service);
  const std::vector<size_t> counts = {70000, 5, 300000, 1};
  std::vector<std::string> errors(kWorld);
  Barrier done(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({service.get()}, "nonblocking", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    c.slots = 16;
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      errors[static_cast<size_t>(rank)] = comm.status().to_string();
      done.arrive_and_wait();
      return;
    }
    std::vector<std::vector<uint8_t>> in, out;
    std::vector<uint64_t> ids;
    for (size_t k = 0; k < counts.size(); ++k) {
      in.push_back(make_input(wire::Dtype::kFp32, counts[k], rank, static_cast<int>(k)));
      out.emplace_back(counts[k] * 4);
      auto id = (*comm)->start_allreduce(in[k].data(), out[k].data(), counts[k]);
      if (!id.ok()) {
        errors[static_cast<size_t>(rank)] = id.status().to_string();
        done.arrive_and_wait();
        return;
      }
      ids.push_back(*id);
    }
    // The last (smallest) first, by test(); then the rest by wait(), in reverse order.
    Status st;
    while (!(*comm)->test(ids[3], &st)) {
    }
    EXPECT_TRUE(st.ok()) << st.to_string();
    for (int k = 2; k >= 0; --k) {
      st = (*comm)->wait(ids[static_cast<size_t>(k)]);
      EXPECT_TRUE(st.ok()) << st.to_string();
    }
    for (size_t k = 0; k < counts.size(); ++k) {
      const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, counts[k], kWorld, static_cast<int>(k));
      if (first_mismatch(out[k], want, 4) != -1) errors[static_cast<size_t>(rank)] = "call " + std::to_string(k);
    }
    Status unknown;
    EXPECT_TRUE((*comm)->test(ids[0], &unknown));
    EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*comm)->stats().calls, counts.size());
    done.arrive_and_wait();
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

// Two jobs with different dtypes and world sizes on one appliance at the same time.
TEST(Communicator, TwoJobsWithDifferentDtypesRunConcurrently) {
  auto service = start_service();
  ASSERT_TRUE(service);
  struct JobDef {
    const char* name;
    int world;
    wire::Dtype dtype;
  };
  const JobDef jobs[2] = {{"job-fp32", 2, wire::Dtype::kFp32}, {"job-bf16", 3, wire::Dtype::kBf16}};
  std::vector<std::string> errors(5);
  std::vector<std::thread> threads;
  size_t slot = 0;
  for (const JobDef& j : jobs) {
    for (int rank = 0; rank < j.world; ++rank, ++slot) {
      threads.emplace_back([&, j, rank, slot] {
        auto comm = Communicator::create(
            base_config({service.get()}, j.name, static_cast<uint16_t>(rank), static_cast<uint16_t>(j.world), j.dtype));
        if (!comm.ok()) {
          errors[slot] = comm.status().to_string();
          return;
        }
        for (int salt = 0; salt < 4; ++salt) {
          const size_t count = 100000 + static_cast<size_t>(salt);
          auto buf = make_input(j.dtype, count, rank, salt);
          Status st = (*comm)->allreduce(buf.data(), buf.data(), count);
          const auto want = make_expected(j.dtype, wire::ReduceOp::kSum, count, j.world, salt);
          if (!st.ok() || first_mismatch(buf, want, wire::dtype_size(j.dtype)) != -1) {
            errors[slot] = std::string(j.name) + ": " + (st.ok() ? "wrong result" : st.to_string());
            return;
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < errors.size(); ++i) EXPECT_EQ(errors[i], "") << "thread " << i;
  EXPECT_GE(service->server_counters().jobs_started, 2u);
}

// Two appliances with weights 1 and 3 split each call by contiguous element ranges: the first
// quarter goes to the first, the rest to the second (checked on the engines' byte counters).
TEST(Communicator, AppliancesShareEachCallByWeight) {
  constexpr int kWorld = 3;
  constexpr size_t kCount = 400000;
  auto a = start_service();
  auto b = start_service();
  ASSERT_TRUE(a && b);
  std::vector<std::string> errors(kWorld);
  Barrier done(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({a.get(), b.get()}, "weighted", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    c.appliances[1].weight = 3.0;
    auto comm = Communicator::create(c);
    if (!comm.ok()) {
      errors[static_cast<size_t>(rank)] = comm.status().to_string();
      done.arrive_and_wait();
      return;
    }
    auto buf = make_input(wire::Dtype::kFp32, kCount, rank, 9);
    Status st = (*comm)->allreduce(buf.data(), buf.data(), kCount);
    const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, kCount, kWorld, 9);
    if (!st.ok() || first_mismatch(buf, want, 4) != -1) {
      errors[static_cast<size_t>(rank)] = st.ok() ? "wrong result" : st.to_string();
    }
    done.arrive_and_wait();
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  const uint64_t bytes_a = a->engine_counters().payload_bytes.load();
  const uint64_t bytes_b = b->engine_counters().payload_bytes.load();
  EXPECT_EQ(bytes_a, uint64_t{kWorld} * (kCount / 4) * 4);
  EXPECT_EQ(bytes_b, uint64_t{kWorld} * (kCount - kCount / 4) * 4);
}

// Configuration errors are reported before anything is sent, naming what is wrong.
TEST(Communicator, BadConfigurationIsRejectedWithAMessage) {
  CommConfig c;
  c.job_name = "x";
  c.world_size = 2;
  c.rank = 2;
  c.appliances.push_back({"127.0.0.1:1", 1.0});
  auto r = Communicator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("rank 2"), std::string::npos) << r.status().message();

  c.rank = 0;
  c.appliances[0].address = "127.0.0.1";
  r = Communicator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("host:port"), std::string::npos) << r.status().message();

  c.appliances[0] = {"127.0.0.1:1", -1.0};
  r = Communicator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("weight"), std::string::npos) << r.status().message();

  c.appliances[0] = {"127.0.0.1:1", 1.0};
  c.repair_dscp = 64;
  r = Communicator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("repair_dscp must be -1..63"), std::string::npos) << r.status().message();

  c.repair_dscp = -1;
  c.dscp = 64;  // six bits: not masked into DSCP 0 in silence
  r = Communicator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dscp must be 0..63, got 64"), std::string::npos) << r.status().message();
}

// No appliance listening: creation fails (connection refused) and names the appliance.
TEST(Communicator, UnreachableApplianceFailsCreationNamingIt) {
  CommConfig c;
  c.job_name = "nobody";
  c.world_size = 2;
  c.appliances.push_back({"127.0.0.1:1", 1.0});
  c.token = kToken;
  c.bind_ip = "127.0.0.1";
  c.connect_timeout_ms = 2000;
  auto r = Communicator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("127.0.0.1:1"), std::string::npos) << r.status().message();
}

// Results by multicast through the embedded service on loopback: every rank joins the job's
// group, gets its results there, exact; a failed communicator has left the group before it is
// destroyed; a rank that did not ask keeps unicast results.
TEST(Communicator, MulticastResultsComeByTheGroupWhichIsLeftOnFailure) {
  embedded::ServiceOptions so;
  so.multicast = true;
  so.multicast_group = group_text(test_group(7));
  auto service = start_service(so);
  ASSERT_TRUE(service);
  constexpr int kWorld = 3;
  const size_t count = 40000;
  std::vector<std::string> errors(kWorld);
  std::vector<std::unique_ptr<Communicator>> comms(kWorld);
  uint32_t group = 0;
  std::mutex mu;
  Barrier joined(kWorld);
  run_ranks(kWorld, [&](int rank) {
    CommConfig c = base_config({service.get()}, "mcast", static_cast<uint16_t>(rank), kWorld, wire::Dtype::kFp32);
    c.multicast = true;
    auto comm = Communicator::create(c);
    std::string& err = errors[static_cast<size_t>(rank)];
    if (comm.ok()) {
      const JobGrant& g = (*comm)->appliances()[0].grant;
      if (!g.multicast) err = "not granted multicast";
      const auto input = make_input(wire::Dtype::kFp32, count, rank, 1);
      const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, count, kWorld, 1);
      std::vector<uint8_t> got(want.size(), 0xA5);
      const Status st = (*comm)->allreduce(input.data(), got.data(), count);
      if (!st.ok())
        err = st.to_string();
      else if (first_mismatch(got, want, 4) != -1)
        err = "wrong result";
      const CommStats stats = (*comm)->stats();
      if (err.empty() && stats.transport.group_results == 0) err = "no result came by the group";
      std::lock_guard<std::mutex> lock(mu);
      group = g.multicast_ip;
      comms[static_cast<size_t>(rank)] = std::move(comm).value();
    } else {
      err = comm.status().to_string();
    }
    joined.arrive_and_wait();
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  EXPECT_EQ(group, test_group(7));
  EXPECT_TRUE(joined_on_lo(group)) << "the ranks are members while their communicators live";

  // The appliance goes away: every communicator fails, and leaves the group at once.
  service->stop();
  for (auto& comm : comms) {
    float x = 1;
    EXPECT_FALSE(comm->allreduce(&x, &x, 1).ok());
    EXPECT_FALSE(comm->health().ok());
  }
  EXPECT_FALSE(joined_on_lo(group)) << "failed communicators still hold the group";
  comms.clear();
}

TEST(Communicator, MulticastWishOnAServiceThatDoesNotAllowItGetsUnicastResults) {
  auto service = start_service();  // multicast off
  ASSERT_TRUE(service);
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank) {
    CommConfig c = base_config({service.get()}, "wish", static_cast<uint16_t>(rank), 2, wire::Dtype::kFp32);
    c.multicast = true;
    auto comm = Communicator::create(c);
    std::string& err = errors[static_cast<size_t>(rank)];
    if (!comm.ok()) {
      err = comm.status().to_string();
      return;
    }
    if ((*comm)->appliances()[0].grant.multicast) err = "granted multicast";
    const auto input = make_input(wire::Dtype::kFp32, 3000, rank, 2);
    const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, 3000, 2, 2);
    std::vector<uint8_t> got(want.size(), 0xA5);
    const Status st = (*comm)->allreduce(input.data(), got.data(), 3000);
    if (!st.ok())
      err = st.to_string();
    else if (first_mismatch(got, want, 4) != -1)
      err = "wrong result";
    if (err.empty() && (*comm)->stats().transport.group_results != 0) err = "results on a group";
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

}  // namespace
}  // namespace sumcast::shim
