// sumcast-pcapgen: pcap files of a stress job's contribution streams, for dpdk-pktgen
// (docs/stress-testing.md) or any pcap replayer (DPDK's net_pcap, tcpreplay).
//
// Registered mode (the usual): opens one control connection per rank to a running appliance,
// registers the stress job (all ranks from one sender: --src-mac/--iface and --src-ip, QPNs
// --src-qpn-base + rank), writes the pcaps for the grant it gets (job id, Q_Key, the appliance's
// MAC/IPv4 and per-core QPNs), prints "sumcast-pcapgen: ready ...", and with --hold keeps the
// connections open (closing them fails the job) until SIGINT/SIGTERM, or with --exit-when-complete
// until every result arrived. --verify-results receives the results on a UDP socket bound to
// --src-ip:--udp-port (when that address belongs to this host's kernel) and checks every element.
//
// Offline mode: --job-id, --qkey, --appliance-mac, --appliance-ip and --core-qpns give the job;
// nothing is contacted.
//
//   sumcast-pcapgen -o FILE.pcap --ranks N [--dtype fp32|fp16|bf16|int32|fp64] [--payload BYTES]
//       [--slots S] [--rounds R] [--files F] [--pps RATE]
//       (--iface IF | --src-mac MAC) --src-ip IP [--src-qpn-base Q] [--udp-port P]
//       registered: --appliance HOST[:PORT] --token-file F [--job NAME] [--timeout-ms T]
//                   [--hold] [--verify-results] [--exit-when-complete] [--info FILE]
//       offline:    --job-id ID --qkey Q --appliance-mac MAC --appliance-ip IP --core-qpns Q0[,Q1...]
//
// Exit status: 0 success (and, with --verify-results, every result received was exact; with
// --exit-when-complete, all arrived), 1 failure, 2 usage error.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sumcast/cli.h"
#include "sumcast/ipv4.h"
#include "sumcast/mac.h"
#include "sumcast/pktgen/stream.h"
#include "sumcast/shim/address.h"
#include "sumcast/shim/control_client.h"
#include "sumcast/token_file.h"
#include "sumcast/wire/packet.h"

