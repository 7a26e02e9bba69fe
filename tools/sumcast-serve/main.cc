// sumcast-serve: the embedded summation service (dataplane/embedded: the appliance's engine on
// a kernel UDP socket, with its control server) as a daemon of its own, so that a worker host (or
// any CPU node) aggregates a share of every job that lists it like an appliance (docs/scale-out.md).
// It prints "sumcast-serve: ready CONTROL_ADDRESS" once both sockets are bound, runs until SIGINT or
// SIGTERM, then fails the jobs still installed (their members get an abort), prints its socket's and
// its engine's counters (two "sumcast-serve: stopped ..." / "sumcast-serve: engine: ..." lines)
// and exits 0.
//
// Exit status: 0 after a signal, 1 when the service cannot start, 2 on bad usage.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "sumcast/cli.h"
#include "sumcast/embedded/service.h"
#include "sumcast/engine/engine.h"
#include "sumcast/token_file.h"

int main(int argc, char** argv) {
  sumcast::embedded::ServiceOptions so;
  so.bind_ip.clear();
  so.control_port = 4790;
  std::string token_file;
  CLI::App app{"The embedded summation service as a daemon: a worker host's or CPU node's aggregator.",
               "sumcast-serve"};
  sumcast::cli::setup(app);
  app.add_option("--bind", so.bind_ip, "data (UDP 4791) and control address, a local IPv4")
      ->required()
      ->check(CLI::ValidIPV4);
  app.add_option("--control-port", so.control_port, "control TCP port")->check(CLI::Range(1, 65535));
  app.add_option("--token-file", token_file, "shared secret (first line)")->required()->envname("SUMCAST_TOKEN_FILE");
  app.add_option("--slots", so.slots_per_job, "window slots per job")->check(CLI::Range(1, 65535));
  app.add_option("--max-payload", so.max_payload_bytes, "largest payload per packet granted")
      ->check(CLI::Range(8, 4096));
  app.add_option("--max-ranks", so.max_ranks, "ranks per job")->check(CLI::Range(1, 65535));
  app.add_option("--job-timeout-ms", so.job_timeout_ms, "no progress this long fails a job")
      ->check(CLI::Range(1, 100000000));
  app.add_flag("--udp-trains", so.udp_trains,
               "receive workers' UDP_SEGMENT trains coalesced (UDP_GRO) and send results as trains; only where "
               "every worker receives with UDP GRO and the path keeps trains whole (docs/deployment.md)");
  app.add_flag("--multicast", so.multicast,
               "results by IPv4 multicast for the jobs that ask (sumcast-allreduce --multicast, "
               "sumcast_config.multicast): one copy per result to the job's group, out of --bind's interface; the "
               "switch must forward the group (agg.conf dataplane.multicast)");
  app.add_option("--multicast-group", so.multicast_group,
                 "the first job's group; job i gets this + i (agg.conf "
                 "dataplane.multicast_group)")
      ->check(CLI::ValidIPV4);
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
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
  std::printf(
      "sumcast-serve: stopped by signal %d; jobs started %llu, rx %llu datagrams (%llu in %llu coalesced buffers, "
      "%llu of cut trains), tx %llu datagrams (%llu in %llu trains), dropped: rx truncated %llu, rx bad ICRC %llu, "
      "tx %llu\n",
      sig, static_cast<unsigned long long>(sc.jobs_started), static_cast<unsigned long long>(c.rx_datagrams),
      static_cast<unsigned long long>(c.rx_coalesced_datagrams), static_cast<unsigned long long>(c.rx_coalesced),
      static_cast<unsigned long long>(c.rx_cut_train), static_cast<unsigned long long>(c.tx_datagrams),
      static_cast<unsigned long long>(c.tx_train_datagrams), static_cast<unsigned long long>(c.tx_trains),
      static_cast<unsigned long long>(c.rx_truncated), static_cast<unsigned long long>(c.rx_bad_icrc),
      static_cast<unsigned long long>(c.tx_dropped));
  // The engine's side (read after stop: its thread has ended): what it summed and answered, and
  // every frame it dropped, by reason (docs/protocol.md §6 names them).
  const sumcast::engine::CoreCounters& e = service->engine_counters();
  auto get = [](const std::atomic<uint64_t>& v) { return static_cast<unsigned long long>(v.load()); };
  std::string drops;
  for (size_t r = 0; r < sumcast::engine::kDropReasonCount; ++r) {
    if (const uint64_t n = e.drops[r].load(); n != 0) {
      drops += (drops.empty() ? " " : ", ") +
               std::string(sumcast::engine::drop_reason_name(static_cast<sumcast::engine::DropReason>(r))) + " " +
               std::to_string(n);
    }
  }
  std::printf(
      "sumcast-serve: engine: contributions %llu, rounds completed %llu, duplicates %llu, retransmissions "
      "answered %llu, results sent %llu, loss notices sent %llu, duplicate notices sent %llu; dropped:%s\n",
      get(e.contributions), get(e.slots_completed), get(e.duplicates), get(e.retransmits_answered), get(e.results_sent),
      get(e.loss_notices_sent), get(e.duplicate_notices_sent), drops.empty() ? " none" : drops.c_str());
  return 0;
}
