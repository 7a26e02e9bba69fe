// The job registry (sumcast/control/job_registry.h): jobs, the registration barrier, timeouts,
// aborts. Runs on the server thread; connections are only ids here.
#include "sumcast/control/job_registry.h"

#include <sys/random.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

namespace sumcast::control {
namespace {

using std::chrono::milliseconds;
namespace w = sumcast::wire;

uint64_t ms_between(Clock::time_point from, Clock::time_point to) {
  return to <= from ? 0 : static_cast<uint64_t>(std::chrono::duration_cast<milliseconds>(to - from).count());
}

// A Q_Key for a new job: random, non-zero, bit 31 clear (Q_Keys with bit 31 set are "controlled"
// and an unprivileged verbs UD QP cannot send with them).
uint32_t random_qkey() {
  uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    std::random_device rd;
    v = rd();
  }
  v &= 0x7FFFFFFFu;
  return v == 0 ? 1u : v;
}

}  // namespace

JobRegistry::JobRegistry(const ServerOptions& opt, JobSink* sink, MemberLink* link, CounterBoard* counters,
                         ClockFn clock)
    : opt_(opt), sink_(sink), link_(link), counters_(counters), clock_(std::move(clock)) {}

void JobRegistry::refuse(uint64_t conn_id, w::RefuseCode code, std::string text) {
  counters_->add(&ServerCounters::registrations_refused);
  if (text.size() > w::kMaxTextLen) text.resize(w::kMaxTextLen);
  link_->send(conn_id, w::RefuseMsg{code, std::move(text)});
}

void JobRegistry::refuse_all(Job& job, w::RefuseCode code, const std::string& text) {
  for (Member& mem : job.members) {
    if (mem.conn_id == 0) continue;
    seats_.erase(mem.conn_id);
    if (link_->connected(mem.conn_id)) refuse(mem.conn_id, code, text);
  }
  jobs_.erase(job.key);
}