namespace {

using sumcast::Result;
using sumcast::Status;
using sumcast::pktgen::StreamSpec;

constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

struct Args {
  std::string output;
  uint32_t ranks = 0;
  sumcast::wire::Dtype dtype = sumcast::wire::Dtype::kFp32;
  uint32_t payload = 1024;
  uint32_t slots = 64;
  uint32_t rounds = 16;
  uint32_t files = 1;
  double pps = 0;
  std::string iface;
  std::string src_mac;
  std::string src_ip;
  uint32_t src_qpn_base = 0x2000;
  uint16_t udp_port = sumcast::wire::kRoceUdpPort;
  // registered
  std::string appliance;
  std::string token_file;
  std::string job = "sumcast-stress";
  uint32_t timeout_ms = 30000;
  bool hold = false;
  bool verify = false;
  bool exit_when_complete = false;
  std::string info;
  // offline
  bool offline = false;
  uint32_t job_id = 0;
  uint32_t qkey = 0;
  std::string appliance_mac;
  std::string appliance_ip;
  std::vector<uint32_t> core_qpns;
};

int usage(const std::string& why) {
  std::fprintf(stderr, "sumcast-pcapgen: %s\nrun sumcast-pcapgen --help for the options (docs/stress-testing.md)\n",
               why.c_str());
  return kExitUsage;
}

// A MAC given on the command line (sumcast/mac.h's form) into a 6-byte array.
bool parse_mac_into(const std::string& text, uint8_t mac[6]) {
  const std::optional<sumcast::MacAddress> m = sumcast::parse_mac(text);
  if (!m) return false;
  std::copy(m->begin(), m->end(), mac);
  return true;
}

// Returns -1 to go on, else the exit status.
int parse_args(int argc, char** argv, Args* a) {
  CLI::App app{
      "pcap files of a stress job's contribution streams, for dpdk-pktgen or any pcap replayer "
      "(docs/stress-testing.md). Registered mode: --appliance and --token-file; offline mode: --job-id, "
      "--qkey, --appliance-mac, --appliance-ip and --core-qpns.",
      "sumcast-pcapgen"};
  sumcast::cli::setup(app);
  app.add_option("-o,--output", a->output, "the pcap to write (FILE.pcap; with --files F, FILE-<i>.pcap)")
      ->type_name("FILE");
  app.add_option("--ranks", a->ranks, "ranks of the stress job")->check(CLI::Range(1, 65535));
  sumcast::cli::add_named_option(app, "--dtype", &a->dtype, sumcast::wire::kDtypeCount, sumcast::wire::dtype_name,
                                 "element type (default fp32)");
  app.add_option("--payload", a->payload, "payload bytes per packet")
      ->check(CLI::Range(0u, static_cast<unsigned>(sumcast::wire::kMaxPayloadBytes)));
  app.add_option("--slots", a->slots, "window slots")->check(CLI::Range(0, 65535));
  app.add_option("--rounds", a->rounds, "rounds per slot")->check(CLI::Range(0u, 1u << 30));
  app.add_option("--files", a->files, "pcap files (one stream per file)")->check(CLI::Range(0, 1024));
  app.add_option("--pps", a->pps, "packet rate for the pcap's timestamps (0: back to back)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--iface", a->iface, "the sender's interface (its MAC)");
  app.add_option("--src-mac", a->src_mac, "the sender's MAC");
  app.add_option("--src-ip", a->src_ip, "the sender's IPv4 (results go there)");
  app.add_option("--src-qpn-base", a->src_qpn_base, "QPN of rank 0 (rank r: + r)")->check(CLI::Range(0, 0xFFFFFF));
  app.add_option("--udp-port", a->udp_port, "the sender's UDP port");
  app.add_option("--appliance", a->appliance, "registered mode: the appliance's control endpoint")
      ->type_name("HOST[:PORT]");
  app.add_option("--token-file", a->token_file, "registered mode: the appliance's shared secret");
  app.add_option("--job", a->job, "registered mode: the job's name");
  app.add_option("--timeout-ms", a->timeout_ms, "registered mode: control timeout")->check(CLI::Range(0, 3600000));
  app.add_option("--info", a->info, "registered mode: write the grant to this file");
  app.add_flag("--hold", a->hold, "keep the job registered until SIGINT/SIGTERM");
  app.add_flag("--verify-results", a->verify, "receive the results and check every element (needs --hold)");
  app.add_flag("--exit-when-complete", a->exit_when_complete,
               "exit once every result arrived (implies --hold; needs --verify-results)");
  auto* job_id = app.add_option("--job-id", a->job_id, "offline mode: the job id");
  app.add_option("--qkey", a->qkey, "offline mode: the job's Q_Key");
  app.add_option("--appliance-mac", a->appliance_mac, "offline mode: the appliance's MAC");
  app.add_option("--appliance-ip", a->appliance_ip, "offline mode: the appliance's IPv4");
  app.add_option("--core-qpns", a->core_qpns, "offline mode: the appliance's per-core QPNs")
      ->delimiter(',')
      ->check(CLI::Range(0, 0xFFFFFF))
      ->type_name("Q0[,Q1...]");
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
  a->offline = job_id->count() > 0;
  if (a->exit_when_complete) a->hold = true;
  if (a->output.empty()) return usage("no output file (-o FILE.pcap)");
  if (a->ranks == 0) return usage("--ranks N is required (N >= 1)");
  if (a->src_ip.empty()) return usage("--src-ip is required (the address the results go to)");
  if (a->iface.empty() == a->src_mac.empty()) return usage("give exactly one of --iface and --src-mac");
  if (a->offline == !a->appliance.empty()) {
    return usage("give either --appliance (registered mode) or --job-id with the job's parameters (offline mode)");
  }
  if (a->offline && (a->appliance_mac.empty() || a->appliance_ip.empty() || a->core_qpns.empty())) {
    return usage("offline mode needs --job-id, --qkey, --appliance-mac, --appliance-ip and --core-qpns");
  }
  if (!a->offline && a->token_file.empty()) return usage("registered mode needs --token-file");
  if (a->verify && !a->hold) return usage("--verify-results needs --hold (results arrive while it holds the job)");
  if (a->exit_when_complete && !a->verify) return usage("--exit-when-complete needs --verify-results");
  return -1;
}

struct Registration {
  std::vector<std::unique_ptr<sumcast::shim::ControlClient>> clients;
  sumcast::shim::JobGrant grant;
};

// One connection per rank; every rank registers from its own thread (register_rank blocks until
// all ranks have registered).
Result<Registration> register_job(const Args& a, const std::vector<sumcast::engine::Member>& ranks) {
  std::string host = a.appliance;
  uint16_t port = 4790;
  if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    port = static_cast<uint16_t>(std::strtoul(host.c_str() + colon + 1, nullptr, 10));
    host.resize(colon);
  }
  Result<std::string> read = sumcast::read_token_file(a.token_file);
  if (!read.ok()) return Status(read.status().code(), "--token-file " + read.status().message());
  const std::string token = std::move(read.value());

