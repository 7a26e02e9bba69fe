// Unit tests of sumcast::telemetry::HttpServer (civetweb underneath) over loopback: routes, HEAD,
// errors (404, 405, civetweb's 400 for a malformed, oversized or unfinished request), a port
// already taken, stop() with a client connected.
#include "sumcast/telemetry/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>

namespace sumcast::telemetry {
namespace {

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` and reads until the server closes the connection.
std::string exchange(uint16_t port, const std::string& request) {
  const int fd = connect_to(port);
  if (fd < 0) return "connect failed";
  if (!request.empty()) ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.0 ", 0) != 0 && response.rfind("HTTP/1.1 ", 0) != 0) return -1;
  return std::stoi(response.substr(9, 3));
}

std::string body_of(const std::string& response) {
  const size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions o;
    o.ip = 0x7F000001;  // 127.0.0.1, a free port
    o.read_timeout_ms = 300;
    o.routes.push_back({"/metrics", "the metrics", [this] {
                          ++calls_;
                          return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                                              "metric_a 1\nmetric_b " + std::to_string(calls_.load()) + "\n"};
                        }});
    auto s = HttpServer::start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s.value());
    ASSERT_NE(server_->port(), 0);
  }
  std::atomic<int> calls_{0};
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, GetOfARouteReturnsItsBodyWithContentLength) {
  const std::string r = exchange(server_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(body_of(r), "metric_a 1\nmetric_b 1\n");
  EXPECT_NE(r.find("Content-Length: 22\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos);
  EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos);
  // Each request calls the handler anew; a query string is ignored.
  EXPECT_EQ(body_of(exchange(server_->port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n")), "metric_a 1\nmetric_b 2\n");
  EXPECT_EQ(server_->counters().requests, 2u);
}

TEST_F(HttpServerTest, HeadHasTheHeadersAndNoBody) {
  const std::string r = exchange(server_->port(), "HEAD /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(status_of(r), 200);
  EXPECT_EQ(body_of(r), "");
  EXPECT_NE(r.find("Content-Length: 22\r\n"), std::string::npos) << r;
}

TEST_F(HttpServerTest, RootListsTheRoutes) {
  const std::string r = exchange(server_->port(), "GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(status_of(r), 200);
  EXPECT_NE(body_of(r).find("/metrics  the metrics"), std::string::npos) << r;
}

TEST_F(HttpServerTest, ErrorsGetTheirStatusAndAreCounted) {
  EXPECT_EQ(status_of(exchange(server_->port(), "GET /nothing HTTP/1.0\r\n\r\n")), 404);
  EXPECT_EQ(status_of(exchange(server_->port(), "POST /metrics HTTP/1.0\r\n\r\n")), 405);
  EXPECT_EQ(status_of(exchange(server_->port(), "garbage\r\n\r\n")), 400);
  EXPECT_EQ(status_of(exchange(server_->port(), "GET /metrics HTTP/1.0\r\n" + std::string(kMaxRequestBytes, 'x'))),
            400);
  // Half a request: the server gives up after its read timeout (the client just waits for the answer).
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(status_of(exchange(server_->port(), "GET /metr")), 400);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "the read timeout is 300 ms";
  EXPECT_EQ(server_->counters().not_found, 1u);
  EXPECT_EQ(server_->counters().bad_requests, 4u);
  EXPECT_EQ(calls_.load(), 0);
  // Still serving after all that.
  EXPECT_EQ(status_of(exchange(server_->port(), "GET /metrics HTTP/1.0\r\n\r\n")), 200);
}

TEST_F(HttpServerTest, ClientThatLeavesEarlyDoesNotStopTheServer) {
  const int fd = connect_to(server_->port());
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(status_of(exchange(server_->port(), "GET /metrics HTTP/1.0\r\n\r\n")), 200);
}

TEST_F(HttpServerTest, StopReturnsWhileAClientHoldsAConnectionOpen) {
  const int fd = connect_to(server_->port());
  ASSERT_GE(fd, 0);
  ::send(fd, "GET", 3, MSG_NOSIGNAL);
  const auto t0 = std::chrono::steady_clock::now();
  server_->stop();  // waits for the client at most the read timeout (300 ms)
  server_->stop();  // idempotent
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ::close(fd);
  EXPECT_EQ(connect_to(server_->port()), -1);
}

TEST(HttpServerStartTest, PortInUseIsAnErrorNamingTheAddress) {
  auto first = HttpServer::start({0x7F000001, 0, 1000, {}});
  ASSERT_TRUE(first.ok());
  const std::string address = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = HttpServer::start({0x7F000001, (*first)->port(), 1000, {}});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(address), std::string::npos) << second.status().message();
}

}  // namespace
}  // namespace sumcast::telemetry