void JobRegistry::on_register(uint64_t conn_id, const w::RegisterMsg& m) {
  using w::RefuseCode;
  const auto now = clock_();
  const std::string who = "rank " + std::to_string(m.rank) + " of job '" + m.name + "'";
  if (seats_.count(conn_id) != 0) {
    return refuse(conn_id, RefuseCode::kAlreadyRegistered, "this connection already registered a rank");
  }
  if (m.name.empty()) return refuse(conn_id, RefuseCode::kBadName, "the job name is empty");
  if (m.world_size < 2 || m.world_size > opt_.max_ranks) {
    return refuse(
        conn_id, RefuseCode::kBadWorldSize,
        who + ": world size " + std::to_string(m.world_size) + " is not in 2.." + std::to_string(opt_.max_ranks));
  }
  if (m.rank >= m.world_size) {
    return refuse(conn_id, RefuseCode::kBadRank,
                  who + ": rank is not below world size " + std::to_string(m.world_size));
  }
  if (!opt_.dtypes.empty() && std::find(opt_.dtypes.begin(), opt_.dtypes.end(), m.dtype) == opt_.dtypes.end()) {
    return refuse(conn_id, RefuseCode::kDtypeNotAccepted,
                  who + ": dtype " + w::dtype_name(m.dtype) + " is not accepted by this appliance");
  }
  const uint32_t elem = static_cast<uint32_t>(w::dtype_size(m.dtype));
  const uint32_t payload = std::min<uint32_t>(m.payload_bytes, opt_.max_payload_bytes) / elem * elem;
  if (payload == 0) {
    return refuse(conn_id, RefuseCode::kBadPayload,
                  who + ": payload of " + std::to_string(m.payload_bytes) + " bytes holds no " +
                      w::dtype_name(m.dtype) + " element");
  }
  const uint32_t slots = std::min<uint32_t>({m.slots == 0 ? opt_.slots_per_job : m.slots, opt_.slots_per_job, 0xFFFF});
  uint32_t next_hop = kNoNextHop;
  if (opt_.next_hops != nullptr) {
    const neighbour::Resolution res = opt_.next_hops->resolve(m.ip);
    if (res.state == neighbour::Resolution::State::kFailed) {
      return refuse(conn_id, RefuseCode::kUnreachable, who + ": " + res.text);
    }
    next_hop = res.next_hop;
  }

  Job* job = nullptr;
  for (auto& [key, j] : jobs_) {
    if (j.name == m.name) job = &j;
  }
  if (job != nullptr) {
    if (job->running) {
      return refuse(conn_id, RefuseCode::kJobRunning, who + ": a job of that name is already running");
    }
    if (job->deterministic != m.deterministic) {
      return refuse(conn_id, RefuseCode::kJobMismatch,
                    who + (m.deterministic ? " asks for" : " does not ask for") +
                        " deterministic summation; the job's other ranks " + (job->deterministic ? "do" : "do not"));
    }
    if (job->multicast_wanted != m.multicast) {
      return refuse(conn_id, RefuseCode::kJobMismatch,
                    who + (m.multicast ? " asks for" : " does not ask for") +
                        " results by multicast; the job's other ranks " + (job->multicast_wanted ? "do" : "do not"));
    }
    if (job->notices_wanted != m.loss_notices) {
      return refuse(conn_id, RefuseCode::kJobMismatch,
                    who + (m.loss_notices ? " asks for" : " does not ask for") +
                        " loss notices; the job's other ranks " + (job->notices_wanted ? "do" : "do not"));
    }
    if (job->world_size != m.world_size || job->dtype != m.dtype || job->op != m.op) {
      return refuse(conn_id, RefuseCode::kJobMismatch,
                    who + " asks for world size " + std::to_string(m.world_size) + ", " + w::dtype_name(m.dtype) +
                        ", " + w::reduce_op_name(m.op) + "; the job has world size " + std::to_string(job->world_size) +
                        ", " + w::dtype_name(job->dtype) + ", " + w::reduce_op_name(job->op));
    }
    if (job->members[m.rank].registered) {
      return refuse(conn_id, RefuseCode::kRankTaken, who + " is already registered");
    }
  } else {
    if (jobs_.size() >= opt_.max_jobs) {
      return refuse(conn_id, RefuseCode::kTooManyJobs,
                    who + ": the appliance already has " + std::to_string(jobs_.size()) + " jobs (max_jobs)");
    }
    Job j;
    j.key = next_job_key_++;
    j.name = m.name;
    j.world_size = m.world_size;
    j.dtype = m.dtype;
    j.op = m.op;
    j.deterministic = m.deterministic;
    j.multicast_wanted = m.multicast;
    j.notices_wanted = m.loss_notices;
    j.members.resize(m.world_size);
    j.first_registration = now;
    job = &jobs_.emplace(j.key, std::move(j)).first->second;
  }
  Member& mem = job->members[m.rank];
  mem.registered = true;
  mem.left = false;
  mem.conn_id = conn_id;
  std::copy(m.mac.begin(), m.mac.end(), mem.endpoint.mac);
  mem.endpoint.ip = m.ip;
  mem.endpoint.udp_port = m.udp_port;
  mem.endpoint.qpn = m.qpn;
  mem.endpoint.next_hop = next_hop;
  mem.payload_bytes = static_cast<uint16_t>(payload);
  mem.slots = static_cast<uint16_t>(slots);
  job->registered++;
  job->last_change = now;
  seats_[conn_id] = Seat{job->key, m.rank};
  counters_->add(&ServerCounters::registrations);
  if (job->registered == job->world_size) try_start(*job);
}

// Every rank registered: start once every member's next hop is resolved (tick() comes back while
// one is pending); a next hop that failed to resolve refuses every rank, naming it.
void JobRegistry::try_start(Job& job) {
  if (opt_.next_hops != nullptr) {
    bool pending = false;
    for (size_t r = 0; r < job.members.size(); ++r) {
      const neighbour::Resolution res = opt_.next_hops->status(job.members[r].endpoint.ip);
      if (res.state == neighbour::Resolution::State::kPending) pending = true;
      if (res.state != neighbour::Resolution::State::kFailed) continue;
      refuse_all(job, w::RefuseCode::kUnreachable,
                 "rank " + std::to_string(r) + " of job '" + job.name + "' is unreachable: " + res.text);
      return;
    }
    if (pending) return;
  }
  start_job(job);
}

void JobRegistry::withdraw(Job& job, uint16_t rank) {
  Member& mem = job.members[rank];
  if (!mem.registered) return;
  mem = Member{};
  job.registered--;
  if (job.registered == 0) jobs_.erase(job.key);
}

