// Which tables this CPU can run (from sumcast/cpu.h's detection) and the once-only choice of the
// active table (kernels.h). Compiled with the project's baseline flags only: nothing here may
// execute an AVX instruction.
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels_internal.h"
#include "sumcast/cpu.h"

namespace sumcast::kernels {

static_assert(std::endian::native == std::endian::little, "payload elements are little-endian");

namespace {

// The AVX2 table's flags (kernels_avx2.cc): -mavx2 -mfma -mf16c; the AVX-512 one adds F/BW/VL/DQ.
bool avx2_kernels_run() {
  const CpuFeatures& f = cpu_features();
  return f.avx && f.avx2 && f.fma && f.f16c;
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
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return avx2_kernels_run();
    case Isa::kAvx512:
      return avx2_kernels_run() && f.avx512f && f.avx512dq && f.avx512bw && f.avx512vl;
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
