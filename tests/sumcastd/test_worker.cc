// sumcast_test_worker: a deliberately small worker for sumcastd's integration tests. It registers
// one rank (shim::ControlClient), sends integer-valued contributions over a kernel UDP socket
// (docs/protocol.md §2.2: bound, unconnected, DF), follows the slot rules of §7 (window of S
// slots, resend on timeout with back-off) and checks every result element against the exact sum
// it computes itself. Independent of the worker library on purpose: it tests the appliance.
//
//   sumcast_test_worker --control IP:PORT --token-file F --job NAME --world N --rank R
//       --ip A --iface IF [--elements E] [--collectives K] [--dtype fp32|int32]
//       [--timeout-ms T] [--udp-port P] [--qpn Q]
//
// Element i of collective c from rank r is (r + 1) * ((i + c) % 13 + 1); the sum over ranks is
// N(N+1)/2 * ((i + c) % 13 + 1), exact in fp32 and int32. Exit 0 when every result was exact,
// 1 on a wrong result or abort, 2 on usage errors, 3 on timeouts or I/O errors.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sumcast/cli.h"
#include "sumcast/icrc/icrc.h"
#include "sumcast/ipv4.h"
#include "sumcast/shim/address.h"
#include "sumcast/shim/control_client.h"
#include "sumcast/token_file.h"
#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace {

using Clock = std::chrono::steady_clock;
using sumcast::wire::Dtype;

struct Args {
  std::string control_host;
  uint16_t control_port = 4790;
  std::string token_file;
  std::string job = "test";
  uint16_t world = 0;
  uint16_t rank = 0;
  std::string ip;
  std::string iface;
  uint64_t elements = 4096;
  uint32_t collectives = 4;
  Dtype dtype = Dtype::kFp32;
  uint32_t timeout_ms = 20000;
  uint16_t udp_port = sumcast::wire::kRoceUdpPort;
  uint32_t qpn = 0;  // 0: 0x1000 + rank
};

int usage(const std::string& why) {
  std::fprintf(stderr, "sumcast_test_worker: %s\nrun sumcast_test_worker --help for the options\n", why.c_str());
  return sumcast::cli::kExitUsage;
}

// Returns -1 to go on, else the exit status.
int parse_args(int argc, char** argv, Args* a) {
  CLI::App app{"A deliberately small worker for sumcastd's integration tests: one rank, exact results checked.",
               "sumcast_test_worker"};
  sumcast::cli::setup(app);
  app.add_option_function<std::string>(
         "--control",
         [a](const std::string& v) {
           const size_t colon = v.rfind(':');
           a->control_host = v.substr(0, colon);
           if (colon == std::string::npos) return;
           char* end = nullptr;
           const unsigned long port = std::strtoul(v.c_str() + colon + 1, &end, 10);
           if (end == v.c_str() + colon + 1 || *end != '\0' || port == 0 || port > 65535) {
             throw CLI::ValidationError("--control", "needs IP[:PORT] with a port 1..65535, not " + v);
           }
           a->control_port = static_cast<uint16_t>(port);
         },
         "the appliance's control endpoint (port default 4790)")
      ->type_name("IP[:PORT]")
      ->required();
  app.add_option("--token-file", a->token_file, "the appliance's shared secret")->required();
  app.add_option("--job", a->job, "the job's name");
  app.add_option("--world", a->world, "ranks in the job")->check(CLI::Range(1, 65535))->required();
  app.add_option("--rank", a->rank, "this rank (< --world)")->check(CLI::Range(0, 65534));
  app.add_option("--ip", a->ip, "this worker's IPv4 (the data socket binds to it)")->required();
  app.add_option("--iface", a->iface, "the interface that holds --ip")->required();
  app.add_option("--elements", a->elements, "elements per collective")->check(CLI::PositiveNumber);
  app.add_option("--collectives", a->collectives, "collectives to run")->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--dtype", [a](const std::string& v) { a->dtype = v == "int32" ? Dtype::kInt32 : Dtype::kFp32; },
         "element type (default fp32)")
      ->check(CLI::IsMember({"fp32", "int32"}));
  app.add_option("--timeout-ms", a->timeout_ms, "bound of the whole run");
  app.add_option("--udp-port", a->udp_port, "the data socket's UDP port");
  app.add_option("--qpn", a->qpn, "this rank's QPN (0: 0x1000 + rank)")->check(CLI::Range(0, 0xFFFFFF));
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (a->rank >= a->world) return usage("--rank must be below --world");
  return -1;
}

