// What every fuzzer in tests/fuzz shares: the entry point's declaration and the invariant check.
// A broken invariant prints where and why and aborts, which libFuzzer (and the replay driver)
// report as a crash with the input that caused it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// Aborts with file:line, the condition and a printf-style detail when `cond` is false.
#define SUMCAST_FUZZ_CHECK(cond, ...)                                                   \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                \
      std::fputc('\n', stderr);                                                         \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
