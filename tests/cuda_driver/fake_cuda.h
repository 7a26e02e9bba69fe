/* A scripted stand-in for the CUDA driver library (libcuda.so.1) for tests on hosts without a
 * GPU. It exports the driver entry points sumcast::cuda::Driver uses, with the driver's
 * signatures, plus the control functions below.
 *
 * "Device memory" is an address range mapped with no access at all: any CPU read or write of a
 * device pointer faults, so a test that passes never touched one as host memory. Its contents
 * live in a separate shadow buffer that only the fake's copies (and the control functions) use.
 * Copies also check that a context was made current (cuCtxPushCurrent_v2), as the driver needs.
 * With FAKE_CUDA_ACCESSIBLE=1 in the environment the device range is ordinary memory instead (so
 * that a plain MPI library can reduce such buffers in a comparison run). */
#ifndef SUMCAST_TESTS_FAKE_CUDA_H_
#define SUMCAST_TESTS_FAKE_CUDA_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void fake_cuda_reset(void);                  /* frees everything, clears failures and counters */
void* fake_cuda_device_alloc(size_t bytes);  /* device memory (no CPU access) */
void* fake_cuda_managed_alloc(size_t bytes); /* managed memory (CPU-accessible) */
void fake_cuda_device_write(void* device, const void* src, size_t bytes);
void fake_cuda_device_read(void* dst, const void* device, size_t bytes);
/* The call `function` (e.g. "cuMemcpyDtoH_v2") returns `result` once, after `skip` more calls succeed. */
void fake_cuda_fail(const char* function, int result, int skip);
void fake_cuda_set_init_result(int result); /* what cuInit returns (default 0) */
int fake_cuda_calls(const char* function);  /* calls made since the last reset */
int fake_cuda_context_depth(void);          /* pushes minus pops: 0 after every balanced use */

#ifdef __cplusplus
}
#endif

#endif
