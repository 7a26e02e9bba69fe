// Neighbour resolution for the appliance's data port: where a result to a member goes next, and
// that next hop's MAC, learned by ARP. A pure piece (no DPDK, no threads, no clock of its own):
// the caller passes the time in and sends the frames poll() returns, so it runs the same in
// sumcastd (its neighbour thread) and in unit tests (a fake clock).
//
// Routing (RoutingTable): an address inside the port's subnet (port.ipv4/port.prefix_len) is
// on-link and its own next hop; otherwise the longest matching static route (port.routes,
// "prefix/len via gateway") names the gateway, else the default gateway (port.gateway); with
// neither the address has no route. prefix_len 0 makes every address on-link (a flat segment).
//
// ARP cache (Resolver), one entry per next hop, each with an index into the NextHopTable:
//   incomplete  requested, no reply yet: a broadcast request every retry_ms, max_retries in all,
//               then failed. Not published (the lcores count frames to it as next_hop_unresolved).
//   reachable   a reply or a request from it gave its MAC (published); after refresh_ms it is
//               stale.
//   stale       still published; re-requested every retry_ms, max_retries times; any ARP from it
//               makes it reachable again with the MAC it carries (a changed MAC is published at
//               once); no answer: failed.
//   failed      unpublished; resolution starts again refresh_ms later (or at once when a member
//               registers with it), so a next hop that comes back is found again.
// Entries are created only by resolve() (a member's registration): ARP from other hosts never
// adds one. poll() also returns one gratuitous ARP announcing the port's address at its first
// call.
//
// Thread safety: none (one thread drives it; sumcastd guards it with a mutex). The table is
// written here and read by the lcores lock-free (next_hop.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sumcast/next_hop.h"

namespace sumcast::neighbour {

struct Route {
  uint32_t prefix = 0;  // host order, host bits zero
  uint8_t len = 0;      // 0..32
  uint32_t via = 0;     // the gateway (on-link)
};

class RoutingTable {
 public:
  RoutingTable() = default;
  // `gateway` 0: none.
  RoutingTable(uint32_t local_ip, uint8_t prefix_len, uint32_t gateway, std::vector<Route> routes);
  bool on_link(uint32_t address) const;
  // The next hop towards `address`: itself when on-link, a gateway, or nullopt (no route).
  std::optional<uint32_t> next_hop(uint32_t address) const;
  // "10.77.0.1/24" and what covers the rest, for messages.
  std::string describe() const;

 private:
  uint32_t local_ip_ = 0;
  uint8_t prefix_len_ = 0;
  uint32_t gateway_ = 0;
  std::vector<Route> routes_;
};

struct ResolverOptions {
  uint8_t local_mac[6] = {};
  uint32_t local_ip = 0;  // host order
  RoutingTable routes;
  uint64_t retry_ms = 200;      // between two requests of one resolution
  uint32_t max_retries = 5;     // requests without an answer before the entry fails
  uint64_t refresh_ms = 30000;  // a reachable entry is re-confirmed after this
};

enum class EntryState : uint8_t { kIncomplete, kReachable, kStale, kFailed };
const char* entry_state_name(EntryState s);

struct Resolution {
  enum class State : uint8_t { kReady, kPending, kFailed };
  State state = State::kFailed;
  uint32_t next_hop = kNoNextHop;  // index into the NextHopTable (every state but a missing route)
  std::string text;                // kFailed: why, naming the addresses
};

struct EntryInfo {
  uint32_t ip = 0;
  uint32_t index = 0;
  EntryState state = EntryState::kIncomplete;
  uint8_t mac[6] = {};    // the last MAC learned (zero before any)
  uint32_t requests = 0;  // ARP requests sent for it in all
};

struct ResolverCounters {
  uint64_t requests_sent = 0;  // ARP requests (gratuitous announcements included)
  uint64_t learned = 0;        // ARP frames that confirmed or changed an entry
  uint64_t mac_changes = 0;    // of those, the ones that changed a published MAC
  uint64_t failures = 0;       // entries that went failed
};

// An ARP frame to send: 60 bytes (the Ethernet minimum without FCS).
using ArpFrame = std::array<uint8_t, 60>;

class Resolver {
 public:
  // `table` outlives the resolver; its capacity bounds the number of next hops.
  Resolver(ResolverOptions options, NextHopTable* table);

  // The next hop of a member at `member_ip`; starts resolving it (never waits). kFailed without
  // an index: no route, or the table is full. A failed entry is retried from now.
  Resolution resolve(uint32_t member_ip, uint64_t now_ms);
  // The state of a resolution started by resolve() (same answer, nothing restarted).
  Resolution status(uint32_t member_ip) const;
  // A received ARP frame (request or reply, from the Ethernet header on). Returns true when it
  // confirmed or changed an entry.
  bool on_arp(const uint8_t* frame, size_t len, uint64_t now_ms);
  // Advances the entries' timers; returns the frames to send now.
  std::vector<ArpFrame> poll(uint64_t now_ms);

  std::vector<EntryInfo> entries() const;
  const ResolverCounters& counters() const { return counters_; }
  const RoutingTable& routes() const { return opt_.routes; }

 private:
  struct Entry {
    uint32_t ip = 0;
    EntryState state = EntryState::kIncomplete;
    uint8_t mac[6] = {};
    uint32_t tries = 0;      // requests of the current resolution
    uint32_t requests = 0;   // in all
    uint64_t next_at = 0;    // the next request (incomplete, stale) or restart (failed)
    uint64_t confirmed = 0;  // the last ARP from it (reachable)
  };
  ArpFrame request(uint32_t target) const;
  Resolution answer(uint32_t member_ip, uint32_t hop, const Entry& e) const;

  ResolverOptions opt_;
  NextHopTable* table_;
  std::vector<Entry> entries_;  // index = next-hop index
  std::map<uint32_t, uint32_t> by_ip_;
  bool announced_ = false;
  ResolverCounters counters_;
};

}  // namespace sumcast::neighbour
