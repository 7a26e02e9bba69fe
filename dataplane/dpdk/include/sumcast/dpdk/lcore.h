// The worker lcores: one cache-aligned context per engine core, and the loop each runs.
//
// Loop (one fixed shape for every PMD and core count, so that one path is tested and measured):
// rx burst -> software dispatch (frames whose slot another
// core owns go to that core's dispatch ring; the owner drains its ring as another burst) ->
// engine.process_burst -> free the rx mbufs -> after a short poll (or kMaxHeldBursts full ones) send
// what the tx sink holds (TxHoldPolicy), retry the tx backlog (DpdkTxSink) -> every
// kControlInterval iterations drain the control ring (add/remove job, acked back) -> stop flag;
// with dataplane.idle_poll = "adaptive", an idle core sleeps between polls (IdleBackoff), and
// drains the control ring before each sleep.
//
// Everything in a context is written by its lcore only, except: the dispatch ring (any core
// enqueues, the owner dequeues), the control ring (the control thread enqueues) and the ack ring
// (the lcore enqueues, the control thread dequeues). Counters are read relaxed by telemetry.
#pragma once

#include <rte_ring.h>
#include <rte_spinlock.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "sumcast/core_counters.h"
#include "sumcast/dpdk/neighbour_service.h"
#include "sumcast/dpdk/tx_sink.h"
#include "sumcast/engine/engine.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::dpdk {

// Iterations of the lcore loop between two looks at the control ring.
inline constexpr uint32_t kControlInterval = 64;
// dataplane.idle_poll = "adaptive": once an lcore's polls have found nothing to do for
// dataplane.idle_after_us (500 us by default), it sleeps between polls, 1 us at first, doubling up
// to dataplane.idle_sleep_us; the first poll that finds work returns it to full speed. Like DPDK's
// power-aware examples, so that an appliance sharing its host (test beds, spare cores of GPU
// hosts) gives the core back while no job runs; with the default the gaps inside a running job (a
// round waiting for its slowest member) are mostly shorter, so they are polled through, and a
// shorter idle_after_us sleeps in them too. While it polls through a gap the lcore yields its
// CPU after every empty poll (sched_yield): on a shared host the scheduler puts waking workers on
// the sleeping lcore's CPU, and without the yield they waited there behind the polling lcore for
// the rest of the gap. Dedicated appliances keep "busy" (the default): no sleeps, no yields.
//
// The back-off of an idle lcore (pure, so that it is unit-tested without DPDK or a clock): what
// the lcore does after each poll.
struct IdleStep {
  enum class Kind : uint8_t {
    kPoll,   // the poll found work: poll again at once
    kYield,  // an empty poll inside a gap: sched_yield(), then poll again
    kSleep,  // idle for idle_after_us: sleep `sleep_us`, then poll again
  };
  Kind kind = Kind::kPoll;
  uint32_t sleep_us = 0;  // kSleep only
};

class IdleBackoff {
 public:
  IdleBackoff(uint32_t max_sleep_us, uint32_t idle_after_us)
      : max_us_(max_sleep_us == 0 ? 1 : max_sleep_us), after_ns_(uint64_t{idle_after_us} * 1000) {}
  // After a poll at `now_ns` (any monotonic clock): did it find work?
  IdleStep after_poll(bool worked, uint64_t now_ns) {
    if (worked) {
      idle_ = false;
      sleep_us_ = 0;
      return {};
    }
    if (!idle_) {  // the first empty poll starts the idle run (and never sleeps)
      idle_ = true;
      since_ns_ = now_ns;
      return {IdleStep::Kind::kYield, 0};
    }
    if (now_ns - since_ns_ < after_ns_) return {IdleStep::Kind::kYield, 0};
    sleep_us_ = sleep_us_ == 0 ? 1 : std::min(max_us_, sleep_us_ * 2);
    return {IdleStep::Kind::kSleep, sleep_us_};
  }

