/* Statistics through the API and the stats segment of a pipeline made by create():
 *  - get_stats: rx, drops by reason (named by drop_reason_name), per endpoint delivered /
 *    queued / ring_full, per filter verdicts, buffers outstanding per pool, versioned by size;
 *  - the pipeline publishes /dev/shm/rawpipe.<pid> with the name link rawpipe stat uses, unless
 *    [metrics] stats_segment = false;
 *  - stats_section: the application's own JSON under "sections" in that segment (a buffer grown
 *    to what the callback asks for, a negative return leaving it out, text that is not JSON
 *    flagged), names checked, at most 16, none without a segment, no call after destroy.
 * Usage: stats CONFIG (its pool/port/endpoint layout is reused under a name unique to this run). */
#include <errno.h>
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

static unsigned g_app_calls;
static long app_section(void *ctx, char *buf, size_t cap) {
  (void)ctx;
  return snprintf(buf, cap, "{\"calls\":%u}", ++g_app_calls);
}
/* Asks for more than the first buffer holds. */
static long big_section(void *ctx, char *buf, size_t cap) {
  (void)ctx;
  const size_t want = 9000;
  if (cap < want) return (long)want;
  memset(buf, 'a', want);
  memcpy(buf, "{\"big\":\"", 8);
  memcpy(buf + want - 2, "\"}", 2);
  return (long)want;
}
static long absent_section(void *ctx, char *buf, size_t cap) {
  (void)ctx, (void)buf, (void)cap;
  return -1;
}
static long not_json_section(void *ctx, char *buf, size_t cap) {
  (void)ctx;
  return snprintf(buf, cap, "not json");
}

/* Whether within 5 s the segment's document holds `text` and not `absent` (NULL: anything); it
 * is published once per interval. The document follows the 112-byte header; its length is the
 * header's word at offset 96. */
static int segment_shows(const char *seg, const char *text, const char *absent) {
  double end = c_test_now() + 5;
  static char doc[1 << 20];
  do {
    FILE *f = fopen(seg, "r");
    uint64_t len = 0;
    if (f && fseek(f, 96, SEEK_SET) == 0 && fread(&len, sizeof len, 1, f) == 1 && len < sizeof doc &&
        fseek(f, 112, SEEK_SET) == 0 && fread(doc, 1, len, f) == len) {
      doc[len] = '\0';
      if (strstr(doc, text) && !(absent && strstr(doc, absent))) {
        fclose(f);
        return 1;
      }
    }
    if (f) fclose(f);
    c_test_sleep_ms(20);
  } while (c_test_now() < end);
  return 0;
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

  /* The application's sections. */
  CHECK(RAWPIPE_API_HAS(api, stats_section) && (api->caps & RAWPIPE_CAP_STATS_SECTION));
  CHECK(api->stats_section(h, "app", app_section, NULL) == 0);
  CHECK(api->stats_section(h, "big", big_section, NULL) == 0);
  CHECK(api->stats_section(h, "absent", absent_section, NULL) == 0);
  CHECK(api->stats_section(h, "not_json", not_json_section, NULL) == 0);
  CHECK(segment_shows(seg, "\"app\":{\"calls\":", "\"absent\""));
  CHECK(segment_shows(seg, "\"big\":{\"big\":\"aaaa", NULL));
  CHECK(segment_shows(seg, "\"not_json\":{\"error\":", NULL));
  CHECK(api->stats_section(h, "big", NULL, NULL) == 0);
  CHECK(segment_shows(seg, "\"sections\":{\"app\":{\"calls\":", "\"big\":{"));
  const char *bad[] = {"", "has space", "quote\"", "0123456789012345678901234567890123456789012345678901234567890123"};
  for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    errno = 0;
    CHECK(api->stats_section(h, bad[i], app_section, NULL) == -1 && errno == EINVAL);
  }
  CHECK(api->stats_section(h, NULL, app_section, NULL) == -1);
  CHECK(api->stats_section(NULL, "app", app_section, NULL) == -1);
  /* 3 in use: 13 more fit, the 17th does not; replacing one still works. */
  char name[16];
  for (int i = 0; i < 13; ++i) {
    snprintf(name, sizeof name, "extra%d", i);
    CHECK(api->stats_section(h, name, absent_section, NULL) == 0);
  }
  errno = 0;
  CHECK(api->stats_section(h, "one_too_many", absent_section, NULL) == -1 && errno == ENOSPC);
  CHECK(api->stats_section(h, "extra0", absent_section, NULL) == 0);

  CHECK(api->destroy(h) == 0);
  CHECK(!exists(seg));
  CHECK(!exists(link));
  const unsigned calls_at_destroy = g_app_calls;
  c_test_sleep_ms(300);
  CHECK(g_app_calls == calls_at_destroy);

  /* Opted out: no segment. */
  CHECK(write_config(argv[1], cfg, 0) == 0);
  h = api->create(cfg);
  CHECK(h != NULL);
  CHECK(!exists(seg));
  errno = 0;
  CHECK(api->stats_section(h, "app", app_section, NULL) == -1 && errno == ENOENT);
  if (h) CHECK(api->destroy(h) == 0);
  unlink(cfg);
  rmdir(dir);
  return c_test_finish("stats");
}
