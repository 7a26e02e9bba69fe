// The XDP program's verdicts (nic_offload/xdp/sumcast_xdp.c), run in the kernel on crafted frames
// with BPF_PROG_TEST_RUN. Without an AF_XDP socket in xsks_map, a redirect falls back to XDP_PASS,
// so the program's own counters tell the verdicts apart: "redirect failed" = it chose the socket,
// "passed" = it chose the kernel. Needs CAP_BPF (root): skipped otherwise.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>

#include <cstring>
#include <vector>

#include "sumcast/wire/format.h"
#include "sumcast/wire/packet.h"

namespace {

constexpr uint32_t kApplianceIp = 0x0A4D0001;  // 10.77.0.1
constexpr uint32_t kKernelIp = 0x0A4D00FA;     // 10.77.0.250
constexpr uint32_t kWorkerIp = 0x0A4D000A;

class XdpVerdictTest : public ::testing::Test {
 protected:
  void SetUp() override {
    obj_ = bpf_object__open_file(SUMCAST_XDP_OBJECT, nullptr);
    ASSERT_NE(obj_, nullptr) << "cannot open " << SUMCAST_XDP_OBJECT;
    if (bpf_object__load(obj_) != 0) GTEST_SKIP() << "cannot load BPF programs here (needs root/CAP_BPF)";
    bpf_program* prog = bpf_object__find_program_by_name(obj_, "sumcast_xdp");
    ASSERT_NE(prog, nullptr);
    prog_fd_ = bpf_program__fd(prog);
    cfg_fd_ = bpf_object__find_map_fd_by_name(obj_, "sumcast_cfg");
    stats_fd_ = bpf_object__find_map_fd_by_name(obj_, "sumcast_stats");
    ASSERT_GE(cfg_fd_, 0);
    ASSERT_GE(stats_fd_, 0);
    ASSERT_GE(bpf_object__find_map_fd_by_name(obj_, "xsks_map"), 0) << "the af_xdp PMD needs xsks_map";
    set_address(kApplianceIp);
  }
  void TearDown() override {
    if (obj_ != nullptr) bpf_object__close(obj_);
  }

  void set_address(uint32_t ip) {
    const uint32_t key = 0;
    const uint32_t value = htonl(ip);
    ASSERT_EQ(bpf_map_update_elem(cfg_fd_, &key, &value, BPF_ANY), 0);
  }

  uint64_t counter(uint32_t which) {
    const int cpus = libbpf_num_possible_cpus();
    std::vector<uint64_t> v(static_cast<size_t>(cpus));
    if (bpf_map_lookup_elem(stats_fd_, &which, v.data()) != 0) return ~uint64_t{0};
    uint64_t sum = 0;
    for (uint64_t x : v) sum += x;
    return sum;
  }

  // Runs the program once on `frame`: 't' = it chose the AF_XDP socket, 'k' = the kernel.
  char verdict(const std::vector<uint8_t>& frame) {
    const uint64_t to_socket = counter(2);
    const uint64_t to_kernel = counter(1);
    std::vector<uint8_t> out(frame.size() + 256);
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(), .data_out = out.data(),
                .data_size_in = static_cast<uint32_t>(frame.size()), .data_size_out = static_cast<uint32_t>(out.size()),
                .repeat = 1);
    if (bpf_prog_test_run_opts(prog_fd_, &opts) != 0) return 'e';
    if (opts.retval != XDP_PASS) return '?';
    if (counter(2) == to_socket + 1 && counter(1) == to_kernel) return 't';
    if (counter(1) == to_kernel + 1 && counter(2) == to_socket) return 'k';
    return '?';
  }

  static std::vector<uint8_t> roce(uint32_t dst_ip, uint16_t dst_port = sumcast::wire::kRoceUdpPort) {
    sumcast::wire::Addressing a;
    a.src_ip = kWorkerIp;
    a.dst_ip = dst_ip;
    a.src_port = 49152;
    a.dst_port = dst_port;
    a.dest_qp = 0x100;
    std::vector<uint8_t> f(sumcast::wire::frame_len(64));
    sumcast::wire::write_frame_headers(f.data(), a, sumcast::wire::SumcastHeader{}, 64);
    return f;
  }

