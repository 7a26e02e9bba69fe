// DeviceStaging (the interposer's path for CUDA device buffers) against the fake CUDA driver
// (tests/cuda_driver/fake_cuda.h), whose device memory faults on any CPU access: every buffer
// combination, in place and not, copy and allocation failures, the pageable fallback, and a
// staged all-reduce of 3 ranks through the worker library and the embedded service.
#include "sumcast/mpi/device_staging.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "fake_cuda.h"
#include "shim_test_util.h"

namespace sumcast::mpi {
namespace {

using shim::testing::base_config;
using shim::testing::first_mismatch;
using shim::testing::make_expected;
using shim::testing::make_input;
using shim::testing::run_ranks;
using shim::testing::start_service;

class StagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_cuda_reset();
    auto d = cuda::Driver::open(SUMCAST_FAKE_CUDA);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    driver = std::move(d).value();
  }
  void* device_with(const std::vector<uint8_t>& bytes) {
    void* d = fake_cuda_device_alloc(bytes.size());
    fake_cuda_device_write(d, bytes.data(), bytes.size());
    return d;
  }
  std::vector<uint8_t> device_bytes(const void* d, size_t n) {
    std::vector<uint8_t> out(n);
    fake_cuda_device_read(out.data(), d, n);
    return out;
  }
  static std::vector<uint8_t> pattern(size_t n, int salt) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 13 + salt);
    return v;
  }
  // What the "call" does on host memory: recv[i] = send[i] + 1.
  static void run(const DeviceStaging::Buffers& b, size_t n) {
    const auto* s = static_cast<const uint8_t*>(b.send);
    auto* r = static_cast<uint8_t*>(b.recv);
    for (size_t i = 0; i < n; ++i) r[i] = static_cast<uint8_t>(s[i] + 1);
  }
  static std::vector<uint8_t> plus_one(std::vector<uint8_t> v) {
    for (auto& x : v) x = static_cast<uint8_t>(x + 1);
    return v;
  }
  std::unique_ptr<cuda::Driver> driver;
};

constexpr size_t kBytes = 100000;

TEST(StagingNoDriver, BuffersPassThroughUntouched) {
  DeviceStaging s(nullptr);
  std::vector<uint8_t> a(16), b(16);
  auto r = s.begin(a.data(), b.data(), a.size());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->staged);
  EXPECT_EQ(r->send, a.data());
  EXPECT_EQ(r->recv, b.data());
  EXPECT_TRUE(s.finish(*r, a.size()).ok());
}

TEST_F(StagingTest, HostBuffersAreNotStagedNorCopied) {
  DeviceStaging s(driver.get());
  auto a = pattern(kBytes, 1);
  std::vector<uint8_t> b(kBytes);
  auto r = s.begin(a.data(), b.data(), kBytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->staged);
  EXPECT_EQ(r->send, a.data());
  EXPECT_EQ(r->recv, b.data());
  EXPECT_EQ(fake_cuda_calls("cuMemcpyDtoH_v2") + fake_cuda_calls("cuMemcpyHtoD_v2"), 0);
}

TEST_F(StagingTest, DeviceInPlace) {
  DeviceStaging s(driver.get());
  const auto in = pattern(kBytes, 2);
  void* d = device_with(in);
  auto r = s.begin(d, d, kBytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->staged);
  EXPECT_EQ(r->send, r->recv);
  EXPECT_NE(r->recv, d);
  run(*r, kBytes);  // would fault on the device range
  ASSERT_TRUE(s.finish(*r, kBytes).ok());
  EXPECT_EQ(device_bytes(d, kBytes), plus_one(in));
  EXPECT_EQ(s.counters().bytes_to_host, kBytes);
  EXPECT_EQ(s.counters().bytes_to_device, kBytes);
  EXPECT_EQ(s.counters().pageable_fallbacks, 0u);
  EXPECT_EQ(fake_cuda_context_depth(), 0);
}

TEST_F(StagingTest, EveryCombinationOutOfPlace) {
  for (int mask = 1; mask < 4; ++mask) {  // bit 0: send on the device, bit 1: recv on the device
    SCOPED_TRACE(mask);
    DeviceStaging s(driver.get());
    const auto in = pattern(kBytes, mask);
    std::vector<uint8_t> host_send = in, host_recv(kBytes, 0);
    void* dsend = (mask & 1) != 0 ? device_with(in) : host_send.data();
    void* drecv = (mask & 2) != 0 ? device_with(std::vector<uint8_t>(kBytes, 0)) : host_recv.data();
    auto r = s.begin(dsend, drecv, kBytes);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->staged);
    EXPECT_EQ(r->send == dsend, (mask & 1) == 0);
    EXPECT_EQ(r->recv == drecv, (mask & 2) == 0);
    run(*r, kBytes);
    ASSERT_TRUE(s.finish(*r, kBytes).ok());
    const auto got = (mask & 2) != 0 ? device_bytes(drecv, kBytes) : host_recv;
    EXPECT_EQ(got, plus_one(in));
    if ((mask & 1) != 0) {
      EXPECT_EQ(device_bytes(dsend, kBytes), in);  // the send buffer is unchanged
    }
  }
}