  const size_t n = ranks.size();
  std::vector<std::unique_ptr<sumcast::shim::ControlClient>> clients(n);
  std::vector<Status> errors(n);
  std::vector<sumcast::shim::JobGrant> grants(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto c = sumcast::shim::ControlClient::connect(host, port, token, a.timeout_ms);
      if (!c.ok()) {
        errors[r] = c.status();
        return;
      }
      sumcast::shim::RegisterRequest req;
      req.job_name = a.job;
      req.world_size = static_cast<uint16_t>(n);
      req.rank = static_cast<uint16_t>(r);
      req.dtype = a.dtype;
      req.op = sumcast::wire::ReduceOp::kSum;
      req.max_payload_bytes = static_cast<uint16_t>(a.payload);
      req.slots = static_cast<uint16_t>(a.slots);
      std::memcpy(req.endpoint.mac, ranks[r].mac, 6);
      req.endpoint.ip = ranks[r].ip;
      req.endpoint.udp_port = ranks[r].udp_port;
      req.endpoint.qpn = ranks[r].qpn;
      auto g = (*c)->register_rank(req, a.timeout_ms);
      if (!g.ok()) {
        errors[r] = g.status();
        return;
      }
      grants[r] = g.value();
      clients[r] = std::move(c.value());
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < n; ++r) {
    if (!errors[r].ok()) return Status(errors[r].code(), "rank " + std::to_string(r) + ": " + errors[r].message());
  }
  for (size_t r = 1; r < n; ++r) {
    if (grants[r].job_id != grants[0].job_id || grants[r].qkey != grants[0].qkey) {
      return Status::internal("ranks got grants of different jobs");
    }
  }
  return Registration{std::move(clients), grants[0]};
}

struct ResultStats {
  uint64_t received = 0;
  uint64_t exact = 0;
  uint64_t wrong = 0;
  uint64_t other = 0;  // not a result of this job (aborts, malformed)
};

