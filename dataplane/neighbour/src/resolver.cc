// Routing decision and ARP cache (resolver.h).
#include "sumcast/neighbour/resolver.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "sumcast/endian.h"
#include "sumcast/ipv4.h"

namespace sumcast::neighbour {
namespace {

constexpr uint16_t kEtherTypeArp = 0x0806;
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr size_t kEthLen = 14;
constexpr size_t kArpLen = 28;

uint32_t mask_of(uint8_t len) { return len == 0 ? 0 : ~uint32_t{0} << (32 - len); }

bool usable_mac(const uint8_t* mac) {
  if ((mac[0] & 0x01) != 0) return false;  // multicast or broadcast
  return std::any_of(mac, mac + 6, [](uint8_t b) { return b != 0; });
}

}  // namespace

const char* entry_state_name(EntryState s) {
  switch (s) {
    case EntryState::kIncomplete:
      return "incomplete";
    case EntryState::kReachable:
      return "reachable";
    case EntryState::kStale:
      return "stale";
    case EntryState::kFailed:
      return "failed";
  }
  return "?";
}

RoutingTable::RoutingTable(uint32_t local_ip, uint8_t prefix_len, uint32_t gateway, std::vector<Route> routes)
    : local_ip_(local_ip), prefix_len_(prefix_len), gateway_(gateway), routes_(std::move(routes)) {
  // Longest prefix first: the first match is the best.
  std::stable_sort(routes_.begin(), routes_.end(), [](const Route& a, const Route& b) { return a.len > b.len; });
}

bool RoutingTable::on_link(uint32_t address) const {
  const uint32_t m = mask_of(prefix_len_);
  return (address & m) == (local_ip_ & m);
}

std::optional<uint32_t> RoutingTable::next_hop(uint32_t address) const {
  // A static route more specific than the port's subnet wins over it, as in any routing table.
  for (const Route& r : routes_) {
    if (r.len > prefix_len_ && (address & mask_of(r.len)) == r.prefix) return r.via;
  }
  if (on_link(address)) return address;
  for (const Route& r : routes_) {
    if ((address & mask_of(r.len)) == r.prefix) return r.via;
  }
  if (gateway_ != 0) return gateway_;
  return std::nullopt;
}

std::string RoutingTable::describe() const {
  std::string s = "subnet " + format_ipv4(local_ip_ & mask_of(prefix_len_)) + "/" + std::to_string(prefix_len_);
  for (const Route& r : routes_)
    s += ", " + format_ipv4(r.prefix) + "/" + std::to_string(r.len) + " via " + format_ipv4(r.via);
  s += gateway_ != 0 ? ", default via " + format_ipv4(gateway_) : ", no default gateway";
  return s;
}

Resolver::Resolver(ResolverOptions options, NextHopTable* table) : opt_(std::move(options)), table_(table) {}

ArpFrame Resolver::request(uint32_t target) const {
  ArpFrame f{};
  std::memset(f.data(), 0xFF, 6);
  std::memcpy(f.data() + 6, opt_.local_mac, 6);
  store_be16(f.data() + 12, kEtherTypeArp);
  uint8_t* a = f.data() + kEthLen;
  store_be16(a, 1);
  store_be16(a + 2, kEtherTypeIpv4);
  a[4] = 6;
  a[5] = 4;
  store_be16(a + 6, 1);  // request
  std::memcpy(a + 8, opt_.local_mac, 6);
  store_be32(a + 14, opt_.local_ip);
  store_be32(a + 24, target);  // target MAC (a + 18) stays zero
  return f;
}

Resolution Resolver::answer(uint32_t member_ip, uint32_t hop, const Entry& e) const {
  Resolution r;
  r.next_hop = hop;
  switch (e.state) {
    case EntryState::kReachable:
    case EntryState::kStale:
      r.state = Resolution::State::kReady;
      break;
    case EntryState::kIncomplete:
      r.state = Resolution::State::kPending;
      break;
    case EntryState::kFailed:
      r.state = Resolution::State::kFailed;
      r.text = e.ip == member_ip ? "no ARP reply from " + format_ipv4(member_ip) + " (on-link) after " +
                                       std::to_string(e.tries) + " requests"
                                 : "no ARP reply from gateway " + format_ipv4(e.ip) + " (next hop to " +
                                       format_ipv4(member_ip) + ") after " + std::to_string(e.tries) + " requests";
      break;
  }
  return r;
}

Resolution Resolver::resolve(uint32_t member_ip, uint64_t now_ms) {
  const std::optional<uint32_t> hop = opt_.routes.next_hop(member_ip);
  if (!hop) {
    Resolution r;
    r.text = "no route to " + format_ipv4(member_ip) + " from the appliance's port (" + opt_.routes.describe() +
             "; see port.gateway and port.routes)";
    return r;
  }
  auto it = by_ip_.find(*hop);
  if (it == by_ip_.end()) {
    if (entries_.size() >= table_->capacity()) {
      Resolution r;
      r.text = "cannot resolve " + format_ipv4(member_ip) + ": the appliance already tracks " +
               std::to_string(entries_.size()) + " next hops";
      return r;
    }
    Entry e;
    e.ip = *hop;
    e.next_at = now_ms;
    entries_.push_back(e);
    it = by_ip_.emplace(*hop, static_cast<uint32_t>(entries_.size() - 1)).first;
  }
  Entry& e = entries_[it->second];
  if (e.state == EntryState::kFailed) {  // a new registration: try again now
    e.state = EntryState::kIncomplete;
    e.tries = 0;
    e.next_at = now_ms;
  }
  return answer(member_ip, it->second, e);
}

Resolution Resolver::status(uint32_t member_ip) const {
  const std::optional<uint32_t> hop = opt_.routes.next_hop(member_ip);
  const auto it = hop ? by_ip_.find(*hop) : by_ip_.end();
  if (it == by_ip_.end()) {
    Resolution r;
    r.text = "no resolution started for " + format_ipv4(member_ip);
    return r;
  }
  return answer(member_ip, it->second, entries_[it->second]);
}

bool Resolver::on_arp(const uint8_t* frame, size_t len, uint64_t now_ms) {
  if (len < kEthLen + kArpLen || load_be16(frame + 12) != kEtherTypeArp) return false;
  const uint8_t* a = frame + kEthLen;
  if (load_be16(a) != 1 || load_be16(a + 2) != kEtherTypeIpv4 || a[4] != 6 || a[5] != 4) return false;
  const uint16_t op = load_be16(a + 6);
  if (op != 1 && op != 2) return false;
  const uint8_t* sha = a + 8;
  const uint32_t spa = load_be32(a + 14);
  if (spa == opt_.local_ip || !usable_mac(sha)) return false;
  const auto it = by_ip_.find(spa);
  if (it == by_ip_.end()) return false;
  Entry& e = entries_[it->second];
  const bool had_mac = e.state == EntryState::kReachable || e.state == EntryState::kStale;
  if (had_mac && std::memcmp(e.mac, sha, 6) != 0) ++counters_.mac_changes;
  std::memcpy(e.mac, sha, 6);
  e.state = EntryState::kReachable;
  e.tries = 0;
  e.confirmed = now_ms;
  table_->publish(it->second, e.mac);
  ++counters_.learned;
  return true;
}

std::vector<ArpFrame> Resolver::poll(uint64_t now_ms) {
  std::vector<ArpFrame> out;
  if (!announced_) {
    announced_ = true;
    out.push_back(request(opt_.local_ip));  // gratuitous: sender and target are our address
    ++counters_.requests_sent;
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.state == EntryState::kReachable) {
      if (now_ms - e.confirmed < opt_.refresh_ms) continue;
      e.state = EntryState::kStale;
      e.tries = 0;
      e.next_at = now_ms;
    }
    if (now_ms < e.next_at) continue;
    if (e.state == EntryState::kFailed) {  // try again, refresh_ms after failing
      e.state = EntryState::kIncomplete;
      e.tries = 0;
    }
    if (e.tries >= opt_.max_retries) {
      e.state = EntryState::kFailed;
      e.next_at = now_ms + opt_.refresh_ms;
      table_->clear(static_cast<uint32_t>(i));
      ++counters_.failures;
      continue;
    }
    out.push_back(request(e.ip));
    ++e.tries;
    ++e.requests;
    ++counters_.requests_sent;
    e.next_at = now_ms + opt_.retry_ms;
  }
  return out;
}

std::vector<EntryInfo> Resolver::entries() const {
  std::vector<EntryInfo> out;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    EntryInfo info;
    info.ip = e.ip;
    info.index = static_cast<uint32_t>(i);
    info.state = e.state;
    std::memcpy(info.mac, e.mac, 6);
    info.requests = e.requests;
    out.push_back(info);
  }
  return out;
}

}  // namespace sumcast::neighbour
