/* A descriptor to wait on: a consumer that sleeps in epoll_wait until traffic arrives, wakes
 * when it does, and costs the lcore no system call while it busy-polls instead. Traffic is a
 * pcap replayed at 50 packets/s (one every 20 ms), so the consumer really sleeps in between.
 * Usage: wait CONFIG (unused; the pipeline is built from a config written here). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "c_test.h"

enum { kFrames = 30 };

static uint64_t wakeups(const rawpipe_api_t *api, rawpipe_pipeline *h) {
  struct rawpipe_stats s;
  struct rawpipe_endpoint_stats eps[2];
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  s.endpoints = eps, s.endpoints_max = 2;
  CHECK(api->get_stats(h, &s) == 0);
  return eps[0].wakeups;
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  const rawpipe_api_t *api = c_test_api();
  if (!api) return 1;
  CHECK(api->caps & RAWPIPE_CAP_WAIT);
  char dir[] = "/tmp/rawpipe-wait-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char pcap[256], cfg[256];
  snprintf(pcap, sizeof pcap, "%s/in.pcap", dir);
  snprintf(cfg, sizeof cfg, "%s/wait.toml", dir);
  CHECK(c_test_write_group_pcap(pcap, kFrames) == 0);
  FILE *c = fopen(cfg, "w");
  if (!c) return 1;
  fprintf(c,
          "[[pools]]\nname = \"rx\"\ncount = 256\nhuge_pages = \"never\"\n"
          "[[ports]]\nname = \"p0\"\npmd = \"pcap\"\npool = \"rx\"\nrx_file = \"%s\"\ntiming = \"rate\"\nrate_pps = 50\n"
          "[[endpoints]]\nname = \"md\"\naction = \"ring\"\nmatch = [\"udp dst 239.1.1.1:5000\"]\n"
          "[[endpoints]]\nname = \"quiet\"\naction = \"ring\"\nmatch = [\"udp dst 239.9.9.9:5000\"]\n"
          "[[endpoints]]\nname = \"sk\"\naction = \"sink\"\nmatch = [\"udp dst 239.1.1.2:5000\"]\n"
          "[[lcores]]\nrx = [\"p0:0\"]\nidle_sleep_us = 100\n[metrics]\nstats_segment = false\n",
          pcap);
  fclose(c);
  rawpipe_pipeline *h = c_test_create(api, cfg);
  if (!h) return 1;
  /* Misuse first: not a ring endpoint, arming before the descriptor exists. */
  CHECK(api->endpoint_fd(h, 2) == -1);
  CHECK_ERROR(api->last_error(h), "sink");
  CHECK(api->arm_fd(h, 0) == -1);
  CHECK(api->arm_fd(h, RAWPIPE_ANY_ENDPOINT) == -1);
  int fd = api->endpoint_fd(h, 0);
  CHECK(fd >= 0);
  CHECK(api->endpoint_fd(h, 0) == fd);
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
  CHECK(api->start(h) == 0);

  /* Busy-poll the first 5 packets without arming: the lcore never writes the descriptor. */
  struct rawpipe_packet pkts[8];
  int got = 0;
  double end = c_test_now() + 5;
  while (got < 5 && c_test_now() < end) {
    int n = api->recvfrom_zcopy(h, 0, pkts, 8);
    if (n > 0) {
      got += n;
      CHECK(api->free_packets(h, pkts, (unsigned)n) == 0);
    }
  }
  CHECK(got >= 5);
  CHECK(wakeups(api, h) == 0);

  /* Then sleep between packets: arm when empty, epoll_wait, receive. */
  int sleeps = 0, woken = 0;
  end = c_test_now() + 10;
  while (got < kFrames && c_test_now() < end) {
    int n = api->recvfrom_zcopy(h, 0, pkts, 8);
    if (n > 0) {
      got += n;
      CHECK(api->free_packets(h, pkts, (unsigned)n) == 0);
      continue;
    }
    int armed = api->arm_fd(h, 0);
    CHECK(armed == 0 || armed == 1);
    if (armed == 1) continue;
    ++sleeps;
    struct epoll_event out;
    int r = epoll_wait(ep, &out, 1, 2000);
    CHECK(r == 1);
    if (r == 1) ++woken;
  }
  CHECK(got == kFrames);
  /* 50 packets/s: the consumer slept before most of them, and each sleep ended with a wake-up. */
  CHECK(sleeps >= 10);
  CHECK(woken == sleeps);
  CHECK(wakeups(api, h) >= (uint64_t)woken);
  CHECK(wakeups(api, h) <= (uint64_t)sleeps + 1);

  /* Nothing more comes: armed, the descriptor stays quiet. */
  CHECK(api->arm_fd(h, 0) == 0);
  struct epoll_event out;
  CHECK(epoll_wait(ep, &out, 1, 100) == 0);

  /* The blocking receive times out on a quiet endpoint, and the any-endpoint descriptor. */
  double t0 = c_test_now();
  CHECK(api->recv_wait(h, 1, pkts, 8, 50) == 0);
  CHECK(c_test_now() - t0 >= 0.045);
  int any = api->endpoint_fd(h, RAWPIPE_ANY_ENDPOINT);
  CHECK(any >= 0 && any != fd);
  CHECK(api->arm_fd(h, RAWPIPE_ANY_ENDPOINT) == 0);
  struct rawpipe_api_counters before = {.size = sizeof before};
  CHECK(api->recv_wait(h, 2, pkts, 8, 10) == -1); /* a sink: an error, not a timeout */
  (void)before;
  close(ep);
  CHECK(api->stop(h) == 0);
  CHECK(api->destroy(h) == 0);
  unlink(pcap), unlink(cfg), rmdir(dir);
  return c_test_finish("wait");
}
