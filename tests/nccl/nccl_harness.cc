// nccl_harness: one rank of a multi-process test of libnccl-net-sumcast.so, driving it exactly as
// NCCL does (plugin_api.h: dlopen, dlsym by ABI version), with every result checked exactly.
//
//   nccl_harness --plugin SO --abi 8..12 --mode collnet|net|setupfail|failover --rank R --nranks N
//                --bootstrap PATH [--expect down|token|full] [--hold PATH [--hold-after N]] [--timeout S]
//                [--traffic-class TC]
//
// --traffic-class: what NCCL hands the plugin from ncclConfig_t.trafficClass (v10: to each
//   connect, v11+: to init); the bed's test counts the marks it gives the frames.
// collnet: the net init, then the CollNet init, with a logger (v11+: a context per
//   communicator), devices, getProperties (host memory only; v9+ size limits in NCCL's accepted
//   range (0, 1 TiB]; v11+/v12 fields), the reduceSupport matrix (12 types x 5 ops, against the
//   table below), listen, handle all-gather (bootstrap.h), connect, closeListen, regMr of an
//   NCCL-style staging region (and a device-memory registration that must be refused), then for
//   each (dtype, op) a chunked all-reduce as NCCL's proxy issues it: 8 slots, up to 8 calls in
//   flight, NULL requests retried, test polled oldest first, each chunk verified, then iflush;
//   then windowed iallgather and ireducescatter; deregMr, closeColl, finalize.
// net: a ring (send to R+1, receive from R-1): listen, handle all-gather, connect and accept
//   interleaved (neither blocks); properties (maxRecvs 1, host memory only); a grouped receive
//   refused; then rounds of 4 receives of distinct tags, 8 rounds (32 receives) outstanding,
//   whose sends go out in reverse tag order, sizes from 0 bytes to 1 MiB, every byte and size
//   checked; then the request limit (32 per comm) on both sides; v11+ setNetAttr; close
//   everything, finalize.
// setupfail: CollNet set-up against an appliance that cannot serve (--expect: down = nothing
//   listens, token = a wrong token, full = no room for another job; the script arranges which):
//   connect must return an error with no comm and exactly one WARN naming the cause; for full,
//   a first communicator takes the appliance's only job and a second one is refused. Then the
//   net mode runs, as NCCL goes on over the ncclNet.
// failover: CollNet over two appliances, one lost mid-run (the script kills or stops it while
//   rank 0 holds, see run_failover): three lanes driven from one thread, every chunk exact, no
//   error and no WARN; the plugin's closeColl line reports each lane's failover.
// Exit status 0 when every check passed; each failure prints a line naming what differed.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "bootstrap.h"
#include "plugin_api.h"
#include "sumcast/cli.h"

namespace sumcast::nccl_test {
namespace {

int g_rank = 0;
int g_failures = 0;
int g_warnings = 0;
std::string g_last_warning;

__attribute__((format(printf, 5, 6))) void logger(ncclDebugLogLevel level, unsigned long, const char* file, int line,
                                                  const char* fmt, ...) {
  if (level == NCCL_LOG_WARN) ++g_warnings;
  if (level > NCCL_LOG_INFO) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN) g_last_warning = text;
  std::fprintf(stderr, "[rank %d] %s %s:%d %s\n", g_rank, level == NCCL_LOG_WARN ? "WARN" : "INFO", file, line, text);
}

#define CHECK(cond, ...)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      ++g_failures;                                                               \
      std::fprintf(stderr, "[rank %d] FAIL %s:%d: ", g_rank, __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                                          \
      std::fputc('\n', stderr);                                                   \
      if (g_failures > 20) throw std::runtime_error("too many failures");         \
    }                                                                             \
  } while (0)

