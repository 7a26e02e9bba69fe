// Helpers shared by the worker-library tests: loopback addresses, an embedded service per test,
// rank threads, deterministic integer-valued inputs with exact expected results per dtype, and
// a transport decorator that loses, duplicates and reorders packets with a seeded RNG.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sumcast/embedded/service.h"
#include "sumcast/shim/communicator.h"
#include "sumcast/shim/transport.h"
#include "sumcast/wire/format.h"

namespace sumcast::shim::testing {

using Clock = std::chrono::steady_clock;

inline constexpr const char* kToken = "shim-test-token-0123456789";

// A loopback address no other test process of this run is likely to use: 127.<pid>.<n>, so
// services bind port 4791 on addresses of their own and tests may run in parallel.
inline std::string unique_loopback_ip() {
  static std::atomic<uint32_t> counter{0};
  const uint32_t n = counter.fetch_add(1);
  const auto pid = static_cast<uint32_t>(getpid());
  return "127." + std::to_string(1 + (pid >> 8) % 250) + "." + std::to_string(pid & 0xFF) + "." +
         std::to_string(2 + n % 250);
}

// Starts an embedded service on a fresh loopback address (retrying another address if one is busy).
inline std::unique_ptr<embedded::Service> start_service(embedded::ServiceOptions o = {}) {
  o.token = kToken;
  Status last;
  for (int attempt = 0; attempt < 8; ++attempt) {
    o.bind_ip = unique_loopback_ip();
    auto s = embedded::Service::start(o);
    if (s.ok()) return std::move(s).value();
    last = s.status();
  }
  ADD_FAILURE() << "cannot start the embedded service: " << last.to_string();
  return nullptr;
}

// Multicast groups for loopback tests, distinct per process (k = 0, 1, ...) so that concurrent
// runs do not hear each other.
inline uint32_t test_group(uint32_t k) {
  const auto pid = static_cast<uint32_t>(getpid());
  return (239u << 24) | (255u << 16) | ((200u + pid % 50u) << 8) | ((pid / 50u * 3u + k) % 250u + 1u);
}
inline std::string group_text(uint32_t g) {
  return std::to_string(g >> 24) + "." + std::to_string((g >> 16) & 0xFF) + "." + std::to_string((g >> 8) & 0xFF) +
         "." + std::to_string(g & 0xFF);
}

// Whether this namespace's kernel lists `group` as joined on lo (/proc/net/igmp: the group as a
// native-order read of its network-order bytes, in hex).
inline bool joined_on_lo(uint32_t group) {
  std::ifstream f("/proc/net/igmp");
  std::string line;
  bool in_lo = false;
  char want[16];
  std::snprintf(want, sizeof(want), "%08X", htonl(group));
  while (std::getline(f, line)) {
    if (!line.empty() && line[0] != '\t' && line[0] != ' ') {
      in_lo = line.find("\tlo") != std::string::npos || line.find(" lo") != std::string::npos;
    }
    if (in_lo && line.find(want) != std::string::npos) return true;
  }
  return false;
}

inline CommConfig base_config(const std::vector<const embedded::Service*>& services, const std::string& job,
                              uint16_t rank, uint16_t world, wire::Dtype dtype) {
  CommConfig c;
  c.job_name = job;
  c.rank = rank;
  c.world_size = world;
  for (const auto* s : services) c.appliances.push_back({s->control_address(), 1.0});
  c.token = kToken;
  c.dtype = dtype;
  c.bind_ip = "127.0.0.1";
  c.register_timeout_ms = 20000;
  c.op_timeout_ms = 20000;
  return c;
}

// Checks `pred` until it holds or `timeout` passed (for state another thread publishes without a
// notification, e.g. a server counter bumped just after the event the test waited for). Returns
// as soon as the condition holds; the short pause only keeps the loop from spinning.
inline bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// Runs fn(rank) on `world` threads and joins them.
inline void run_ranks(int world, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// A reusable barrier for rank threads (so that communicators are destroyed only when every rank
// is done with its calls).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int count_ = 0;
  uint64_t gen_ = 0;
};

// ---- Deterministic inputs and exact expectations --------------------------------------------

// Rank r's element i: a small integer in [-4, 4], so that sums over up to 8 ranks (|sum| <= 32)
// are exact in every dtype (fp16 and bf16 included) and in any order.
inline int input_value(int rank, size_t i, int salt) {
  return static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13 + static_cast<size_t>(salt)) % 9) - 4;
}

