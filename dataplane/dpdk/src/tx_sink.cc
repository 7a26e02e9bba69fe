#include "sumcast/dpdk/tx_sink.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "sumcast/wire/format.h"

namespace sumcast::dpdk {

DpdkTxSink::DpdkTxSink(uint16_t port_id, uint16_t queue_id, rte_mempool* pool, rte_spinlock_t* lock)
    : port_id_(port_id), queue_id_(queue_id), pool_(pool), lock_(lock) {}

DpdkTxSink::~DpdkTxSink() {
  // Whatever was never sent goes back to the pool.
  if (batch_len_ > 0) rte_pktmbuf_free_bulk(batch_, batch_len_);
  if (outstanding_len_ > 0) rte_pktmbuf_free_bulk(outstanding_, outstanding_len_);
}

uint8_t* DpdkTxSink::acquire() {
  if (outstanding_len_ == kMaxOutstanding) return nullptr;
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) return nullptr;
  outstanding_[outstanding_len_++] = m;
  return rte_pktmbuf_mtod(m, uint8_t*);
}

void DpdkTxSink::submit(uint8_t* buf, uint32_t len) {
  // Usually the buffer acquired last: search from the end.
  uint32_t i = outstanding_len_;
  while (i > 0 && rte_pktmbuf_mtod(outstanding_[i - 1], uint8_t*) != buf) --i;
  if (i == 0) return;  // not ours: a caller bug; nothing to send
  rte_mbuf* m = outstanding_[i - 1];
  outstanding_[i - 1] = outstanding_[--outstanding_len_];
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = len;
  if (ipv4_cksum_offload_ && len >= wire::kUdpOffset && buf[12] == 0x08 && buf[13] == 0x00) {
    // The NIC computes the IPv4 header checksum; DPDK wants the field zeroed.
    m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
    m->l2_len = wire::kIpOffset;
    m->l3_len = static_cast<uint16_t>((buf[wire::kIpOffset] & 0x0F) * 4);
    buf[wire::kIpOffset + 10] = 0;
    buf[wire::kIpOffset + 11] = 0;
  }
  batch_[batch_len_++] = m;
  if (batch_len_ == kBatch) send_batch();
}

void DpdkTxSink::send_batch() {
  if (batch_len_ == 0) return;
  if (lock_ != nullptr) rte_spinlock_lock(lock_);
  const uint16_t sent = rte_eth_tx_burst(port_id_, queue_id_, batch_, static_cast<uint16_t>(batch_len_));
  if (lock_ != nullptr) rte_spinlock_unlock(lock_);
  if (sent < batch_len_) {
    rte_pktmbuf_free_bulk(batch_ + sent, batch_len_ - sent);
    bump(refused_, batch_len_ - sent);
  }
  bump(sent_, sent);
  batch_len_ = 0;
}

void DpdkTxSink::flush() {
  send_batch();
  if (outstanding_len_ > 0) {
    rte_pktmbuf_free_bulk(outstanding_, outstanding_len_);
    bump(unsubmitted_, outstanding_len_);
    outstanding_len_ = 0;
  }
}

}  // namespace sumcast::dpdk
