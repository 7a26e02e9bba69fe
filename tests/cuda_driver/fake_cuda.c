/* See fake_cuda.h. Thread-safe: one lock around the bookkeeping; the current context is per thread. */
#include "fake_cuda.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))
#define REGION_BYTES ((size_t)64 << 20)
#define MAX_ALLOCS 64

enum { OK = 0, INVALID_VALUE = 1, INVALID_CONTEXT = 201 };
enum { ATTR_CONTEXT = 1, ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8 };
enum { TYPE_HOST = 1, TYPE_DEVICE = 2 };

static uint8_t* region; /* PROT_NONE: the device address range */
static uint8_t* shadow; /* its contents */
static size_t region_used;
static struct {
  void* p;
  size_t size;
  int managed; /* 1 managed, 0 pinned host */
} allocs[MAX_ALLOCS];
static int init_result;
static _Thread_local int context_depth;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void* const kContext = (void*)0x5ca1ab1e;

static const char* names[] = {"cuInit",          "cuPointerGetAttribute", "cuMemcpyDtoH_v2",     "cuMemcpyHtoD_v2",
                              "cuMemHostAlloc",  "cuMemFreeHost",         "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2",
                              "cuGetErrorString"};
#define NFUNCS (sizeof names / sizeof names[0])
static int calls[NFUNCS];
static struct { int armed, result, skip; } failures[NFUNCS];

static int index_of(const char* fn) {
  for (size_t i = 0; i < NFUNCS; ++i)
    if (strcmp(names[i], fn) == 0) return (int)i;
  abort();
}

/* Counts the call; returns a scripted failure when one is due, else OK. */
static int enter(const char* fn) {
  int i = index_of(fn);
  int r = OK;
  pthread_mutex_lock(&lock);
  ++calls[i];
  if (failures[i].armed) {
    if (failures[i].skip > 0) {
      --failures[i].skip;
    } else {
      failures[i].armed = 0;
      r = failures[i].result;
    }
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static void ensure_region(void) {
  if (region != NULL) return;
  /* FAKE_CUDA_ACCESSIBLE=1: the device range is ordinary memory (for runs where a plain MPI
   * library, which knows nothing of this fake, must be able to reduce the buffers itself). */
  const char* acc = getenv("FAKE_CUDA_ACCESSIBLE");
  int accessible = acc != NULL && strcmp(acc, "1") == 0;
  region = mmap(NULL, REGION_BYTES, accessible ? PROT_READ | PROT_WRITE : PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (region == MAP_FAILED) abort();
  shadow = accessible ? region : calloc(1, REGION_BYTES);
  if (shadow == NULL) abort();
}

static int in_device(const void* p, size_t n) {
  const uint8_t* q = p;
  return region != NULL && q >= region && q + n <= region + region_used;
}

static int find_alloc(const void* p) {
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    const uint8_t* b = allocs[i].p;
    if (b != NULL && (const uint8_t*)p >= b && (const uint8_t*)p < b + allocs[i].size) return i;
  }
  return -1;
}

static void* record(size_t bytes, int managed) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    if (allocs[i].p == NULL) {
      allocs[i].p = malloc(bytes);
      allocs[i].size = bytes;
      allocs[i].managed = managed;
      pthread_mutex_unlock(&lock);
      return allocs[i].p;
    }
  }
  abort();
}

EXPORT void fake_cuda_reset(void) {
  ensure_region();
  memset(shadow, 0, region_used);
  region_used = 0;
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    free(allocs[i].p);
    allocs[i].p = NULL;
  }
  memset(calls, 0, sizeof calls);
  memset(failures, 0, sizeof failures);
  init_result = 0;
  context_depth = 0;
}

EXPORT void* fake_cuda_device_alloc(size_t bytes) {
  ensure_region();
  size_t aligned = (bytes + 255) & ~(size_t)255;
  pthread_mutex_lock(&lock);
  if (region_used + aligned > REGION_BYTES) abort();
  void* p = region + region_used;
  region_used += aligned;
  pthread_mutex_unlock(&lock);
  return p;
}

EXPORT void* fake_cuda_managed_alloc(size_t bytes) { return record(bytes, 1); }

EXPORT void fake_cuda_device_write(void* device, const void* src, size_t bytes) {
  if (!in_device(device, bytes)) abort();
  memcpy(shadow + ((uint8_t*)device - region), src, bytes);
}

