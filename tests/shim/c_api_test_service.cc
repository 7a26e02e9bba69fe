// C-callable helpers for c_api_test.c: an embedded summation service on a loopback address.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "sumcast/embedded/service.h"

namespace {
std::unique_ptr<sumcast::embedded::Service> g_service;
}

extern "C" int c_api_test_service_start(const char* token, char* address, size_t address_len) {
  sumcast::embedded::ServiceOptions o;
  o.token = token;
  for (int i = 0; i < 8 && !g_service; ++i) {
    o.bind_ip = "127.2." + std::to_string(getpid() % 250) + "." + std::to_string(10 + i);
    auto s = sumcast::embedded::Service::start(o);
    if (s.ok()) g_service = std::move(s).value();
  }
  if (!g_service) return -1;
  std::snprintf(address, address_len, "%s", g_service->control_address().c_str());
  return 0;
}

extern "C" void c_api_test_service_stop(void) { g_service.reset(); }
