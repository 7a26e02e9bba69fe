// The worker's control client (sumcast/shim/control_client.h) against a scripted appliance: a
// loopback listener whose thread plays one conversation with raw protocol messages, so the
// client's edges (refusals, malformed replies, timeouts, abort vs EOF) are driven exactly.
#include "sumcast/shim/control_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control_test_util.h"

namespace sumcast::shim {
namespace {

using namespace std::chrono_literals;
using control::testing::Clock;
using control::testing::RawSocket;

constexpr char kToken[] = "client-test-token-0123";
constexpr auto kWait = 5000ms;

// A listener on 127.0.0.1 that accepts one connection and runs `script` on it in a thread.
class ScriptedAppliance {
 public:
  explicit ScriptedAppliance(std::function<void(RawSocket&)> script, bool accept = true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof sa), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    socklen_t len = sizeof sa;
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len), 0);
    port_ = ntohs(sa.sin_port);
    if (accept) {
      thread_ = std::thread([this, script = std::move(script)] {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 10000) != 1) return;
        RawSocket conn(RawSocket::Adopt{}, ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
        script(conn);
      });
    }
  }
  ~ScriptedAppliance() {
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

// The appliance's side of a successful authentication.
void accept_hello(RawSocket& s) {
  wire::HelloMsg h;
  ASSERT_TRUE(s.read_as(&h, kWait));
  EXPECT_EQ(h.token, kToken);
  ASSERT_TRUE(s.send_msg(wire::AuthOkMsg{}));
}

wire::GrantMsg sample_grant() {
  wire::GrantMsg g;
  g.job_id = 77;
  g.qkey = 0x1234567;
  g.slot_count = 64;
  g.payload_bytes = 512;
  g.mac = {0x02, 0x10, 0x20, 0x30, 0x40, 0x50};
  g.ip = 0xC0A80001;
  g.udp_port = 4791;
  g.multicast = true;
  g.multicast_ip = 0xEFFF4D07;
  g.loss_notices = true;
  g.core_qpns = {0x11, 0x22};
  return g;
}

RegisterRequest sample_request() {
  RegisterRequest r;
  r.job_name = "bert";
  r.world_size = 6;
  r.rank = 4;
  r.dtype = wire::Dtype::kFp16;
  r.op = wire::ReduceOp::kSum;
  r.max_payload_bytes = 2048;
  r.slots = 32;
  const uint8_t mac[6] = {0x02, 1, 2, 3, 4, 5};
  std::copy(mac, mac + 6, r.endpoint.mac);
  r.endpoint.ip = 0x0A000105;
  r.endpoint.udp_port = 12345;
  r.endpoint.qpn = 0x00ABCD;
  r.loss_notices = true;
  return r;
}

// Appliance script: authenticate, take the REGISTER, answer GRANT, then run `after`.
std::function<void(RawSocket&)> grant_then(std::function<void(RawSocket&)> after) {
  return [after = std::move(after)](RawSocket& s) {
    accept_hello(s);
    wire::RegisterMsg m;
    ASSERT_TRUE(s.read_as(&m, kWait));
    ASSERT_TRUE(s.send_msg(sample_grant()));
    after(s);
  };
}

std::unique_ptr<ControlClient> connect_to(const ScriptedAppliance& a) {
  auto r = ControlClient::connect("127.0.0.1", a.port(), kToken, 5000);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r.value()) : nullptr;
}

TEST(ControlClient, ConnectToClosedPortIsIoError) {
  uint16_t port = 0;
  {
    ScriptedAppliance gone([](RawSocket&) {}, /*accept=*/false);
    port = gone.port();
  }  // closed: nothing listens there now
  auto r = ControlClient::connect("127.0.0.1", port, kToken, 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError) << r.status().to_string();
}

TEST(ControlClient, SilentApplianceTimesOut) {
  ScriptedAppliance silent([](RawSocket&) {}, /*accept=*/false);  // TCP completes, nobody answers
  const auto t0 = Clock::now();
  auto r = ControlClient::connect("127.0.0.1", silent.port(), kToken, 300);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout) << r.status().to_string();
  EXPECT_GE(ms, 300);
  EXPECT_LT(ms, 2300);
}