EXPORT void fake_cuda_device_read(void* dst, const void* device, size_t bytes) {
  if (!in_device(device, bytes)) abort();
  memcpy(dst, shadow + ((const uint8_t*)device - region), bytes);
}

EXPORT void fake_cuda_fail(const char* function, int result, int skip) {
  int i = index_of(function);
  failures[i].armed = 1;
  failures[i].result = result;
  failures[i].skip = skip;
}

EXPORT void fake_cuda_set_init_result(int result) { init_result = result; }
EXPORT int fake_cuda_calls(const char* function) { return calls[index_of(function)]; }
EXPORT int fake_cuda_context_depth(void) { return context_depth; }

/* The driver API. */
EXPORT int cuInit(unsigned flags) {
  (void)flags;
  int r = enter("cuInit");
  ensure_region();
  return r != OK ? r : init_result;
}

EXPORT int cuPointerGetAttribute(void* data, int attribute, unsigned long long ptr) {
  int r = enter("cuPointerGetAttribute");
  if (r != OK) return r;
  const void* p = (const void*)(uintptr_t)ptr;
  pthread_mutex_lock(&lock);
  int a = find_alloc(p);
  int managed_flag = a >= 0 && allocs[a].managed;
  pthread_mutex_unlock(&lock);
  int device = in_device(p, 1);
  if (!device && a < 0) return INVALID_VALUE; /* memory the driver does not know */
  int managed = managed_flag;
  switch (attribute) {
    case ATTR_MEMORY_TYPE:
      *(unsigned*)data = device || managed ? TYPE_DEVICE : TYPE_HOST;
      return OK;
    case ATTR_IS_MANAGED:
      *(int*)data = managed;
      return OK;
    case ATTR_CONTEXT:
      *(void**)data = kContext;
      return OK;
    default:
      return INVALID_VALUE;
  }
}

EXPORT int cuMemcpyDtoH_v2(void* dst, unsigned long long src, size_t bytes) {
  int r = enter("cuMemcpyDtoH_v2");
  if (r != OK) return r;
  if (context_depth <= 0) return INVALID_CONTEXT;
  const void* s = (const void*)(uintptr_t)src;
  if (!in_device(s, bytes)) return INVALID_VALUE;
  fake_cuda_device_read(dst, s, bytes);
  return OK;
}

EXPORT int cuMemcpyHtoD_v2(unsigned long long dst, const void* src, size_t bytes) {
  int r = enter("cuMemcpyHtoD_v2");
  if (r != OK) return r;
  if (context_depth <= 0) return INVALID_CONTEXT;
  void* d = (void*)(uintptr_t)dst;
  if (!in_device(d, bytes)) return INVALID_VALUE;
  fake_cuda_device_write(d, src, bytes);
  return OK;
}

EXPORT int cuMemHostAlloc(void** p, size_t bytes, unsigned flags) {
  (void)flags;
  int r = enter("cuMemHostAlloc");
  if (r != OK) return r;
  if (context_depth <= 0) return INVALID_CONTEXT;
  *p = record(bytes, 0);
  return OK;
}

EXPORT int cuMemFreeHost(void* p) {
  int r = enter("cuMemFreeHost");
  if (r != OK) return r;
  pthread_mutex_lock(&lock);
  int a = find_alloc(p);
  if (a < 0 || allocs[a].managed) {
    pthread_mutex_unlock(&lock);
    return INVALID_VALUE;
  }
  free(allocs[a].p);
  allocs[a].p = NULL;
  pthread_mutex_unlock(&lock);
  return OK;
}

EXPORT int cuCtxPushCurrent_v2(void* ctx) {
  int r = enter("cuCtxPushCurrent_v2");
  if (r != OK) return r;
  if (ctx != kContext) return INVALID_CONTEXT;
  ++context_depth;
  return OK;
}

EXPORT int cuCtxPopCurrent_v2(void** ctx) {
  int r = enter("cuCtxPopCurrent_v2");
  if (r != OK) return r;
  if (context_depth <= 0) return INVALID_CONTEXT;
  --context_depth;
  if (ctx != NULL) *ctx = kContext;
  return OK;
}

EXPORT int cuGetErrorString(int error, const char** text) {
  enter("cuGetErrorString");
  static char buf[64];
  const char* s = error == INVALID_VALUE     ? "invalid argument"
                  : error == INVALID_CONTEXT ? "invalid device context"
                                             : NULL;
  if (s == NULL) {
    strcpy(buf, "fake CUDA error");
    s = buf;
  }
  *text = s;
  return OK;
}
