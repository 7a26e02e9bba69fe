#include "sumcast/shim/transport_factory.h"

#include "sumcast/shim/udp_transport.h"
#include "sumcast/shim/verbs_transport.h"

namespace sumcast::shim {
namespace {

// Result<unique_ptr<Concrete>> -> Result<unique_ptr<Transport>>.
template <typename T>
Result<std::unique_ptr<Transport>> as_transport(Result<std::unique_ptr<T>> opened) {
  if (!opened.ok()) return opened.status();
  return std::unique_ptr<Transport>(std::move(opened).value());
}

}  // namespace

Result<std::unique_ptr<Transport>> open_transport(const TransportConfig& c) {
  switch (c.kind) {
    case TransportKind::kUdp: {
      UdpTransportOptions o;
      o.bind_ip = c.bind_ip;
      o.port = c.udp_port;
      o.verify_icrc = c.verify_icrc;
      o.tos = c.tos;
      o.repair_tos = c.repair_tos;
      o.recv_ecn = c.recv_ecn;
      o.busy_poll_us = c.busy_poll_us;
      o.gro = c.gro;
      o.gso = c.gso;
      return as_transport(UdpTransport::open(o));
    }
    case TransportKind::kVerbs: {
      if (c.repair_tos >= 0 && c.repair_tos != c.tos) {
        // One address handle per peer carries one traffic class; a second per peer was not built.
        return Status::invalid_argument(
            "a repair DSCP of its own is a kernel-UDP transport feature; the verbs "
            "transport sends resends with the contributions' traffic class");
      }
      VerbsTransportOptions o;
      o.device = c.rdma_device;
      o.bind_ip = c.bind_ip;
      o.interface = c.rdma_interface;
      o.max_payload = c.max_payload;
      o.payload_explicit = c.payload_explicit;
      o.ops = c.verbs_ops;
      o.traffic_class = c.tos;
      return as_transport(VerbsTransport::open(o));
    }
  }
  return Status::invalid_argument("unknown transport kind " + std::to_string(static_cast<int>(c.kind)) +
                                  " (udp or verbs)");
}

}  // namespace sumcast::shim
