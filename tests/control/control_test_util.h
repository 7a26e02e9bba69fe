// Helpers shared by the control-plane tests: a fake JobSink, deadline waits, raw sockets.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "sumcast/control/server.h"
#include "sumcast/wire/control.h"

namespace sumcast::control::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Polls `pred` until it holds or `timeout` passes. A bounded wait on a condition, not a delay:
// it returns as soon as the condition holds.
inline bool wait_for(const std::function<bool()>& pred, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (Clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(milliseconds(2));
  }
}

// The dataplane, in memory: records installs and removes; progress is set by the test.
class FakeSink : public JobSink {
 public:
  struct Removal {
    uint32_t job_id;
    wire::AbortReason reason;
  };

  Status install(const engine::JobSpec& spec) override {
    std::lock_guard<std::mutex> lock(mu_);
    installs_.push_back(spec);
    cv_.notify_all();
    return install_result_;
  }
  void remove(uint32_t job_id, wire::AbortReason reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    removals_.push_back({job_id, reason});
    cv_.notify_all();
  }
  uint64_t progress(uint32_t job_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return progress_[job_id];
  }
  uint64_t waiting_rounds(uint32_t job_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiting_.find(job_id);
    return it == waiting_.end() ? 1 : it->second;  // by default every job has a round waiting
  }
  void set_waiting_rounds(uint32_t job_id, uint64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_[job_id] = n;
  }

  void set_install_result(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    install_result_ = std::move(s);
  }
  void add_progress(uint32_t job_id, uint64_t n = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    progress_[job_id] += n;
  }
  std::vector<engine::JobSpec> installs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return installs_;
  }
  std::vector<Removal> removals() const {
    std::lock_guard<std::mutex> lock(mu_);
    return removals_;
  }
  // Waits until the job was removed; returns its reason, or false after `timeout`.
  bool wait_removed(uint32_t job_id, wire::AbortReason* reason, milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    auto find = [&] {
      for (const auto& r : removals_) {
        if (r.job_id == job_id) {
          *reason = r.reason;
          return true;
        }
      }
      return false;
    };
    return cv_.wait_for(lock, timeout, find);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<engine::JobSpec> installs_;
  std::vector<Removal> removals_;
  std::map<uint32_t, uint64_t> progress_;
  std::map<uint32_t, uint64_t> waiting_;
  Status install_result_;
};

// A plain blocking TCP socket to 127.0.0.1:port, for speaking (or not speaking) the protocol by hand.
class RawSocket {
 public:
  struct Adopt {};
  // Takes ownership of a connected socket (e.g. one returned by accept()).
  RawSocket(Adopt, int fd) : fd_(fd), connected_(fd >= 0) {}
  explicit RawSocket(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0;
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool send_bytes(const std::vector<uint8_t>& b) {
    return ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
  }
  template <typename M>
  bool send_msg(const M& m) {
    std::vector<uint8_t> b;
    if (wire::encode_append(m, &b) != wire::ControlError::kOk) return false;
    return send_bytes(b);
  }
  // Reads one message and decodes it as M; false when it is not a valid M.
  template <typename M>
  bool read_as(M* out, milliseconds timeout) {
    const std::vector<uint8_t> b = read_msg(timeout);
    return !b.empty() && wire::decode(std::span<const uint8_t>(b), out) == wire::ControlError::kOk;
  }
  // Reads one whole message (header + body) within `timeout`; empty on EOF, error or timeout.
  std::vector<uint8_t> read_msg(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      wire::ControlHeader h;
      std::span<const uint8_t> body;
      const auto e = wire::split_control_message(buf_, &h, &body);
      if (e == wire::ControlError::kOk) {
        std::vector<uint8_t> msg(buf_.begin(),
                                 buf_.begin() + static_cast<std::ptrdiff_t>(wire::kControlHeaderLen + h.body_len));
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(msg.size()));
        return msg;
      }
      if (e != wire::ControlError::kTruncatedHeader && e != wire::ControlError::kTruncatedBody) return {};
      uint8_t tmp[4096];
      const ssize_t n = recv_until(tmp, sizeof tmp, deadline);
      if (n <= 0) return {};
      buf_.insert(buf_.end(), tmp, tmp + n);
    }
  }
  // True when the peer closed the connection (EOF or reset) within `timeout`; bytes that arrive
  // first are discarded.
  bool wait_closed(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      uint8_t tmp[4096];
      const ssize_t n = recv_until(tmp, sizeof tmp, deadline);
      if (n == 0) return true;
      if (n < 0) return errno != ETIMEDOUT;
    }
  }

 private:
  // recv with a deadline: >0 bytes, 0 EOF, -1 with errno (ETIMEDOUT when the deadline passed).
  ssize_t recv_until(uint8_t* p, size_t n, Clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        errno = ETIMEDOUT;
        return -1;
      }
      pollfd pfd{fd_, POLLIN, 0};
      const int r = ::poll(&pfd, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        if (r == 0) errno = ETIMEDOUT;
        return -1;
      }
      return ::recv(fd_, p, n, 0);
    }
  }

  int fd_ = -1;
  bool connected_ = false;
  std::vector<uint8_t> buf_;
};

}  // namespace sumcast::control::testing
