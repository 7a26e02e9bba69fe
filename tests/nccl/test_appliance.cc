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

#include "sumcast/cli.h"
#include "sumcast/embedded/service.h"
#include "sumcast/token_file.h"

int main(int argc, char** argv) {
  std::string bind = "127.0.0.1";
  std::string token_file;
  uint32_t max_jobs = 64;
  CLI::App app{"An embedded summation service in a process of its own; prints \"ready IP:PORT\" once it serves.",
               "nccl_test_appliance"};
  sumcast::cli::setup(app);
  app.add_option("--bind", bind, "the IPv4 to serve on")->type_name("IPV4");
  app.add_option("--token-file", token_file, "the shared secret (none: no token)")->type_name("PATH");
  app.add_option("--max-jobs", max_jobs, "jobs served at once")->check(CLI::Range(1u, 1u << 20));
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
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
  o.max_jobs = max_jobs;
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
