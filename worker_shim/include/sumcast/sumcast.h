/* libsumcast: all-reduce through Sumcast summation appliances. C API.
 *
 * A communicator (sumcast_comm) is one rank's membership in one job: it registers with every
 * configured appliance (TCP control connection, shared-token authentication), then sends its
 * data as RoCEv2 packets over a kernel UDP socket and receives the summed results.
 *
 *   sumcast_config cfg;
 *   sumcast_config_init(&cfg);
 *   cfg.job_name = "resnet"; cfg.rank = r; cfg.world_size = n;
 *   sumcast_appliance app = {"10.0.0.1:4790", 1.0};
 *   cfg.appliances = &app; cfg.appliance_count = 1;
 *   cfg.auth_token = token; cfg.dtype = SUMCAST_FP32; cfg.op = SUMCAST_SUM;
 *   sumcast_comm* comm;
 *   if (sumcast_comm_create(&cfg, &comm) != SUMCAST_OK) puts(sumcast_last_error(NULL));
 *   if (sumcast_allreduce(comm, grads, grads, n_elems) != SUMCAST_OK) puts(sumcast_last_error(comm));
 *   sumcast_comm_destroy(comm);
 *
 * Rules every rank must follow. All ranks of a job use the same job name, appliance list (same
 * order, same weights), dtype, op and payload size, and make the same sequence of calls with the
 * same element counts: chunk numbering is derived from that sequence, so ranks that diverge
 * corrupt each other's results or time out.
 *
 * Errors. No function aborts the process or throws. Every function that can fail returns a
 * sumcast_result; the message of the last failure on a communicator is sumcast_last_error(comm)
 * (valid until the next call on that communicator), and a failed sumcast_comm_create leaves its
 * message in sumcast_last_error(NULL) (per thread). Once a call failed with SUMCAST_ERR_TIMEOUT,
 * SUMCAST_ERR_ABORTED or SUMCAST_ERR_IO, the communicator is dead: every pending and later call
 * returns the same error; destroy it and create a new one (a new job).
 *
 * Threads. A communicator is used by one thread at a time (calls on one communicator must not
 * overlap); different communicators are independent. There is no background thread: a
 * non-blocking all-reduce progresses only inside sumcast_test, sumcast_wait and sumcast_allreduce
 * on the same communicator.
 *
 * Versioning. SUMCAST_API_VERSION is (major << 16) | minor. A program built against one major
 * version works with any library of the same major version and an equal or newer minor version;
 * check sumcast_version() at run time. New configuration fields are only ever appended to
 * sumcast_config, and sumcast_config_init records the struct's size, so an older program keeps
 * working with a newer library. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SUMCAST_EXPORT __attribute__((visibility("default")))
#else
#define SUMCAST_EXPORT
#endif

#define SUMCAST_API_VERSION_MAJOR 1
/* Minor versions: 1: sumcast_config.deterministic; 2: .multicast, sumcast_allreduce_local_group;
   3: .failover*; 4: .cnp_reaction, .window_*, .busy_poll_us, .udp_gro, .udp_gso; 5: .loss_notices;
   6: .send_queue_us; 7: .dscp, .ecn, .repair_dscp. */
#define SUMCAST_API_VERSION_MINOR 7
#define SUMCAST_API_VERSION ((SUMCAST_API_VERSION_MAJOR << 16) | SUMCAST_API_VERSION_MINOR)

typedef enum sumcast_result {
  SUMCAST_OK = 0,
  SUMCAST_ERR_INVALID_ARGUMENT = 1, /* a precondition on the arguments does not hold */
  SUMCAST_ERR_NOT_FOUND = 2,        /* a host name or request does not exist */
  SUMCAST_ERR_IO = 3,               /* a system call failed or a connection dropped */
  SUMCAST_ERR_REFUSED = 4,          /* an appliance said no (token, limits, conflicting job) */
  SUMCAST_ERR_TIMEOUT = 5,          /* no progress within a configured bound */
  SUMCAST_ERR_ABORTED = 6,          /* an appliance failed the job (member gone, timeout, stop) */
  SUMCAST_ERR_UNAVAILABLE = 7,      /* a needed resource or feature is missing */
  SUMCAST_ERR_INTERNAL = 8          /* a bug: please report the message */
} sumcast_result;

