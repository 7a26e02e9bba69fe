// Fuzzer of the control-message codec (sumcast/wire/control.h): the header decoder, the stream
// splitter and every body decoder, on arbitrary bytes.
//
// Invariants checked on every input (any violation aborts):
//   - No decoder reads outside its span (AddressSanitizer on libFuzzer's exactly-sized input).
//   - Stream: split_control_message splits messages off the input one after another, as the
//     server and the client do; each split body lies inside the input right after its 12-byte
//     header and is at most kMaxControlBodyLen bytes; kTruncatedHeader/kTruncatedBody only when
//     the rest really is shorter than a header / than header + body_len.
//   - Canonical encoding: a message that decodes re-encodes to exactly the bytes it came from
//     (every byte of every layout is either a field or a reserved byte checked to be 0), and
//     encoded_size() is its length; with one byte less of room, encode() answers kNoSpace and
//     writes nothing.
//   - decode<M> of the whole input succeeds for at most one M (the header's type), and then equals
//     what the stream split decoded; decode_body<M> of the whole input as a body, when it
//     succeeds, re-encodes to the input too.
//   - Every error returned is a named ControlError.
#include <cstring>
#include <span>
#include <vector>

#include "fuzz_check.h"
#include "sumcast/wire/control.h"

namespace sumcast::wire {
namespace {

void check_error(ControlError e) {
  SUMCAST_FUZZ_CHECK(static_cast<int>(e) < kControlErrorCount, "unnamed error %d", static_cast<int>(e));
}

// `m` was decoded from `original` (header + body): encoding it gives the same bytes.
template <typename M>
void check_reencodes(const M& m, std::span<const uint8_t> original) {
  SUMCAST_FUZZ_CHECK(encoded_size(m) == original.size(), "%s: encoded_size %zu, decoded from %zu bytes",
                     control_type_name(M::kType), encoded_size(m), original.size());
  std::vector<uint8_t> out(original.size() + 16, 0xA5);
  size_t written = 0;
  const ControlError e = encode(m, std::span<uint8_t>(out), &written);
  SUMCAST_FUZZ_CHECK(e == ControlError::kOk, "%s: re-encoding: %s", control_type_name(M::kType), control_error_name(e));
  SUMCAST_FUZZ_CHECK(written == original.size() && std::memcmp(out.data(), original.data(), written) == 0,
                     "%s: re-encoding differs from the input", control_type_name(M::kType));
  for (size_t i = written; i < out.size(); ++i) SUMCAST_FUZZ_CHECK(out[i] == 0xA5, "encode wrote past its message");

  // One byte short: kNoSpace, nothing written, *written untouched.
  std::vector<uint8_t> small(original.size() - 1, 0x5A);
  size_t untouched = 12345;
  const ControlError s = encode(m, std::span<uint8_t>(small), &untouched);
  SUMCAST_FUZZ_CHECK(s == ControlError::kNoSpace, "%s: encode into %zu bytes: %s", control_type_name(M::kType),
                     small.size(), control_error_name(s));
  SUMCAST_FUZZ_CHECK(untouched == 12345, "encode set *written on failure");
  for (uint8_t b : small) SUMCAST_FUZZ_CHECK(b == 0x5A, "encode wrote into a buffer it refused");

  std::vector<uint8_t> appended = {1, 2, 3};
  SUMCAST_FUZZ_CHECK(encode_append(m, &appended) == ControlError::kOk, "encode_append failed");
  SUMCAST_FUZZ_CHECK(
      appended.size() == 3 + original.size() && std::memcmp(appended.data() + 3, original.data(), original.size()) == 0,
      "encode_append differs");
}

// Decodes `body` as M; on success checks the round trip and that decode<M> of the whole message
// agrees. Returns the decoder's answer.
template <typename M>
ControlError check_body(std::span<const uint8_t> message, std::span<const uint8_t> body) {
  M m;
  const ControlError e = decode_body(body, &m);
  check_error(e);
  if (e != ControlError::kOk) return e;
  check_reencodes(m, message);
  M whole;
  const ControlError w = decode(message, &whole);
  SUMCAST_FUZZ_CHECK(w == ControlError::kOk && whole == m, "%s: decode() disagrees with decode_body(): %s",
                     control_type_name(M::kType), control_error_name(w));
  return e;
}

ControlError dispatch(ControlType type, std::span<const uint8_t> message, std::span<const uint8_t> body) {
  switch (type) {
    case ControlType::kHello:
      return check_body<HelloMsg>(message, body);
    case ControlType::kAuthOk:
      return check_body<AuthOkMsg>(message, body);
    case ControlType::kAuthFail:
      return check_body<AuthFailMsg>(message, body);
    case ControlType::kRegister:
      return check_body<RegisterMsg>(message, body);
    case ControlType::kGrant:
      return check_body<GrantMsg>(message, body);
    case ControlType::kRefuse:
      return check_body<RefuseMsg>(message, body);
    case ControlType::kLeave:
      return check_body<LeaveMsg>(message, body);
    case ControlType::kAbort:
      return check_body<AbortMsg>(message, body);
    case ControlType::kStatusRequest:
      return check_body<StatusRequestMsg>(message, body);
    case ControlType::kStatusReply:
      return check_body<StatusReplyMsg>(message, body);
  }
  SUMCAST_FUZZ_CHECK(false, "split returned type %u", static_cast<unsigned>(type));
  return ControlError::kBadType;
}

// The input as a byte stream of messages, as a connection reads it.
void check_stream(std::span<const uint8_t> in) {
  size_t at = 0;
  for (int messages = 0; messages < 64; ++messages) {
    const std::span<const uint8_t> rest = in.subspan(at);
    ControlHeader h;
    std::span<const uint8_t> body;
    const ControlError e = split_control_message(rest, &h, &body);
    check_error(e);
    if (e == ControlError::kTruncatedHeader) {
      SUMCAST_FUZZ_CHECK(rest.size() < kControlHeaderLen, "kTruncatedHeader with %zu bytes", rest.size());
      return;
    }
    if (e == ControlError::kTruncatedBody) {
      ControlHeader only;
      SUMCAST_FUZZ_CHECK(
          decode_control_header(rest, &only) == ControlError::kOk && rest.size() < kControlHeaderLen + only.body_len,
          "kTruncatedBody with %zu bytes", rest.size());
      return;
    }
    if (e != ControlError::kOk) return;  // a malformed header closes the connection
    SUMCAST_FUZZ_CHECK(is_valid_control_type(static_cast<uint8_t>(h.type)), "type %u", static_cast<unsigned>(h.type));
    SUMCAST_FUZZ_CHECK(h.body_len <= kMaxControlBodyLen, "body_len %u", h.body_len);
    SUMCAST_FUZZ_CHECK(body.data() == rest.data() + kControlHeaderLen && body.size() == h.body_len,
                       "body span not right after the header");
    const std::span<const uint8_t> message = rest.first(kControlHeaderLen + h.body_len);
    if (dispatch(h.type, message, body) != ControlError::kOk) return;  // malformed: the reader closes
    at += message.size();
  }
}

// decode<M> of the whole input: at most the header's type may succeed.
template <typename M>
int decode_whole(std::span<const uint8_t> in) {
  M m;
  const ControlError e = decode(in, &m);
  check_error(e);
  if (e != ControlError::kOk) return 0;
  check_reencodes(m, in);
  return 1;
}

// The whole input as a body of every type.
template <typename M>
void decode_as_body(std::span<const uint8_t> in) {
  M m;
  const ControlError e = decode_body(in, &m);
  check_error(e);
  if (e != ControlError::kOk || in.size() > kMaxControlBodyLen) return;
  std::vector<uint8_t> message(kControlHeaderLen + in.size());
  write_control_header(message.data(), M::kType, static_cast<uint32_t>(in.size()));
  if (!in.empty()) std::memcpy(message.data() + kControlHeaderLen, in.data(), in.size());
  check_reencodes(m, message);
}

}  // namespace
}  // namespace sumcast::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sumcast::wire;
  const std::span<const uint8_t> in(data, size);
  check_stream(in);
  const int decoded = decode_whole<HelloMsg>(in) + decode_whole<AuthOkMsg>(in) + decode_whole<AuthFailMsg>(in) +
                      decode_whole<RegisterMsg>(in) + decode_whole<GrantMsg>(in) + decode_whole<RefuseMsg>(in) +
                      decode_whole<LeaveMsg>(in) + decode_whole<AbortMsg>(in) + decode_whole<StatusRequestMsg>(in) +
                      decode_whole<StatusReplyMsg>(in);
  SUMCAST_FUZZ_CHECK(decoded <= 1, "%d message types decoded the same bytes", decoded);
  decode_as_body<HelloMsg>(in);
  decode_as_body<RegisterMsg>(in);
  decode_as_body<GrantMsg>(in);
  decode_as_body<RefuseMsg>(in);
  decode_as_body<LeaveMsg>(in);
  decode_as_body<AbortMsg>(in);
  decode_as_body<StatusReplyMsg>(in);
  return 0;
}
