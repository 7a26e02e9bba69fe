#include "sumcast/mpi/stats.h"

#include <cstdio>

namespace sumcast::mpi {
namespace {

std::string human_bytes(uint64_t b) {
  char buf[32];
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, unit[u]);
  return buf;
}

std::string part(const char* what, uint64_t calls, uint64_t bytes, uint64_t ns) {
  char buf[160];
  const double s = static_cast<double>(ns) / 1e9;
  std::snprintf(buf, sizeof buf, "%s %llu calls, %s, %.3f s", what, static_cast<unsigned long long>(calls),
                human_bytes(bytes).c_str(), s);
  std::string out = buf;
  if (calls != 0 && ns != 0) {
    std::snprintf(buf, sizeof buf, " (%.3f GB/s)", static_cast<double>(bytes) / static_cast<double>(ns));
    out += buf;
  }
  return out;
}

}  // namespace

const char* pass_reason_name(PassReason reason) {
  switch (reason) {
    case PassReason::kDisabled:
      return "disabled";
    case PassReason::kCallOff:
      return "call_off";
    case PassReason::kDatatype:
      return "datatype";
    case PassReason::kOp:
      return "op";
    case PassReason::kComm:
      return "comm";
    case PassReason::kSmall:
      return "small";
    case PassReason::kSetup:
      return "setup_failed";
    case PassReason::kDevice:
      return "device_buffer";
    case PassReason::kFallback:
      return "fallback";
  }
  return "?";
}

void Stats::taken(CallKind kind, uint64_t bytes, uint64_t ns, bool intranode) {
  const size_t b = static_cast<size_t>(kind) * kPerKind;
  f_[b + 0].fetch_add(1, std::memory_order_relaxed);
  f_[b + 1].fetch_add(bytes, std::memory_order_relaxed);
  f_[b + 2].fetch_add(ns, std::memory_order_relaxed);
  if (intranode) f_[kIntranodeField].fetch_add(1, std::memory_order_relaxed);
}

