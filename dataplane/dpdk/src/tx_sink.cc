#include "sumcast/dpdk/tx_sink.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "sumcast/wire/format.h"

namespace sumcast::dpdk {
namespace {

// A Sumcast result frame (the engine's frames are well-formed: IPv4 RoCE v2 or ARP).
bool is_result(const uint8_t* buf, uint32_t len) {
  return len > wire::kSumcastOffset + 1 && buf[12] == 0x08 && buf[13] == 0x00 &&
         buf[wire::kSumcastOffset + 1] == static_cast<uint8_t>(wire::MsgType::kResult);
}

}  // namespace

DpdkTxSink::DpdkTxSink(uint16_t port_id, uint16_t queue_id, rte_mempool* pool, rte_spinlock_t* lock)
    : port_id_(port_id), queue_id_(queue_id), pool_(pool), lock_(lock) {}

DpdkTxSink::~DpdkTxSink() {
  // Whatever was never sent goes back to the pool.
  if (batch_len_ > 0) rte_pktmbuf_free_bulk(batch_, batch_len_);
  if (outstanding_len_ > 0) rte_pktmbuf_free_bulk(outstanding_, outstanding_len_);
  drop_backlog();
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
  if (i == 0) {  // not ours (a caller bug): nothing to send, but never unseen
    bump(unknown_buffers_, 1);
    return;
  }
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
  batch_bytes_[batch_len_] = len;
  batch_result_[batch_len_] = is_result(buf, len);
  batch_[batch_len_++] = m;
  if (batch_len_ == kBatch) send_batch();
}

uint16_t DpdkTxSink::burst(rte_mbuf** m, uint16_t n) {
  if (lock_ != nullptr) rte_spinlock_lock(lock_);
  const uint16_t sent = rte_eth_tx_burst(port_id_, queue_id_, m, n);
  if (lock_ != nullptr) rte_spinlock_unlock(lock_);
  return sent;
}

void DpdkTxSink::account_sent(const uint32_t* len, uint32_t n) {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; ++i) bytes += len[i];
  bump(sent_, n);
  bump(sent_bytes_, bytes);
}

void DpdkTxSink::drain_backlog() {
  while (backlog_len_ > 0) {
    const auto n = static_cast<uint16_t>(std::min<uint32_t>(backlog_len_, UINT16_MAX));
    const uint32_t h = backlog_head_;
    // Lengths and kinds live beside the mbufs: accepted mbufs are the PMD's after the burst.
    const uint16_t sent = burst(backlog_ + h, n);
    uint32_t results = 0;
    for (uint32_t i = 0; i < sent; ++i) results += backlog_result_[h + i] ? 1 : 0;
    account_sent(backlog_bytes_ + h, sent);
    backlog_head_ += sent;
    backlog_len_ -= sent;
    backlog_results_now_ -= results;
    if (backlog_len_ == 0) backlog_head_ = 0;
    set(backlog_now_, backlog_len_);
    set(backlog_results_, backlog_results_now_);
    if (sent < n) return;  // the queue is still full: next poll
  }
}

void DpdkTxSink::free_refused(rte_mbuf** m, const bool* result, uint32_t n) {
  if (n == 0) return;
  uint32_t results = 0;
  for (uint32_t i = 0; i < n; ++i) results += result[i] ? 1 : 0;
  rte_pktmbuf_free_bulk(m, n);
  bump(refused_, n);
  bump(results_refused_, results);
}

void DpdkTxSink::defer(uint32_t from) {
  const uint32_t n = batch_len_ - from;
  if (n == 0) return;
  const uint32_t fit = std::min(n, kBacklog - backlog_len_);
  if (backlog_head_ + backlog_len_ + fit > kBacklog) {  // compact: the free room is at the front
    std::memmove(backlog_, backlog_ + backlog_head_, backlog_len_ * sizeof(backlog_[0]));
    std::memmove(backlog_bytes_, backlog_bytes_ + backlog_head_, backlog_len_ * sizeof(backlog_bytes_[0]));
    std::memmove(backlog_result_, backlog_result_ + backlog_head_, backlog_len_ * sizeof(backlog_result_[0]));
    backlog_head_ = 0;
  }
  const uint32_t tail = backlog_head_ + backlog_len_;
  for (uint32_t i = 0; i < fit; ++i) {
    backlog_[tail + i] = batch_[from + i];
    backlog_bytes_[tail + i] = batch_bytes_[from + i];
    backlog_result_[tail + i] = batch_result_[from + i];
    backlog_results_now_ += batch_result_[from + i] ? 1 : 0;
  }
  backlog_len_ += fit;
  bump(deferred_, fit);
  free_refused(batch_ + from + fit, batch_result_ + from + fit, n - fit);
  set(backlog_now_, backlog_len_);
  set(backlog_results_, backlog_results_now_);
}

void DpdkTxSink::send_batch() {
  if (batch_len_ == 0) return;
  drain_backlog();
  // Frames go out in order: while older ones wait, the batch waits behind them.
  const uint16_t sent = backlog_len_ == 0 ? burst(batch_, static_cast<uint16_t>(batch_len_)) : 0;
  account_sent(batch_bytes_, sent);
  defer(sent);
  batch_len_ = 0;
}

void DpdkTxSink::flush() {
  if (batch_len_ >= coalesce_) send_batch();
  poll();
  if (outstanding_len_ > 0) {
    rte_pktmbuf_free_bulk(outstanding_, outstanding_len_);
    bump(unsubmitted_, outstanding_len_);
    outstanding_len_ = 0;
  }
}

void DpdkTxSink::send_held() {
  send_batch();
  poll();
}

void DpdkTxSink::drop_backlog() {
  free_refused(backlog_ + backlog_head_, backlog_result_ + backlog_head_, backlog_len_);
  backlog_head_ = 0;
  backlog_len_ = 0;
  backlog_results_now_ = 0;
  set(backlog_now_, 0);
  set(backlog_results_, 0);
}

}  // namespace sumcast::dpdk
