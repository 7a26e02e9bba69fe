/* The C API, compiled as C and linked against libsumcast.so: version, defaults, errors without a
 * communicator, blocking and non-blocking all-reduce (in place and not) and a deterministic job on
 * two rank threads against an embedded service, the local-group all-reduce (three buffers per
 * rank, twice: the plan kept, then remade for a new count; a device buffer refused), DSCP and ECN
 * on the data socket, counters,
 * failure after the service stops, and that the shared library exports the C API and nothing of
 * the C++ core. */
#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sumcast/sumcast.h"

int c_api_test_service_start(const char* token, char* address, size_t address_len);
void c_api_test_service_stop(void);

static int g_passed;
static int g_failed;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (cond) {                                                                \
      ++g_passed;                                                              \
    } else {                                                                   \
      ++g_failed;                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

static const char* kToken = "c-api-test-token-0123456789";
static char g_address[64];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

enum { kWorld = 2, kCount = 5000 };

/* Rank r's element i: a small integer, so the float sums are exact. */
static float input(int rank, size_t i) { return (float)((int)((i * 7 + (size_t)rank * 13) % 9) - 4); }
static float expected(size_t i) {
  float s = 0;
  for (int r = 0; r < kWorld; ++r) s += input(r, i);
  return s;
}

static void check_locked(int cond, const char* what, int rank, const char* detail) {
  pthread_mutex_lock(&g_lock);
  if (cond) {
    ++g_passed;
  } else {
    ++g_failed;
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, detail);
  }
  pthread_mutex_unlock(&g_lock);
}

/* sumcast_comm_create refuses `cfg` as an invalid argument with a message that contains `words`. */
static int refused(const sumcast_config* cfg, const char* words) {
  sumcast_comm* comm = NULL;
  return sumcast_comm_create(cfg, &comm) == SUMCAST_ERR_INVALID_ARGUMENT && comm == NULL &&
         strstr(sumcast_last_error(NULL), words) != NULL;
}

/* IPv4 datagram sockets of this process whose IP_TOS is `tos` (the library keeps its socket to
 * itself; the marking is checked where the kernel holds it). */
static int udp_sockets_with_tos(int tos) {
  int found = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    int type = 0, domain = 0, value = 0;
    socklen_t len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_DGRAM) continue;
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_INET) continue;
    len = sizeof(int);
    if (getsockopt(fd, IPPROTO_IP, IP_TOS, &value, &len) == 0 && value == tos) ++found;
  }
  return found;
}

