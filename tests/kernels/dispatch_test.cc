// CPU detection, the per-ISA tables and the SUMCAST_ISA override (kernels_dispatch.cc).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels_internal.h"
#include "sumcast/kernels/kernels.h"

namespace sumcast::kernels {
namespace {

using internal::choose_isa;
using internal::parse_isa;

TEST(IsaName, NamesEveryIsa) {
  EXPECT_STREQ(isa_name(Isa::kScalar), "scalar");
  EXPECT_STREQ(isa_name(Isa::kAvx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::kAvx512), "avx512");
}

TEST(ParseIsa, AcceptsExactlyTheThreeNames) {
  EXPECT_EQ(parse_isa("scalar"), Isa::kScalar);
  EXPECT_EQ(parse_isa("avx2"), Isa::kAvx2);
  EXPECT_EQ(parse_isa("avx512"), Isa::kAvx512);
  for (const char* bad : {"", "AVX2", "avx", "avx512f", "scalar ", " scalar", "sse", "native"}) {
    EXPECT_FALSE(parse_isa(bad).has_value()) << '"' << bad << '"';
  }
}

TEST(ChooseIsa, UnsetOrEmptyTakesTheBest) {
  bool unknown = true;
  EXPECT_EQ(choose_isa(nullptr, Isa::kAvx512, &unknown), Isa::kAvx512);
  EXPECT_FALSE(unknown);
  EXPECT_EQ(choose_isa("", Isa::kAvx2, &unknown), Isa::kAvx2);
  EXPECT_FALSE(unknown);
}

TEST(ChooseIsa, RequestCapsTheChoice) {
  EXPECT_EQ(choose_isa("scalar", Isa::kAvx512), Isa::kScalar);
  EXPECT_EQ(choose_isa("avx2", Isa::kAvx512), Isa::kAvx2);
  EXPECT_EQ(choose_isa("avx512", Isa::kAvx512), Isa::kAvx512);
  EXPECT_EQ(choose_isa("scalar", Isa::kAvx2), Isa::kScalar);
}

TEST(ChooseIsa, RequestAboveTheCpuFallsBackToTheBest) {
  EXPECT_EQ(choose_isa("avx512", Isa::kAvx2), Isa::kAvx2);
  EXPECT_EQ(choose_isa("avx512", Isa::kScalar), Isa::kScalar);
  EXPECT_EQ(choose_isa("avx2", Isa::kScalar), Isa::kScalar);
}

TEST(ChooseIsa, UnknownValueIsFlaggedAndIgnored) {
  bool unknown = false;
  EXPECT_EQ(choose_isa("avx1024", Isa::kAvx2, &unknown), Isa::kAvx2);
  EXPECT_TRUE(unknown);
}

TEST(CpuSupports, ScalarAlwaysAndIsasNested) {
  EXPECT_TRUE(cpu_supports(Isa::kScalar));
  if (cpu_supports(Isa::kAvx512)) {
    EXPECT_TRUE(cpu_supports(Isa::kAvx2));
  }
}

// Cross-check the CPUID/XGETBV code against the compiler runtime's own detection (which also
// checks that the OS saves the wider registers).
TEST(CpuSupports, AgreesWithCompilerRuntime) {
  __builtin_cpu_init();
#if defined(__clang__)
  // clang 14's __builtin_cpu_supports knows no "f16c"; every AVX2 CPU has F16C (Ivy Bridge on).
  const bool f16c = true;
#else
  const bool f16c = __builtin_cpu_supports("f16c");
#endif
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  EXPECT_EQ(cpu_supports(Isa::kAvx2), avx2);
  EXPECT_EQ(cpu_supports(Isa::kAvx512), avx512);
}

TEST(KernelsFor, NullExactlyWhenUnsupported) {
  for (int i = 0; i < kIsaCount; ++i) {
    const auto isa = static_cast<Isa>(i);
    const KernelTable* t = kernels_for(isa);
    EXPECT_EQ(t != nullptr, cpu_supports(isa)) << isa_name(isa);
    if (t != nullptr) {
      EXPECT_EQ(t->isa, isa);
    }
  }
}

TEST(BestSupportedIsa, IsTheHighestSupported) {
  const Isa best = internal::best_supported_isa();
  EXPECT_TRUE(cpu_supports(best));
  for (int i = static_cast<int>(best) + 1; i < kIsaCount; ++i) EXPECT_FALSE(cpu_supports(static_cast<Isa>(i)));
}

// active_kernels() reads SUMCAST_ISA once, at its first call: each case runs in a fresh process
// (the "threadsafe" death-test style re-executes this binary) that sets the variable first.
void expect_active_with_env(const char* value, Isa want) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (value == nullptr)
          unsetenv("SUMCAST_ISA");
        else
          setenv("SUMCAST_ISA", value, 1);
        std::exit(active_kernels().isa == want ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "")
      << "SUMCAST_ISA=" << (value == nullptr ? "(unset)" : value) << " should give " << isa_name(want);
}

TEST(ActiveKernels, EnvScalarCapsTheChoice) { expect_active_with_env("scalar", Isa::kScalar); }

TEST(ActiveKernels, EnvAvx2CapsTheChoice) {
  expect_active_with_env("avx2", cpu_supports(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar);
}

TEST(ActiveKernels, UnsetTakesTheBest) { expect_active_with_env(nullptr, internal::best_supported_isa()); }

TEST(ActiveKernels, UnknownValueTakesTheBest) { expect_active_with_env("bogus", internal::best_supported_isa()); }

TEST(ActiveKernels, IsChosenOnce) { EXPECT_EQ(&active_kernels(), &active_kernels()); }

}  // namespace
}  // namespace sumcast::kernels
