/* The work of row 10.pcap-vs-testpmd done the plainest way DPDK allows: no rawpipe code, the
 * driver's own mbufs, its own mempool cache. In `rxonly` mode the loop is testpmd's rxonly
 * (rx_burst, then free the burst); in `work` mode it also does, per packet, what rawpipe's fast
 * path must: check that the frame is untagged IPv4 without options or fragments, carrying UDP with
 * lengths that agree, store the layer offsets in the mbuf, take the destination address and port
 * as the key, match it against the row's rule (`udp dst *:5000`) and count the packet and its bytes
 * for the rule's endpoint. The ratio work / rxonly on the same input says how close any pipeline
 * doing that work can come to DPDK's empty loop on this machine.
 *
 *   dpdk_parse_loop EAL-ARGS -- [--mode rxonly|work] [--seconds 3] [--warm 1] [--burst 32] [--mbufs 8192]
 *
 * EAL-ARGS name one port (net_pcap0,rx_pcap=FILE,infinite_rx=1 in the row) and the lcore the loop
 * runs on (the main lcore). One JSON object on stdout: mode, Mpps over the window, the packets
 * and bytes that matched the rule, and the packets that did not. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_ptype.h>

enum { kMaxBurst = 512 };

struct Counts {
  uint64_t matched, matched_bytes, other;
};

/* One frame: 1 when it is the plain IPv4/UDP case and its offsets are stored, 0 otherwise. */
static inline int parse_plain_udp4(struct rte_mbuf *m, uint64_t *key) {
  const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);
  const unsigned len = m->data_len;
  if (len < 14 + 20 + 8) return 0;
  uint32_t type_vihl, frag_ttl_proto;
  memcpy(&type_vihl, d + 12, 4);
  memcpy(&frag_ttl_proto, d + 20, 4);
  uint64_t dst_ports;
  memcpy(&dst_ports, d + 30, 8);
  const int total = d[16] << 8 | d[17];
  const int ulen = d[38] << 8 | d[39];
  const int plain = (type_vihl & 0xffffffu) == 0x450008u && (frag_ttl_proto & 0xff00ff3fu) == (17u << 24) &&
                    ulen >= 8 && ulen + 20 <= total && total <= (int)len - 14 && (d[0] & 1u) == 0 &&
                    (dst_ports & 0xf0u) != 0xe0u;
  if (!plain) return 0;
  m->packet_type = RTE_PTYPE_L2_ETHER | RTE_PTYPE_L3_IPV4 | RTE_PTYPE_L4_UDP;
  m->l2_len = 14;
  m->l3_len = 20;
  m->l4_len = 8;
  *key = dst_ports & 0xffff0000ffffffffull; /* destination address and port, as loaded */
  return 1;
}

static void usage(void) {
  fprintf(stderr, "usage: dpdk_parse_loop EAL-ARGS -- [--mode rxonly|work] [--seconds 3] [--warm 1] [--burst 32] "
                  "[--mbufs 8192]\n");
  exit(2);
}

int main(int argc, char **argv) {
  const int eal = rte_eal_init(argc, argv);
  if (eal < 0) {
    fprintf(stderr, "dpdk_parse_loop: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  argc -= eal;
  argv += eal;
  int work = 0;
  double seconds = 3, warm = 1;
  unsigned burst = 32, mbufs = 8192;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
      ++i;
      if (!strcmp(argv[i], "work")) work = 1;
      else if (strcmp(argv[i], "rxonly")) usage();
    } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--warm") && i + 1 < argc) warm = atof(argv[++i]);
    else if (!strcmp(argv[i], "--burst") && i + 1 < argc) burst = (unsigned)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mbufs") && i + 1 < argc) mbufs = (unsigned)atoi(argv[++i]);
    else usage();
  }
  if (seconds <= 0 || warm < 0 || burst < 1 || burst > kMaxBurst || mbufs < 2 * burst) usage();
  if (rte_eth_dev_count_avail() != 1) {
    fprintf(stderr, "dpdk_parse_loop: EAL-ARGS must give exactly one port (--vdev), not %u\n",
            rte_eth_dev_count_avail());
    return 1;
  }
  const uint16_t port = 0;
  /* As testpmd sizes its pool: the per-lcore cache at its default of 250. */
  struct rte_mempool *mp = rte_pktmbuf_pool_create("dpl", mbufs, 250, 0, RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
  struct rte_eth_conf conf;
  memset(&conf, 0, sizeof conf);
  if (!mp || rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(port, 0, 1024, (unsigned)rte_eth_dev_socket_id(port), NULL, mp) != 0 ||
      rte_eth_tx_queue_setup(port, 0, 1024, (unsigned)rte_eth_dev_socket_id(port), NULL) != 0 ||
      rte_eth_dev_start(port) != 0) {
    fprintf(stderr, "dpdk_parse_loop: cannot set up port 0: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  /* The row's rule, udp dst *:5000, in the key's layout: the port's bytes as they load. */
  const uint64_t rule_port = (uint64_t)(5000 >> 8 | (5000 & 0xff) << 8) << 48;
  const uint64_t port_mask = 0xffffull << 48;
  struct Counts c = {0, 0, 0};
  struct rte_mbuf *pkts[kMaxBurst];
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t t0 = rte_rdtsc();
  const uint64_t start = t0 + (uint64_t)(warm * (double)hz), end = start + (uint64_t)(seconds * (double)hz);
  uint64_t received = 0, at_start = 0, started = 0;
  for (unsigned long pass = 0;; ++pass) {
    if ((pass & 255) == 0) {
      const uint64_t t = rte_rdtsc();
      if (!started && t >= start) {
        started = t;
        at_start = received;
      } else if (t >= end) {
        const double window = (double)(t - started) / (double)hz;
        /* Every count is printed: one left unread would let the compiler drop its work. */
        printf("{\"mode\": \"%s\", \"mpps\": %.3f, \"seconds\": %.3f, \"matched\": %" PRIu64
               ", \"matched_bytes\": %" PRIu64 ", \"other\": %" PRIu64 "}\n",
               work ? "work" : "rxonly", (double)(received - at_start) / window / 1e6, window, c.matched,
               c.matched_bytes, c.other);
        break;
      }
    }
    const uint16_t n = rte_eth_rx_burst(port, 0, pkts, (uint16_t)burst);
    if (work)
      for (uint16_t i = 0; i < n; ++i) {
        uint64_t key;
        if (parse_plain_udp4(pkts[i], &key) && (key & port_mask) == rule_port) {
          ++c.matched;
          c.matched_bytes += pkts[i]->data_len;
        } else {
          ++c.other;
        }
      }
    received += n;
    rte_pktmbuf_free_bulk(pkts, n);
  }
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  rte_eal_cleanup();
  return 0;
}
