// Scale-out through the communicator (docs/scale-out.md): a job whose aggregator list
// holds "appliances" and "host aggregators" (here all embedded services on loopback), split by
// the optimal placement. Every chunk is summed exactly once, by the aggregator whose range holds
// it, and the loss of any one aggregator fails every rank's call with an error naming it.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
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

}  // namespace
}  // namespace sumcast::shim
