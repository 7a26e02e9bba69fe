// The verbs transport in a build without libibverbs: open() says so.
#include "sumcast/shim/verbs_transport.h"

namespace sumcast::shim {

struct VerbsTransport::Impl {
  TransportCounters counters;
};

bool verbs_transport_built() { return false; }

Result<std::unique_ptr<VerbsTransport>> VerbsTransport::open(const VerbsTransportOptions&) {
  return Status::unavailable("verbs transport: this build has no libibverbs");
}
VerbsTransport::VerbsTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VerbsTransport::~VerbsTransport() = default;
Endpoint VerbsTransport::local_endpoint() const { return {}; }
Result<uint32_t> VerbsTransport::add_peer(const PeerSpec&) { return Status::unavailable("no verbs"); }
size_t VerbsTransport::packet_capacity(size_t) const { return 0; }
size_t VerbsTransport::build(uint8_t*, uint32_t, uint32_t, uint32_t, const wire::SumcastHeader&, const uint8_t*) {
  return 0;
}
Status VerbsTransport::send(std::span<const OutPacket>) { return Status::unavailable("no verbs"); }
size_t VerbsTransport::receive(std::span<Received>) { return 0; }
void VerbsTransport::leave_groups() {}
const TransportCounters& VerbsTransport::counters() const { return impl_->counters; }
std::string VerbsTransport::describe() const { return "verbs (not built)"; }
uint32_t VerbsTransport::max_payload() const { return 0; }
Status VerbsTransport::health() const { return Status::unavailable("no verbs"); }

}  // namespace sumcast::shim
