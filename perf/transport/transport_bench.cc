// sumcast-transport-bench: the worker's kernel-UDP transport alone, both ways at once, against
// one TCP stream on the same path (perf/transport/run).
//
// Two threads, each pinned to its own CPU:
//   worker     a transport opened by shim::open_transport (kind udp), as the communicator opens
//              it: builds contributions with build() (ICRC included; with --gso send() stamps
//              it), sends them in batches with send() and drains receive() in the same loop (up
//              to 4 batches per batch sent), on one core
//   reflector  a second transport from the same factory, bound to the other address: sends
//              results to the worker (build() with type result, the worker's job, rank and QPN)
//              as fast as it can, and drains what the worker sends (the transport rejects
//              contributions as not_result after counting them: rx_packets is what arrived)
// so both directions carry full-rate traffic through whatever the transport does (batching,
// offloads). With --proto tcp the same two threads move the same payload bytes over one TCP
// connection instead (non-blocking, 64 KiB writes and reads, both ways at once).
//
// The reflector thread may enter another network namespace (--reflector-netns NAME: setns() on
// /var/run/netns/NAME before it opens anything), so that the path is a veth pair.
//
//   sumcast-transport-bench --proto udp|tcp --worker-ip A --reflector-ip B [options]
//   --payload B (1024)  --batch N (64: packets per send() call)  --seconds S (3) after
//   --warmup S (1)  --worker-cpu C (0)  --reflector-cpu C (1)  --tcp-port P (47300)
//   --reflector-netns NAME  --gso (UDP_SEGMENT trains, both transports)  --json
//
// Output: one JSON line {"proto","payload","seconds","w2r":{...},"r2w":{...},"worker_cpu_s",
// "reflector_cpu_s", ...}: per direction tx and rx packets/s and Gbit/s (gradient payload bytes:
// what a worker moves; for TCP the stream's bytes), measured over the same window by both
// threads. Exit 0, or 1 on a failure (a transport that cannot open, a thread that saw an error).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "sumcast/cli.h"
#include "sumcast/shim/transport.h"
#include "sumcast/shim/transport_factory.h"
#include "sumcast/wire/format.h"

namespace {

using Clock = std::chrono::steady_clock;
using sumcast::shim::OutPacket;
using sumcast::shim::Received;
using sumcast::shim::Transport;

struct Options {
  std::string proto = "udp";
  std::string worker_ip = "127.0.0.1";
  std::string reflector_ip = "127.0.0.2";
  std::string reflector_netns;
  uint32_t payload = 1024;
  uint32_t batch = 64;
  double seconds = 3;
  double warmup = 1;
  int worker_cpu = 0;
  int reflector_cpu = 1;
  uint16_t tcp_port = 47300;
  bool gso = false;  // UDP: both transports send UDP_SEGMENT trains (TransportConfig::gso)
  bool json = false;
};

constexpr uint32_t kJob = 0x5ca1;
constexpr uint32_t kQkey = 0x5C0000BB;
constexpr uint16_t kRank = 3;
constexpr size_t kTcpChunk = 64 << 10;
constexpr int kDrainCalls = 4;  // receive calls at most per send call (UDP: batches; TCP: reads)

uint32_t parse_ip(const std::string& s, const char* what) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) {
    std::fprintf(stderr, "sumcast-transport-bench: %s: not an IPv4 address: %s\n", what, s.c_str());
    std::exit(2);
  }
  return ntohl(a.s_addr);
}

// What one side counted inside the measured window.
struct Side {
  uint64_t tx_packets = 0, tx_bytes = 0;  // payload bytes
  uint64_t rx_packets = 0, rx_bytes = 0;
  uint64_t tx_dropped = 0;    // the transport's tx_dropped (UDP)
  uint64_t tx_in_trains = 0;  // packets sent as segments of UDP_SEGMENT trains (UDP, --gso)
  double cpu_s = 0;           // this thread's CPU time over the window
  std::string error;
};

// The common time line: both threads wait for `go`, then run warm-up and the window.
struct Shared {
  Options o;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> failed{false};
  Clock::time_point start, measure_from, end;
  sumcast::shim::Endpoint worker_ep, reflector_ep;
};

double thread_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

bool pin(int cpu, std::string* err) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    *err = "cannot pin to CPU " + std::to_string(cpu);
    return false;
  }
  return true;
}

bool enter_netns(const std::string& name, std::string* err) {
  if (name.empty()) return true;
  const std::string path = "/var/run/netns/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    *err = "cannot enter network namespace " + path + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

// The worker thread fixes the common time line once both sides are set up; both wait for `go`.
void start_clock(Shared& s) {
  const auto secs = [](double x) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(x));
  };
  s.start = Clock::now();
  s.measure_from = s.start + secs(s.o.warmup);
  s.end = s.measure_from + secs(s.o.seconds);
  s.go.store(true);
}