// IEEE binary16 bits of a small integer (|v| <= 2048), computed without any library.
inline uint16_t half_bits(int v) {
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  uint32_t a = static_cast<uint32_t>(v < 0 ? -v : v);
  int e = 0;
  while ((a >> (e + 1)) != 0) ++e;
  const uint32_t mant = (a << (10 - e)) & 0x3FF;
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | mant);
}
// bfloat16 bits of a small integer (|v| <= 256): the high half of its fp32 bits.
inline uint16_t bf16_bits(int v) {
  const float f = static_cast<float>(v);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);
}

// Writes integer v as one element of `dtype` at p.
inline void store_int(wire::Dtype dtype, uint8_t* p, int v) {
  switch (dtype) {
    case wire::Dtype::kFp32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case wire::Dtype::kFp64: {
      const double d = v;
      std::memcpy(p, &d, 8);
      break;
    }
    case wire::Dtype::kInt32: {
      const int32_t x = v;
      std::memcpy(p, &x, 4);
      break;
    }
    case wire::Dtype::kFp16: {
      const uint16_t h = half_bits(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case wire::Dtype::kBf16: {
      const uint16_t h = bf16_bits(v);
      std::memcpy(p, &h, 2);
      break;
    }
  }
}

inline std::vector<uint8_t> make_input(wire::Dtype dtype, size_t count, int rank, int salt) {
  const size_t es = wire::dtype_size(dtype);
  std::vector<uint8_t> v(count * es);
  for (size_t i = 0; i < count; ++i) store_int(dtype, v.data() + i * es, input_value(rank, i, salt));
  return v;
}

inline std::vector<uint8_t> make_expected(wire::Dtype dtype, wire::ReduceOp op, size_t count, int world, int salt) {
  const size_t es = wire::dtype_size(dtype);
  std::vector<uint8_t> v(count * es);
  for (size_t i = 0; i < count; ++i) {
    int acc = input_value(0, i, salt);
    for (int r = 1; r < world; ++r) {
      const int x = input_value(r, i, salt);
      acc = op == wire::ReduceOp::kSum ? acc + x : op == wire::ReduceOp::kMin ? std::min(acc, x) : std::max(acc, x);
    }
    store_int(dtype, v.data() + i * es, acc);
  }
  return v;
}

// Index of the first differing element, or -1.
inline long first_mismatch(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t es) {
  if (got.size() != want.size()) return 0;
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size()) == 0) return -1;
  for (size_t i = 0; i < got.size() / es; ++i) {
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) return static_cast<long>(i);
  }
  return -1;
}

// ---- Loss, duplication and reordering --------------------------------------------------------

struct Impairment {
  double send_loss = 0;     // probability a contribution is not sent
  double send_dup = 0;      // ... is sent twice
  double send_reorder = 0;  // ... is held back and sent after the next batch
  double recv_loss = 0;     // probability a result is discarded on arrival
  double recv_dup = 0;      // ... is handed on twice
  uint64_t seed = 1;
  // The packet handed to send() with this index (0-based), and the result received with this index,
  // are discarded (one deterministic loss each; UINT64_MAX: none).
  uint64_t drop_tx_at = UINT64_MAX;
  uint64_t drop_rx_at = UINT64_MAX;
  // The first drop_rx_round_times results for slot drop_rx_slot, round drop_rx_round (the job's
  // numbering) are discarded: a result lost, then the answer to its retransmission too.
  uint32_t drop_rx_slot = 0;
  uint32_t drop_rx_round = 0;
  uint32_t drop_rx_round_times = 0;
  // After this many packets handed to send(), every later one is discarded (a worker that stops
  // sending); `on_blackhole` runs once when that starts.
  uint64_t blackhole_after = UINT64_MAX;
  std::function<void()> on_blackhole;
};

struct ImpairmentCounters {
  std::atomic<uint64_t> dropped_tx{0};
  std::atomic<uint64_t> duplicated_tx{0};
  std::atomic<uint64_t> reordered_tx{0};
  std::atomic<uint64_t> dropped_rx{0};
  std::atomic<uint64_t> duplicated_rx{0};
};

