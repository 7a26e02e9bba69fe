// The boundary: every core function runs its body inside guard(), which turns a non-OK Status
// or any exception into an ncclResult_t and a WARN line naming the call.
#include "sumcast/nccl/core.h"

#include <cinttypes>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "collnet.h"
#include "config.h"
#include "memory.h"
#include "net_devices.h"
#include "plugin_log.h"
#include "socket_net.h"

namespace sumcast::nccl {

const char kPluginName[] = "sumcast";

namespace {

ncclResult_t to_nccl(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return abi::ncclSuccess;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return abi::ncclInvalidArgument;
    case StatusCode::kIoError:
    case StatusCode::kUnavailable:
      return abi::ncclSystemError;
    case StatusCode::kRefused:
    case StatusCode::kTimeout:
    case StatusCode::kAborted:
      return abi::ncclRemoteError;
    case StatusCode::kInternal:
      return abi::ncclInternalError;
  }
  return abi::ncclInternalError;
}

template <typename F>
ncclResult_t guard(const char* what, F&& body) noexcept {
  try {
    const Status s = body();
    if (s.ok()) return abi::ncclSuccess;
    SUMCAST_NCCL_WARN("%s: %s", what, s.to_string().c_str());
    return to_nccl(s.code());
  } catch (const std::bad_alloc&) {
    SUMCAST_NCCL_WARN("%s: out of memory", what);
    return abi::ncclSystemError;
  } catch (const std::exception& e) {
    SUMCAST_NCCL_WARN("%s: internal error: %s", what, e.what());
    return abi::ncclInternalError;
  } catch (...) {
    SUMCAST_NCCL_WARN("%s: internal error (unknown exception)", what);
    return abi::ncclInternalError;
  }
}

Status fill_properties(int dev, bool coll, DeviceProperties* p) {
  if (p == nullptr) return Status::invalid_argument("NULL properties");
  auto list = net_devices_list();
  if (!list.ok()) return list.status();
  auto cfg = plugin_config();
  if (!cfg.ok()) return cfg.status();
  if (dev < 0 || static_cast<size_t>(dev) >= (*list)->size() || (coll && (*cfg)->appliances.empty())) {
    return Status::invalid_argument("no " + std::string(coll ? "CollNet" : "net") + " device " + std::to_string(dev));
  }
  const NetDevice& d = (**list)[static_cast<size_t>(dev)];
  *p = DeviceProperties{};
  p->name = d.name.c_str();
  p->pci_path = d.pci_path.empty() ? nullptr : d.pci_path.c_str();
  p->guid = d.guid;
  p->ptr_support = abi::NCCL_PTR_HOST;  // host memory only (memory.h)
  p->speed_mbps = d.speed_mbps;
  p->port = 1;
  p->latency_us = 0.0f;
  p->max_comms = 65536;
  p->max_recvs = coll ? 1 : kSocketMaxRecvs;  // no grouped receives (socket_net.h)
  p->max_p2p_bytes = abi::kMaxNetSize;
  p->max_coll_bytes = abi::kMaxCollNetSize;
  return Status();
}

}  // namespace

ncclResult_t init(abi::ncclDebugLogger_t logger) {
  return guard("init", [&] {
    set_logger(logger);
    static std::once_flag once;
    std::call_once(once, [] {
      auto cfg = plugin_config();
      auto list = net_devices_list();
      if (!cfg.ok() || !list.ok()) return;  // reported by the calls that need them
      std::string names;
      for (const NetDevice& d : **list) names += " " + d.name;
      SUMCAST_NCCL_INFO(abi::NCCL_INIT | abi::NCCL_NET,
                        "plugin %s: %zu net device(s):%s; CollNet %s (settings from %s)", kPluginName, (*list)->size(),
                        names.c_str(),
                        (*cfg)->appliances.empty() ? "off (SUMCAST_APPLIANCES not set)"
                                                   : ("via " + (*cfg)->appliances[0].address).c_str(),
                        (*cfg)->source.c_str());
    });
    auto cfg = plugin_config();
    return cfg.ok() ? Status() : cfg.status();
  });
}