// Receives results on `fd` until a stop signal, an abort on a control connection, or (when
// `until_complete`) `expected` results. Returns false when the job was aborted.
bool hold(const StreamSpec& spec, Registration& reg, int fd, bool until_complete, uint64_t expected, ResultStats* rs) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  const int sfd = signalfd(-1, &set, SFD_CLOEXEC);
  std::vector<pollfd> fds;
  fds.push_back({sfd, POLLIN, 0});
  if (fd >= 0) fds.push_back({fd, POLLIN, 0});
  const size_t first_control = fds.size();
  for (auto& c : reg.clients) fds.push_back({c->fd(), POLLIN, 0});
  std::vector<uint8_t> buf(65536);
  for (;;) {
    if (until_complete && rs->received >= expected) return true;
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return true;
    }
    if ((fds[0].revents & POLLIN) != 0) return true;
    for (size_t i = first_control; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const Status st = reg.clients[i - first_control]->poll();
      if (!st.ok()) {
        std::fprintf(stderr, "sumcast-pcapgen: rank %zu: %s\n", i - first_control, st.to_string().c_str());
        return false;
      }
    }
    if (fd >= 0 && (fds[1].revents & POLLIN) != 0) {
      for (;;) {
        const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n <= 0) break;
        sumcast::wire::ParsedPacket p;
        const auto e = sumcast::wire::parse_roce(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)), &p);
        if (e != sumcast::wire::ParseError::kOk || p.hdr.type != sumcast::wire::MsgType::kResult ||
            p.hdr.job_id != spec.job_id) {
          ++rs->other;
          continue;
        }
        ++rs->received;
        if (sumcast::pktgen::result_is_exact(spec, p.hdr, std::span<const uint8_t>(p.payload, p.payload_len))) {
          ++rs->exact;
        } else {
          ++rs->wrong;
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (const int rc = parse_args(argc, argv, &a); rc >= 0) return rc;

  // Signals are taken by a signalfd while holding; block them from the start (threads inherit).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  uint8_t src_mac[6];
  if (!a.iface.empty() ? !sumcast::shim::interface_mac(a.iface, src_mac) : !parse_mac_into(a.src_mac, src_mac)) {
    return usage(!a.iface.empty() ? "cannot read the MAC of --iface " + a.iface : "--src-mac: bad MAC " + a.src_mac);
  }
  const std::optional<uint32_t> parsed_src_ip = sumcast::parse_ipv4(a.src_ip);
  if (!parsed_src_ip) return usage("--src-ip: bad IPv4 address " + a.src_ip);
  const uint32_t src_ip = *parsed_src_ip;
  std::vector<sumcast::engine::Member> ranks(a.ranks);
  for (uint32_t r = 0; r < a.ranks; ++r) {
    std::memcpy(ranks[r].mac, src_mac, 6);
    ranks[r].ip = src_ip;
    ranks[r].udp_port = a.udp_port;
    ranks[r].qpn = (a.src_qpn_base + r) & 0xFFFFFF;
  }

  // The result socket exists before the job does, so no result can arrive unseen.
  int result_fd = -1;
  if (a.verify) {
    result_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const int big = 16 << 20;
    if (setsockopt(result_fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) != 0) {
      setsockopt(result_fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(src_ip);
    sa.sin_port = htons(a.udp_port);
    if (bind(result_fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      std::fprintf(stderr, "sumcast-pcapgen: --verify-results: bind %s:%u: %s\n", a.src_ip.c_str(), a.udp_port,
                   std::strerror(errno));
      return kExitFail;
    }
  }

  StreamSpec spec;
  spec.dtype = a.dtype;
  spec.rounds = a.rounds;
  spec.files = a.files;
  spec.ranks = ranks;
  Registration reg;
  if (a.offline) {
    spec.job_id = a.job_id;
    spec.qkey = a.qkey;
    spec.slots = static_cast<uint16_t>(a.slots);
    spec.payload_bytes = static_cast<uint16_t>(a.payload);
    if (!parse_mac_into(a.appliance_mac, spec.appliance_mac)) return usage("--appliance-mac: bad MAC");
    const std::optional<uint32_t> appliance_ip = sumcast::parse_ipv4(a.appliance_ip);
    if (!appliance_ip) return usage("--appliance-ip: bad IPv4 address");
    spec.appliance_ip = *appliance_ip;
    spec.core_qpns = a.core_qpns;
  } else {
    Result<Registration> r = register_job(a, ranks);
    if (!r.ok()) {
      std::fprintf(stderr, "sumcast-pcapgen: registering job '%s' with %s: %s\n", a.job.c_str(), a.appliance.c_str(),
                   r.status().to_string().c_str());
      return kExitFail;
    }
    reg = std::move(r.value());
    const sumcast::shim::JobGrant& g = reg.grant;
    spec.job_id = g.job_id;
    spec.qkey = g.qkey;
    spec.slots = static_cast<uint16_t>(std::min<uint32_t>(a.slots, g.slot_count));
    spec.payload_bytes = static_cast<uint16_t>(std::min<uint32_t>(a.payload, g.payload_bytes));
    std::memcpy(spec.appliance_mac, g.appliance.mac, 6);
    spec.appliance_ip = g.appliance.ip;
    spec.core_qpns = g.core_qpns;
    if (g.multicast && a.verify) {
      std::fprintf(stderr, "sumcast-pcapgen: the appliance multicasts results; --verify-results sees only unicast\n");
    }
  }
  if (Status st = sumcast::pktgen::validate(spec); !st.ok()) {
    std::fprintf(stderr, "sumcast-pcapgen: %s\n", st.message().c_str());
    return kExitFail;
  }
  const std::vector<std::string> paths = sumcast::pktgen::pcap_paths(a.output, spec.files);
  Result<uint64_t> frames = sumcast::pktgen::write_pcaps(spec, paths, a.pps);
  if (!frames.ok()) {
    std::fprintf(stderr, "sumcast-pcapgen: %s\n", frames.status().message().c_str());
    return kExitFail;
  }
  std::string qpns;
  for (uint32_t q : spec.core_qpns) qpns += (qpns.empty() ? "" : ",") + std::to_string(q);
  std::string files;
  for (const std::string& p : paths) files += " " + p;
  std::printf("sumcast-pcapgen: ready: job %" PRIu32 " qkey 0x%08" PRIx32 " %s ranks %zu slots %u rounds %" PRIu32
              " payload %u frames %" PRIu64 " results %" PRIu64 " appliance %s %s qpns %s files%s\n",
              spec.job_id, spec.qkey, sumcast::wire::dtype_name(spec.dtype), spec.ranks.size(), spec.slots, spec.rounds,
              spec.payload_bytes, frames.value(), frames.value(), sumcast::format_mac(spec.appliance_mac).c_str(),
              sumcast::format_ipv4(spec.appliance_ip).c_str(), qpns.c_str(), files.c_str());
  std::fflush(stdout);
  if (!a.info.empty()) {
    std::ofstream info(a.info);
    info << "job_id=" << spec.job_id << "\nqkey=" << spec.qkey << "\nslots=" << spec.slots << "\nrounds=" << spec.rounds
         << "\nranks=" << spec.ranks.size() << "\nframes=" << frames.value()
         << "\nslot_rounds=" << uint64_t{spec.slots} * spec.rounds << "\nfiles=" << spec.files << "\n";
    for (uint32_t f = 0; f < spec.files; ++f)
      info << "frames_" << f << "=" << sumcast::pktgen::stream_frames(spec, f) << "\n";
  }
  if (!a.hold) return 0;

  // Results: one per rank per slot round (per-member replication).
  ResultStats rs;
  const uint64_t expected = frames.value();
  const bool alive = hold(spec, reg, result_fd, a.exit_when_complete, expected, &rs);
  for (auto& c : reg.clients) {
    if (c != nullptr && alive) (void)c->leave();
  }
  if (a.verify) {
    std::printf("sumcast-pcapgen: results: %" PRIu64 " of %" PRIu64 " received, %" PRIu64 " exact, %" PRIu64
                " wrong, %" PRIu64 " other\n",
                rs.received, expected, rs.exact, rs.wrong, rs.other);
  }
  std::fflush(stdout);
  if (!alive) return kExitFail;
  if (a.verify && rs.wrong != 0) return kExitFail;
  if (a.exit_when_complete && rs.received < expected) return kExitFail;
  return 0;
}
