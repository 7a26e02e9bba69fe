// CPU feature detection and the once-only choice of the active table (kernels.h). Compiled with
// the project's baseline flags only: nothing here may execute an AVX instruction.
#include <cpuid.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels_internal.h"

namespace sumcast::kernels {

static_assert(std::endian::native == std::endian::little, "payload elements are little-endian");

namespace {

struct CpuFeatures {
  bool avx2 = false;    // AVX2 + FMA + F16C, ymm state enabled by the OS
  bool avx512 = false;  // the above + AVX-512 F/BW/VL/DQ, opmask and zmm state enabled by the OS
};

uint64_t read_xcr0() {
  uint32_t eax = 0;
  uint32_t edx = 0;
  // xgetbv with ecx = 0 (XCR0); spelled as asm so that this file needs no -mxsave.
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect_cpu() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid(1, eax, ebx, ecx, edx);
  const bool fma = (ecx & (1u << 12)) != 0;
  const bool osxsave = (ecx & (1u << 27)) != 0;
  const bool avx = (ecx & (1u << 28)) != 0;
  const bool f16c = (ecx & (1u << 29)) != 0;
  if (!osxsave || !avx) return f;  // xgetbv is only there with OSXSAVE
  const uint64_t xcr0 = read_xcr0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;    // SSE (bit 1) and AVX (bit 2) state
  const bool os_zmm = (xcr0 & 0xE6) == 0xE6;  // + opmask (5), ZMM_Hi256 (6), Hi16_ZMM (7)
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx2 = (ebx & (1u << 5)) != 0;
  const bool avx512f = (ebx & (1u << 16)) != 0;
  const bool avx512dq = (ebx & (1u << 17)) != 0;
  const bool avx512bw = (ebx & (1u << 30)) != 0;
  const bool avx512vl = (ebx & (1u << 31)) != 0;
  f.avx2 = os_ymm && avx2 && fma && f16c;
  f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl;
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect_cpu();
  return features;
}

const KernelTable* table_for(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return &internal::kScalarTable;
    case Isa::kAvx2:
      return &internal::kAvx2Table;
    case Isa::kAvx512:
      return &internal::kAvx512Table;
  }
  return nullptr;
}

const KernelTable& choose_active() {
  const char* env = std::getenv("SUMCAST_ISA");
  bool unknown = false;
  const Isa isa = internal::choose_isa(env, internal::best_supported_isa(), &unknown);
  if (unknown) {
    std::fprintf(stderr, "sumcast: SUMCAST_ISA=\"%s\" is not scalar|avx2|avx512; using %s kernels\n", env,
                 isa_name(isa));
  }
  return *table_for(isa);
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return cpu_features().avx2;
    case Isa::kAvx512:
      return cpu_features().avx512;
  }
  return false;
}

const KernelTable* kernels_for(Isa isa) { return cpu_supports(isa) ? table_for(isa) : nullptr; }

const KernelTable& active_kernels() {
  static const KernelTable& table = choose_active();
  return table;
}

namespace internal {

std::optional<Isa> parse_isa(std::string_view name) {
  for (int i = 0; i < kIsaCount; ++i) {
    const auto isa = static_cast<Isa>(i);
    if (name == isa_name(isa)) return isa;
  }
  return std::nullopt;
}

Isa choose_isa(const char* env_value, Isa best, bool* unknown) {
  if (unknown != nullptr) *unknown = false;
  if (env_value == nullptr || *env_value == '\0') return best;
  const std::optional<Isa> requested = parse_isa(env_value);
  if (!requested) {
    if (unknown != nullptr) *unknown = true;
    return best;
  }
  return *requested < best ? *requested : best;
}

Isa best_supported_isa() {
  for (int i = kIsaCount - 1; i > 0; --i) {
    if (cpu_supports(static_cast<Isa>(i))) return static_cast<Isa>(i);
  }
  return Isa::kScalar;
}

}  // namespace internal
}  // namespace sumcast::kernels
