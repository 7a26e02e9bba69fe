#include "sumcast/dpdk/lcore.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_prefetch.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>

#include "sumcast/counter.h"
#include "tsan_ring.h"

namespace sumcast::dpdk {
namespace {

// Per-lcore scratch space for one burst (on the lcore's stack).
struct Scratch {
  rte_mbuf* rx[kMaxBurst];
  rte_mbuf* foreign[kMaxBurst];
  int owner[kMaxBurst];
  rte_mbuf* group[kMaxBurst];
  rte_mbuf* dropped[kMaxBurst];
  engine::PacketView views[kMaxBurst];
};

// Runs the engine over `n` single-segment frames this core owns, then frees them.
inline void process_owned(LcoreContext& core, rte_mbuf** mbufs, uint32_t n, engine::PacketView* views) {
  for (uint32_t i = 0; i < n; ++i) {
    views[i].data = rte_pktmbuf_mtod(mbufs[i], const uint8_t*);
    views[i].len = mbufs[i]->data_len;
  }
  core.engine->process_burst(std::span<const engine::PacketView>(views, n), *core.tx);
  rte_pktmbuf_free_bulk(mbufs, n);
}

// Hands each foreign frame to its owner core's dispatch ring, one enqueue per owner.
inline void dispatch(LcoreContext& core, Scratch& s, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    const int owner = s.owner[i];
    if (owner < 0) continue;  // already sent with an earlier group
    uint32_t k = 0;
    for (uint32_t j = i; j < n; ++j) {
      if (s.owner[j] == owner) {
        s.group[k++] = s.foreign[j];
        s.owner[j] = -1;
      }
    }
    ring_release(core.peers[static_cast<uint32_t>(owner)]->dispatch_ring);
    const unsigned done = rte_ring_enqueue_burst(core.peers[static_cast<uint32_t>(owner)]->dispatch_ring,
                                                 reinterpret_cast<void**>(s.group), k, nullptr);
    if (done < k) {
      rte_pktmbuf_free_bulk(s.group + done, k - done);
      bump(core.counters.dispatch_full, k - done);
    }
    bump(core.counters.dispatched_out, done);
  }
}

inline void handle_rx(LcoreContext& core, Scratch& s, uint32_t n) {
  uint32_t kept = 0;
  uint32_t dropped = 0;
  uint32_t foreign = 0;
  const int self = static_cast<int>(core.core_index);
  for (uint32_t i = 0; i < n; ++i) {
    rte_mbuf* m = s.rx[i];
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(s.rx[i + 1], void*));
    if (m->nb_segs > 1) {
      s.dropped[dropped++] = m;
      continue;
    }
    if (core.software_dispatch) {
      const int owner = engine::Engine::owner_core(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, core.core_count);
      if (owner >= 0 && owner != self) {
        s.foreign[foreign] = m;
        s.owner[foreign++] = owner;
        continue;
      }
    }
    s.rx[kept++] = m;
  }
  if (foreign > 0) dispatch(core, s, foreign);
  if (dropped > 0) {
    rte_pktmbuf_free_bulk(s.dropped, dropped);
    core.engine->count_drop(engine::DropReason::kMultiSegment, dropped);
  }
  if (kept > 0) process_owned(core, s.rx, kept, s.views);
}

}  // namespace

void drain_control(LcoreContext& core) {
  void* msgs[8];
  unsigned n = 0;
  while ((n = rte_ring_sc_dequeue_burst(core.control_ring, msgs, 8, nullptr)) > 0) {
    ring_acquire(core.control_ring);
    for (unsigned i = 0; i < n; ++i) {
      auto* msg = static_cast<ControlMsg*>(msgs[i]);
      switch (msg->kind) {
        case ControlMsg::Kind::kAddJob:
          msg->result = core.engine->add_job(*msg->spec);
          break;
        case ControlMsg::Kind::kRemoveJob:
          core.engine->remove_job(msg->job_id, msg->reason, *core.tx);
          core.tx->send_held();  // the aborts go now, held or not
          msg->result = Status();
          break;
      }
      bump(core.counters.control_msgs, 1);
      // The ack ring is as large as the control ring and the control thread never has more
      // messages outstanding on a core than that, so this does not spin in practice.
      ring_release(core.ack_ring);
      while (rte_ring_sp_enqueue(core.ack_ring, msg) != 0) rte_pause();
    }
  }
  if (core.neighbours != nullptr) {
    const uint64_t requests = core.neighbours->send_queued(*core.tx);
    if (requests > 0) {
      bump(core.counters.arp_requests, requests);
      core.tx->send_held();  // not held through an idle sleep
    }
  }
}

