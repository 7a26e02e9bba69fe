// The control-plane server (sumcast/control/server.h) driven by real ControlClients and raw
// sockets over loopback, with a fake JobSink standing in for the dataplane. Every wait is a
// bounded wait on a condition (a message, a closed socket, a counter, a sink call).
#include "sumcast/control/server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "control_test_util.h"
#include "sumcast/shim/control_client.h"

namespace sumcast::control {
namespace {

using namespace std::chrono_literals;
using shim::ControlClient;
using shim::JobGrant;
using shim::RegisterRequest;
using testing::Clock;
using testing::FakeSink;
using testing::RawSocket;
using testing::wait_for;
using wire::AbortReason;

constexpr char kToken[] = "0123456789abcdef-test-token";
constexpr auto kWait = 5000ms;  // upper bound for anything that should happen "at once"

shim::RegisterRequest request(const std::string& job, uint16_t world, uint16_t rank) {
  RegisterRequest r;
  r.job_name = job;
  r.world_size = world;
  r.rank = rank;
  r.dtype = wire::Dtype::kFp32;
  r.op = wire::ReduceOp::kSum;
  r.max_payload_bytes = 1024;
  r.slots = 0;
  const uint8_t mac[6] = {0x02, 0x00, 0x00, 0x00, static_cast<uint8_t>(world), static_cast<uint8_t>(rank)};
  std::copy(mac, mac + 6, r.endpoint.mac);
  r.endpoint.ip = 0x0A000000u | (rank + 1u);
  r.endpoint.udp_port = static_cast<uint16_t>(40000 + rank);
  r.endpoint.qpn = 0x1000u + rank;
  return r;
}

// Polls the client (waking on its fd) until it reports a non-OK status or `timeout` passes.
Status wait_status(ControlClient& c, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    Status s = c.poll();
    if (!s.ok()) return s;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return s;
    pollfd p{c.fd(), POLLIN, 0};
    (void)::poll(&p, 1, static_cast<int>(left));
  }
}

bool same_grant(const JobGrant& a, const JobGrant& b) {
  return a.job_id == b.job_id && a.qkey == b.qkey && a.slot_count == b.slot_count &&
         a.payload_bytes == b.payload_bytes && std::equal(a.appliance.mac, a.appliance.mac + 6, b.appliance.mac) &&
         a.appliance.ip == b.appliance.ip && a.appliance.udp_port == b.appliance.udp_port &&
         a.core_qpns == b.core_qpns && a.multicast == b.multicast && a.multicast_ip == b.multicast_ip;
}

// A rank whose registration runs in its own thread (register_rank blocks until the job is full).
struct Member {
  std::unique_ptr<ControlClient> client;
  std::future<Result<JobGrant>> pending;
  RegisterRequest req;
};

class ServerTest : public ::testing::Test {
 protected:
  static ServerOptions options() {
    ServerOptions o;
    o.listen_ip = 0x7F000001;  // 127.0.0.1
    o.port = 0;
    o.token = kToken;
    o.max_connections = 64;
    o.job_timeout_ms = 60000;
    o.register_timeout_ms = 60000;
    o.io_timeout_ms = 5000;
    o.max_jobs = 8;
    o.max_ranks = 16;
    o.slots_per_job = 128;
    o.max_payload_bytes = 1024;
    const uint8_t mac[6] = {0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE};
    std::copy(mac, mac + 6, o.data_mac);
    o.data_ip = 0x0A0000FE;
    o.core_qpns = {0x100, 0x101, 0x102};
    return o;
  }

  void start(const ServerOptions& o) {
    opts_ = o;
    server_ = std::make_unique<Server>(o, &sink_);
    const Status st = server_->start();
    ASSERT_TRUE(st.ok()) << st.to_string();
    port_ = server_->bound_port();
    ASSERT_NE(port_, 0);
  }

  void TearDown() override {
    if (server_) server_->stop();
  }

  std::unique_ptr<ControlClient> connect(const std::string& token = kToken) {
    auto r = ControlClient::connect("127.0.0.1", port_, token, 5000);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r.value()) : nullptr;
  }

  // Connects and starts registering `req` in another thread.
  Member begin_register(const RegisterRequest& req, uint32_t timeout_ms = 10000) {
    Member m;
    m.req = req;
    m.client = connect();
    if (m.client) {
      ControlClient* c = m.client.get();
      m.pending = std::async(std::launch::async, [c, req, timeout_ms] { return c->register_rank(req, timeout_ms); });
    }
    return m;
  }

  // Waits until the pending job `name` has `n` ranks registered.
  bool wait_registered(const std::string& name, uint16_t n) {
    return wait_for(
        [&] {
          for (const JobInfo& j : server_->jobs()) {
            if (j.name == name && j.registered == n) return true;
          }
          return false;
        },
        kWait);
  }

  // Rank 0 of a two-rank job registers plainly, rank 1 with `differ` applied: rank 1 is refused
  // job_mismatch naming `what`. Stops the server (ending rank 0's pending registration, refused as
  // shutting down, instead of its timeout).
  void expect_flag_mismatch_refused(const std::function<void(RegisterRequest&)>& differ, const std::string& what) {
    Member first = begin_register(request("mixed", 2, 0));
    ASSERT_TRUE(wait_registered("mixed", 1));
    auto c = connect();
    ASSERT_NE(c, nullptr);
    RegisterRequest wants = request("mixed", 2, 1);
    differ(wants);
    auto r = c->register_rank(wants, 5000);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("job_mismatch"), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().to_string();
    server_->stop();
  }

  // Registers every rank of a job (each in its own thread, in rank order of arrival) and returns
  // the members with their grants checked OK.
  std::vector<Member> run_job(const std::string& name, uint16_t world, std::vector<JobGrant>* grants,
                              bool multicast = false, bool loss_notices = false) {
    std::vector<Member> members;
    for (uint16_t r = 0; r < world; ++r) {
      RegisterRequest req = request(name, world, r);
      req.multicast = multicast;
      req.loss_notices = loss_notices;
      members.push_back(begin_register(req));
    }
    for (auto& m : members) {
      EXPECT_TRUE(m.pending.valid());
      if (!m.pending.valid()) continue;
      Result<JobGrant> g = m.pending.get();
      EXPECT_TRUE(g.ok()) << g.status().to_string();
      if (g.ok() && grants) grants->push_back(*g);
    }
    return members;
  }

