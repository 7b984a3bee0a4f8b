/* The Extra API's zero-copy send rate, as an application sees it: one thread allocates transmit
 * buffers from the port's pool, writes a frame into each (a 64-byte template: what an application
 * that builds its own headers does) and hands bursts to send_burst; the lcore that owns the port's
 * tx queue moves them to tx_burst. Prints one JSON line; tools/bench/send-vs-testpmd runs it
 * beside dpdk-testpmd --forward-mode=txonly on the same driver.
 * Usage: send_rate CONFIG PORT SECONDS FRAME_BYTES BURST */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rawpipe/extra.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* utime + stime (seconds) of this process's thread called `name`, or -1. */
static double thread_cpu(const char *name) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  double out = -1;
  struct dirent *e;
  while ((e = readdir(d)) && out < 0) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[64] = {0}, stat[1024] = {0};
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
    fclose(f);
    comm[strcspn(comm, "\n")] = 0;
    if (strcmp(comm, name) != 0) continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    f = fopen(path, "r");
    if (!f) continue;
    if (fgets(stat, sizeof stat, f)) {
      const char *p = strrchr(stat, ')');
      unsigned long long ut = 0, st = 0;
      /* fields after ')': state(3) ... utime(14) stime(15) */
      if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
        out = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    }
    fclose(f);
  }
  closedir(d);
  return out;
}

static struct rawpipe_stats stats(const rawpipe_api_t *api, rawpipe_pipeline *h) {
  struct rawpipe_stats s;
  memset(&s, 0, sizeof s);
  s.size = sizeof s;
  api->get_stats(h, &s);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s CONFIG PORT SECONDS FRAME_BYTES BURST\n", argv[0]);
    return 2;
  }
  const double seconds = atof(argv[3]);
  const unsigned frame = (unsigned)atoi(argv[4]), burst = (unsigned)atoi(argv[5]);
  const rawpipe_api_t *api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  if (!api || !(api->caps & RAWPIPE_CAP_SEND)) {
    fprintf(stderr, "no Extra API with RAWPIPE_CAP_SEND: %s\n", rawpipe_api_error());
    return 1;
  }
  rawpipe_pipeline *h = api->create(argv[1]);
  if (!h) {
    fprintf(stderr, "create: %s\n", api->last_error(NULL));
    return 1;
  }
  const int port = api->port_id(h, argv[2]);
  if (port < 0 || api->start(h) != 0 || burst == 0 || burst > RAWPIPE_SEND_MAX_BURST || frame < 60 || frame > 1500) {
    fprintf(stderr, "setup: %s\n", api->last_error(h));
    return 1;
  }
  unsigned char tmpl[1500] = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, 0x45};
  struct rawpipe_tx_buf bufs[RAWPIPE_SEND_MAX_BURST];
  unsigned long long handed = 0, short_sends = 0, no_buffers = 0;
  const double warm_end = now() + 0.3;
  while (now() < warm_end) {
    if (api->alloc_tx(h, (uint16_t)port, bufs, burst) != (int)burst) continue;
    for (unsigned i = 0; i < burst; ++i) memcpy(bufs[i].data, tmpl, 64), bufs[i].len = frame;
    for (unsigned done = 0; done < burst;) {
      const int k = api->send_burst(h, (uint16_t)port, bufs + done, burst - done, 0);
      if (k < 0) return 1;
      done += (unsigned)k;
    }
  }
  const struct rawpipe_stats s0 = stats(api, h);
  const double lcore_cpu0 = thread_cpu("rawpipe-lc0");
  const double t0 = now();
  double t = t0;
  for (unsigned long long iter = 0; t - t0 < seconds; ++iter) {
    if (api->alloc_tx(h, (uint16_t)port, bufs, burst) != (int)burst) {
      ++no_buffers;  /* the lcore still holds them in the ring or the tx queue */
    } else {
      for (unsigned i = 0; i < burst; ++i) {
        memcpy(bufs[i].data, tmpl, 64);
        bufs[i].len = frame;
      }
      /* What send_burst does not take stays ours (the hand-off ring is full: the lcore is the
       * bottleneck); send the rest again, as a DPDK application retries rte_eth_tx_burst. */
      unsigned done = 0;
      while (done < burst) {
        const int k = api->send_burst(h, (uint16_t)port, bufs + done, burst - done, 0);
        if (k < 0) {
          fprintf(stderr, "send_burst: %s\n", api->last_error(h));
          return 1;
        }
        done += (unsigned)k;
        if (done < burst) ++short_sends;
      }
      handed += burst;
    }
    if ((iter & 255) == 0) t = now();
  }
  t = now();
  const struct rawpipe_stats s1 = stats(api, h);
  const double lcore_cpu = thread_cpu("rawpipe-lc0") - lcore_cpu0;
  api->stop(h);
  const struct rawpipe_stats s2 = stats(api, h);
  const double secs = t - t0;
  printf("{\"seconds\": %.3f, \"sent\": %llu, \"mpps\": %.3f, \"handed_mpps\": %.3f, \"send_failed\": %llu, "
         "\"short_sends\": %llu, \"alloc_retries\": %llu, \"frame_bytes\": %u, \"burst\": %u, "
         "\"lcore_cpu_s\": %.2f}\n",
         secs, (unsigned long long)(s1.sent - s0.sent), (double)(s1.sent - s0.sent) / secs / 1e6,
         (double)handed / secs / 1e6, (unsigned long long)(s2.send_failed), short_sends, no_buffers, frame, burst, lcore_cpu);
  api->destroy(h);
  return 0;
}