int launch_lcore(LcoreContext& core) {
  ring_release(&core);
  return rte_eal_remote_launch(run_lcore, &core, core.lcore_id);
}

int run_lcore(void* arg) {
  LcoreContext& core = *static_cast<LcoreContext*>(arg);
  ring_acquire(&core);  // what launch_lcore's caller set up
  Scratch s;
  const uint32_t burst = std::min(core.burst_size, kMaxBurst);
  const auto rx_queue = static_cast<uint16_t>(core.rx_queue);
  uint32_t iteration = 0;
  TxHoldPolicy hold;
  IdleBackoff idle(core.idle_sleep_us, core.idle_after_us);
  const double ns_per_cycle = 1e9 / static_cast<double>(rte_get_tsc_hz());
  // Sleeps as short as asked: the kernel's default timer slack (50 us) would stretch each one.
  if (core.idle_adaptive) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  core.running.store(true, std::memory_order_release);
  while (!core.stop->load(std::memory_order_relaxed)) {
    bool worked = false;
    bool full = false;  // a poll filled its burst: more frames are probably waiting
    if (core.rx_queue >= 0) {
      const uint16_t n = rte_eth_rx_burst(core.port_id, rx_queue, s.rx, static_cast<uint16_t>(burst));
      full = n == burst;
      if (n > 0) {
        bump(core.counters.rx_bursts, 1);
        handle_rx(core, s, n);
        worked = true;
      }
    }
    if (core.software_dispatch) {
      const unsigned n = rte_ring_sc_dequeue_burst(core.dispatch_ring, reinterpret_cast<void**>(s.rx), burst, nullptr);
      full = full || n == burst;
      if (n > 0) {
        ring_acquire(core.dispatch_ring);
        bump(core.counters.dispatched_in, n);
        process_owned(core, s.rx, n, s.views);
        worked = true;
      }
    }
    if (hold.send_after(full)) {
      if (full && core.tx->held() != 0) bump(core.counters.tx_hold_capped, 1);  // they waited 4 bursts
      core.tx->send_held();                                                     // also retries the backlog
    } else {
      core.tx->poll();  // frames the tx queue refused earlier go out first
    }
    if (++iteration == kControlInterval) {
      iteration = 0;
      drain_control(core);
    }
    if (core.idle_adaptive) {
      const auto now_ns = static_cast<uint64_t>(static_cast<double>(rte_get_tsc_cycles()) * ns_per_cycle);
      const IdleStep step = idle.after_poll(worked || core.tx->backlog() != 0, now_ns);
      if (step.kind == IdleStep::Kind::kSleep) {
        drain_control(core);  // a job installed while the core sleeps waits at most one sleep
        bump(core.counters.idle_sleeps, 1);
        rte_delay_us_sleep(step.sleep_us);
      } else if (step.kind == IdleStep::Kind::kYield) {
        // Polling through a gap: a thread runnable on this CPU (on a shared host, a worker the
        // scheduler put here while the core slept) runs first instead of waiting out the gap;
        // with none, this returns at once.
        bump(core.counters.idle_yields, 1);
        sched_yield();
      }
    }
  }
  drain_control(core);
  core.tx->flush();
  core.tx->send_held();
  core.tx->drop_backlog();  // counted as refused: nothing polls this queue any more
  core.finished.store(true, std::memory_order_release);
  return 0;
}

}  // namespace sumcast::dpdk