  uint32_t only_job_id() {
    auto js = server_->jobs();
    EXPECT_EQ(js.size(), 1u);
    return js.empty() ? 0 : js[0].job_id;
  }

  FakeSink sink_;  // outlives server_
  ServerOptions opts_;
  std::unique_ptr<Server> server_;
  uint16_t port_ = 0;
};

// ---- Registration -----------------------------------------------------------------------------

TEST_F(ServerTest, FourRanksRegisterAndGetIdenticalGrants) {
  start(options());
  std::vector<JobGrant> grants;
  auto members = run_job("job4", 4, &grants);
  ASSERT_EQ(grants.size(), 4u);
  for (const auto& g : grants) EXPECT_TRUE(same_grant(g, grants[0]));
  const JobGrant& g = grants[0];
  EXPECT_NE(g.job_id, 0u);
  EXPECT_NE(g.qkey, 0u);
  EXPECT_EQ(g.qkey & 0x80000000u, 0u) << "controlled Q_Key";
  EXPECT_EQ(g.slot_count, 128);
  EXPECT_EQ(g.payload_bytes, 1024);
  EXPECT_EQ(g.core_qpns, opts_.core_qpns);
  EXPECT_TRUE(std::equal(g.appliance.mac, g.appliance.mac + 6, opts_.data_mac));
  EXPECT_EQ(g.appliance.ip, opts_.data_ip);
  EXPECT_EQ(g.appliance.udp_port, wire::kRoceUdpPort);
  EXPECT_FALSE(g.multicast);

  const auto installs = sink_.installs();
  ASSERT_EQ(installs.size(), 1u);
  const engine::JobSpec& spec = installs[0];
  EXPECT_EQ(spec.job_id, g.job_id);
  EXPECT_EQ(spec.qkey, g.qkey);
  EXPECT_EQ(spec.slot_count, g.slot_count);
  EXPECT_EQ(spec.max_payload_bytes, g.payload_bytes);
  EXPECT_EQ(spec.dtype, wire::Dtype::kFp32);
  EXPECT_EQ(spec.op, wire::ReduceOp::kSum);
  ASSERT_EQ(spec.members.size(), 4u);
  for (uint16_t r = 0; r < 4; ++r) {
    const RegisterRequest want = request("job4", 4, r);
    EXPECT_TRUE(std::equal(want.endpoint.mac, want.endpoint.mac + 6, spec.members[r].mac)) << r;
    EXPECT_EQ(spec.members[r].ip, want.endpoint.ip) << r;
    EXPECT_EQ(spec.members[r].udp_port, want.endpoint.udp_port) << r;
    EXPECT_EQ(spec.members[r].qpn, want.endpoint.qpn) << r;
  }
  const auto js = server_->jobs();
  ASSERT_EQ(js.size(), 1u);
  EXPECT_TRUE(js[0].running);
  EXPECT_EQ(js[0].job_id, g.job_id);
  EXPECT_EQ(js[0].registered, 4);
  const ServerCounters c = server_->counters();
  EXPECT_EQ(c.registrations, 4u);
  EXPECT_EQ(c.jobs_started, 1u);
  EXPECT_EQ(c.connections_accepted, 4u);
  for (auto& m : members) EXPECT_TRUE(m.client->poll().ok());
}

TEST_F(ServerTest, GrantIsTheSmallestWishOverRanksWithinLimits) {
  start(options());
  RegisterRequest r0 = request("mix", 3, 0);
  RegisterRequest r1 = request("mix", 3, 1);
  RegisterRequest r2 = request("mix", 3, 2);
  r0.max_payload_bytes = 4096;  // above max_payload_bytes (1024)
  r1.max_payload_bytes = 1022;  // not a whole number of fp32 elements: 1020
  r2.max_payload_bytes = 2048;
  r0.slots = 0;     // default: slots_per_job (128)
  r1.slots = 1000;  // above slots_per_job
  r2.slots = 40;
  std::vector<Member> ms;
  ms.push_back(begin_register(r0));
  ms.push_back(begin_register(r1));
  ms.push_back(begin_register(r2));
  for (auto& m : ms) {
    Result<JobGrant> g = m.pending.get();
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->payload_bytes, 1020);
    EXPECT_EQ(g->slot_count, 40);
  }
}

TEST_F(ServerTest, MulticastGroupsAreDistinctPerRunningJob) {
  ServerOptions o = options();
  o.multicast = true;
  o.multicast_base_ip = 0xEFFF4D00;  // 239.255.77.0
  start(o);
  std::vector<JobGrant> ga, gb;
  auto a = run_job("a", 2, &ga, true);
  auto b = run_job("b", 2, &gb, true);
  ASSERT_EQ(ga.size(), 2u);
  ASSERT_EQ(gb.size(), 2u);
  EXPECT_TRUE(ga[0].multicast);
  EXPECT_NE(ga[0].multicast_ip, gb[0].multicast_ip);
  for (uint32_t ip : {ga[0].multicast_ip, gb[0].multicast_ip}) {
    EXPECT_GE(ip, o.multicast_base_ip);
    EXPECT_LT(ip, o.multicast_base_ip + o.max_jobs);
  }
  EXPECT_NE(ga[0].qkey, gb[0].qkey);  // random 31-bit keys: equal with probability 2^-31
  EXPECT_NE(ga[0].job_id, gb[0].job_id);
  const auto installs = sink_.installs();
  ASSERT_EQ(installs.size(), 2u);
  for (const auto& spec : installs) {
    EXPECT_TRUE(spec.multicast);
    const uint8_t want[6] = {0x01,
                             0x00,
                             0x5E,
                             static_cast<uint8_t>((spec.mcast_ip >> 16) & 0x7F),
                             static_cast<uint8_t>(spec.mcast_ip >> 8),
                             static_cast<uint8_t>(spec.mcast_ip)};
    EXPECT_TRUE(std::equal(want, want + 6, spec.mcast_mac));
  }
}

