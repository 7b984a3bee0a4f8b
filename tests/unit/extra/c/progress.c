/* An lcore without a thread (`thread = false`), driven through the C table the way an
 * application's receive loop drives VMA's ring: nothing is received until the application calls
 * progress (or recv_wait, which runs the passes itself), every packet is then accounted for, and a
 * driver without queue descriptors (pcap) is named by progress_fds so the caller knows to wait on
 * a timer. Traffic is a pcap replayed at 200 packets/s.
 * Usage: progress CONFIG (unused; the pipeline is built from a config written here). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "c_test.h"

enum { kFrames = 40 };

static int write_pcap(const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  uint32_t gh[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
  fwrite(gh, sizeof gh, 1, f);
  for (unsigned i = 0; i < kFrames; ++i) {
    uint8_t b[60] = {0x01, 0x00, 0x5e, 0x01, 0x01, 0x01, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00};
    uint8_t *ip = b + 14, *udp = b + 34;
    ip[0] = 0x45, ip[3] = 28 + 10, ip[8] = 64, ip[9] = 17;
    ip[12] = 10, ip[15] = 1, ip[16] = 239, ip[17] = 1, ip[18] = 1, ip[19] = 1;
    udp[0] = 0x0f, udp[1] = 0xa0, udp[2] = 0x13, udp[3] = 0x88, udp[5] = 18;
    uint32_t rh[4] = {1, i, 60, 60};
    fwrite(rh, sizeof rh, 1, f);
    fwrite(b, sizeof b, 1, f);
  }
  return fclose(f);
}

static uint64_t rx_packets(const rawpipe_api_t *api, rawpipe_pipeline *h) {
  struct rawpipe_stats s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  CHECK(api->get_stats(h, &s) == 0);
  return s.rx_packets;
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  const rawpipe_api_t *api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  if (!api) {
    fprintf(stderr, "%s\n", rawpipe_api_error());
    return 1;
  }
  CHECK(api->caps & RAWPIPE_CAP_PROGRESS);
  CHECK(RAWPIPE_API_HAS(api, progress_fds));
  char dir[] = "/tmp/rawpipe-progress-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char pcap[256], cfg[256];
  snprintf(pcap, sizeof pcap, "%s/in.pcap", dir);
  snprintf(cfg, sizeof cfg, "%s/progress.toml", dir);
  CHECK(write_pcap(pcap) == 0);
  FILE *c = fopen(cfg, "w");
  if (!c) return 1;
  fprintf(c,
          "[[pools]]\nname = \"rx\"\ncount = 256\nhuge_pages = \"never\"\n"
          "[[ports]]\nname = \"p0\"\npmd = \"pcap\"\npool = \"rx\"\nrx_file = \"%s\"\ntiming = \"rate\"\nrate_pps = 200\n"
          "[[endpoints]]\nname = \"md\"\naction = \"ring\"\nmatch = [\"udp dst 239.1.1.1:5000\"]\n"
          "[[lcores]]\nrx = [\"p0:0\"]\nthread = false\n[metrics]\nstats_segment = false\n",
          pcap);
  fclose(c);
  rawpipe_pipeline *h = api->create(cfg);
  if (!h) {
    fprintf(stderr, "create: %s\n", api->last_error(NULL));
    return 1;
  }
  CHECK(api->progress(NULL) == -1);
  CHECK(api->progress(h) == 0); /* not started: no pass runs */
  int fds[4];
  CHECK(api->progress_fds(h, NULL, 4) == -1);
  CHECK(api->start(h) == 0);
  /* pcap offers no descriptor to sleep on: said by name, so the caller naps instead. */
  CHECK(api->progress_fds(h, fds, 4) == -1);
  CHECK_ERROR(api->last_error(h), "driver pcap");

  /* No thread polls the port: after 100 ms (20 packets' worth) nothing was received. */
  c_test_sleep_ms(100);
  CHECK(rx_packets(api, h) == 0);

  /* The application's own passes receive; progress returns what each pass took. */
  struct rawpipe_packet pkts[8];
  int got = 0, passed = 0;
  double end = c_test_now() + 10;
  while (got < kFrames / 2 && c_test_now() < end) {
    const int p = api->progress(h);
    CHECK(p >= 0);
    passed += p;
    const int n = api->recvfrom_zcopy(h, 0, pkts, 8);
    if (n > 0) {
      got += n;
      CHECK(api->free_packets(h, pkts, (unsigned)n) == 0);
    }
  }
  CHECK(got >= kFrames / 2);
  CHECK(passed >= got);
  /* recv_wait runs the passes itself (waking every millisecond: no descriptor). */
  end = c_test_now() + 10;
  while (got < kFrames && c_test_now() < end) {
    const int n = api->recv_wait(h, 0, pkts, 8, 2000);
    CHECK(n > 0);
    if (n <= 0) break;
    got += n;
    CHECK(api->free_packets(h, pkts, (unsigned)n) == 0);
  }
  CHECK(got == kFrames);
  CHECK(rx_packets(api, h) == kFrames);
  /* Nothing more comes: a bounded wait times out. */
  CHECK(api->recv_wait(h, 0, pkts, 8, 30) == 0);
  CHECK(api->stop(h) == 0);
  CHECK(api->progress(h) == 0); /* stopped */
  CHECK(api->destroy(h) == 0);
  unlink(cfg);
  unlink(pcap);
  rmdir(dir);
  return c_test_failures ? 1 : 0;
}
