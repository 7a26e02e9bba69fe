#include "sumcast/embedded/service.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "sumcast/counter.h"
#include "sumcast/endian.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/ipv4.h"
#include "sumcast/udp_offload.h"
#include "sumcast/wire/packet.h"

namespace sumcast::embedded {
namespace {

// A frame buffer: Ethernet | IPv4 | UDP written in front of the datagram received at kBthOffset.
constexpr size_t kFrameBufLen = wire::kMaxFrameLen + 64;
constexpr size_t kRxRoom = kFrameBufLen - wire::kBthOffset;
constexpr uint32_t kCoreQpn = 0x000100;
constexpr size_t kTxPoolFactor = 4;  // tx buffers = batch * this
constexpr uint16_t kIpFlagsDf = 0x4000;
// udp_trains: a train's limits and its buffers' sizes are sumcast/udp_offload.h's.
constexpr size_t kGroBufs = 8;    // coalesced buffers per recvmmsg
constexpr size_t kCmsgWords = 4;  // one UDP_SEGMENT or UDP_GRO control message, 8-byte words
static_assert(kCmsgWords >= kUdpSegmentCmsgWords && kCmsgWords * 8 >= CMSG_SPACE(sizeof(int)));

struct AtomicCounters {
  std::atomic<uint64_t> rx_datagrams{0};
  std::atomic<uint64_t> rx_truncated{0};
  std::atomic<uint64_t> rx_bad_icrc{0};
  std::atomic<uint64_t> rx_cut_train{0};
  std::atomic<uint64_t> tx_datagrams{0};
  std::atomic<uint64_t> tx_dropped{0};
  std::atomic<uint64_t> tx_restamped{0};
  std::atomic<uint64_t> rx_coalesced{0};
  std::atomic<uint64_t> rx_coalesced_datagrams{0};
  std::atomic<uint64_t> tx_trains{0};
  std::atomic<uint64_t> tx_train_datagrams{0};
};

}  // namespace

struct Service::Impl final : public control::JobSink, public engine::TxSink {
  explicit Impl(const ServiceOptions& o, const engine::EngineOptions& eo) : options(o), engine(eo) {}
  ~Impl() override { shutdown(); }

