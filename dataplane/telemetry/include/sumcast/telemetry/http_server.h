// A small HTTP/1.0 server for metrics scrapes: one thread, one connection at a time, GET and HEAD
// only, every response closes its connection. Paths are looked up in a fixed table of handlers
// given at start; "/" lists them. Enough for Prometheus and curl; not a general web server.
//
// A request must arrive whole (request line and headers, at most kMaxRequestBytes) within the
// read timeout, else the connection is closed (408). Handlers run on the server thread.
//
// Thread safety: start() and stop() from one thread; counters() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sumcast/status.h"

namespace sumcast::telemetry {

inline constexpr size_t kMaxRequestBytes = 8192;

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct HttpRoute {
  std::string path;         // exact match, e.g. "/metrics" (a query string is ignored)
  std::string description;  // for the "/" index
  std::function<HttpResponse()> handler;
};

struct HttpServerOptions {
  std::string address = "127.0.0.1:0";  // "ip:port"; port 0 picks a free one (see port())
  uint32_t read_timeout_ms = 2000;
  std::vector<HttpRoute> routes;
};

struct HttpCounters {
  uint64_t requests = 0;      // answered with 200
  uint64_t not_found = 0;     // 404
  uint64_t bad_requests = 0;  // 400, 405, 408, 431
};

class HttpServer {
 public:
  // Binds, listens and starts the thread. Errors name the address and errno.
  static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Idempotent; returns when the thread has exited (an exchange in progress is cut short).
  void stop();
  uint16_t port() const { return port_; }
  HttpCounters counters() const;

 private:
  HttpServer() = default;
  void run();
  void serve(int fd);

  HttpServerOptions options_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: written by stop()
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> not_found_{0};
  std::atomic<uint64_t> bad_requests_{0};
};

// Splits "a.b.c.d:port" (port 0..65535). False when malformed.
bool parse_address(const std::string& text, uint32_t* ip_host_order, uint16_t* port);

}  // namespace sumcast::telemetry
