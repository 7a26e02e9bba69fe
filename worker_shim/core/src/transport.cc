#include "sumcast/shim/transport.h"

namespace sumcast::shim {

const char* drop_reason_name(DropReason r) {
  static constexpr const char* kNames[] = {
#define SUMCAST_X(name, str) str,
      SUMCAST_SHIM_DROP_REASONS(SUMCAST_X)
#undef SUMCAST_X
  };
  const auto i = static_cast<size_t>(r);
  return i < kDropReasonCount ? kNames[i] : "?";
}

}  // namespace sumcast::shim
