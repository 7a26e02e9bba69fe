// nccl_test_appliance: an embedded summation service (sumcast::embedded::Service) in a process of
// its own, the quick stand-in for sumcastd in tests/nccl/nccl_plugin_test.sh and for the GPU
// script on a single host. Prints "ready <control ip:port>" once it serves, then runs until
// SIGTERM or SIGINT.
//
//   nccl_test_appliance --bind IPV4 --token-file PATH [--max-jobs N]   (default 64)
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "sumcast/embedded/service.h"
#include "sumcast/token_file.h"

int main(int argc, char** argv) {
  std::string bind = "127.0.0.1";
  std::string token_file;
  unsigned long max_jobs = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--bind") bind = argv[i + 1];
    if (k == "--token-file") token_file = argv[i + 1];
    if (k == "--max-jobs") max_jobs = std::strtoul(argv[i + 1], nullptr, 10);
  }
  sumcast::embedded::ServiceOptions o;
  o.bind_ip = bind;
  if (!token_file.empty()) {
    const sumcast::Result<std::string> token = sumcast::read_token_file(token_file);
    if (!token.ok()) {
      std::fprintf(stderr, "nccl_test_appliance: --token-file %s\n", token.status().message().c_str());
      return 2;
    }
    o.token = *token;
  }
  o.max_jobs = static_cast<uint32_t>(max_jobs);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before the service's threads start: they inherit it
  auto service = sumcast::embedded::Service::start(o);
  if (!service.ok()) {
    std::fprintf(stderr, "nccl_test_appliance: %s\n", service.status().to_string().c_str());
    return 1;
  }
  std::printf("ready %s\n", (*service)->control_address().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  (*service)->stop();
  std::printf("stopped on signal %d\n", sig);
  return 0;
}
