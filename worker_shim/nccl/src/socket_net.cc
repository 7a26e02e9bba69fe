#include "socket_net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "net_devices.h"
#include "plugin_log.h"
#include "sumcast/nccl/nccl_abi.h"
#include "sumcast/shim/address.h"

namespace sumcast::nccl {
namespace {

constexpr uint32_t kHandleMagic = 0x53434e48;  // "SCNH"
constexpr uint32_t kHelloMagic = 0x53434e4f;   // "SCNO"
constexpr uint32_t kMsgMagic = 0x53434e4d;     // "SCNM"
constexpr uint64_t kScratchMagic = 0x7363726174636821ull;
constexpr uint16_t kVersion = 1;

struct PendingConnect;

// What listen() writes and the peer's connect() reads (NCCL_NET_HANDLE_MAXSIZE bytes at most).
struct NetHandle {
  uint32_t magic;
  uint16_t version;
  uint16_t port;  // host order
  uint32_t ipv4;  // host order
  uint32_t reserved;
  uint64_t nonce;
  // Connect-side scratch (zero as listen() writes it).
  uint64_t scratch_magic;
  PendingConnect* pending;
};
static_assert(sizeof(NetHandle) <= abi::NCCL_NET_HANDLE_MAXSIZE);

struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint64_t nonce;
};
static_assert(sizeof(Hello) == 16);

struct MsgHeader {
  uint32_t magic;
  int32_t tag;
  uint64_t size;
};
static_assert(sizeof(MsgHeader) == 16);

struct PendingConnect {
  int fd = -1;
  bool connected = false;
  Hello hello{};
  size_t hello_sent = 0;
};

struct ListenComm {
  int fd = -1;
  uint64_t nonce = 0;
  int pending_fd = -1;  // accepted, hello not fully read
  Hello hello{};
  size_t hello_got = 0;
};

struct Comm;

struct Request {
  Comm* comm = nullptr;
  bool in_use = false;
  bool done = false;
  int n = 0;
  // send
  MsgHeader header{};
  const char* payload = nullptr;
  size_t sent = 0;  // header + payload bytes written
  // recv
  void* dst[kSocketMaxRecvs] = {};
  size_t cap[kSocketMaxRecvs] = {};
  int tags[kSocketMaxRecvs] = {};
  size_t got[kSocketMaxRecvs] = {};
  bool filled[kSocketMaxRecvs] = {};
  int remaining = 0;
};

struct Comm {
  int fd = -1;
  bool is_send = false;
  Status failed;
  Request reqs[kSocketMaxRequests];
  Request* order[kSocketMaxRequests] = {};  // active requests, oldest first
  int active = 0;
  // recv: the message being read
  MsgHeader header{};
  size_t header_got = 0;
  Request* cur = nullptr;
  int cur_slot = 0;
  size_t cur_got = 0;
  bool eof = false;
};

uint64_t random_nonce() {
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

Status sock_error(const std::string& what, int err = errno) { return Status::from_errno("NET/sumcast: " + what, err); }

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// IP_TOS of `fd`, unless tos < 0 (none asked for).
Status set_tos(int fd, int tos) {
  if (tos < 0 || setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) == 0) return Status();
  return sock_error("IP_TOS " + std::to_string(tos));
}

Result<const NetDevice*> device(int dev) {
  auto list = net_devices_list();
  if (!list.ok()) return list.status();
  if (dev < 0 || static_cast<size_t>(dev) >= (*list)->size()) {
    return Status::invalid_argument("no net device " + std::to_string(dev));
  }
  return &(**list)[static_cast<size_t>(dev)];
}

sockaddr_in make_addr(uint32_t ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(port);
  return a;
}

Request* take_request(Comm* c) {
  for (Request& r : c->reqs) {
    if (!r.in_use) {
      r.in_use = true;
      r.done = false;
      r.comm = c;
      r.sent = 0;
      return &r;
    }
  }
  return nullptr;
}

void drop_from_order(Comm* c, const Request* r) {
  for (int i = 0; i < c->active; ++i) {
    if (c->order[i] == r) {
      for (int j = i + 1; j < c->active; ++j) c->order[j - 1] = c->order[j];
      --c->active;
      return;
    }
  }
}

void fail(Comm* c, Status s) {
  if (c->failed.ok()) {
    SUMCAST_NCCL_WARN("%s comm on fd %d failed: %s", c->is_send ? "send" : "recv", c->fd, s.message().c_str());
    c->failed = std::move(s);
  }
}

// Writes as much of the queued sends as the socket takes, in order.
void progress_send(Comm* c) {
  while (c->failed.ok() && c->active > 0) {
    Request* r = c->order[0];
    const size_t total = sizeof(MsgHeader) + r->header.size;
    iovec iov[2];
    int n = 0;
    if (r->sent < sizeof(MsgHeader)) {
      iov[n++] = {reinterpret_cast<char*>(&r->header) + r->sent, sizeof(MsgHeader) - r->sent};
      if (r->header.size > 0) iov[n++] = {const_cast<char*>(r->payload), r->header.size};
    } else {
      const size_t off = r->sent - sizeof(MsgHeader);
      iov[n++] = {const_cast<char*>(r->payload) + off, r->header.size - off};
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    const ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      fail(c, sock_error("send"));
      return;
    }
    r->sent += static_cast<size_t>(w);
    if (r->sent < total) return;  // the socket buffer is full
    r->done = true;
    drop_from_order(c, r);
  }
}

// The oldest posted receive with an unfilled buffer for `tag`.
bool match(Comm* c, int tag, Request** req, int* slot) {
  for (int i = 0; i < c->active; ++i) {
    Request* r = c->order[i];
    for (int s = 0; s < r->n; ++s) {
      if (!r->filled[s] && r->tags[s] == tag) {
        *req = r;
        *slot = s;
        return true;
      }
    }
  }
  return false;
}

void finish_slot(Comm* c) {
  Request* r = c->cur;
  const int s = c->cur_slot;
  r->got[s] = c->header.size;
  r->filled[s] = true;
  c->cur = nullptr;
  c->header_got = 0;
  if (--r->remaining == 0) {
    r->done = true;
    drop_from_order(c, r);
  }
}

// Reads messages into posted receives until the socket is empty or the next message has none.
void progress_recv(Comm* c) {
  while (c->failed.ok()) {
    if (c->header_got < sizeof(MsgHeader)) {
      const ssize_t got = recv(c->fd, reinterpret_cast<char*>(&c->header) + c->header_got,
                               sizeof(MsgHeader) - c->header_got, MSG_DONTWAIT);
      if (got == 0) {
        c->eof = true;
        if (c->header_got > 0 || c->active > 0) fail(c, Status::io_error("NET/sumcast: connection closed by the peer"));
        return;
      }
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) fail(c, sock_error("recv"));
        return;
      }
      c->header_got += static_cast<size_t>(got);
      if (c->header_got < sizeof(MsgHeader)) return;
      if (c->header.magic != kMsgMagic) {
        fail(c, Status::io_error("NET/sumcast: bad message header (stream out of sync)"));
        return;
      }
    }
    if (c->cur == nullptr) {
      if (!match(c, c->header.tag, &c->cur, &c->cur_slot)) return;  // waits for its irecv
      if (c->header.size > c->cur->cap[c->cur_slot]) {
        fail(c,
             Status::invalid_argument("NET/sumcast: message of " + std::to_string(c->header.size) + " bytes for tag " +
                                      std::to_string(c->header.tag) + " exceeds the posted buffer of " +
                                      std::to_string(c->cur->cap[c->cur_slot]) + " bytes"));
        return;
      }
      c->cur_got = 0;
    }
    Request* r = c->cur;
    const int s = c->cur_slot;
    if (c->cur_got < c->header.size) {
      char* base = static_cast<char*>(r->dst[s]);
      const ssize_t got = recv(c->fd, base + c->cur_got, c->header.size - c->cur_got, MSG_DONTWAIT);
      if (got == 0) {
        c->eof = true;
        fail(c, Status::io_error("NET/sumcast: connection closed by the peer in a message"));
        return;
      }
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) fail(c, sock_error("recv"));
        return;
      }
      c->cur_got += static_cast<size_t>(got);
      if (c->cur_got < c->header.size) continue;
    }
    finish_slot(c);
  }
}

