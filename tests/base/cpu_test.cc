// sumcast/cpu.h's detection against libgcc's (__builtin_cpu_supports), an implementation of its
// own: both count an extension whose registers the OS does not save as absent, so on every machine
// each field must equal libgcc's answer for the same name.
#include "sumcast/cpu.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace sumcast {
namespace {

#if defined(__x86_64__) || defined(__i386__)
TEST(Cpu, EveryFeatureMatchesLibgcc) {
  __builtin_cpu_init();
  const CpuFeatures& f = cpu_features();
  struct Row {
    const char* name;
    bool ours;
    bool libgcc;
  };
  const Row rows[] = {
      {"avx", f.avx, __builtin_cpu_supports("avx") != 0},
      {"avx2", f.avx2, __builtin_cpu_supports("avx2") != 0},
      {"fma", f.fma, __builtin_cpu_supports("fma") != 0},
      {"avx512f", f.avx512f, __builtin_cpu_supports("avx512f") != 0},
      {"avx512dq", f.avx512dq, __builtin_cpu_supports("avx512dq") != 0},
      {"avx512bw", f.avx512bw, __builtin_cpu_supports("avx512bw") != 0},
      {"avx512vl", f.avx512vl, __builtin_cpu_supports("avx512vl") != 0},
      {"pclmul", f.pclmul, __builtin_cpu_supports("pclmul") != 0},
      {"vpclmulqdq", f.vpclmulqdq, __builtin_cpu_supports("vpclmulqdq") != 0},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(r.ours, r.libgcc) << r.name;
    std::printf("%s: %s\n", r.name, r.ours ? "yes" : "no");  // what this machine checked
  }
  // clang 14's __builtin_cpu_supports knows no "f16c"; every CPU with AVX2 has it (Ivy Bridge on).
  EXPECT_TRUE(!f.avx2 || f.f16c);
}

TEST(Cpu, TheAvxFamilyNeedsAvx) {
  const CpuFeatures& f = cpu_features();
  if (!f.avx) {
    EXPECT_FALSE(f.avx2 || f.fma || f.f16c || f.vpclmulqdq || f.avx512f || f.avx512dq || f.avx512bw || f.avx512vl);
  }
  EXPECT_EQ(&f, &cpu_features());  // detected once
}
#endif

}  // namespace
}  // namespace sumcast
