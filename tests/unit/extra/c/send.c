/* The send path through the public header, as an application uses it: zero-copy bursts of
 * buffers it allocated and filled, received packets sent back out, a copying sendto addressed
 * through the neighbour cache (learnt from an ARP reply on the wire) or a multicast group, a
 * dummy send, and every misuse refused with a clean error. The port is a pcap port whose
 * tx_file records what it transmits: the test reads it back and checks every byte and checksum.
 * Usage: send CONFIG (unused; the pipeline is built from a config written here). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "c_test.h"

enum { kInput = 20, kBurst = 32, kReflect = 8 };

static const uint8_t kOurMac[6] = {0x02, 0, 0, 0, 0, 0x01};
static const uint8_t kPeerMac[6] = {0x02, 0, 0, 0, 0, 0x02};

/* Ethernet/IPv4/UDP, 10.0.0.1:4000 -> dst:port, payload `tag` repeated, checksums left 0. */
static uint32_t udp_frame(uint8_t *b, const uint8_t dst_mac[6], const uint8_t dst_ip[4], uint16_t port, uint8_t tag,
                          uint32_t payload) {
  memset(b, 0, 42 + payload);
  memcpy(b, dst_mac, 6);
  memcpy(b + 6, kOurMac, 6);
  b[12] = 0x08;
  uint8_t *ip = b + 14, *udp = b + 34;
  ip[0] = 0x45;
  ip[2] = (uint8_t)((28 + payload) >> 8), ip[3] = (uint8_t)(28 + payload);
  ip[8] = 64, ip[9] = 17;
  ip[12] = 10, ip[15] = 1;
  memcpy(ip + 16, dst_ip, 4);
  udp[0] = 0x0f, udp[1] = 0xa0, udp[2] = (uint8_t)(port >> 8), udp[3] = (uint8_t)port;
  udp[4] = (uint8_t)((8 + payload) >> 8), udp[5] = (uint8_t)(8 + payload);
  memset(udp + 8, tag, payload);
  return 42 + payload;
}

static uint32_t sum16(const uint8_t *p, uint32_t len, uint32_t sum) {
  for (; len > 1; p += 2, len -= 2) sum += (uint32_t)(p[0] << 8 | p[1]);
  if (len) sum += (uint32_t)p[0] << 8;
  return sum;
}
static uint16_t fold(uint32_t s) {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return (uint16_t)s;
}
/* Both checksums of an IPv4/UDP frame verify (a kernel would accept it). */
static int checksums_ok(const uint8_t *f, uint32_t len) {
  if (len < 42 || f[12] != 0x08 || f[13] != 0) return 0;
  const uint8_t *ip = f + 14, *udp = f + 34;
  if (fold(sum16(ip, 20, 0)) != 0xffff) return 0;
  uint32_t ulen = (uint32_t)(udp[4] << 8 | udp[5]);
  if (udp[6] == 0 && udp[7] == 0) return 0; /* we always send one */
  uint32_t s = sum16(ip + 12, 8, 0) + 17 + ulen;
  return fold(sum16(udp, ulen, s)) == 0xffff;
}