  static std::vector<uint8_t> arp(uint32_t target) {
    std::vector<uint8_t> f(60, 0);
    std::memset(f.data(), 0xFF, 6);
    f[12] = 0x08;
    f[13] = 0x06;
    const uint8_t body[8] = {0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01};  // Ethernet, IPv4, request
    std::memcpy(f.data() + 14, body, sizeof(body));
    const uint32_t spa = htonl(kWorkerIp);
    const uint32_t tpa = htonl(target);
    std::memcpy(f.data() + 14 + 14, &spa, 4);
    std::memcpy(f.data() + 14 + 24, &tpa, 4);
    return f;
  }

  bpf_object* obj_ = nullptr;
  int prog_fd_ = -1;
  int cfg_fd_ = -1;
  int stats_fd_ = -1;
};

TEST_F(XdpVerdictTest, RoceToTheApplianceGoesToTheSocket) { EXPECT_EQ(verdict(roce(kApplianceIp)), 't'); }

TEST_F(XdpVerdictTest, ArpForTheApplianceGoesToTheSocketAndOtherArpToTheKernel) {
  EXPECT_EQ(verdict(arp(kApplianceIp)), 't');
  EXPECT_EQ(verdict(arp(kKernelIp)), 'k');
}

TEST_F(XdpVerdictTest, EverythingElseGoesToTheKernel) {
  EXPECT_EQ(verdict(roce(kKernelIp)), 'k') << "RoCE port, the host's address";
  EXPECT_EQ(verdict(roce(kApplianceIp, 9999)), 'k') << "the appliance's address, another UDP port";
  std::vector<uint8_t> icmp = roce(kApplianceIp);
  icmp[sumcast::wire::kIpOffset + 9] = 1;  // protocol ICMP
  EXPECT_EQ(verdict(icmp), 'k');
  std::vector<uint8_t> frag = roce(kApplianceIp);
  frag[sumcast::wire::kIpOffset + 6] = 0x00;
  frag[sumcast::wire::kIpOffset + 7] = 0x10;  // fragment offset 16: no UDP header here
  EXPECT_EQ(verdict(frag), 'k');
  std::vector<uint8_t> v6 = roce(kApplianceIp);
  v6[12] = 0x86;
  v6[13] = 0xDD;
  EXPECT_EQ(verdict(v6), 'k');
}

TEST_F(XdpVerdictTest, TruncatedFramesGoToTheKernel) {
  const std::vector<uint8_t> full = roce(kApplianceIp);
  // Cut inside the IPv4 header and inside the UDP header (the test run needs >= 14 bytes).
  for (size_t len : {size_t{14}, size_t{30}, sumcast::wire::kUdpOffset + 4}) {
    EXPECT_EQ(verdict(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(len))), 'k') << len;
  }
  const std::vector<uint8_t> a = arp(kApplianceIp);
  EXPECT_EQ(verdict(std::vector<uint8_t>(a.begin(), a.begin() + 30)), 'k') << "ARP cut short";
}

TEST_F(XdpVerdictTest, UntilSumcastdWritesItsAddressEverythingGoesToTheKernel) {
  set_address(0);
  EXPECT_EQ(verdict(roce(kApplianceIp)), 'k');
  EXPECT_EQ(verdict(arp(kApplianceIp)), 'k');
  set_address(kApplianceIp);
  EXPECT_EQ(verdict(roce(kApplianceIp)), 't');
}

TEST_F(XdpVerdictTest, IpOptionsShiftTheUdpHeader) {
  // IHL 6: 4 bytes of options (NOPs) before UDP. The program must find dport 4791 after them.
  std::vector<uint8_t> f = roce(kApplianceIp);
  f.insert(f.begin() + static_cast<long>(sumcast::wire::kUdpOffset), {1, 1, 1, 1});
  f[sumcast::wire::kIpOffset] = 0x46;
  EXPECT_EQ(verdict(f), 't');
}

}  // namespace
