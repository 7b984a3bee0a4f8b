/* Statistics through the API and the stats segment of a pipeline made by create():
 *  - get_stats: rx, drops by reason (named by drop_reason_name), per endpoint delivered /
 *    queued / ring_full, per filter verdicts, buffers outstanding per pool, versioned by size;
 *  - the pipeline publishes /dev/shm/rawpipe.<pid> with the name link rawpipe stat uses, unless
 *    [metrics] stats_segment = false.
 * Usage: stats CONFIG (its pool/port/endpoint layout is reused under a name unique to this run). */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "c_test.h"

static int drop_every_fourth(const struct rawpipe_packet *pkt, void *ctx) {
  (void)pkt;
  unsigned *n = ctx;
  return (*n)++ % 4 == 0 ? RAWPIPE_DROP : RAWPIPE_RECV;
}

/* Writes CONFIG's text with the [metrics] table replaced, to dir/name.toml. */
static int write_config(const char *from, const char *to, int segment) {
  FILE *in = fopen(from, "r"), *out = fopen(to, "w");
  if (!in || !out) return -1;
  char line[512];
  while (fgets(line, sizeof line, in)) {
    if (strncmp(line, "[metrics]", 9) == 0) break;
    fputs(line, out);
  }
  fprintf(out, "[metrics]\nstats_segment = %s\n", segment ? "true" : "false");
  fclose(in);
  return fclose(out);
}

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: stats CONFIG\n");
    return 2;
  }
  const rawpipe_api_t *api = c_test_api();
  if (!api) return 1;
  char dir[] = "/tmp/rawpipe-stats-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char cfg[256], seg[128], link[256];
  snprintf(cfg, sizeof cfg, "%s/c-stats-%d.toml", dir, (int)getpid());
  snprintf(seg, sizeof seg, "/dev/shm/rawpipe.%d", (int)getpid());
  snprintf(link, sizeof link, "/dev/shm/rawpipe-name.c-stats-%d", (int)getpid());
  CHECK(write_config(argv[1], cfg, 1) == 0);

  rawpipe_pipeline *h = c_test_create(api, cfg);
  if (!h) return 1;
  CHECK(exists(seg));
  CHECK(exists(link));
  unsigned calls = 0;
  CHECK(api->endpoint_filter(h, 0, drop_every_fourth, NULL, &calls) == 0);
  CHECK(api->start(h) == 0);
  /* Nobody consumes 'md' (ring of 1024): it fills, then overflows. */
  struct rawpipe_stats s;
  struct rawpipe_endpoint_stats eps[8];
  struct rawpipe_filter_stats fs[4];
  struct rawpipe_pool_stats ps[2];
  double end = c_test_now() + 10;
  for (;;) {
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.endpoints = eps, s.endpoints_max = 8;
    s.filters = fs, s.filters_max = 4;
    s.pools = ps, s.pools_max = 2;
    CHECK(api->get_stats(h, &s) == 0);
    if ((s.n_endpoints && eps[0].ring_full > 100) || c_test_now() > end) break;
    c_test_sleep_ms(5);
  }
  CHECK(s.rx_packets > 0 && s.rx_bytes > s.rx_packets);
  CHECK(s.n_endpoints == 3);
  CHECK(strcmp(eps[0].name, "md") == 0 && eps[0].action == 0 && eps[0].offloaded == 1);
  CHECK(eps[0].queued >= 1000 && eps[0].queued <= 1024);
  CHECK(eps[0].ring_full > 100);
  CHECK(eps[0].delivered >= 1024);
  CHECK(strcmp(eps[2].name, "sk") == 0 && eps[2].action == 1 && eps[2].queued == 0 && eps[2].delivered > 0);
  int filter_drop = -1, ring_full = -1;
  CHECK(s.n_drop_reasons > 0 && s.n_drop_reasons <= RAWPIPE_STATS_MAX_DROP_REASONS);
  uint64_t sum = 0;
  for (unsigned i = 0; i < s.n_drop_reasons; ++i) {
    const char *name = api->drop_reason_name(i);
    CHECK(name != NULL);
    if (name && strcmp(name, "filter_drop") == 0) filter_drop = (int)i;
    if (name && strcmp(name, "endpoint_ring_full") == 0) ring_full = (int)i;
    sum += s.drops[i];
  }
  CHECK(api->drop_reason_name(s.n_drop_reasons) == NULL);
  CHECK(sum == s.dropped);
  CHECK(filter_drop >= 0 && s.drops[filter_drop] > 0);
  CHECK(ring_full >= 0 && s.drops[ring_full] >= eps[0].ring_full);
  CHECK(s.n_filters == 1 && fs[0].attached && !fs[0].on_queue && fs[0].endpoint == 0);
  CHECK(fs[0].name[0] != '\0'); /* a static function has no dynamic symbol: its address */
  CHECK(fs[0].seen > 0 && fs[0].drop > 0 && fs[0].recv > fs[0].drop && fs[0].seen == fs[0].recv + fs[0].drop);
  CHECK(s.n_pools == 1 && strcmp(ps[0].name, "rx") == 0 && ps[0].count == 4096);
  CHECK(ps[0].outstanding >= 1024);

  /* An older caller's smaller struct: only the fields it has are written. */
  unsigned char small[sizeof(struct rawpipe_stats) + 16];
  memset(small, 0xab, sizeof small);
  struct rawpipe_stats *old = (struct rawpipe_stats *)(void *)small;
  old->size = (uint32_t)offsetof(struct rawpipe_stats, endpoints);
  CHECK(api->get_stats(h, old) == 0);
  CHECK(old->rx_packets > 0);
  CHECK(small[offsetof(struct rawpipe_stats, endpoints)] == 0xab);
  old->size = 8;
  CHECK(api->get_stats(h, old) == -1);
  CHECK(api->get_stats(h, NULL) == -1);

  CHECK(api->destroy(h) == 0);
  CHECK(!exists(seg));
  CHECK(!exists(link));

  /* Opted out: no segment. */
  CHECK(write_config(argv[1], cfg, 0) == 0);
  h = api->create(cfg);
  CHECK(h != NULL);
  CHECK(!exists(seg));
  if (h) CHECK(api->destroy(h) == 0);
  unlink(cfg);
  rmdir(dir);
  return c_test_finish("stats");
}
