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

static uint64_t rx_packets(const rawpipe_api_t *api, rawpipe_pipeline *h) {
  struct rawpipe_stats s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  CHECK(api->get_stats(h, &s) == 0);
  return s.rx_packets;
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  const rawpipe_api_t *api = c_test_api();
  if (!api) return 1;
  CHECK(api->caps & RAWPIPE_CAP_PROGRESS);
  CHECK(RAWPIPE_API_HAS(api, progress_fds));
  char dir[] = "/tmp/rawpipe-progress-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char pcap[256], cfg[256];
  snprintf(pcap, sizeof pcap, "%s/in.pcap", dir);
  snprintf(cfg, sizeof cfg, "%s/progress.toml", dir);
  CHECK(c_test_write_group_pcap(pcap, kFrames) == 0);
  FILE *c = fopen(cfg, "w");
  if (!c) return 1;
  fprintf(c,
          "[[pools]]\nname = \"rx\"\ncount = 256\nhuge_pages = \"never\"\n"
          "[[ports]]\nname = \"p0\"\npmd = \"pcap\"\npool = \"rx\"\nrx_file = \"%s\"\ntiming = \"rate\"\nrate_pps = 200\n"
          "[[endpoints]]\nname = \"md\"\naction = \"ring\"\nmatch = [\"udp dst 239.1.1.1:5000\"]\n"
          "[[lcores]]\nrx = [\"p0:0\"]\nthread = false\n[metrics]\nstats_segment = false\n",
          pcap);
  fclose(c);
  rawpipe_pipeline *h = c_test_create(api, cfg);
  if (!h) return 1;
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
