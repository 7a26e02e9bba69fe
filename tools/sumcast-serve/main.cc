// sumcast-serve: the embedded summation service (worker_shim/embedded: the appliance's engine on
// a kernel UDP socket, with its control server) as a daemon of its own, so that a worker host (or
// any CPU node) aggregates a share of every job that lists it like an appliance (docs/scale-out.md).
// It prints "sumcast-serve: ready CONTROL_ADDRESS" once both sockets are bound, runs until SIGINT or
// SIGTERM, then fails the jobs still installed (their members get an abort) and exits 0.
//
// Exit status: 0 after a signal, 1 when the service cannot start, 2 on bad usage.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sumcast/embedded/service.h"
#include "sumcast/token_file.h"

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: sumcast-serve --bind IP --token-file PATH [options]\n"
               "  --bind IP               data (UDP 4791) and control address, a local IPv4\n"
               "  --control-port P        control TCP port (default 4790)\n"
               "  --token-file PATH       shared secret (first line); default $SUMCAST_TOKEN_FILE\n"
               "  --slots S               window slots per job (default 128)\n"
               "  --max-payload B         largest payload per packet granted (default 4096)\n"
               "  --max-ranks N           ranks per job (default 64)\n"
               "  --job-timeout-ms T      no progress this long fails a job (default 10000)\n");
}

bool parse_u32(const char* s, unsigned long lo, unsigned long hi, uint32_t* out) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  sumcast::embedded::ServiceOptions so;
  so.bind_ip.clear();
  so.control_port = 4790;
  std::string token_file;
  if (const char* env = std::getenv("SUMCAST_TOKEN_FILE"); env != nullptr) token_file = env;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "sumcast-serve: %s needs a value\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    uint32_t n = 0;
    bool ok = true;
    if (a == "--bind") {
      so.bind_ip = v;
    } else if (a == "--control-port") {
      ok = parse_u32(v, 1, 65535, &n), so.control_port = static_cast<uint16_t>(n);
    } else if (a == "--token-file") {
      token_file = v;
    } else if (a == "--slots") {
      ok = parse_u32(v, 1, 65535, &so.slots_per_job);
    } else if (a == "--max-payload") {
      ok = parse_u32(v, 8, 4096, &so.max_payload_bytes);
    } else if (a == "--max-ranks") {
      ok = parse_u32(v, 1, 65535, &so.max_ranks);
    } else if (a == "--job-timeout-ms") {
      ok = parse_u32(v, 1, 100000000, &so.job_timeout_ms);
    } else {
      std::fprintf(stderr, "sumcast-serve: unknown option %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "sumcast-serve: bad value for %s: '%s'\n", a.c_str(), v);
      return 2;
    }
  }
  if (so.bind_ip.empty() || token_file.empty()) {
    std::fprintf(stderr, "sumcast-serve: --bind and --token-file are required\n");
    usage(stderr);
    return 2;
  }
  sumcast::Result<std::string> token = sumcast::read_token_file(token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "sumcast-serve: --token-file %s\n", token.status().message().c_str());
    return 2;
  }
  so.token = std::move(token.value());

  // Block the signals before the service's threads start, so that only sigwait() sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto started = sumcast::embedded::Service::start(so);
  if (!started.ok()) {
    std::fprintf(stderr, "sumcast-serve: %s\n", started.status().to_string().c_str());
    return 1;
  }
  auto service = std::move(started).value();
  std::printf("sumcast-serve: ready %s (data %s:%u)\n", service->control_address().c_str(), so.bind_ip.c_str(),
              service->data_port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  const auto sc = service->server_counters();
  const auto c = service->counters();
  service->stop();
  std::printf("sumcast-serve: stopped by signal %d; jobs started %llu, rx %llu, tx %llu datagrams\n", sig,
              static_cast<unsigned long long>(sc.jobs_started), static_cast<unsigned long long>(c.rx_datagrams),
              static_cast<unsigned long long>(c.tx_datagrams));
  return 0;
}
