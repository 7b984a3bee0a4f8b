/* Extra API misuse as a ported VMA/XLIO application commits it, against the public header in C:
 * every call gets a clean error and a counter, nothing crashes, nothing is corrupted (run under
 * ASan in the sanitizer build). Usage: misuse CONFIG */
#include <stdint.h>
#include <string.h>

#include "c_test.h"

static struct rawpipe_api_counters counters(const rawpipe_api_t *api) {
  struct rawpipe_api_counters c;
  memset(&c, 0, sizeof c);
  c.size = sizeof c;
  CHECK(api->api_counters(&c) == 0);
  return c;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: misuse CONFIG\n");
    return 2;
  }
  const rawpipe_api_t *api = c_test_api();
  if (!api) return 1;
  struct rawpipe_packet pkts[64];
  struct rawpipe_completion comps[4];
  char buf[64];

  /* A NULL handle everywhere a handle goes. */
  struct rawpipe_api_counters before = counters(api);
  CHECK(api->start(NULL) == -1);
  CHECK_ERROR(api->last_error(NULL), "NULL");
  CHECK(api->stop(NULL) == -1);
  CHECK(api->destroy(NULL) == -1);
  CHECK(api->endpoint_id(NULL, "md") == -1);
  CHECK(api->recvfrom_zcopy(NULL, 0, pkts, 64) == -1);
  CHECK(api->recv(NULL, 0, buf, sizeof buf, NULL) == -1);
  CHECK(api->poll(NULL, RAWPIPE_ANY_ENDPOINT, comps, 4) == -1);
  CHECK(api->add_conf_rule(NULL, "md: udp dst 239.1.1.7:5000") == -1);
  CHECK(api->remove_rule(NULL, 1) == -1);
  CHECK(api->endpoint_filter(NULL, 0, NULL, NULL, NULL) == -1);
  CHECK(api->queue_filter(NULL, 0, 0, NULL, NULL, NULL) == -1);
  CHECK(api->set_user_data(NULL, 0, 1) == -1);
  CHECK(api->dump_fd_stats(NULL, 0, RAWPIPE_LOG_ERROR) == -1);
  CHECK(api->load_filter_plugin(NULL, "rawpipe_seq_gap", "endpoint md", NULL, NULL, 0) == -1);
  CHECK(api->plugin_report(NULL, 0, buf, sizeof buf) == -1);
  CHECK(api->set_endpoint_offload(NULL, 0, 1) == -1);
  /* A handle that is no handle (a stack address) is looked up, never dereferenced. */
  rawpipe_pipeline *fake = (rawpipe_pipeline *)(void *)buf;
  CHECK(api->start(fake) == -1);
  CHECK_ERROR(api->last_error(fake), "not a live rawpipe_pipeline handle");
  CHECK(api->recvfrom_zcopy(fake, 0, pkts, 64) == -1);
  struct rawpipe_api_counters after = counters(api);
  CHECK(after.bad_handle - before.bad_handle == 18);
  CHECK(api->api_counters(NULL) == -1);

  rawpipe_pipeline *h = api->create(argv[1]);
  if (!h) {
    fprintf(stderr, "create: %s\n", api->last_error(NULL));
    return 1;
  }
  CHECK(api->start(h) == 0);
  int md = api->endpoint_id(h, "md");
  CHECK(md == 0);
  CHECK(api->endpoint_id(h, NULL) == -1);
  CHECK(api->endpoint_id(h, "nope") == -1);
  CHECK_ERROR(api->last_error(h), "nope");

  /* Unknown endpoints and NULL arrays. */
  before = counters(api);
  CHECK(api->recvfrom_zcopy(h, 99, pkts, 64) == -1);
  CHECK_ERROR(api->last_error(h), "endpoint id 99");
  CHECK(api->recvfrom_zcopy(h, 0, NULL, 64) == -1);
  CHECK_ERROR(api->last_error(h), "NULL");
  CHECK(api->recvfrom_zcopy(h, 0, NULL, 0) == 0);
  CHECK(api->poll(h, 0, NULL, 4) == -1);
  CHECK(api->poll(h, 77, comps, 4) == -1);
  CHECK(api->recv(h, 0, NULL, 10, NULL) == -1);
  CHECK(api->set_user_data(h, 1000, 1) == -1);
  CHECK(api->endpoint_filter(h, 1000, NULL, NULL, NULL) == -1);
  CHECK(api->queue_filter(h, 7, 0, NULL, NULL, NULL) == -1);
  CHECK(api->add_conf_rule(h, NULL) == -1);
  CHECK(api->add_conf_rule(h, "nope: udp dst 239.1.1.7:5000") == -1);
  CHECK(api->load_filter_plugin(h, NULL, "endpoint md", NULL, NULL, 0) == -1);
  CHECK(api->load_filter_plugin(h, "rawpipe_seq_gap", "endpoint md", NULL, NULL, 2) == -1);
  CHECK(api->plugin_report(h, 0, NULL, 10) == -1);
  CHECK(api->set_endpoint_offload(h, 500, 0) == -1);
  CHECK(api->free_packets(h, NULL, 3) == -1);
  after = counters(api);
  CHECK(after.bad_argument - before.bad_argument == 15);
  CHECK(after.bad_handle == before.bad_handle);

  /* Frees: NULL, foreign, inside a header, a payload pointer, a double free. */
  int n = c_test_recv(api, h, (uint16_t)md, pkts, 8, 8);
  CHECK(n == 8);
  if (n == 8) {
    before = counters(api);
    CHECK(api->free_buff(NULL) == -1);
    CHECK_ERROR(api->last_error(NULL), "NULL");
    int on_stack = 0;
    CHECK(api->free_buff(&on_stack) == -1);
    CHECK_ERROR(api->last_error(NULL), "no rawpipe buffer");
    void *heap = malloc(256);
    CHECK(api->free_buff(heap) == -1);
    free(heap);
    CHECK(api->free_buff((char *)pkts[0].handle + 8) == -1);
    CHECK_ERROR(api->last_error(NULL), "header");
    CHECK(api->ref_buff(NULL) == -1);
    CHECK(api->ref_buff(&on_stack) == -1);
    after = counters(api);
    CHECK(after.free_null - before.free_null == 2);
    CHECK(after.free_foreign - before.free_foreign == 4);

    /* VMA habit: free by the payload pointer. Mapped to the buffer and freed once. */
    CHECK(api->free_buff(pkts[0].payload.iov_base) == 0);
    CHECK(api->free_buff(pkts[0].handle) == -1);
    CHECK_ERROR(api->last_error(NULL), "already free");
    /* Plain double free, and a double free through free_packets. */
    CHECK(api->free_buff(pkts[1].handle) == 0);
    CHECK(api->free_buff(pkts[1].handle) == -1);
    CHECK(api->free_packets(h, &pkts[2], 2) == 0);
    CHECK(api->free_packets(h, &pkts[2], 2) == -1);
    CHECK_ERROR(api->last_error(h), "already free");
    /* A held reference survives one free; the second frees; the third is refused. */
    CHECK(api->ref_buff(pkts[4].handle) == 0);
    CHECK(api->free_buff(pkts[4].handle) == 0);
    CHECK(api->free_buff(pkts[4].handle) == 0);
    CHECK(api->free_buff(pkts[4].handle) == -1);
    CHECK(api->ref_buff(pkts[4].handle) == -1);
    /* A mixed array: the good ones are freed, the bad one refused, the call says so. */
    struct rawpipe_packet mixed[3] = {pkts[5], pkts[1], pkts[6]};
    CHECK(api->free_packets(h, mixed, 3) == -1);
    CHECK_ERROR(api->last_error(h), "packet 1");
    CHECK(api->free_buff(pkts[5].handle) == -1);
    CHECK(api->free_buff(pkts[7].handle) == 0);
    after = counters(api);
    CHECK(after.free_payload_mapped - before.free_payload_mapped == 1);
    CHECK(after.free_already_free - before.free_already_free == 8);
  }

  CHECK(api->stop(h) == 0);
  CHECK(api->destroy(h) == 0);
  /* The handle is gone: calls with it are refused, not a use-after-free. */
  CHECK(api->start(h) == -1);
  CHECK(api->destroy(h) == -1);
  CHECK_ERROR(api->last_error(NULL), "not a live");
  return c_test_finish("misuse");
}
