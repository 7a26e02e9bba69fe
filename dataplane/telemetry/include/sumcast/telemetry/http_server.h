// The HTTP endpoint for metrics scrapes, on civetweb (an embeddable server, Debian's libcivetweb):
// one worker thread, so one connection at a time, GET and HEAD only, no keep-alive (every response
// closes its connection), no files served. Paths are looked up in a fixed table of handlers given
// at start; "/" lists them. Enough for Prometheus and curl.
//
// Limits: a request's line and headers are at most kMaxRequestBytes and must arrive whole within
// the read timeout; civetweb answers anything else with an error status (400) and closes.
// Handlers run on the server's worker thread.
//
// Thread safety: start() and stop() from one thread; counters() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct mg_connection;
struct mg_context;

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
  uint32_t ip = 0x7F000001;  // address to listen on, host order (127.0.0.1); 0 = every address
  uint16_t port = 0;         // 0 picks a free one (see port())
  uint32_t read_timeout_ms = 2000;
  std::vector<HttpRoute> routes;
};

struct HttpCounters {
  uint64_t requests = 0;      // answered with 200
  uint64_t not_found = 0;     // 404
  uint64_t bad_requests = 0;  // every other error status (400 from civetweb, 405, ...)
};

class HttpServer {
 public:
  // Binds, listens and starts the thread. Errors name the address and errno.
  static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Idempotent; returns when civetweb's threads have exited (an exchange in progress is cut short
  // at the latest by the read timeout).
  void stop();
  uint16_t port() const { return port_; }
  HttpCounters counters() const;

 private:
  HttpServer() = default;
  static int on_request(mg_connection* conn, void* self);
  static int on_error(mg_connection* conn, int status, const char* message);
  void respond(mg_connection* conn, const HttpResponse& r, bool head);

  HttpServerOptions options_;
  mg_context* ctx_ = nullptr;
  uint16_t port_ = 0;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> not_found_{0};
  std::atomic<uint64_t> bad_requests_{0};
};

}  // namespace sumcast::telemetry