/* Element types; values match the wire format's dtype codes. */
typedef enum sumcast_dtype {
  SUMCAST_FP32 = 0,
  SUMCAST_FP16 = 1,  /* IEEE binary16; summed in fp32 by the appliance, rounded once */
  SUMCAST_BF16 = 2,  /* bfloat16; summed in fp32 by the appliance, rounded once */
  SUMCAST_INT32 = 3, /* wrapping two's-complement sum */
  SUMCAST_FP64 = 4
} sumcast_dtype;

typedef enum sumcast_op { SUMCAST_SUM = 0, SUMCAST_MIN = 1, SUMCAST_MAX = 2 } sumcast_op;

/* One appliance: its control endpoint and its share of the traffic. */
typedef struct sumcast_appliance {
  const char* address; /* "host:port" of the control server (host: dotted quad or name) */
  double weight;       /* relative bandwidth; each call's elements are split across appliances in
                          proportion to the weights, as contiguous ranges. > 0 */
} sumcast_appliance;

/* Configuration of a communicator. Always start from sumcast_config_init(), which writes the
 * defaults given below, then set the fields you need. Strings and arrays are copied by
 * sumcast_comm_create; they need not outlive it. */
typedef struct sumcast_config {
  uint32_t struct_size;                /* set by sumcast_config_init; do not change */
  uint32_t api_version;                /* set by sumcast_config_init to SUMCAST_API_VERSION */
  const char* job_name;                /* required: 1..64 bytes, the same on every rank of the job */
  uint32_t rank;                       /* required: 0..world_size-1 */
  uint32_t world_size;                 /* required: ranks in the job, 1..65535 */
  const sumcast_appliance* appliances; /* required: at least one */
  size_t appliance_count;
  const char* auth_token;       /* the appliances' shared secret; default "" */
  sumcast_dtype dtype;          /* default SUMCAST_FP32 */
  sumcast_op op;                /* default SUMCAST_SUM */
  uint32_t payload_bytes;       /* payload per packet wanted (the appliance may grant less):
                                   dtype size..4096; default 1024, which the UDP transport takes as
                                   "the largest RoCE payload the path MTU carries" (1024 on
                                   1500-byte links, 4096 with jumbo frames) */
  uint32_t slots;               /* window slots wanted per appliance, 0..65535; default 0 = the
                                   appliance's default */
  const char* bind_ip;          /* local IPv4 to send from; default NULL = the address the kernel uses
                                   to reach the first appliance */
  uint16_t udp_port;            /* local UDP port; default 0 = ephemeral */
  uint32_t rto_initial_us;      /* first retransmission timeout of a packet; default 5000 */
  uint32_t rto_max_us;          /* exponential back-off cap; default 200000 */
  uint32_t retries;             /* retransmissions of one packet before the call fails with
                                   SUMCAST_ERR_TIMEOUT; 0 = unlimited; default 100 */
  uint32_t op_timeout_ms;       /* an appliance that returns no result for this long while packets
                                   are outstanding fails the call (SUMCAST_ERR_TIMEOUT); 0 = never;
                                   default 30000 */
  uint32_t connect_timeout_ms;  /* TCP connect and authentication, per appliance; default 10000 */
  uint32_t register_timeout_ms; /* waiting for every rank to register; default 60000 */
  const char* transport;        /* "udp" (kernel UDP socket; default NULL = "udp") or "verbs" (rdma-core
                                   UD QP on a RoCEv2 NIC, where the library was built with libibverbs;
                                   today's appliances do not yet accept its packets: see
                                   docs/protocol.md, known gap 2) */
  const char* rdma_device;      /* verbs: device name; default NULL = the one holding bind_ip's GID */
  /* API 1.1. Nonzero: ask for deterministic summation (docs/fidelity.md): every result is
     bit-identical whatever the order in which the ranks' packets arrive and whatever was
     retransmitted, at a memory cost on the appliance (checked at registration). The same on
     every rank of the job (else SUMCAST_ERR_REFUSED). An appliance that does not offer it fails
     sumcast_comm_create. Default 0: arrival-order summation within the error bound of
     docs/fidelity.md. */
  uint32_t deterministic;
  /* API 1.2. Nonzero: ask for results by IPv4 multicast (one frame per chunk to the job's group,
     which this rank joins on bind_ip's interface and leaves when the communicator fails or is
     destroyed; the switch must forward the group: IGMP snooping with a querier, or flooding).
     The same on every rank (else SUMCAST_ERR_REFUSED). An appliance that does not allow it
     (agg.conf dataplane.multicast) sends unicast results instead. With "verbs" the QP is attached
     to the group (ibv_attach_mcast; verified on no NIC yet). Default 0: one result copy per rank. */
  uint32_t multicast;
  /* API 1.3. Failover (docs/failover.md): with more than one appliance, the loss of one mid-job
     (killed, frozen, unreachable) is survived: its byte range moves to the next appliance that is
     up and what some rank lacks is resent there; calls complete without an error. 0 (default):
     on with more than one appliance; 1: off (the loss fails the calls); 2: on. The same on every
     rank. */
  uint32_t failover;
  uint32_t failover_after_ms;   /* an appliance that answers nothing this long (liveness probes
                                   included) while packets are outstanding is lost; below
                                   op_timeout_ms; default 1000 */
  uint32_t failover_timeout_ms; /* one failover's agreement and re-registration; default 30000 */
  uint32_t failover_max;        /* failovers per communicator, past which calls fail; default 4 */
  /* API 1.4. Congestion (docs/protocol.md §3): of an appliance's slots at most a window carry a
     chunk at once; a CNP addressed to this rank or a CE-marked result cuts it, results regrow it.
     Exactness never depends on the window. */
  uint32_t cnp_reaction;           /* nonzero (default 1): cut the window; 0: only count CNPs */
  uint32_t window_cut_percent;     /* a cut leaves this percent of the window, 1..99; default 50 */
  uint32_t window_step;            /* slots regained per window of results without a cut; default 1 */
  uint32_t window_cut_interval_us; /* at most one cut per this long; default 0: per smoothed RTT */
  uint32_t busy_poll_us;           /* "udp": SO_BUSY_POLL on the data sockets, 0..1000000 us;
                                      default 0: off */
  uint32_t udp_gro;                /* "udp": nonzero (default 1): receive results the kernel
                                      coalesced (UDP_GRO) where it allows it; 0: one per receive */
  uint32_t udp_gso;                /* "udp": nonzero: send runs of contributions as UDP_SEGMENT
                                      trains (segment k carries IP ID k, docs/protocol.md §2.2);
                                      aggregators of this version take them on any path (sumcastd
                                      reads the IP ID, kernel-UDP ones find it); default 0 */
  /* API 1.5. Loss notices (docs/protocol.md §7): nonzero (default 1) asks the appliances to tell
     this rank when its contribution to a chunk is missing, which it then resends at once, while
     a loss that is another rank's is left to that rank's notice for about a round trip. The same
     on every rank. An appliance that predates loss notices refuses the registration: set 0 for one. */
  uint32_t loss_notices;
  /* API 1.6. "udp": new chunks wait while more than this many microseconds of the rate results
     come back at (at least 128 KiB) sit queued below the data socket (qdisc, device), so that a
     resend never waits behind a whole window on a host whose own link is the bottleneck;
     0..1000000, default 2000; 0: off (docs/deployment.md, "The worker's own send queue"). */
  uint32_t send_queue_us;
  /* API 1.7. Marking (docs/deployment.md, "DSCP, PFC and ECN"): the DSCP of the contributions,
     0..63 (default 0; "udp": IP_TOS, "verbs": the traffic class), for a fabric that classifies
     RoCE by it; ecn nonzero marks them ECT(0) so that ECN switches mark CE instead of dropping
     (default 0: not-ECT); repair_dscp, -1..63, the DSCP of resends (retransmissions and probes),
     for a queue that serves them first ("udp" only; default -1: dscp). */
  uint32_t dscp;
  uint32_t ecn;
  int32_t repair_dscp;
} sumcast_config;