static int write_input(const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  uint32_t gh[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
  fwrite(gh, sizeof gh, 1, f);
  /* First an ARP reply from the peer 10.0.0.2 to us: the neighbour cache learns it. */
  uint8_t arp[60] = {0};
  memcpy(arp, kOurMac, 6), memcpy(arp + 6, kPeerMac, 6);
  arp[12] = 0x08, arp[13] = 0x06;
  uint8_t *a = arp + 14;
  a[1] = 1, a[2] = 0x08, a[4] = 6, a[5] = 4, a[7] = 2;
  memcpy(a + 8, kPeerMac, 6), a[14] = 10, a[17] = 2;
  memcpy(a + 18, kOurMac, 6), a[24] = 10, a[27] = 1;
  uint32_t rh[4] = {1, 0, 60, 60};
  fwrite(rh, sizeof rh, 1, f);
  fwrite(arp, sizeof arp, 1, f);
  static const uint8_t group[4] = {239, 1, 1, 1};
  static const uint8_t group_mac[6] = {0x01, 0x00, 0x5e, 0x01, 0x01, 0x01};
  for (unsigned i = 0; i < kInput; ++i) {
    uint8_t b[64];
    uint32_t n = udp_frame(b, group_mac, group, 5000, (uint8_t)i, 18);
    uint32_t r[4] = {1, i + 1, n, n};
    fwrite(r, sizeof r, 1, f);
    fwrite(b, n, 1, f);
  }
  return fclose(f);
}

struct record {
  uint32_t len;
  uint8_t data[256];
};

static int read_output(const char *path, struct record *out, int max) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  uint32_t gh[6];
  int n = 0;
  if (fread(gh, sizeof gh, 1, f) != 1) n = -1;
  uint32_t rh[4];
  while (n >= 0 && n < max && fread(rh, sizeof rh, 1, f) == 1) {
    out[n].len = rh[2];
    if (rh[2] > sizeof out[n].data || fread(out[n].data, rh[2], 1, f) != 1) {
      n = -1;
      break;
    }
    ++n;
  }
  fclose(f);
  return n;
}

static struct rawpipe_stats stats(const rawpipe_api_t *api, rawpipe_pipeline *h) {
  struct rawpipe_stats s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  CHECK(api->get_stats(h, &s) == 0);
  return s;
}