void JobRegistry::start_job(Job& job) {
  uint32_t job_id = next_job_id_++;
  if (job_id == 0) job_id = next_job_id_++;
  // A job gets results by multicast when its ranks asked and the appliance allows it; its group
  // is the lowest index no running multicast job uses (indices stay below max_jobs, so every
  // group is in the configured range and no two live jobs share one).
  const bool multicast = job.multicast_wanted && opt_.multicast;
  uint32_t index = 0;
  for (bool taken = multicast; taken;) {
    taken = false;
    for (const auto& [key, j] : jobs_) {
      if (j.running && j.multicast && j.mcast_index == index) {
        taken = true;
        ++index;
        break;
      }
    }
  }
  engine::JobSpec spec;
  spec.job_id = job_id;
  spec.qkey = random_qkey();
  spec.dtype = job.dtype;
  spec.op = job.op;
  spec.deterministic = job.deterministic;
  spec.loss_notices = job.notices_wanted && opt_.loss_notices;
  spec.slot_count = 0xFFFF;
  spec.max_payload_bytes = 0xFFFF;
  for (const Member& mem : job.members) {
    spec.slot_count = std::min(spec.slot_count, mem.slots);
    spec.max_payload_bytes = std::min(spec.max_payload_bytes, mem.payload_bytes);
    spec.members.push_back(mem.endpoint);
  }
  spec.multicast = multicast;
  if (multicast) {
    spec.mcast_ip = opt_.multicast_base_ip + index;
    const uint8_t mac[6] = {0x01,
                            0x00,
                            0x5E,
                            static_cast<uint8_t>((spec.mcast_ip >> 16) & 0x7F),
                            static_cast<uint8_t>(spec.mcast_ip >> 8),
                            static_cast<uint8_t>(spec.mcast_ip)};
    std::memcpy(spec.mcast_mac, mac, 6);
  }

  const Status st = sink_->install(spec);
  if (!st.ok()) {
    refuse_all(job, w::RefuseCode::kInstallFailed,
               "the dataplane did not install job '" + job.name + "': " + st.to_string());
    return;
  }
  job.running = true;
  job.job_id = job_id;
  job.multicast = multicast;
  job.mcast_index = index;
  job.progress = sink_->progress(job_id);
  job.last_change = clock_();
  counters_->add(&ServerCounters::jobs_started);

  w::GrantMsg g;
  g.job_id = job_id;
  g.qkey = spec.qkey;
  g.slot_count = spec.slot_count;
  g.payload_bytes = spec.max_payload_bytes;
  std::copy(opt_.data_mac, opt_.data_mac + 6, g.mac.begin());
  g.ip = opt_.data_ip;
  g.udp_port = w::kRoceUdpPort;
  g.multicast = spec.multicast;
  g.deterministic = spec.deterministic;
  g.loss_notices = spec.loss_notices;
  g.multicast_ip = spec.mcast_ip;
  g.core_qpns = opt_.core_qpns;
  for (Member& mem : job.members) {
    if (link_->connected(mem.conn_id)) link_->send(mem.conn_id, g);
  }
}

void JobRegistry::fail_job(Job& job, w::AbortReason reason, const std::string& text) {
  sink_->remove(job.job_id, reason);
  counters_->add(&ServerCounters::jobs_failed);
  const w::AbortMsg msg{job.job_id, reason, text.substr(0, w::kMaxTextLen)};
  for (Member& mem : job.members) {
    if (mem.conn_id == 0) continue;
    seats_.erase(mem.conn_id);
    if (link_->connected(mem.conn_id)) link_->send(mem.conn_id, msg);
  }
  jobs_.erase(job.key);
}

bool JobRegistry::on_leave(uint64_t conn_id, const w::LeaveMsg& m) {
  auto seat = seats_.find(conn_id);
  if (seat == seats_.end()) return true;  // nothing to leave (e.g. after an abort)
  auto it = jobs_.find(seat->second.job_key);
  if (it == jobs_.end()) return true;
  Job& job = it->second;
  const uint16_t rank = seat->second.rank;
  if (!job.running) {
    seats_.erase(seat);
    withdraw(job, rank);
    return true;
  }
  if (m.job_id != job.job_id) return false;
  seats_.erase(seat);
  Member& mem = job.members[rank];
  mem.left = true;
  mem.conn_id = 0;
  const bool all_left = std::all_of(job.members.begin(), job.members.end(), [](const Member& x) { return x.left; });
  if (all_left) {
    sink_->remove(job.job_id, w::AbortReason::kNone);
    counters_->add(&ServerCounters::jobs_completed);
    jobs_.erase(job.key);
  }
  return true;
}