// A transport that passes everything to `inner_`: test decorators override what they change.
class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {}
  Endpoint local_endpoint() const override { return inner_->local_endpoint(); }
  Result<uint32_t> add_peer(const PeerSpec& spec) override { return inner_->add_peer(spec); }
  void leave_groups() override { inner_->leave_groups(); }
  size_t packet_capacity(size_t payload_len) const override { return inner_->packet_capacity(payload_len); }
  size_t build(uint8_t* buf, uint32_t peer, uint32_t dest_qp, uint32_t psn, const wire::SumcastHeader& hdr,
               const uint8_t* payload) override {
    return inner_->build(buf, peer, dest_qp, psn, hdr, payload);
  }
  size_t payload_offset() const override { return inner_->payload_offset(); }
  Status send(std::span<const OutPacket> packets) override { return inner_->send(packets); }
  size_t receive(std::span<Received> out) override { return inner_->receive(out); }
  int wait_fd() const override { return inner_->wait_fd(); }
  const TransportCounters& counters() const override { return inner_->counters(); }
  std::string describe() const override { return inner_->describe(); }
  uint32_t max_payload() const override { return inner_->max_payload(); }
  Status health() const override { return inner_->health(); }

 protected:
  std::unique_ptr<Transport> inner_;
};

class ImpairedTransport final : public ForwardingTransport {
 public:
  ImpairedTransport(std::unique_ptr<Transport> inner, Impairment imp, ImpairmentCounters* counters)
      : ForwardingTransport(std::move(inner)), imp_(std::move(imp)), rng_(imp_.seed), counters_(counters) {}

  Status send(std::span<const OutPacket> packets) override {
    std::vector<OutPacket> out;
    std::vector<std::vector<uint8_t>> held_now;
    std::vector<uint32_t> held_peer_now;
    for (const OutPacket& p : packets) {
      if (sent_ == imp_.drop_tx_at) {
        ++sent_;
        counters_->dropped_tx++;
        continue;
      }
      if (sent_++ >= imp_.blackhole_after) {
        if (!blackholed_) {
          blackholed_ = true;
          if (imp_.on_blackhole) imp_.on_blackhole();
        }
        counters_->dropped_tx++;
        continue;
      }
      const double x = uniform_(rng_);
      if (x < imp_.send_loss) {
        counters_->dropped_tx++;
        continue;
      }
      if (x < imp_.send_loss + imp_.send_reorder) {  // a copy: the slot's buffer may be rebuilt
        counters_->reordered_tx++;
        held_now.emplace_back(p.data, p.data + p.len);
        held_peer_now.push_back(p.peer);
        continue;
      }
      out.push_back(p);
      if (uniform_(rng_) < imp_.send_dup) {
        counters_->duplicated_tx++;
        out.push_back(p);
      }
    }
    for (size_t i = 0; i < held_.size(); ++i) {  // last batch's held packets go after this batch's
      out.push_back({held_peer_[i], held_[i].data(), static_cast<uint32_t>(held_[i].size())});
    }
    Status st = inner_->send(out);
    held_ = std::move(held_now);
    held_peer_ = std::move(held_peer_now);
    return st;
  }
  size_t receive(std::span<Received> out) override {
    if (!held_.empty()) (void)send({});
    const size_t room = out.size() / 2;  // leave room for duplicates
    const size_t n = inner_->receive(out.subspan(0, room == 0 ? out.size() : room));
    std::vector<Received> got(out.begin(), out.begin() + static_cast<long>(n));
    size_t k = 0;
    for (const Received& r : got) {
      bool drop_this = r.hdr.type == wire::MsgType::kResult && results_seen_++ == imp_.drop_rx_at;
      if (r.hdr.type == wire::MsgType::kResult && r.hdr.slot == imp_.drop_rx_slot &&
          r.hdr.round == imp_.drop_rx_round && round_drops_ < imp_.drop_rx_round_times) {
        ++round_drops_;
        drop_this = true;
      }
      if (drop_this || (r.hdr.type == wire::MsgType::kResult && uniform_(rng_) < imp_.recv_loss)) {
        counters_->dropped_rx++;
        continue;
      }
      out[k++] = r;
      if (r.hdr.type == wire::MsgType::kResult && k < out.size() && uniform_(rng_) < imp_.recv_dup) {
        counters_->duplicated_rx++;
        out[k++] = r;
      }
    }
    return k;
  }
  std::string describe() const override { return "impaired " + inner_->describe(); }

 private:
  Impairment imp_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
  ImpairmentCounters* counters_;
  std::vector<std::vector<uint8_t>> held_;
  std::vector<uint32_t> held_peer_;
  uint64_t sent_ = 0;
  uint64_t results_seen_ = 0;
  uint32_t round_drops_ = 0;
  bool blackholed_ = false;
};

inline std::function<std::unique_ptr<Transport>(std::unique_ptr<Transport>)> impair(Impairment imp,
                                                                                    ImpairmentCounters* counters) {
  return [imp, counters](std::unique_ptr<Transport> inner) {
    return std::make_unique<ImpairedTransport>(std::move(inner), imp, counters);
  };
}

}  // namespace sumcast::shim::testing