namespace {

struct Context {
  uint64_t comm_id = 0;
  int traffic_class = abi::NCCL_NET_TRAFFIC_CLASS_UNDEF;
  bool coll = false;
  bool attr_logged = false;
};

// The traffic classes of the live net contexts, by communicator: NCCL gives the CollNet init
// none, and calls it right after the net init of the same communicator (core.h).
std::mutex classes_mu;
std::map<uint64_t, int> classes;

Status check_traffic_class(int tc) {
  if (tc == abi::NCCL_NET_TRAFFIC_CLASS_UNDEF || (tc >= 0 && tc <= 255)) return Status();
  return Status::invalid_argument("traffic class " + std::to_string(tc) +
                                  " is not an IP TOS byte (0..255, or NCCL_NET_TRAFFIC_CLASS_UNDEF)");
}

// The context NCCL hands a v11+ listen or connect, which must be of that kind.
Result<Context*> context_of(void* ctx, bool coll) {
  auto* c = static_cast<Context*>(ctx);
  if (c == nullptr) return Status::invalid_argument("NULL context");
  if (c->coll != coll) {
    return Status::invalid_argument(coll ? "a net context for CollNet" : "a CollNet context for net");
  }
  return c;
}

}  // namespace

ncclResult_t context_init(void** ctx, uint64_t comm_id, int traffic_class, bool coll, abi::ncclDebugLogger_t logger) {
  const ncclResult_t r = init(logger);
  if (r != abi::ncclSuccess) return r;
  return guard(coll ? "CollNet init" : "init", [&] {
    if (ctx == nullptr) return Status::invalid_argument("NULL context pointer");
    if (Status s = check_traffic_class(traffic_class); !s.ok()) return s;
    {
      std::lock_guard<std::mutex> lock(classes_mu);
      if (coll) {
        auto it = classes.find(comm_id);
        if (it != classes.end()) traffic_class = it->second;
      } else if (traffic_class == abi::NCCL_NET_TRAFFIC_CLASS_UNDEF) {
        classes.erase(comm_id);
      } else {
        classes[comm_id] = traffic_class;
      }
    }
    *ctx = new Context{comm_id, traffic_class, coll, false};
    SUMCAST_NCCL_INFO(abi::NCCL_INIT | abi::NCCL_NET, "%s context for communicator %016" PRIx64 " (traffic class %d)",
                      coll ? "CollNet" : "net", comm_id, traffic_class);
    return Status();
  });
}

ncclResult_t context_finalize(void* ctx) {
  return guard("finalize", [&] {
    if (ctx == nullptr) return Status::invalid_argument("NULL context");
    auto* c = static_cast<Context*>(ctx);
    if (!c->coll) {
      std::lock_guard<std::mutex> lock(classes_mu);
      classes.erase(c->comm_id);
    }
    delete c;
    return Status();
  });
}

ncclResult_t context_listen(void* ctx, int dev, void* handle, void** listen_comm) {
  return guard("listen", [&] {
    auto c = context_of(ctx, false);
    if (!c.ok()) return c.status();
    return socket_listen(dev, handle, listen_comm, (*c)->traffic_class);
  });
}

ncclResult_t context_connect(void* ctx, int dev, void* handle, void** send_comm) {
  return guard("connect", [&] {
    auto c = context_of(ctx, false);
    if (!c.ok()) return c.status();
    return socket_connect(dev, handle, send_comm, (*c)->traffic_class);
  });
}

ncclResult_t coll_context_listen(void* ctx, int dev, void* handle, void** listen_comm) {
  return guard("CollNet listen", [&] {
    auto c = context_of(ctx, true);
    if (!c.ok()) return c.status();
    return collnet_listen(dev, handle, listen_comm, (*c)->traffic_class);
  });
}

