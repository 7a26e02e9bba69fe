// The interposer's statistics: counters per call kind and pass reason, and their text.
#include "sumcast/mpi/stats.h"

#include <gtest/gtest.h>

namespace sumcast::mpi {
namespace {

TEST(Stats, TakenAndPassedCallsLandInTheirKindsFields) {
  Stats s;
  s.taken(CallKind::kAllreduce, 1000, 2000, true);
  s.taken(CallKind::kAllreduce, 24, 10, false);
  s.passed(CallKind::kIallreduce, PassReason::kSmall, 8, 5);
  s.passed(CallKind::kAllreduce, PassReason::kOp, 16, 7);
  s.add_data_path({.retransmissions = 3,
                   .stall_probes = 2,
                   .fast_retransmissions = 11,
                   .loss_notices = 6,
                   .notice_retransmissions = 5,
                   .duplicate_notices = 12,
                   .rx_overflows = 5,
                   .tx_refused = 7,
                   .tx_dropped = 1,
                   .gro_receives = 4,
                   .gro_segments = 30,
                   .gso_sends = 2,
                   .gso_segments = 9,
                   .rx_cut_train = 8});
  const Stats::Snapshot v = s.snapshot();
  const size_t ar = static_cast<size_t>(CallKind::kAllreduce) * Stats::kPerKind;
  const size_t iar = static_cast<size_t>(CallKind::kIallreduce) * Stats::kPerKind;
  EXPECT_EQ(v[ar + 0], 2u);
  EXPECT_EQ(v[ar + 1], 1024u);
  EXPECT_EQ(v[ar + 2], 2010u);
  EXPECT_EQ(v[ar + 3], 1u);
  EXPECT_EQ(v[ar + 4], 16u);
  EXPECT_EQ(v[iar + 3], 1u);
  EXPECT_EQ(v[Stats::kReasonBase + static_cast<size_t>(PassReason::kSmall)], 1u);
  EXPECT_EQ(v[Stats::kReasonBase + static_cast<size_t>(PassReason::kOp)], 1u);
  EXPECT_EQ(v[Stats::kIntranodeField], 1u);
  EXPECT_EQ(v[Stats::kRetransmitField], 3u);
  EXPECT_EQ(v[Stats::kStallProbeField], 2u);
  EXPECT_EQ(v[Stats::kRxOverflowField], 5u);
  EXPECT_EQ(v[Stats::kTxRefusedField], 7u);
  EXPECT_EQ(v[Stats::kTxDroppedField], 1u);
  EXPECT_EQ(v[Stats::kGroReceivesField], 4u);
  EXPECT_EQ(v[Stats::kGroSegmentsField], 30u);
  EXPECT_EQ(v[Stats::kGsoSendsField], 2u);
  EXPECT_EQ(v[Stats::kGsoSegmentsField], 9u);
  EXPECT_EQ(v[Stats::kCutTrainField], 8u);
  EXPECT_EQ(v[Stats::kFastRetransmitField], 11u);
  EXPECT_EQ(v[Stats::kLossNoticeField], 6u);
  EXPECT_EQ(v[Stats::kNoticeRetransmitField], 5u);
  EXPECT_EQ(v[Stats::kDuplicateNoticeField], 12u);
  const std::string t = Stats::format(v, "rank 0");
  EXPECT_NE(t.find("appliance retransmissions 3 (stall probes 2), fast retransmissions 11, loss notices 6 (resends 5), "
                   "duplicate notices 12"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("data path drops: socket receive overflows 5, sends refused 7, not sent 1; coalesced receives 4 (30 "
                   "datagrams), segmented sends 2 (9 packets), cut trains 8 datagrams"),
            std::string::npos)
      << t;
}

TEST(Stats, TextNamesEachUsedCallAndEveryReason) {
  Stats s;
  s.taken(CallKind::kAllreduce, 3 << 20, 1'000'000'000, false);
  s.passed(CallKind::kAllreduce, PassReason::kDatatype, 4, 1);
  const std::string t = Stats::format(s.snapshot(), "rank 0");
  EXPECT_NE(t.find("statistics (rank 0)"), std::string::npos) << t;
  EXPECT_NE(t.find("MPI_Allreduce"), std::string::npos) << t;
  EXPECT_NE(t.find("taken 1 calls, 3.0 MiB, 1.000 s"), std::string::npos) << t;
  EXPECT_NE(t.find("passed 1 calls, 4 B"), std::string::npos) << t;
  EXPECT_EQ(t.find("MPI_Iallreduce"), std::string::npos) << "an unused call kind is listed:\n" << t;
  for (int r = 0; r < kPassReasonCount; ++r) {
    EXPECT_NE(t.find(pass_reason_name(static_cast<PassReason>(r))), std::string::npos) << r;
  }
  EXPECT_NE(t.find("datatype 1"), std::string::npos) << t;
}

TEST(Stats, FallbackToMpiIsCountedAndSaid) {
  Stats s;
  EXPECT_EQ(Stats::format(s.snapshot(), "rank 0").find("every appliance lost"), std::string::npos)
      << "no fallback, no line";
  s.fell_back(false);
  s.fell_back(true);
  s.passed(CallKind::kAllreduce, PassReason::kFallback, 64, 1);
  const auto v = s.snapshot();
  EXPECT_EQ(v[Stats::kFallbackField], 2u);
  EXPECT_EQ(v[Stats::kFallbackCallsField], 2u);
  EXPECT_EQ(v[Stats::kFallbackCopiedField], 1u);
  const std::string t = Stats::format(v, "rank 0");
  EXPECT_NE(t.find("every appliance lost: 2 communicator(s) fell back to MPI; calls in flight completed by MPI 2, of "
                   "them from another rank's result 1"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("fallback 1"), std::string::npos) << t;
}

TEST(Stats, IntranodePlanStagesAndBytesPerLink) {
  Stats s;
  EXPECT_EQ(Stats::format(s.snapshot(), "rank 0").find("intra-node plan"), std::string::npos)
      << "no intra-node piece, no line";
  s.intranode_piece(true, true, 3 << 20, 1 << 20);
  s.intranode_piece(false, false, 1 << 20, 0);
  const auto v = s.snapshot();
  EXPECT_EQ(v[Stats::kNumaStageField], 1u);
  EXPECT_EQ(v[Stats::kCrossStageField], 1u);
  EXPECT_EQ(v[Stats::kLocalBytesField], 4u << 20);
  EXPECT_EQ(v[Stats::kSmpBytesField], 1u << 20);
  const std::string t = Stats::format(v, "rank 0");
  EXPECT_NE(t.find("intra-node plan: 1 reduces within NUMA nodes, 1 across them; read 4.0 MiB on the own NUMA node, "
                   "1.0 MiB across NUMA nodes (SMP)"),
            std::string::npos)
      << t;
}

}  // namespace
}  // namespace sumcast::mpi