typedef struct sumcast_comm sumcast_comm;
typedef struct sumcast_request sumcast_request;

/* The library's SUMCAST_API_VERSION. */
SUMCAST_EXPORT uint32_t sumcast_version(void);

/* A short constant name for a result code ("SUMCAST_ERR_TIMEOUT"). */
SUMCAST_EXPORT const char* sumcast_result_name(sumcast_result result);

/* Writes the defaults into *config. Precondition: config != NULL. */
SUMCAST_EXPORT void sumcast_config_init(sumcast_config* config);

/* Creates a communicator: opens the UDP socket, connects to every appliance in order and
 * registers this rank, blocking until all ranks of the job registered with each appliance (or
 * register_timeout_ms). On success *comm is set; on failure *comm is NULL and
 * sumcast_last_error(NULL) says why. Preconditions: config from sumcast_config_init; comm != NULL. */
SUMCAST_EXPORT sumcast_result sumcast_comm_create(const sumcast_config* config, sumcast_comm** comm);

/* Leaves the job cleanly and frees the communicator. Requests not yet completed are abandoned:
 * their buffers are no longer touched and their handles become invalid. comm may be NULL. */
SUMCAST_EXPORT void sumcast_comm_destroy(sumcast_comm* comm);

/* All-reduce of `count` elements of the communicator's dtype with its op; blocks until this
 * rank has the result in recvbuf. sendbuf may equal recvbuf (in place); otherwise the two must not
 * overlap. count may be 0. Elements are in host (little-endian) order. */
