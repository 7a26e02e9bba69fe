// Status and Result<T>: how every cold path in Sumcast reports failure.
//
// A Status is OK (no allocation, one null pointer) or carries a code and a message that names
// what it is about (file and line, port, queue, errno), and optionally a detail: a number that
// refines the code for callers that must tell causes apart (they test the detail, never the
// message's text). Result<T> holds a T or a non-OK Status.
// The dataplane's hot path never returns either: it counts drops per reason instead.
//
// Thread safety: values; copy freely between threads.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sumcast {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // caller passed something malformed
  kNotFound = 2,         // a named thing (file, job, device) does not exist
  kIoError = 3,          // a system call failed; the message carries errno's text
  kRefused = 4,          // the peer said no (authentication, limits)
  kTimeout = 5,          // no progress within a bounded time
  kAborted = 6,          // the job was failed by the appliance or a peer
  kUnavailable = 7,      // a resource (hugepages, device, memory) is not there
  kInternal = 8,         // a bug: an invariant did not hold
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, uint32_t detail = 0)
      : rep_(code == StatusCode::kOk ? nullptr : std::make_shared<const Rep>(Rep{code, std::move(message), detail})) {}

  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status refused(std::string m) { return {StatusCode::kRefused, std::move(m)}; }
  static Status timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
  // `detail`: why, where the code says (an appliance's abort carries its wire::AbortReason).
  static Status aborted(std::string m, uint32_t detail = 0) { return {StatusCode::kAborted, std::move(m), detail}; }
  static Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  // An I/O error whose message ends with strerror(err).
  static Status from_errno(std::string_view what, int err = errno) {
    return io_error(std::string(what) + ": " + std::strerror(err));
  }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const {
    static const std::string kEmpty;
    return rep_ ? rep_->message : kEmpty;
  }
  // What refines code() (0: nothing). Its meaning is the code's: for kAborted from an appliance's
  // ABORT, the wire::AbortReason.
  uint32_t detail() const { return rep_ ? rep_->detail : 0; }
  // The same status (code, detail) with `context` put before its message; OK stays OK.
  Status with_context(std::string_view context) const {
    return ok() ? Status() : Status(code(), std::string(context) + message(), detail());
  }
  // "<CodeName>: <message>", or "OK".
  std::string to_string() const {
    return ok() ? std::string("OK") : std::string(status_code_name(code())) + ": " + message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
    uint32_t detail;
  };
  std::shared_ptr<const Rep> rep_;
};

inline const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kRefused:
      return "Refused";
    case StatusCode::kTimeout:
      return "Timeout";
    case StatusCode::kAborted:
      return "Aborted";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

// A T or a non-OK Status. Precondition of value(): ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace sumcast

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define SUMCAST_RETURN_IF_ERROR(expr) \
  do {                                \
    ::sumcast::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)
