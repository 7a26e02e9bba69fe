// Constant-time comparison of the shared token (docs/protocol.md §8.4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sumcast::control {

// True when `given` equals `expected`. The time taken depends only on expected.size() (every
// byte of the secret is always visited) and on whether the lengths differ, never on where the
// first differing byte is.
inline bool token_equal(std::string_view given, std::string_view expected) {
  uint32_t diff = given.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i) {
    const uint8_t g = i < given.size() ? static_cast<uint8_t>(given[i]) : uint8_t{0};
    diff |= static_cast<uint32_t>(g ^ static_cast<uint8_t>(expected[i]));
    // Keeps the compiler from turning the loop into an early-exit comparison.
    __asm__ __volatile__("" : "+r"(diff));
  }
  return diff == 0;
}

}  // namespace sumcast::control
