// The C API (worker_shim/include/sumcast/sumcast.h): thin adapters over shim::Communicator.
// Status codes map one-to-one onto sumcast_result; exceptions never cross this boundary.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "sumcast/shim/communicator.h"
#include "sumcast/shim/local_group.h"
#include "sumcast/sumcast.h"

struct sumcast_comm {
  std::unique_ptr<sumcast::shim::Communicator> comm;
  std::string last_error;
  std::vector<std::string> stat_names;               // stable storage for sumcast_stat's names
  std::unique_ptr<sumcast::shim::LocalGroup> group;  // the last local group's plan
};

struct sumcast_request {
  sumcast_comm* comm;
  uint64_t id;
};

namespace {

using sumcast::Status;
using sumcast::StatusCode;

thread_local std::string t_create_error;

static_assert(static_cast<int>(StatusCode::kInvalidArgument) == SUMCAST_ERR_INVALID_ARGUMENT);
static_assert(static_cast<int>(StatusCode::kInternal) == SUMCAST_ERR_INTERNAL);
static_assert(static_cast<int>(sumcast::wire::Dtype::kFp64) == SUMCAST_FP64);
static_assert(static_cast<int>(sumcast::wire::Dtype::kBf16) == SUMCAST_BF16);
static_assert(static_cast<int>(sumcast::wire::ReduceOp::kMax) == SUMCAST_MAX);

sumcast_result to_result(const Status& st) { return static_cast<sumcast_result>(st.code()); }

sumcast_result record(sumcast_comm* c, const Status& st) {
  if (!st.ok()) c->last_error = st.message();
  return to_result(st);
}

sumcast_result record_exception(std::string* where) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    *where = "out of memory";
    return SUMCAST_ERR_UNAVAILABLE;
  } catch (const std::exception& e) {
    *where = std::string("internal error: ") + e.what();
    return SUMCAST_ERR_INTERNAL;
  } catch (...) {
    *where = "internal error: unknown exception";
    return SUMCAST_ERR_INTERNAL;
  }
}

// Copies what the caller's (possibly older, smaller) struct holds over the defaults.
bool read_config(const sumcast_config* in, sumcast_config* out, std::string* error) {
  sumcast_config_init(out);
  if (in->api_version >> 16 != SUMCAST_API_VERSION_MAJOR) {
    *error = "config is for API major version " + std::to_string(in->api_version >> 16) + ", library has " +
             std::to_string(SUMCAST_API_VERSION_MAJOR) + " (call sumcast_config_init)";
    return false;
  }
  if (in->struct_size < offsetof(sumcast_config, register_timeout_ms) + sizeof(uint32_t)) {
    *error = "config struct_size " + std::to_string(in->struct_size) + " too small (call sumcast_config_init)";
    return false;
  }
  std::memcpy(out, in, std::min<size_t>(in->struct_size, sizeof(sumcast_config)));
  return true;
}

}  // namespace

