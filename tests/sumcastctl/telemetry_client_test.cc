// sumcastctl's telemetry client (sumcast/ctl/telemetry_client.h) against a fake DPDK telemetry
// server on a SOCK_SEQPACKET socket: greeting, one reply per command, and the failure modes
// (nothing listening, silence, garbage).
#include "sumcast/ctl/telemetry_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

namespace sumcast::ctl {
namespace {

// Serves one connection: sends `greeting`, then answers each request with reply(request); an
// empty answer means "say nothing" (the client must time out).
class FakeTelemetry {
 public:
  FakeTelemetry(std::string greeting, std::function<std::string(const std::string&)> reply)
      : path_("/tmp/sumcastctl-test-" + std::to_string(getpid()) + "-" + std::to_string(counter_++)) {
    ::unlink(path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof(a.sun_path) - 1);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listen_fd_, 1), 0);
    thread_ = std::thread([this, greeting = std::move(greeting), reply = std::move(reply)] {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      ::send(fd, greeting.data(), greeting.size(), 0);
      char buf[1024];
      for (;;) {
        const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        const std::string answer = reply(std::string(buf, static_cast<size_t>(n)));
        if (!answer.empty()) ::send(fd, answer.data(), answer.size(), 0);
      }
      ::close(fd);
    });
  }
  ~FakeTelemetry() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    if (thread_.joinable()) thread_.join();
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
  int listen_fd_ = -1;
  std::thread thread_;
};

constexpr const char* kGreeting = R"({"version":"DPDK 22.11.11","pid":4242,"max_output_len":16384})";

TEST(TelemetryClientTest, SocketPathFollowsEalRules) {
  if (getuid() == 0) {
    EXPECT_EQ(telemetry_socket_path("sc1"), "/var/run/dpdk/sc1/dpdk_telemetry.v2");
  } else {
    EXPECT_NE(telemetry_socket_path("sc1").find("/dpdk/sc1/dpdk_telemetry.v2"), std::string::npos);
  }
}

TEST(TelemetryClientTest, GreetingThenOneReplyPerCommand) {
  FakeTelemetry server(kGreeting, [](const std::string& cmd) {
    const std::string name = cmd.substr(0, cmd.find(','));
    return "{\"" + name + "\":{\"asked\":\"" + cmd + "\",\"n\":7}}";
  });
  auto client = TelemetryClient::connect(server.path(), 2000);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  EXPECT_EQ(uint_at((*client)->greeting(), "pid"), 4242u);
  for (const std::string cmd : {"/sumcast/stats", "/sumcast/stats,1"}) {
    Result<Json> v = (*client)->query(cmd);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(string_at(*v, "asked"), cmd);
    EXPECT_EQ(uint_at(*v, "n"), 7u);
  }
}

TEST(TelemetryClientTest, NullForAnUnknownCommand) {
  FakeTelemetry server(kGreeting, [](const std::string& cmd) { return "{\"" + cmd + "\":null}"; });
  auto client = TelemetryClient::connect(server.path(), 2000);
  ASSERT_TRUE(client.ok());
  Result<Json> v = (*client)->query("/nope");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->is_null());
}

TEST(TelemetryClientTest, NothingListeningIsNotFoundNamingThePath) {
  const std::string path = "/tmp/sumcastctl-test-none-" + std::to_string(getpid());
  auto client = TelemetryClient::connect(path, 200);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kNotFound);
  EXPECT_NE(client.status().message().find(path), std::string::npos);
}

TEST(TelemetryClientTest, SilenceTimesOut) {
  FakeTelemetry server(kGreeting, [](const std::string&) { return std::string(); });
  auto client = TelemetryClient::connect(server.path(), 100);
  ASSERT_TRUE(client.ok());
  const auto t0 = std::chrono::steady_clock::now();
  Result<Json> v = (*client)->query("/sumcast/stats");
  EXPECT_EQ(v.status().code(), StatusCode::kTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

TEST(TelemetryClientTest, GarbageReplyIsRejected) {
  FakeTelemetry server(kGreeting, [](const std::string&) { return std::string("{\"x\":"); });
  auto client = TelemetryClient::connect(server.path(), 2000);
  ASSERT_TRUE(client.ok());
  Result<Json> v = (*client)->query("/sumcast/stats");
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
}

TEST(TelemetryClientTest, ReplyWithTwoMembersIsRejected) {
  FakeTelemetry server(kGreeting, [](const std::string&) { return std::string(R"({"a":1,"b":2})"); });
  auto client = TelemetryClient::connect(server.path(), 2000);
  ASSERT_TRUE(client.ok());
  EXPECT_FALSE((*client)->query("/a").ok());
}

}  // namespace
}  // namespace sumcast::ctl
