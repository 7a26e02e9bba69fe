// The metrics endpoint (http_server.h) over civetweb: one request handler for every path, which
// looks the path up in the route table; civetweb's own errors (malformed requests, oversized
// headers) are counted through its http_error callback.
#include "sumcast/telemetry/http_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "sumcast/ipv4.h"

namespace sumcast::telemetry {
namespace {

// civetweb's global state is set up once per process, before the first server starts.
void init_civetweb_once() {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->options_ = std::move(options);
  const std::string address = format_ipv4(s->options_.ip) + ":" + std::to_string(s->options_.port);
  init_civetweb_once();
  const std::string timeout = std::to_string(s->options_.read_timeout_ms);
  const std::string max_request = std::to_string(kMaxRequestBytes);
  const char* config[] = {"listening_ports",
                          address.c_str(),
                          "num_threads",
                          "1",
                          "request_timeout_ms",
                          timeout.c_str(),
                          "max_request_size",
                          max_request.c_str(),
                          "enable_keep_alive",
                          "no",
                          "listen_backlog",
                          "16",
                          nullptr};
  mg_callbacks callbacks{};
  callbacks.http_error = &HttpServer::on_error;
  // Without a log_message callback civetweb prints its errors to stderr; they are returned below.
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  char error[256] = {0};
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.user_data = s.get();
  init.configuration_options = config;
  mg_error_data err{};
  err.text = error;
  err.text_buffer_size = sizeof(error);
  s->ctx_ = mg_start2(&init, &err);
  if (s->ctx_ == nullptr) {
    return Status::unavailable("metrics server " + address + ": " + (error[0] ? error : "civetweb did not start"));
  }
  mg_set_request_handler(s->ctx_, "/", &HttpServer::on_request, s.get());
  mg_server_port ports[1]{};
  if (mg_get_server_ports(s->ctx_, 1, ports) != 1) {
    return Status::internal("metrics server " + address + ": civetweb reports no listening port");
  }
  s->port_ = static_cast<uint16_t>(ports[0].port);
  return s;
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::stop() {
  if (ctx_ == nullptr) return;
  // civetweb's listening thread polls with a fixed quantum (2 s) before it sees the stop flag; a
  // connection to the listening port wakes it at once. The waker connects until mg_stop returns.
  const uint32_t ip = options_.ip == INADDR_ANY ? INADDR_LOOPBACK : options_.ip;
  std::atomic<bool> stopped{false};
  std::thread waker([&] {
    while (!stopped.load(std::memory_order_acquire)) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0) {
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(ip);
        sa.sin_port = htons(port_);
        (void)::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
        ::close(fd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // pacing, not synchronisation
    }
  });
  mg_stop(ctx_);
  stopped.store(true, std::memory_order_release);
  waker.join();
  ctx_ = nullptr;
}

HttpCounters HttpServer::counters() const {
  return {requests_.load(std::memory_order_relaxed), not_found_.load(std::memory_order_relaxed),
          bad_requests_.load(std::memory_order_relaxed)};
}

void HttpServer::respond(mg_connection* conn, const HttpResponse& r, bool head) {
  mg_response_header_start(conn, r.status);
  mg_response_header_add(conn, "Content-Type", r.content_type.c_str(), -1);
  mg_response_header_add(conn, "Content-Length", std::to_string(r.body.size()).c_str(), -1);
  mg_response_header_add(conn, "Connection", "close", -1);
  mg_response_header_send(conn);
  if (!head && !r.body.empty()) mg_write(conn, r.body.data(), r.body.size());
}

int HttpServer::on_request(mg_connection* conn, void* self_ptr) {
  auto* self = static_cast<HttpServer*>(self_ptr);
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string method = info->request_method ? info->request_method : "";
  const std::string path = info->local_uri ? info->local_uri : "";  // without the query string
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    self->bad_requests_.fetch_add(1, std::memory_order_relaxed);
    self->respond(conn, {405, "text/plain; charset=utf-8", "only GET and HEAD\n"}, false);
    return 405;
  }
  if (path == "/") {
    std::string body = "Sumcast appliance\n";
    for (const HttpRoute& r : self->options_.routes) body += r.path + "  " + r.description + "\n";
    self->requests_.fetch_add(1, std::memory_order_relaxed);
    self->respond(conn, {200, "text/plain; charset=utf-8", body}, head);
    return 200;
  }
  for (const HttpRoute& r : self->options_.routes) {
    if (r.path == path) {
      self->requests_.fetch_add(1, std::memory_order_relaxed);
      const HttpResponse response = r.handler();
      self->respond(conn, response, head);
      return response.status;
    }
  }
  self->not_found_.fetch_add(1, std::memory_order_relaxed);
  self->respond(conn, {404, "text/plain; charset=utf-8", "no such path; try /metrics\n"}, head);
  return 404;
}

// civetweb's own error answers (a malformed request line, headers past max_request_size, ...):
// counted, then left to civetweb to send (returning non-zero).
int HttpServer::on_error(mg_connection* conn, int status, const char*) {
  auto* self = static_cast<HttpServer*>(mg_get_user_data(mg_get_context(conn)));
  if (self != nullptr) {
    if (status == 404) {
      self->not_found_.fetch_add(1, std::memory_order_relaxed);
    } else {
      self->bad_requests_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return 1;
}

}  // namespace sumcast::telemetry