/* Waits up to 5 s for stats.sent to reach `want`. */
static uint64_t wait_sent(const rawpipe_api_t *api, rawpipe_pipeline *h, uint64_t want) {
  double end = c_test_now() + 5;
  uint64_t sent = 0;
  while ((sent = stats(api, h).sent) < want && c_test_now() < end) c_test_sleep_ms(1);
  return sent;
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  const rawpipe_api_t *api = c_test_api();
  if (!api) return 1;
  CHECK(api->caps & RAWPIPE_CAP_SEND);
  CHECK(RAWPIPE_API_HAS(api, sendto));
  char dir[] = "/tmp/rawpipe-send-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char in[256], outp[256], cfg[256];
  snprintf(in, sizeof in, "%s/in.pcap", dir);
  snprintf(outp, sizeof outp, "%s/out.pcap", dir);
  snprintf(cfg, sizeof cfg, "%s/send.toml", dir);
  CHECK(write_input(in) == 0);
  FILE *c = fopen(cfg, "w");
  if (!c) return 1;
  fprintf(c,
          "[[pools]]\nname = \"rx\"\ncount = 512\nhuge_pages = \"never\"\n"
          "[[ports]]\nname = \"p0\"\npmd = \"pcap\"\npool = \"rx\"\nrx_file = \"%s\"\ntx_file = \"%s\"\n"
          "timing = \"rate\"\nrate_pps = 2000\naddresses = [\"10.0.0.1\"]\nmac = \"02:00:00:00:00:01\"\n"
          "[[endpoints]]\nname = \"md\"\naction = \"ring\"\nmatch = [\"udp dst 239.1.1.1:5000\"]\n"
          "[[lcores]]\nrx = [\"p0:0\"]\nidle_sleep_us = 100\n[metrics]\nstats_segment = false\n",
          in, outp);
  fclose(c);
  rawpipe_pipeline *h = c_test_create(api, cfg);
  if (!h) return 1;
  const int port = api->port_id(h, "p0");
  CHECK(port == 0);
  CHECK(api->port_id(h, "nope") == -1);
  CHECK_ERROR(api->last_error(h), "nope");

  /* Not running yet: refused, and the caller still owns the buffers. */
  struct rawpipe_tx_buf bufs[kBurst];
  CHECK(api->alloc_tx(h, 0, bufs, 1) == 1);
  CHECK(bufs[0].room >= 1500 && bufs[0].len == 0);
  bufs[0].len = udp_frame(bufs[0].data, kPeerMac, (const uint8_t[]){10, 0, 0, 2}, 7000, 0xee, 20);
  errno = 0;
  CHECK(api->send_burst(h, 0, bufs, 1, 0) == -1 && errno == ENETDOWN);
  CHECK_ERROR(api->last_error(h), "not running");
  CHECK(api->free_buff(bufs[0].handle) == 0);

  CHECK(api->start(h) == 0);
  /* The ARP reply arrives first: wait until the cache has it. */
  double end = c_test_now() + 5;
  while (stats(api, h).neigh_learned < 1 && c_test_now() < end) c_test_sleep_ms(1);
  CHECK(stats(api, h).neigh_learned >= 1);

  /* 1. A zero-copy burst: allocate, fill, send with checksums computed by the library. */
  static const uint8_t peer_ip[4] = {10, 0, 0, 2};
  CHECK(api->alloc_tx(h, 0, bufs, kBurst) == kBurst);
  uint8_t expect[kBurst][128];
  uint32_t expect_len[kBurst];
  for (int i = 0; i < kBurst; ++i) {
    bufs[i].len = udp_frame(bufs[i].data, kPeerMac, peer_ip, 7000, (uint8_t)i, 40 + i);
    memcpy(expect[i], bufs[i].data, bufs[i].len);
    expect_len[i] = bufs[i].len;
  }
  CHECK(api->send_burst(h, 0, bufs, kBurst, RAWPIPE_SEND_CSUM) == kBurst);
  CHECK(wait_sent(api, h, kBurst) == kBurst);

  /* 2. Received packets sent back out (reflect): ownership passes, no free afterwards. */
  struct rawpipe_packet pkts[kReflect];
  CHECK(c_test_recv(api, h, 0, pkts, kReflect, kReflect) == kReflect);
  struct rawpipe_tx_buf back[kReflect];
  for (int i = 0; i < kReflect; ++i) {
    back[i].handle = pkts[i].handle;
    back[i].data = pkts[i].frame.iov_base;
    back[i].len = (uint32_t)pkts[i].frame.iov_len;
    back[i].room = 0;
  }
  CHECK(api->send_burst(h, 0, back, kReflect, 0) == kReflect);
  CHECK(wait_sent(api, h, kBurst + kReflect) == kBurst + kReflect);

  /* recv_wait over every ring endpoint at once (RAWPIPE_ANY_ENDPOINT). */
  int any = api->recv_wait(h, RAWPIPE_ANY_ENDPOINT, pkts, 4, 2000);
  CHECK(any >= 1 && any <= 4);
  for (int i = 0; i < any; ++i) CHECK(pkts[i].endpoint == 0);
  if (any > 0) CHECK(api->free_packets(h, pkts, (unsigned)any) == 0);

  /* 3. sendto: to the peer (resolved from its ARP reply), to a group, to an unknown host. */
  struct rawpipe_addr dst = {.family = 4, .port = 7001, .addr = {10, 0, 0, 2}};
  const char msg[] = "hello from rawpipe";
  CHECK(api->sendto(h, 0, msg, sizeof msg, &dst, NULL, 0) == (long)sizeof msg);
  struct rawpipe_addr grp = {.family = 4, .port = 7002, .addr = {239, 5, 6, 7}};
  struct rawpipe_addr src = {.family = 0, .port = 4444};
  CHECK(api->sendto(h, 0, msg, 5, &grp, &src, 0) == 5);
  struct rawpipe_addr unknown = {.family = 4, .port = 7003, .addr = {10, 0, 0, 3}};
  errno = 0;
  CHECK(api->sendto(h, 0, msg, 5, &unknown, NULL, 0) == -1 && errno == EAGAIN);
  CHECK_ERROR(api->last_error(h), "not resolved");
  errno = 0;
  CHECK(api->sendto(h, 0, msg, 5, &unknown, NULL, 0) == -1 && errno == EAGAIN); /* no second request yet */
  struct rawpipe_addr v6 = {.family = 6, .port = 7003, .addr = {0xfd, 0, [15] = 2}};
  errno = 0;
  CHECK(api->sendto(h, 0, msg, 5, &v6, NULL, 0) == -1 && errno == EADDRNOTAVAIL); /* no IPv6 address */
  char big[4000] = {0};
  errno = 0;
  CHECK(api->sendto(h, 0, big, sizeof big, &dst, NULL, 0) == -1 && errno == EMSGSIZE);
  CHECK(wait_sent(api, h, kBurst + kReflect + 3) == kBurst + kReflect + 3); /* 2 datagrams + 1 ARP request */

  /* 4. A dummy send: pcap cannot post a no-op, so it is counted and nothing is written. */
  CHECK(api->alloc_tx(h, 0, bufs, 4) == 4);
  for (int i = 0; i < 4; ++i) bufs[i].len = udp_frame(bufs[i].data, kPeerMac, peer_ip, 7000, 0xdd, 8);
  CHECK(api->send_burst(h, 0, bufs, 4, RAWPIPE_SEND_DUMMY) == 4);
  struct rawpipe_stats s = stats(api, h);
  CHECK(s.dummy_sends == 4 && s.dummies_posted == 0);
  CHECK(s.neigh_solicits == 1 && s.unresolved == 2);

  /* 5. Misuse: every one refused with a message, nothing sent, nothing crashes. */
  CHECK(api->alloc_tx(h, 0, bufs, 2) == 2);
  bufs[0].len = bufs[1].len = udp_frame(bufs[0].data, kPeerMac, peer_ip, 7000, 1, 8);
  memcpy(bufs[1].data, bufs[0].data, bufs[0].len);
  errno = 0;
  CHECK(api->send_burst(NULL, 0, bufs, 1, 0) == -1 && errno == EBADF);
  CHECK(api->send_burst(h, 7, bufs, 1, 0) == -1 && errno == EINVAL);
  CHECK_ERROR(api->last_error(h), "port id 7");
  CHECK(api->send_burst(h, 0, NULL, 1, 0) == -1);
  CHECK(api->send_burst(h, 0, bufs, RAWPIPE_SEND_MAX_BURST + 1, 0) == -1);
  CHECK(api->send_burst(h, 0, bufs, 1, 1u << 7) == -1);
  uint8_t foreign[256];
  struct rawpipe_tx_buf bad[2] = {bufs[0], {foreign, foreign, 60, 0}};
  errno = 0;
  CHECK(api->send_burst(h, 0, bad, 2, 0) == -1 && errno == EINVAL);
  CHECK_ERROR(api->last_error(h), "no rawpipe buffer");
  bad[1] = bufs[1];
  bad[1].len = 10;
  CHECK(api->send_burst(h, 0, bad, 2, 0) == -1);
  CHECK_ERROR(api->last_error(h), "at least 14 bytes");
  bad[1] = bufs[1];
  bad[1].len = 1 << 20;
  CHECK(api->send_burst(h, 0, bad, 2, 0) == -1);
  bad[1] = bufs[0]; /* the same buffer twice, one holder */
  CHECK(api->send_burst(h, 0, bad, 2, 0) == -1);
  CHECK_ERROR(api->last_error(h), "listed 2 times");
  CHECK(api->alloc_tx(NULL, 0, bufs, 1) == -1);
  CHECK(api->alloc_tx(h, 9, bufs, 1) == -1);
  CHECK(api->alloc_tx(h, 0, NULL, 1) == -1);
  struct rawpipe_tx_buf many[600];
  errno = 0;
  CHECK(api->alloc_tx(h, 0, many, 600) == -1 && errno == ENOBUFS); /* the pool has 512 */
  CHECK(api->sendto(h, 0, msg, 5, NULL, NULL, 0) == -1 && errno == EINVAL);
  struct rawpipe_addr badfam = {.family = 5};
  CHECK(api->sendto(h, 0, msg, 5, &badfam, NULL, 0) == -1);
  CHECK(api->sendto(h, 0, NULL, 5, &dst, NULL, 0) == -1);
  CHECK(wait_sent(api, h, 0) == kBurst + kReflect + 3); /* none of that went out */
  /* The refused buffers are still the caller's: with a second holder, one buffer twice is fine. */
  CHECK(api->ref_buff(bufs[0].handle) == 0);
  bad[1] = bufs[0];
  CHECK(api->send_burst(h, 0, bad, 2, RAWPIPE_SEND_CSUM) == 2);
  CHECK(api->free_buff(bufs[1].handle) == 0);
  CHECK(wait_sent(api, h, kBurst + kReflect + 5) == kBurst + kReflect + 5);

  CHECK(api->stop(h) == 0);
  errno = 0;
  CHECK(api->sendto(h, 0, msg, 5, &dst, NULL, 0) == -1 && errno == ENETDOWN);
  s = stats(api, h);
  CHECK(s.send_failed == 0);
  struct rawpipe_pool_stats pool;
  s.pools = &pool, s.pools_max = 1;
  CHECK(api->get_stats(h, &s) == 0 && pool.outstanding == 0);
  CHECK(api->destroy(h) == 0);

  /* What the port transmitted, in order. */
  static struct record rec[64];
  int n = read_output(outp, rec, 64);
  CHECK(n == kBurst + kReflect + 5);
  if (n == kBurst + kReflect + 5) {
    for (int i = 0; i < kBurst; ++i) {
      CHECK(rec[i].len == expect_len[i]);
      CHECK(checksums_ok(rec[i].data, rec[i].len));
      /* the same bytes as written, but for the two checksums */
      CHECK(memcmp(rec[i].data, expect[i], 24) == 0 && memcmp(rec[i].data + 26, expect[i] + 26, 14) == 0);
      CHECK(memcmp(rec[i].data + 42, expect[i] + 42, rec[i].len - 42) == 0);
    }
    for (int i = 0; i < kReflect; ++i) {
      const uint8_t *f = rec[kBurst + i].data;
      CHECK(rec[kBurst + i].len == 60 && f[0] == 0x01 && f[42] == (uint8_t)i); /* input frames, in order */
    }
    const struct record *d = &rec[kBurst + kReflect];
    CHECK(memcmp(d->data, kPeerMac, 6) == 0 && memcmp(d->data + 6, kOurMac, 6) == 0);
    CHECK(checksums_ok(d->data, d->len));
    CHECK(d->data[26] == 10 && d->data[29] == 1 && d->data[33] == 2);                   /* 10.0.0.1 -> .2 */
    CHECK(d->data[34] == (7001 >> 8) && d->data[35] == (7001 & 0xff));                  /* src port = dst port */
    CHECK(memcmp(d->data + 42, msg, sizeof msg) == 0);
    const struct record *g = d + 1;
    CHECK(g->data[0] == 0x01 && g->data[1] == 0x00 && g->data[2] == 0x5e && g->data[3] == 5 && g->data[5] == 7);
    CHECK(checksums_ok(g->data, g->len) && g->data[34] == (4444 >> 8) && g->data[35] == (4444 & 0xff));
    const struct record *arp = g + 1;
    CHECK(arp->data[12] == 0x08 && arp->data[13] == 0x06 && arp->data[21] == 1); /* ARP request */
    CHECK(memcmp(arp->data, "\xff\xff\xff\xff\xff\xff", 6) == 0);
    CHECK(arp->data[38] == 10 && arp->data[41] == 3);                            /* who has 10.0.0.3 */
    CHECK(checksums_ok(rec[n - 2].data, rec[n - 2].len) && checksums_ok(rec[n - 1].data, rec[n - 1].len));
  }
  if (c_test_failures == 0) { /* a failure leaves them for a look */
    unlink(in);
    unlink(outp);
    unlink(cfg);
    rmdir(dir);
  }
  return c_test_finish("send");
}