static void* rank_main(void* arg) {
  const int rank = (int)(size_t)arg;
  sumcast_config cfg;
  sumcast_config_init(&cfg);
  sumcast_appliance app = {g_address, 1.0};
  cfg.job_name = "c-api";
  cfg.rank = (uint32_t)rank;
  cfg.world_size = kWorld;
  cfg.appliances = &app;
  cfg.appliance_count = 1;
  cfg.auth_token = kToken;
  cfg.dtype = SUMCAST_FP32;
  cfg.op = SUMCAST_SUM;
  cfg.bind_ip = "127.0.0.1";
  cfg.dscp = 26; /* API 1.7: contributions with DSCP 26 and ECT(0) */
  cfg.ecn = 1;
  sumcast_comm* comm = NULL;
  sumcast_result rc = sumcast_comm_create(&cfg, &comm);
  check_locked(rc == SUMCAST_OK && comm != NULL, "sumcast_comm_create", rank, sumcast_last_error(NULL));
  if (comm == NULL) return NULL;
  check_locked(udp_sockets_with_tos(26 << 2 | 0x2) >= 1, "dscp and ecn on the data socket", rank, "no such socket");

  float* send = malloc(kCount * sizeof(float));
  float* recv = malloc(kCount * sizeof(float));
  float* inplace = malloc(kCount * sizeof(float));
  for (size_t i = 0; i < kCount; ++i) send[i] = inplace[i] = input(rank, i);

  /* Blocking, out of place. */
  rc = sumcast_allreduce(comm, send, recv, kCount);
  int ok = rc == SUMCAST_OK;
  for (size_t i = 0; ok && i < kCount; ++i) ok = recv[i] == expected(i);
  check_locked(ok, "sumcast_allreduce out of place", rank, sumcast_last_error(comm));

  /* Non-blocking, in place, completed by polling sumcast_test. */
  sumcast_request* req = NULL;
  rc = sumcast_iallreduce(comm, inplace, inplace, kCount, &req);
  check_locked(rc == SUMCAST_OK && req != NULL, "sumcast_iallreduce", rank, sumcast_last_error(comm));
  int done = 0;
  while (req != NULL && !done) rc = sumcast_test(req, &done);
  ok = rc == SUMCAST_OK && done;
  for (size_t i = 0; ok && i < kCount; ++i) ok = inplace[i] == expected(i);
  check_locked(ok, "sumcast_test in place", rank, sumcast_last_error(comm));

  /* Two outstanding requests, completed by sumcast_wait in reverse order. */
  sumcast_request* a = NULL;
  sumcast_request* b = NULL;
  memset(recv, 0, kCount * sizeof(float));
  rc = sumcast_iallreduce(comm, send, recv, kCount, &a);
  check_locked(rc == SUMCAST_OK, "sumcast_iallreduce a", rank, sumcast_last_error(comm));
  rc = sumcast_iallreduce(comm, send, send, 1, &b);
  check_locked(rc == SUMCAST_OK, "sumcast_iallreduce b", rank, sumcast_last_error(comm));
  check_locked(sumcast_wait(b) == SUMCAST_OK && send[0] == expected(0), "sumcast_wait b", rank,
               sumcast_last_error(comm));
  rc = sumcast_wait(a);
  ok = rc == SUMCAST_OK;
  for (size_t i = 0; ok && i < kCount; ++i) ok = recv[i] == expected(i);
  check_locked(ok, "sumcast_wait a", rank, sumcast_last_error(comm));

  /* Counters: named, and the results were counted. */
  uint64_t results = 0;
  for (size_t i = 0; i < sumcast_stat_count(comm); ++i) {
    const char* name = NULL;
    uint64_t value = 0;
    if (sumcast_stat(comm, i, &name, &value) == SUMCAST_OK && strcmp(name, "results") == 0) results = value;
  }
  /* Chunks of at most 4096 bytes: the default payload follows the path MTU (loopback: 4096). */
  check_locked(results >= 3 * ((kCount * 4 + 4095) / 4096), "results counter", rank, "too small");
  const char* name = NULL;
  uint64_t value = 0;
  check_locked(sumcast_stat(comm, 100000, &name, &value) == SUMCAST_ERR_NOT_FOUND, "stat out of range", rank, "");

  /* The local group: kGroup buffers per rank, buffer j of rank r holding virtual rank r*kGroup+j's
   * inputs; every buffer ends with the sum over all kWorld*kGroup of them. Twice per count. */
  enum { kGroup = 3 };
  const size_t counts[3] = {kCount, kCount, 777};
  for (int round = 0; round < 3; ++round) {
    const size_t n = counts[round];
    float* bufs[kGroup];
    sumcast_local_buffer lb[kGroup];
    for (int j = 0; j < kGroup; ++j) {
      bufs[j] = malloc(n * sizeof(float));
      for (size_t i = 0; i < n; ++i) bufs[j][i] = input(rank * kGroup + j, i);
      lb[j].data = bufs[j];
      lb[j].device = -1;
    }
    rc = sumcast_allreduce_local_group(comm, lb, kGroup, n);
    ok = rc == SUMCAST_OK;
    for (int j = 0; ok && j < kGroup; ++j) {
      for (size_t i = 0; ok && i < n; ++i) {
        float want = 0;
        for (int v = 0; v < kWorld * kGroup; ++v) want += input(v, i);
        ok = bufs[j][i] == want;
      }
    }
    check_locked(ok, "sumcast_allreduce_local_group", rank, sumcast_last_error(comm));
    for (int j = 0; j < kGroup; ++j) free(bufs[j]);
  }
  {
    float x[4] = {1, 2, 3, 4};
    sumcast_local_buffer dev[2] = {{x, -1}, {x, 0}};
    check_locked(sumcast_allreduce_local_group(comm, dev, 2, 4) == SUMCAST_ERR_INVALID_ARGUMENT &&
                     strstr(sumcast_last_error(comm), "CUDA device") != NULL,
                 "local group refuses a device buffer", rank, sumcast_last_error(comm));
  }

  /* Bad arguments fail without touching the communicator's state. */
  check_locked(sumcast_allreduce(comm, NULL, recv, 10) == SUMCAST_ERR_INVALID_ARGUMENT, "null buffer", rank, "");
  check_locked(strlen(sumcast_last_error(comm)) > 0, "last error after null buffer", rank, "empty");

  free(send);
  free(recv);
  free(inplace);
  sumcast_comm_destroy(comm);
  return NULL;
}

