/* The contract between the XDP program (xdp_steer.bpf.c) and the AF_XDP driver that fills its
 * maps (steering.cc). Plain C so both clang -target bpf and the C++ build include it; every layout
 * is pinned with a size check because the kernel compares key sizes byte for byte.
 *
 * Steering keys are longest-prefix-match trie keys: `prefixlen` counts the bits of the data that
 * must match, so a rule for 10.0.0.0/8 is the key with the address prefix, and "any address" is
 * the same key with only the leading fields counted. Three tries cover the three rule shapes:
 *   port trie   (family, proto, dst port, dst prefix)   rules with a destination port
 *   proto trie  (family, proto, dst prefix)             rules for one protocol, any port
 *   addr trie   (family, dst prefix)                    rules for every IP protocol
 * Ports and addresses are stored in network byte order, as the packet carries them. */
#ifndef RAWPIPE_XDP_STEER_ABI_H
#define RAWPIPE_XDP_STEER_ABI_H

#include <linux/types.h>

#define RAWPIPE_XDP_MAX_QUEUES 64
#define RAWPIPE_XDP_MAX_RULES 4096

/* cfg map, index 0 */
#define RAWPIPE_XDP_MODE_STEER 0 /* redirect matching traffic, pass the rest to the kernel */
#define RAWPIPE_XDP_MODE_ALL 1   /* redirect every frame of the queue */

/* stats map (per CPU), indices */
#define RAWPIPE_XDP_STAT_REDIRECTED 0 /* matched and handed to bpf_redirect_map */
#define RAWPIPE_XDP_STAT_PASSED 1     /* did not match: XDP_PASS */
#define RAWPIPE_XDP_STAT_NOT_IP 2     /* ARP and other non-IP frames (passed in steer mode) */
#define RAWPIPE_XDP_STAT_COUNT 3

struct rawpipe_port_key {
  __u32 prefixlen; /* 32 + address prefix bits */
  __u8 family;     /* 4 or 6 */
  __u8 proto;
  __be16 port;
  __u8 addr[16];
};

struct rawpipe_proto_key {
  __u32 prefixlen; /* 16 + address prefix bits */
  __u8 family;
  __u8 proto;
  __u8 addr[16];
};

struct rawpipe_addr_key {
  __u32 prefixlen; /* 8 + address prefix bits */
  __u8 family;
  __u8 addr[16];
};

#define RAWPIPE_PORT_KEY_FIXED_BITS 32
#define RAWPIPE_PROTO_KEY_FIXED_BITS 16
#define RAWPIPE_ADDR_KEY_FIXED_BITS 8

#ifdef __cplusplus
static_assert(sizeof(rawpipe_port_key) == 24, "port key layout");
static_assert(sizeof(rawpipe_proto_key) == 24, "proto key layout (padded)");
static_assert(sizeof(rawpipe_addr_key) == 24, "addr key layout (padded)");
#else
_Static_assert(sizeof(struct rawpipe_port_key) == 24, "port key layout");
_Static_assert(sizeof(struct rawpipe_proto_key) == 24, "proto key layout (padded)");
_Static_assert(sizeof(struct rawpipe_addr_key) == 24, "addr key layout (padded)");
#endif

#endif