// Counts a loop's traffic from the start of the window: `snap` is taken when the window opens.
struct Window {
  bool open = false;
  Side at_open;
  double cpu_at_open = 0;
  // Returns false once the window has closed.
  bool tick(const Shared& s, const Side& now_counts, Side* result) {
    const Clock::time_point now = Clock::now();
    if (!open && now >= s.measure_from) {
      open = true;
      at_open = now_counts;
      cpu_at_open = thread_cpu_s();
    }
    if (now < s.end) return true;
    result->tx_packets = now_counts.tx_packets - at_open.tx_packets;
    result->tx_bytes = now_counts.tx_bytes - at_open.tx_bytes;
    result->rx_packets = now_counts.rx_packets - at_open.rx_packets;
    result->rx_bytes = now_counts.rx_bytes - at_open.rx_bytes;
    result->tx_dropped = now_counts.tx_dropped - at_open.tx_dropped;
    result->tx_in_trains = now_counts.tx_in_trains - at_open.tx_in_trains;
    result->cpu_s = thread_cpu_s() - cpu_at_open;
    return false;
  }
};

// ---- UDP: the worker library's transport, from its factory ----

std::unique_ptr<Transport> open_udp(uint32_t ip, bool gso, std::string* err) {
  sumcast::shim::TransportConfig c;
  c.kind = sumcast::shim::TransportKind::kUdp;
  c.bind_ip = ip;
  c.verify_icrc = true;
  c.gso = gso;
  auto t = sumcast::shim::open_transport(c);
  if (!t.ok()) {
    *err = t.status().to_string();
    return nullptr;
  }
  return std::move(t).value();
}

// One side of the UDP run: sends `type` packets to the other side's endpoint and drains receive().
void udp_side(Shared& s, bool worker, Side* out) {
  const Options& o = s.o;
  std::string err;
  std::unique_ptr<Transport> t;
  if (pin(worker ? o.worker_cpu : o.reflector_cpu, &err) && (worker || enter_netns(o.reflector_netns, &err))) {
    t = open_udp(parse_ip(worker ? o.worker_ip : o.reflector_ip, "address"), o.gso, &err);
  }
  if (t) (worker ? s.worker_ep : s.reflector_ep) = t->local_endpoint();
  // Both endpoints are needed before either side can name its peer.
  s.ready.fetch_add(1);
  while (s.ready.load() < 2 && !s.failed.load()) std::this_thread::yield();
  if (!t || s.failed.load()) {
    out->error = err.empty() ? "the other side failed" : err;
    s.failed.store(true);
    return;
  }
  const sumcast::shim::Endpoint peer_ep = worker ? s.reflector_ep : s.worker_ep;
  sumcast::shim::PeerSpec spec;
  spec.ip = peer_ep.ip;
  spec.udp_port = peer_ep.udp_port;
  spec.job_id = kJob;
  spec.qkey = kQkey;
  spec.rank = kRank;
  auto peer = t->add_peer(spec);
  if (!peer.ok()) {
    out->error = peer.status().to_string();
    s.failed.store(true);
    return;
  }
  const size_t elems = o.payload / sumcast::wire::dtype_size(spec.dtype);
  const size_t payload = elems * sumcast::wire::dtype_size(spec.dtype);
  const size_t cap = t->packet_capacity(payload);
  std::vector<uint8_t> bufs(cap * o.batch);
  std::vector<uint8_t> data(payload, 0x3c);
  std::vector<OutPacket> pkts(o.batch);
  std::vector<Received> got(o.batch);
  sumcast::wire::SumcastHeader h;
  h.type = worker ? sumcast::wire::MsgType::kContribution : sumcast::wire::MsgType::kResult;
  h.job_id = kJob;
  h.rank = kRank;
  h.elem_count = static_cast<uint16_t>(elems);
  // Results go to the worker's QP; contributions to one of the appliance's (any: nothing checks it).
  const uint32_t dest_qp = worker ? 0x100 : s.worker_ep.qpn;
  s.ready.fetch_add(1);  // second phase: peers added
  while (s.ready.load() < 4 && !s.failed.load()) std::this_thread::yield();
  if (worker) start_clock(s);
  while (!s.go.load()) std::this_thread::yield();
  Side c;
  Window w;
  uint32_t psn = 0;
  uint64_t seq = 0;
  for (uint64_t loop = 0;; ++loop) {
    for (uint32_t i = 0; i < o.batch; ++i, ++seq) {
      h.slot = static_cast<uint16_t>(seq & 127);
      h.round = static_cast<uint32_t>(seq >> 7) << 1;
      h.elem_offset = seq * elems;
      uint8_t* b = bufs.data() + i * cap;
      pkts[i] = {*peer, b, static_cast<uint32_t>(t->build(b, *peer, dest_qp, psn++, h, data.data()))};
    }
    const sumcast::Status st = t->send(pkts);
    if (!st.ok()) {
      out->error = "send: " + st.to_string();
      s.failed.store(true);
      return;
    }
    // Drain what is there, up to kDrainCalls batches per batch sent, so that sending goes on
    // (and the clock is read) even under a flood; a receiver that falls behind loses datagrams.
    // Progress is the transport's rx_packets: the reflector's receive() accepts none of them.
    for (int d = 0; d < kDrainCalls; ++d) {
      const uint64_t before = t->counters().rx_packets;
      const size_t n = t->receive(got);
      if (worker) {
        c.rx_packets += n;
        for (size_t i = 0; i < n; ++i) c.rx_bytes += got[i].payload_len;
      }
      if (t->counters().rx_packets == before) break;
    }
    const sumcast::shim::TransportCounters& k = t->counters();
    c.tx_packets = k.tx_packets;
    c.tx_bytes = k.tx_packets * payload;
    c.tx_dropped = k.tx_dropped;
    c.tx_in_trains = k.gso_segments;
    if (!worker) {  // contributions are rejected after counting: what arrived is rx_packets
      c.rx_packets = k.rx_packets;
      c.rx_bytes = k.rx_packets * payload;
    }
    if ((loop & 7) == 0 && (!w.tick(s, c, out) || s.failed.load())) break;
  }
}