#define NCCL_OK(call)                                                                                        \
  do {                                                                                                       \
    const ncclResult_t _r = (call);                                                                          \
    if (_r != ncclSuccess) throw std::runtime_error(std::string(#call) + " returned " + std::to_string(_r)); \
  } while (0)

using Clock = std::chrono::steady_clock;
Clock::time_point g_deadline;

void check_deadline(const char* what) {
  if (Clock::now() > g_deadline) throw std::runtime_error(std::string("deadline passed while ") + what);
}

// ---- values: small integers, exact in every dtype and in any summation order -------------------

int64_t contribution(int rank, size_t i, int64_t modulus) {
  return static_cast<int64_t>((i * 7 + static_cast<size_t>(rank) * 13) % static_cast<size_t>(modulus)) - modulus / 2;
}

uint16_t fp16_of_int(int64_t v) {  // exact for |v| < 2048
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  uint64_t a = static_cast<uint64_t>(v < 0 ? -v : v);
  int e = 0;
  while ((a >> (e + 1)) != 0) ++e;
  const uint64_t mant = (a << (10 - e)) & 0x3ff;
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | mant);
}

uint16_t bf16_of_int(int64_t v) {  // exact for |v| <= 256
  const float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

size_t dtype_size(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclFloat64:
      return 8;
    default:
      return 4;
  }
}

void store(ncclDataType_t t, void* base, size_t i, int64_t v) {
  char* p = static_cast<char*>(base) + i * dtype_size(t);
  if (t == ncclFloat32) {
    const float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
  } else if (t == ncclFloat64) {
    const double d = static_cast<double>(v);
    std::memcpy(p, &d, 8);
  } else if (t == ncclInt32) {
    const int32_t x = static_cast<int32_t>(v);
    std::memcpy(p, &x, 4);
  } else if (t == ncclFloat16) {
    const uint16_t h = fp16_of_int(v);
    std::memcpy(p, &h, 2);
  } else {
    const uint16_t b = bf16_of_int(v);
    std::memcpy(p, &b, 2);
  }
}

int64_t expected(ncclRedOp_t op, int nranks, size_t i, int64_t modulus) {
  int64_t acc = contribution(0, i, modulus);
  for (int r = 1; r < nranks; ++r) {
    const int64_t v = contribution(r, i, modulus);
    acc = op == ncclSum ? acc + v : op == ncclMax ? std::max(acc, v) : std::min(acc, v);
  }
  return acc;
}

// What the wire sums exactly (docs/protocol.md), written out here independently of the plugin.
bool should_support(int dtype, int op) {
  const bool type_ok = dtype == ncclFloat32 || dtype == ncclFloat16 || dtype == ncclBfloat16 || dtype == ncclInt32 ||
                       dtype == ncclFloat64;
  const bool op_ok = op == ncclSum || op == ncclMax || op == ncclMin;
  return type_ok && op_ok;
}

// What every version's getProperties must say, net and CollNet alike: host memory only, NCCL's
// accepted size limits, one buffer per receive, and the v11/v12 fields.
void check_common_props(const Props& props, bool coll) {
  const char* what = coll ? "CollNet" : "net";
  CHECK(props.ptr_support == NCCL_PTR_HOST, "%s ptrSupport %d, want NCCL_PTR_HOST only", what, props.ptr_support);
  CHECK(props.device_type == NCCL_NET_DEVICE_HOST, "%s netDeviceType %d", what, props.device_type);
  CHECK(props.max_recvs == 1, "%s maxRecvs %d, want 1 (no grouped receives)", what, props.max_recvs);
  if (props.vdevs != -1) {  // v9+: NCCL refuses the device unless 0 < maxP2pBytes, maxCollBytes <= 1 TiB
    CHECK(props.vdevs == 1 && props.vdev0 == 0, "%s vProps %d devices, first %d", what, props.vdevs, props.vdev0);
    CHECK(props.max_p2p > 0 && props.max_p2p <= NCCL_MAX_NET_SIZE_BYTES, "%s maxP2pBytes %zu outside (0, 1 TiB]", what,
          props.max_p2p);
    CHECK(props.max_coll > 0 && props.max_coll <= NCCL_MAX_NET_SIZE_BYTES, "%s maxCollBytes %zu outside (0, 1 TiB]",
          what, props.max_coll);
  }
  if (props.max_multi_request != -1)
    CHECK(props.max_multi_request == 1, "maxMultiRequestSize %d", props.max_multi_request);
  if (props.rail_id != -2) {
    CHECK(props.rail_id == NCCL_NET_ID_UNDEF && props.plane_id == NCCL_NET_ID_UNDEF, "v12 railId %d planeId %d",
          props.rail_id, props.plane_id);
  }
}

// ---- CollNet --------------------------------------------------------------------------------------

constexpr int kSteps = 8;  // NCCL_STEPS: slots of the staging region, calls in flight per channel

struct Case {
  ncclDataType_t dtype;
  ncclRedOp_t op;
  size_t elements;
  size_t chunk;  // elements per iallreduce
  int64_t modulus;
};

void wait_request(CollApi& api, void* req, int* size, const char* what) {
  int done = 0;
  while (!done) {
    check_deadline(what);
    NCCL_OK(api.test(req, &done, size));
  }
}

// One chunked all-reduce as NCCL's proxy issues it: kSteps slots of a staging region, a chunk
// posted while a slot is free (a NULL request retried later), the oldest tested, each verified
// and flushed. advance() does one round of that without blocking, so that several streams (the
// plugin's lanes) can be driven from one thread.
struct ChunkStream {
  Case c;
  int rank = 0;
  int nranks = 0;
  char* send_region = nullptr;
  char* recv_region = nullptr;
  void* send_mh = nullptr;
  void* recv_mh = nullptr;
  void* requests[kSteps] = {};
  size_t counts[kSteps] = {};
  size_t steps = 0;
  size_t posted = 0;
  size_t done = 0;
  size_t wrong = 0;
  size_t retries = 0;
  size_t post_limit = SIZE_MAX;  // no chunk at or past this is posted (the failover mode's hold)

  ChunkStream(const Case& cs, int r, int n, char* send, char* recv, void* smh, void* rmh)
      : c(cs),
        rank(r),
        nranks(n),
        send_region(send),
        recv_region(recv),
        send_mh(smh),
        recv_mh(rmh),
        steps((cs.elements + cs.chunk - 1) / cs.chunk) {}
  bool finished() const { return done == steps; }
};

void advance(CollApi& api, void* comm, ChunkStream& st) {
  const Case& c = st.c;
  const size_t elem = dtype_size(c.dtype);
  const size_t slot_bytes = c.chunk * elem;
  if (st.posted < std::min(st.steps, st.post_limit) && st.posted < st.done + kSteps) {
    const int slot = static_cast<int>(st.posted % kSteps);
    const size_t first = st.posted * c.chunk;
    const size_t count = std::min(c.chunk, c.elements - first);
    char* s = st.send_region + static_cast<size_t>(slot) * slot_bytes;
    for (size_t i = 0; i < count; ++i) store(c.dtype, s, i, contribution(st.rank, first + i, c.modulus));
    std::memset(st.recv_region + static_cast<size_t>(slot) * slot_bytes, 0xee, count * elem);
    NCCL_OK(api.iallreduce(comm, s, st.recv_region + static_cast<size_t>(slot) * slot_bytes, count, c.dtype, c.op,
                           st.send_mh, st.recv_mh, &st.requests[slot]));
    if (st.requests[slot] != nullptr) {
      st.counts[slot] = count;
      ++st.posted;
    } else {
      ++st.retries;  // no free request: NCCL retries the same call later
    }
  }
  const int slot = static_cast<int>(st.done % kSteps);
  if (st.done >= st.posted) return;
  int finished = 0;
  int size = -1;
  NCCL_OK(api.test(st.requests[slot], &finished, &size));
  if (!finished) return;
  CHECK(size == static_cast<int>(st.counts[slot] * elem), "test size %d, want %zu", size, st.counts[slot] * elem);
  const size_t first = st.done * c.chunk;
  std::vector<char> want(st.counts[slot] * elem);
  for (size_t i = 0; i < st.counts[slot]; ++i)
    store(c.dtype, want.data(), i, expected(c.op, st.nranks, first + i, c.modulus));
  const char* got = st.recv_region + static_cast<size_t>(slot) * slot_bytes;
  for (size_t i = 0; i < st.counts[slot]; ++i)
    st.wrong += std::memcmp(got + i * elem, want.data() + i * elem, elem) != 0;
  void* flush = nullptr;
  NCCL_OK(api.iflush(comm, st.recv_region + static_cast<size_t>(slot) * slot_bytes,
                     static_cast<int>(st.counts[slot] * elem), st.recv_mh, &flush));
  if (flush != nullptr) wait_request(api, flush, nullptr, "iflush");
  st.requests[slot] = nullptr;
  ++st.done;
}

void report(const ChunkStream& st) {
  CHECK(st.wrong == 0, "dtype %d op %d: %zu of %zu elements wrong", st.c.dtype, st.c.op, st.wrong, st.c.elements);
  std::printf("[rank %d] iallreduce dtype %d op %d: %zu elements in %zu chunks exact (%zu NULL-request retries)\n",
              st.rank, st.c.dtype, st.c.op, st.c.elements, st.steps, st.retries);
}

void run_allreduce_case(CollApi& api, void* comm, const Case& c, int rank, int nranks, char* send_region,
                        char* recv_region, void* send_mh, void* recv_mh) {
  ChunkStream st(c, rank, nranks, send_region, recv_region, send_mh, recv_mh);
  while (!st.finished()) {
    check_deadline("all-reduce chunks");
    advance(api, comm, st);
  }
  report(st);
}

void run_allgather(CollApi& api, void* comm, int rank, int nranks) {
  const size_t bpr = 1002;    // not a multiple of 4: the plugin pads the int32 sum
  const size_t window = 700;  // windows straddle rank boundaries
  std::vector<unsigned char> mine(bpr);
  for (size_t i = 0; i < bpr; ++i)
    mine[i] = static_cast<unsigned char>((i * 31 + static_cast<size_t>(rank) * 17 + 5) & 0xff);
  std::vector<unsigned char> out(bpr * static_cast<size_t>(nranks), 0xee);
  for (size_t wo = 0; wo < out.size(); wo += window) {
    const size_t wb = std::min(window, out.size() - wo);
    const size_t lo = std::max(wo, static_cast<size_t>(rank) * bpr);
    // send_data is this rank's data at the window's first byte of its own part (NCCL's convention)
    void* send = mine.data() + std::min(lo - static_cast<size_t>(rank) * bpr, bpr);
    SgePart part{nullptr, out.data() + wo, wb};
    void* req = nullptr;
    while (req == nullptr) {
      check_deadline("iallgather");
      NCCL_OK(api.iallgather(comm, send, 1, &part, bpr, wo, wb, nullptr, &req));
    }
    int size = -1;
    wait_request(api, req, &size, "iallgather");
    CHECK(size == static_cast<int>(wb), "iallgather size %d, want %zu", size, wb);
  }
  size_t wrong = 0;
  for (int r = 0; r < nranks; ++r) {
    for (size_t i = 0; i < bpr; ++i) {
      wrong += out[static_cast<size_t>(r) * bpr + i] !=
               static_cast<unsigned char>((i * 31 + static_cast<size_t>(r) * 17 + 5) & 0xff);
    }
  }
  CHECK(wrong == 0, "iallgather: %zu of %zu bytes wrong", wrong, out.size());
  std::printf("[rank %d] iallgather: %zu bytes in windows of %zu exact\n", rank, out.size(), window);
}

void run_reducescatter(CollApi& api, void* comm, int rank, int nranks) {
  const size_t per_rank = 1000;  // fp32 elements per rank
  const size_t bpr = per_rank * 4;
  const size_t window = 1536;  // bytes; multiple of 4, straddles rank boundaries
  const size_t total = bpr * static_cast<size_t>(nranks);
  std::vector<char> send(total);
  for (size_t i = 0; i < total / 4; ++i) store(ncclFloat32, send.data(), i, contribution(rank, i, 200));
  std::vector<char> out(bpr, static_cast<char>(0xee));
  const size_t mine = static_cast<size_t>(rank) * bpr;
  for (size_t wo = 0; wo < total; wo += window) {
    const size_t wb = std::min(window, total - wo);
    const size_t lo = std::min(std::max(wo, mine), mine + bpr);
    SgePart part{nullptr, send.data() + wo, wb};
    void* req = nullptr;
    while (req == nullptr) {
      check_deadline("ireducescatter");
      NCCL_OK(api.ireducescatter(comm, 1, &part, out.data() + (lo - mine), bpr, wo, wb, ncclFloat32, ncclSum, nullptr,
                                 &req));
    }
    int size = -1;
    wait_request(api, req, &size, "ireducescatter");
    const size_t hi = std::max(std::min(wo + wb, mine + bpr), lo);
    CHECK(size == static_cast<int>(hi - lo), "ireducescatter size %d, want %zu", size, hi - lo);
  }
  std::vector<char> want(bpr);
  for (size_t i = 0; i < per_rank; ++i)
    store(ncclFloat32, want.data(), i, expected(ncclSum, nranks, mine / 4 + i, 200));
  CHECK(std::memcmp(out.data(), want.data(), bpr) == 0, "ireducescatter: this rank's part differs");
  std::printf("[rank %d] ireducescatter: %zu bytes per rank in windows of %zu exact\n", rank, bpr, window);
}

// listen, handle all-gather, connect (every rank at once, as NCCL's CollNet set-up), closeListen.
ncclResult_t connect_collnet(CollApi& api, Bootstrap& boot, int rank, int nranks, void** comm) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_comm = nullptr;
  NCCL_OK(api.listen(0, handle, &listen_comm));
  std::string all = boot.allgather(std::string(handle, sizeof(handle)));
  std::vector<void*> handles(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r)
    handles[static_cast<size_t>(r)] = all.data() + static_cast<size_t>(r) * sizeof(handle);
  const ncclResult_t result = api.connect(handles.data(), nranks, rank, listen_comm, comm);
  NCCL_OK(api.close_listen(listen_comm));
  return result;
}

