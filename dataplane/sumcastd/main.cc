// sumcastd: the Sumcast aggregation appliance (docs/architecture.md, "The appliance").
//
//   sumcastd -c FILE [--check] [-- EAL args...]
//
// Loads and validates agg.conf (FILE), starts the dataplane (sumcast::dpdk::Appliance), prints
// "sumcastd: ready" once the control server listens and every lcore runs, and stops cleanly on
// SIGINT/SIGTERM. Arguments after `--` are appended to the EAL arguments and win over agg.conf.
//
// Exit status: 0 clean stop (or --check passed), 1 invalid configuration, 2 usage error,
// 3 start-up failed (EAL, port, control server).
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "sumcast/cli.h"
#include "sumcast/config/agg_config.h"
#include "sumcast/dpdk/appliance.h"

namespace {

constexpr int kExitConfig = 1;
constexpr int kExitStart = 3;

struct Args {
  std::string config;
  bool check = false;
  std::vector<std::string> eal;
};

// Returns -1 to go on, else the exit status. Everything after "--" is EAL's and is not parsed
// here, so that an EAL argument never reads as one of ours.
int parse_args(int argc, char** argv, Args* args) {
  int ours = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      ours = i;
      for (int j = i + 1; j < argc; ++j) args->eal.emplace_back(argv[j]);
      break;
    }
  }
  CLI::App app{
      "The Sumcast aggregation appliance. Arguments after -- are appended to the EAL arguments and win "
      "over agg.conf.",
      "sumcastd"};
  sumcast::cli::setup(app);
  app.add_option("-c,--config", args->config, "agg.conf to run with (reference: docs/agg.conf.md)")
      ->required()
      ->type_name("FILE");
  app.add_flag("--check", args->check, "validate FILE and exit (0 valid, 1 invalid)");
  return sumcast::cli::parse(app, ours, argv);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (const int rc = parse_args(argc, argv, &args); rc >= 0) return rc;

  sumcast::Result<sumcast::config::AggConfig> config = sumcast::config::load_agg_config(args.config);
  if (!config.ok()) {
    std::fprintf(stderr, "sumcastd: %s\n", config.status().message().c_str());
    return kExitConfig;
  }
  if (sumcast::Status st = sumcast::config::validate_agg_config(config.value()); !st.ok()) {
    std::fprintf(stderr, "sumcastd: %s\n", st.message().c_str());
    return kExitConfig;
  }
  if (args.check) {
    std::printf("sumcastd: %s: OK\n", args.config.c_str());
    return 0;
  }
  const uint32_t interval_ms = config->telemetry.stats_interval_ms;

  // SIGINT/SIGTERM are blocked before any thread exists, so every thread EAL and the control
  // server start inherits the mask, and only this thread takes them (sigtimedwait below).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  sumcast::dpdk::ApplianceOptions options;
  options.eal_overrides = std::move(args.eal);
  options.program = argc > 0 ? argv[0] : "sumcastd";
  auto appliance = sumcast::dpdk::Appliance::start(std::move(config.value()), std::move(options));
  if (!appliance.ok()) {
    std::fprintf(stderr, "sumcastd: %s\n", appliance.status().message().c_str());
    return kExitStart;
  }
  std::printf("sumcastd: ready\n");
  std::fflush(stdout);

  const uint32_t wait_ms = interval_ms > 0 ? interval_ms : 1000;
  for (;;) {
    timespec ts{};
    ts.tv_sec = wait_ms / 1000;
    ts.tv_nsec = static_cast<long>(wait_ms % 1000) * 1000000L;
    const int sig = sigtimedwait(&stop_signals, nullptr, &ts);
    if (sig > 0) {
      std::printf("sumcastd: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      std::fflush(stdout);
      break;
    }
    if (sig < 0 && errno != EAGAIN && errno != EINTR) {
      std::fprintf(stderr, "sumcastd: sigtimedwait: %s\n", std::strerror(errno));
      break;
    }
    if (interval_ms > 0 && sig < 0 && errno == EAGAIN) {
      std::printf("sumcastd: stats %s\n", (*appliance)->stats_line().c_str());
      std::fflush(stdout);
    }
  }
  (*appliance)->shutdown();
  return 0;
}
