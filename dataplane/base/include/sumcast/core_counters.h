// The per-core counters sumcastd keeps, listed once. Everything that names them is made from these
// lists: the engine's CoreCounters and the port layer's PortCounters fields, the rows of the
// /sumcast/stats telemetry command, the Prometheus HELP texts, the rows `sumcastctl stats` shows;
// tests/telemetry/monitoring_doc_test.cc checks docs/monitoring.md against them.
//
// X(name, type, shown, help)
//   name   the field, the telemetry key and the Prometheus family sumcast_<name>[_total]
//   type   kCounter (only grows; sumcast_<name>_total) or kGauge (sumcast_<name>)
//   shown  how `sumcastctl stats` shows it: kAlways, kNonZero (only when its total is not zero),
//          kJsonOnly (only with --json and in Prometheus)
//   help   the Prometheus HELP text (one sentence)
//
// The drop reasons are counters too; they have their own list (SUMCAST_DROP_REASONS, engine.h).
#pragma once

#include <cstddef>
#include <string_view>

// clang-format off
// Counted by the engine (about frames' contents). The order is the order of CoreCounters' fields
// and of the telemetry rows.
#define SUMCAST_ENGINE_COUNTERS(X)                                                                                   \
  X(rx_packets, kCounter, kAlways, "Frames received by the engine core.")                                           \
  X(rx_bytes, kCounter, kJsonOnly, "Bytes of frames received by the engine core.")                                  \
  X(tx_packets, kCounter, kAlways, "Frames the engine core built and sent (results, retransmissions, aborts, loss notices, CNPs, ARP).") \
  X(tx_bytes, kCounter, kJsonOnly, "Bytes of frames the engine core sent.")                                         \
  X(contributions, kCounter, kAlways, "Contributions accepted and summed.")                                         \
  X(payload_bytes, kCounter, kAlways, "Gradient bytes summed.")                                                     \
  X(slots_completed, kCounter, kAlways, "Slot rounds completed (every rank contributed).")                           \
  X(duplicates, kCounter, kAlways, "Contributions to an open round from a rank already counted (ignored).")          \
  X(retransmits_answered, kCounter, kAlways, "Stored results re-sent to one worker that missed them.")               \
  X(results_sent, kCounter, kAlways, "Result frames sent.")                                                          \
  X(group_frames, kCounter, kJsonOnly, "Result and abort frames sent to a multicast job's group (one each).")         \
  X(aborts_sent, kCounter, kAlways, "Abort frames sent to members of failed jobs.")                                  \
  X(arp_replies, kCounter, kAlways, "ARP replies sent for the data address.")                                        \
  X(arp_learned, kCounter, kAlways,                                                                                  \
    "ARP replies to the data address and announcements handed to the neighbour resolver.")                          \
  X(ce_marked, kCounter, kJsonOnly, "Contributions that arrived marked CE (congestion experienced).")                 \
  X(cnps_sent, kCounter, kJsonOnly, "RoCEv2 CNPs sent to senders of CE-marked contributions.")                 \
  X(loss_notices_sent, kCounter, kJsonOnly,                                                                          \
    "Loss notices sent: a rank's later chunk arrived while its contribution to an open round was missing.")         \
  X(duplicate_notices_sent, kCounter, kJsonOnly,                                                                          \
    "Duplicate notices sent: a rank resent a contribution the open round already held (a stall, not a loss).")    \
  X(jobs_active, kGauge, kAlways, "Jobs installed on the engine core.")

// Counted by the port layer around the engine (PortCounters fields), after the drop reasons.
#define SUMCAST_PORT_COUNTERS(X)                                                                                     \
  X(rx_bursts, kCounter, kNonZero, "Non-empty receive bursts.")                                                     \
  X(dispatched_out, kCounter, kNonZero, "Frames handed to another core (software dispatch).")                      \
  X(dispatched_in, kCounter, kNonZero, "Frames received from other cores (software dispatch).")                    \
  X(dispatch_full, kCounter, kNonZero, "Frames dropped because another core's dispatch ring was full.")            \
  X(control_msgs, kCounter, kNonZero, "Control messages (job install/remove) the core executed.")                  \
  X(idle_sleeps, kCounter, kNonZero, "Sleeps of the idle core (dataplane.idle_poll = adaptive).")                  \
  X(idle_yields, kCounter, kNonZero, "Empty polls after which the core yielded its CPU (dataplane.idle_poll = adaptive).") \
  X(arp_requests, kCounter, kNonZero, "ARP requests (and the gratuitous ARP) the neighbour resolver sent through the core.") \
  X(tx_hold_capped, kCounter, kNonZero, "Times frames held for a fuller transmit burst (dataplane.tx_coalesce) went out after 4 full rx bursts in a row, not after a short poll.")

// Counted by the core's transmit sink (DpdkTxSink), after the port layer's.
#define SUMCAST_TX_COUNTERS(X)                                                                                       \
  X(tx_deferred, kCounter, kNonZero, "Frames the transmit queue refused once, kept in the core's backlog and retried.") \
  X(tx_refused, kCounter, kNonZero, "Frames freed unsent: the transmit queue refused them and the core's backlog was full.") \
  X(tx_unsubmitted, kCounter, kNonZero, "Transmit buffers acquired and never submitted.")                           \
  X(tx_unknown_buffer, kCounter, kNonZero, "Buffers submitted to the transmit sink that it had not handed out (a bug).")

// All of them, in the order of the telemetry rows (the drop reasons stand between engine and port).
#define SUMCAST_CORE_COUNTERS(X) SUMCAST_ENGINE_COUNTERS(X) SUMCAST_PORT_COUNTERS(X) SUMCAST_TX_COUNTERS(X)
// clang-format on

namespace sumcast {

enum class CounterType { kCounter, kGauge };
enum class CounterShown { kAlways, kNonZero, kJsonOnly };

struct CoreCounterInfo {
  const char* name;
  CounterType type;
  CounterShown shown;
  const char* help;
};

inline constexpr CoreCounterInfo kCoreCounterInfo[] = {
#define SUMCAST_X(name, type, shown, help) {#name, CounterType::type, CounterShown::shown, help},
    SUMCAST_CORE_COUNTERS(SUMCAST_X)
#undef SUMCAST_X
};
inline constexpr size_t kCoreCounterCount = sizeof(kCoreCounterInfo) / sizeof(kCoreCounterInfo[0]);

// The entry for `name`, or nullptr when it is no per-core counter.
inline const CoreCounterInfo* find_core_counter(std::string_view name) {
  for (const CoreCounterInfo& c : kCoreCounterInfo) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

}  // namespace sumcast
