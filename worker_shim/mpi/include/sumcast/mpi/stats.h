// What the interposer did: calls taken (sent to the appliance) and passed through to MPI per
// call kind, with bytes and time, and why calls were passed through. Printed at MPI_Finalize
// when SUMCAST_MPI_STATS is set.
//
// Thread safety: record methods may be called from any thread (relaxed atomic counters).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "sumcast/mpi/env_config.h"

namespace sumcast::mpi {

// Why a call went to MPI. The decision uses only what MPI requires to be identical on every rank
// (count, datatype, op, communicator) and state the ranks agreed on.
enum class PassReason : uint8_t {
  kDisabled = 0,  // SUMCAST_MPI_ENABLE=0, a configuration problem, or an earlier set-up failure
  kCallOff = 1,   // the call kind is not in SUMCAST_MPI_CALLS
  kDatatype = 2,  // not a predefined datatype the wire has (derived, user, MPI_LONG, ...)
  kOp = 3,        // not MPI_SUM/MIN/MAX, or MIN/MAX on a type where only SUM is exact
  kComm = 4,      // inter-communicator, or a single rank
  kSmall = 5,     // below SUMCAST_MPI_THRESHOLD (or count 0)
  kSetup = 6,     // setting up this communicator's job failed (one warning was printed)
  kDevice = 7,    // a rank passed CUDA device memory and SUMCAST_MPI_DEVICE_BUFFERS=mpi (the ranks agreed)
  kFallback = 8,  // every appliance of the communicator's jobs was lost (SUMCAST_MPI_FAILOVER_FALLBACK=mpi)
};
inline constexpr int kPassReasonCount = 9;
const char* pass_reason_name(PassReason reason);

class Stats {
 public:
  // Field layout of snapshot(): per call kind {taken calls, bytes, ns, passed calls, bytes, ns},
  // then one count per pass reason, then calls taken on the intra-node path, then appliance
  // retransmissions, then calls whose device buffers were staged through host memory and the
  // bytes copied (both ways), then the intra-node plan's stage runs (per piece: the reduce within
  // each NUMA node, the reduce across them) and the bytes its reductions and copies read from
  // memory on the rank's own NUMA node and from other NUMA nodes (over the SMP link), then of the
  // retransmissions those that were stall probes (no later chunk answered: a late rank or a
  // descheduled appliance, not a loss), and the data path's drops on this rank's side: datagrams
  // its sockets dropped for want of receive buffer, sends refused (EAGAIN/ENOBUFS, retried) and
  // packets not sent at all; the coalesced receive buffers (UDP GRO) and the datagrams they held;
  // the segmented sends (UDP GSO) and the packets they carried. After the fall-back fields: the
  // fast retransmissions (a later chunk answered first), the appliances' loss notices received
  // and the resends they caused.
  static constexpr size_t kPerKind = 6;
  static constexpr size_t kReasonBase = kPerKind * kCallKindCount;
  static constexpr size_t kIntranodeField = kReasonBase + kPassReasonCount;
  static constexpr size_t kRetransmitField = kIntranodeField + 1;
  static constexpr size_t kStagedCallsField = kRetransmitField + 1;
  static constexpr size_t kStagedBytesField = kStagedCallsField + 1;
  static constexpr size_t kNumaStageField = kStagedBytesField + 1;
  static constexpr size_t kCrossStageField = kNumaStageField + 1;
  static constexpr size_t kLocalBytesField = kCrossStageField + 1;
  static constexpr size_t kSmpBytesField = kLocalBytesField + 1;
  static constexpr size_t kStallProbeField = kSmpBytesField + 1;
  static constexpr size_t kRxOverflowField = kStallProbeField + 1;
  static constexpr size_t kTxRefusedField = kRxOverflowField + 1;
  static constexpr size_t kTxDroppedField = kTxRefusedField + 1;
  static constexpr size_t kGroReceivesField = kTxDroppedField + 1;
  static constexpr size_t kGroSegmentsField = kGroReceivesField + 1;
  static constexpr size_t kGsoSendsField = kGroSegmentsField + 1;
  static constexpr size_t kGsoSegmentsField = kGsoSendsField + 1;
  // Every appliance lost, SUMCAST_MPI_FAILOVER_FALLBACK=mpi: communicators that fell back to MPI,
  // the calls in flight then that MPI completed, and of them those completed from another
  // rank's copy of the result (this rank was one call behind).
  static constexpr size_t kFallbackField = kGsoSegmentsField + 1;
  static constexpr size_t kFallbackCallsField = kFallbackField + 1;
  static constexpr size_t kFallbackCopiedField = kFallbackCallsField + 1;
  static constexpr size_t kFastRetransmitField = kFallbackCopiedField + 1;
  static constexpr size_t kLossNoticeField = kFastRetransmitField + 1;
  static constexpr size_t kNoticeRetransmitField = kLossNoticeField + 1;
  // Datagrams of a UDP_SEGMENT train that arrived cut (not coalesced again) and were taken one
  // by one for their IP ID (docs/protocol.md §2.2).
  static constexpr size_t kCutTrainField = kNoticeRetransmitField + 1;
  // Duplicate notices received: a resend of this rank found its open round holding its
  // contribution (a stall probe while another rank was late; docs/protocol.md §7).
  static constexpr size_t kDuplicateNoticeField = kCutTrainField + 1;
  static constexpr size_t kFields = kDuplicateNoticeField + 1;
  using Snapshot = std::array<uint64_t, kFields>;

  void taken(CallKind kind, uint64_t bytes, uint64_t ns, bool intranode);
  void passed(CallKind kind, PassReason reason, uint64_t bytes, uint64_t ns);
  // One job's data path at its teardown (Communicator::stats()).
  struct DataPath {
    uint64_t retransmissions = 0;
    uint64_t stall_probes = 0;
    uint64_t fast_retransmissions = 0;
    uint64_t loss_notices = 0;
    uint64_t notice_retransmissions = 0;
    uint64_t duplicate_notices = 0;
    uint64_t rx_overflows = 0;
    uint64_t tx_refused = 0;  // EAGAIN + ENOBUFS
    uint64_t tx_dropped = 0;
    uint64_t gro_receives = 0;
    uint64_t gro_segments = 0;
    uint64_t gso_sends = 0;
    uint64_t gso_segments = 0;
    uint64_t rx_cut_train = 0;
  };
  void add_data_path(const DataPath& d);
  void staged(uint64_t bytes_copied);
  // One piece through the intra-node plan: whether it ran the reduce within NUMA nodes and the
  // one across them, and the bytes read on the own node and across nodes.
  void intranode_piece(bool numa_stage, bool cross_stage, uint64_t local_bytes, uint64_t smp_bytes);
  // A communicator fell back to MPI, its call in flight completed by MPI (`copied`: from another
  // rank's result).
  void fell_back(bool copied);
  Snapshot snapshot() const;

  // Lines to print (each starts with "sumcast-mpi: "). `scope` says whose figures these are
  // ("rank 3", "max over 8 ranks").
  static std::string format(const Snapshot& s, const std::string& scope);

 private:
  std::array<std::atomic<uint64_t>, kFields> f_{};
};

}  // namespace sumcast::mpi