void close_comm(Comm* c) {
  if (c->fd >= 0) close(c->fd);
  delete c;
}

}  // namespace

Status socket_listen(int dev, void* handle, void** listen_comm, int tos) {
  if (handle == nullptr || listen_comm == nullptr) return Status::invalid_argument("listen: NULL argument");
  auto d = device(dev);
  if (!d.ok()) return d.status();
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return sock_error("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (Status s = set_tos(fd, tos); !s.ok()) {
    close(fd);
    return s;
  }
  sockaddr_in a = make_addr((*d)->ipv4, 0);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 256) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    close(fd);
    return sock_error("listen on " + (*d)->name + " " + shim::format_ipv4((*d)->ipv4), err);
  }
  auto* l = new ListenComm;
  l->fd = fd;
  l->nonce = random_nonce();
  NetHandle h{};
  h.magic = kHandleMagic;
  h.version = kVersion;
  h.port = ntohs(a.sin_port);
  h.ipv4 = (*d)->ipv4;
  h.nonce = l->nonce;
  std::memset(handle, 0, abi::NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof(h));
  *listen_comm = l;
  return Status();
}

Status socket_connect(int dev, void* handle, void** send_comm, int tos) {
  if (handle == nullptr || send_comm == nullptr) return Status::invalid_argument("connect: NULL argument");
  *send_comm = nullptr;
  auto* h = static_cast<NetHandle*>(handle);
  if (h->magic != kHandleMagic || h->version != kVersion) {
    return Status::invalid_argument("connect: not a sumcast net handle (another plugin or version on the peer?)");
  }
  PendingConnect* p = h->scratch_magic == kScratchMagic ? h->pending : nullptr;
  auto abandon = [&](Status s) {
    if (p != nullptr) {
      if (p->fd >= 0) close(p->fd);
      delete p;
    }
    h->scratch_magic = 0;
    h->pending = nullptr;
    return s;
  };
  const std::string peer = shim::format_ipv4(h->ipv4) + ":" + std::to_string(h->port);
  if (p == nullptr) {
    auto d = device(dev);
    if (!d.ok()) return d.status();
    p = new PendingConnect;
    h->scratch_magic = kScratchMagic;
    h->pending = p;
    p->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->fd < 0) return abandon(sock_error("socket"));
    sockaddr_in local = make_addr((*d)->ipv4, 0);
    if (bind(p->fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
      return abandon(sock_error("bind to " + (*d)->name));
    }
    set_nodelay(p->fd);
    if (Status s = set_tos(p->fd, tos); !s.ok()) return abandon(s);
    sockaddr_in a = make_addr(h->ipv4, h->port);
    if (connect(p->fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
      return abandon(sock_error("connect to " + peer));
    }
    p->hello = Hello{kHelloMagic, kVersion, 0, h->nonce};
  }
  if (!p->connected) {
    pollfd pfd{p->fd, POLLOUT, 0};
    if (poll(&pfd, 1, 0) == 0) return Status();  // still connecting: NCCL calls again
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return abandon(sock_error("connect to " + peer, err));
    p->connected = true;
  }
  while (p->hello_sent < sizeof(Hello)) {
    const ssize_t w = send(p->fd, reinterpret_cast<char*>(&p->hello) + p->hello_sent, sizeof(Hello) - p->hello_sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status();
      if (errno == EINTR) continue;
      return abandon(sock_error("hello to " + peer));
    }
    p->hello_sent += static_cast<size_t>(w);
  }
  auto* c = new Comm;
  c->fd = p->fd;
  c->is_send = true;
  p->fd = -1;
  (void)abandon(Status());  // frees the scratch state; the fd now belongs to the comm
  *send_comm = c;
  return Status();
}

Status socket_accept(void* listen_comm, void** recv_comm) {
  if (listen_comm == nullptr || recv_comm == nullptr) return Status::invalid_argument("accept: NULL argument");
  *recv_comm = nullptr;
  auto* l = static_cast<ListenComm*>(listen_comm);
  for (;;) {
    if (l->pending_fd < 0) {
      l->pending_fd = accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (l->pending_fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status();
        return sock_error("accept");
      }
      l->hello_got = 0;
      set_nodelay(l->pending_fd);
    }
    while (l->hello_got < sizeof(Hello)) {
      const ssize_t got =
          recv(l->pending_fd, reinterpret_cast<char*>(&l->hello) + l->hello_got, sizeof(Hello) - l->hello_got, 0);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status();
      if (got <= 0) break;  // closed or failed before its hello: forget it
      l->hello_got += static_cast<size_t>(got);
    }
    if (l->hello_got == sizeof(Hello) && l->hello.magic == kHelloMagic && l->hello.nonce == l->nonce) {
      auto* c = new Comm;
      c->fd = l->pending_fd;
      l->pending_fd = -1;
      *recv_comm = c;
      return Status();
    }
    SUMCAST_NCCL_WARN("refused a connection that did not present this listener's handle");
    close(l->pending_fd);
    l->pending_fd = -1;
  }
}

Status socket_isend(void* send_comm, const void* data, size_t size, int tag, void* /*mhandle: host memory*/,
                    void** request) {
  if (send_comm == nullptr || request == nullptr) return Status::invalid_argument("isend: NULL argument");
  auto* c = static_cast<Comm*>(send_comm);
  *request = nullptr;
  if (!c->failed.ok()) return c->failed;
  Request* r = take_request(c);
  if (r == nullptr) return Status();  // NCCL retries
  r->n = 1;
  r->header = MsgHeader{kMsgMagic, tag, size};
  r->payload = static_cast<const char*>(data);
  c->order[c->active++] = r;
  progress_send(c);
  *request = r;
  return Status();
}

Status socket_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags, void** /*mhandles*/,
                    void** request) {
  if (recv_comm == nullptr || request == nullptr) return Status::invalid_argument("irecv: NULL argument");
  *request = nullptr;
  if (n < 1 || n > kSocketMaxRecvs) {
    return Status::invalid_argument("irecv: " + std::to_string(n) + " buffers grouped, but maxRecvs is " +
                                    std::to_string(kSocketMaxRecvs) + " (grouped receives are not offered)");
  }
  if (data == nullptr || sizes == nullptr || tags == nullptr) {
    return Status::invalid_argument("irecv: NULL buffers, sizes or tags, or a negative size");
  }
  auto* c = static_cast<Comm*>(recv_comm);
  if (!c->failed.ok()) return c->failed;
  Request* r = take_request(c);
  if (r == nullptr) return Status();
  r->n = n;
  r->remaining = n;
  for (int i = 0; i < n; ++i) {
    r->dst[i] = data[i];
    r->cap[i] = sizes[i];
    r->tags[i] = tags[i];
    r->got[i] = 0;
    r->filled[i] = false;
  }
  c->order[c->active++] = r;
  progress_recv(c);
  *request = r;
  return Status();
}

