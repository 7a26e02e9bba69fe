#include "sumcast/dpdk/neighbour_service.h"

#include <rte_errno.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "sumcast/dpdk/port.h"
#include "sumcast/ipv4.h"
#include "sumcast/mac.h"
#include "tsan_ring.h"

namespace sumcast::dpdk {

NeighbourService::NeighbourService(neighbour::ResolverOptions options, int socket,
                                   std::function<void(const std::string&)> log)
    : table_(kCapacity), resolver_(std::move(options), &table_), socket_(socket), log_(std::move(log)) {}

NeighbourService::~NeighbourService() {
  stop();
  rte_ring_free(rx_);
  rte_ring_free(tx_);
}

Status NeighbourService::start() {
  rx_ = rte_ring_create_elem("sc_arp_rx", sizeof(Elem), kRingSize, socket_, RING_F_SC_DEQ);
  if (rx_ == nullptr) return Status::unavailable(std::string("ring sc_arp_rx: ") + rte_strerror(rte_errno));
  tx_ = rte_ring_create_elem("sc_arp_tx", sizeof(Elem), kRingSize, socket_, RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (tx_ == nullptr) return Status::unavailable(std::string("ring sc_arp_tx: ") + rte_strerror(rte_errno));
  thread_ = std::thread([this] { run(); });
  return {};
}

void NeighbourService::stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t NeighbourService::now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void NeighbourService::observe(const uint8_t* frame, uint32_t len, void* ctx) {
  auto* self = static_cast<NeighbourService*>(ctx);
  Elem e;
  e.len = std::min<uint32_t>(len, sizeof e.bytes);
  std::memcpy(e.bytes, frame, e.len);
  ring_release(self->rx_);
  if (rte_ring_mp_enqueue_elem(self->rx_, &e, sizeof e) != 0) {
    self->observe_full_.fetch_add(1, std::memory_order_relaxed);
  }
}

uint32_t NeighbourService::send_queued(engine::TxSink& tx) {
  if (tx_ == nullptr) return 0;
  Elem e;
  uint32_t sent = 0;
  while (rte_ring_sc_dequeue_elem(tx_, &e, sizeof e) == 0) {
    ring_acquire(tx_);
    uint8_t* buf = tx.acquire();
    if (buf == nullptr) {
      send_full_.fetch_add(1, std::memory_order_relaxed);  // retried by the resolver's next request
      continue;
    }
    std::memcpy(buf, e.bytes, e.len);
    tx.submit(buf, e.len);
    ++sent;
  }
  if (sent > 0) tx.flush();
  return sent;
}

void NeighbourService::run() {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stopping_) {
    lock.unlock();
    step();
    lock.lock();
    stop_cv_.wait_for(lock, std::chrono::milliseconds(kIntervalMs), [this] { return stopping_; });
  }
}

void NeighbourService::step() {
  const uint64_t now = now_ms();
  std::lock_guard<std::mutex> lock(mu_);
  Elem e;
  while (rte_ring_sc_dequeue_elem(rx_, &e, sizeof e) == 0) {
    ring_acquire(rx_);
    resolver_.on_arp(e.bytes, e.len, now);
  }
  for (const neighbour::ArpFrame& f : resolver_.poll(now)) {
    Elem out;
    out.len = static_cast<uint32_t>(f.size());
    std::memcpy(out.bytes, f.data(), f.size());
    ring_release(tx_);
    if (rte_ring_sp_enqueue_elem(tx_, &out, sizeof out) != 0) send_full_.fetch_add(1, std::memory_order_relaxed);
  }
  log_changes();
}

void NeighbourService::log_changes() {
  std::vector<neighbour::EntryInfo> now = resolver_.entries();
  for (const neighbour::EntryInfo& e : now) {
    const neighbour::EntryInfo* before = e.index < last_.size() ? &last_[e.index] : nullptr;
    const bool usable = e.state == neighbour::EntryState::kReachable || e.state == neighbour::EntryState::kStale;
    const bool was_usable = before != nullptr && (before->state == neighbour::EntryState::kReachable ||
                                                  before->state == neighbour::EntryState::kStale);
    const bool mac_changed = before != nullptr && std::memcmp(before->mac, e.mac, 6) != 0;
    const bool failed = e.state == neighbour::EntryState::kFailed &&
                        (before == nullptr || before->state != neighbour::EntryState::kFailed);
    if ((usable && (!was_usable || mac_changed)) || failed) {
      if (log_) {
        log_("neighbour " + format_ipv4(e.ip) +
             (failed ? " failed: no ARP reply after " + std::to_string(e.requests) + " request(s) in all"
                     : " is at " + format_mac(e.mac) + (was_usable && mac_changed ? " (MAC changed)" : "")));
      }
    }
  }
  last_ = std::move(now);
}

neighbour::Resolution NeighbourService::resolve(uint32_t ip) {
  std::lock_guard<std::mutex> lock(mu_);
  return resolver_.resolve(ip, now_ms());
}

neighbour::Resolution NeighbourService::status(uint32_t ip) {
  std::lock_guard<std::mutex> lock(mu_);
  return resolver_.status(ip);
}

std::vector<neighbour::EntryInfo> NeighbourService::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resolver_.entries();
}

neighbour::ResolverCounters NeighbourService::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resolver_.counters();
}

}  // namespace sumcast::dpdk
