/* Every control call made from inside a filter callback either works or returns -1 at once;
 * none hangs (remove_rule used to wait for the calling lcore itself). An alarm turns a hang into
 * a failure. Usage: reentrancy CONFIG */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "c_test.h"

static const rawpipe_api_t *g_api;
static rawpipe_pipeline *g_h;
static atomic_int g_done;
static int g_results[16];
static char g_stop_error[256];

static int pass(const struct rawpipe_packet *pkt, void *ctx) {
  (void)pkt, (void)ctx;
  return RAWPIPE_RECV;
}

static int reenter(const struct rawpipe_packet *pkt, void *ctx) {
  (void)ctx;
  if (atomic_load(&g_done)) return RAWPIPE_RECV;
  const rawpipe_api_t *api = g_api;
  rawpipe_pipeline *h = g_h;
  long id = api->add_conf_rule(h, "quiet: udp dst 239.4.4.4:5000");
  g_results[0] = id > 0;
  g_results[1] = id > 0 && api->remove_rule(h, (uint32_t)id) == 0;
  g_results[2] = api->endpoint_filter(h, 1, pass, NULL, NULL) == 0 && api->endpoint_filter(h, 1, NULL, NULL, NULL) == 0;
  g_results[3] = api->set_endpoint_offload(h, 1, 0) == 0 && api->set_endpoint_offload(h, 1, 1) == 0;
  struct rawpipe_packet got[4];
  g_results[4] = api->recvfrom_zcopy(h, 1, got, 4) == 0;
  g_results[5] = api->dump_fd_stats(h, RAWPIPE_ANY_ENDPOINT, RAWPIPE_LOG_DEBUG) == 0;
  g_results[6] = api->set_user_data(h, 1, 7) == 0;
  g_results[7] = api->ref_buff(pkt->handle) == 0 && api->free_buff(pkt->handle) == 0;
  /* These would wait for the lcores, or stall this one: refused at once. */
  g_results[8] = api->stop(h) == -1;
  snprintf(g_stop_error, sizeof g_stop_error, "%s", api->last_error(h));
  g_results[9] = api->destroy(h) == -1;
  g_results[10] = api->start(h) == -1;
  g_results[11] = api->create("/nonexistent.toml") == NULL;
  g_results[12] = api->load_filter_plugin(h, "rawpipe_seq_gap", "endpoint quiet", NULL, NULL, 0) == -1;
  /* The filter replaces itself: its set stays valid until this lcore's pass ends. */
  g_results[13] = api->endpoint_filter(h, 0, pass, NULL, NULL) == 0;
  atomic_store(&g_done, 1);
  return RAWPIPE_RECV;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: reentrancy CONFIG\n");
    return 2;
  }
  alarm(30); /* a hang fails the test instead of blocking the suite */
  g_api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  if (!g_api) {
    fprintf(stderr, "%s\n", rawpipe_api_error());
    return 1;
  }
  struct rawpipe_api_counters before;
  memset(&before, 0, sizeof before);
  before.size = sizeof before;
  CHECK(g_api->api_counters(&before) == 0);
  g_h = g_api->create(argv[1]);
  if (!g_h) {
    fprintf(stderr, "create: %s\n", g_api->last_error(NULL));
    return 1;
  }
  CHECK(g_api->endpoint_filter(g_h, 0, reenter, NULL, NULL) == 0);
  CHECK(g_api->start(g_h) == 0);
  double end = c_test_now() + 10;
  while (!atomic_load(&g_done) && c_test_now() < end) {
    struct rawpipe_packet pkts[64];
    int n = g_api->recvfrom_zcopy(g_h, 0, pkts, 64);
    if (n > 0) CHECK(g_api->free_packets(g_h, pkts, (unsigned)n) == 0);
    else c_test_sleep_ms(1);
  }
  CHECK(atomic_load(&g_done));
  static const char *names[] = {"add_conf_rule", "remove_rule", "endpoint_filter", "set_endpoint_offload",
                                "recvfrom_zcopy", "dump_fd_stats", "set_user_data", "ref_buff/free_buff",
                                "stop refused", "destroy refused", "start refused", "create refused",
                                "load_filter_plugin refused", "endpoint_filter on itself"};
  for (int i = 0; i < 14; ++i)
    if (!g_results[i]) {
      fprintf(stderr, "from a callback: %s failed\n", names[i]);
      ++c_test_failures;
    }
  CHECK_ERROR(g_stop_error, "filter callback");
  struct rawpipe_api_counters after;
  memset(&after, 0, sizeof after);
  after.size = sizeof after;
  CHECK(g_api->api_counters(&after) == 0);
  CHECK(after.from_callback - before.from_callback == 5);
  /* The pipeline still stops and goes from the control thread. */
  CHECK(g_api->stop(g_h) == 0);
  CHECK(g_api->destroy(g_h) == 0);
  return c_test_finish("reentrancy");
}
