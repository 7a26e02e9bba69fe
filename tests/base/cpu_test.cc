// sumcast/cpu.h's detection against libgcc's (__builtin_cpu_supports), an implementation of its
// own, and against the kernel's flags: all three count an extension whose registers the OS does
// not save as absent, so on every machine each field must equal their answers for the same name.
#include "sumcast/cpu.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

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

// The kernel's view (/proc/cpuinfo's flags, which Linux clears for an extension whose state it
// does not save): every field, f16c included (which libgcc's check above cannot ask about).
TEST(Cpu, EveryFeatureMatchesTheKernelsFlags) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo: the features are checked against libgcc's only";
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;  // the first CPU's; the kernel shows the features common to all
  }
  ASSERT_FALSE(flags.empty()) << "/proc/cpuinfo has no flags line";
  const CpuFeatures& f = cpu_features();
  const std::pair<const char*, bool> rows[] = {
      {"avx", f.avx},           {"avx2", f.avx2},
      {"fma", f.fma},           {"f16c", f.f16c},
      {"avx512f", f.avx512f},   {"avx512dq", f.avx512dq},
      {"avx512bw", f.avx512bw}, {"avx512vl", f.avx512vl},
      {"pclmulqdq", f.pclmul},  {"vpclmulqdq", f.vpclmulqdq},
  };
  for (const auto& [name, ours] : rows) EXPECT_EQ(ours, flags.count(name) == 1) << name;
  EXPECT_EQ(&f, &cpu_features());  // detected once
}
#endif

}  // namespace
}  // namespace sumcast