// The value rank r contributes for element i of collective c, and the sum over `world` ranks.
int64_t element(uint32_t r, uint64_t i, uint32_t c) { return int64_t{r + 1} * static_cast<int64_t>((i + c) % 13 + 1); }
int64_t expected_sum(uint32_t world, uint64_t i, uint32_t c) {
  return int64_t{world} * (world + 1) / 2 * static_cast<int64_t>((i + c) % 13 + 1);
}

void store_element(Dtype d, int64_t v, uint8_t* p) {
  if (d == Dtype::kFp32) {
    const auto f = static_cast<float>(v);
    std::memcpy(p, &f, 4);  // little-endian host (x86)
  } else {
    const auto i = static_cast<int32_t>(v);
    std::memcpy(p, &i, 4);
  }
}
int64_t load_element(Dtype d, const uint8_t* p) {
  if (d == Dtype::kFp32) {
    float f = 0;
    std::memcpy(&f, p, 4);
    return static_cast<int64_t>(f);
  }
  int32_t i = 0;
  std::memcpy(&i, p, 4);
  return i;
}

struct Chunk {
  uint64_t index;   // global chunk number j
  uint32_t coll;    // collective
  uint64_t offset;  // element offset within the collective
  uint16_t count;
};

struct SlotState {
  bool busy = false;
  Chunk chunk{};
  uint32_t round = 0;
  std::vector<uint8_t> frame;  // BTH..ICRC, resent identically
  Clock::time_point sent;
  std::chrono::microseconds rto{0};
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (const int rc = parse_args(argc, argv, &a); rc >= 0) return rc;
  const sumcast::Result<std::string> read = sumcast::read_token_file(a.token_file);
  if (!read.ok()) return usage("--token-file " + read.status().message());
  const std::string token = *read;
  const std::optional<uint32_t> parsed_ip = sumcast::parse_ipv4(a.ip);
  if (!parsed_ip) return usage("bad --ip");
  const uint32_t own_ip = *parsed_ip;
  const uint32_t qpn = a.qpn != 0 ? a.qpn : 0x1000u + a.rank;

  sumcast::shim::RegisterRequest req;
  req.job_name = a.job;
  req.world_size = a.world;
  req.rank = a.rank;
  req.dtype = a.dtype;
  req.op = sumcast::wire::ReduceOp::kSum;
  req.max_payload_bytes = 1024;
  req.endpoint.ip = own_ip;
  req.endpoint.udp_port = a.udp_port;
  req.endpoint.qpn = qpn;
  if (!sumcast::shim::interface_mac(a.iface, req.endpoint.mac)) return usage("cannot read the MAC of --iface");

