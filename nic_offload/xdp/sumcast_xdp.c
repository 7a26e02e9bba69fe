// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
// Sumcast's XDP program for AF_XDP ports (docs/nic_offload.md §3). Loaded by DPDK's af_xdp PMD
// through its `xdp_prog=<path to sumcast_xdp.o>` vdev option, which looks up the map named
// "xsks_map" and puts its AF_XDP socket there, at the index of its queue.
//
// Verdicts, per frame on the interface:
//   IPv4 / UDP dst 4791 (RoCEv2) to the appliance address   -> redirect to the queue's AF_XDP socket
//   ARP whose target is the appliance address               -> redirect (sumcastd answers ARP itself)
//   anything else (ARP for the host, ICMP, TCP, IPv6, ...)   -> XDP_PASS to the kernel's stack
// The appliance address lives in "sumcast_cfg" (ARRAY, 1 entry, network order), which sumcastd
// writes after the port started (sumcast::nic_offload::XdpProgram). While it is 0, nothing is
// redirected: the kernel keeps every frame.
// Per-CPU counters in "sumcast_stats": [0] redirected, [1] passed, [2] redirect failed (no socket).
// linux/bpf.h first: the libbpf headers use its types.
// clang-format off
#include <linux/bpf.h>
// clang-format on
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#define SUMCAST_ROCE_PORT 4791
#define SUMCAST_MAX_QUEUES 64

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, SUMCAST_MAX_QUEUES);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

struct sumcast_cfg {
  __u32 appliance_ipv4; /* network order; 0: redirect nothing */
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct sumcast_cfg);
} sumcast_cfg SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 3);
  __type(key, __u32);
  __type(value, __u64);
} sumcast_stats SEC(".maps");

/* ARP for IPv4 over Ethernet: the fixed 28-byte body. */
struct arp_ipv4 {
  __be16 htype;
  __be16 ptype;
  __u8 hlen;
  __u8 plen;
  __be16 oper;
  __u8 sha[6];
  __u8 spa[4];
  __u8 tha[6];
  __u8 tpa[4];
} __attribute__((packed));

static __always_inline void count(__u32 which) {
  __u64* c = bpf_map_lookup_elem(&sumcast_stats, &which);
  if (c) *c += 1;
}

static __always_inline int pass(void) {
  count(1);
  return XDP_PASS;
}

static __always_inline int redirect(struct xdp_md* ctx) {
  /* XDP_PASS as the fallback keeps the frame when no socket sits at this queue. */
  int rc = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
  count(rc == XDP_REDIRECT ? 0 : 2);
  return rc;
}

SEC("xdp")
int sumcast_xdp(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  __u32 key = 0;
  struct sumcast_cfg* cfg = bpf_map_lookup_elem(&sumcast_cfg, &key);
  if (!cfg || cfg->appliance_ipv4 == 0) return pass();
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end) return pass();
  if (eth->h_proto == bpf_htons(ETH_P_ARP)) {
    struct arp_ipv4* arp = (void*)(eth + 1);
    if ((void*)(arp + 1) > end) return pass();
    __u32 target;
    __builtin_memcpy(&target, arp->tpa, 4);
    if (arp->ptype == bpf_htons(ETH_P_IP) && target == cfg->appliance_ipv4) return redirect(ctx);
    return pass();
  }
  if (eth->h_proto != bpf_htons(ETH_P_IP)) return pass();
  struct iphdr* ip = (void*)(eth + 1);
  if ((void*)(ip + 1) > end) return pass();
  if (ip->protocol != IPPROTO_UDP || ip->daddr != cfg->appliance_ipv4 || ip->ihl < 5) return pass();
  /* Fragments other than the first carry no UDP header: the kernel reassembles or drops them. */
  if (ip->frag_off & bpf_htons(0x1FFF)) return pass();
  struct udphdr* udp = (void*)ip + ip->ihl * 4;
  if ((void*)(udp + 1) > end) return pass();
  if (udp->dest != bpf_htons(SUMCAST_ROCE_PORT)) return pass();
  return redirect(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