TEST_F(ServerTest, MulticastIsPerJobAskedByTheRanksAndAllowedByTheAppliance) {
  ServerOptions o = options();
  o.multicast = true;
  o.multicast_base_ip = 0xEFFF4D00;
  start(o);
  std::vector<JobGrant> gu, gm;
  auto u = run_job("unicast", 2, &gu);
  auto m = run_job("mcast", 2, &gm, true);
  ASSERT_EQ(gu.size(), 2u);
  ASSERT_EQ(gm.size(), 2u);
  EXPECT_FALSE(gu[0].multicast) << "a job that did not ask keeps one copy per member";
  EXPECT_EQ(gu[0].multicast_ip, 0u);
  EXPECT_TRUE(gm[0].multicast);
  EXPECT_EQ(gm[0].multicast_ip, o.multicast_base_ip) << "unicast jobs take no group";
  const auto installs = sink_.installs();
  ASSERT_EQ(installs.size(), 2u);
  EXPECT_FALSE(installs[0].multicast);
  EXPECT_TRUE(installs[1].multicast);
  bool listed = false;
  for (const JobInfo& j : server_->jobs()) {
    if (j.name == "mcast") {
      listed = true;
      EXPECT_TRUE(j.multicast);
      EXPECT_EQ(j.multicast_ip, o.multicast_base_ip);
    } else {
      EXPECT_FALSE(j.multicast);
      EXPECT_EQ(j.multicast_ip, 0u);
    }
  }
  EXPECT_TRUE(listed);

  // The ranks must agree.
  expect_flag_mismatch_refused([](RegisterRequest& r) { r.multicast = true; }, "multicast");
}

// Loss notices: granted (and installed) when the ranks ask and the appliance allows them, not when
// they do not ask or it does not; ranks that disagree are refused.
TEST_F(ServerTest, LossNoticesAreGrantedWhenTheRanksAskAndTheApplianceAllowsThem) {
  ServerOptions o = options();
  ASSERT_TRUE(o.loss_notices) << "on by default";
  start(o);
  std::vector<JobGrant> ga, gq;
  auto asked = run_job("asks", 2, &ga, false, true);
  auto quiet = run_job("quiet", 2, &gq, false, false);
  ASSERT_EQ(ga.size(), 2u);
  ASSERT_EQ(gq.size(), 2u);
  for (const JobGrant& g : ga) EXPECT_TRUE(g.loss_notices);
  for (const JobGrant& g : gq) EXPECT_FALSE(g.loss_notices);
  const auto installs = sink_.installs();
  ASSERT_EQ(installs.size(), 2u);
  EXPECT_TRUE(installs[0].loss_notices);
  EXPECT_FALSE(installs[1].loss_notices);

  expect_flag_mismatch_refused([](RegisterRequest& r) { r.loss_notices = true; }, "loss notices");
}

TEST_F(ServerTest, LossNoticesOffOnTheApplianceGrantsJobsWithoutThem) {
  ServerOptions o = options();
  o.loss_notices = false;
  start(o);
  std::vector<JobGrant> g;
  auto m = run_job("asks", 2, &g, false, true);
  ASSERT_EQ(g.size(), 2u);
  for (const JobGrant& x : g) EXPECT_FALSE(x.loss_notices);
  const auto installs = sink_.installs();
  ASSERT_EQ(installs.size(), 1u);
  EXPECT_FALSE(installs[0].loss_notices);
}

TEST_F(ServerTest, MulticastWishOnAnApplianceThatDoesNotAllowItGetsUnicast) {
  start(options());  // multicast off
  std::vector<JobGrant> g;
  auto m = run_job("wants", 2, &g, true);
  ASSERT_EQ(g.size(), 2u);
  for (const JobGrant& x : g) {
    EXPECT_FALSE(x.multicast);
    EXPECT_EQ(x.multicast_ip, 0u);
  }
  ASSERT_EQ(sink_.installs().size(), 1u);
  EXPECT_FALSE(sink_.installs()[0].multicast);
}

TEST_F(ServerTest, JobsListsAPendingJobThenItsRunningState) {
  start(options());
  Member m0 = begin_register(request("p", 2, 0));
  ASSERT_TRUE(wait_registered("p", 1));
  auto js = server_->jobs();
  ASSERT_EQ(js.size(), 1u);
  EXPECT_FALSE(js[0].running);
  EXPECT_EQ(js[0].world_size, 2);
  EXPECT_EQ(js[0].job_id, 0u);
  EXPECT_TRUE(sink_.installs().empty());
  Member m1 = begin_register(request("p", 2, 1));
  ASSERT_TRUE(m0.pending.get().ok());
  ASSERT_TRUE(m1.pending.get().ok());
  js = server_->jobs();
  ASSERT_EQ(js.size(), 1u);
  EXPECT_TRUE(js[0].running);
  EXPECT_EQ(js[0].registered, 2);
}

TEST_F(ServerTest, StatusRequestListsJobs) {
  start(options());
  std::vector<JobGrant> grants;
  auto members = run_job("listed", 2, &grants);
  sink_.add_progress(grants.at(0).job_id, 7);
  ASSERT_TRUE(wait_for([&] { return !server_->jobs().empty() && server_->jobs()[0].slots_completed == 7; }, kWait));
  RawSocket s(port_);
  ASSERT_TRUE(s.connected());
  ASSERT_TRUE(s.send_msg(wire::HelloMsg{kToken}));
  wire::AuthOkMsg ok;
  ASSERT_EQ(wire::decode(std::span<const uint8_t>(s.read_msg(kWait)), &ok), wire::ControlError::kOk);
  ASSERT_TRUE(s.send_msg(wire::StatusRequestMsg{}));
  wire::StatusReplyMsg reply;
  ASSERT_EQ(wire::decode(std::span<const uint8_t>(s.read_msg(kWait)), &reply), wire::ControlError::kOk);
  ASSERT_EQ(reply.jobs.size(), 1u);
  EXPECT_FALSE(reply.truncated);
  EXPECT_EQ(reply.jobs[0].name, "listed");
  EXPECT_EQ(reply.jobs[0].job_id, grants[0].job_id);
  EXPECT_TRUE(reply.jobs[0].running);
  EXPECT_EQ(reply.jobs[0].slots_completed, 7u);
}

// ---- Authentication and connection limits -----------------------------------------------------