void Stats::passed(CallKind kind, PassReason reason, uint64_t bytes, uint64_t ns) {
  const size_t b = static_cast<size_t>(kind) * kPerKind;
  f_[b + 3].fetch_add(1, std::memory_order_relaxed);
  f_[b + 4].fetch_add(bytes, std::memory_order_relaxed);
  f_[b + 5].fetch_add(ns, std::memory_order_relaxed);
  f_[kReasonBase + static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

void Stats::add_data_path(const DataPath& d) {
  f_[kRetransmitField].fetch_add(d.retransmissions, std::memory_order_relaxed);
  f_[kStallProbeField].fetch_add(d.stall_probes, std::memory_order_relaxed);
  f_[kFastRetransmitField].fetch_add(d.fast_retransmissions, std::memory_order_relaxed);
  f_[kLossNoticeField].fetch_add(d.loss_notices, std::memory_order_relaxed);
  f_[kNoticeRetransmitField].fetch_add(d.notice_retransmissions, std::memory_order_relaxed);
  f_[kDuplicateNoticeField].fetch_add(d.duplicate_notices, std::memory_order_relaxed);
  f_[kRxOverflowField].fetch_add(d.rx_overflows, std::memory_order_relaxed);
  f_[kTxRefusedField].fetch_add(d.tx_refused, std::memory_order_relaxed);
  f_[kTxDroppedField].fetch_add(d.tx_dropped, std::memory_order_relaxed);
  f_[kGroReceivesField].fetch_add(d.gro_receives, std::memory_order_relaxed);
  f_[kGroSegmentsField].fetch_add(d.gro_segments, std::memory_order_relaxed);
  f_[kGsoSendsField].fetch_add(d.gso_sends, std::memory_order_relaxed);
  f_[kGsoSegmentsField].fetch_add(d.gso_segments, std::memory_order_relaxed);
  f_[kCutTrainField].fetch_add(d.rx_cut_train, std::memory_order_relaxed);
}

void Stats::staged(uint64_t bytes_copied) {
  f_[kStagedCallsField].fetch_add(1, std::memory_order_relaxed);
  f_[kStagedBytesField].fetch_add(bytes_copied, std::memory_order_relaxed);
}

void Stats::intranode_piece(bool numa_stage, bool cross_stage, uint64_t local_bytes, uint64_t smp_bytes) {
  if (numa_stage) f_[kNumaStageField].fetch_add(1, std::memory_order_relaxed);
  if (cross_stage) f_[kCrossStageField].fetch_add(1, std::memory_order_relaxed);
  f_[kLocalBytesField].fetch_add(local_bytes, std::memory_order_relaxed);
  f_[kSmpBytesField].fetch_add(smp_bytes, std::memory_order_relaxed);
}

void Stats::fell_back(bool copied) {
  f_[kFallbackField].fetch_add(1, std::memory_order_relaxed);
  f_[kFallbackCallsField].fetch_add(1, std::memory_order_relaxed);
  if (copied) f_[kFallbackCopiedField].fetch_add(1, std::memory_order_relaxed);
}

Stats::Snapshot Stats::snapshot() const {
  Snapshot s{};
  for (size_t i = 0; i < kFields; ++i) s[i] = f_[i].load(std::memory_order_relaxed);
  return s;
}

std::string Stats::format(const Snapshot& s, const std::string& scope) {
  std::string out = "sumcast-mpi: statistics (" + scope + ")\n";
  for (int k = 0; k < kCallKindCount; ++k) {
    const size_t b = static_cast<size_t>(k) * kPerKind;
    if (s[b] == 0 && s[b + 3] == 0) continue;
    char name[40];
    std::snprintf(name, sizeof name, "%-25s", call_kind_name(static_cast<CallKind>(k)));
    out += std::string("sumcast-mpi:   ") + name + part("taken", s[b], s[b + 1], s[b + 2]) + "; " +
           part("passed", s[b + 3], s[b + 4], s[b + 5]) + "\n";
  }
  out += "sumcast-mpi:   passed because:";
  for (int r = 0; r < kPassReasonCount; ++r) {
    out += std::string(" ") + pass_reason_name(static_cast<PassReason>(r)) + " " +
           std::to_string(s[kReasonBase + static_cast<size_t>(r)]);
  }
  out += "\nsumcast-mpi:   intra-node calls " + std::to_string(s[kIntranodeField]) + ", appliance retransmissions " +
         std::to_string(s[kRetransmitField]) + " (stall probes " + std::to_string(s[kStallProbeField]) +
         "), fast retransmissions " + std::to_string(s[kFastRetransmitField]) + ", loss notices " +
         std::to_string(s[kLossNoticeField]) + " (resends " + std::to_string(s[kNoticeRetransmitField]) +
         "), duplicate notices " + std::to_string(s[kDuplicateNoticeField]) + "\n";
  out += "sumcast-mpi:   data path drops: socket receive overflows " + std::to_string(s[kRxOverflowField]) +
         ", sends refused " + std::to_string(s[kTxRefusedField]) + ", not sent " + std::to_string(s[kTxDroppedField]) +
         "; coalesced receives " + std::to_string(s[kGroReceivesField]) + " (" + std::to_string(s[kGroSegmentsField]) +
         " datagrams), segmented sends " + std::to_string(s[kGsoSendsField]) + " (" +
         std::to_string(s[kGsoSegmentsField]) + " packets), cut trains " + std::to_string(s[kCutTrainField]) +
         " datagrams\n";
  if (s[kStagedCallsField] != 0) {
    out += "sumcast-mpi:   device buffers staged through host memory: " + std::to_string(s[kStagedCallsField]) +
           " calls, " + human_bytes(s[kStagedBytesField]) + " copied\n";
  }
  if (s[kLocalBytesField] != 0 || s[kSmpBytesField] != 0) {
    out += "sumcast-mpi:   intra-node plan: " + std::to_string(s[kNumaStageField]) + " reduces within NUMA nodes, " +
           std::to_string(s[kCrossStageField]) + " across them; read " + human_bytes(s[kLocalBytesField]) +
           " on the own NUMA node, " + human_bytes(s[kSmpBytesField]) + " across NUMA nodes (SMP)\n";
  }
  if (s[kFallbackField] != 0) {
    out += "sumcast-mpi:   every appliance lost: " + std::to_string(s[kFallbackField]) +
           " communicator(s) fell back to MPI; calls in flight completed by MPI " +
           std::to_string(s[kFallbackCallsField]) + ", of them from another rank's result " +
           std::to_string(s[kFallbackCopiedField]) + "\n";
  }
  return out;
}

}  // namespace sumcast::mpi
