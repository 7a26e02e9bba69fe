#include "sumcast/mpi/async_engine.h"

#include <poll.h>

#include <algorithm>

namespace sumcast::mpi {
namespace {
// The background thread sleeps at most this long between rounds while calls are outstanding:
// the communicator's retransmission timers (5 ms and up) need a turn even when no packet comes.
constexpr int kIdlePollMs = 2;
}  // namespace

AsyncEngine::AsyncEngine(bool background_thread) : background_(background_thread) {}

AsyncEngine::~AsyncEngine() { stop(); }

void AsyncEngine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

size_t AsyncEngine::outstanding() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(std::count_if(active_.begin(), active_.end(), [](const auto& p) { return !p->done(); }));
}

Result<std::shared_ptr<Pending>> AsyncEngine::start(const std::shared_ptr<Job>& job, const void* send, void* recv,
                                                    size_t count) {
  auto p = std::make_shared<Pending>();
  p->job_ = job;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    auto id = job->comm->start_allreduce(send, recv, count);
    if (!id.ok()) return id.status();
    p->id_ = *id;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(active_, [](const auto& a) { return a->done(); });
    active_.push_back(p);
    if (background_ && !stopping_ && !thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_one();
  return p;
}

void AsyncEngine::complete_locked(Pending& p) {
  if (p.done()) return;
  Status st;
  if (p.job_->comm->test(p.id_, &st)) {
    p.status_ = std::move(st);
    p.done_.store(true, std::memory_order_release);
  }
}

bool AsyncEngine::test(Pending& p) {
  if (p.done()) return true;
  std::lock_guard<std::mutex> lock(p.job_->mu);
  complete_locked(p);
  return p.done();
}

bool AsyncEngine::step(Pending& p, int timeout_ms) {
  if (test(p)) return true;
  pollfd fd{p.job_->comm->transport().wait_fd(), POLLIN, 0};
  (void)::poll(&fd, fd.fd >= 0 ? 1 : 0, timeout_ms);
  return test(p);
}

void AsyncEngine::wait(Pending& p) {
  if (p.done()) return;
  std::lock_guard<std::mutex> lock(p.job_->mu);
  if (p.done()) return;
  Status st = p.job_->comm->wait(p.id_);
  p.status_ = std::move(st);
  p.done_.store(true, std::memory_order_release);
}

void AsyncEngine::run() {
  std::vector<std::shared_ptr<Pending>> work;
  std::vector<pollfd> fds;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::erase_if(active_, [](const auto& a) { return a->done(); });
    if (stopping_) return;
    if (active_.empty()) {
      cv_.wait(lock);
      continue;
    }
    work = active_;
    lock.unlock();
    fds.clear();
    for (auto& p : work) {
      if (p->done()) continue;
      std::unique_lock<std::mutex> job_lock(p->job_->mu, std::try_to_lock);
      if (!job_lock.owns_lock()) continue;  // a program thread is progressing this job right now
      complete_locked(*p);
      if (p->done()) continue;
      const int fd = p->job_->comm->transport().wait_fd();
      if (fd >= 0 && std::none_of(fds.begin(), fds.end(), [&](const pollfd& f) { return f.fd == fd; })) {
        fds.push_back({fd, POLLIN, 0});
      }
    }
    work.clear();  // the last reference to a finished call may go here, not under mu_
    (void)::poll(fds.data(), fds.size(), kIdlePollMs);
    lock.lock();
  }
}

}  // namespace sumcast::mpi