TEST_F(ServerTest, WrongTokenRefusedAndCounted) {
  start(options());
  for (const std::string& bad :
       std::vector<std::string>{"0123456789abcdef-test-tokeN", "0123456789abcdef", std::string(kToken) + "x", "x"}) {
    auto r = ControlClient::connect("127.0.0.1", port_, bad, 5000);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kRefused) << r.status().to_string();
  }
  EXPECT_EQ(server_->counters().auth_failures, 4u);
  auto good = connect();
  EXPECT_NE(good, nullptr);
  EXPECT_EQ(server_->counters().auth_failures, 4u);
}

TEST_F(ServerTest, SilentConnectionClosedAfterIoTimeout) {
  ServerOptions o = options();
  o.io_timeout_ms = 300;
  start(o);
  const auto t0 = Clock::now();
  RawSocket s(port_);
  ASSERT_TRUE(s.connected());
  ASSERT_TRUE(s.wait_closed(std::chrono::milliseconds(o.io_timeout_ms) + 2000ms));
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_GE(elapsed, o.io_timeout_ms);
  EXPECT_TRUE(wait_for([&] { return server_->counters().io_timeouts == 1; }, kWait));
  EXPECT_EQ(server_->counters().auth_failures, 0u);
}

TEST_F(ServerTest, HalfSentMessageClosedAfterIoTimeout) {
  ServerOptions o = options();
  o.io_timeout_ms = 300;
  start(o);
  RawSocket s(port_);
  ASSERT_TRUE(s.send_msg(wire::HelloMsg{kToken}));
  ASSERT_FALSE(s.read_msg(kWait).empty());  // AUTH_OK: authenticated, so only the half message counts
  std::vector<uint8_t> reg;
  ASSERT_EQ(wire::encode_append(wire::LeaveMsg{0}, &reg), wire::ControlError::kOk);
  reg.resize(reg.size() - 1);  // never completed
  const auto t0 = Clock::now();
  ASSERT_TRUE(s.send_bytes(reg));
  ASSERT_TRUE(s.wait_closed(std::chrono::milliseconds(o.io_timeout_ms) + 2000ms));
  EXPECT_GE(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(), o.io_timeout_ms);
  EXPECT_TRUE(wait_for([&] { return server_->counters().io_timeouts == 1; }, kWait));
}

TEST_F(ServerTest, IdleAuthenticatedConnectionStaysOpen) {
  ServerOptions o = options();
  o.io_timeout_ms = 200;
  start(o);
  auto c = connect();
  ASSERT_NE(c, nullptr);
  // Three io timeouts pass without a closed connection.
  EXPECT_TRUE(wait_status(*c, 600ms).ok());
  EXPECT_EQ(server_->counters().io_timeouts, 0u);
}