void run_collnet(Plugin& p, Bootstrap& boot, int rank, int nranks) {
  CollApi& api = p.coll;
  CHECK(api.name == "sumcast", "CollNet name '%s'", api.name.c_str());
  // As NCCL sets up a communicator: the net init first (v11+: with the communicator's traffic
  // class, which the CollNet context takes from it), then the CollNet init.
  NCCL_OK(p.net.init(logger));
  NCCL_OK(api.init(logger));
  int ndev = 0;
  NCCL_OK(api.devices(&ndev));
  CHECK(ndev >= 1, "CollNet devices %d (is SUMCAST_APPLIANCES set?)", ndev);
  if (ndev < 1) return;
  Props props;
  NCCL_OK(api.properties(0, &props));
  CHECK(!props.name.empty() && props.speed > 0 && (props.ptr_support & NCCL_PTR_HOST) && props.max_comms > 0,
        "CollNet properties: name '%s' speed %d ptrSupport %d maxComms %d", props.name.c_str(), props.speed,
        props.ptr_support, props.max_comms);
  check_common_props(props, true);
  for (int t = 0; t < kNcclNumTypesMax; ++t) {
    for (int op = 0; op <= ncclAvg; ++op) {
      int supported = -1;
      NCCL_OK(api.reduce_support(static_cast<ncclDataType_t>(t), static_cast<ncclRedOp_t>(op), &supported));
      CHECK(supported == (should_support(t, op) ? 1 : 0), "reduceSupport(type %d, op %d) = %d", t, op, supported);
    }
  }

  void* comm = nullptr;
  NCCL_OK(connect_collnet(api, boot, rank, nranks, &comm));
  CHECK(comm != nullptr, "connect returned no comm");

  const size_t region_bytes = size_t{kSteps} * 65536 * 8;  // 8 slots of up to 64 Ki fp64 elements
  std::vector<char> send_region(region_bytes);
  std::vector<char> recv_region(region_bytes);
  void* send_mh = nullptr;
  void* recv_mh = nullptr;
  NCCL_OK(api.reg_mr(comm, send_region.data(), region_bytes, NCCL_PTR_HOST, &send_mh));
  NCCL_OK(api.reg_mr(comm, recv_region.data(), region_bytes, NCCL_PTR_HOST, &recv_mh));
  {
    void* bad = nullptr;
    const int before = g_warnings;
    CHECK(api.reg_mr(comm, send_region.data(), 64, NCCL_PTR_CUDA, &bad) != ncclSuccess,
          "regMr(NCCL_PTR_CUDA) succeeded although only host memory is offered");
    CHECK(g_warnings == before + 1, "the refused CUDA regMr logged %d WARN lines", g_warnings - before);
  }

  const Case cases[] = {
      {ncclFloat32, ncclSum, 100000, 16384, 1000}, {ncclFloat16, ncclSum, 30000, 8192, 64},
      {ncclBfloat16, ncclSum, 30000, 8192, 16},    {ncclInt32, ncclSum, 50000, 8192, 1 << 20},
      {ncclInt32, ncclMax, 20000, 4096, 1000},     {ncclInt32, ncclMin, 20000, 4096, 1000},
      {ncclFloat64, ncclSum, 40000, 8192, 1000},   {ncclFloat32, ncclMax, 20000, 4096, 1000},
      {ncclFloat16, ncclMin, 10000, 4096, 64},     {ncclBfloat16, ncclMax, 10000, 4096, 16},
  };
  for (const Case& c : cases) {
    run_allreduce_case(api, comm, c, rank, nranks, send_region.data(), recv_region.data(), send_mh, recv_mh);
  }
  run_allgather(api, comm, rank, nranks);
  run_reducescatter(api, comm, rank, nranks);
  NCCL_OK(api.dereg_mr(comm, send_mh));
  NCCL_OK(api.dereg_mr(comm, recv_mh));
  NCCL_OK(api.close_coll(comm));
  NCCL_OK(p.net.finalize());  // NCCL's order
  NCCL_OK(api.finalize());
}

