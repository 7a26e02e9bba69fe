// sumcast-impair: an NFQUEUE consumer that drops, delays and reorders packets, deterministically
// from a seed. The test machines' kernels have no netem, so nftables covers loss and duplication,
// and this tool covers delay and reordering (and loss when one wants it seeded and counted).
//
// Usage (inside the namespace whose traffic is impaired):
//   iptables -A OUTPUT -p udp --dport 4791 -j NFQUEUE --queue-num 7 --queue-bypass
//   sumcast-impair --queue 7 --seed 1 --loss 1 --delay-ms 1 --jitter-ms 4 --duration-s 60
// Each packet independently: dropped with probability --loss percent; otherwise held for
// delay + U[0, jitter] ms (packets with different draws overtake each other: reordering), and
// with probability --reorder percent held --reorder-ms more. Bounded: exits after --duration-s
// or --max-packets, holds at most --max-held packets (further ones pass at once), and releases
// everything it holds when it exits (SIGINT/SIGTERM too). Prints its counters on exit.
#include <arpa/inet.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "sumcast/cli.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  uint16_t queue = 0;
  uint64_t seed = 1;
  double loss_pct = 0;
  double delay_ms = 0;
  double jitter_ms = 0;
  double reorder_pct = 0;
  double reorder_ms = 5;
  double duration_s = 60;
  uint64_t max_packets = 100000000;
  size_t max_held = 4096;
};

struct Held {
  Clock::time_point release;
  uint64_t order;  // tie-break: stable for equal release times
  uint32_t id;
  bool operator>(const Held& o) const { return release != o.release ? release > o.release : order > o.order; }
};

struct State {
  Options opt;
  std::mt19937_64 rng;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held;
  nfq_q_handle* queue = nullptr;
  uint64_t received = 0, dropped = 0, delayed = 0, reordered = 0, passed = 0, overflow = 0;
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

double uniform01(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

int on_packet(nfq_q_handle* qh, nfgenmsg*, nfq_data* nfa, void* data) {
  auto* st = static_cast<State*>(data);
  nfqnl_msg_packet_hdr* ph = nfq_get_msg_packet_hdr(nfa);
  if (ph == nullptr) return 0;
  const uint32_t id = ntohl(ph->packet_id);
  ++st->received;
  // Draw every random number for every packet, so the stream of decisions depends on the seed and
  // the packet's position only.
  const double u_loss = uniform01(st->rng), u_jitter = uniform01(st->rng), u_reorder = uniform01(st->rng);
  if (u_loss * 100.0 < st->opt.loss_pct) {
    ++st->dropped;
    return nfq_set_verdict(qh, id, NF_DROP, 0, nullptr);
  }
  double hold_ms = st->opt.delay_ms + u_jitter * st->opt.jitter_ms;
  if (u_reorder * 100.0 < st->opt.reorder_pct) {
    hold_ms += st->opt.reorder_ms;
    ++st->reordered;
  }
  if (hold_ms <= 0 || st->held.size() >= st->opt.max_held) {
    if (hold_ms > 0) ++st->overflow;
    ++st->passed;
    return nfq_set_verdict(qh, id, NF_ACCEPT, 0, nullptr);
  }
  ++st->delayed;
  const auto release = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(hold_ms * 1000.0));
  st->held.push(Held{release, st->received, id});
  return 0;
}

void release_due(State* st, bool all) {
  const auto now = Clock::now();
  while (!st->held.empty() && (all || st->held.top().release <= now)) {
    nfq_set_verdict(st->queue, st->held.top().id, NF_ACCEPT, 0, nullptr);
    ++st->passed;
    st->held.pop();
  }
}

// Returns -1 to go on, else the exit status.
int parse_args(int argc, char** argv, Options* o) {
  CLI::App app{"An NFQUEUE consumer that drops, delays and reorders packets, deterministically from a seed.",
               "sumcast-impair"};
  sumcast::cli::setup(app);
  app.add_option("--queue", o->queue, "NFQUEUE number to consume")->required();
  app.add_option("--seed", o->seed, "random seed: the same seed, the same decisions");
  app.add_option("--loss", o->loss_pct, "drop this percentage of packets")->check(CLI::Range(0.0, 100.0));
  app.add_option("--delay-ms", o->delay_ms, "hold every packet this long")->check(CLI::NonNegativeNumber);
  app.add_option("--jitter-ms", o->jitter_ms, "plus U[0, J] ms (packets overtake each other)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--reorder", o->reorder_pct, "hold this percentage of packets --reorder-ms more")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--reorder-ms", o->reorder_ms, "extra hold of reordered packets")->check(CLI::NonNegativeNumber);
  app.add_option("--duration-s", o->duration_s, "exit after this long")->check(CLI::NonNegativeNumber);
  app.add_option("--max-packets", o->max_packets, "exit after this many packets");
  app.add_option("--max-held", o->max_held, "hold at most this many packets (further ones pass at once)");
  return sumcast::cli::parse(app, argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  State st;
  if (const int rc = parse_args(argc, argv, &st.opt); rc >= 0) return rc;
  st.rng.seed(st.opt.seed);
  nfq_handle* h = nfq_open();
  if (h == nullptr) {
    std::perror("sumcast-impair: nfq_open");
    return 1;
  }
  st.queue = nfq_create_queue(h, st.opt.queue, &on_packet, &st);
  if (st.queue == nullptr) {
    std::fprintf(stderr, "sumcast-impair: cannot bind NFQUEUE %u (in use, or no nfnetlink_queue)\n", st.opt.queue);
    nfq_close(h);
    return 1;
  }
  if (nfq_set_mode(st.queue, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(st.queue, 8192) < 0) {
    std::perror("sumcast-impair: configuring the queue");
    return 1;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  std::printf("sumcast-impair: queue %u seed %llu loss %.3f%% delay %.2f+U[0,%.2f] ms reorder %.3f%% (+%.2f ms)\n",
              st.opt.queue, static_cast<unsigned long long>(st.opt.seed), st.opt.loss_pct, st.opt.delay_ms,
              st.opt.jitter_ms, st.opt.reorder_pct, st.opt.reorder_ms);
  std::fflush(stdout);
  const int fd = nfq_fd(h);
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(st.opt.duration_s * 1000));
  std::vector<char> buf(1 << 16);
  while (!g_stop && Clock::now() < deadline && st.received < st.opt.max_packets) {
    int timeout_ms = 50;
    if (!st.held.empty()) {
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(st.held.top().release - Clock::now());
      timeout_ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(wait.count(), 50)));
    }
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) > 0 && (pfd.revents & POLLIN)) {
      const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n > 0) nfq_handle_packet(h, buf.data(), static_cast<int>(n));
    }
    release_due(&st, false);
  }
  release_due(&st, true);
  std::printf("sumcast-impair: received %llu dropped %llu delayed %llu reordered %llu passed %llu overflow %llu\n",
              static_cast<unsigned long long>(st.received), static_cast<unsigned long long>(st.dropped),
              static_cast<unsigned long long>(st.delayed), static_cast<unsigned long long>(st.reordered),
              static_cast<unsigned long long>(st.passed), static_cast<unsigned long long>(st.overflow));
  nfq_destroy_queue(st.queue);
  nfq_close(h);
  return 0;
}