  // --- control::JobSink (control thread) ---
  Status install(const engine::JobSpec& spec) override {
    std::lock_guard<std::mutex> lock(mu);
    Status st = engine.add_job(spec);
    if (st.ok()) {
      std::lock_guard<std::mutex> jl(jobs_mu);
      jobs.insert(spec.job_id);
    }
    return st;
  }
  void remove(uint32_t job_id, wire::AbortReason reason) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      engine.remove_job(job_id, reason, *this);
      flush();
    }
    std::lock_guard<std::mutex> jl(jobs_mu);
    jobs.erase(job_id);
    jobs_cv.notify_all();
  }
  uint64_t progress(uint32_t job_id) override {
    std::lock_guard<std::mutex> lock(mu);
    uint64_t n = 0;
    for (const engine::JobProgress& p : engine.progress()) {
      if (p.job_id == job_id) n += p.slots_completed;
    }
    return n;
  }
  uint64_t waiting_rounds(uint32_t job_id) override {
    std::lock_guard<std::mutex> lock(mu);
    uint64_t n = 0;
    for (const engine::JobProgress& p : engine.progress()) {
      if (p.job_id == job_id && p.rounds_opened > p.slots_completed) n += p.rounds_opened - p.slots_completed;
    }
    return n;
  }

  // --- engine::TxSink (whichever thread holds `mu`) ---
  uint8_t* acquire() override {
    if (free_bufs.empty()) flush();
    if (free_bufs.empty()) return nullptr;
    uint8_t* b = free_bufs.back();
    free_bufs.pop_back();
    return b;
  }
  void submit(uint8_t* buf, uint32_t len) override {
    queued.push_back({buf, len});
    if (queued.size() >= options.batch) flush();
  }
  void flush() override {
    // udp_trains: frames to one destination go out as UDP_SEGMENT trains (the kernel gives
    // segment k IP ID k, so segment k's ICRC is stamped for that ID): group them, keeping each
    // destination's order.
    if (options.udp_trains) {
      const auto destination = [](const uint8_t* frame) {
        const uint8_t* ip = frame + wire::kIpOffset;
        return (uint64_t{load_be32(ip + 16)} << 16) | load_be16(ip + wire::kIpv4HeaderLen + 2);
      };
      std::stable_sort(queued.begin(), queued.end(),
                       [&](const auto& a, const auto& b) { return destination(a.first) < destination(b.first); });
    }
    size_t n = 0;
    size_t niov = 0;
    uint32_t train_ip = 0;
    uint16_t train_port = 0;
    size_t train_len = 0;
    for (const auto& [buf, len] : queued) {
      (void)len;
      uint8_t* ip = buf + wire::kIpOffset;
      uint8_t* udp = ip + wire::kIpv4HeaderLen;
      const uint32_t dst_ip = load_be32(ip + 16);
      const uint16_t dst_port = load_be16(udp + 2);
      const size_t udp_len = load_be16(udp + 4);
      if (udp_len < wire::kUdpHeaderLen + wire::kBthLen || wire::kUdpOffset + udp_len > kFrameBufLen) {
        bump(counters.tx_dropped);
        continue;
      }
      uint8_t* roce = udp + wire::kUdpHeaderLen;
      const size_t roce_len = udp_len - wire::kUdpHeaderLen;
      // Join the train before this frame: same destination and length, room left.
      if (options.udp_trains && n > 0 && dst_ip == train_ip && dst_port == train_port && roce_len == train_len) {
        mmsghdr& m = tx_msgs[n - 1];
        const size_t k = m.msg_hdr.msg_iovlen;
        if (k < kUdpTrainMaxSegments && (k + 1) * roce_len <= kUdpTrainMaxBytes) {
          const icrc::UdpFields f{.src_ip = ip_addr,
                                  .dst_ip = dst_ip,
                                  .src_port = port,
                                  .dst_port = dst_port,
                                  .ip_id = static_cast<uint16_t>(k)};
          icrc::stamp_udp(f, std::span<uint8_t>(roce, roce_len));
          tx_iov[niov++] = {roce, roce_len};
          m.msg_hdr.msg_iovlen = k + 1;
          if (k == 1) {  // a train now: tell the kernel where to cut
            set_udp_segment(m.msg_hdr, &tx_cmsg[(n - 1) * kCmsgWords], static_cast<uint16_t>(roce_len));
          }
          continue;
        }
      }
      train_ip = dst_ip;
      train_port = dst_port;
      train_len = roce_len;
      const bool kernel_same = load_be32(ip + 12) == ip_addr && load_be16(udp) == port && load_be16(ip + 4) == 0 &&
                               (load_be16(ip + 6) & 0xE000) == kIpFlagsDf;
      if (!kernel_same) {
        // IP ID 0 and DF: what the kernel writes for a DF datagram from an unconnected socket.
        const icrc::UdpFields f{.src_ip = ip_addr, .dst_ip = dst_ip, .src_port = port, .dst_port = dst_port};
        icrc::stamp_udp(f, std::span<uint8_t>(roce, roce_len));
        bump(counters.tx_restamped);
      }
      sockaddr_in& to = tx_addr[n];
      to = {};
      to.sin_family = AF_INET;
      to.sin_port = htons(dst_port);
      to.sin_addr.s_addr = htonl(dst_ip);
      tx_iov[niov] = {roce, roce_len};
      mmsghdr& m = tx_msgs[n];
      std::memset(&m, 0, sizeof(m));
      m.msg_hdr.msg_name = &to;
      m.msg_hdr.msg_namelen = sizeof(to);
      m.msg_hdr.msg_iov = &tx_iov[niov++];
      m.msg_hdr.msg_iovlen = 1;
      ++n;
    }
    size_t done = 0;
    bool waited = false;
    while (done < n) {
      const int rc = sendmmsg(fd, tx_msgs.data() + done, static_cast<unsigned>(n - done), MSG_DONTWAIT);
      if (rc > 0) {
        for (size_t i = done; i < done + static_cast<size_t>(rc); ++i) {
          const size_t k = tx_msgs[i].msg_hdr.msg_iovlen;
          bump(counters.tx_datagrams, k);
          if (k > 1) {
            bump(counters.tx_trains);
            bump(counters.tx_train_datagrams, k);
          }
        }
        done += static_cast<size_t>(rc);
        waited = false;
        continue;
      }
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) && !waited) {
        pollfd pfd{fd, POLLOUT, 0};
        (void)poll(&pfd, 1, 10);
        waited = true;
        continue;
      }
      // Full after a wait, or unreachable: the worker's RTO recovers.
      bump(counters.tx_dropped, tx_msgs[done].msg_hdr.msg_iovlen);
      ++done;
    }
    for (const auto& q : queued) free_bufs.push_back(q.first);
    queued.clear();
  }

  // --- the poll loop (its own thread) ---
  void run() {
    const size_t b = options.batch;
    std::vector<engine::PacketView> views(b);
    while (!stopping.load(std::memory_order_acquire)) {
      pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
      const int prc = poll(fds, 2, -1);
      if (prc < 0 && errno != EINTR) break;
      if (fds[1].revents != 0) break;
      for (int burst = 0; burst < 64; ++burst) {
        if (options.udp_trains) {
          if (!receive_coalesced(views)) break;
          continue;
        }
        for (size_t i = 0; i < b; ++i) {
          prepare_rx(i, rx_mem.data() + i * kFrameBufLen + wire::kBthOffset, kRxRoom, nullptr);
        }
        const int rc = recvmmsg(fd, rx_msgs.data(), static_cast<unsigned>(b), MSG_DONTWAIT, nullptr);
        if (rc <= 0) break;
        bump(counters.rx_datagrams, static_cast<uint64_t>(rc));
        size_t nv = 0;
        for (int i = 0; i < rc; ++i) {
          uint8_t* frame = rx_mem.data() + static_cast<size_t>(i) * kFrameBufLen;
          const size_t len = (rx_msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0 ? kRxRoom : rx_msgs[i].msg_len;
          if (wrap(frame, len, ntohl(rx_addr[i].sin_addr.s_addr), ntohs(rx_addr[i].sin_port), 0, &views[nv])) ++nv;
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          engine.process_burst(std::span<const engine::PacketView>(views.data(), nv), *this);
          flush();
        }
        if (static_cast<size_t>(rc) < b) break;
      }
    }
  }

  // Points receive message i at `len` bytes at `data` (and, when given, kCmsgWords of control).
  void prepare_rx(size_t i, uint8_t* data, size_t len, uint64_t* control) {
    rx_iov[i] = {data, len};
    msghdr& h = rx_msgs[i].msg_hdr;
    std::memset(&h, 0, sizeof(h));
    h.msg_name = &rx_addr[i];
    h.msg_namelen = sizeof(sockaddr_in);
    h.msg_iov = &rx_iov[i];
    h.msg_iovlen = 1;
    if (control != nullptr) {
      h.msg_control = control;
      h.msg_controllen = kCmsgWords * 8;
    }
  }

  // Wraps the datagram at frame + kBthOffset (`len` bytes from src_ip:src_port; kRxRoom or more:
  // truncated) into the Ethernet / IPv4 / UDP frame its sender's NIC would have produced; false
  // when it is dropped (counted). `index`: its place in a coalesced buffer (udp_trains). Datagram
  // k of a sender's UDP_SEGMENT train was stamped for IP ID k, a datagram sent alone for 0, and a
  // train may arrive whole, coalesced from lone datagrams, or cut on the way (docs/protocol.md
  // §2.2): any IP ID a train's place has is accepted, its place here tried first. *view: the
  // frame for the engine, marked verified where this checked its ICRC (once per frame).
  bool wrap(uint8_t* frame, size_t len, uint32_t src_ip, uint16_t src_port, uint16_t index, engine::PacketView* view) {
    if (len >= kRxRoom) {
      bump(counters.rx_truncated);
      return false;
    }
    const std::span<const uint8_t> roce(frame + wire::kBthOffset, len);
    uint16_t ip_id = 0;
    bool verified = false;
    if (options.verify_icrc) {
      const icrc::UdpFields f{
          .src_ip = src_ip, .dst_ip = ip_addr, .src_port = src_port, .dst_port = port, .ip_id = index};
      const int id = icrc::match_udp_ip_id(f, roce, kUdpTrainMaxSegments);
      if (id < 0) {
        bump(counters.rx_bad_icrc);
        return false;
      }
      ip_id = static_cast<uint16_t>(id);
      verified = true;
      if (id != 0 && id != index) bump(counters.rx_cut_train);
    }
    // (Off port 4791 the headers written name 4791, which the sender's ICRC did not cover; the frame
    // is verified here or not at all, so the engine never checks it against these headers.)
    write_headers(frame, src_ip, src_port, len, ip_id);
    *view = {frame, static_cast<uint32_t>(wire::kBthOffset + len), verified};
    return true;
  }

  // udp_trains: one recvmmsg of up to kGroBufs coalesced buffers, each datagram copied out to a
  // frame of its own (the engine needs the headers in front), one engine burst. False when the
  // socket had less than a full read.
  bool receive_coalesced(std::vector<engine::PacketView>& views) {
    for (size_t i = 0; i < kGroBufs; ++i)
      prepare_rx(i, rx_big.data() + i * kUdpGroBufLen, kUdpGroBufLen, &rx_cmsg[i * kCmsgWords]);
    const int rc = recvmmsg(fd, rx_msgs.data(), static_cast<unsigned>(kGroBufs), MSG_DONTWAIT, nullptr);
    if (rc <= 0) return false;
    if (views.size() < kGroBufs * kUdpTrainMaxSegments) views.resize(kGroBufs * kUdpTrainMaxSegments);
    size_t nv = 0;
    for (size_t i = 0; i < static_cast<size_t>(rc); ++i) {
      msghdr& h = rx_msgs[i].msg_hdr;
      const size_t len = rx_msgs[i].msg_len;
      size_t seg = len;
      for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
        const size_t g = udp_gro_segment(*c);
        if (g > 0 && g < len) seg = g;
      }
      if (seg < len) {
        bump(counters.rx_coalesced);
        bump(counters.rx_coalesced_datagrams, (len + seg - 1) / seg);
      }
      const uint32_t src_ip = ntohl(rx_addr[i].sin_addr.s_addr);
      const uint16_t src_port = ntohs(rx_addr[i].sin_port);
      const bool truncated = (h.msg_flags & MSG_TRUNC) != 0;
      uint16_t k = 0;
      size_t off = 0;
      do {  // once for an empty datagram too (the engine rejects it)
        const size_t l = std::min(seg, len - off);
        bump(counters.rx_datagrams);
        uint8_t* frame = rx_mem.data() + nv * kFrameBufLen;
        if (truncated || l >= kRxRoom) {
          bump(counters.rx_truncated);
        } else {
          std::memcpy(frame + wire::kBthOffset, rx_big.data() + i * kUdpGroBufLen + off, l);
          if (wrap(frame, l, src_ip, src_port, k, &views[nv])) ++nv;
        }
        off += l;
        ++k;
      } while (off < len && k < kUdpTrainMaxSegments);
      if (off < len) bump(counters.rx_truncated);  // more than a train's worth: the rest is lost
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      engine.process_burst(std::span<const engine::PacketView>(views.data(), nv), *this);
      flush();
    }
    return static_cast<size_t>(rc) == kGroBufs;
  }

  void write_headers(uint8_t* frame, uint32_t src_ip, uint16_t src_port, size_t roce_len, uint16_t ip_id) const {
    std::memcpy(frame, engine_mac, 6);  // destination: the engine's own MAC
    std::memset(frame + 6, 0, 6);
    store_be16(frame + 12, wire::kEtherTypeIpv4);
    uint8_t* ip = frame + wire::kIpOffset;
    ip[0] = 0x45;
    ip[1] = 0;
    store_be16(ip + 2, static_cast<uint16_t>(wire::kIpv4HeaderLen + wire::kUdpHeaderLen + roce_len));
    store_be16(ip + 4, ip_id);       // IP ID (0 but in trains) ...
    store_be16(ip + 6, kIpFlagsDf);  // ... with DF, as the sender's kernel wrote it
    ip[8] = 64;
    ip[9] = wire::kIpProtoUdp;
    store_be32(ip + 12, src_ip);
    store_be32(ip + 16, ip_addr);
    store_be16(ip + 10, wire::ipv4_header_checksum(ip));
    uint8_t* udp = ip + wire::kIpv4HeaderLen;
    store_be16(udp, src_port);
    store_be16(udp + 2, wire::kRoceUdpPort);
    store_be16(udp + 4, static_cast<uint16_t>(wire::kUdpHeaderLen + roce_len));
    store_be16(udp + 6, 0);
  }

  void shutdown() {
    if (server) server->stop();
    stopping.store(true, std::memory_order_release);
    if (stop_fd >= 0) {
      const uint64_t one = 1;
      (void)!write(stop_fd, &one, sizeof(one));
    }
    if (loop.joinable()) loop.join();
    server.reset();
    if (fd >= 0) close(fd);
    if (stop_fd >= 0) close(stop_fd);
    fd = -1;
    stop_fd = -1;
  }

  ServiceOptions options;
  uint32_t ip_addr = 0;
  uint16_t port = 0;
  uint8_t engine_mac[6] = {};
  int fd = -1;
  int stop_fd = -1;

  std::mutex mu;  // the engine and the tx pool: one thread at a time
  engine::Engine engine;
  std::vector<uint8_t> tx_mem;
  std::vector<uint8_t*> free_bufs;
  std::vector<std::pair<uint8_t*, uint32_t>> queued;
  std::vector<mmsghdr> tx_msgs;
  std::vector<iovec> tx_iov;
  std::vector<sockaddr_in> tx_addr;
  std::vector<uint64_t> tx_cmsg;  // kCmsgWords per message: UDP_SEGMENT (udp_trains)

  // udp_trains: coalesced buffers land in rx_big; their datagrams are copied out to rx_mem frames.
  std::vector<uint8_t> rx_big;
  std::vector<uint64_t> rx_cmsg;  // kCmsgWords per buffer: UDP_GRO

  std::vector<uint8_t> rx_mem;  // touched by the loop thread only
  std::vector<mmsghdr> rx_msgs;
  std::vector<iovec> rx_iov;
  std::vector<sockaddr_in> rx_addr;

  mutable std::mutex jobs_mu;
  mutable std::condition_variable jobs_cv;
  std::set<uint32_t> jobs;

  AtomicCounters counters;
  std::unique_ptr<control::Server> server;
  std::atomic<bool> stopping{false};
  std::thread loop;
};