/* A deterministic job (API 1.1): the flag reaches the service, which grants it (else create
 * fails), and the result is the rank-order sum of non-integer inputs. */
static float real_input(int rank, size_t i) { return (float)(i % 97) * 0.3183099f - (float)rank * 1.4142135f; }
static void* deterministic_main(void* arg) {
  const int rank = (int)(size_t)arg;
  sumcast_config cfg;
  sumcast_config_init(&cfg);
  sumcast_appliance app = {g_address, 1.0};
  cfg.job_name = "c-api-deterministic";
  cfg.rank = (uint32_t)rank;
  cfg.world_size = kWorld;
  cfg.appliances = &app;
  cfg.appliance_count = 1;
  cfg.auth_token = kToken;
  cfg.bind_ip = "127.0.0.1";
  cfg.deterministic = 1;
  sumcast_comm* comm = NULL;
  if (sumcast_comm_create(&cfg, &comm) != SUMCAST_OK) {
    check_locked(0, "deterministic create", rank, sumcast_last_error(NULL));
    return NULL;
  }
  float* buf = malloc(kCount * sizeof(float));
  for (size_t i = 0; i < kCount; ++i) buf[i] = real_input(rank, i);
  const sumcast_result rc = sumcast_allreduce(comm, buf, buf, kCount);
  int ok = rc == SUMCAST_OK;
  for (size_t i = 0; ok && i < kCount; ++i) {
    float want = real_input(0, i);
    for (int r = 1; r < kWorld; ++r) want += real_input(r, i);
    ok = memcmp(&buf[i], &want, sizeof want) == 0;
  }
  check_locked(ok, "deterministic allreduce", rank, sumcast_last_error(comm));
  free(buf);
  sumcast_comm_destroy(comm);
  return NULL;
}

/* A communicator whose appliance goes away fails its next call, and says so. */
static void* orphan_main(void* arg) {
  const int rank = (int)(size_t)arg;
  sumcast_config cfg;
  sumcast_config_init(&cfg);
  sumcast_appliance app = {g_address, 1.0};
  cfg.job_name = "c-api-orphan";
  cfg.rank = (uint32_t)rank;
  cfg.world_size = kWorld;
  cfg.appliances = &app;
  cfg.appliance_count = 1;
  cfg.auth_token = kToken;
  cfg.bind_ip = "127.0.0.1";
  sumcast_comm* comm = NULL;
  if (sumcast_comm_create(&cfg, &comm) != SUMCAST_OK) {
    check_locked(0, "orphan create", rank, sumcast_last_error(NULL));
    return NULL;
  }
  return comm;
}

