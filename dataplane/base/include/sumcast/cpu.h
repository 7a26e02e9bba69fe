// The x86 instruction-set extensions this process may use, read once from CPUID and XCR0: one
// detection for the summation kernels (kernels.h), the fused ICRC kernel and the clear of ISA-L's
// dirty upper vector halves (icrc.cc), and the carry-less multiply of the CRC combine
// (combine.cc). An extension whose registers the OS does not save (XCR0) counts as absent: the
// AVX family needs the SSE and YMM state, AVX-512 also the opmask and both ZMM states. Other
// architectures report nothing.
//
// Spelled with <cpuid.h> and an inline xgetbv so that a file built with the baseline flags can
// call it: nothing here executes an instruction the CPU may lack.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdint>

namespace sumcast {

struct CpuFeatures {
  bool avx = false;   // and the OS saves the ymm state
  bool avx2 = false;  // these three as well
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;  // these four: and the OS saves the opmask and zmm state
  bool avx512dq = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool pclmul = false;      // PCLMULQDQ on xmm (SSE state only)
  bool vpclmulqdq = false;  // on ymm/zmm: needs AVX (or AVX-512 for zmm) too, which callers check
};

namespace cpu_detail {

#if defined(__x86_64__) || defined(__i386__)
inline uint64_t read_xcr0() {
  uint32_t eax = 0;
  uint32_t edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));  // XCR0; no -mxsave needed
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

inline CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 1) return f;
  __cpuid(1, eax, ebx, ecx, edx);
  f.pclmul = (ecx & (1u << 1)) != 0;
  const bool fma = (ecx & (1u << 12)) != 0;
  const bool osxsave = (ecx & (1u << 27)) != 0;
  const bool avx = (ecx & (1u << 28)) != 0;
  const bool f16c = (ecx & (1u << 29)) != 0;
  if (!osxsave || !avx) return f;  // xgetbv is only there with OSXSAVE
  const uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return f;  // SSE (bit 1) and AVX (bit 2) state
  f.avx = true;
  f.fma = fma;
  f.f16c = f16c;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = (ebx & (1u << 5)) != 0;
  f.vpclmulqdq = (ecx & (1u << 10)) != 0;
  if ((xcr0 & 0xE6) != 0xE6) return f;  // + opmask (5), ZMM_Hi256 (6), Hi16_ZMM (7)
  f.avx512f = (ebx & (1u << 16)) != 0;
  f.avx512dq = (ebx & (1u << 17)) != 0;
  f.avx512bw = (ebx & (1u << 30)) != 0;
  f.avx512vl = (ebx & (1u << 31)) != 0;
  return f;
}
#else
inline CpuFeatures detect() { return {}; }
#endif

}  // namespace cpu_detail

// Detected on the first call (thread-safe), the same object for every caller in the process.
inline const CpuFeatures& cpu_features() {
  static const CpuFeatures features = cpu_detail::detect();
  return features;
}

}  // namespace sumcast
