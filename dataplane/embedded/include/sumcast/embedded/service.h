// An embedded summation service: the appliance's engine (engine::Engine) on a kernel UDP socket
// plus its control server (control::Server), in-process, without DPDK. For the worker library's
// tests on loopback, and for worker hosts that sum part of a job themselves (docs/scale-out.md).
//
// Data path. Each datagram received on the UDP socket (recvmmsg; with udp_trains, coalesced buffers
// split into their datagrams) is wrapped into the Ethernet / IPv4 / UDP frame the sender's NIC
// would have produced (source address and port from the datagram, destination ours, DF and the IP
// ID the sender's ICRC was stamped for: 0 as Linux sends from unconnected sockets, k for datagram k
// of a worker's UDP_SEGMENT train, found here from the one CRC of the ICRC check, docs/protocol.md
// §2.2), and fed to Engine::process_burst, marked verified (the engine does not check it again). A
// datagram whose ICRC holds for no IP ID 0..63 is dropped here (rx_bad_icrc), on any data port. The
// engine's replies go through a TxSink that strips Ethernet/IPv4/UDP and sends the UDP payload to
// the frame's destination with sendmmsg; where the engine wrote headers the kernel will not
// reproduce (another source port, a non-zero IP ID), the ICRC is recomputed for what the kernel
// sends.
//
// Threads. One poll-loop thread runs the engine; the control server runs its own thread and
// reaches the engine through the JobSink, under a mutex, so the engine only ever runs on one
// thread at a time. This is the embedded, low-rate path (one core), not the appliance's.
//
// Thread safety: every public method may be called from any thread; start/stop from one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sumcast/control/server.h"
#include "sumcast/engine/engine.h"
#include "sumcast/status.h"
#include "sumcast/wire/format.h"

namespace sumcast::embedded {

struct ServiceOptions {
  std::string bind_ip = "127.0.0.1";  // data and control address (a specific IPv4)
  // Data UDP port. Workers learn the data endpoint from the control server, which announces port
  // 4791; another port only works for workers told so by other means. 0: ephemeral.
  uint16_t data_port = wire::kRoceUdpPort;
  uint16_t control_port = 0;             // control TCP port; 0: ephemeral (see control_port())
  std::string token;                     // the shared secret workers authenticate with
  uint32_t job_timeout_ms = 10000;       // no progress this long fails a job
  uint32_t register_timeout_ms = 60000;  // all ranks must register within
  uint32_t max_jobs = 16;
  uint32_t max_ranks = 64;
  uint32_t slots_per_job = 128;
  uint32_t max_payload_bytes = 4096;  // loopback has a 64 KiB MTU
  bool verify_icrc = true;
  uint32_t batch = 64;                 // datagrams per recvmmsg/sendmmsg, 1..1024
  int socket_buffer_bytes = 16 << 20;  // SO_RCVBUF/SO_SNDBUF (forced when privileged)
  // Results by multicast for the jobs that ask (agg.conf dataplane.multicast): sent to the job's
  // group (multicast_group + i) out of bind_ip's interface. Off by default.
  bool multicast = false;
  std::string multicast_group = "239.255.77.0";
  // Loss notices for the jobs that ask (agg.conf dataplane.loss_notices, docs/protocol.md §7).
  bool loss_notices = true;
  // UDP trains (docs/deployment.md, "UDP trains"): UDP_GRO on the data socket, so a worker's
  // UDP_SEGMENT train (--udp-gso on) arrives as one buffer, datagram k checked for IP ID k first,
  // and results to one destination (a member or the job's group) sent as UDP_SEGMENT trains,
  // datagram k stamped for the IP ID k the kernel gives it. It pays where the path delivers
  // trains whole or coalesced (one host's veths and bridges; NICs with GRO); a train cut on the
  // way arrives datagram by datagram, each taken for its IP ID (rx_cut_train, at either end).
  // Off by default. Start fails without UDP_GRO (Linux < 5.0).
  bool udp_trains = false;
};

// Written by the loop thread (and the control thread under the engine mutex); read relaxed.
struct ServiceCounters {
  uint64_t rx_datagrams = 0;
  uint64_t rx_truncated = 0;  // larger than a frame buffer
  uint64_t rx_bad_icrc = 0;   // its ICRC held for no IP ID 0..63 (checked here, on any data port)
  // Datagrams whose ICRC held for a place k > 0 in a train other than where they arrived: members
  // of a worker's UDP_SEGMENT train that a hop cut (docs/protocol.md §2.2), taken all the same.
  uint64_t rx_cut_train = 0;
  uint64_t tx_datagrams = 0;
  uint64_t tx_dropped = 0;              // socket buffer full after a bounded wait, or no buffer
  uint64_t tx_restamped = 0;            // replies whose ICRC was recomputed for the kernel's headers
  uint64_t rx_coalesced = 0;            // udp_trains: buffers holding several datagrams ...
  uint64_t rx_coalesced_datagrams = 0;  // ... and the datagrams in them (also in rx_datagrams)
  uint64_t tx_trains = 0;               // udp_trains: UDP_SEGMENT sends of two or more ...
  uint64_t tx_train_datagrams = 0;      // ... datagrams (also in tx_datagrams)
};

class Service {
 public:
  // Binds the data socket and the control server and starts both threads.
  static Result<std::unique_ptr<Service>> start(const ServiceOptions& options);
  ~Service();  // stop()s
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Fails every job (members get an abort on the control connection and an abort packet), then
  // stops both threads. Idempotent.
  void stop();

  uint32_t data_ip() const;  // host order
  uint16_t data_port() const;
  uint16_t control_port() const;
  std::string control_address() const;  // "ip:port", what workers configure

  const engine::CoreCounters& engine_counters() const;
  ServiceCounters counters() const;
  std::vector<control::JobInfo> jobs() const;
  control::ServerCounters server_counters() const;
  // Jobs installed in the engine now.
  size_t installed_jobs() const;
  // Blocks until no job is installed in the engine, or `timeout_ms` passed; true when none is.
  bool wait_until_no_jobs(uint32_t timeout_ms) const;

 private:
  struct Impl;
  explicit Service(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sumcast::embedded
