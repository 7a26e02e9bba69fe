// The appliance's neighbour resolution as sumcastd runs it: the pure neighbour::Resolver driven by
// a thread of its own, off the hot path. Engine lcores hand it the ARP frames that teach a MAC
// (observe(), the engine's arp_observer: a lock-free enqueue to an MP/SC ring, dropped and
// counted when the ring is full) and read the next hops' MACs from its NextHopTable; the ARP
// requests it sends (and its gratuitous ARP at start) go through core 0, which drains them from an
// SP/SC ring between bursts (send_queued()). The control server asks it for members' next hops
// (control::NextHopResolver). Changes of an entry (resolved, MAC changed, failed) are logged.
//
// Thread safety: observe() from any lcore; send_queued() from core 0; resolve()/status() from
// any thread (a mutex guards the resolver; the lcores never take it).
#pragma once

#include <rte_ring.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sumcast/control/server.h"
#include "sumcast/engine/engine.h"
#include "sumcast/neighbour/resolver.h"
#include "sumcast/next_hop.h"
#include "sumcast/status.h"

namespace sumcast::dpdk {

class NeighbourService final : public control::NextHopResolver {
 public:
  static constexpr uint32_t kRingSize = 1024;  // ARP frames in flight each way
  static constexpr uint32_t kCapacity = 4096;  // next hops (the NextHopTable's size)
  static constexpr uint32_t kIntervalMs = 10;  // the thread's period

  // `log` gets one line per change of an entry; `socket` is the NUMA node for the rings.
  NeighbourService(neighbour::ResolverOptions options, int socket, std::function<void(const std::string&)> log);
  ~NeighbourService() override;  // stop()s, frees the rings
  NeighbourService(const NeighbourService&) = delete;
  NeighbourService& operator=(const NeighbourService&) = delete;

  Status start();  // creates the rings and starts the thread
  void stop();

  const NextHopTable* table() const { return &table_; }
  // engine::EngineOptions::arp_observer, with the service as ctx.
  static void observe(const uint8_t* frame, uint32_t len, void* ctx);
  // Sends the queued ARP frames through `tx` (core 0's sink); returns how many.
  uint32_t send_queued(engine::TxSink& tx);

  neighbour::Resolution resolve(uint32_t ip) override;
  neighbour::Resolution status(uint32_t ip) override;
  std::vector<neighbour::EntryInfo> entries() const;
  neighbour::ResolverCounters counters() const;
  uint64_t observe_overflows() const { return observe_full_.load(std::memory_order_relaxed); }
  uint64_t send_overflows() const { return send_full_.load(std::memory_order_relaxed); }

 private:
  struct Elem {
    uint32_t len;
    uint8_t bytes[60];
  };
  static_assert(sizeof(Elem) == 64);
  static uint64_t now_ms();
  void run();
  void step();
  void log_changes();

  mutable std::mutex mu_;  // guards resolver_ and last_
  NextHopTable table_;
  neighbour::Resolver resolver_;
  std::vector<neighbour::EntryInfo> last_;  // as logged
  int socket_;
  std::function<void(const std::string&)> log_;
  rte_ring* rx_ = nullptr;                 // lcores -> service (MP/SC)
  rte_ring* tx_ = nullptr;                 // service -> core 0 (SP/SC)
  std::atomic<uint64_t> observe_full_{0};  // ARP frames the lcores could not hand over
  std::atomic<uint64_t> send_full_{0};     // requests not queued: core 0's ring was full
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sumcast::dpdk