ncclResult_t net_set_attr(void* ctx, abi::ncclNetAttr_v11_t* attr) {
  return guard("setNetAttr", [&] {
    if (ctx == nullptr || attr == nullptr) return Status::invalid_argument("NULL context or attributes");
    auto* c = static_cast<Context*>(ctx);
    if (!c->attr_logged) {  // hints for transports with flow control of their own; TCP ignores them
      c->attr_logged = true;
      SUMCAST_NCCL_INFO(abi::NCCL_NET,
                        "setNetAttr for communicator %016" PRIx64 " (ignored): send peers %d..%d, recv peers %d..%d",
                        c->comm_id, attr->sendCommAttr.minConcurrentPeers, attr->sendCommAttr.maxConcurrentPeers,
                        attr->recvCommAttr.minConcurrentPeers, attr->recvCommAttr.maxConcurrentPeers);
    }
    return Status();
  });
}

// ---- ncclNet ----------------------------------------------------------------------------------------

ncclResult_t net_devices(int* ndev) {
  return guard("devices", [&] {
    if (ndev == nullptr) return Status::invalid_argument("NULL ndev");
    auto list = net_devices_list();
    if (!list.ok()) return list.status();
    *ndev = static_cast<int>((*list)->size());
    return Status();
  });
}

ncclResult_t net_properties(int dev, DeviceProperties* props) {
  return guard("getProperties", [&] { return fill_properties(dev, false, props); });
}

ncclResult_t net_listen(int dev, void* handle, void** listen_comm) {
  return guard("listen", [&] { return socket_listen(dev, handle, listen_comm); });
}

ncclResult_t net_connect(int dev, void* handle, void** send_comm) {
  return guard("connect", [&] { return socket_connect(dev, handle, send_comm); });
}

ncclResult_t net_connect_tc(int dev, void* handle, void** send_comm, int traffic_class) {
  return guard("connect", [&] {
    if (Status s = check_traffic_class(traffic_class); !s.ok()) return s;
    return socket_connect(dev, handle, send_comm, traffic_class);
  });
}

ncclResult_t net_accept(void* listen_comm, void** recv_comm) {
  return guard("accept", [&] { return socket_accept(listen_comm, recv_comm); });
}

ncclResult_t net_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guard("regMr", [&] {
    if (comm == nullptr) return Status::invalid_argument("NULL comm");
    return register_memory(data, size, type, mhandle);
  });
}

ncclResult_t net_reg_mr_dmabuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return guard("regMrDmaBuf", [] { return Status::unavailable("DMA-BUF registration is not offered"); });
}

ncclResult_t net_dereg_mr(void* comm, void* mhandle) {
  return guard("deregMr", [&] {
    if (comm == nullptr) return Status::invalid_argument("NULL comm");
    return deregister_memory(mhandle);
  });
}

ncclResult_t net_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return guard("isend", [&] { return socket_isend(send_comm, data, size, tag, mhandle, request); });
}

ncclResult_t net_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                       void** request) {
  return guard("irecv", [&] { return socket_irecv(recv_comm, n, data, sizes, tags, mhandles, request); });
}

ncclResult_t net_iflush(void* recv_comm, int, void**, int*, void**, void** request) {
  return guard("iflush", [&] {
    if (recv_comm == nullptr || request == nullptr) return Status::invalid_argument("NULL argument");
    *request = nullptr;  // host memory: received data is where it belongs when test reports it
    return Status();
  });
}

ncclResult_t net_test(void* request, int* done, int* sizes) {
  return guard("test", [&] { return socket_test(request, done, sizes); });
}

ncclResult_t net_close_send(void* send_comm) {
  return guard("closeSend", [&] { return socket_close_send(send_comm); });
}

ncclResult_t net_close_recv(void* recv_comm) {
  return guard("closeRecv", [&] { return socket_close_recv(recv_comm); });
}

ncclResult_t net_close_listen(void* listen_comm) {
  return guard("closeListen", [&] { return socket_close_listen(listen_comm); });
}

// ---- ncclCollNet ------------------------------------------------------------------------------------

ncclResult_t coll_devices(int* ndev) {
  return guard("CollNet devices", [&] {
    if (ndev == nullptr) return Status::invalid_argument("NULL ndev");
    *ndev = 0;
    auto cfg = plugin_config();
    if (!cfg.ok()) return cfg.status();
    if ((*cfg)->appliances.empty()) return Status();  // no appliance: no CollNet
    auto list = net_devices_list();
    if (!list.ok()) return list.status();
    *ndev = static_cast<int>((*list)->size());
    return Status();
  });
}

