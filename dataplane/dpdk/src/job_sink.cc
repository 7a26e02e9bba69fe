#include "sumcast/dpdk/job_sink.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "tsan_ring.h"

namespace sumcast::dpdk {
namespace {

using Msgs = std::vector<std::unique_ptr<ControlMsg>>;
using Clock = std::chrono::steady_clock;

}  // namespace

LcoreJobSink::LcoreJobSink(std::vector<LcoreContext*> cores, uint32_t ack_timeout_ms)
    : cores_(std::move(cores)), ack_timeout_ms_(ack_timeout_ms), in_flight_(cores_.size(), 0) {}

LcoreJobSink::~LcoreJobSink() {
  // The lcores returned: every message still in a ring is an orphan we own.
  for (LcoreContext* core : cores_) {
    void* p = nullptr;
    while (rte_ring_sc_dequeue(core->ack_ring, &p) == 0) {
    }
    while (rte_ring_sc_dequeue(core->control_ring, &p) == 0) {
    }
  }
  for (ControlMsg* m : orphans_) delete m;
}

std::vector<uint32_t> LcoreJobSink::post_and_wait(Msgs& msgs) {
  std::vector<LcoreContext*>& cores = cores_;
  std::vector<uint32_t>& in_flight = in_flight_;
  std::unordered_set<ControlMsg*>& orphans = orphans_;
  const size_t n = cores.size();
  std::vector<bool> pending(n, false);
  size_t waiting = 0;
  for (size_t i = 0; i < n; ++i) {
    if (msgs[i] == nullptr) continue;
    ring_release(cores[i]->control_ring);
    if (in_flight[i] + 1 >= kControlRingSize || rte_ring_sp_enqueue(cores[i]->control_ring, msgs[i].get()) != 0) {
      msgs[i]->result = Status::unavailable("core " + std::to_string(i) + ": control ring full");
      continue;
    }
    ++in_flight[i];
    pending[i] = true;
    ++waiting;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(ack_timeout_ms_);
  while (waiting > 0) {
    bool progress = false;
    for (size_t i = 0; i < n; ++i) {
      void* p = nullptr;
      while (rte_ring_sc_dequeue(cores[i]->ack_ring, &p) == 0) {
        ring_acquire(cores[i]->ack_ring);
        progress = true;
        --in_flight[i];
        auto* m = static_cast<ControlMsg*>(p);
        if (pending[i] && m == msgs[i].get()) {
          pending[i] = false;
          --waiting;
        } else if (orphans.erase(m) > 0) {
          delete m;  // acked after its caller gave up
        }
      }
    }
    if (waiting == 0 || Clock::now() >= deadline) break;
    if (!progress) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  std::vector<uint32_t> timed_out;
  for (size_t i = 0; i < n; ++i) {
    if (!pending[i]) continue;
    timed_out.push_back(static_cast<uint32_t>(i));
    orphans.insert(msgs[i].release());
  }
  return timed_out;
}

Status LcoreJobSink::install(const engine::JobSpec& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string job = "job " + std::to_string(spec.job_id);
  if (closed_) return Status::unavailable(job + ": the dataplane is stopping");
  auto shared = std::make_shared<const engine::JobSpec>(spec);
  const size_t n = cores_.size();
  Msgs msgs(n);
  for (size_t i = 0; i < n; ++i) {
    msgs[i] = std::make_unique<ControlMsg>();
    msgs[i]->kind = ControlMsg::Kind::kAddJob;
    msgs[i]->spec = shared;
  }
  (void)post_and_wait(msgs);

  std::string errors;
  StatusCode code = StatusCode::kOk;
  std::vector<bool> undo(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (msgs[i] == nullptr) {  // timed out: it may still be installed later
      undo[i] = true;
      errors += (errors.empty() ? "" : "; ") + std::string("core ") + std::to_string(i) + ": no ack within " +
                std::to_string(ack_timeout_ms_) + " ms";
      if (code == StatusCode::kOk) code = StatusCode::kTimeout;
    } else if (!msgs[i]->result.ok()) {
      errors +=
          (errors.empty() ? "" : "; ") + std::string("core ") + std::to_string(i) + ": " + msgs[i]->result.message();
      if (code == StatusCode::kOk || code == StatusCode::kTimeout) code = msgs[i]->result.code();
    } else {
      undo[i] = true;
    }
  }
  if (code == StatusCode::kOk) return {};

  Msgs removes(n);
  for (size_t i = 0; i < n; ++i) {
    if (!undo[i]) continue;
    removes[i] = std::make_unique<ControlMsg>();
    removes[i]->kind = ControlMsg::Kind::kRemoveJob;
    removes[i]->job_id = spec.job_id;
    removes[i]->reason = wire::AbortReason::kNone;
  }
  (void)post_and_wait(removes);
  return Status(code, job + " not installed: " + errors);
}

void LcoreJobSink::remove(uint32_t job_id, wire::AbortReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  Msgs msgs(cores_.size());
  for (auto& m : msgs) {
    m = std::make_unique<ControlMsg>();
    m->kind = ControlMsg::Kind::kRemoveJob;
    m->job_id = job_id;
    m->reason = reason;
  }
  (void)post_and_wait(msgs);
}

uint64_t LcoreJobSink::progress(uint32_t job_id) {
  uint64_t total = 0;
  for (LcoreContext* core : cores_) {
    for (const engine::JobProgress& p : core->engine->progress()) {
      if (p.job_id == job_id) total += p.slots_completed;
    }
  }
  return total;
}

uint64_t LcoreJobSink::waiting_rounds(uint32_t job_id) {
  uint64_t waiting = 0;
  for (LcoreContext* core : cores_) {
    for (const engine::JobProgress& p : core->engine->progress()) {
      // Read relaxed while the lcore runs: a round may complete between the two loads.
      if (p.job_id == job_id && p.rounds_opened > p.slots_completed) waiting += p.rounds_opened - p.slots_completed;
    }
  }
  return waiting;
}

void LcoreJobSink::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

}  // namespace sumcast::dpdk