// ---- ncclNet ----------------------------------------------------------------------------------------

unsigned char pattern(int sender, int round, int tag, size_t i) {
  return static_cast<unsigned char>(
      (i * 131 + static_cast<size_t>(sender) * 7 + static_cast<size_t>(round) * 11 + static_cast<size_t>(tag) * 3) &
      0xff);
}

size_t message_size(int round, int tag) {
  static const size_t kSizes[] = {0, 1, 4096, 65537, 1u << 20, 300, 8192, 12345};
  return kSizes[static_cast<size_t>(round * 3 + tag) % 8];
}

void wait_net(NetApi& api, void* req, int* sizes, const char* what) {
  int done = 0;
  while (!done) {
    check_deadline(what);
    NCCL_OK(api.test(req, &done, sizes));
  }
}

void run_net(Plugin& p, Bootstrap& boot, int rank, int nranks) {
  NetApi& api = p.net;
  CHECK(api.name == "sumcast", "net name '%s'", api.name.c_str());
  NCCL_OK(api.init(logger));
  int ndev = 0;
  NCCL_OK(api.devices(&ndev));
  CHECK(ndev >= 1, "net devices %d", ndev);
  Props props;
  NCCL_OK(api.properties(0, &props));
  CHECK(!props.name.empty() && props.speed > 0 && props.max_comms > 0, "net properties: name '%s' speed %d maxComms %d",
        props.name.c_str(), props.speed, props.max_comms);
  check_common_props(props, false);
  CHECK(props.has_pci_path == (access(("/sys/class/net/" + props.name + "/device").c_str(), F_OK) == 0),
        "pciPath presence disagrees with /sys/class/net/%s/device", props.name.c_str());
  std::printf("[rank %d] net device 0: %s, %d Mbit/s, maxRecvs %d, ptrSupport %d, pciPath %s\n", rank,
              props.name.c_str(), props.speed, props.max_recvs, props.ptr_support,
              props.has_pci_path ? "set" : "none (virtual NIC)");
  if (api.set_net_attr) {  // v11+: NCCL's hints before it connects; accepted and ignored
    ncclNetAttr_v11_t attr{{4, 1, 1, 1},
                           {4, 1, 1, 1},
                           static_cast<uint32_t>(NCCL_NET_ATTR_UNDEF),
                           static_cast<uint32_t>(NCCL_NET_ATTR_UNDEF),
                           static_cast<uint32_t>(NCCL_NET_ATTR_UNDEF)};
    NCCL_OK(api.set_net_attr(&attr));
  }

  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_comm = nullptr;
  NCCL_OK(api.listen(0, handle, &listen_comm));
  std::string all = boot.allgather(std::string(handle, sizeof(handle)));
  const int next = (rank + 1) % nranks;
  char peer_handle[NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(peer_handle, all.data() + static_cast<size_t>(next) * sizeof(handle), sizeof(handle));
  void* send_comm = nullptr;
  void* recv_comm = nullptr;
  while (send_comm == nullptr || recv_comm == nullptr) {  // as NCCL: both sides retry, neither blocks
    check_deadline("connect/accept");
    if (send_comm == nullptr) NCCL_OK(api.connect(0, peer_handle, &send_comm));
    if (recv_comm == nullptr) NCCL_OK(api.accept(listen_comm, &recv_comm));
  }

  constexpr int kGroup = 4;
  constexpr int kRounds = 24;
  const size_t max_msg = 1u << 20;
  std::vector<std::vector<char>> sbuf(size_t{kSteps} * kGroup, std::vector<char>(max_msg));
  std::vector<std::vector<char>> rbuf(size_t{kSteps} * kGroup, std::vector<char>(max_msg));

  // maxRecvs is 1: a grouped receive (what NCCL would post with maxRecvs > 1) is refused with an
  // error, one WARN, no request, and the comm goes on.
  {
    void* data[kGroup];
    size_t sizes[kGroup];
    int tags[kGroup];
    for (int g = 0; g < kGroup; ++g) {
      data[g] = rbuf[static_cast<size_t>(g)].data();
      sizes[g] = max_msg;
      tags[g] = 100 + g;
    }
    void* req = reinterpret_cast<void*>(0x1);
    const int before = g_warnings;
    CHECK(api.irecv(recv_comm, kGroup, data, sizes, tags, nullptr, &req) == ncclInvalidArgument,
          "a grouped irecv of %d buffers was not refused", kGroup);
    CHECK(req == nullptr, "the refused grouped irecv left a request");
    CHECK(g_warnings == before + 1 && g_last_warning.find("maxRecvs") != std::string::npos,
          "the refused grouped irecv logged %d WARN lines, last '%s'", g_warnings - before, g_last_warning.c_str());
  }

  // Rounds of kGroup single receives of distinct tags, posted in tag order while the peer sends
  // each round in reverse tag order: every message but the round's last finds its receive only
  // after later-posted ones, with up to kSteps rounds (32 receives) outstanding.
  const int prev = (rank - 1 + nranks) % nranks;
  void* sreq[kSteps][kGroup] = {};
  void* rreq[kSteps][kGroup] = {};
  const int total = kRounds * kGroup;
  int sent = 0;
  int send_done = 0;
  int posted = 0;
  int received = 0;
  size_t wrong = 0;
  while (send_done < total || received < total) {
    check_deadline("net rounds");
    if (posted < total && posted < received + kSteps * kGroup) {
      const int round = posted / kGroup;
      const int g = posted % kGroup;
      const int slot = round % kSteps;
      void* data[1] = {rbuf[static_cast<size_t>(slot * kGroup + g)].data()};
      size_t sizes[1] = {max_msg};
      int tags[1] = {100 + g};
      NCCL_OK(api.irecv(recv_comm, 1, data, sizes, tags, nullptr, &rreq[slot][g]));
      if (rreq[slot][g] != nullptr) ++posted;  // NULL: the request limit, retry later
    }
    if (sent < total && sent < send_done + kSteps * kGroup) {
      const int round = sent / kGroup;
      const int tag = kGroup - 1 - sent % kGroup;
      const int slot = round % kSteps;
      std::vector<char>& b = sbuf[static_cast<size_t>(slot * kGroup + tag)];
      const size_t n = message_size(round, tag);
      for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>(pattern(rank, round, tag, i));
      NCCL_OK(api.isend(send_comm, b.data(), n, 100 + tag, nullptr, &sreq[slot][tag]));
      if (sreq[slot][tag] != nullptr) ++sent;
    }
    if (send_done < sent) {
      const int round = send_done / kGroup;
      const int tag = kGroup - 1 - send_done % kGroup;
      int done = 0;
      int size = -1;
      NCCL_OK(api.test(sreq[round % kSteps][tag], &done, &size));
      if (done) {
        CHECK(size == static_cast<int>(message_size(round, tag)), "send size %d", size);
        ++send_done;
      }
    }
    if (received < posted) {  // tested in posting order, as NCCL does
      const int round = received / kGroup;
      const int g = received % kGroup;
      const int slot = round % kSteps;
      int done = 0;
      int size = -1;
      NCCL_OK(api.test(rreq[slot][g], &done, &size));
      if (done) {
        const size_t want = message_size(round, g);
        CHECK(size == static_cast<int>(want), "round %d tag %d: size %d, want %zu", round, g, size, want);
        const char* got = rbuf[static_cast<size_t>(slot * kGroup + g)].data();
        for (size_t i = 0; i < want; ++i) wrong += static_cast<unsigned char>(got[i]) != pattern(prev, round, g, i);
        void* flush = nullptr;
        void* data[1] = {rbuf[static_cast<size_t>(slot * kGroup + g)].data()};
        int fsizes[1] = {1};
        NCCL_OK(api.iflush(recv_comm, 1, data, fsizes, nullptr, &flush));
        if (flush != nullptr) wait_net(api, flush, nullptr, "iflush");
        ++received;
      }
    }
  }
  CHECK(wrong == 0, "net: %zu bytes wrong", wrong);
  std::printf("[rank %d] net: %d rounds of %d receives, sent in reverse tag order, exact\n", rank, kRounds, kGroup);

  // Request limit: receives beyond NCCL_NET_MAX_REQUESTS get a NULL request; the sends then fill them.
  std::vector<void*> limit_reqs;
  std::vector<char> small(64 * NCCL_NET_MAX_REQUESTS);
  for (int k = 0; k <= NCCL_NET_MAX_REQUESTS; ++k) {
    void* data[1] = {small.data() + 64 * (k % NCCL_NET_MAX_REQUESTS)};
    size_t sizes[1] = {64};
    int tags[1] = {1000 + k};
    void* req = nullptr;
    NCCL_OK(api.irecv(recv_comm, 1, data, sizes, tags, nullptr, &req));
    if (req == nullptr) break;
    limit_reqs.push_back(req);
  }
  CHECK(limit_reqs.size() == NCCL_NET_MAX_REQUESTS, "%zu receives accepted, want %d", limit_reqs.size(),
        NCCL_NET_MAX_REQUESTS);
  std::vector<void*> limit_sends;
  char token[64];
  std::memset(token, rank + 1, sizeof(token));
  for (int k = 0; k < NCCL_NET_MAX_REQUESTS; ++k) {
    void* req = nullptr;
    NCCL_OK(api.isend(send_comm, token, sizeof(token), 1000 + k, nullptr, &req));
    CHECK(req != nullptr, "send %d of the limit test got no request", k);
    if (req != nullptr) limit_sends.push_back(req);
  }
  for (void* r : limit_sends) wait_net(api, r, nullptr, "limit sends");
  for (void* r : limit_reqs) {
    int size = -1;
    wait_net(api, r, &size, "limit receives");
    CHECK(size == 64, "limit receive size %d", size);
  }
  CHECK(static_cast<unsigned char>(small[0]) == static_cast<unsigned char>(prev + 1), "limit payload from rank %d",
        prev);
  boot.barrier();  // nobody closes while a peer still reads
  NCCL_OK(api.close_send(send_comm));
  NCCL_OK(api.close_recv(recv_comm));
  NCCL_OK(api.close_listen(listen_comm));
  NCCL_OK(api.finalize());
}

// CollNet set-up against an appliance that cannot serve: a clean error, one WARN naming the
// cause, no comm; then the ncclNet carries on.
void run_setupfail(Plugin& p, Bootstrap& boot, int rank, int nranks, const std::string& expect) {
  CollApi& api = p.coll;
  NCCL_OK(api.init(logger));
  int ndev = 0;
  NCCL_OK(api.devices(&ndev));
  CHECK(ndev >= 1, "CollNet devices %d (is SUMCAST_APPLIANCES set?)", ndev);
  const char* cause = expect == "down"    ? "Connection refused"
                      : expect == "token" ? "rejected the token"
                                          : "too_many_jobs";
  void* first = nullptr;
  if (expect == "full") {  // a first communicator takes the appliance's only job
    NCCL_OK(connect_collnet(api, boot, rank, nranks, &first));
    CHECK(first != nullptr, "the first communicator got no comm");
  }
  const int before = g_warnings;
  const Clock::time_point t0 = Clock::now();
  void* comm = nullptr;
  const ncclResult_t r = connect_collnet(api, boot, rank, nranks, &comm);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(r != ncclSuccess && r != ncclInProgress, "CollNet connect returned %d with the appliance %s", r,
        expect.c_str());
  CHECK(comm == nullptr, "the failed connect left a comm");
  CHECK(g_warnings == before + 1, "the failed connect logged %d WARN lines, want 1", g_warnings - before);
  CHECK(g_last_warning.find(cause) != std::string::npos, "the WARN does not name the cause '%s': %s", cause,
        g_last_warning.c_str());
  std::printf("[rank %d] CollNet set-up failed cleanly (%s, result %d, %.1f s): %s\n", rank, expect.c_str(), r, seconds,
              g_last_warning.c_str());
  if (first != nullptr) NCCL_OK(api.close_coll(first));
  NCCL_OK(api.finalize());
  run_net(p, boot, rank, nranks);  // NCCL goes on over the plugin's ncclNet
}

// CollNet across the loss of an appliance (SUMCAST_APPLIANCES lists two; the script kills or
// stops one mid-run): three lanes of the plugin (its communicators per dtype and op), each a
// chunked all-reduce stream with kSteps calls in flight, all driven from this one thread with
// their posts and tests interleaved as NCCL's proxy does; rank r begins each sweep at lane
// r mod 3, so the ranks meet the lanes' failovers in different orders. Rank 0 posts no chunk past
// `hold_after` of each lane until HOLD.go exists (it keeps testing what is outstanding) and says
// so by creating HOLD.ready: the script loses the appliance then, with the other ranks' chunks
// outstanding. Every chunk exact, every call ncclSuccess, no WARN (a failover is no error).
void run_failover(Plugin& p, Bootstrap& boot, int rank, int nranks, const std::string& hold, size_t hold_after) {
  CollApi& api = p.coll;
  NCCL_OK(api.init(logger));
  int ndev = 0;
  NCCL_OK(api.devices(&ndev));
  CHECK(ndev >= 1, "CollNet devices %d (is SUMCAST_APPLIANCES set?)", ndev);
  if (ndev < 1) return;
  void* comm = nullptr;
  NCCL_OK(connect_collnet(api, boot, rank, nranks, &comm));
  CHECK(comm != nullptr, "connect returned no comm");
  if (comm == nullptr) return;
  const Case cases[] = {
      {ncclFloat32, ncclSum, 48 * 16384, 16384, 1000},
      {ncclInt32, ncclSum, 48 * 8192, 8192, 1 << 20},
      {ncclFloat32, ncclMax, 48 * 8192, 8192, 1000},
  };
  constexpr size_t kLanes = sizeof(cases) / sizeof(cases[0]);
  std::vector<std::vector<char>> regions;
  std::vector<void*> handles;
  std::vector<ChunkStream> streams;
  for (const Case& c : cases) {
    const size_t bytes = size_t{kSteps} * c.chunk * dtype_size(c.dtype);
    regions.emplace_back(bytes);
    regions.emplace_back(bytes);
    void* smh = nullptr;
    void* rmh = nullptr;
    NCCL_OK(api.reg_mr(comm, regions[regions.size() - 2].data(), bytes, NCCL_PTR_HOST, &smh));
    NCCL_OK(api.reg_mr(comm, regions.back().data(), bytes, NCCL_PTR_HOST, &rmh));
    handles.push_back(smh);
    handles.push_back(rmh);
    streams.emplace_back(c, rank, nranks, regions[regions.size() - 2].data(), regions.back().data(), smh, rmh);
  }
  const bool holder = rank == 0;
  bool held = false;
  if (holder) {
    for (ChunkStream& st : streams) st.post_limit = hold_after;
  }
  const Clock::time_point t0 = Clock::now();
  auto all_done = [&] {
    for (const ChunkStream& st : streams) {
      if (!st.finished()) return false;
    }
    return true;
  };
  while (!all_done()) {
    check_deadline(held ? "the CollNet lanes, after the hold" : "the CollNet lanes");
    for (size_t k = 0; k < kLanes; ++k) advance(api, comm, streams[(k + static_cast<size_t>(rank)) % kLanes]);
    if (!holder || streams[0].post_limit == SIZE_MAX) continue;
    bool reached = true;
    for (const ChunkStream& st : streams) reached = reached && st.posted >= hold_after;
    if (reached && !held) {
      held = true;
      std::FILE* f = std::fopen((hold + ".ready").c_str(), "w");
      CHECK(f != nullptr, "cannot create %s.ready", hold.c_str());
      if (f != nullptr) std::fclose(f);
      std::printf("[rank %d] holding after %zu chunks per lane\n", rank, hold_after);
      std::fflush(stdout);
    }
    if (held && access((hold + ".go").c_str(), F_OK) == 0) {
      for (ChunkStream& st : streams) st.post_limit = SIZE_MAX;
      std::printf("[rank %d] going on\n", rank);
    }
  }
  for (const ChunkStream& st : streams) report(st);
  CHECK(!holder || held, "rank 0 never held (hold_after %zu too large?)", hold_after);
  CHECK(g_warnings == 0, "%d WARN lines across the failover, last '%s'", g_warnings, g_last_warning.c_str());
  std::printf("[rank %d] failover: %zu lanes from one thread exact in %.1f s\n", rank, kLanes,
              std::chrono::duration<double>(Clock::now() - t0).count());
  boot.barrier();  // nobody leaves a job another still needs
  for (void* h : handles) NCCL_OK(api.dereg_mr(comm, h));
  NCCL_OK(api.close_coll(comm));
  NCCL_OK(api.finalize());
}

}  // namespace
}  // namespace sumcast::nccl_test