TEST_F(ServerTest, ConnectionsOverLimitRefused) {
  ServerOptions o = options();
  o.max_connections = 2;
  start(o);
  auto a = connect();
  auto b = connect();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto r = ControlClient::connect("127.0.0.1", port_, kToken, 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kRefused) << r.status().to_string();
  EXPECT_NE(r.status().message().find("max_connections"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(server_->counters().connections_refused, 1u);
  EXPECT_EQ(server_->counters().connections_accepted, 2u);
  // A slot frees when a connection closes.
  a.reset();
  EXPECT_TRUE(wait_for([&] { return ControlClient::connect("127.0.0.1", port_, kToken, 5000).ok(); }, kWait));
}

TEST_F(ServerTest, OversizedMessageClosesConnectionBeforeItsBody) {
  ServerOptions o = options();
  o.io_timeout_ms = 30000;  // the close must come from the size check, not a timeout
  start(o);
  RawSocket s(port_);
  ASSERT_TRUE(s.send_msg(wire::HelloMsg{kToken}));
  ASSERT_FALSE(s.read_msg(kWait).empty());
  std::vector<uint8_t> h(wire::kControlHeaderLen);
  wire::write_control_header(h.data(), wire::ControlType::kRegister,
                             static_cast<uint32_t>(wire::kMaxControlBodyLen + 1));
  ASSERT_TRUE(s.send_bytes(h));
  EXPECT_TRUE(s.wait_closed(kWait));
  EXPECT_EQ(server_->counters().bad_messages, 1u);
  EXPECT_EQ(server_->counters().io_timeouts, 0u);
}

TEST_F(ServerTest, GarbageClosesConnection) {
  start(options());
  RawSocket s(port_);
  ASSERT_TRUE(s.send_bytes({'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1', '\r', '\n'}));
  EXPECT_TRUE(s.wait_closed(kWait));
  // A well-framed body that does not decode (HELLO with a zero-length token).
  RawSocket t(port_);
  ASSERT_TRUE(t.send_bytes({0x53, 0x55, 0x4D, 0x43, 1, 1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0}));
  EXPECT_TRUE(t.wait_closed(kWait));
  // A message of the appliance's direction.
  RawSocket u(port_);
  ASSERT_TRUE(u.send_msg(wire::HelloMsg{kToken}));
  ASSERT_FALSE(u.read_msg(kWait).empty());
  ASSERT_TRUE(u.send_msg(wire::AuthOkMsg{}));
  EXPECT_TRUE(u.wait_closed(kWait));
  EXPECT_TRUE(wait_for([&] { return server_->counters().bad_messages == 3; }, kWait));
}

TEST_F(ServerTest, RegisterBeforeHelloRefusedAndClosed) {
  start(options());
  RawSocket s(port_);
  wire::RegisterMsg m;
  m.world_size = 2;
  m.name = "x";
  ASSERT_TRUE(s.send_msg(m));
  wire::RefuseMsg refuse;
  ASSERT_EQ(wire::decode(std::span<const uint8_t>(s.read_msg(kWait)), &refuse), wire::ControlError::kOk);
  EXPECT_EQ(refuse.code, wire::RefuseCode::kNotAuthenticated);
  EXPECT_TRUE(s.wait_closed(kWait));
  EXPECT_TRUE(server_->jobs().empty());
}

// ---- Refused registrations --------------------------------------------------------------------

TEST_F(ServerTest, SameRankTwiceRefused) {
  start(options());
  Member first = begin_register(request("twice", 2, 0));
  ASSERT_TRUE(wait_registered("twice", 1));
  auto c = connect();
  auto r = c->register_rank(request("twice", 2, 0), 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kRefused);
  EXPECT_NE(r.status().message().find("already registered"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("rank_taken"), std::string::npos) << r.status().to_string();
  // The first registration is untouched: the job still starts with the real rank 1.
  Member second = begin_register(request("twice", 2, 1));
  EXPECT_TRUE(first.pending.get().ok());
  EXPECT_TRUE(second.pending.get().ok());
  EXPECT_EQ(server_->counters().registrations_refused, 1u);
}

TEST_F(ServerTest, WorldSizeDtypeOrOpMismatchRefused) {
  start(options());
  Member first = begin_register(request("mm", 3, 0));
  ASSERT_TRUE(wait_registered("mm", 1));
  auto c = connect();
  RegisterRequest other_world = request("mm", 4, 1);
  RegisterRequest other_dtype = request("mm", 3, 1);
  other_dtype.dtype = wire::Dtype::kInt32;
  RegisterRequest other_op = request("mm", 3, 1);
  other_op.op = wire::ReduceOp::kMax;
  for (const RegisterRequest& req : {other_world, other_dtype, other_op}) {
    auto r = c->register_rank(req, 5000);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kRefused);
    EXPECT_NE(r.status().message().find("job_mismatch"), std::string::npos) << r.status().to_string();
  }
  EXPECT_NE(c->register_rank(other_world, 5000).status().message().find("world size 4"), std::string::npos);
  auto js = server_->jobs();
  ASSERT_EQ(js.size(), 1u);
  EXPECT_EQ(js[0].registered, 1);
  EXPECT_EQ(server_->counters().registrations_refused, 4u);
  server_->stop();  // ends the pending registration (refused: shutting down) instead of its timeout
  EXPECT_FALSE(first.pending.get().ok());
}

TEST_F(ServerTest, DeterministicFlagReachesTheDataplaneAndTheGrantAndMustBeUnanimous) {
  start(options());
  std::vector<Member> members;
  for (uint16_t r = 0; r < 2; ++r) {
    RegisterRequest req = request("det", 2, r);
    req.deterministic = true;
    members.push_back(begin_register(req));
  }
  for (auto& m : members) {
    Result<JobGrant> g = m.pending.get();
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_TRUE(g->deterministic);
  }
  const auto installs = sink_.installs();
  ASSERT_EQ(installs.size(), 1u);
  EXPECT_TRUE(installs[0].deterministic);

  // A rank that disagrees with the ranks already registered is refused; a default job stays default.
  Member first = begin_register(request("mixed", 3, 0));
  ASSERT_TRUE(wait_registered("mixed", 1));
  auto c = connect();
  RegisterRequest det = request("mixed", 3, 1);
  det.deterministic = true;
  auto r = c->register_rank(det, 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kRefused);
  EXPECT_NE(r.status().message().find("job_mismatch"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("deterministic"), std::string::npos) << r.status().to_string();
  RegisterRequest plain = request("mixed", 3, 1);
  Member second = begin_register(plain);
  Member third = begin_register(request("mixed", 3, 2));
  for (Member* m : {&first, &second, &third}) {
    Result<JobGrant> g = m->pending.get();
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_FALSE(g->deterministic);
  }
  ASSERT_EQ(sink_.installs().size(), 2u);
  EXPECT_FALSE(sink_.installs()[1].deterministic);
}

TEST_F(ServerTest, DtypeNotAcceptedRefused) {
  ServerOptions o = options();
  o.dtypes = {wire::Dtype::kFp32, wire::Dtype::kBf16};
  start(o);
  auto c = connect();
  RegisterRequest req = request("d", 2, 0);
  req.dtype = wire::Dtype::kFp16;
  auto r = c->register_rank(req, 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kRefused);
  EXPECT_NE(r.status().message().find("fp16"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("dtype_not_accepted"), std::string::npos);
  EXPECT_TRUE(server_->jobs().empty());
  // An accepted dtype on the same connection goes through to a pending job.
  req.dtype = wire::Dtype::kBf16;
  auto pending = std::async(std::launch::async, [&] { return c->register_rank(req, 10000); });
  EXPECT_TRUE(wait_registered("d", 1));
  Member other = begin_register([&] {
    RegisterRequest q = request("d", 2, 1);
    q.dtype = wire::Dtype::kBf16;
    return q;
  }());
  EXPECT_TRUE(pending.get().ok());
  EXPECT_TRUE(other.pending.get().ok());
}

TEST_F(ServerTest, RequestsOutsideLimitsRefused) {
  start(options());  // max_ranks 16, max_payload 1024
  auto c = connect();
  struct Case {
    RegisterRequest req;
    const char* code;
  };
  std::vector<Case> cases;
  cases.push_back({request("w", 1, 0), "bad_world_size"});
  cases.push_back({request("w", 17, 0), "bad_world_size"});
  cases.push_back({request("w", 0, 0), "bad_world_size"});
  cases.push_back({request("w", 4, 4), "bad_rank"});
  cases.push_back({request("", 2, 0), "bad_name"});
  RegisterRequest tiny = request("w", 2, 0);
  tiny.max_payload_bytes = 3;  // less than one fp32 element
  cases.push_back({tiny, "bad_payload"});
  for (const auto& k : cases) {
    auto r = c->register_rank(k.req, 5000);
    ASSERT_FALSE(r.ok()) << k.code;
    EXPECT_EQ(r.status().code(), StatusCode::kRefused);
    EXPECT_NE(r.status().message().find(k.code), std::string::npos) << r.status().to_string();
  }
  EXPECT_TRUE(server_->jobs().empty());
  EXPECT_EQ(server_->counters().registrations_refused, cases.size());
  EXPECT_EQ(server_->counters().registrations, 0u);
  EXPECT_TRUE(c->poll().ok());  // refusals keep the connection
}

TEST_F(ServerTest, TooManyJobsRefused) {
  ServerOptions o = options();
  o.max_jobs = 2;
  start(o);
  Member a = begin_register(request("j1", 2, 0));
  Member b = begin_register(request("j2", 2, 0));
  ASSERT_TRUE(wait_registered("j1", 1));
  ASSERT_TRUE(wait_registered("j2", 1));
  auto c = connect();
  auto r = c->register_rank(request("j3", 2, 0), 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too_many_jobs"), std::string::npos) << r.status().to_string();
  // Ranks of existing jobs still get in.
  Member a1 = begin_register(request("j1", 2, 1));
  EXPECT_TRUE(a.pending.get().ok());
  EXPECT_TRUE(a1.pending.get().ok());
  server_->stop();  // ends j2's pending registration
  EXPECT_FALSE(b.pending.get().ok());
}

TEST_F(ServerTest, SecondRegistrationOnOneConnectionRefused) {
  start(options());
  auto c = connect();
  auto r = c->register_rank(request("one", 2, 0), 200);  // nobody else: the client times out
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  ASSERT_TRUE(wait_registered("one", 1));
  auto again = c->register_rank(request("one", 2, 1), 5000);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already_registered"), std::string::npos) << again.status().to_string();
}

TEST_F(ServerTest, LeaveOrCloseBeforeGrantWithdrawsTheRank) {
  start(options());
  auto c = connect();
  ASSERT_FALSE(c->register_rank(request("w", 2, 0), 200).ok());
  ASSERT_TRUE(wait_registered("w", 1));
  ASSERT_TRUE(c->leave().ok());
  ASSERT_TRUE(wait_for([&] { return server_->jobs().empty(); }, kWait));
  auto d = connect();
  ASSERT_FALSE(d->register_rank(request("w", 2, 0), 200).ok());
  ASSERT_TRUE(wait_registered("w", 1));
  d.reset();  // closed without LEAVE
  ASSERT_TRUE(wait_for([&] { return server_->jobs().empty(); }, kWait));
  // The rank can register again, and the job starts.
  std::vector<JobGrant> grants;
  auto ms = run_job("w", 2, &grants);
  EXPECT_EQ(grants.size(), 2u);
  EXPECT_EQ(server_->counters().jobs_failed, 0u);
  EXPECT_TRUE(sink_.removals().empty());
}

TEST_F(ServerTest, InstallFailureRefusesEveryRank) {
  start(options());
  sink_.set_install_result(Status::unavailable("no slot memory on core 1"));
  std::vector<Member> ms;
  for (uint16_t r = 0; r < 3; ++r) ms.push_back(begin_register(request("nomem", 3, r)));
  for (auto& m : ms) {
    Result<JobGrant> g = m.pending.get();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kRefused);
    EXPECT_NE(g.status().message().find("no slot memory on core 1"), std::string::npos) << g.status().to_string();
  }
  EXPECT_EQ(sink_.installs().size(), 1u);
  EXPECT_TRUE(server_->jobs().empty());
  EXPECT_EQ(server_->counters().jobs_started, 0u);
}

// ---- Running jobs ---------------------------------------------------------------------------

// The registry's timeouts (register, no progress, idle jobs exempt) are checked on a fake clock in
// job_registry_test.cc; this one runs the no-progress timeout end to end, in real time, over the
// sockets: the abort reaches every client and the dataplane.
TEST_F(ServerTest, NoProgressAbortsEveryMember) {
  ServerOptions o = options();
  o.job_timeout_ms = 300;
  start(o);
  std::vector<JobGrant> grants;
  auto members = run_job("stuck", 3, &grants);
  ASSERT_EQ(grants.size(), 3u);
  const auto t0 = Clock::now();
  for (auto& m : members) {
    Status s = wait_status(*m.client, std::chrono::milliseconds(o.job_timeout_ms) + 2000ms);
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
    EXPECT_NE(s.message().find("timeout"), std::string::npos) << s.to_string();
    EXPECT_EQ(m.client->poll().code(), StatusCode::kAborted);  // sticky
  }
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(), o.job_timeout_ms + 2000);
  AbortReason why{};
  ASSERT_TRUE(sink_.wait_removed(grants[0].job_id, &why, kWait));
  EXPECT_EQ(why, AbortReason::kTimeout);
  EXPECT_EQ(sink_.removals().size(), 1u);
  EXPECT_TRUE(server_->jobs().empty());
  EXPECT_EQ(server_->counters().jobs_failed, 1u);
}

TEST_F(ServerTest, MemberDisconnectAbortsTheOthers) {
  start(options());
  std::vector<JobGrant> grants;
  auto members = run_job("drop", 3, &grants);
  ASSERT_EQ(grants.size(), 3u);
  members[1].client.reset();  // closes without LEAVE
  for (size_t i : {0u, 2u}) {
    Status s = wait_status(*members[i].client, kWait);
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
    EXPECT_NE(s.message().find("member_left"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.to_string();
  }
  AbortReason why{};
  ASSERT_TRUE(sink_.wait_removed(grants[0].job_id, &why, kWait));
  EXPECT_EQ(why, AbortReason::kMemberLeft);
  EXPECT_EQ(server_->counters().jobs_failed, 1u);
  EXPECT_EQ(server_->counters().jobs_completed, 0u);
}

TEST_F(ServerTest, MalformedMessageFromAMemberFailsItsJob) {
  start(options());
  std::vector<JobGrant> grants;
  auto members = run_job("bad", 2, &grants);
  ASSERT_EQ(grants.size(), 2u);
  const std::vector<uint8_t> junk(16, 0xEE);
  ASSERT_EQ(::send(members[0].client->fd(), junk.data(), junk.size(), MSG_NOSIGNAL), 16);
  Status s = wait_status(*members[1].client, kWait);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
  AbortReason why{};
  ASSERT_TRUE(sink_.wait_removed(grants[0].job_id, &why, kWait));
  EXPECT_EQ(why, AbortReason::kMemberLeft);
  EXPECT_EQ(server_->counters().bad_messages, 1u);
}

TEST_F(ServerTest, AllMembersLeaveRemovesJobCleanly) {
  start(options());
  std::vector<JobGrant> grants;
  auto members = run_job("done", 3, &grants);
  ASSERT_EQ(grants.size(), 3u);
  ASSERT_TRUE(members[0].client->leave().ok());
  ASSERT_TRUE(members[2].client->leave().ok());
  // Two of three left: still running, nobody aborted, nothing removed.
  ASSERT_TRUE(wait_for([&] { return server_->counters().jobs_completed == 0 && !server_->jobs().empty(); }, kWait));
  EXPECT_TRUE(wait_status(*members[1].client, 300ms).ok());
  EXPECT_TRUE(sink_.removals().empty());
  ASSERT_TRUE(members[1].client->leave().ok());
  AbortReason why = AbortReason::kAdmin;
  ASSERT_TRUE(sink_.wait_removed(grants[0].job_id, &why, kWait));
  EXPECT_EQ(why, AbortReason::kNone);
  EXPECT_TRUE(wait_for([&] { return server_->counters().jobs_completed == 1; }, kWait));
  EXPECT_TRUE(wait_for([&] { return server_->jobs().empty(); }, kWait));
  EXPECT_EQ(server_->counters().jobs_failed, 0u);
  EXPECT_EQ(sink_.removals().size(), 1u);
}

TEST_F(ServerTest, TwoJobsOneFailsTheOtherUnaffected) {
  start(options());
  std::vector<JobGrant> ga, gb;
  auto a = run_job("A", 2, &ga);
  auto b = run_job("B", 3, &gb);
  ASSERT_EQ(ga.size(), 2u);
  ASSERT_EQ(gb.size(), 3u);
  ASSERT_NE(ga[0].job_id, gb[0].job_id);
  a[0].client.reset();
  EXPECT_EQ(wait_status(*a[1].client, kWait).code(), StatusCode::kAborted);
  AbortReason why{};
  ASSERT_TRUE(sink_.wait_removed(ga[0].job_id, &why, kWait));
  // B: not removed, still listed as running, its members not aborted.
  const auto rem = sink_.removals();
  ASSERT_EQ(rem.size(), 1u);
  EXPECT_EQ(rem[0].job_id, ga[0].job_id);
  ASSERT_TRUE(wait_for([&] { return server_->jobs().size() == 1; }, kWait));  // A's entry goes
  auto js = server_->jobs();
  ASSERT_EQ(js.size(), 1u);
  EXPECT_EQ(js[0].job_id, gb[0].job_id);
  EXPECT_TRUE(js[0].running);
  for (auto& m : b) EXPECT_TRUE(m.client->poll().ok());
  for (auto& m : b) ASSERT_TRUE(m.client->leave().ok());
  ASSERT_TRUE(sink_.wait_removed(gb[0].job_id, &why, kWait));
  EXPECT_EQ(why, AbortReason::kNone);
}

// A registration storm (many connections, each registering its own job, beyond max_jobs and
// max_connections, closed again) while a job runs: the storm is refused with its reasons, the
// running job is neither aborted nor removed, and nothing of the storm is left behind.
TEST_F(ServerTest, RegistrationStormLeavesRunningJobIntact) {
  ServerOptions o = options();
  o.max_jobs = 3;
  o.max_connections = 12;
  start(o);
  std::vector<JobGrant> grants;
  auto live = run_job("live", 2, &grants);
  ASSERT_EQ(grants.size(), 2u);
  constexpr int kRounds = 4;
  constexpr int kPerRound = 16;  // > max_connections - 2 live connections
  size_t refused_jobs = 0;
  size_t refused_connections = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<Member> storm;
    for (int i = 0; i < kPerRound; ++i) {
      auto c = ControlClient::connect("127.0.0.1", port_, kToken, 5000);
      if (!c.ok()) {
        EXPECT_EQ(c.status().code(), StatusCode::kRefused) << c.status().to_string();
        ++refused_connections;
        continue;
      }
      Member m;
      m.req = request("storm-" + std::to_string(round) + "-" + std::to_string(i), 2, 0);
      m.client = std::move(c.value());
      ControlClient* cl = m.client.get();
      m.pending = std::async(std::launch::async, [cl, req = m.req] { return cl->register_rank(req, 2000); });
      storm.push_back(std::move(m));
    }
    for (auto& m : storm) {
      // At most max_jobs - 1 storm jobs can be pending beside the live one; the rest are refused
      // at once, and the pending ones time out of their own wait (nobody completes them).
      Result<JobGrant> g = m.pending.get();
      EXPECT_FALSE(g.ok());
      if (g.status().message().find("too_many_jobs") != std::string::npos) ++refused_jobs;
    }
    storm.clear();  // closes every storm connection: their pending registrations are withdrawn
    ASSERT_TRUE(wait_for([&] { return server_->jobs().size() == 1; }, kWait)) << "storm round " << round;
  }
  EXPECT_GE(refused_connections, static_cast<size_t>(kRounds));  // each round went over max_connections
  EXPECT_GE(refused_jobs, static_cast<size_t>(kRounds));         // and over max_jobs
  // The live job: still listed and running, not removed, its members not aborted; it ends cleanly.
  auto js = server_->jobs();
  ASSERT_EQ(js.size(), 1u);
  EXPECT_EQ(js[0].job_id, grants[0].job_id);
  EXPECT_TRUE(js[0].running);
  EXPECT_TRUE(sink_.removals().empty());
  EXPECT_EQ(sink_.installs().size(), 1u);
  for (auto& m : live) EXPECT_TRUE(wait_status(*m.client, 200ms).ok());
  for (auto& m : live) ASSERT_TRUE(m.client->leave().ok());
  AbortReason why = AbortReason::kAdmin;
  ASSERT_TRUE(sink_.wait_removed(grants[0].job_id, &why, kWait));
  EXPECT_EQ(why, AbortReason::kNone);
  EXPECT_TRUE(wait_for([&] { return server_->jobs().empty(); }, kWait));
}

TEST_F(ServerTest, StopAbortsRunningAndRefusesPendingMembers) {
  start(options());
  std::vector<JobGrant> grants;
  auto running = run_job("r", 2, &grants);
  ASSERT_EQ(grants.size(), 2u);
  Member pending = begin_register(request("p", 2, 0));
  ASSERT_TRUE(wait_registered("p", 1));
  server_->stop();
  for (auto& m : running) {
    Status s = wait_status(*m.client, kWait);
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
    EXPECT_NE(s.message().find("appliance_stop"), std::string::npos) << s.to_string();
  }
  Result<JobGrant> p = pending.pending.get();
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("shutting_down"), std::string::npos) << p.status().to_string();
  AbortReason why{};
  ASSERT_TRUE(sink_.wait_removed(grants[0].job_id, &why, 0ms));  // stop() returned: already removed
  EXPECT_EQ(why, AbortReason::kApplianceStop);
  EXPECT_TRUE(server_->jobs().empty());
  // The port is closed.
  auto late = ControlClient::connect("127.0.0.1", port_, kToken, 1000);
  EXPECT_FALSE(late.ok());
  server_->stop();  // idempotent
}

// ---- Options ----------------------------------------------------------------------------------

TEST_F(ServerTest, StartRejectsUnusableOptions) {
  auto bad = [&](const std::function<void(ServerOptions&)>& f) {
    ServerOptions o = options();
    f(o);
    Server s(o, &sink_);
    return s.start();
  };
  EXPECT_EQ(bad([](ServerOptions& o) { o.token.clear(); }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](ServerOptions& o) { o.core_qpns.clear(); }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](ServerOptions& o) { o.core_qpns = {0x1000000}; }).code(), StatusCode::kInvalidArgument);
  // The port in use: a second server on the first one's port.
  start(options());
  ServerOptions o = options();
  o.port = port_;
  Server second(o, &sink_);
  const Status st = second.start();
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find(std::to_string(port_)), std::string::npos) << st.to_string();
}