TEST(ControlClient, AuthFailIsRefused) {
  ScriptedAppliance a([](RawSocket& s) {
    wire::HelloMsg h;
    ASSERT_TRUE(s.read_as(&h, kWait));
    ASSERT_TRUE(s.send_msg(wire::AuthFailMsg{}));
  });
  auto r = ControlClient::connect("127.0.0.1", a.port(), kToken, 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kRefused) << r.status().to_string();
}

TEST(ControlClient, MalformedReplyIsIoError) {
  ScriptedAppliance a([](RawSocket& s) {
    wire::HelloMsg h;
    ASSERT_TRUE(s.read_as(&h, kWait));
    ASSERT_TRUE(s.send_bytes(std::vector<uint8_t>(12, 0x42)));
  });
  auto r = ControlClient::connect("127.0.0.1", a.port(), kToken, 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find("bad_magic"), std::string::npos) << r.status().to_string();
}

TEST(ControlClient, EmptyTokenIsInvalidArgument) {
  auto r = ControlClient::connect("127.0.0.1", 1, "", 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(ControlClient, RegisterSendsEveryFieldAndReturnsTheGrant) {
  wire::RegisterMsg seen;
  ScriptedAppliance a([&seen](RawSocket& s) {
    accept_hello(s);
    ASSERT_TRUE(s.read_as(&seen, kWait));
    // The grant arrives in pieces: the client must reassemble it.
    std::vector<uint8_t> g;
    ASSERT_EQ(wire::encode_append(sample_grant(), &g), wire::ControlError::kOk);
    for (size_t i = 0; i < g.size(); i += 5) {
      ASSERT_TRUE(
          s.send_bytes(std::vector<uint8_t>(g.begin() + static_cast<std::ptrdiff_t>(i),
                                            g.begin() + static_cast<std::ptrdiff_t>(std::min(i + 5, g.size())))));
    }
  });
  auto c = connect_to(a);
  ASSERT_NE(c, nullptr);
  const RegisterRequest req = sample_request();
  auto r = c->register_rank(req, 5000);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  a.join();
  EXPECT_EQ(seen.name, req.job_name);
  EXPECT_EQ(seen.world_size, req.world_size);
  EXPECT_EQ(seen.rank, req.rank);
  EXPECT_EQ(seen.dtype, req.dtype);
  EXPECT_EQ(seen.op, req.op);
  EXPECT_EQ(seen.payload_bytes, req.max_payload_bytes);
  EXPECT_EQ(seen.slots, req.slots);
  EXPECT_TRUE(std::equal(req.endpoint.mac, req.endpoint.mac + 6, seen.mac.begin()));
  EXPECT_EQ(seen.ip, req.endpoint.ip);
  EXPECT_EQ(seen.udp_port, req.endpoint.udp_port);
  EXPECT_EQ(seen.qpn, req.endpoint.qpn);
  EXPECT_TRUE(seen.loss_notices);
  const wire::GrantMsg g = sample_grant();
  EXPECT_EQ(r->job_id, g.job_id);
  EXPECT_EQ(r->qkey, g.qkey);
  EXPECT_EQ(r->slot_count, g.slot_count);
  EXPECT_EQ(r->payload_bytes, g.payload_bytes);
  EXPECT_TRUE(std::equal(g.mac.begin(), g.mac.end(), r->appliance.mac));
  EXPECT_EQ(r->appliance.ip, g.ip);
  EXPECT_EQ(r->appliance.udp_port, g.udp_port);
  EXPECT_EQ(r->core_qpns, g.core_qpns);
  EXPECT_EQ(r->multicast, g.multicast);
  EXPECT_EQ(r->multicast_ip, g.multicast_ip);
  EXPECT_EQ(r->loss_notices, g.loss_notices);
}

// The non-blocking steps (what a failover drives from progress calls): connect, HELLO/AUTH_OK
// and REGISTER move on only as the appliance answers; while it holds the grant back (as it does
// until every rank registered), advance_register() says "not yet" instead of waiting.
TEST(ControlClient, NonBlockingStepsWaitForNothing) {
  std::promise<void> release;
  std::future<void> released = release.get_future();
  std::atomic<bool> registered{false};
  ScriptedAppliance a([&](RawSocket& s) {
    accept_hello(s);
    wire::RegisterMsg seen;
    ASSERT_TRUE(s.read_as(&seen, kWait));
    registered = true;
    ASSERT_EQ(released.wait_for(kWait), std::future_status::ready);
    ASSERT_TRUE(s.send_msg(sample_grant()));
  });
  auto started = ControlClient::start_connect("127.0.0.1", a.port(), kToken);
  ASSERT_TRUE(started.ok()) << started.status().to_string();
  ControlClient& c = **started;
  const auto until = Clock::now() + kWait;
  auto wait_io = [&] {
    pollfd p{c.fd(), c.poll_events(), 0};
    ASSERT_GE(::poll(&p, 1, 100), 0);
    ASSERT_LT(Clock::now(), until) << "waiting for " << c.waiting_for();
  };
  for (;;) {
    auto up = c.advance_connect();
    ASSERT_TRUE(up.ok()) << up.status().to_string();
    if (*up) break;
    wait_io();
  }
  ASSERT_TRUE(c.start_register(sample_request()).ok());
  EXPECT_FALSE(c.start_register(sample_request()).ok()) << "a second REGISTER while one waits";
  // Until the appliance read it, and while it holds the grant: no grant, and no blocking.
  while (!registered) {
    auto g = c.advance_register();
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_FALSE(g->has_value());
    wait_io();
  }
  auto g = c.advance_register();
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->has_value());
  EXPECT_NE(c.waiting_for().find("the grant of rank"), std::string::npos) << c.waiting_for();
  release.set_value();
  for (;;) {
    g = c.advance_register();
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    if (g->has_value()) break;
    wait_io();
  }
  EXPECT_EQ((*g)->job_id, sample_grant().job_id);
  EXPECT_EQ(c.waiting_for(), "nothing");
}

TEST(ControlClient, RefuseTextReachesTheCaller) {
  ScriptedAppliance a([](RawSocket& s) {
    accept_hello(s);
    wire::RegisterMsg m;
    ASSERT_TRUE(s.read_as(&m, kWait));
    ASSERT_TRUE(s.send_msg(wire::RefuseMsg{wire::RefuseCode::kBadWorldSize, "custom reason 8472"}));
    EXPECT_TRUE(s.wait_closed(kWait));  // keeps the connection open until the client goes
  });
  auto c = connect_to(a);
  ASSERT_NE(c, nullptr);
  auto r = c->register_rank(sample_request(), 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kRefused);
  EXPECT_NE(r.status().message().find("custom reason 8472"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("bad_world_size"), std::string::npos);
  EXPECT_TRUE(c->poll().ok());  // a refusal is not a broken connection
  c.reset();
}

TEST(ControlClient, RegisterWithoutAnswerTimesOut) {
  ScriptedAppliance a([](RawSocket& s) {
    accept_hello(s);
    wire::RegisterMsg m;
    ASSERT_TRUE(s.read_as(&m, kWait));
    EXPECT_TRUE(s.wait_closed(kWait));  // until the client goes away
  });
  auto c = connect_to(a);
  ASSERT_NE(c, nullptr);
  const auto t0 = Clock::now();
  auto r = c->register_rank(sample_request(), 200);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_GE(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(), 200);
  c.reset();
}

TEST(ControlClient, UnexpectedReplyIsIoError) {
  ScriptedAppliance a([](RawSocket& s) {
    accept_hello(s);
    wire::RegisterMsg m;
    ASSERT_TRUE(s.read_as(&m, kWait));
    ASSERT_TRUE(s.send_msg(wire::AuthOkMsg{}));
  });
  auto c = connect_to(a);
  ASSERT_NE(c, nullptr);
  auto r = c->register_rank(sample_request(), 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find("AUTH_OK"), std::string::npos) << r.status().to_string();
}

TEST(ControlClient, PollIsOkWhileIdle) {
  ScriptedAppliance a(grant_then([](RawSocket& s) { EXPECT_TRUE(s.wait_closed(kWait)); }));
  auto c = connect_to(a);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->register_rank(sample_request(), 5000).ok());
  EXPECT_TRUE(c->poll().ok());
  EXPECT_TRUE(c->poll().ok());
  c.reset();
}

// A registered client whose appliance then sent `abort` and closed the connection, returned once
// the abort is readable; nullptr (after a failure) otherwise.
std::unique_ptr<ControlClient> client_after_abort(const wire::AbortMsg& abort) {
  ScriptedAppliance a(grant_then([abort](RawSocket& s) { ASSERT_TRUE(s.send_msg(abort)); }));
  auto c = connect_to(a);
  if (c == nullptr) return nullptr;
  const auto grant = c->register_rank(sample_request(), 5000);
  if (!grant.ok()) {
    ADD_FAILURE() << grant.status().to_string();
    return nullptr;
  }
  a.join();  // ABORT sent and the connection closed
  pollfd p{c->fd(), POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) {
    ADD_FAILURE() << "the abort did not arrive within 5 s";
    return nullptr;
  }
  return c;
}

TEST(ControlClient, PollReportsAbortBeforeEof) {
  // The scripted appliance closes right after the ABORT: the client must still report the abort.
  auto c = client_after_abort(wire::AbortMsg{77, wire::AbortReason::kTimeout, "no progress for 10000 ms"});
  ASSERT_NE(c, nullptr);
  Status s = c->poll();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
  EXPECT_NE(s.message().find("no progress for 10000 ms"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("timeout"), std::string::npos);
  // The reason is a code too, so callers need not search the text for it; it survives context.
  EXPECT_TRUE(shim::aborted_for(s, wire::AbortReason::kTimeout)) << s.detail();
  EXPECT_FALSE(shim::aborted_for(s, wire::AbortReason::kMemberLeft));
  EXPECT_TRUE(shim::aborted_for(s.with_context("appliance 1: "), wire::AbortReason::kTimeout));
  EXPECT_EQ(c->poll().code(), StatusCode::kAborted);  // sticky
  EXPECT_TRUE(shim::aborted_for(c->poll(), wire::AbortReason::kTimeout));
}

TEST(ControlClient, MemberLeftAbortIsTellableByItsCode) {
  auto c = client_after_abort(wire::AbortMsg{77, wire::AbortReason::kMemberLeft, "rank 3 left (timeout)"});
  ASSERT_NE(c, nullptr);
  const Status s = c->poll();
  EXPECT_TRUE(shim::aborted_for(s, wire::AbortReason::kMemberLeft)) << s.to_string();
  EXPECT_FALSE(shim::aborted_for(s, wire::AbortReason::kTimeout)) << s.to_string();  // the text says timeout
  EXPECT_FALSE(shim::aborted_for(Status::io_error("x (member_left)"), wire::AbortReason::kMemberLeft));
}

TEST(ControlClient, PollReportsEofAsIoError) {
  ScriptedAppliance a(grant_then([](RawSocket&) {}));
  auto c = connect_to(a);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->register_rank(sample_request(), 5000).ok());
  a.join();
  pollfd p{c->fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_EQ(c->poll().code(), StatusCode::kIoError);
  EXPECT_EQ(c->poll().code(), StatusCode::kIoError);
}

TEST(ControlClient, LeaveSendsTheJobIdThenCloses) {
  wire::LeaveMsg seen;
  bool closed = false;
  ScriptedAppliance a(grant_then([&](RawSocket& s) {
    ASSERT_TRUE(s.read_as(&seen, kWait));
    closed = s.wait_closed(kWait);
  }));
  auto c = connect_to(a);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->register_rank(sample_request(), 5000).ok());
  EXPECT_TRUE(c->leave().ok());
  a.join();
  EXPECT_EQ(seen.job_id, sample_grant().job_id);
  EXPECT_TRUE(closed);
}

}  // namespace
}  // namespace sumcast::shim