  // Data socket first, so no result can arrive before it exists.
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) {
    std::perror("socket");
    return 3;
  }
  const int pmtu = IP_PMTUDISC_DO;
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
  const int rcvbuf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(own_ip);
  local.sin_port = htons(a.udp_port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    std::perror("bind");
    return 3;
  }

  const auto t0 = Clock::now();
  auto client = sumcast::shim::ControlClient::connect(a.control_host, a.control_port, token, 5000);
  if (!client.ok()) {
    std::fprintf(stderr, "rank %u: connect: %s\n", a.rank, client.status().to_string().c_str());
    return 3;
  }
  auto grant = (*client)->register_rank(req, a.timeout_ms);
  if (!grant.ok()) {
    std::fprintf(stderr, "rank %u: register: %s\n", a.rank, grant.status().to_string().c_str());
    return 3;
  }
  const sumcast::shim::JobGrant& g = grant.value();
  const size_t esize = sumcast::wire::dtype_size(a.dtype);
  const uint16_t per_chunk = static_cast<uint16_t>(g.payload_bytes / esize);
  const uint16_t slots = g.slot_count;
  if (per_chunk == 0 || slots == 0 || g.core_qpns.empty()) {
    std::fprintf(stderr, "rank %u: unusable grant (payload %u, slots %u)\n", a.rank, g.payload_bytes, slots);
    return 3;
  }
  std::printf("rank %u: job %u qkey 0x%x slots %u payload %u cores %zu\n", a.rank, g.job_id, g.qkey, slots,
              g.payload_bytes, g.core_qpns.size());
  std::fflush(stdout);

  // Chunks of every collective in order.
  std::vector<Chunk> chunks;
  for (uint32_t c = 0; c < a.collectives; ++c) {
    for (uint64_t off = 0; off < a.elements; off += per_chunk) {
      const auto n = static_cast<uint16_t>(std::min<uint64_t>(per_chunk, a.elements - off));
      chunks.push_back({chunks.size(), c, off, n});
    }
  }

  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_addr.s_addr = htonl(g.appliance.ip);
  dst.sin_port = htons(g.appliance.udp_port);
  sumcast::icrc::UdpFields out_fields;
  out_fields.src_ip = own_ip;
  out_fields.dst_ip = g.appliance.ip;
  out_fields.src_port = a.udp_port;
  out_fields.dst_port = g.appliance.udp_port;

  std::vector<SlotState> state(slots);
  uint64_t next = 0;
  uint64_t done = 0;
  uint64_t resent = 0;
  uint64_t stale = 0;
  uint32_t psn = 0;
  const auto initial_rto = std::chrono::microseconds(20000);
  const auto max_rto = std::chrono::microseconds(500000);
  const auto deadline = t0 + std::chrono::milliseconds(a.timeout_ms);
  std::vector<uint8_t> rx(9000);

  auto send_frame = [&](const std::vector<uint8_t>& f) {
    return sendto(fd, f.data(), f.size(), 0, reinterpret_cast<const sockaddr*>(&dst), sizeof(dst)) ==
           static_cast<ssize_t>(f.size());
  };

  while (done < chunks.size()) {
    const auto now = Clock::now();
    if (now >= deadline) {
      std::fprintf(stderr, "rank %u: timed out with %" PRIu64 "/%zu chunks done (%" PRIu64 " resent)\n", a.rank, done,
                   chunks.size(), resent);
      return 3;
    }
    // Fill the window: chunk j may go once slot j % S is free (its previous round's result came).
    while (next < chunks.size() && !state[next % slots].busy) {
      const Chunk& ch = chunks[next];
      SlotState& s = state[next % slots];
      const auto slot = static_cast<uint16_t>(next % slots);
      s.round = static_cast<uint32_t>(next / slots);
      s.chunk = ch;
      const size_t payload = size_t{ch.count} * esize;
      s.frame.assign(sumcast::wire::roce_len(payload), 0);
      sumcast::wire::Addressing ad;
      ad.dest_qp = g.core_qpns[slot % g.core_qpns.size()];
      ad.src_qp = qpn;
      ad.qkey = g.qkey;
      ad.psn = psn++;
      sumcast::wire::SumcastHeader h;
      h.type = sumcast::wire::MsgType::kContribution;
      h.dtype = a.dtype;
      h.op = sumcast::wire::ReduceOp::kSum;
      h.job_id = g.job_id;
      h.rank = a.rank;
      h.slot = slot;
      h.round = s.round;
      h.coll_seq = ch.coll;
      h.elem_count = ch.count;
      h.flags = static_cast<uint8_t>(s.round & 1);
      h.elem_offset = ch.offset;
      sumcast::wire::write_roce_headers(s.frame.data(), ad, h, payload);
      uint8_t* p = s.frame.data() + sumcast::wire::kRoceHeadersLen;
      for (uint16_t e = 0; e < ch.count; ++e)
        store_element(a.dtype, element(a.rank, ch.offset + e, ch.coll), p + e * esize);
      sumcast::icrc::stamp_udp(out_fields, std::span<uint8_t>(s.frame));
      if (!send_frame(s.frame)) {
        std::perror("sendto");
        return 3;
      }
      s.busy = true;
      s.sent = Clock::now();
      s.rto = initial_rto;
      ++next;
    }
    // Results.
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, 5) > 0) {
      for (;;) {
        sockaddr_in from{};
        socklen_t fl = sizeof(from);
        const ssize_t n = recvfrom(fd, rx.data(), rx.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &fl);
        if (n <= 0) break;
        const std::span<const uint8_t> roce(rx.data(), static_cast<size_t>(n));
        sumcast::wire::ParsedPacket pp;
        if (sumcast::wire::parse_roce(roce, &pp) != sumcast::wire::ParseError::kOk) {
          ++stale;
          continue;
        }
        sumcast::icrc::UdpFields in_fields;
        in_fields.src_ip = ntohl(from.sin_addr.s_addr);
        in_fields.dst_ip = own_ip;
        in_fields.src_port = ntohs(from.sin_port);
        in_fields.dst_port = a.udp_port;
        if (!sumcast::icrc::verify_udp(in_fields, roce)) {
          std::fprintf(stderr, "rank %u: result with a bad ICRC\n", a.rank);
          return 1;
        }
        if (pp.hdr.type == sumcast::wire::MsgType::kAbort) {
          std::fprintf(stderr, "rank %u: job aborted by the appliance (reason %u)\n", a.rank, pp.hdr.status);
          return 1;
        }
        if (pp.hdr.type != sumcast::wire::MsgType::kResult || pp.hdr.job_id != g.job_id || pp.hdr.slot >= slots) {
          ++stale;
          continue;
        }
        SlotState& s = state[pp.hdr.slot];
        if (!s.busy || pp.hdr.round != s.round) {
          ++stale;  // an answer to a spurious retransmission
          continue;
        }
        if (pp.hdr.coll_seq != s.chunk.coll || pp.hdr.elem_offset != s.chunk.offset ||
            pp.hdr.elem_count != s.chunk.count) {
          std::fprintf(stderr, "rank %u: result for slot %u round %u names another chunk\n", a.rank, pp.hdr.slot,
                       pp.hdr.round);
          return 1;
        }
        for (uint16_t e = 0; e < s.chunk.count; ++e) {
          const int64_t got = load_element(a.dtype, pp.payload + e * esize);
          const int64_t want = expected_sum(a.world, s.chunk.offset + e, s.chunk.coll);
          if (got != want) {
            std::fprintf(stderr, "rank %u: collective %u element %" PRIu64 ": got %" PRId64 ", want %" PRId64 "\n",
                         a.rank, s.chunk.coll, s.chunk.offset + e, got, want);
            return 1;
          }
        }
        s.busy = false;
        ++done;
      }
    }
    // Retransmissions (identical frames), with back-off.
    const auto t = Clock::now();
    for (SlotState& s : state) {
      if (!s.busy || t - s.sent < s.rto) continue;
      if (!send_frame(s.frame)) {
        std::perror("sendto");
        return 3;
      }
      ++resent;
      s.sent = t;
      s.rto = std::min(s.rto * 2, max_rto);
    }
    sumcast::Status st = (*client)->poll();
    if (!st.ok()) {
      std::fprintf(stderr, "rank %u: control connection: %s\n", a.rank, st.to_string().c_str());
      return 1;
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("rank %u: %u collective(s) x %" PRIu64 " elements exact; %zu chunks, %" PRIu64 " resent, %" PRIu64
              " ignored, %.3f s\n",
              a.rank, a.collectives, a.elements, chunks.size(), resent, stale, secs);
  std::fflush(stdout);
  if (sumcast::Status st = (*client)->leave(); !st.ok()) {
    std::fprintf(stderr, "rank %u: leave: %s\n", a.rank, st.to_string().c_str());
    return 3;
  }
  close(fd);
  return 0;
}