int main(int argc, char** argv) {
  using namespace sumcast::nccl_test;  // NOLINT
  std::string plugin, mode, boot_path, expect, hold;
  size_t hold_after = 16;
  int abi = 0, rank = -1, nranks = 0, timeout_s = 120, traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  CLI::App app{"The NCCL plugin driven as NCCL drives it, one rank of N (tests/nccl/nccl_plugin_test.sh).",
               "nccl_harness"};
  sumcast::cli::setup(app);
  app.add_option("--plugin", plugin, "the plugin to dlopen")->type_name("SO")->required();
  app.add_option("--abi", abi, "the plugin ABI version to drive")->check(CLI::Range(8, 12))->required();
  app.add_option("--mode", mode,
                 "what to drive: a collective (collnet), ncclNet (net), a failed setup, or a failover (failover)")
      ->check(CLI::IsMember({"collnet", "net", "setupfail", "failover"}))
      ->required();
  app.add_option("--rank", rank, "this process's rank (< --nranks)")->check(CLI::NonNegativeNumber)->required();
  app.add_option("--nranks", nranks, "ranks in the job")->check(CLI::Range(2, 65535))->required();
  app.add_option("--bootstrap", boot_path, "the bootstrap file the ranks meet through")->type_name("PATH")->required();
  app.add_option("--timeout", timeout_s, "bound of the whole run, seconds")->check(CLI::PositiveNumber);
  app.add_option("--expect", expect, "setupfail: why the setup fails")->check(CLI::IsMember({"down", "token", "full"}));
  app.add_option("--hold", hold, "failover: rank 0 creates PATH.ready when it holds, goes on once PATH.go exists")
      ->type_name("PATH");
  app.add_option("--hold-after", hold_after, "failover: chunks per lane before rank 0 holds")->check(CLI::Range(1, 47));
  app.add_option("--traffic-class", traffic_class,
                 "NCCL's traffic class (IP TOS byte) for the plugin, ABI 10 and later")
      ->check(CLI::Range(0, 255));
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (rank >= nranks || (mode == "setupfail" && expect.empty()) || (mode == "failover" && hold.empty())) {
    std::fprintf(stderr, "nccl_harness: %s\nrun nccl_harness --help for the options\n",
                 rank >= nranks        ? "--rank must be below --nranks"
                 : mode == "setupfail" ? "--mode setupfail needs --expect"
                                       : "--mode failover needs --hold");
    return sumcast::cli::kExitUsage;
  }
  g_rank = rank;
  g_deadline = Clock::now() + std::chrono::seconds(timeout_s);
  try {
    Plugin p(plugin, abi, traffic_class);
    Bootstrap boot(boot_path, rank, nranks, timeout_s * 1000);
    if (mode == "collnet") {
      run_collnet(p, boot, rank, nranks);
    } else if (mode == "setupfail") {
      run_setupfail(p, boot, rank, nranks, expect);
    } else if (mode == "failover") {
      run_failover(p, boot, rank, nranks, hold, hold_after);
    } else {
      run_net(p, boot, rank, nranks);
    }
    boot.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] FAIL: %s\n", rank, e.what());
    return 1;
  }
  if (g_failures != 0) {
    std::fprintf(stderr, "[rank %d] %d check(s) failed\n", rank, g_failures);
    return 1;
  }
  std::printf("[rank %d] PASS: ABI v%d %s, %d ranks\n", rank, abi, mode.c_str(), nranks);
  return 0;
}
