/* The smaller findings of the Extra API's second round, as a C application meets them:
 *  - create() on a directory says so;
 *  - recv() returns 0 for an empty datagram and -1 with EAGAIN when nothing is waiting;
 *  - receive calls on a sink endpoint are errors (EOPNOTSUPP), not "nothing waiting";
 *  - load_filter_plugin takes a bare plugin name and refuses a second plugin on one endpoint;
 *  - dump_fd_stats(RAWPIPE_ANY_ENDPOINT) prints every endpoint.
 * The traffic is a pcap written here: UDP datagrams of 0 and 5 payload bytes to the ring
 * endpoint, one to the sink. Usage: smaller CONFIG (the directory of CONFIG is used for the
 * create-on-a-directory case; the pipeline is built from a config written here). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "c_test.h"

static void put16be(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v; }

/* An Ethernet/IPv4/UDP frame to dst_ip:5000 with `payload` bytes, padded to 60. */
static size_t udp_frame(uint8_t *f, uint8_t dst_last, size_t payload) {
  memset(f, 0, 64);
  static const uint8_t mac[12] = {0x01, 0x00, 0x5e, 0x01, 0x01, 0x01, 0x02, 0, 0, 0, 0, 1};
  memcpy(f, mac, 12);
  f[11] = 1;
  put16be(f + 12, 0x0800);
  uint8_t *ip = f + 14;
  ip[0] = 0x45;
  put16be(ip + 2, (uint16_t)(20 + 8 + payload));
  ip[8] = 64;
  ip[9] = 17;
  ip[12] = 10, ip[13] = 0, ip[14] = 0, ip[15] = 1;
  ip[16] = 239, ip[17] = 1, ip[18] = 1, ip[19] = dst_last;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  put16be(ip + 10, (uint16_t)~sum);
  uint8_t *udp = ip + 20;
  put16be(udp, 4000);
  put16be(udp + 2, 5000);
  put16be(udp + 4, (uint16_t)(8 + payload));
  for (size_t i = 0; i < payload; ++i) udp[8 + i] = (uint8_t)('a' + i);
  size_t len = 14 + 20 + 8 + payload;
  return len < 60 ? 60 : len;
}