// ---- Next hops ----------------------------------------------------------------------------------

// The appliance's ARP resolver as sumcastd drives it, with the network played by the test: ARP
// replies are handed in by answer(), and time moves only by advance().
class TestNextHops : public NextHopResolver {
 public:
  explicit TestNextHops(neighbour::RoutingTable routes) : table_(16), resolver_(options(std::move(routes)), &table_) {}
  neighbour::Resolution resolve(uint32_t ip) override {
    std::lock_guard<std::mutex> lock(mu_);
    return resolver_.resolve(ip, now_);
  }
  neighbour::Resolution status(uint32_t ip) override {
    std::lock_guard<std::mutex> lock(mu_);
    return resolver_.status(ip);
  }
  void answer(uint32_t ip, uint8_t last_mac_byte) {
    uint8_t f[60] = {};
    const uint8_t mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, last_mac_byte};
    std::copy(mac, mac + 6, f + 6);
    f[12] = 0x08, f[13] = 0x06, f[15] = 1, f[16] = 0x08, f[18] = 6, f[19] = 4, f[21] = 2;
    std::copy(mac, mac + 6, f + 22);
    for (int i = 0; i < 4; ++i) f[28 + i] = static_cast<uint8_t>(ip >> (24 - 8 * i));
    std::lock_guard<std::mutex> lock(mu_);
    resolver_.on_arp(f, sizeof f, now_);
  }
  void advance(uint64_t ms) {  // time passes: retries run out
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t t = 0; t < ms; t += 10) resolver_.poll(now_ += 10);
  }
  const NextHopTable& table() const { return table_; }

 private:
  static neighbour::ResolverOptions options(neighbour::RoutingTable routes) {
    neighbour::ResolverOptions o;
    o.local_ip = 0x0A0000FE;
    o.routes = std::move(routes);
    o.retry_ms = 100;
    o.max_retries = 3;
    o.refresh_ms = 60000;
    return o;
  }
  std::mutex mu_;
  uint64_t now_ = 0;
  NextHopTable table_;
  neighbour::Resolver resolver_;
};