// ---- TCP: one connection, both ways at once ----

void tcp_side(Shared& s, bool worker, Side* out) {
  const Options& o = s.o;
  std::string err;
  int fd = -1;
  auto fail = [&](const std::string& what) {
    out->error = what + ": " + std::strerror(errno);
    s.failed.store(true);
    if (fd >= 0) ::close(fd);
  };
  if (!pin(worker ? o.worker_cpu : o.reflector_cpu, &err) || (!worker && !enter_netns(o.reflector_netns, &err))) {
    out->error = err;
    s.failed.store(true);
    return;
  }
  sockaddr_in r{};
  r.sin_family = AF_INET;
  r.sin_port = htons(o.tcp_port);
  r.sin_addr.s_addr = htonl(parse_ip(o.reflector_ip, "--reflector-ip"));
  if (!worker) {
    const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || ::bind(ls, reinterpret_cast<sockaddr*>(&r), sizeof r) != 0 || ::listen(ls, 1) != 0) {
      if (ls >= 0) ::close(ls);
      return fail("listen on " + o.reflector_ip + ":" + std::to_string(o.tcp_port));
    }
    s.ready.fetch_add(1);  // listening: the worker may connect
    // The worker connects within a moment or has failed; a bounded wait either way.
    timeval tv{10, 0};
    setsockopt(ls, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    fd = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(ls);
    if (fd < 0) return fail("accept");
  } else {
    while (s.ready.load() < 1 && !s.failed.load()) std::this_thread::yield();
    if (s.failed.load()) return;
    sockaddr_in me{};
    me.sin_family = AF_INET;
    me.sin_addr.s_addr = htonl(parse_ip(o.worker_ip, "--worker-ip"));
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0 ||
        ::connect(fd, reinterpret_cast<sockaddr*>(&r), sizeof r) != 0) {
      return fail("connect to " + o.reflector_ip + ":" + std::to_string(o.tcp_port));
    }
    s.ready.fetch_add(1);
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  s.ready.fetch_add(1);
  while (s.ready.load() < 4 && !s.failed.load()) std::this_thread::yield();
  if (worker) start_clock(s);
  while (!s.go.load() && !s.failed.load()) std::this_thread::yield();
  std::vector<uint8_t> txbuf(kTcpChunk, 0x3c), rxbuf(kTcpChunk);
  Side c;
  Window w;
  for (uint64_t loop = 0;; ++loop) {
    const ssize_t sent = ::send(fd, txbuf.data(), txbuf.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      c.tx_bytes += static_cast<uint64_t>(sent);
    } else if (sent < 0 && errno != EAGAIN && errno != EINTR) {
      return fail("send");
    }
    for (int i = 0; i < kDrainCalls; ++i) {
      const ssize_t n = ::recv(fd, rxbuf.data(), rxbuf.size(), 0);
      if (n > 0) {
        c.rx_bytes += static_cast<uint64_t>(n);
      } else if (n == 0) {
        errno = ECONNRESET;
        if (Clock::now() < s.end) return fail("recv (the other side closed)");
        break;
      } else {
        if (errno != EAGAIN && errno != EINTR) return fail("recv");
        break;
      }
    }
    c.tx_packets = c.tx_bytes / o.payload;  // in payload-sized units, to compare with UDP's packets
    c.rx_packets = c.rx_bytes / o.payload;
    if ((loop & 7) == 0 && (!w.tick(s, c, out) || s.failed.load())) break;
  }
  // Keep the connection until both sides closed their windows: the first to close must not make
  // the other's last reads fail.
  s.ready.fetch_add(1);
  while (s.ready.load() < 6 && !s.failed.load()) {
    (void)::recv(fd, rxbuf.data(), rxbuf.size(), 0);
  }
  ::close(fd);
}