TEST_F(StagingTest, BuffersAreKeptAndGrown) {
  DeviceStaging s(driver.get());
  void* d = device_with(pattern(kBytes, 3));
  for (size_t n : {size_t{1000}, size_t{5000}, size_t{800}, kBytes}) {
    auto r = s.begin(d, d, n);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(s.finish(*r, n).ok());
  }
  EXPECT_EQ(fake_cuda_calls("cuMemHostAlloc"), 3);  // 1000, grown to 5000, kept for 800, grown to kBytes
  EXPECT_EQ(fake_cuda_calls("cuMemFreeHost"), 2);
}

TEST_F(StagingTest, CopyInFailureFailsTheCallWithTheReason) {
  DeviceStaging s(driver.get());
  void* d = device_with(pattern(kBytes, 4));
  fake_cuda_fail("cuMemcpyDtoH_v2", 700, 0);
  auto r = s.begin(d, d, kBytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("staging the send buffer to host memory: cuMemcpyDtoH: CUDA error 700"),
            std::string::npos)
      << r.status().message();
}

TEST_F(StagingTest, CopyOutFailureFailsTheCallWithTheReason) {
  DeviceStaging s(driver.get());
  void* d = device_with(pattern(kBytes, 5));
  auto r = s.begin(d, d, kBytes);
  ASSERT_TRUE(r.ok());
  fake_cuda_fail("cuMemcpyHtoD_v2", 1, 0);
  Status st = s.finish(*r, kBytes);
  EXPECT_NE(st.message().find("copying the result to the device buffer: cuMemcpyHtoD"), std::string::npos)
      << st.to_string();
}

TEST_F(StagingTest, UnknownKindFailsTheCall) {
  DeviceStaging s(driver.get());
  void* d = device_with(pattern(64, 6));
  fake_cuda_fail("cuPointerGetAttribute", 3, 0);  // CUDA_ERROR_NOT_INITIALIZED
  auto r = s.begin(d, d, 64);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("CUDA error 3"), std::string::npos) << r.status().message();
  EXPECT_EQ(fake_cuda_calls("cuMemcpyDtoH_v2"), 0);
}

TEST_F(StagingTest, PinnedMemoryRefusedFallsBackToPageable) {
  DeviceStaging s(driver.get());
  const auto in = pattern(kBytes, 7);
  void* d = device_with(in);
  fake_cuda_fail("cuMemHostAlloc", 2, 0);  // out of memory
  auto r = s.begin(d, d, kBytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  run(*r, kBytes);
  ASSERT_TRUE(s.finish(*r, kBytes).ok());
  EXPECT_EQ(device_bytes(d, kBytes), plus_one(in));
  EXPECT_EQ(s.counters().pageable_fallbacks, 1u);
}

TEST_F(StagingTest, CopyOutToABlockOfEitherKind) {
  DeviceStaging s(driver.get());
  const auto block = pattern(4096, 8);
  void* d = device_with(std::vector<uint8_t>(4096, 0));
  ASSERT_TRUE(s.copy_out(d, block.data(), block.size()).ok());
  EXPECT_EQ(device_bytes(d, 4096), block);
  std::vector<uint8_t> h(4096, 0);
  ASSERT_TRUE(s.copy_out(h.data(), block.data(), block.size()).ok());
  EXPECT_EQ(h, block);
}

// Three ranks, each with device send and receive buffers, all-reduce through the worker library
// and the embedded service: the staged path gives the exact sum in every rank's device buffer.
TEST_F(StagingTest, StagedAllreduceThroughTheServiceIsExact) {
  auto svc = start_service();
  ASSERT_TRUE(svc);
  constexpr int kWorld = 3;
  constexpr size_t kCount = 60000;
  const auto want = make_expected(wire::Dtype::kFp32, wire::ReduceOp::kSum, kCount, kWorld, 9);
  std::vector<void*> dsend(kWorld), drecv(kWorld);
  for (int r = 0; r < kWorld; ++r) {  // the fake's allocator is set up before the threads start
    dsend[r] = device_with(make_input(wire::Dtype::kFp32, kCount, r, 9));
    drecv[r] = fake_cuda_device_alloc(kCount * 4);
  }
  run_ranks(kWorld, [&](int r) {
    auto c = shim::Communicator::create(
        base_config({svc.get()}, "staged", static_cast<uint16_t>(r), kWorld, wire::Dtype::kFp32));
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    DeviceStaging s(driver.get());
    auto b = s.begin(dsend[r], drecv[r], kCount * 4);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    Status st = (*c)->allreduce(b->send, b->recv, kCount);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(s.finish(*b, kCount * 4).ok());
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(first_mismatch(device_bytes(drecv[r], kCount * 4), want, 4), -1) << r;
}

}  // namespace
}  // namespace sumcast::mpi
