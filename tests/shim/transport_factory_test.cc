// open_transport: each kind opens its transport with the configuration's options (the UDP
// socket's address, port, TOS and IP_RECVTOS as the kernel reports them), and a kind that is
// neither is refused by name. The verbs kind against the scripted fake is in verbs_seam_test.cc.
#include "sumcast/shim/transport_factory.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

namespace sumcast::shim {
namespace {

constexpr uint32_t kLoopback = 0x7F000001;

int socket_option(int fd, int name) {
  int v = -1;
  socklen_t len = sizeof(v);
  if (getsockopt(fd, IPPROTO_IP, name, &v, &len) != 0) return -1;
  return v;
}

TEST(TransportFactory, UdpKindOpensAUdpSocketWithTheConfiguredOptions) {
  TransportConfig c;
  c.kind = TransportKind::kUdp;
  c.bind_ip = kLoopback;
  c.tos = 26 << 2 | 0x2;  // DSCP 26, ECT(0)
  c.recv_ecn = true;
  auto opened = open_transport(c);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  std::unique_ptr<Transport> t = std::move(opened).value();
  const Endpoint e = t->local_endpoint();
  EXPECT_EQ(e.ip, kLoopback);
  ASSERT_NE(e.udp_port, 0);
  EXPECT_EQ(t->describe(), "udp 127.0.0.1:" + std::to_string(e.udp_port));
  ASSERT_GE(t->wait_fd(), 0);  // no group joined: the socket itself
  EXPECT_EQ(socket_option(t->wait_fd(), IP_TOS), 26 << 2 | 0x2);
  EXPECT_EQ(socket_option(t->wait_fd(), IP_RECVTOS), 1);

  // The port is passed on: a second transport asking for the first one's port cannot bind it.
  TransportConfig same = c;
  same.udp_port = e.udp_port;
  same.recv_ecn = false;
  auto clash = open_transport(same);
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find(std::to_string(e.udp_port)), std::string::npos) << clash.status().message();
  t.reset();  // frees the port
  auto reopened = open_transport(same);
  ASSERT_TRUE(reopened.ok()) << reopened.status().to_string();
  EXPECT_EQ((*reopened)->local_endpoint().udp_port, e.udp_port);
  EXPECT_EQ(socket_option((*reopened)->wait_fd(), IP_RECVTOS), 0);
}

TEST(TransportFactory, UdpKindRefusesTheWildcardAddress) {
  TransportConfig c;  // bind_ip 0
  auto t = open_transport(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
}

// A repair TOS of its own is a kernel-UDP feature: the verbs kind refuses one that differs from
// the contributions' TOS before it looks for a device, and takes one equal to it.
TEST(TransportFactory, VerbsKindRefusesARepairTosOfItsOwn) {
  TransportConfig c;
  c.kind = TransportKind::kVerbs;
  c.bind_ip = kLoopback;
  c.tos = 26 << 2;
  c.repair_tos = 34 << 2;
  auto t = open_transport(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("repair DSCP"), std::string::npos) << t.status().message();
  c.repair_tos = c.tos;
  auto same = open_transport(c);  // no RoCE device here (or no libibverbs): refused for that instead
  if (!same.ok()) {
    EXPECT_EQ(same.status().message().find("repair DSCP"), std::string::npos) << same.status().message();
  }
}

TEST(TransportFactory, AnUnknownKindIsRefusedByNumber) {
  TransportConfig c;
  c.kind = static_cast<TransportKind>(7);
  c.bind_ip = kLoopback;
  auto t = open_transport(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("unknown transport kind 7"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace sumcast::shim