Status socket_test(void* request, int* done, int* sizes) {
  if (request == nullptr || done == nullptr) return Status::invalid_argument("test: NULL argument");
  auto* r = static_cast<Request*>(request);
  Comm* c = r->comm;
  if (!r->in_use) return Status::invalid_argument("test: request is not in use (tested after completion?)");
  *done = 0;
  if (!r->done) c->is_send ? progress_send(c) : progress_recv(c);
  if (!r->done) return c->failed;
  if (sizes != nullptr) {
    if (c->is_send) {
      sizes[0] = static_cast<int>(r->header.size);
    } else {
      for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->got[i]);
    }
  }
  *done = 1;
  r->in_use = false;
  return Status();
}

Status socket_close_send(void* send_comm) {
  if (send_comm != nullptr) close_comm(static_cast<Comm*>(send_comm));
  return Status();
}

Status socket_close_recv(void* recv_comm) {
  if (recv_comm != nullptr) close_comm(static_cast<Comm*>(recv_comm));
  return Status();
}

Status socket_close_listen(void* listen_comm) {
  auto* l = static_cast<ListenComm*>(listen_comm);
  if (l == nullptr) return Status();
  if (l->pending_fd >= 0) close(l->pending_fd);
  if (l->fd >= 0) close(l->fd);
  delete l;
  return Status();
}

}  // namespace sumcast::nccl