extern "C" {

uint32_t sumcast_version(void) { return SUMCAST_API_VERSION; }

const char* sumcast_result_name(sumcast_result result) {
  switch (result) {
    case SUMCAST_OK:
      return "SUMCAST_OK";
    case SUMCAST_ERR_INVALID_ARGUMENT:
      return "SUMCAST_ERR_INVALID_ARGUMENT";
    case SUMCAST_ERR_NOT_FOUND:
      return "SUMCAST_ERR_NOT_FOUND";
    case SUMCAST_ERR_IO:
      return "SUMCAST_ERR_IO";
    case SUMCAST_ERR_REFUSED:
      return "SUMCAST_ERR_REFUSED";
    case SUMCAST_ERR_TIMEOUT:
      return "SUMCAST_ERR_TIMEOUT";
    case SUMCAST_ERR_ABORTED:
      return "SUMCAST_ERR_ABORTED";
    case SUMCAST_ERR_UNAVAILABLE:
      return "SUMCAST_ERR_UNAVAILABLE";
    case SUMCAST_ERR_INTERNAL:
      return "SUMCAST_ERR_INTERNAL";
  }
  return "SUMCAST_ERR_UNKNOWN";
}

void sumcast_config_init(sumcast_config* config) {
  if (config == nullptr) return;
  std::memset(config, 0, sizeof(*config));
  const sumcast::shim::CommConfig defaults;
  config->struct_size = sizeof(sumcast_config);
  config->api_version = SUMCAST_API_VERSION;
  config->auth_token = "";
  config->dtype = SUMCAST_FP32;
  config->op = SUMCAST_SUM;
  config->payload_bytes = defaults.payload_bytes;
  config->slots = defaults.slots;
  config->rto_initial_us = defaults.rto_initial_us;
  config->rto_max_us = defaults.rto_max_us;
  config->retries = defaults.retries;
  config->op_timeout_ms = defaults.op_timeout_ms;
  config->connect_timeout_ms = defaults.connect_timeout_ms;
  config->register_timeout_ms = defaults.register_timeout_ms;
  config->failover = 0;
  config->failover_after_ms = defaults.failover_after_ms;
  config->failover_timeout_ms = defaults.failover_timeout_ms;
  config->failover_max = defaults.failover_max;
  config->cnp_reaction = defaults.cnp_reaction ? 1 : 0;
  config->window_cut_percent = defaults.window_cut_percent;
  config->window_step = defaults.window_step;
  config->window_cut_interval_us = defaults.window_cut_interval_us;
  config->busy_poll_us = defaults.busy_poll_us;
  config->udp_gro = defaults.udp_gro ? 1 : 0;
  config->udp_gso = defaults.udp_gso ? 1 : 0;
  config->loss_notices = defaults.loss_notices ? 1 : 0;
  config->send_queue_us = defaults.send_queue_us;
  config->dscp = defaults.dscp;
  config->ecn = defaults.ecn ? 1 : 0;
  config->repair_dscp = defaults.repair_dscp;
}

sumcast_result sumcast_comm_create(const sumcast_config* config, sumcast_comm** comm) {
  try {
    t_create_error.clear();
    if (comm == nullptr) {
      t_create_error = "comm out-parameter is NULL";
      return SUMCAST_ERR_INVALID_ARGUMENT;
    }
    *comm = nullptr;
    if (config == nullptr) {
      t_create_error = "config is NULL";
      return SUMCAST_ERR_INVALID_ARGUMENT;
    }
    sumcast_config c;
    if (!read_config(config, &c, &t_create_error)) return SUMCAST_ERR_INVALID_ARGUMENT;
    if (c.job_name == nullptr || (c.appliances == nullptr && c.appliance_count != 0)) {
      t_create_error = "job_name and appliances are required";
      return SUMCAST_ERR_INVALID_ARGUMENT;
    }
    if (c.world_size == 0 || c.world_size > 65535 || c.rank >= c.world_size || c.slots > 65535) {
      t_create_error = "need rank < world_size <= 65535 and slots <= 65535";
      return SUMCAST_ERR_INVALID_ARGUMENT;
    }
    if (static_cast<unsigned>(c.dtype) > SUMCAST_FP64 || static_cast<unsigned>(c.op) > SUMCAST_MAX) {
      t_create_error = "unknown dtype or op";
      return SUMCAST_ERR_INVALID_ARGUMENT;
    }
    sumcast::shim::CommConfig cc;
    cc.job_name = c.job_name;
    cc.rank = static_cast<uint16_t>(c.rank);
    cc.world_size = static_cast<uint16_t>(c.world_size);
    for (size_t i = 0; i < c.appliance_count; ++i) {
      if (c.appliances[i].address == nullptr) {
        t_create_error = "appliance " + std::to_string(i) + " has no address";
        return SUMCAST_ERR_INVALID_ARGUMENT;
      }
      cc.appliances.push_back({c.appliances[i].address, c.appliances[i].weight});
    }
    cc.token = c.auth_token != nullptr ? c.auth_token : "";
    cc.dtype = static_cast<sumcast::wire::Dtype>(c.dtype);
    cc.op = static_cast<sumcast::wire::ReduceOp>(c.op);
    cc.payload_bytes = c.payload_bytes;
    cc.slots = static_cast<uint16_t>(c.slots);
    cc.bind_ip = c.bind_ip != nullptr ? c.bind_ip : "";
    cc.udp_port = c.udp_port;
    cc.rto_initial_us = c.rto_initial_us;
    cc.rto_max_us = c.rto_max_us;
    cc.retries = c.retries;
    cc.op_timeout_ms = c.op_timeout_ms;
    cc.connect_timeout_ms = c.connect_timeout_ms;
    cc.register_timeout_ms = c.register_timeout_ms;
    const std::string transport = c.transport != nullptr ? c.transport : "udp";
    if (transport == "verbs") {
      cc.transport = sumcast::shim::TransportKind::kVerbs;
    } else if (transport != "udp") {
      t_create_error = "unknown transport '" + transport + "' (udp or verbs)";
      return SUMCAST_ERR_INVALID_ARGUMENT;
    }
    cc.rdma_device = c.rdma_device != nullptr ? c.rdma_device : "";
    cc.deterministic = c.deterministic != 0;
    cc.multicast = c.multicast != 0;
    if (c.failover > 2) {
      t_create_error = "failover must be 0 (auto), 1 (off) or 2 (on), got " + std::to_string(c.failover);
      return SUMCAST_ERR_INVALID_ARGUMENT;
    }
    cc.failover = c.failover == 1   ? sumcast::shim::CommConfig::Failover::kOff
                  : c.failover == 2 ? sumcast::shim::CommConfig::Failover::kOn
                                    : sumcast::shim::CommConfig::Failover::kAuto;
    cc.failover_after_ms = c.failover_after_ms;
    cc.failover_timeout_ms = c.failover_timeout_ms;
    cc.failover_max = c.failover_max;
    cc.cnp_reaction = c.cnp_reaction != 0;
    cc.window_cut_percent = c.window_cut_percent;
    cc.window_step = c.window_step;
    cc.window_cut_interval_us = c.window_cut_interval_us;
    cc.busy_poll_us = c.busy_poll_us;
    cc.udp_gro = c.udp_gro != 0;
    cc.udp_gso = c.udp_gso != 0;
    cc.loss_notices = c.loss_notices != 0;
    cc.send_queue_us = c.send_queue_us;
    if (c.dscp > 63) {
      t_create_error = "dscp must be 0..63, got " + std::to_string(c.dscp);
      return SUMCAST_ERR_INVALID_ARGUMENT;
    }
    cc.dscp = static_cast<uint8_t>(c.dscp);
    cc.ecn = c.ecn != 0;
    cc.repair_dscp = c.repair_dscp;
    auto created = sumcast::shim::Communicator::create(cc);
    if (!created.ok()) {
      t_create_error = created.status().message();
      return to_result(created.status());
    }
    auto handle = std::make_unique<sumcast_comm>();
    handle->comm = std::move(created).value();
    for (const auto& kv : handle->comm->stat_list()) handle->stat_names.push_back(kv.first);
    *comm = handle.release();
    return SUMCAST_OK;
  } catch (...) {
    return record_exception(&t_create_error);
  }
}

void sumcast_comm_destroy(sumcast_comm* comm) {
  try {
    delete comm;
  } catch (...) {  // destructors do not throw; nothing to report to
  }
}

sumcast_result sumcast_allreduce_local_group(sumcast_comm* comm, const sumcast_local_buffer* buffers, size_t n,
                                             size_t count) {
  if (comm == nullptr) return SUMCAST_ERR_INVALID_ARGUMENT;
  if (buffers == nullptr && n != 0) {
    comm->last_error = "buffers is NULL";
    return SUMCAST_ERR_INVALID_ARGUMENT;
  }
  try {
    if (!comm->group || comm->group->buffers() != n || comm->group->count() != count) {
      comm->group.reset();
      const auto& cfg = comm->comm->config();
      auto g = sumcast::shim::LocalGroup::create(n, count, cfg.dtype, cfg.op);
      if (!g.ok()) return record(comm, g.status());
      comm->group = std::move(*g);
    }
    std::vector<void*> data(n);
    std::vector<int> devices(n);
    for (size_t i = 0; i < n; ++i) {
      data[i] = buffers[i].data;
      devices[i] = buffers[i].device;
    }
    return record(comm, comm->group->run(*comm->comm, data, devices));
  } catch (...) {
    return record_exception(&comm->last_error);
  }
}

sumcast_result sumcast_allreduce(sumcast_comm* comm, const void* sendbuf, void* recvbuf, size_t count) {
  if (comm == nullptr) return SUMCAST_ERR_INVALID_ARGUMENT;
  try {
    return record(comm, comm->comm->allreduce(sendbuf, recvbuf, count));
  } catch (...) {
    return record_exception(&comm->last_error);
  }
}

sumcast_result sumcast_iallreduce(sumcast_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                                  sumcast_request** request) {
  if (comm == nullptr || request == nullptr) return SUMCAST_ERR_INVALID_ARGUMENT;
  *request = nullptr;
  try {
    auto id = comm->comm->start_allreduce(sendbuf, recvbuf, count);
    if (!id.ok()) return record(comm, id.status());
    *request = new sumcast_request{comm, *id};
    return SUMCAST_OK;
  } catch (...) {
    return record_exception(&comm->last_error);
  }
}

sumcast_result sumcast_test(sumcast_request* request, int* done) {
  if (request == nullptr || done == nullptr) return SUMCAST_ERR_INVALID_ARGUMENT;
  *done = 0;
  sumcast_comm* comm = request->comm;
  try {
    Status st;
    if (!comm->comm->test(request->id, &st)) return SUMCAST_OK;
    *done = 1;
    delete request;
    return record(comm, st);
  } catch (...) {
    return record_exception(&comm->last_error);
  }
}

sumcast_result sumcast_wait(sumcast_request* request) {
  if (request == nullptr) return SUMCAST_ERR_INVALID_ARGUMENT;
  sumcast_comm* comm = request->comm;
  try {
    Status st = comm->comm->wait(request->id);
    delete request;
    return record(comm, st);
  } catch (...) {
    return record_exception(&comm->last_error);
  }
}

const char* sumcast_last_error(const sumcast_comm* comm) {
  return comm != nullptr ? comm->last_error.c_str() : t_create_error.c_str();
}

size_t sumcast_stat_count(const sumcast_comm* comm) { return comm != nullptr ? comm->stat_names.size() : 0; }

sumcast_result sumcast_stat(const sumcast_comm* comm, size_t index, const char** name, uint64_t* value) {
  if (comm == nullptr || name == nullptr || value == nullptr) return SUMCAST_ERR_INVALID_ARGUMENT;
  if (index >= comm->stat_names.size()) return SUMCAST_ERR_NOT_FOUND;
  try {
    const auto list = comm->comm->stat_list();
    *name = comm->stat_names[index].c_str();
    *value = index < list.size() ? list[index].second : 0;
    return SUMCAST_OK;
  } catch (...) {
    return SUMCAST_ERR_UNAVAILABLE;
  }
}

}  // extern "C"
