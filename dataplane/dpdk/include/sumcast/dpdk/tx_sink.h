// engine::TxSink over one DPDK tx queue: acquire() takes an mbuf from the core's tx pool, submit()
// batches it, flush() hands the batch to rte_eth_tx_burst and frees (and counts) what the PMD
// refused. Used by one lcore only. When fewer tx queues than cores exist, cores share a queue
// under a spinlock (cold configurations only: af_packet with qpairs < cores).
// With IPv4 checksum offload on (the port offers it: nic_offload's plan), IPv4 frames leave with
// RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM and a zero checksum field for the NIC to fill.
#pragma once

#include <rte_spinlock.h>

#include <atomic>
#include <cstdint>

#include "sumcast/engine/engine.h"

struct rte_mbuf;
struct rte_mempool;

namespace sumcast::dpdk {

class DpdkTxSink final : public engine::TxSink {
 public:
  static constexpr uint32_t kBatch = 32;            // frames per rte_eth_tx_burst
  static constexpr uint32_t kMaxOutstanding = 256;  // acquired, not yet submitted

  // `lock` guards a tx queue shared with other cores; nullptr when this core owns the queue.
  DpdkTxSink(uint16_t port_id, uint16_t queue_id, rte_mempool* pool, rte_spinlock_t* lock);
  ~DpdkTxSink() override;
  DpdkTxSink(const DpdkTxSink&) = delete;
  DpdkTxSink& operator=(const DpdkTxSink&) = delete;

  // Before the lcore starts. The port must have RTE_ETH_TX_OFFLOAD_IPV4_CKSUM enabled.
  void set_ipv4_checksum_offload(bool on) { ipv4_cksum_offload_ = on; }
  bool ipv4_checksum_offload() const { return ipv4_cksum_offload_; }

  uint8_t* acquire() override;
  void submit(uint8_t* buf, uint32_t len) override;
  void flush() override;

  // Counters (written by the owning lcore, read relaxed by anyone).
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t unsubmitted() const { return unsubmitted_.load(std::memory_order_relaxed); }

 private:
  void send_batch();
  static void bump(std::atomic<uint64_t>& c, uint64_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  uint16_t port_id_;
  uint16_t queue_id_;
  rte_mempool* pool_;
  rte_spinlock_t* lock_;
  bool ipv4_cksum_offload_ = false;
  uint32_t batch_len_ = 0;
  uint32_t outstanding_len_ = 0;
  rte_mbuf* batch_[kBatch];
  rte_mbuf* outstanding_[kMaxOutstanding];
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> refused_{0};      // frames the PMD did not take (freed)
  std::atomic<uint64_t> unsubmitted_{0};  // acquired but never submitted (freed at flush)
};

}  // namespace sumcast::dpdk
