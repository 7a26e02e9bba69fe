// The Sumcast control protocol: messages between a worker (shim::ControlClient) and the
// appliance's control plane (control::Server) over TCP. Specification: docs/protocol.md §8; this
// comment is the authoritative layout that section documents.
//
// Header-only codec. Encoders write into a caller buffer and never write past it; decoders read
// from a span and never read past it. Every rejection has a name (ControlError). The codec checks
// structure only (magic, version, lengths, reserved bytes, known enum values, 24-bit QPNs);
// what a value means for the appliance (world size limits, accepted dtypes, ...) is the server's
// to check, and it answers with REFUSE and a RefuseCode.
//
// ---------------------------------------------------------------------------------------------
// §8.1 Transport. One TCP connection per worker rank. Messages are length-prefixed; all integers
// are big-endian (network order); strings are raw bytes (UTF-8 by convention), never
// NUL-terminated, with an explicit length. A message is at most kMaxControlMessageLen (4096)
// bytes, header included; a receiver rejects a larger body_len from the header alone, before
// reading the body.
//
// §8.2 Header (kControlHeaderLen = 12 bytes):
//   off len field
//     0   4 magic      kControlMagic = 0x53554D43 ("SUMC")
//     4   1 version    kControlVersion = 1
//     5   1 type       ControlType (1..10)
//     6   2 reserved   must be 0
//     8   4 body_len   bytes that follow the header; <= kMaxControlBodyLen (4084)
//
// §8.3 Bodies (offsets from the start of the body; body_len must equal the size given here
// exactly: a shorter or longer body is rejected):
//
//   HELLO (1) worker -> appliance, must be the first message; body_len = 4 + token_len
//     0   2 token_len  1..kMaxTokenLen (256)
//     2   2 reserved   0
//     4   n token      the shared secret
//   AUTH_OK (2) appliance -> worker, body_len = 0
//   AUTH_FAIL (3) appliance -> worker, body_len = 0; the appliance then closes the connection
//   REGISTER (4) worker -> appliance; body_len = 28 + name_len
//     0   2 world_size
//     2   2 rank
//     4   1 dtype          wire::Dtype (0..4)
//     5   1 op             wire::ReduceOp (0..2)
//     6   2 payload_bytes  largest payload per packet the worker wants
//     8   2 slots          slots wanted; 0 = the appliance's default
//    10   6 mac            the worker's data endpoint (where results go)
//    16   4 ipv4
//    20   2 udp_port
//    22   4 qpn            < 2^24
//    26   1 name_len       0..kMaxJobNameLen (64)
//    27   1 flags          bit 0: deterministic summation (docs/fidelity.md); bit 1: results by
//                          multicast wanted; bit 2: loss notices wanted (protocol.md §7); other
//                          bits 0 (was "reserved, 0": an older appliance rejects a set bit)
//    28   n name           job name; ranks of one job send the same name (and the same flags)
//   GRANT (5) appliance -> every rank of a job once all registered; body_len = 32 + 4 * qpn_count
//     0   4 job_id         != 0
//     4   4 qkey           the job's Q_Key (bit 31 clear: not a controlled Q_Key)
//     8   2 slot_count
//    10   2 payload_bytes  payload per packet to use (<= every rank's wish, multiple of dtype size)
//    12   6 mac            the appliance's data port
//    18   4 ipv4
//    22   2 udp_port
//    24   1 flags          bit 0: results by multicast (REGISTER asked for it and the appliance
//                          allows it); bit 1: deterministic summation (echoes REGISTER's bit 0);
//                          bit 2: loss notices (REGISTER asked for them and the appliance sends
//                          them); other bits 0
//    25   1 reserved       0
//    26   2 qpn_count      1..kMaxCoreQpns (256): one per appliance core
//    28   4 multicast_ip   the job's group (0 unless multicast)
//    32 4*k qpn[]          each < 2^24; slot s goes to qpn[s % qpn_count]
//   REFUSE (6) appliance -> worker: answers REGISTER (or a connection it will not serve:
//       not_authenticated, too_many_connections); body_len = 4 + text_len
//     0   1 code           RefuseCode (1..17)
//     1   1 reserved       0
//     2   2 text_len       0..kMaxTextLen (512)
//     4   n text           human-readable detail
//   LEAVE (7) worker -> appliance; body_len = 4. The worker then closes the connection.
//     0   4 job_id         the granted job; 0 = withdraw a pending registration
//   ABORT (8) appliance -> every member of a failed job; body_len = 8 + text_len
//     0   4 job_id
//     4   1 reason         wire::AbortReason (1..4; kNone is not an abort)
//     5   1 reserved       0
//     6   2 text_len       0..kMaxTextLen (512)
//     8   n text
//   STATUS_REQUEST (9) worker/tool -> appliance, after AUTH_OK; body_len = 0
//   STATUS_REPLY (10) appliance -> requester; body_len = 4 + sum of entry sizes
//     0   2 job_count
//     2   1 flags          bit 0: truncated (more jobs than fit in one message); other bits 0
//     3   1 reserved       0
//     4     job_count entries, each 24 + name_len bytes:
//            0 4 job_id (0 while pending) | 4 2 world_size | 6 2 registered (<= world_size) |
//            8 1 dtype | 9 1 op | 10 1 state (0 pending, 1 running) | 11 1 name_len (<= 64) |
//           12 8 slots_completed | 20 4 ms_since_progress (saturating) | 24 n name
//
// §8.4 Conversation. HELLO -> AUTH_OK | AUTH_FAIL (closed). Within io_timeout the worker must
// have authenticated, and a message once started must be complete within io_timeout, else the
// appliance closes the connection. REGISTER -> (when every rank registered) GRANT, or REFUSE
// (at once, or later: registration timeout, dataplane refused the job). While the job runs the
// connection stays open and idle; ABORT may arrive at any time. LEAVE from every rank completes
// the job; a connection closed without LEAVE fails it (ABORT kMemberLeft to the others). Any
// malformed message, a message of the wrong direction or a message before AUTH_OK closes the
// connection.
// ---------------------------------------------------------------------------------------------
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "sumcast/endian.h"
#include "sumcast/wire/format.h"

