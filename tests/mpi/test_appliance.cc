// A summation service for the MPI interposer's local tests: the embedded service (engine +
// control server on a kernel UDP socket) in a process of its own, so mpirun'd ranks can use it.
//   sumcast_mpi_test_appliance IP CONTROL_PORT TOKEN_FILE
// Prints "ready IP:PORT" once it accepts registrations, runs until stdin closes (the test script
// holds a pipe to it) or SIGTERM, then prints its counters.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "sumcast/cli.h"
#include "sumcast/embedded/service.h"
#include "sumcast/token_file.h"

int main(int argc, char** argv) {
  sumcast::embedded::ServiceOptions o;
  std::string token_file;
  CLI::App app{"A summation service for the MPI interposer's local tests; prints \"ready IP:PORT\" once it serves.",
               "sumcast_mpi_test_appliance"};
  sumcast::cli::setup(app);
  app.add_option("IP", o.bind_ip, "the IPv4 to serve on")->required();
  app.add_option("CONTROL_PORT", o.control_port, "the control port")->check(CLI::Range(1, 65535))->required();
  app.add_option("TOKEN_FILE", token_file, "the shared secret")->required();
  if (const int rc = sumcast::cli::parse(app, argc, argv); rc >= 0) return rc;
  const sumcast::Result<std::string> token = sumcast::read_token_file(token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "sumcast_mpi_test_appliance: TOKEN_FILE %s\n", token.status().message().c_str());
    return sumcast::cli::kExitUsage;
  }
  o.token = *token;
  o.max_jobs = 128;
  o.max_ranks = 64;
  o.job_timeout_ms = 20000;
  auto s = sumcast::embedded::Service::start(o);
  if (!s.ok()) {
    std::fprintf(stderr, "test appliance: %s\n", s.status().to_string().c_str());
    return 1;
  }
  std::printf("ready %s\n", (*s)->control_address().c_str());
  std::fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  for (;;) {  // until stdin closes or a signal
    pollfd fd{0, POLLIN, 0};
    timespec ts{0, 200'000'000};
    const int rc = ppoll(&fd, 1, &ts, nullptr);
    if (rc > 0) {
      char buf[64];
      if (read(0, buf, sizeof buf) <= 0) break;
    }
    timespec zero{0, 0};
    if (sigtimedwait(&set, nullptr, &zero) > 0) break;
  }
  const auto c = (*s)->counters();
  std::printf("test appliance: rx %llu datagrams, tx %llu, jobs started %llu\n",
              static_cast<unsigned long long>(c.rx_datagrams), static_cast<unsigned long long>(c.tx_datagrams),
              static_cast<unsigned long long>((*s)->server_counters().jobs_started));
  (*s)->stop();
  return 0;
}