Service::Service(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Service::~Service() { stop(); }

Result<std::unique_ptr<Service>> Service::start(const ServiceOptions& o) {
  const std::optional<uint32_t> bind_ip = parse_ipv4(o.bind_ip);
  if (!bind_ip || *bind_ip == 0) {
    return Status::invalid_argument("embedded service: bind_ip '" + o.bind_ip + "' is not a specific IPv4 address");
  }
  if (o.batch == 0 || o.batch > 1024) return Status::invalid_argument("embedded service: batch must be 1..1024");
  const uint32_t ip = *bind_ip;
  engine::EngineOptions eo;
  eo.core_index = 0;
  eo.core_count = 1;
  eo.local_ip = ip;
  eo.qpn = kCoreQpn;
  eo.verify_icrc = o.verify_icrc;
  eo.max_jobs = o.max_jobs;
  eo.max_ranks = o.max_ranks;
  eo.max_slots_per_job = o.slots_per_job;
  auto impl = std::make_unique<Impl>(o, eo);
  Impl& s = *impl;
  s.ip_addr = ip;

  s.fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.fd < 0) return Status::from_errno("embedded service: socket");
  const int pmtu = IP_PMTUDISC_DO;
  if (setsockopt(s.fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0) {
    return Status::from_errno("embedded service: IP_MTU_DISCOVER");
  }
  (void)set_socket_buffer(s.fd, SO_RCVBUFFORCE, SO_RCVBUF, o.socket_buffer_bytes);
  (void)set_socket_buffer(s.fd, SO_SNDBUFFORCE, SO_SNDBUF, o.socket_buffer_bytes);
  sockaddr_in me{};
  me.sin_family = AF_INET;
  me.sin_port = htons(o.data_port);
  me.sin_addr.s_addr = htonl(ip);
  if (bind(s.fd, reinterpret_cast<const sockaddr*>(&me), sizeof(me)) != 0) {
    return Status::from_errno("embedded service: bind UDP " + o.bind_ip + ":" + std::to_string(o.data_port));
  }
  socklen_t len = sizeof(me);
  if (getsockname(s.fd, reinterpret_cast<sockaddr*>(&me), &len) != 0) return Status::from_errno("getsockname");
  s.port = ntohs(me.sin_port);
  s.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s.stop_fd < 0) return Status::from_errno("embedded service: eventfd");

  const size_t b = o.batch;
  s.rx_mem.assign(b * kFrameBufLen, 0);
  s.rx_msgs.resize(b);
  s.rx_iov.resize(b);
  s.rx_addr.resize(b);
  s.tx_mem.assign(b * kTxPoolFactor * kFrameBufLen, 0);
  for (size_t i = 0; i < b * kTxPoolFactor; ++i) s.free_bufs.push_back(s.tx_mem.data() + i * kFrameBufLen);
  s.queued.reserve(b * kTxPoolFactor);
  s.tx_msgs.resize(b * kTxPoolFactor);
  s.tx_iov.resize(b * kTxPoolFactor);
  s.tx_addr.resize(b * kTxPoolFactor);
  if (o.udp_trains) {
    const int one = 1;
    if (setsockopt(s.fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0) {
      return Status::from_errno("embedded service: udp_trains: UDP_GRO (Linux 5.0 or later)");
    }
    s.tx_cmsg.assign(b * kTxPoolFactor * kCmsgWords, 0);
    s.rx_big.assign(kGroBufs * kUdpGroBufLen, 0);
    s.rx_cmsg.assign(kGroBufs * kCmsgWords, 0);
    s.rx_mem.assign(kGroBufs * kUdpTrainMaxSegments * kFrameBufLen, 0);
    if (s.rx_msgs.size() < kGroBufs) {
      s.rx_msgs.resize(kGroBufs);
      s.rx_iov.resize(kGroBufs);
      s.rx_addr.resize(kGroBufs);
    }
  }

  control::ServerOptions so;
  so.listen_ip = ip;
  so.port = o.control_port;
  so.token = o.token;
  so.job_timeout_ms = o.job_timeout_ms;
  so.register_timeout_ms = o.register_timeout_ms;
  so.max_jobs = o.max_jobs;
  so.max_ranks = o.max_ranks;
  so.slots_per_job = o.slots_per_job;
  so.max_payload_bytes = o.max_payload_bytes;
  so.data_ip = ip;
  so.core_qpns = {kCoreQpn};
  so.multicast = o.multicast;
  so.loss_notices = o.loss_notices;
  if (o.multicast) {
    const std::optional<uint32_t> group = parse_ipv4(o.multicast_group);
    // Job i gets group + i: the last of max_jobs groups must be multicast too.
    const uint64_t spread = o.max_jobs > 0 ? o.max_jobs - 1 : 0;
    if (!group || (*group >> 28) != 0xE || ((*group + spread) >> 28) != 0xE) {
      s.shutdown();
      return Status::invalid_argument("embedded service: multicast group '" + o.multicast_group + "' (+ " +
                                      std::to_string(spread) + ", one per job) is not in 224.0.0.0/4");
    }
    so.multicast_base_ip = *group;
    // Group frames leave by the interface of the service's own address.
    const in_addr ifa{htonl(ip)};
    if (setsockopt(s.fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof(ifa)) != 0) {
      const int err = errno;
      s.shutdown();
      return Status::from_errno("embedded service: IP_MULTICAST_IF " + o.bind_ip, err);
    }
  }
  s.loop = std::thread([&s] { s.run(); });
  s.server = std::make_unique<control::Server>(so, &s);
  Status st = s.server->start();
  if (!st.ok()) {
    s.shutdown();
    return Status(st.code(), "embedded service: control server on " + o.bind_ip + ":" + std::to_string(o.control_port) +
                                 ": " + st.message());
  }
  return std::unique_ptr<Service>(new Service(std::move(impl)));
}

void Service::stop() {
  if (impl_) impl_->shutdown();
}

uint32_t Service::data_ip() const { return impl_->ip_addr; }
uint16_t Service::data_port() const { return impl_->port; }
uint16_t Service::control_port() const { return impl_->server ? impl_->server->bound_port() : 0; }
std::string Service::control_address() const {
  return format_ipv4(impl_->ip_addr) + ":" + std::to_string(control_port());
}
const engine::CoreCounters& Service::engine_counters() const { return impl_->engine.counters(); }

ServiceCounters Service::counters() const {
  const AtomicCounters& c = impl_->counters;
  ServiceCounters s;
  s.rx_datagrams = c.rx_datagrams.load(std::memory_order_relaxed);
  s.rx_truncated = c.rx_truncated.load(std::memory_order_relaxed);
  s.rx_bad_icrc = c.rx_bad_icrc.load(std::memory_order_relaxed);
  s.rx_cut_train = c.rx_cut_train.load(std::memory_order_relaxed);
  s.tx_datagrams = c.tx_datagrams.load(std::memory_order_relaxed);
  s.tx_dropped = c.tx_dropped.load(std::memory_order_relaxed);
  s.tx_restamped = c.tx_restamped.load(std::memory_order_relaxed);
  s.rx_coalesced = c.rx_coalesced.load(std::memory_order_relaxed);
  s.rx_coalesced_datagrams = c.rx_coalesced_datagrams.load(std::memory_order_relaxed);
  s.tx_trains = c.tx_trains.load(std::memory_order_relaxed);
  s.tx_train_datagrams = c.tx_train_datagrams.load(std::memory_order_relaxed);
  return s;
}

std::vector<control::JobInfo> Service::jobs() const {
  return impl_->server ? impl_->server->jobs() : std::vector<control::JobInfo>{};
}
control::ServerCounters Service::server_counters() const {
  return impl_->server ? impl_->server->counters() : control::ServerCounters{};
}

size_t Service::installed_jobs() const {
  std::lock_guard<std::mutex> jl(impl_->jobs_mu);
  return impl_->jobs.size();
}

bool Service::wait_until_no_jobs(uint32_t timeout_ms) const {
  std::unique_lock<std::mutex> jl(impl_->jobs_mu);
  return impl_->jobs_cv.wait_for(jl, std::chrono::milliseconds(timeout_ms), [this] { return impl_->jobs.empty(); });
}

}  // namespace sumcast::embedded
