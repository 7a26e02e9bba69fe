// `sumcastctl stats --watch` rates (sumcast/ctl/watch.h): per second between two readings,
// counter resets, per core and in total, drops by reason, jobs matched by id, and the frame and
// JSON they are shown in. Readings are built here as sumcastd's telemetry replies look.
#include "sumcast/ctl/watch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sumcast::ctl {
namespace {

Json core_reply(uint64_t core, uint64_t rx, uint64_t payload_bytes, uint64_t slots, uint64_t bad_icrc,
                uint64_t unknown_job) {
  return Json::object({{"core", Json(core)},
                       {"lcore", Json(core + 1)},
                       {"rx_packets", Json(rx)},
                       {"tx_packets", Json(slots * 4)},
                       {"contributions", Json(slots * 4)},
                       {"payload_bytes", Json(payload_bytes)},
                       {"slots_completed", Json(slots)},
                       {"drop_bad_icrc", Json(bad_icrc)},
                       {"drop_unknown_job", Json(unknown_job)}});
}

Json job(uint64_t id, const std::string& name, uint64_t slots) {
  return Json::object({{"job_id", Json(id)},
                       {"name", Json(name)},
                       {"world_size", Json(4)},
                       {"registered", Json(4)},
                       {"running", Json(1)},
                       {"slots_completed", Json(slots)},
                       {"ms_since_progress", Json(3)}});
}

Json jobs_reply(std::vector<std::pair<std::string, Json>> jobs) {
  Json out = Json::object();
  out["count"] = jobs.size();
  for (auto& [key, j] : jobs) out[key] = std::move(j);
  out["server"] = Json::object({{"jobs_started", 1}});
  return out;
}

TEST(WatchTest, CounterRateIsTheIncreasePerSecond) {
  EXPECT_DOUBLE_EQ(counter_rate(100, 400, 2.0), 150.0);
  EXPECT_DOUBLE_EQ(counter_rate(7, 7, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(counter_rate(0, 1, 0.25), 4.0);
}

TEST(WatchTest, CounterThatWentDownRestartedFromZero) {
  // sumcastd restarted between the reads: it counted 30 since.
  EXPECT_DOUBLE_EQ(counter_rate(1000, 30, 3.0), 10.0);
}

TEST(WatchTest, NoTimeBetweenReadingsGivesNoRate) {
  EXPECT_DOUBLE_EQ(counter_rate(0, 100, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(counter_rate(0, 100, -1.0), 0.0);
}

TEST(WatchTest, ObjectRatesCoverEveryNumberAndMarkNewCounters) {
  const Json before = Json::object({{"a", Json(10)}});
  const Json after = Json::object({{"a", Json(30)}, {"name", Json("x")}, {"b", Json(5)}});
  const std::vector<RateRow> rows = object_rates(before, after, 4.0);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "a");
  EXPECT_EQ(rows[0].value, 30u);
  ASSERT_TRUE(rows[0].per_second.has_value());
  EXPECT_DOUBLE_EQ(*rows[0].per_second, 5.0);
  EXPECT_EQ(rows[1].name, "b");
  EXPECT_FALSE(rows[1].per_second.has_value());
}

class WatchRatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    before_.seconds = 100.0;
    before_.cores = {core_reply(0, 1000, 1000000, 10, 0, 2), core_reply(1, 2000, 2000000, 20, 1, 0)};
    before_.jobs = jobs_reply({{"job3", job(3, "resnet", 30)}, {"job4", job(4, "gone", 5)}});
    after_.seconds = 102.0;  // 2 s later
    after_.cores = {core_reply(0, 3000, 251000000, 110, 0, 2), core_reply(1, 2400, 2000000, 20, 5, 0)};
    after_.jobs = jobs_reply({{"job3", job(3, "resnet", 130)}, {"job9", job(9, "new", 50)}});
  }
  Reading before_;
  Reading after_;
};

TEST_F(WatchRatesTest, PerCoreAndTotalRates) {
  const WatchRates w = compute_rates(before_, after_);
  EXPECT_DOUBLE_EQ(w.seconds, 2.0);
  ASSERT_EQ(w.cores.size(), 2u);
  EXPECT_EQ(w.cores[0].core, 0u);
  EXPECT_EQ(w.cores[0].lcore, 1u);
  EXPECT_DOUBLE_EQ(w.cores[0].rx_pps, 1000.0);           // (3000 - 1000) / 2
  EXPECT_DOUBLE_EQ(w.cores[0].slots_ps, 50.0);           // (110 - 10) / 2
  EXPECT_DOUBLE_EQ(w.cores[0].contributions_ps, 200.0);  // 4 per slot
  EXPECT_DOUBLE_EQ(w.cores[0].summed_gbps, 1.0);         // 250e6 bytes / 2 s * 8 / 1e9
  EXPECT_DOUBLE_EQ(w.cores[1].rx_pps, 200.0);
  EXPECT_DOUBLE_EQ(w.cores[1].drops_ps, 2.0);  // bad_icrc 1 -> 5
  EXPECT_DOUBLE_EQ(w.total.rx_pps, 1200.0);
  EXPECT_DOUBLE_EQ(w.total.slots_ps, 50.0);
  EXPECT_DOUBLE_EQ(w.total.drops_ps, 2.0);
}

TEST_F(WatchRatesTest, DropsByReasonOverCoresNonZeroOnly) {
  const WatchRates w = compute_rates(before_, after_);
  ASSERT_EQ(w.drops_ps.size(), 1u);  // unknown_job did not move
  EXPECT_EQ(w.drops_ps[0].first, "bad_icrc");
  EXPECT_DOUBLE_EQ(w.drops_ps[0].second, 2.0);
}

TEST_F(WatchRatesTest, JobsAreMatchedByIdAndNewJobsHaveNoRateYet) {
  const WatchRates w = compute_rates(before_, after_);
  ASSERT_EQ(w.jobs.size(), 2u);  // job 4 left
  EXPECT_EQ(w.jobs[0].job_id, 3u);
  EXPECT_EQ(w.jobs[0].name, "resnet");
  ASSERT_TRUE(w.jobs[0].slots_ps.has_value());
  EXPECT_DOUBLE_EQ(*w.jobs[0].slots_ps, 50.0);
  EXPECT_EQ(w.jobs[1].job_id, 9u);
  EXPECT_FALSE(w.jobs[1].slots_ps.has_value());
}

TEST_F(WatchRatesTest, FrameShowsEveryCoreTheTotalDropsAndJobs) {
  const std::string f = format_watch(compute_rates(before_, after_), "title line");
  EXPECT_EQ(f.rfind("title line\n", 0), 0u) << f;
  EXPECT_NE(f.find("\n0 "), std::string::npos) << f;
  EXPECT_NE(f.find("\n1 "), std::string::npos) << f;
  EXPECT_NE(f.find("\ntotal "), std::string::npos) << f;
  EXPECT_NE(f.find("drops/s by reason: bad_icrc 2\n"), std::string::npos) << f;
  EXPECT_NE(f.find("resnet"), std::string::npos) << f;
  EXPECT_NE(f.find("4/4"), std::string::npos) << f;
  EXPECT_EQ(f.find("\x1b"), std::string::npos) << "the caller clears the screen";
}

TEST_F(WatchRatesTest, JsonCarriesTheSameRates) {
  const Json j = watch_json(compute_rates(before_, after_));
  Result<Json> back = parse_json(to_json(j));
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ((*back)["seconds"].get<double>(), 2.0);
  ASSERT_EQ((*back)["cores"].size(), 2u);
  EXPECT_DOUBLE_EQ((*back)["cores"][0]["rx_pps"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ((*back)["total"]["slots_ps"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ((*back)["drops_ps"]["bad_icrc"].get<double>(), 2.0);
  EXPECT_TRUE((*back)["jobs"][1]["slots_ps"].is_null());
}

}  // namespace
}  // namespace sumcast::ctl