nlohmann::ordered_json direction(const Side& tx, const Side& rx, double secs) {
  return {
      {"tx_pps", static_cast<double>(tx.tx_packets) / secs},
      {"rx_pps", static_cast<double>(rx.rx_packets) / secs},
      {"tx_gbps", static_cast<double>(tx.tx_bytes) * 8e-9 / secs},
      {"rx_gbps", static_cast<double>(rx.rx_bytes) * 8e-9 / secs},
      {"lost_pct",
       tx.tx_packets ? 100.0 * (1.0 - static_cast<double>(rx.rx_packets) / static_cast<double>(tx.tx_packets)) : 0.0},
      {"tx_dropped", tx.tx_dropped},
      {"tx_in_trains_share",
       tx.tx_packets ? static_cast<double>(tx.tx_in_trains) / static_cast<double>(tx.tx_packets) : 0.0}};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"The worker's kernel-UDP transport alone, both ways at once, against one TCP stream on the same path",
               "sumcast-transport-bench"};
  sumcast::cli::setup(app);
  app.add_option("--proto", o.proto, "udp: the worker library's transport (open_transport); tcp: one TCP stream")
      ->check(CLI::IsMember({"udp", "tcp"}));
  app.add_option("--worker-ip", o.worker_ip, "the worker thread's address (default 127.0.0.1)");
  app.add_option("--reflector-ip", o.reflector_ip, "the reflector thread's address (default 127.0.0.2)");
  app.add_option("--reflector-netns", o.reflector_netns, "network namespace the reflector thread enters (ip netns)");
  app.add_option("--payload", o.payload, "gradient payload bytes per packet (default 1024)")
      ->check(CLI::Range(4u, static_cast<unsigned>(sumcast::wire::kMaxPayloadBytes)));
  app.add_option("--batch", o.batch, "packets per send() call (default 64)")->check(CLI::Range(1, 1024));
  app.add_option("--seconds", o.seconds, "measured time (default 3)")->check(CLI::Range(0.01, 600.0));
  app.add_option("--warmup", o.warmup, "time before the measurement (default 1)")->check(CLI::Range(0.0, 60.0));
  app.add_option("--worker-cpu", o.worker_cpu, "CPU of the worker thread (default 0)")->check(CLI::NonNegativeNumber);
  app.add_option("--reflector-cpu", o.reflector_cpu, "CPU of the reflector thread (default 1)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tcp-port", o.tcp_port, "the reflector's TCP port (--proto tcp; default 47300)");
  app.add_flag("--gso", o.gso, "UDP: send UDP_SEGMENT trains (a batch's packets to the peer, as the worker does)");
  app.add_flag("--json", o.json, "print one JSON line instead of the table");
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
  parse_ip(o.worker_ip, "--worker-ip");
  parse_ip(o.reflector_ip, "--reflector-ip");

  Shared s;
  s.o = o;
  Side w, r;
  auto side = o.proto == "udp" ? udp_side : tcp_side;
  std::thread reflector([&] { side(s, false, &r); });
  side(s, true, &w);
  reflector.join();
  if (!w.error.empty() || !r.error.empty()) {
    std::fprintf(stderr, "sumcast-transport-bench: %s\n", (!w.error.empty() ? w.error : r.error).c_str());
    return 1;
  }
  const double secs = o.seconds;
  const nlohmann::ordered_json out = {{"proto", o.proto},
                                      {"payload", o.payload},
                                      {"batch", o.batch},
                                      {"gso", o.gso},
                                      {"seconds", secs},
                                      {"worker_ip", o.worker_ip},
                                      {"reflector_ip", o.reflector_ip},
                                      {"reflector_netns", o.reflector_netns},
                                      {"w2r", direction(w, r, secs)},
                                      {"r2w", direction(r, w, secs)},
                                      {"worker_cpu_s", w.cpu_s},
                                      {"reflector_cpu_s", r.cpu_s}};
  if (o.json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf(
        "%s, %u B payloads, %.2f s: worker->reflector %.3f Gbit/s received (%.3f sent), "
        "reflector->worker %.3f Gbit/s received (%.3f sent); worker CPU %.2f s\n",
        o.proto.c_str(), o.payload, secs, out["w2r"]["rx_gbps"].get<double>(), out["w2r"]["tx_gbps"].get<double>(),
        out["r2w"]["rx_gbps"].get<double>(), out["r2w"]["tx_gbps"].get<double>(), w.cpu_s);
  }
  return 0;
}
