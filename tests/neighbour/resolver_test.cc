// The routing decision and the ARP cache's states, requests and publication, on a fake clock.
#include "sumcast/neighbour/resolver.h"

#include <gtest/gtest.h>

#include <cstring>

#include "sumcast/endian.h"

namespace sumcast::neighbour {
namespace {

constexpr uint32_t ip(int a, int b, int c, int d) {
  return static_cast<uint32_t>(a) << 24 | static_cast<uint32_t>(b) << 16 | static_cast<uint32_t>(c) << 8 |
         static_cast<uint32_t>(d);
}

const uint8_t kLocalMac[6] = {0x02, 0, 0, 0, 0, 0x01};
const uint32_t kLocal = ip(10, 79, 0, 1);
const uint32_t kGateway = ip(10, 79, 0, 254);

// An ARP frame from `sender` (op 1 request, 2 reply) to us.
ArpFrame arp_from(uint32_t sender, const uint8_t mac[6], uint16_t op = 2) {
  ArpFrame f{};
  std::memcpy(f.data(), kLocalMac, 6);
  std::memcpy(f.data() + 6, mac, 6);
  store_be16(f.data() + 12, 0x0806);
  uint8_t* a = f.data() + 14;
  store_be16(a, 1);
  store_be16(a + 2, 0x0800);
  a[4] = 6;
  a[5] = 4;
  store_be16(a + 6, op);
  std::memcpy(a + 8, mac, 6);
  store_be32(a + 14, sender);
  std::memcpy(a + 18, kLocalMac, 6);
  store_be32(a + 24, kLocal);
  return f;
}

ResolverOptions options(RoutingTable routes) {
  ResolverOptions o;
  std::memcpy(o.local_mac, kLocalMac, 6);
  o.local_ip = kLocal;
  o.routes = std::move(routes);
  o.retry_ms = 100;
  o.max_retries = 3;
  o.refresh_ms = 1000;
  return o;
}

uint32_t target_of(const ArpFrame& f) { return load_be32(f.data() + 14 + 24); }

TEST(RoutingTable, OnLinkGatewayAndLongestRoute) {
  const RoutingTable t(kLocal, 24, kGateway,
                       {{ip(10, 77, 0, 0), 16, ip(10, 79, 0, 2)}, {ip(10, 77, 5, 0), 24, ip(10, 79, 0, 3)}});
  EXPECT_EQ(t.next_hop(ip(10, 79, 0, 10)), ip(10, 79, 0, 10));
  EXPECT_EQ(t.next_hop(ip(10, 77, 1, 1)), ip(10, 79, 0, 2));
  EXPECT_EQ(t.next_hop(ip(10, 77, 5, 1)), ip(10, 79, 0, 3));  // the longer prefix wins
  EXPECT_EQ(t.next_hop(ip(192, 168, 1, 1)), kGateway);
  const RoutingTable none(kLocal, 24, 0, {});
  EXPECT_FALSE(none.next_hop(ip(10, 78, 0, 10)).has_value());
  const RoutingTable flat(kLocal, 0, 0, {});  // prefix 0: everything is on-link
  EXPECT_EQ(flat.next_hop(ip(10, 78, 0, 10)), ip(10, 78, 0, 10));
}

TEST(Resolver, NoRouteIsRefusedNamingTheAddress) {
  NextHopTable table(8);
  Resolver r(options(RoutingTable(kLocal, 24, 0, {})), &table);
  const Resolution res = r.resolve(ip(10, 80, 0, 10), 0);
  EXPECT_EQ(res.state, Resolution::State::kFailed);
  EXPECT_EQ(res.next_hop, kNoNextHop);
  EXPECT_NE(res.text.find("no route to 10.80.0.10"), std::string::npos) << res.text;
  EXPECT_NE(res.text.find("10.79.0.0/24"), std::string::npos) << res.text;
}

TEST(Resolver, AnnouncesThenRequestsAndPublishesTheReply) {
  NextHopTable table(8);
  Resolver r(options(RoutingTable(kLocal, 24, kGateway, {})), &table);
  // Two members behind the gateway share its entry.
  const Resolution a = r.resolve(ip(10, 77, 0, 10), 0);
  const Resolution b = r.resolve(ip(10, 78, 0, 11), 0);
  ASSERT_EQ(a.state, Resolution::State::kPending);
  EXPECT_EQ(a.next_hop, b.next_hop);
  const std::vector<ArpFrame> out = r.poll(0);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(target_of(out[0]), kLocal);  // gratuitous ARP first
  EXPECT_EQ(target_of(out[1]), kGateway);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[1][i], 0xFF);
  uint8_t mac[6];
  EXPECT_FALSE(table.mac(a.next_hop, mac));
  EXPECT_TRUE(r.poll(50).empty());  // the next try waits retry_ms
  const uint8_t gw_mac[6] = {0x02, 0xAA, 0, 0, 0, 0x54};
  const ArpFrame reply = arp_from(kGateway, gw_mac);
  EXPECT_TRUE(r.on_arp(reply.data(), reply.size(), 60));
  ASSERT_TRUE(table.mac(a.next_hop, mac));
  EXPECT_EQ(std::memcmp(mac, gw_mac, 6), 0);
  EXPECT_EQ(r.status(ip(10, 77, 0, 10)).state, Resolution::State::kReady);
  EXPECT_TRUE(r.poll(500).empty());
}

TEST(Resolver, UnansweredFailsAfterBoundedRetriesAndRestarts) {
  NextHopTable table(8);
  Resolver r(options(RoutingTable(kLocal, 24, 0, {})), &table);
  const uint32_t member = ip(10, 79, 0, 20);
  ASSERT_EQ(r.resolve(member, 0).state, Resolution::State::kPending);
  size_t requests = 0;
  for (uint64_t t = 0; t <= 1000; t += 10) {
    for (const ArpFrame& f : r.poll(t)) requests += target_of(f) == member ? 1 : 0;
  }
  EXPECT_EQ(requests, 3u);  // max_retries, then failed
  const Resolution failed = r.status(member);
  EXPECT_EQ(failed.state, Resolution::State::kFailed);
  EXPECT_NE(failed.text.find("no ARP reply from 10.79.0.20"), std::string::npos) << failed.text;
  EXPECT_EQ(r.counters().failures, 1u);
  // Failed entries are retried after refresh_ms: the host may come back.
  const uint8_t mac[6] = {0x02, 1, 2, 3, 4, 5};
  for (uint64_t t = 1010; t <= 1350; t += 10) r.poll(t);  // failed at 300: one request at 1300
  EXPECT_EQ(r.entries()[0].requests, 4u);
  const ArpFrame back = arp_from(member, mac, 1);  // a request from it teaches us too
  EXPECT_TRUE(r.on_arp(back.data(), back.size(), 1350));
  EXPECT_EQ(r.status(member).state, Resolution::State::kReady);
}

TEST(Resolver, RefreshKeepsTheOldMacUntilAChangedOneArrives) {
  NextHopTable table(8);
  Resolver r(options(RoutingTable(kLocal, 24, kGateway, {})), &table);
  const Resolution res = r.resolve(ip(10, 77, 0, 10), 0);
  r.poll(0);
  const uint8_t old_mac[6] = {0x02, 0xAA, 0, 0, 0, 1}, new_mac[6] = {0x02, 0xBB, 0, 0, 0, 2};
  const ArpFrame first = arp_from(kGateway, old_mac);
  r.on_arp(first.data(), first.size(), 10);
  EXPECT_TRUE(r.poll(900).empty());
  const std::vector<ArpFrame> refresh = r.poll(1010);  // reachable for refresh_ms: stale, re-requested
  ASSERT_EQ(refresh.size(), 1u);
  EXPECT_EQ(r.entries()[0].state, EntryState::kStale);
  uint8_t mac[6];
  ASSERT_TRUE(table.mac(res.next_hop, mac));  // still usable while stale
  EXPECT_EQ(std::memcmp(mac, old_mac, 6), 0);
  const ArpFrame changed = arp_from(kGateway, new_mac);
  r.on_arp(changed.data(), changed.size(), 1050);
  ASSERT_TRUE(table.mac(res.next_hop, mac));
  EXPECT_EQ(std::memcmp(mac, new_mac, 6), 0);
  EXPECT_EQ(r.counters().mac_changes, 1u);
  // Stale and unanswered: unpublished after max_retries.
  for (uint64_t t = 2060; t <= 3000; t += 10) r.poll(t);
  EXPECT_FALSE(table.mac(res.next_hop, mac));
  EXPECT_EQ(r.status(ip(10, 77, 0, 10)).state, Resolution::State::kFailed);
}

TEST(Resolver, IgnoresStrangersBroadcastSendersAndFullTables) {
  NextHopTable table(1);
  Resolver r(options(RoutingTable(kLocal, 24, 0, {})), &table);
  const uint8_t mac[6] = {0x02, 1, 2, 3, 4, 5}, bcast[6] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const ArpFrame stranger = arp_from(ip(10, 79, 0, 99), mac);
  EXPECT_FALSE(r.on_arp(stranger.data(), stranger.size(), 0));  // never creates an entry
  EXPECT_TRUE(r.entries().empty());
  ASSERT_EQ(r.resolve(ip(10, 79, 0, 5), 0).state, Resolution::State::kPending);
  const ArpFrame bad = arp_from(ip(10, 79, 0, 5), bcast);
  EXPECT_FALSE(r.on_arp(bad.data(), bad.size(), 0));
  EXPECT_FALSE(r.on_arp(bad.data(), 30, 0));  // truncated
  const Resolution full = r.resolve(ip(10, 79, 0, 6), 0);
  EXPECT_EQ(full.state, Resolution::State::kFailed);
  EXPECT_NE(full.text.find("10.79.0.6"), std::string::npos) << full.text;
}

}  // namespace
}  // namespace sumcast::neighbour