TEST_F(ServerTest, MemberWithoutRouteIsRefusedAtOnceNamingItsAddress) {
  TestNextHops hops(neighbour::RoutingTable(0x0A0001FE, 24, 0, {}));  // 10.0.1.254/24, no gateway
  ServerOptions o = options();
  o.next_hops = &hops;
  start(o);
  auto c = connect();
  auto r = c->register_rank(request("far", 2, 0), 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kRefused);
  EXPECT_NE(r.status().message().find("unreachable"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("no route to 10.0.0.1"), std::string::npos) << r.status().to_string();
  EXPECT_TRUE(server_->jobs().empty());
  EXPECT_TRUE(sink_.installs().empty());
}

TEST_F(ServerTest, JobStartsOnceEveryNextHopResolvedAndCarriesTheirIndices) {
  TestNextHops hops(neighbour::RoutingTable(0x0A0000FE, 24, 0, {}));
  ServerOptions o = options();
  o.next_hops = &hops;
  start(o);
  Member a = begin_register(request("arp", 2, 0));
  Member b = begin_register(request("arp", 2, 1));
  ASSERT_TRUE(wait_registered("arp", 2));
  hops.answer(0x0A000001, 1);
  EXPECT_TRUE(sink_.installs().empty());  // rank 1's next hop is still unresolved
  EXPECT_FALSE(server_->jobs()[0].running);
  hops.answer(0x0A000002, 2);
  ASSERT_TRUE(a.pending.get().ok());
  ASSERT_TRUE(b.pending.get().ok());
  const auto installs = sink_.installs();
  ASSERT_EQ(installs.size(), 1u);
  uint8_t mac[6];
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_NE(installs[0].members[r].next_hop, kNoNextHop);
    ASSERT_TRUE(hops.table().mac(installs[0].members[r].next_hop, mac));
    EXPECT_EQ(mac[5], r + 1);
  }
}

TEST_F(ServerTest, NextHopWithoutArpAnswerRefusesEveryRankNamingIt) {
  TestNextHops hops(neighbour::RoutingTable(0x0A0000FE, 24, 0, {}));
  ServerOptions o = options();
  o.next_hops = &hops;
  start(o);
  Member a = begin_register(request("mute", 2, 0));
  Member b = begin_register(request("mute", 2, 1));
  ASSERT_TRUE(wait_registered("mute", 2));
  hops.answer(0x0A000001, 1);
  hops.advance(1000);  // rank 1 never answers: its entry fails after 3 requests
  for (Member* m : {&a, &b}) {
    Result<JobGrant> g = m->pending.get();
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("unreachable"), std::string::npos) << g.status().to_string();
    EXPECT_NE(g.status().message().find("rank 1 of job 'mute'"), std::string::npos) << g.status().to_string();
    EXPECT_NE(g.status().message().find("no ARP reply from 10.0.0.2"), std::string::npos) << g.status().to_string();
  }
  EXPECT_TRUE(sink_.installs().empty());
  EXPECT_TRUE(wait_for([&] { return server_->jobs().empty(); }, kWait));
}

}  // namespace
}  // namespace sumcast::control
