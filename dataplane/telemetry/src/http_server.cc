#include "sumcast/telemetry/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "sumcast/ipv4.h"

namespace sumcast::telemetry {
namespace {

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Error";
  }
}

// Writes all of `data` (blocking socket with a send timeout); false on error.
bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void respond(int fd, const HttpResponse& r, bool head) {
  std::string out = "HTTP/1.0 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  out += "Connection: close\r\n\r\n";
  if (!head) out += r.body;
  write_all(fd, out);
}

}  // namespace

bool parse_address(const std::string& text, uint32_t* ip, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= text.size()) return false;
  const std::string host = text.substr(0, colon);
  const std::string p = text.substr(colon + 1);
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  const unsigned long v = std::strtoul(p.c_str(), nullptr, 10);
  if (v > 65535) return false;
  const std::optional<uint32_t> address = parse_ipv4(host);
  if (!address) return false;
  *ip = *address;
  *port = static_cast<uint16_t>(v);
  return true;
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->options_ = std::move(options);
  const std::string& address = s->options_.address;
  uint32_t ip = 0;
  uint16_t port = 0;
  if (!parse_address(address, &ip, &port)) {
    return Status::invalid_argument("metrics server: \"" + address + "\" is not ip:port");
  }
  s->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) return Status::from_errno("metrics server " + address + ": socket");
  const int one = 1;
  setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(ip);
  sa.sin_port = htons(port);
  if (::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return Status::from_errno("metrics server: bind " + address);
  }
  if (::listen(s->listen_fd_, 16) != 0) return Status::from_errno("metrics server: listen " + address);
  socklen_t len = sizeof(sa);
  if (::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return Status::from_errno("metrics server: getsockname " + address);
  }
  s->port_ = ntohs(sa.sin_port);
  s->stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->stop_fd_ < 0) return Status::from_errno("metrics server: eventfd");
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
  listen_fd_ = stop_fd_ = -1;
}

HttpCounters HttpServer::counters() const {
  return {requests_.load(std::memory_order_relaxed), not_found_.load(std::memory_order_relaxed),
          bad_requests_.load(std::memory_order_relaxed)};
}

void HttpServer::run() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve(fd);
    ::close(fd);
  }
}

// Reads one request (until the blank line), answers it.
void HttpServer::serve(int fd) {
  timeval tv{};
  tv.tv_sec = options_.read_timeout_ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>(options_.read_timeout_ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

  std::string req;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.read_timeout_ms);
  while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
    if (req.size() >= kMaxRequestBytes) {
      bad_requests_.fetch_add(1, std::memory_order_relaxed);
      respond(fd, {431, "text/plain; charset=utf-8", "request too large\n"}, false);
      return;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int rc = left > 0 ? ::poll(fds, 2, static_cast<int>(left)) : 0;
    if (rc < 0 && errno == EINTR) continue;
    if ((fds[1].revents & POLLIN) != 0) return;  // stopping
    if (rc <= 0) {
      bad_requests_.fetch_add(1, std::memory_order_relaxed);
      respond(fd, {408, "text/plain; charset=utf-8", "request timeout\n"}, false);
      return;
    }
    char buf[2048];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away
    req.append(buf, static_cast<size_t>(n));
  }

  // Request line: METHOD SP target SP HTTP/x.y
  const std::string line = req.substr(0, req.find_first_of("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0) {
    bad_requests_.fetch_add(1, std::memory_order_relaxed);
    respond(fd, {400, "text/plain; charset=utf-8", "bad request line\n"}, false);
    return;
  }
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (const size_t q = path.find('?'); q != std::string::npos) path.resize(q);
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    bad_requests_.fetch_add(1, std::memory_order_relaxed);
    respond(fd, {405, "text/plain; charset=utf-8", "only GET and HEAD\n"}, false);
    return;
  }
  if (path == "/") {
    std::string body = "Sumcast appliance\n";
    for (const HttpRoute& r : options_.routes) body += r.path + "  " + r.description + "\n";
    requests_.fetch_add(1, std::memory_order_relaxed);
    respond(fd, {200, "text/plain; charset=utf-8", body}, head);
    return;
  }
  for (const HttpRoute& r : options_.routes) {
    if (r.path == path) {
      requests_.fetch_add(1, std::memory_order_relaxed);
      respond(fd, r.handler(), head);
      return;
    }
  }
  not_found_.fetch_add(1, std::memory_order_relaxed);
  respond(fd, {404, "text/plain; charset=utf-8", "no such path; try /metrics\n"}, head);
}

}  // namespace sumcast::telemetry