 private:
  uint32_t max_us_;
  uint64_t after_ns_;      // empty polls this long before the first sleep
  bool idle_ = false;      // the last poll found nothing
  uint64_t since_ns_ = 0;  // when the current run of empty polls began
  uint32_t sleep_us_ = 0;
};
// When the lcore sends the frames its bursts left held in its tx sink (DpdkTxSink::set_coalesce,
// dataplane.tx_coalesce): after a poll that did not fill its burst (the rx queue is drained: no
// frames behind to fill the tx batch), and after kMaxHeldBursts full bursts in a row at the latest,
// so that a held result waits at most that many bursts' processing while frames keep arriving.
class TxHoldPolicy {
 public:
  static constexpr uint32_t kMaxHeldBursts = 4;
  // After a poll: did it fill its burst? True when the held frames must go now.
  bool send_after(bool full_burst) {
    if (full_burst && ++full_ < kMaxHeldBursts) return false;
    full_ = 0;
    return true;
  }

 private:
  uint32_t full_ = 0;  // full bursts since the held frames last went out
};

// Largest rx burst (dataplane.burst_size is at most this).
inline constexpr uint32_t kMaxBurst = 512;
// Size of the control and ack rings (power of two; a core has at most kControlRingSize - 1
// control messages outstanding, so its ack ring never fills).
inline constexpr uint32_t kControlRingSize = 64;
// Core i's QPN (BTH DestQP of the contributions it owns): kCoreQpnBase + i.
inline constexpr uint32_t kCoreQpnBase = 0x100;

// A job operation for one lcore, posted by the control thread (which owns it) and handed back on
// the ack ring with `result` filled in.
struct ControlMsg {
  enum class Kind : uint8_t { kAddJob, kRemoveJob };
  Kind kind = Kind::kAddJob;
  std::shared_ptr<const engine::JobSpec> spec;  // kAddJob
  uint32_t job_id = 0;                          // kRemoveJob
  wire::AbortReason reason = wire::AbortReason::kNone;
  Status result;  // written by the lcore before it acks
};

// Port-layer counters of one core (the engine counts everything about frames' contents).
struct alignas(64) PortCounters {
  // rx_bursts ... arp_requests: one field per SUMCAST_PORT_COUNTERS entry (sumcast/core_counters.h).
#define SUMCAST_X(name, type, shown, help) std::atomic<uint64_t> name{0};
  SUMCAST_PORT_COUNTERS(SUMCAST_X)
#undef SUMCAST_X
};

struct alignas(64) LcoreContext {
  // Set up by the main thread before launch; constant afterwards.
  unsigned lcore_id = 0;
  int socket_id = 0;  // NUMA node of the lcore (engine memory comes from there)
  uint32_t core_index = 0;
  uint32_t core_count = 1;
  uint16_t port_id = 0;
  int rx_queue = -1;  // -1: no port queue of its own (receives only by dispatch)
  uint16_t tx_queue = 0;
  uint32_t burst_size = 32;
  bool software_dispatch = false;
  bool idle_adaptive = false;         // back off when idle (IdleBackoff) instead of polling at full speed
  uint32_t idle_sleep_us = 100;       // the longest sleep of an idle core
  uint32_t idle_after_us = 500;       // empty polls this long before it sleeps
  rte_ring* dispatch_ring = nullptr;  // MP/SC: frames other cores received for this core
  rte_ring* control_ring = nullptr;   // SP/SC: control thread -> lcore (ControlMsg*)
  rte_ring* ack_ring = nullptr;       // SP/SC: lcore -> control thread (ControlMsg*)
  std::vector<LcoreContext*> peers;   // every core's context, by core index
  const std::atomic<bool>* stop = nullptr;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<DpdkTxSink> tx;
  NeighbourService* neighbours = nullptr;  // core 0: sends its queued ARP requests between bursts

  // Written by the lcore.
  std::atomic<bool> running{false};   // the loop has started
  std::atomic<bool> finished{false};  // the loop has returned
  PortCounters counters;
};

// Entry point for rte_eal_remote_launch; `arg` is the core's LcoreContext. Returns 0.
int run_lcore(void* arg);
// Launches run_lcore(&core) on core.lcore_id (rte_eal_remote_launch's result). Everything the
// calling thread wrote before is ordered before the loop's first step (for ThreadSanitizer too,
// which does not see the order DPDK's launch gives).
int launch_lcore(LcoreContext& core);

// Handles every queued control message now, and on core 0 sends the queued ARP requests (used
// by the loop; also by tests).
void drain_control(LcoreContext& core);

}  // namespace sumcast::dpdk