int main(void) {
  CHECK(sumcast_version() == SUMCAST_API_VERSION);
  CHECK(sumcast_version() >> 16 == SUMCAST_API_VERSION_MAJOR);
  CHECK(strcmp(sumcast_result_name(SUMCAST_ERR_TIMEOUT), "SUMCAST_ERR_TIMEOUT") == 0);

  sumcast_config cfg;
  sumcast_config_init(&cfg);
  CHECK(cfg.struct_size == sizeof(sumcast_config));
  CHECK(cfg.payload_bytes == 1024);
  CHECK(cfg.rto_initial_us == 5000);
  CHECK(cfg.dtype == SUMCAST_FP32 && cfg.op == SUMCAST_SUM);
  CHECK(cfg.deterministic == 0);
  CHECK(cfg.multicast == 0);
  CHECK(cfg.failover == 0 && cfg.failover_after_ms == 1000 && cfg.failover_max == 4);
  CHECK(cfg.cnp_reaction == 1 && cfg.window_cut_percent == 50 && cfg.window_step == 1);
  CHECK(cfg.window_cut_interval_us == 0 && cfg.busy_poll_us == 0);
  CHECK(cfg.udp_gro == 1 && cfg.udp_gso == 0);
  CHECK(cfg.loss_notices == 1);
  CHECK(cfg.send_queue_us == 2000);
  CHECK(cfg.dscp == 0 && cfg.ecn == 0 && cfg.repair_dscp == -1);

  /* Errors before any communicator exists go to sumcast_last_error(NULL). */
  sumcast_comm* comm = (sumcast_comm*)&cfg;
  CHECK(sumcast_comm_create(NULL, &comm) == SUMCAST_ERR_INVALID_ARGUMENT);
  CHECK(comm == NULL);
  CHECK(strlen(sumcast_last_error(NULL)) > 0);
  cfg.job_name = "x";
  cfg.world_size = 2;
  cfg.rank = 5;
  CHECK(refused(&cfg, "rank"));
  cfg.api_version = (SUMCAST_API_VERSION_MAJOR + 1) << 16;
  cfg.rank = 0;
  CHECK(refused(&cfg, "major"));
  cfg.api_version = SUMCAST_API_VERSION;
  cfg.transport = "carrier-pigeon";
  CHECK(refused(&cfg, "transport"));
  cfg.transport = NULL;
  cfg.failover = 7;
  CHECK(refused(&cfg, "failover"));
  cfg.failover = 0;
  cfg.window_cut_percent = 100;
  CHECK(refused(&cfg, "window_cut_percent"));
  cfg.window_cut_percent = 50;
  cfg.send_queue_us = 1000001; /* reaches the communicator's check */
  CHECK(refused(&cfg, "send_queue_us"));
  /* A program built against API 1.5 (no send_queue_us): what lies past its struct is not read, so
     the default stands and the next check (no appliance given) is the one that fails. */
  cfg.struct_size = offsetof(sumcast_config, send_queue_us);
  CHECK(refused(&cfg, "appliance"));
  cfg.struct_size = sizeof(sumcast_config);
  cfg.send_queue_us = 2000;
  cfg.dscp = 64;
  CHECK(refused(&cfg, "dscp must be 0..63"));
  cfg.dscp = 26;
  cfg.repair_dscp = 64; /* reaches the communicator's check */
  CHECK(refused(&cfg, "repair_dscp must be -1..63"));
  /* Built against API 1.6: the marking fields keep their defaults. */
  cfg.struct_size = offsetof(sumcast_config, dscp);
  CHECK(refused(&cfg, "appliance"));
  cfg.struct_size = sizeof(sumcast_config);
  cfg.dscp = 0;
  cfg.repair_dscp = -1;
  sumcast_comm_destroy(NULL);

  /* The shared library exports the C API only. */
  void* lib = dlopen(SUMCAST_LIB_PATH, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib != NULL);
  if (lib != NULL) {
    CHECK(dlsym(lib, "sumcast_allreduce") != NULL);
    CHECK(dlsym(lib, "sumcast_wait") != NULL);
    CHECK(dlsym(lib, "sumcast_allreduce_local_group") != NULL);
    CHECK(dlsym(lib, "_ZN7sumcast4shim12Communicator6createERKNS0_10CommConfigE") == NULL);
    CHECK(dlsym(lib, "_ZN7sumcast4icrc5crc32EjPKvm") == NULL); /* nor the ICRC library */
    dlclose(lib);
  }

  if (c_api_test_service_start(kToken, g_address, sizeof(g_address)) != 0) {
    fprintf(stderr, "cannot start the embedded service\n");
    return 1;
  }
  pthread_t t[kWorld];
  for (int r = 0; r < kWorld; ++r) pthread_create(&t[r], NULL, rank_main, (void*)(size_t)r);
  for (int r = 0; r < kWorld; ++r) pthread_join(t[r], NULL);
  for (int r = 0; r < kWorld; ++r) pthread_create(&t[r], NULL, deterministic_main, (void*)(size_t)r);
  for (int r = 0; r < kWorld; ++r) pthread_join(t[r], NULL);

  sumcast_comm* orphans[kWorld];
  for (int r = 0; r < kWorld; ++r) pthread_create(&t[r], NULL, orphan_main, (void*)(size_t)r);
  for (int r = 0; r < kWorld; ++r) {
    void* c = NULL;
    pthread_join(t[r], &c);
    orphans[r] = c;
  }
  c_api_test_service_stop();
  for (int r = 0; r < kWorld; ++r) {
    if (orphans[r] == NULL) continue;
    float x = 1;
    const sumcast_result rc = sumcast_allreduce(orphans[r], &x, &x, 1);
    CHECK(rc == SUMCAST_ERR_ABORTED || rc == SUMCAST_ERR_IO);
    CHECK(strlen(sumcast_last_error(orphans[r])) > 0);
    CHECK(sumcast_allreduce(orphans[r], &x, &x, 1) == rc); /* dead for good */
    sumcast_comm_destroy(orphans[r]);
  }

  printf("c_api_test: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