namespace sumcast::wire {

// §8.2
inline constexpr uint32_t kControlMagic = 0x53554D43;  // "SUMC"
inline constexpr uint8_t kControlVersion = 1;
inline constexpr size_t kControlHeaderLen = 12;
inline constexpr size_t kMaxControlMessageLen = 4096;
inline constexpr size_t kMaxControlBodyLen = kMaxControlMessageLen - kControlHeaderLen;
// §8.3 field limits
inline constexpr size_t kMaxTokenLen = 256;
inline constexpr size_t kMaxJobNameLen = 64;
inline constexpr size_t kMaxTextLen = 512;
inline constexpr size_t kMaxCoreQpns = 256;
inline constexpr uint32_t kMaxQpn = 0xFFFFFF;
inline constexpr uint16_t kDefaultControlPort = 4790;

inline constexpr size_t kHelloFixedLen = 4;
inline constexpr size_t kRegisterFixedLen = 28;
inline constexpr size_t kGrantFixedLen = 32;
inline constexpr size_t kRefuseFixedLen = 4;
inline constexpr size_t kLeaveLen = 4;
inline constexpr size_t kAbortFixedLen = 8;
inline constexpr size_t kStatusReplyFixedLen = 4;
inline constexpr size_t kStatusEntryFixedLen = 24;

inline constexpr uint8_t kGrantFlagMulticast = 0x01;
inline constexpr uint8_t kGrantFlagDeterministic = 0x02;
inline constexpr uint8_t kGrantFlagLossNotices = 0x04;
inline constexpr uint8_t kRegisterFlagDeterministic = 0x01;
inline constexpr uint8_t kRegisterFlagMulticast = 0x02;
inline constexpr uint8_t kRegisterFlagLossNotices = 0x04;
inline constexpr uint8_t kStatusFlagTruncated = 0x01;

enum class ControlType : uint8_t {
  kHello = 1,
  kAuthOk = 2,
  kAuthFail = 3,
  kRegister = 4,
  kGrant = 5,
  kRefuse = 6,
  kLeave = 7,
  kAbort = 8,
  kStatusRequest = 9,
  kStatusReply = 10,
};
constexpr bool is_valid_control_type(uint8_t t) { return t >= 1 && t <= 10; }
// True for the types a worker sends (the appliance rejects the others, and vice versa).
constexpr bool is_worker_to_appliance(ControlType t) {
  return t == ControlType::kHello || t == ControlType::kRegister || t == ControlType::kLeave ||
         t == ControlType::kStatusRequest;
}
constexpr const char* control_type_name(ControlType t) {
  switch (t) {
    case ControlType::kHello:
      return "HELLO";
    case ControlType::kAuthOk:
      return "AUTH_OK";
    case ControlType::kAuthFail:
      return "AUTH_FAIL";
    case ControlType::kRegister:
      return "REGISTER";
    case ControlType::kGrant:
      return "GRANT";
    case ControlType::kRefuse:
      return "REFUSE";
    case ControlType::kLeave:
      return "LEAVE";
    case ControlType::kAbort:
      return "ABORT";
    case ControlType::kStatusRequest:
      return "STATUS_REQUEST";
    case ControlType::kStatusReply:
      return "STATUS_REPLY";
  }
  return "?";
}

// Every reason the codec rejects a message or refuses to encode one. X-macro: enum and names.
#define SUMCAST_CONTROL_ERRORS(X)                                                      \
  X(kOk, "ok")                                                                         \
  X(kTruncatedHeader, "truncated_header") /* fewer than 12 bytes */                    \
  X(kBadMagic, "bad_magic")                                                            \
  X(kBadVersion, "bad_version")                                                        \
  X(kBadType, "bad_type")                /* type byte unknown */                       \
  X(kBadReserved, "bad_reserved")        /* a reserved field or flag bit is not 0 */   \
  X(kTooLarge, "too_large")              /* body_len > kMaxControlBodyLen */           \
  X(kTruncatedBody, "truncated_body")    /* fewer bytes than body_len */               \
  X(kTrailingBytes, "trailing_bytes")    /* bytes after the message */                 \
  X(kUnexpectedType, "unexpected_type")  /* header's type is not the one decoded */    \
  X(kBadBodyLength, "bad_body_length")   /* body_len != the size its fields imply */   \
  X(kBadTokenLength, "bad_token_length") /* 0 or > kMaxTokenLen */                     \
  X(kBadNameLength, "bad_name_length")   /* > kMaxJobNameLen */                        \
  X(kBadTextLength, "bad_text_length")   /* > kMaxTextLen */                           \
  X(kBadDtype, "bad_dtype")                                                            \
  X(kBadOp, "bad_op")                                                                  \
  X(kBadQpn, "bad_qpn")            /* >= 2^24 */                                       \
  X(kBadQpnCount, "bad_qpn_count") /* 0 or > kMaxCoreQpns */                           \
  X(kBadJobId, "bad_job_id")       /* 0 where a job id is required */                  \
  X(kBadRefuseCode, "bad_refuse_code")                                                 \
  X(kBadAbortReason, "bad_abort_reason")                                               \
  X(kBadJobState, "bad_job_state") /* status entry: state > 1 or registered > world */ \
  X(kNoSpace, "no_space")          /* encode: the buffer is too small */

enum class ControlError : uint8_t {
#define SUMCAST_X(name, str) name,
  SUMCAST_CONTROL_ERRORS(SUMCAST_X)
#undef SUMCAST_X
};
inline constexpr int kControlErrorCount = 0
#define SUMCAST_X(name, str) +1
    SUMCAST_CONTROL_ERRORS(SUMCAST_X)
#undef SUMCAST_X
    ;
inline const char* control_error_name(ControlError e) {
  static constexpr const char* kNames[] = {
#define SUMCAST_X(name, str) str,
      SUMCAST_CONTROL_ERRORS(SUMCAST_X)
#undef SUMCAST_X
  };
  auto i = static_cast<size_t>(e);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

// Why the appliance refused (REFUSE code, §8.3). Values are stable on the wire.
#define SUMCAST_REFUSE_CODES(X)                                                     \
  X(kBadRequest, 1, "bad_request")                                                  \
  X(kNotAuthenticated, 2, "not_authenticated")                                      \
  X(kAlreadyRegistered, 3, "already_registered") /* this connection is in a job */  \
  X(kBadName, 4, "bad_name")                     /* empty job name */               \
  X(kBadWorldSize, 5, "bad_world_size")          /* not in 2..max_ranks */          \
  X(kBadRank, 6, "bad_rank")                     /* rank >= world size */           \
  X(kDtypeNotAccepted, 7, "dtype_not_accepted")                                     \
  X(kBadPayload, 8, "bad_payload")            /* no whole element fits */           \
  X(kTooManyJobs, 9, "too_many_jobs")         /* max_jobs reached */                \
  X(kJobMismatch, 10, "job_mismatch")         /* same name, other world/dtype/op */ \
  X(kJobRunning, 11, "job_running")           /* a job of that name already runs */ \
  X(kRankTaken, 12, "rank_taken")             /* rank already registered */         \
  X(kRegisterTimeout, 13, "register_timeout") /* not every rank came in time */     \
  X(kInstallFailed, 14, "install_failed")     /* the dataplane refused the job */   \
  X(kTooManyConnections, 15, "too_many_connections")                                \
  X(kShuttingDown, 16, "shutting_down")                                             \
  X(kUnreachable, 17, "unreachable") /* no route or no ARP answer for the member */

enum class RefuseCode : uint8_t {
#define SUMCAST_X(name, value, str) name = value,
  SUMCAST_REFUSE_CODES(SUMCAST_X)
#undef SUMCAST_X
};
inline constexpr uint8_t kMaxRefuseCode = 17;
constexpr bool is_valid_refuse_code(uint8_t c) { return c >= 1 && c <= kMaxRefuseCode; }
inline const char* refuse_code_name(RefuseCode c) {
  switch (c) {
#define SUMCAST_X(name, value, str) \
  case RefuseCode::name:            \
    return str;
    SUMCAST_REFUSE_CODES(SUMCAST_X)
#undef SUMCAST_X
  }
  return "?";
}

constexpr bool is_valid_abort_reason(uint8_t r) { return r >= 1 && r <= 4; }
constexpr const char* abort_reason_name(AbortReason r) {
  switch (r) {
    case AbortReason::kNone:
      return "none";
    case AbortReason::kTimeout:
      return "timeout";
    case AbortReason::kMemberLeft:
      return "member_left";
    case AbortReason::kApplianceStop:
      return "appliance_stop";
    case AbortReason::kAdmin:
      return "admin";
  }
  return "?";
}

// ---- Messages in host order ------------------------------------------------------------------

struct ControlHeader {
  ControlType type = ControlType::kHello;
  uint32_t body_len = 0;
};

struct HelloMsg {
  static constexpr ControlType kType = ControlType::kHello;
  std::string token;
  bool operator==(const HelloMsg&) const = default;
};
struct AuthOkMsg {
  static constexpr ControlType kType = ControlType::kAuthOk;
  bool operator==(const AuthOkMsg&) const = default;
};
struct AuthFailMsg {
  static constexpr ControlType kType = ControlType::kAuthFail;
  bool operator==(const AuthFailMsg&) const = default;
};
struct RegisterMsg {
  static constexpr ControlType kType = ControlType::kRegister;
  uint16_t world_size = 0;
  uint16_t rank = 0;
  Dtype dtype = Dtype::kFp32;
  ReduceOp op = ReduceOp::kSum;
  uint16_t payload_bytes = 0;
  uint16_t slots = 0;
  std::array<uint8_t, 6> mac{};
  uint32_t ip = 0;
  uint16_t udp_port = 0;
  uint32_t qpn = 0;
  bool deterministic = false;  // flags bit 0
  bool multicast = false;      // flags bit 1: results to the job's group wanted
  bool loss_notices = false;   // flags bit 2: loss notices wanted
  std::string name;
  bool operator==(const RegisterMsg&) const = default;
};
struct GrantMsg {
  static constexpr ControlType kType = ControlType::kGrant;
  uint32_t job_id = 0;
  uint32_t qkey = 0;
  uint16_t slot_count = 0;
  uint16_t payload_bytes = 0;
  std::array<uint8_t, 6> mac{};
  uint32_t ip = 0;
  uint16_t udp_port = 0;
  bool multicast = false;
  bool deterministic = false;  // flags bit 1
  bool loss_notices = false;   // flags bit 2
  uint32_t multicast_ip = 0;
  std::vector<uint32_t> core_qpns;
  bool operator==(const GrantMsg&) const = default;
};
struct RefuseMsg {
  static constexpr ControlType kType = ControlType::kRefuse;
  RefuseCode code = RefuseCode::kBadRequest;
  std::string text;
  bool operator==(const RefuseMsg&) const = default;
};
struct LeaveMsg {
  static constexpr ControlType kType = ControlType::kLeave;
  uint32_t job_id = 0;
  bool operator==(const LeaveMsg&) const = default;
};
struct AbortMsg {
  static constexpr ControlType kType = ControlType::kAbort;
  uint32_t job_id = 0;
  AbortReason reason = AbortReason::kTimeout;
  std::string text;
  bool operator==(const AbortMsg&) const = default;
};
struct StatusRequestMsg {
  static constexpr ControlType kType = ControlType::kStatusRequest;
  bool operator==(const StatusRequestMsg&) const = default;
};
struct JobStatusEntry {
  uint32_t job_id = 0;
  uint16_t world_size = 0;
  uint16_t registered = 0;
  Dtype dtype = Dtype::kFp32;
  ReduceOp op = ReduceOp::kSum;
  bool running = false;
  uint64_t slots_completed = 0;
  uint32_t ms_since_progress = 0;
  std::string name;
  bool operator==(const JobStatusEntry&) const = default;
};
struct StatusReplyMsg {
  static constexpr ControlType kType = ControlType::kStatusReply;
  bool truncated = false;
  std::vector<JobStatusEntry> jobs;
  bool operator==(const StatusReplyMsg&) const = default;
};

// ---- Header ----------------------------------------------------------------------------------

// Decodes and checks the 12-byte header at the start of `buf` (bytes after it are not looked at).
// kTruncatedHeader means "need more bytes" to a stream reader; kTooLarge is decided here, before
// any body byte is read.
inline ControlError decode_control_header(std::span<const uint8_t> buf, ControlHeader* out) {
  if (buf.size() < kControlHeaderLen) return ControlError::kTruncatedHeader;
  const uint8_t* p = buf.data();
  if (load_be32(p) != kControlMagic) return ControlError::kBadMagic;
  if (p[4] != kControlVersion) return ControlError::kBadVersion;
  if (!is_valid_control_type(p[5])) return ControlError::kBadType;
  if (load_be16(p + 6) != 0) return ControlError::kBadReserved;
  const uint32_t body_len = load_be32(p + 8);
  if (body_len > kMaxControlBodyLen) return ControlError::kTooLarge;
  out->type = static_cast<ControlType>(p[5]);
  out->body_len = body_len;
  return ControlError::kOk;
}

inline void write_control_header(uint8_t* p, ControlType type, uint32_t body_len) {
  store_be32(p, kControlMagic);
  p[4] = kControlVersion;
  p[5] = static_cast<uint8_t>(type);
  store_be16(p + 6, 0);
  store_be32(p + 8, body_len);
}

// ---- Body sizes and validation shared by encoders ---------------------------------------------

inline size_t body_size(const HelloMsg& m) { return kHelloFixedLen + m.token.size(); }
inline size_t body_size(const AuthOkMsg&) { return 0; }
inline size_t body_size(const AuthFailMsg&) { return 0; }
inline size_t body_size(const RegisterMsg& m) { return kRegisterFixedLen + m.name.size(); }
inline size_t body_size(const GrantMsg& m) { return kGrantFixedLen + 4 * m.core_qpns.size(); }
inline size_t body_size(const RefuseMsg& m) { return kRefuseFixedLen + m.text.size(); }
inline size_t body_size(const LeaveMsg&) { return kLeaveLen; }
inline size_t body_size(const AbortMsg& m) { return kAbortFixedLen + m.text.size(); }
inline size_t body_size(const StatusRequestMsg&) { return 0; }
inline size_t body_size(const StatusReplyMsg& m) {
  size_t n = kStatusReplyFixedLen;
  for (const auto& j : m.jobs) n += kStatusEntryFixedLen + j.name.size();
  return n;
}
// Bytes of the whole encoded message (header + body).
template <typename M>
size_t encoded_size(const M& m) {
  return kControlHeaderLen + body_size(m);
}

namespace detail {

inline ControlError check_fields(const HelloMsg& m) {
  return m.token.empty() || m.token.size() > kMaxTokenLen ? ControlError::kBadTokenLength : ControlError::kOk;
}
inline ControlError check_fields(const AuthOkMsg&) { return ControlError::kOk; }
inline ControlError check_fields(const AuthFailMsg&) { return ControlError::kOk; }
inline ControlError check_fields(const RegisterMsg& m) {
  if (!is_valid_dtype(static_cast<uint8_t>(m.dtype))) return ControlError::kBadDtype;
  if (!is_valid_op(static_cast<uint8_t>(m.op))) return ControlError::kBadOp;
  if (m.qpn > kMaxQpn) return ControlError::kBadQpn;
  if (m.name.size() > kMaxJobNameLen) return ControlError::kBadNameLength;
  return ControlError::kOk;
}
inline ControlError check_fields(const GrantMsg& m) {
  if (m.job_id == 0) return ControlError::kBadJobId;
  if (m.core_qpns.empty() || m.core_qpns.size() > kMaxCoreQpns) return ControlError::kBadQpnCount;
  for (uint32_t q : m.core_qpns) {
    if (q > kMaxQpn) return ControlError::kBadQpn;
  }
  return ControlError::kOk;
}
inline ControlError check_fields(const RefuseMsg& m) {
  if (!is_valid_refuse_code(static_cast<uint8_t>(m.code))) return ControlError::kBadRefuseCode;
  return m.text.size() > kMaxTextLen ? ControlError::kBadTextLength : ControlError::kOk;
}
inline ControlError check_fields(const LeaveMsg&) { return ControlError::kOk; }
inline ControlError check_fields(const AbortMsg& m) {
  if (!is_valid_abort_reason(static_cast<uint8_t>(m.reason))) return ControlError::kBadAbortReason;
  return m.text.size() > kMaxTextLen ? ControlError::kBadTextLength : ControlError::kOk;
}
inline ControlError check_fields(const StatusRequestMsg&) { return ControlError::kOk; }
inline ControlError check_fields(const StatusReplyMsg& m) {
  if (m.jobs.size() > 0xFFFF) return ControlError::kTooLarge;
  for (const auto& j : m.jobs) {
    if (j.name.size() > kMaxJobNameLen) return ControlError::kBadNameLength;
    if (!is_valid_dtype(static_cast<uint8_t>(j.dtype))) return ControlError::kBadDtype;
    if (!is_valid_op(static_cast<uint8_t>(j.op))) return ControlError::kBadOp;
    if (j.registered > j.world_size) return ControlError::kBadJobState;
  }
  return ControlError::kOk;
}

// Strings go on the wire without a terminator (their length is a field of their own).
inline void put_bytes(uint8_t* p, const std::string& s) { std::copy(s.begin(), s.end(), p); }

// Writes the body of each message at `p` (exactly body_size(m) bytes; fields already checked).
inline void write_body(const HelloMsg& m, uint8_t* p) {
  store_be16(p, static_cast<uint16_t>(m.token.size()));
  store_be16(p + 2, 0);
  put_bytes(p + 4, m.token);
}
inline void write_body(const AuthOkMsg&, uint8_t*) {}
inline void write_body(const AuthFailMsg&, uint8_t*) {}
inline void write_body(const RegisterMsg& m, uint8_t* p) {
  store_be16(p, m.world_size);
  store_be16(p + 2, m.rank);
  p[4] = static_cast<uint8_t>(m.dtype);
  p[5] = static_cast<uint8_t>(m.op);
  store_be16(p + 6, m.payload_bytes);
  store_be16(p + 8, m.slots);
  std::memcpy(p + 10, m.mac.data(), 6);
  store_be32(p + 16, m.ip);
  store_be16(p + 20, m.udp_port);
  store_be32(p + 22, m.qpn);
  p[26] = static_cast<uint8_t>(m.name.size());
  p[27] = static_cast<uint8_t>((m.deterministic ? kRegisterFlagDeterministic : 0) |
                               (m.multicast ? kRegisterFlagMulticast : 0) |
                               (m.loss_notices ? kRegisterFlagLossNotices : 0));
  put_bytes(p + 28, m.name);
}
inline void write_body(const GrantMsg& m, uint8_t* p) {
  store_be32(p, m.job_id);
  store_be32(p + 4, m.qkey);
  store_be16(p + 8, m.slot_count);
  store_be16(p + 10, m.payload_bytes);
  std::memcpy(p + 12, m.mac.data(), 6);
  store_be32(p + 18, m.ip);
  store_be16(p + 22, m.udp_port);
  p[24] =
      static_cast<uint8_t>((m.multicast ? kGrantFlagMulticast : 0) | (m.deterministic ? kGrantFlagDeterministic : 0) |
                           (m.loss_notices ? kGrantFlagLossNotices : 0));
  p[25] = 0;
  store_be16(p + 26, static_cast<uint16_t>(m.core_qpns.size()));
  store_be32(p + 28, m.multicast_ip);
  for (size_t i = 0; i < m.core_qpns.size(); ++i) store_be32(p + kGrantFixedLen + 4 * i, m.core_qpns[i]);
}
inline void write_body(const RefuseMsg& m, uint8_t* p) {
  p[0] = static_cast<uint8_t>(m.code);
  p[1] = 0;
  store_be16(p + 2, static_cast<uint16_t>(m.text.size()));
  put_bytes(p + 4, m.text);
}
inline void write_body(const LeaveMsg& m, uint8_t* p) { store_be32(p, m.job_id); }
inline void write_body(const AbortMsg& m, uint8_t* p) {
  store_be32(p, m.job_id);
  p[4] = static_cast<uint8_t>(m.reason);
  p[5] = 0;
  store_be16(p + 6, static_cast<uint16_t>(m.text.size()));
  put_bytes(p + 8, m.text);
}
inline void write_body(const StatusRequestMsg&, uint8_t*) {}
inline void write_body(const StatusReplyMsg& m, uint8_t* p) {
  store_be16(p, static_cast<uint16_t>(m.jobs.size()));
  p[2] = m.truncated ? kStatusFlagTruncated : 0;
  p[3] = 0;
  uint8_t* e = p + kStatusReplyFixedLen;
  for (const auto& j : m.jobs) {
    store_be32(e, j.job_id);
    store_be16(e + 4, j.world_size);
    store_be16(e + 6, j.registered);
    e[8] = static_cast<uint8_t>(j.dtype);
    e[9] = static_cast<uint8_t>(j.op);
    e[10] = j.running ? 1 : 0;
    e[11] = static_cast<uint8_t>(j.name.size());
    store_be64(e + 12, j.slots_completed);
    store_be32(e + 20, j.ms_since_progress);
    put_bytes(e + kStatusEntryFixedLen, j.name);
    e += kStatusEntryFixedLen + j.name.size();
  }
}

inline std::string get_bytes(const uint8_t* p, size_t n) { return std::string(reinterpret_cast<const char*>(p), n); }

}  // namespace detail

// ---- Encoding --------------------------------------------------------------------------------

// Encodes header + body of `m` into `out`. On success sets *written to encoded_size(m). On any
// error nothing is written and *written is left unchanged.
template <typename M>
ControlError encode(const M& m, std::span<uint8_t> out, size_t* written) {
  const ControlError e = detail::check_fields(m);
  if (e != ControlError::kOk) return e;
  const size_t body = body_size(m);
  if (body > kMaxControlBodyLen) return ControlError::kTooLarge;
  if (out.size() < kControlHeaderLen + body) return ControlError::kNoSpace;
  write_control_header(out.data(), M::kType, static_cast<uint32_t>(body));
  detail::write_body(m, out.data() + kControlHeaderLen);
  *written = kControlHeaderLen + body;
  return ControlError::kOk;
}

// Appends the encoding of `m` to `out` (a convenience for senders that queue bytes).
template <typename M>
ControlError encode_append(const M& m, std::vector<uint8_t>* out) {
  const size_t at = out->size();
  out->resize(at + encoded_size(m));
  size_t n = 0;
  const ControlError e = encode(m, std::span<uint8_t>(out->data() + at, out->size() - at), &n);
  out->resize(e == ControlError::kOk ? at + n : at);
  return e;
}

// ---- Decoding bodies -------------------------------------------------------------------------
// Each takes exactly the body (body_len bytes) and rejects any other size.

inline ControlError decode_body(std::span<const uint8_t> b, HelloMsg* out) {
  if (b.size() < kHelloFixedLen) return ControlError::kBadBodyLength;
  const uint8_t* p = b.data();
  const size_t n = load_be16(p);
  if (load_be16(p + 2) != 0) return ControlError::kBadReserved;
  if (n == 0 || n > kMaxTokenLen) return ControlError::kBadTokenLength;
  if (b.size() != kHelloFixedLen + n) return ControlError::kBadBodyLength;
  out->token = detail::get_bytes(p + 4, n);
  return ControlError::kOk;
}
inline ControlError decode_body(std::span<const uint8_t> b, AuthOkMsg*) {
  return b.empty() ? ControlError::kOk : ControlError::kBadBodyLength;
}
inline ControlError decode_body(std::span<const uint8_t> b, AuthFailMsg*) {
  return b.empty() ? ControlError::kOk : ControlError::kBadBodyLength;
}
inline ControlError decode_body(std::span<const uint8_t> b, StatusRequestMsg*) {
  return b.empty() ? ControlError::kOk : ControlError::kBadBodyLength;
}
inline ControlError decode_body(std::span<const uint8_t> b, RegisterMsg* out) {
  if (b.size() < kRegisterFixedLen) return ControlError::kBadBodyLength;
  const uint8_t* p = b.data();
  const size_t n = p[26];
  if ((p[27] & ~(kRegisterFlagDeterministic | kRegisterFlagMulticast | kRegisterFlagLossNotices)) != 0) {
    return ControlError::kBadReserved;
  }
  if (n > kMaxJobNameLen) return ControlError::kBadNameLength;
  if (b.size() != kRegisterFixedLen + n) return ControlError::kBadBodyLength;
  if (!is_valid_dtype(p[4])) return ControlError::kBadDtype;
  if (!is_valid_op(p[5])) return ControlError::kBadOp;
  const uint32_t qpn = load_be32(p + 22);
  if (qpn > kMaxQpn) return ControlError::kBadQpn;
  out->world_size = load_be16(p);
  out->rank = load_be16(p + 2);
  out->dtype = static_cast<Dtype>(p[4]);
  out->op = static_cast<ReduceOp>(p[5]);
  out->payload_bytes = load_be16(p + 6);
  out->slots = load_be16(p + 8);
  std::memcpy(out->mac.data(), p + 10, 6);
  out->ip = load_be32(p + 16);
  out->udp_port = load_be16(p + 20);
  out->qpn = qpn;
  out->deterministic = (p[27] & kRegisterFlagDeterministic) != 0;
  out->multicast = (p[27] & kRegisterFlagMulticast) != 0;
  out->loss_notices = (p[27] & kRegisterFlagLossNotices) != 0;
  out->name = detail::get_bytes(p + kRegisterFixedLen, n);
  return ControlError::kOk;
}
inline ControlError decode_body(std::span<const uint8_t> b, GrantMsg* out) {
  if (b.size() < kGrantFixedLen) return ControlError::kBadBodyLength;
  const uint8_t* p = b.data();
  const size_t k = load_be16(p + 26);
  if (k == 0 || k > kMaxCoreQpns) return ControlError::kBadQpnCount;
  if (b.size() != kGrantFixedLen + 4 * k) return ControlError::kBadBodyLength;
  if ((p[24] & ~(kGrantFlagMulticast | kGrantFlagDeterministic | kGrantFlagLossNotices)) != 0 || p[25] != 0) {
    return ControlError::kBadReserved;
  }
  const uint32_t job_id = load_be32(p);
  if (job_id == 0) return ControlError::kBadJobId;
  std::vector<uint32_t> qpns(k);
  for (size_t i = 0; i < k; ++i) {
    qpns[i] = load_be32(p + kGrantFixedLen + 4 * i);
    if (qpns[i] > kMaxQpn) return ControlError::kBadQpn;
  }
  out->job_id = job_id;
  out->qkey = load_be32(p + 4);
  out->slot_count = load_be16(p + 8);
  out->payload_bytes = load_be16(p + 10);
  std::memcpy(out->mac.data(), p + 12, 6);
  out->ip = load_be32(p + 18);
  out->udp_port = load_be16(p + 22);
  out->multicast = (p[24] & kGrantFlagMulticast) != 0;
  out->deterministic = (p[24] & kGrantFlagDeterministic) != 0;
  out->loss_notices = (p[24] & kGrantFlagLossNotices) != 0;
  out->multicast_ip = load_be32(p + 28);
  out->core_qpns = std::move(qpns);
  return ControlError::kOk;
}
inline ControlError decode_body(std::span<const uint8_t> b, RefuseMsg* out) {
  if (b.size() < kRefuseFixedLen) return ControlError::kBadBodyLength;
  const uint8_t* p = b.data();
  if (p[1] != 0) return ControlError::kBadReserved;
  const size_t n = load_be16(p + 2);
  if (n > kMaxTextLen) return ControlError::kBadTextLength;
  if (b.size() != kRefuseFixedLen + n) return ControlError::kBadBodyLength;
  if (!is_valid_refuse_code(p[0])) return ControlError::kBadRefuseCode;
  out->code = static_cast<RefuseCode>(p[0]);
  out->text = detail::get_bytes(p + kRefuseFixedLen, n);
  return ControlError::kOk;
}
inline ControlError decode_body(std::span<const uint8_t> b, LeaveMsg* out) {
  if (b.size() != kLeaveLen) return ControlError::kBadBodyLength;
  out->job_id = load_be32(b.data());
  return ControlError::kOk;
}
inline ControlError decode_body(std::span<const uint8_t> b, AbortMsg* out) {
  if (b.size() < kAbortFixedLen) return ControlError::kBadBodyLength;
  const uint8_t* p = b.data();
  if (p[5] != 0) return ControlError::kBadReserved;
  const size_t n = load_be16(p + 6);
  if (n > kMaxTextLen) return ControlError::kBadTextLength;
  if (b.size() != kAbortFixedLen + n) return ControlError::kBadBodyLength;
  if (!is_valid_abort_reason(p[4])) return ControlError::kBadAbortReason;
  out->job_id = load_be32(p);
  out->reason = static_cast<AbortReason>(p[4]);
  out->text = detail::get_bytes(p + kAbortFixedLen, n);
  return ControlError::kOk;
}
inline ControlError decode_body(std::span<const uint8_t> b, StatusReplyMsg* out) {
  if (b.size() < kStatusReplyFixedLen) return ControlError::kBadBodyLength;
  const uint8_t* p = b.data();
  if ((p[2] & ~kStatusFlagTruncated) != 0 || p[3] != 0) return ControlError::kBadReserved;
  const size_t count = load_be16(p);
  std::vector<JobStatusEntry> jobs;
  size_t at = kStatusReplyFixedLen;
  for (size_t i = 0; i < count; ++i) {
    if (b.size() - at < kStatusEntryFixedLen) return ControlError::kBadBodyLength;
    const uint8_t* e = p + at;
    const size_t n = e[11];
    if (n > kMaxJobNameLen) return ControlError::kBadNameLength;
    if (b.size() - at - kStatusEntryFixedLen < n) return ControlError::kBadBodyLength;
    if (!is_valid_dtype(e[8])) return ControlError::kBadDtype;
    if (!is_valid_op(e[9])) return ControlError::kBadOp;
    JobStatusEntry j;
    j.job_id = load_be32(e);
    j.world_size = load_be16(e + 4);
    j.registered = load_be16(e + 6);
    if (e[10] > 1 || j.registered > j.world_size) return ControlError::kBadJobState;
    j.dtype = static_cast<Dtype>(e[8]);
    j.op = static_cast<ReduceOp>(e[9]);
    j.running = e[10] == 1;
    j.slots_completed = load_be64(e + 12);
    j.ms_since_progress = load_be32(e + 20);
    j.name = detail::get_bytes(e + kStatusEntryFixedLen, n);
    jobs.push_back(std::move(j));
    at += kStatusEntryFixedLen + n;
  }
  if (at != b.size()) return ControlError::kBadBodyLength;
  out->truncated = (p[2] & kStatusFlagTruncated) != 0;
  out->jobs = std::move(jobs);
  return ControlError::kOk;
}

// ---- Whole messages --------------------------------------------------------------------------

// Splits the first message off a byte stream. kOk: *hdr is valid and *body spans its body, and
// the message occupies kControlHeaderLen + hdr->body_len bytes of `buf`. kTruncatedHeader or
// kTruncatedBody: a stream reader needs more bytes (a complete-message reader rejects).
inline ControlError split_control_message(std::span<const uint8_t> buf, ControlHeader* hdr,
                                          std::span<const uint8_t>* body) {
  ControlHeader h;
  const ControlError e = decode_control_header(buf, &h);
  if (e != ControlError::kOk) return e;
  if (buf.size() - kControlHeaderLen < h.body_len) return ControlError::kTruncatedBody;
  *hdr = h;
  *body = buf.subspan(kControlHeaderLen, h.body_len);
  return ControlError::kOk;
}

// Decodes `msg`, which must hold exactly one message of type M::kType.
template <typename M>
ControlError decode(std::span<const uint8_t> msg, M* out) {
  ControlHeader h;
  std::span<const uint8_t> body;
  const ControlError e = split_control_message(msg, &h, &body);
  if (e != ControlError::kOk) return e;
  if (msg.size() != kControlHeaderLen + h.body_len) return ControlError::kTrailingBytes;
  if (h.type != M::kType) return ControlError::kUnexpectedType;
  return decode_body(body, out);
}

}  // namespace sumcast::wire
