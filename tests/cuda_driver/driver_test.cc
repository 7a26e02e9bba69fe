// sumcast::cuda::Driver against the fake driver (fake_cuda.h): loading and its failures, memory
// kinds, copies in the pointer's context, pinned buffers, every error with its message.
#include "sumcast/cuda/driver.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fake_cuda.h"

namespace sumcast::cuda {
namespace {

class DriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_cuda_reset();
    auto d = Driver::open(SUMCAST_FAKE_CUDA);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    driver = std::move(d).value();
  }
  std::unique_ptr<Driver> driver;
};

TEST(DriverOpen, MissingLibraryIsUnavailableAndSaysWhy) {
  auto d = Driver::open("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find("/nonexistent/libcuda.so.1"), std::string::npos) << d.status().message();
}

TEST(DriverOpen, LibraryWithoutTheEntryPointsIsUnavailable) {
  auto d = Driver::open("libm.so.6");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("lacks cuInit"), std::string::npos) << d.status().message();
}

TEST(DriverOpen, FailedInitIsUnavailableWithTheError) {
  fake_cuda_reset();
  fake_cuda_set_init_result(100);  // CUDA_ERROR_NO_DEVICE
  auto d = Driver::open(SUMCAST_FAKE_CUDA);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("cuInit failed: error 100"), std::string::npos) << d.status().message();
  fake_cuda_reset();
}

TEST(DriverOpen, OpenIfLoadedFindsALoadedDriverAndIgnoresAnAbsentOne) {
  fake_cuda_reset();
  auto loaded = Driver::open_if_loaded(SUMCAST_FAKE_CUDA);  // this test links the fake: loaded
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_NE(*loaded, nullptr);
  auto absent = Driver::open_if_loaded("libsumcast-no-such-driver.so.1");
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(*absent, nullptr);
}

TEST_F(DriverTest, KindsOfMemory) {
  std::vector<int> heap(16);
  int stack = 0;
  void* device = fake_cuda_device_alloc(4096);
  void* managed = fake_cuda_managed_alloc(4096);
  auto pinned = driver->alloc_pinned(4096, device);
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  const std::pair<const void*, MemoryKind> cases[] = {
      {heap.data(), MemoryKind::kHost}, {&stack, MemoryKind::kHost},
      {device, MemoryKind::kDevice},    {static_cast<char*>(device) + 100, MemoryKind::kDevice},
      {managed, MemoryKind::kHost},     {*pinned, MemoryKind::kHost}};
  for (const auto& [p, want] : cases) {
    auto k = driver->kind(p);
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    EXPECT_EQ(*k, want) << p;
  }
  driver->free_pinned(*pinned);
  EXPECT_EQ(fake_cuda_calls("cuMemFreeHost"), 1);
}

TEST_F(DriverTest, AnUnclassifiablePointerIsAnErrorNeverHost) {
  void* device = fake_cuda_device_alloc(64);
  fake_cuda_fail("cuPointerGetAttribute", 4, 0);  // CUDA_ERROR_DEINITIALIZED
  auto k = driver->kind(device);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("cuPointerGetAttribute(MEMORY_TYPE): CUDA error 4"), std::string::npos)
      << k.status().message();
}

TEST_F(DriverTest, CopiesRunInThePointersContextAndRoundTrip) {
  constexpr size_t kBytes = 1 << 16;
  void* device = fake_cuda_device_alloc(kBytes);
  std::vector<uint8_t> in(kBytes), out(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) in[i] = static_cast<uint8_t>(i * 31 + 7);
  ASSERT_TRUE(driver->copy_to_device(device, in.data(), kBytes).ok());
  ASSERT_TRUE(driver->copy_to_host(out.data(), device, kBytes).ok());
  EXPECT_EQ(in, out);
  EXPECT_EQ(fake_cuda_calls("cuCtxPushCurrent_v2"), 2);
  EXPECT_EQ(fake_cuda_context_depth(), 0);  // every push popped
}

TEST_F(DriverTest, CopyFailuresNameTheCallAndTheError) {
  void* device = fake_cuda_device_alloc(256);
  std::vector<uint8_t> host(256);
  fake_cuda_fail("cuMemcpyDtoH_v2", 700, 0);  // CUDA_ERROR_ILLEGAL_ADDRESS
  Status st = driver->copy_to_host(host.data(), device, host.size());
  EXPECT_NE(st.message().find("cuMemcpyDtoH: CUDA error 700"), std::string::npos) << st.to_string();
  fake_cuda_fail("cuMemcpyHtoD_v2", 1, 0);
  st = driver->copy_to_device(device, host.data(), host.size());
  EXPECT_NE(st.message().find("cuMemcpyHtoD: CUDA error 1 (invalid argument)"), std::string::npos) << st.to_string();
  EXPECT_EQ(fake_cuda_context_depth(), 0);
}

TEST_F(DriverTest, PinnedAllocationFailureIsAnError) {
  void* device = fake_cuda_device_alloc(64);
  fake_cuda_fail("cuMemHostAlloc", 2, 0);  // CUDA_ERROR_OUT_OF_MEMORY
  auto p = driver->alloc_pinned(1 << 20, device);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cuMemHostAlloc: CUDA error 2"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace sumcast::cuda
