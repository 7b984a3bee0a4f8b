/* rawpipe's XDP program: sends the pipeline's traffic to its AF_XDP sockets and everything else
 * to the kernel, so ARP, ping, SSH and other services keep working on the same interface.
 *
 * A frame is redirected when its destination matches a steering rule (see xdp_steer_abi.h) and
 * the queue it arrived on has a socket in xsks_map; otherwise it is passed. bpf_redirect_map's
 * XDP_PASS fallback covers a queue without a socket. In "all" mode every frame is redirected.
 * Steering is a superset of the pipeline's rules (source address, source port and VLAN clauses
 * are not looked at here); the pipeline classifies again and decides exactly.
 *
 * Non-initial IP fragments carry no ports, so they are matched on protocol and address only. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xdp_steer_abi.h"

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, RAWPIPE_XDP_MAX_QUEUES);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, RAWPIPE_XDP_MAX_RULES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct rawpipe_port_key);
  __type(value, __u32);
} port_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, RAWPIPE_XDP_MAX_RULES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct rawpipe_proto_key);
  __type(value, __u32);
} proto_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LPM_TRIE);
  __uint(max_entries, RAWPIPE_XDP_MAX_RULES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, struct rawpipe_addr_key);
  __type(value, __u32);
} addr_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} cfg SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, RAWPIPE_XDP_STAT_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} stats SEC(".maps");

struct vlan_tag {
  __be16 tci;
  __be16 proto;
};

static __always_inline void count(__u32 idx) {
  __u64 *v = bpf_map_lookup_elem(&stats, &idx);
  if (v) *v += 1;
}

static __always_inline int redirect(struct xdp_md *ctx) {
  count(RAWPIPE_XDP_STAT_REDIRECTED);
  return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

static __always_inline int pass(__u32 why) {
  count(why);
  return XDP_PASS;
}

/* Looks the destination up in the three tries; has_port is 0 for non-initial fragments. */
static __always_inline int match(__u8 family, __u8 proto, const void *addr, __u32 addr_len, int has_port,
                                 __be16 port) {
  __u32 addr_bits = addr_len * 8;
  if (has_port) {
    struct rawpipe_port_key k = {.prefixlen = RAWPIPE_PORT_KEY_FIXED_BITS + addr_bits,
                                 .family = family, .proto = proto, .port = port};
    __builtin_memcpy(k.addr, addr, 16);
    if (bpf_map_lookup_elem(&port_rules, &k)) return 1;
  }
  struct rawpipe_proto_key pk = {.prefixlen = RAWPIPE_PROTO_KEY_FIXED_BITS + addr_bits,
                                 .family = family, .proto = proto};
  __builtin_memcpy(pk.addr, addr, 16);
  if (bpf_map_lookup_elem(&proto_rules, &pk)) return 1;
  struct rawpipe_addr_key ak = {.prefixlen = RAWPIPE_ADDR_KEY_FIXED_BITS + addr_bits, .family = family};
  __builtin_memcpy(ak.addr, addr, 16);
  return bpf_map_lookup_elem(&addr_rules, &ak) != 0;
}

static __always_inline int is_ipv6_ext(__u8 nh) {
  return nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS || nh == IPPROTO_FRAGMENT;
}

SEC("xdp")
int rawpipe_steer(struct xdp_md *ctx) {
  void *data = (void *)(long)ctx->data;
  void *end = (void *)(long)ctx->data_end;

  __u32 zero = 0;
  __u32 *mode = bpf_map_lookup_elem(&cfg, &zero);
  if (mode && *mode == RAWPIPE_XDP_MODE_ALL) return redirect(ctx);

  struct ethhdr *eth = data;
  if ((void *)(eth + 1) > end) return pass(RAWPIPE_XDP_STAT_NOT_IP);
  __be16 type = eth->h_proto;
  void *l3 = eth + 1;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (type != bpf_htons(ETH_P_8021Q) && type != bpf_htons(ETH_P_8021AD)) break;
    struct vlan_tag *tag = l3;
    if ((void *)(tag + 1) > end) return pass(RAWPIPE_XDP_STAT_NOT_IP);
    type = tag->proto;
    l3 = tag + 1;
  }

  __u8 addr[16] = {};
  __u8 proto;
  void *l4;
  int has_port;
  if (type == bpf_htons(ETH_P_IP)) {
    struct iphdr *ip = l3;
    if ((void *)(ip + 1) > end || ip->ihl < 5) return pass(RAWPIPE_XDP_STAT_PASSED);
    __builtin_memcpy(addr, &ip->daddr, 4);
    proto = ip->protocol;
    l4 = (__u8 *)ip + ip->ihl * 4;
    has_port = (ip->frag_off & bpf_htons(0x1fff)) == 0;
    __be16 port = 0;
    if (has_port && (proto == IPPROTO_UDP || proto == IPPROTO_TCP || proto == IPPROTO_SCTP)) {
      /* The destination port is the second 16-bit word of UDP, TCP and SCTP alike. */
      __be16 *ports = l4;
      if ((void *)(ports + 2) > end) return pass(RAWPIPE_XDP_STAT_PASSED);
      port = ports[1];
    } else {
      has_port = 0;
    }
    return match(4, proto, addr, 4, has_port, port) ? redirect(ctx) : pass(RAWPIPE_XDP_STAT_PASSED);
  }
  if (type == bpf_htons(ETH_P_IPV6)) {
    struct ipv6hdr *ip6 = l3;
    if ((void *)(ip6 + 1) > end) return pass(RAWPIPE_XDP_STAT_PASSED);
    __builtin_memcpy(addr, &ip6->daddr, 16);
    proto = ip6->nexthdr;
    l4 = ip6 + 1;
    has_port = 1;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      if (!is_ipv6_ext(proto)) break;
      __u8 *ext = l4;
      if ((void *)(ext + 8) > end) return pass(RAWPIPE_XDP_STAT_PASSED);
      if (proto == IPPROTO_FRAGMENT) {
        /* offset is the upper 13 bits of bytes 2..3 */
        if ((((__u16)ext[2] << 8 | ext[3]) & 0xfff8) != 0) has_port = 0;
        proto = ext[0];
        l4 = ext + 8;
      } else {
        proto = ext[0];
        l4 = ext + ((__u32)ext[1] + 1) * 8;
      }
    }
    __be16 port = 0;
    if (has_port && (proto == IPPROTO_UDP || proto == IPPROTO_TCP || proto == IPPROTO_SCTP)) {
      __be16 *ports = l4;
      if ((void *)(ports + 2) > end) return pass(RAWPIPE_XDP_STAT_PASSED);
      port = ports[1];
    } else {
      has_port = 0;
    }
    return match(6, proto, addr, 16, has_port, port) ? redirect(ctx) : pass(RAWPIPE_XDP_STAT_PASSED);
  }
  return pass(RAWPIPE_XDP_STAT_NOT_IP);
}

char _license[] SEC("license") = "GPL";