ncclResult_t coll_properties(int dev, DeviceProperties* props) {
  return guard("CollNet getProperties", [&] { return fill_properties(dev, true, props); });
}

ncclResult_t coll_listen(int dev, void* handle, void** listen_comm) {
  return guard("CollNet listen", [&] { return collnet_listen(dev, handle, listen_comm); });
}

ncclResult_t coll_connect(void* handles[], int nranks, int rank, void* listen_comm, void** coll_comm) {
  return guard("CollNet connect", [&] { return collnet_connect(handles, nranks, rank, listen_comm, coll_comm); });
}

ncclResult_t coll_reduce_support(abi::ncclDataType_t dtype, abi::ncclRedOp_t op, int* supported) {
  return guard("reduceSupport", [&] {
    if (supported == nullptr) return Status::invalid_argument("NULL supported");
    wire::Dtype wd;
    wire::ReduceOp wo;
    *supported = to_wire(dtype, op, &wd, &wo) ? 1 : 0;
    return Status();
  });
}

ncclResult_t coll_reg_mr(void* coll_comm, void* data, size_t size, int type, void** mhandle) {
  return guard("CollNet regMr", [&] {
    if (coll_comm == nullptr) return Status::invalid_argument("NULL comm");
    return register_memory(data, size, type, mhandle);
  });
}

ncclResult_t coll_reg_mr_dmabuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return guard("CollNet regMrDmaBuf", [] { return Status::unavailable("DMA-BUF registration is not offered"); });
}

ncclResult_t coll_dereg_mr(void* coll_comm, void* mhandle) {
  return guard("CollNet deregMr", [&] {
    if (coll_comm == nullptr) return Status::invalid_argument("NULL comm");
    return deregister_memory(mhandle);
  });
}

ncclResult_t coll_iallreduce(void* coll_comm, void* send_data, void* recv_data, size_t count, abi::ncclDataType_t dtype,
                             abi::ncclRedOp_t op, void* send_mhandle, void* recv_mhandle, void** request) {
  return guard("iallreduce", [&] {
    return collnet_iallreduce(coll_comm, send_data, recv_data, count, dtype, op, send_mhandle, recv_mhandle, request);
  });
}

ncclResult_t coll_iallgather(void* coll_comm, void* send_data, int n_recv_parts, const Sge* recv_parts,
                             size_t bytes_per_rank, size_t window_offset, size_t window_bytes, void* send_mhandle,
                             void** request) {
  return guard("iallgather", [&] {
    return collnet_iallgather(coll_comm, send_data, n_recv_parts, recv_parts, bytes_per_rank, window_offset,
                              window_bytes, send_mhandle, request);
  });
}

ncclResult_t coll_ireducescatter(void* coll_comm, int n_send_parts, const Sge* send_parts, void* recv_data,
                                 size_t bytes_per_rank, size_t window_offset, size_t window_bytes,
                                 abi::ncclDataType_t dtype, abi::ncclRedOp_t op, void* recv_mhandle, void** request) {
  return guard("ireducescatter", [&] {
    return collnet_ireducescatter(coll_comm, n_send_parts, send_parts, recv_data, bytes_per_rank, window_offset,
                                  window_bytes, dtype, op, recv_mhandle, request);
  });
}

ncclResult_t coll_iflush(void* coll_comm, void*, int, void*, void** request) {
  return guard("CollNet iflush", [&] {
    if (coll_comm == nullptr || request == nullptr) return Status::invalid_argument("NULL argument");
    *request = nullptr;  // host memory: results are in place when test reports them
    return Status();
  });
}

ncclResult_t coll_test(void* request, int* done, int* size) {
  return guard("CollNet test", [&] { return collnet_test(request, done, size); });
}

ncclResult_t coll_close(void* coll_comm) {
  return guard("closeColl", [&] { return collnet_close(coll_comm); });
}

ncclResult_t coll_close_listen(void* listen_comm) {
  return guard("CollNet closeListen", [&] { return collnet_close_listen(listen_comm); });
}

}  // namespace sumcast::nccl