static int write_pcap(const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  uint32_t gh[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
  fwrite(gh, sizeof gh, 1, f);
  const struct { uint8_t dst; size_t payload; } frames[] = {{1, 0}, {1, 5}, {2, 9}};
  for (unsigned i = 0; i < 3; ++i) {
    uint8_t buf[64];
    size_t n = udp_frame(buf, frames[i].dst, frames[i].payload);
    uint32_t rh[4] = {1, i, (uint32_t)n, (uint32_t)n};
    fwrite(rh, sizeof rh, 1, f);
    fwrite(buf, n, 1, f);
  }
  return fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: smaller CONFIG\n");
    return 2;
  }
  const rawpipe_api_t *api = c_test_api();
  if (!api) return 1;
  /* create() on a directory. */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", argv[1]);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  CHECK(api->create(dir) == NULL);
  CHECK_ERROR(api->last_error(NULL), "is a directory");

  char tmp[] = "/tmp/rawpipe-smaller-XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  char pcap[256], cfg[256];
  snprintf(pcap, sizeof pcap, "%s/in.pcap", tmp);
  snprintf(cfg, sizeof cfg, "%s/c.toml", tmp);
  CHECK(write_pcap(pcap) == 0);
  FILE *c = fopen(cfg, "w");
  CHECK(c != NULL);
  if (!c) return 1;
  fprintf(c,
          "[[pools]]\nname = \"rx\"\ncount = 256\nhuge_pages = \"never\"\n"
          "[[ports]]\nname = \"p0\"\npmd = \"pcap\"\npool = \"rx\"\nrx_file = \"%s\"\n"
          "[[endpoints]]\nname = \"md\"\naction = \"ring\"\nmatch = [\"udp dst 239.1.1.1:5000\"]\n"
          "[[endpoints]]\nname = \"sk\"\naction = \"sink\"\nmatch = [\"udp dst 239.1.1.2:5000\"]\n"
          "[[lcores]]\nrx = [\"p0:0\"]\nidle_sleep_us = 100\n",
          pcap);
  fclose(c);
  rawpipe_pipeline *h = c_test_create(api, cfg);
  if (!h) return 1;
  /* A bare name resolves along the plugin path; a second plugin on the endpoint is refused. */
  const char *keys[] = {"width"}, *values[] = {"4"};
  CHECK(api->load_filter_plugin(h, "rawpipe_seq_gap", "endpoint md", keys, values, 1) == 0);
  CHECK(api->load_filter_plugin(h, "rawpipe_sampler", "endpoint md", NULL, NULL, 0) == -1);
  CHECK_ERROR(api->last_error(h), "already has a filter");
  CHECK(api->load_filter_plugin(h, "no_such_plugin", "endpoint sk", NULL, NULL, 0) == -1);
  CHECK_ERROR(api->last_error(h), "no filter plugin");
  CHECK(api->start(h) == 0);

  /* Empty datagram first, then 5 bytes, then nothing. */
  char buf[64];
  struct rawpipe_addr src;
  long got[2] = {-2, -2};
  int n = 0;
  double end = c_test_now() + 5;
  while (n < 2 && c_test_now() < end) {
    errno = 0;
    long r = api->recv(h, 0, buf, sizeof buf, &src);
    if (r >= 0) got[n++] = r;
    else if (errno == EAGAIN) c_test_sleep_ms(1);
    else break;
  }
  CHECK(got[0] == 0);
  CHECK(got[1] == 5 && memcmp(buf, "abcde", 5) == 0);
  CHECK(src.family == 4 && src.port == 4000);
  errno = 0;
  CHECK(api->recv(h, 0, buf, sizeof buf, NULL) == -1);
  CHECK(errno == EAGAIN);

  /* A sink endpoint has no ring to receive from. */
  struct rawpipe_packet pkts[4];
  struct rawpipe_completion comps[4];
  errno = 0;
  CHECK(api->recvfrom_zcopy(h, 1, pkts, 4) == -1);
  CHECK(errno == EOPNOTSUPP);
  CHECK_ERROR(api->last_error(h), "sink");
  CHECK(api->recv(h, 1, buf, sizeof buf, NULL) == -1);
  CHECK(api->poll(h, 1, comps, 4) == -1);
  CHECK(api->poll(h, RAWPIPE_ANY_ENDPOINT, comps, 4) == 0);

  /* Every endpoint from RAWPIPE_ANY_ENDPOINT, one from its id: stderr goes to a file meanwhile. */
  char out[256];
  snprintf(out, sizeof out, "%s/stats.txt", tmp);
  fflush(stderr);
  int saved = dup(2);
  FILE *o = fopen(out, "w");
  dup2(fileno(o), 2);
  CHECK(api->dump_fd_stats(h, RAWPIPE_ANY_ENDPOINT, RAWPIPE_LOG_ERROR) == 0);
  CHECK(api->dump_fd_stats(h, 1, RAWPIPE_LOG_ERROR) == 0);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fclose(o);
  char text[4096] = "";
  o = fopen(out, "r");
  size_t len = o ? fread(text, 1, sizeof text - 1, o) : 0;
  text[len] = '\0';
  if (o) fclose(o);
  CHECK_ERROR(text, "endpoint 0 'md'");
  CHECK_ERROR(text, "endpoint 1 'sk'");
  /* 'sk' twice (all, then by id), 'md' once. */
  CHECK(strstr(strstr(text, "endpoint 1 'sk'") + 1, "endpoint 1 'sk'") != NULL);
  CHECK(strstr(strstr(text, "endpoint 0 'md'") + 1, "endpoint 0 'md'") == NULL);

  CHECK(api->stop(h) == 0);
  CHECK(api->destroy(h) == 0);
  unlink(out), unlink(pcap), unlink(cfg), rmdir(tmp);
  return c_test_finish("smaller");
}
