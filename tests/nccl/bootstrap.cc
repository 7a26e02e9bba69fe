#include "bootstrap.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace sumcast::nccl_test {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("bootstrap: " + what + ": " + std::strerror(errno));
}

sockaddr_un address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path)) throw std::runtime_error("bootstrap: socket path too long: " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size());
  return a;
}

void wait_io(int fd, short events, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  pollfd p{fd, events, 0};
  if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) throw std::runtime_error("bootstrap: timed out");
}

void write_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    wait_io(fd, POLLOUT, deadline);
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("send");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    wait_io(fd, POLLIN, deadline);
    const ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("recv (peer gone?)");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

}  // namespace

Bootstrap::Bootstrap(const std::string& path, int rank, int nranks, int timeout_ms)
    : rank_(rank), nranks_(nranks), timeout_ms_(timeout_ms), path_(path) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const sockaddr_un a = address(path);
  if (rank == 0) {
    unlink(path.c_str());
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(listen_fd_, nranks) != 0) {
      fail("listen on " + path);
    }
    peers_.assign(static_cast<size_t>(nranks), -1);
    for (int i = 1; i < nranks; ++i) {
      wait_io(listen_fd_, POLLIN, deadline);
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) fail("accept");
      int32_t peer = -1;
      read_all(fd, &peer, sizeof(peer), deadline);
      if (peer < 1 || peer >= nranks || peers_[static_cast<size_t>(peer)] >= 0) {
        throw std::runtime_error("bootstrap: bad or duplicate rank " + std::to_string(peer));
      }
      peers_[static_cast<size_t>(peer)] = fd;
    }
    return;
  }
  // Rank 0 may not have created the socket yet: retry until it has (bounded by the deadline).
  for (;;) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket");
    if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) {
      peers_.push_back(fd);
      break;
    }
    close(fd);
    if (errno != ENOENT && errno != ECONNREFUSED) fail("connect to " + path);
    if (Clock::now() > deadline) throw std::runtime_error("bootstrap: rank 0 never opened " + path);
    pollfd none{-1, 0, 0};
    poll(&none, 1, 10);  // rank 0 is starting: look again in 10 ms
  }
  const int32_t me = rank;
  write_all(peers_[0], &me, sizeof(me), deadline);
}

Bootstrap::~Bootstrap() {
  for (int fd : peers_) {
    if (fd >= 0) close(fd);
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
}

std::string Bootstrap::allgather(const std::string& mine) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  const size_t n = mine.size();
  if (rank_ != 0) {
    write_all(peers_[0], mine.data(), n, deadline);
    std::string all(n * static_cast<size_t>(nranks_), '\0');
    read_all(peers_[0], all.data(), all.size(), deadline);
    return all;
  }
  std::string all(n * static_cast<size_t>(nranks_), '\0');
  std::memcpy(all.data(), mine.data(), n);
  for (int i = 1; i < nranks_; ++i) read_all(peers_[static_cast<size_t>(i)], all.data() + n * i, n, deadline);
  for (int i = 1; i < nranks_; ++i) write_all(peers_[static_cast<size_t>(i)], all.data(), all.size(), deadline);
  return all;
}

}  // namespace sumcast::nccl_test
