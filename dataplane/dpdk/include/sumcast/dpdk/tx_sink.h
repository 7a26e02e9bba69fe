// engine::TxSink over one DPDK tx queue: acquire() takes an mbuf from the core's tx pool, submit()
// batches it, flush() hands the batch to rte_eth_tx_burst. Used by one lcore only. When fewer tx
// queues than cores exist, cores share a queue under a spinlock (cold configurations only:
// af_packet with qpairs < cores).
//
// Frames the tx queue refuses are not freed at once (a lost result costs every worker an RTO):
// they wait in a bounded backlog, in order, and go out first on the next polls (poll() from the
// lcore loop, or the next flush). Only frames that find the backlog full are freed, and counted
// (refused). sent() and sent_bytes() count what the queue accepted; a result frame (Sumcast
// message type result) that is pending or was freed is counted too, so that the engine's
// results_sent can be reported as what the port accepted.
//
// Coalescing (set_coalesce(k), dataplane.tx_coalesce): the engine flushes at the end of every rx
// burst, and a batch of fewer than k frames then stays for the next burst's frames, so that a burst
// that answers few frames (results by multicast: one per n contributions) does not pay a transmit
// call of its own; the lcore loop sends what is held with send_held() once its rx polls come back
// short, and after at most TxHoldPolicy::kMaxHeldBursts full bursts (lcore.h).
//
// With IPv4 checksum offload on (the port offers it: nic_offload's plan), IPv4 frames leave with
// RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM and a zero checksum field for the NIC to fill.
#pragma once

#include <rte_spinlock.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "sumcast/counter.h"
#include "sumcast/engine/engine.h"

struct rte_mbuf;
struct rte_mempool;

namespace sumcast::dpdk {

class DpdkTxSink final : public engine::TxSink {
 public:
  static constexpr uint32_t kBatch = 32;            // frames per rte_eth_tx_burst
  static constexpr uint32_t kMaxOutstanding = 256;  // acquired, not yet submitted
  static constexpr uint32_t kBacklog = 1024;        // refused frames kept for the next polls

  // `lock` guards a tx queue shared with other cores; nullptr when this core owns the queue.
  DpdkTxSink(uint16_t port_id, uint16_t queue_id, rte_mempool* pool, rte_spinlock_t* lock);
  ~DpdkTxSink() override;  // frees (and counts as refused) what is still in the backlog
  DpdkTxSink(const DpdkTxSink&) = delete;
  DpdkTxSink& operator=(const DpdkTxSink&) = delete;

  // Before the lcore starts. The port must have RTE_ETH_TX_OFFLOAD_IPV4_CKSUM enabled.
  void set_ipv4_checksum_offload(bool on) { ipv4_cksum_offload_ = on; }
  bool ipv4_checksum_offload() const { return ipv4_cksum_offload_; }
  // Before the lcore starts: flush() sends a batch only once it has `frames` (0: always; at most
  // kBatch, a full batch goes out on submit anyway).
  void set_coalesce(uint32_t frames) { coalesce_ = std::min(frames, kBatch); }
  uint32_t coalesce() const { return coalesce_; }

  uint8_t* acquire() override;
  // A buffer this sink did not hand out (or already took back) is counted (unknown_buffers) and
  // not sent.
  void submit(uint8_t* buf, uint32_t len) override;
  // Sends the batch if it holds at least coalesce() frames (else keeps it), retries the backlog,
  // frees buffers acquired and not submitted.
  void flush() override;
  // Sends the batch whatever its size, retries the backlog. The lcore loop calls it (TxHoldPolicy).
  void send_held();
  // Frames batched and not yet handed to the PMD.
  uint32_t held() const { return batch_len_; }
  // Retries the backlog; a no-op when it is empty. The lcore loop calls it on every poll.
  void poll() {
    if (backlog_len_ != 0) drain_backlog();
  }
  // Frees what is still in the backlog, counted as refused (the lcore stops).
  void drop_backlog();

  // Counters (written by the owning lcore, read relaxed by anyone).
  uint64_t sent() const { return read_counter(sent_); }
  uint64_t sent_bytes() const { return read_counter(sent_bytes_); }
  uint64_t deferred() const { return read_counter(deferred_); }
  uint64_t refused() const { return read_counter(refused_); }
  uint64_t unsubmitted() const { return read_counter(unsubmitted_); }
  uint64_t unknown_buffers() const { return read_counter(unknown_buffers_); }
  uint64_t backlog() const { return read_counter(backlog_now_); }
  // Result frames submitted but not (yet) accepted: in the backlog now, or freed as refused.
  uint64_t results_unsent() const { return read_counter(backlog_results_) + read_counter(results_refused_); }

 private:
  void send_batch();
  void drain_backlog();
  // Appends batch_[from..batch_len_) to the backlog; what does not fit is freed and counted.
  void defer(uint32_t from);
  void free_refused(rte_mbuf** m, const bool* result, uint32_t n);
  uint16_t burst(rte_mbuf** m, uint16_t n);
  static void set(std::atomic<uint64_t>& c, uint64_t v) { c.store(v, std::memory_order_relaxed); }
  void account_sent(const uint32_t* len, uint32_t n);

  uint16_t port_id_;
  uint16_t queue_id_;
  rte_mempool* pool_;
  rte_spinlock_t* lock_;
  bool ipv4_cksum_offload_ = false;
  uint32_t coalesce_ = 0;
  uint32_t batch_len_ = 0;
  uint32_t outstanding_len_ = 0;
  rte_mbuf* batch_[kBatch];
  uint32_t batch_bytes_[kBatch];
  bool batch_result_[kBatch];
  rte_mbuf* outstanding_[kMaxOutstanding];
  // The backlog: a FIFO of refused frames, oldest at backlog_head_ (contiguous: moved to the
  // front when the tail has no room).
  uint32_t backlog_head_ = 0;
  uint32_t backlog_len_ = 0;
  uint32_t backlog_results_now_ = 0;
  rte_mbuf* backlog_[kBacklog];
  uint32_t backlog_bytes_[kBacklog];
  bool backlog_result_[kBacklog];
  std::atomic<uint64_t> sent_{0};             // frames the tx queue accepted
  std::atomic<uint64_t> sent_bytes_{0};       // their bytes
  std::atomic<uint64_t> deferred_{0};         // frames refused once and kept in the backlog
  std::atomic<uint64_t> refused_{0};          // frames freed unsent: the backlog was full (or the core stopped)
  std::atomic<uint64_t> unsubmitted_{0};      // acquired but never submitted (freed at flush)
  std::atomic<uint64_t> unknown_buffers_{0};  // submit() of a buffer not acquired here
  std::atomic<uint64_t> backlog_now_{0};      // frames in the backlog now
  std::atomic<uint64_t> backlog_results_{0};  // result frames in the backlog now
  std::atomic<uint64_t> results_refused_{0};  // result frames freed unsent
};

}  // namespace sumcast::dpdk