void JobRegistry::on_connection_lost(uint64_t conn_id) {
  auto seat = seats_.find(conn_id);
  if (seat == seats_.end()) return;
  const Seat s = seat->second;
  seats_.erase(seat);
  auto jt = jobs_.find(s.job_key);
  if (jt == jobs_.end()) return;
  Job& job = jt->second;
  if (!job.running) {
    withdraw(job, s.rank);
    return;
  }
  job.members[s.rank].conn_id = 0;
  if (!job.members[s.rank].left) {
    fail_job(job, w::AbortReason::kMemberLeft,
             "rank " + std::to_string(s.rank) + " of job '" + job.name + "' closed its control connection");
  }
}

w::StatusReplyMsg JobRegistry::status() const {
  const auto now = clock_();
  w::StatusReplyMsg reply;
  size_t size = w::kControlHeaderLen + w::kStatusReplyFixedLen;
  for (const auto& [key, j] : jobs_) {
    w::JobStatusEntry e;
    e.job_id = j.job_id;
    e.world_size = j.world_size;
    e.registered = j.registered;
    e.dtype = j.dtype;
    e.op = j.op;
    e.running = j.running;
    e.slots_completed = j.progress;
    e.ms_since_progress = static_cast<uint32_t>(std::min<uint64_t>(ms_between(j.last_change, now), 0xFFFFFFFFu));
    e.name = j.name;
    size += w::kStatusEntryFixedLen + e.name.size();
    if (size > w::kMaxControlMessageLen) {
      reply.truncated = true;
      break;
    }
    reply.jobs.push_back(std::move(e));
  }
  return reply;
}

void JobRegistry::tick() {
  const auto now = clock_();
  const auto reg_timeout = milliseconds(opt_.register_timeout_ms);
  const auto job_timeout = milliseconds(opt_.job_timeout_ms);
  std::vector<uint64_t> keys;
  for (const auto& [key, j] : jobs_) keys.push_back(key);
  for (uint64_t key : keys) {
    auto it = jobs_.find(key);
    if (it == jobs_.end()) continue;
    Job& job = it->second;
    if (!job.running) {
      if (job.registered == job.world_size) {
        try_start(job);  // it waits for next hops to resolve
        if (jobs_.count(key) == 0 || job.running) continue;
      }
      if (now - job.first_registration < reg_timeout) continue;
      refuse_all(job, w::RefuseCode::kRegisterTimeout,
                 "registration timed out: " + std::to_string(job.registered) + " of " + std::to_string(job.world_size) +
                     " ranks of job '" + job.name + "' registered within " + std::to_string(opt_.register_timeout_ms) +
                     " ms");
      continue;
    }
    const uint64_t p = sink_->progress(job.job_id);
    // An idle job (no round waiting for contributions: between collectives, during compute) is
    // never failed for lack of progress; only a job with rounds waiting is.
    if (p != job.progress || sink_->waiting_rounds(job.job_id) == 0) {
      job.progress = p;
      job.last_change = now;
    } else if (now - job.last_change >= job_timeout) {
      fail_job(job, w::AbortReason::kTimeout,
               "job '" + job.name + "' (id " + std::to_string(job.job_id) + ") made no progress for " +
                   std::to_string(opt_.job_timeout_ms) + " ms");
    }
  }
}

void JobRegistry::shutdown() {
  // Running jobs are failed; pending ones refused. Jobs are removed from the map as we go.
  while (!jobs_.empty()) {
    Job& job = jobs_.begin()->second;
    if (job.running) {
      fail_job(job, w::AbortReason::kApplianceStop, "the appliance is shutting down");
    } else {
      refuse_all(job, w::RefuseCode::kShuttingDown, "the appliance is shutting down");
    }
  }
  publish();
}

void JobRegistry::publish() {
  std::vector<Snapshot> snap;
  snap.reserve(jobs_.size());
  for (const auto& [key, j] : jobs_) {
    Snapshot s;
    s.info.job_id = j.job_id;
    s.info.name = j.name;
    s.info.world_size = j.world_size;
    s.info.registered = j.registered;
    s.info.dtype = j.dtype;
    s.info.op = j.op;
    s.info.running = j.running;
    s.info.slots_completed = j.progress;
    s.info.multicast = j.running && j.multicast;
    s.info.multicast_ip = s.info.multicast ? opt_.multicast_base_ip + j.mcast_index : 0;
    s.info.ms_since_progress = 0;
    s.last_change = j.last_change;
    snap.push_back(std::move(s));
  }
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(snap);
}

std::vector<JobInfo> JobRegistry::jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = clock_();
  std::vector<JobInfo> out;
  out.reserve(snapshot_.size());
  for (const auto& j : snapshot_) {
    out.push_back(j.info);
    out.back().ms_since_progress = ms_between(j.last_change, now);
  }
  return out;
}

}  // namespace sumcast::control
