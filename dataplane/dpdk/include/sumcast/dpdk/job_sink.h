// control::JobSink over the lcores' control rings. install()/remove() build nothing on the
// lcores themselves: they post one ControlMsg per core (the JobSpec shared, heap-allocated here)
// and wait, bounded, for every core's ack; Engine::add_job/remove_job run on the lcores.
//
// A message not acked in time stays owned by this sink (freed when its ack comes back, or in the
// destructor); an install that failed or timed out on any core is undone with a remove on the
// cores that may have it. Thread safety: all methods may be called from any thread (serialised
// internally); the destructor only after the lcores returned.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "sumcast/control/server.h"
#include "sumcast/dpdk/lcore.h"

namespace sumcast::dpdk {

class LcoreJobSink final : public control::JobSink {
 public:
  LcoreJobSink(std::vector<LcoreContext*> cores, uint32_t ack_timeout_ms = 2000);
  ~LcoreJobSink() override;
  LcoreJobSink(const LcoreJobSink&) = delete;
  LcoreJobSink& operator=(const LcoreJobSink&) = delete;

  Status install(const engine::JobSpec& spec) override;
  void remove(uint32_t job_id, wire::AbortReason reason) override;
  uint64_t progress(uint32_t job_id) override;
  uint64_t waiting_rounds(uint32_t job_id) override;

  // After close(), install() fails (Unavailable) and remove() does nothing: the lcores stopped.
  void close();

 private:
  // Posts msgs[i] to core i (nullptr: skip core i) and waits for the acks; caller holds mu_.
  // Returns the cores that did not ack within the timeout: their messages move to orphans_ (and
  // msgs[i] becomes nullptr).
  std::vector<uint32_t> post_and_wait(std::vector<std::unique_ptr<ControlMsg>>& msgs);

  std::vector<LcoreContext*> cores_;
  uint32_t ack_timeout_ms_;
  std::mutex mu_;
  bool closed_ = false;
  std::vector<uint32_t> in_flight_;          // per core: posted, not yet acked
  std::unordered_set<ControlMsg*> orphans_;  // timed out; freed when acked
};

}  // namespace sumcast::dpdk
