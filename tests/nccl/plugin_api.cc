#include "plugin_api.h"

#include <cstring>

namespace sumcast::nccl_test {
namespace {

void* must_find(void* lib, const std::string& symbol) {
  void* p = dlsym(lib, symbol.c_str());
  if (p == nullptr) throw std::runtime_error("dlsym(" + symbol + ") failed: " + dlerror());
  return p;
}

template <typename P>
void read_v8_props(const P& p, Props* out) {
  out->name = p.name != nullptr ? p.name : "";
  out->has_pci_path = p.pciPath != nullptr;
  out->guid = p.guid;
  out->ptr_support = p.ptrSupport;
  out->speed = p.speed;
  out->max_comms = p.maxComms;
  out->max_recvs = p.maxRecvs;
  out->device_type = p.netDeviceType;
}

template <typename P>
void read_v9_props(const P& p, Props* out) {
  read_v8_props(p, out);
  out->vdevs = p.vProps.ndevs;
  out->vdev0 = p.vProps.devs[0];
  out->max_p2p = p.maxP2pBytes;
  out->max_coll = p.maxCollBytes;
  if constexpr (requires { p.maxMultiRequestSize; }) out->max_multi_request = p.maxMultiRequestSize;
  if constexpr (requires { p.railId; }) {
    out->rail_id = p.railId;
    out->plane_id = p.planeId;
  }
}

// getProperties of any version >= 9, read into Props. The struct is pre-filled with a pattern so
// that a field the plugin forgets to write shows.
template <typename Raw, typename F>
ncclResult_t read_props(F get, int d, Props* p) {
  Raw raw;
  std::memset(&raw, 0x5a, sizeof(raw));
  const ncclResult_t r = get(d, &raw);
  if (r == ncclSuccess) read_v9_props(raw, p);
  return r;
}

// What differs between versions, as NCCL's own wrappers see it.
template <typename Net, typename Coll, typename Sge>
void bind_common(Net* t, Coll* c, NetApi* net, CollApi* coll) {
  net->name = t->name;
  net->devices = t->devices;
  net->accept = [t](void* l, void** r) { return t->accept(l, r, nullptr); };
  net->reg_mr = t->regMr;
  net->dereg_mr = t->deregMr;
  net->iflush = t->iflush;
  net->test = t->test;
  net->close_send = t->closeSend;
  net->close_recv = t->closeRecv;
  net->close_listen = t->closeListen;
  coll->name = c->name;
  coll->devices = c->devices;
  coll->connect = c->connect;
  coll->reduce_support = c->reduceSupport;
  coll->reg_mr = c->regMr;
  coll->dereg_mr = c->deregMr;
  coll->iflush = c->iflush;
  coll->test = c->test;
  coll->close_coll = c->closeColl;
  coll->close_listen = c->closeListen;
  coll->iallgather = [c](void* comm, void* send, int n, SgePart* parts, size_t bpr, size_t wo, size_t wb, void* mh,
                         void** req) {
    std::vector<Sge> v(static_cast<size_t>(n > 0 ? n : 0));
    for (size_t i = 0; i < v.size(); ++i) {
      v[i].mhandle = parts[i].mhandle;
      v[i].address = parts[i].address;
      v[i].size = static_cast<decltype(v[i].size)>(parts[i].size);
    }
    return c->iallgather(comm, send, n, v.data(), bpr, wo, wb, mh, req);
  };
  coll->ireducescatter = [c](void* comm, int n, SgePart* parts, void* recv, size_t bpr, size_t wo, size_t wb,
                             ncclDataType_t dt, ncclRedOp_t op, void* mh, void** req) {
    std::vector<Sge> v(static_cast<size_t>(n > 0 ? n : 0));
    for (size_t i = 0; i < v.size(); ++i) {
      v[i].mhandle = parts[i].mhandle;
      v[i].address = parts[i].address;
      v[i].size = static_cast<decltype(v[i].size)>(parts[i].size);
    }
    return c->ireducescatter(comm, n, v.data(), recv, bpr, wo, wb, dt, op, mh, req);
  };
}

// Pre-v11 tables: init is process-wide and nothing is finalized.
template <typename Net, typename Coll>
void bind_pre_v11(Net* t, Coll* c, NetApi* net, CollApi* coll) {
  net->listen = t->listen;
  net->finalize = [] { return ncclSuccess; };
  coll->init = c->init;
  coll->listen = c->listen;
  coll->finalize = [] { return ncclSuccess; };
}

// v11 and v12: init once per (simulated) communicator, with its traffic class; the context goes
// to listen/connect.
template <typename Net, typename Coll, typename NetProps>
void bind_v11(Net* t, Coll* c, NetApi* net, CollApi* coll, void** net_ctx, void** coll_ctx, int traffic_class) {
  static constexpr uint64_t kCommId = 0x5eed0000c0ffee11ull;
  net->init = [t, net_ctx, traffic_class](ncclDebugLogger_t logger) {
    ncclNetCommConfig_v11_t config{traffic_class};
    return t->init(net_ctx, kCommId, &config, logger, nullptr);
  };
  net->finalize = [t, net_ctx] {
    const ncclResult_t r = t->finalize(*net_ctx);
    *net_ctx = nullptr;
    return r;
  };
  net->set_net_attr = [t, net_ctx](ncclNetAttr_v11_t* attr) { return t->setNetAttr(*net_ctx, attr); };
  net->listen = [t, net_ctx](int d, void* h, void** l) { return t->listen(*net_ctx, d, h, l); };
  net->connect = [t, net_ctx](int d, void* h, void** s) { return t->connect(*net_ctx, d, h, s, nullptr); };
  net->isend = [t](void* s, void* data, size_t n, int tag, void* mh, void** req) {
    return t->isend(s, data, n, tag, mh, nullptr, req);
  };
  net->irecv = [t](void* r, int n, void** data, size_t* sizes, int* tags, void** mh, void** req) {
    *req = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
    return t->irecv(r, n, data, sizes, tags, mh, nullptr, req);
  };
  net->properties = [t](int d, Props* p) { return read_props<NetProps>(t->getProperties, d, p); };
  coll->init = [c, coll_ctx](ncclDebugLogger_t logger) { return c->init(coll_ctx, kCommId, logger); };
  coll->finalize = [c, coll_ctx] {
    const ncclResult_t r = c->finalize(*coll_ctx);
    *coll_ctx = nullptr;
    return r;
  };
  coll->listen = [c, coll_ctx](int d, void* h, void** l) { return c->listen(*coll_ctx, d, h, l); };
  coll->properties = [c](int d, Props* p) { return read_props<NetProps>(c->getProperties, d, p); };
  coll->iallreduce = c->iallreduce;
}

}  // namespace

Plugin::Plugin(const std::string& path, int abi, int traffic_class) {
  lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) throw std::runtime_error("dlopen(" + path + ") failed: " + dlerror());
  const std::string v = std::to_string(abi);
  void* net_sym = must_find(lib_, "ncclNetPlugin_v" + v);
  void* coll_sym = must_find(lib_, "ncclCollNetPlugin_v" + v);
  net.abi = abi;
  if (abi < 10 && traffic_class != NCCL_NET_TRAFFIC_CLASS_UNDEF) {
    throw std::runtime_error("ABI version " + v + " has no traffic class (v10 and later)");
  }
  if (abi == 8) {
    auto* t = static_cast<ncclNet_v8_t*>(net_sym);
    auto* c = static_cast<ncclCollNet_v8_t*>(coll_sym);
    bind_common<ncclNet_v8_t, ncclCollNet_v8_t, ncclNetSGE_v8_t>(t, c, &net, &coll);
    bind_pre_v11(t, c, &net, &coll);
    net.init = t->init;
    net.properties = [t](int d, Props* p) {
      ncclNetProperties_v8_t raw{};
      const ncclResult_t r = t->getProperties(d, &raw);
      if (r == ncclSuccess) read_v8_props(raw, p);
      return r;
    };
    coll.properties = [c](int d, Props* p) {
      ncclNetProperties_v8_t raw{};
      const ncclResult_t r = c->getProperties(d, &raw);
      if (r == ncclSuccess) read_v8_props(raw, p);
      return r;
    };
    net.connect = [t](int d, void* h, void** s) { return t->connect(d, h, s, nullptr); };
    net.isend = [t](void* s, void* data, size_t n, int tag, void* mh, void** req) {
      return t->isend(s, data, static_cast<int>(n), tag, mh, req);
    };
    net.irecv = [t](void* r, int n, void** data, size_t* sizes, int* tags, void** mh, void** req) {
      std::vector<int> narrow(static_cast<size_t>(n > 0 ? n : 0));
      for (size_t i = 0; i < narrow.size(); ++i) narrow[i] = static_cast<int>(sizes[i]);
      return t->irecv(r, n, data, narrow.data(), tags, mh, req);
    };
    coll.iallreduce = [c](void* comm, void* s, void* r, size_t count, ncclDataType_t dt, ncclRedOp_t op, void* smh,
                          void* rmh, void** req) {
      return c->iallreduce(comm, s, r, static_cast<int>(count), dt, op, smh, rmh, req);
    };
  } else if (abi == 9 || abi == 10) {
    auto* c = static_cast<ncclCollNet_v9_t*>(coll_sym);  // v10 has v9's layout (nccl_abi.h)
    coll.properties = [c](int d, Props* p) { return read_props<ncclNetProperties_v9_t>(c->getProperties, d, p); };
    coll.iallreduce = c->iallreduce;
    if (abi == 9) {
      auto* t = static_cast<ncclNet_v9_t*>(net_sym);
      bind_common<ncclNet_v9_t, ncclCollNet_v9_t, ncclNetSGE_v9_t>(t, c, &net, &coll);
      bind_pre_v11(t, c, &net, &coll);
      net.init = t->init;
      net.connect = [t](int d, void* h, void** s) { return t->connect(d, h, s, nullptr); };
      net.isend = t->isend;
      net.irecv = t->irecv;
      net.properties = [t](int d, Props* p) { return read_props<ncclNetProperties_v9_t>(t->getProperties, d, p); };
    } else {
      auto* t = static_cast<ncclNet_v10_t*>(net_sym);
      bind_common<ncclNet_v10_t, ncclCollNet_v9_t, ncclNetSGE_v10_t>(t, c, &net, &coll);
      bind_pre_v11(t, c, &net, &coll);
      net.init = [t](ncclDebugLogger_t logger) { return t->init(logger, nullptr); };
      net.connect = [t, traffic_class](int d, void* h, void** s) {
        ncclNetCommConfig_v10_t config{traffic_class};
        return t->connect(d, &config, h, s, nullptr);
      };
      net.isend = [t](void* s, void* data, size_t n, int tag, void* mh, void** req) {
        return t->isend(s, data, n, tag, mh, nullptr, req);
      };
      net.irecv = [t](void* r, int n, void** data, size_t* sizes, int* tags, void** mh, void** req) {
        *req = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);  // NCCL >= 2.26 may pass the hint
        return t->irecv(r, n, data, sizes, tags, mh, nullptr, req);
      };
      net.properties = [t](int d, Props* p) { return read_props<ncclNetProperties_v10_t>(t->getProperties, d, p); };
    }
  } else if (abi == 11) {
    auto* t = static_cast<ncclNet_v11_t*>(net_sym);
    auto* c = static_cast<ncclCollNet_v11_t*>(coll_sym);
    bind_common<ncclNet_v11_t, ncclCollNet_v11_t, ncclNetSGE_v11_t>(t, c, &net, &coll);
    bind_v11<ncclNet_v11_t, ncclCollNet_v11_t, ncclNetProperties_v11_t>(t, c, &net, &coll, &net_ctx_, &coll_ctx_,
                                                                        traffic_class);
  } else if (abi == 12) {
    auto* t = static_cast<ncclNet_v12_t*>(net_sym);
    auto* c = static_cast<ncclCollNet_v12_t*>(coll_sym);
    bind_common<ncclNet_v12_t, ncclCollNet_v12_t, ncclNetSGE_v12_t>(t, c, &net, &coll);
    bind_v11<ncclNet_v12_t, ncclCollNet_v12_t, ncclNetProperties_v12_t>(t, c, &net, &coll, &net_ctx_, &coll_ctx_,
                                                                        traffic_class);
  } else {
    throw std::runtime_error("ABI version " + v + " is not one the plugin exports");
  }
}

Plugin::~Plugin() {
  if (lib_ != nullptr) dlclose(lib_);
}

}  // namespace sumcast::nccl_test