SUMCAST_EXPORT sumcast_result sumcast_allreduce(sumcast_comm* comm, const void* sendbuf, void* recvbuf, size_t count);

/* One buffer of a process that owns several on one host (several GPUs, or host buffers). */
typedef struct sumcast_local_buffer {
  void* data; /* `count` elements of the communicator's dtype: the input, then the result (in place) */
  int device; /* CUDA device ordinal, or -1 for host memory (the only kind this version accepts) */
} sumcast_local_buffer;

/* All-reduce across hosts of the `n` buffers' combination (the communicator's op): the buffers
 * are reduced on this host by the topology planner's plan (docs/topology.md), the host's result
 * goes to the appliance as this rank's one contribution, and the result comes back into every
 * buffer by the plan. Every rank of the job must pass the same n and count (the plan's exchanges
 * follow from them). Host memory only (device -1); fp32, fp64 and int32. The plan is made at the
 * first call and kept while n and count stay the same. Precondition: buffers has n entries. */
SUMCAST_EXPORT sumcast_result sumcast_allreduce_local_group(sumcast_comm* comm, const sumcast_local_buffer* buffers,
                                                            size_t n, size_t count);

/* Starts an all-reduce and returns at once with *request set. The buffers must stay untouched
 * (sendbuf unmodified, recvbuf unread) until sumcast_test reports completion or sumcast_wait
 * returns. Several requests may be outstanding; each must be completed with sumcast_test or
 * sumcast_wait. On failure *request is NULL. */
SUMCAST_EXPORT sumcast_result sumcast_iallreduce(sumcast_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                                                 sumcast_request** request);

/* Makes progress without blocking. If the request finished, sets *done = 1, frees the request
 * and returns its outcome; otherwise sets *done = 0 and returns SUMCAST_OK. */
SUMCAST_EXPORT sumcast_result sumcast_test(sumcast_request* request, int* done);

/* Blocks until the request finished, frees it and returns its outcome. */
SUMCAST_EXPORT sumcast_result sumcast_wait(sumcast_request* request);

/* The message of the last failed call on comm (the empty string if none), or, for comm == NULL,
 * of the calling thread's last failed sumcast_comm_create. Valid until the next call on the same
 * communicator (or the next sumcast_comm_create on this thread). Never NULL. */
SUMCAST_EXPORT const char* sumcast_last_error(const sumcast_comm* comm);

/* Counters of the communicator: index 0..sumcast_stat_count(comm)-1 gives a name ("results",
 * "retransmissions", "drop_bad_icrc", ...) and its current value. Returns SUMCAST_ERR_NOT_FOUND
 * for an index out of range. *name stays valid for the communicator's life. */
SUMCAST_EXPORT size_t sumcast_stat_count(const sumcast_comm* comm);
SUMCAST_EXPORT sumcast_result sumcast_stat(const sumcast_comm* comm, size_t index, const char** name, uint64_t* value);

#ifdef __cplusplus
} /* extern "C" */
#endif
