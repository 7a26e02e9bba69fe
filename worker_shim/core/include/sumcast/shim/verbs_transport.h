// The verbs transport: an rdma-core Unreliable Datagram QP on a RoCEv2 NIC. The NIC builds and
// checks BTH, DETH and the ICRC; the message is Sumcast header | payload (docs/protocol.md §3).
// Results are received on the same QP; the NIC drops frames whose Q_Key is not the QP's.
//
// Built only where libibverbs is found (otherwise open() returns Unavailable). The payload per
// message is what one UD message carries on the port: its active MTU less the 32-byte Sumcast
// header (a payload asked for explicitly that does not fit is refused, naming both numbers). The
// GID is the RoCEv2 GID of bind_ip (on `interface` when given: a VLAN interface's GID carries the
// VLAN); describe() says which GID, MTU and payload were chosen. A completion error, a failed
// post or poll makes health() report the error with the QP's state, and the communicator fails
// every pending call at once. Limits: the NIC picks the UDP source port of what the QP sends,
// which the appliance's source check must accept. One QP
// carries one Q_Key, so all peers of one transport must share it (one appliance per
// communicator, in practice). Every ibverbs call goes through VerbsOps (verbs_ops.h): tested
// against a scripted fake, verified on no RDMA NIC.
//
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sumcast/shim/transport.h"
#include "sumcast/shim/verbs_format.h"

namespace sumcast::shim {

class VerbsOps;

struct VerbsTransportOptions {
  std::string device;             // RDMA device name ("mlx5_0"); "": the first with bind_ip in its GID table
  uint8_t port = 1;               // device port
  uint32_t bind_ip = 0;           // our IPv4 (host order): selects the RoCEv2 GID; required
  std::string interface;          // network interface whose GID to use ("eth0.100"); "": any with bind_ip
  uint32_t send_depth = 512;      // send queue entries (and send buffers)
  uint32_t recv_depth = 1024;     // posted receive buffers
  uint32_t max_payload = 0;       // largest payload per message wanted; 0: what the port's MTU allows
  bool payload_explicit = false;  // max_payload was set by the user: refuse it if it does not fit
  uint8_t traffic_class = 0;      // the address handles' GRH traffic class (IPv4 TOS: DSCP << 2 | ECN)
  VerbsOps* ops = nullptr;        // test seam: the ibverbs calls (nullptr: rdma-core)
};

// True when this build has the verbs transport (libibverbs was found).
bool verbs_transport_built();

class VerbsTransport final : public Transport {
 public:
  static Result<std::unique_ptr<VerbsTransport>> open(const VerbsTransportOptions& options);
  ~VerbsTransport() override;
  VerbsTransport(const VerbsTransport&) = delete;
  VerbsTransport& operator=(const VerbsTransport&) = delete;

  Endpoint local_endpoint() const override;
  // A peer with a group attaches the QP to the group's GID (::ffff:group, ibv_attach_mcast);
  // leave_groups() and the destructor detach it. Verified on no NIC (none here): the seam's
  // error paths are unit-tested with fakes (verbs_format.h, GroupMembership).
  Result<uint32_t> add_peer(const PeerSpec& spec) override;
  void leave_groups() override;
  size_t packet_capacity(size_t payload_len) const override;
  size_t build(uint8_t* buf, uint32_t peer, uint32_t dest_qp, uint32_t psn, const wire::SumcastHeader& hdr,
               const uint8_t* payload) override;
  size_t payload_offset() const override { return verbs::kTagLen + wire::kSumcastHeaderLen; }
  Status send(std::span<const OutPacket> packets) override;
  size_t receive(std::span<Received> out) override;
  int wait_fd() const override { return -1; }  // completions are polled
  const TransportCounters& counters() const override;
  std::string describe() const override;
  uint32_t max_payload() const override;
  Status health() const override;

  struct Impl;

 private:
  explicit VerbsTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sumcast::shim
