/* The values a VMA or XLIO application carries over: verdicts (VMA_PACKET_DROP = 0,
 * VMA_PACKET_RECV = 1, VMA_PACKET_HOLD = 2) and allocator flags (IOCTL_USER_ALLOC_TX = 1 << 0,
 * IOCTL_USER_ALLOC_RX = 1 << 1, IOCTL_USER_ALLOC_TX_ZC = 1 << 2), checked at compile time and by
 * what a callback returning the bare literals does to real traffic. Usage: values CONFIG */
#include <stdatomic.h>
#include <string.h>

#include "c_test.h"

_Static_assert(RAWPIPE_EXTRA_ABI_VERSION == 2, "ABI version 2 carries VMA's values");
_Static_assert(RAWPIPE_DROP == 0 && RAWPIPE_RECV == 1 && RAWPIPE_HOLD == 2, "VMA_PACKET_DROP/RECV/HOLD");
_Static_assert(RAWPIPE_ALLOC_TX == 1 && RAWPIPE_ALLOC_RX == 2 && RAWPIPE_ALLOC_TX_ZC == 4,
               "IOCTL_USER_ALLOC_TX/RX/TX_ZC");

static atomic_int g_literal;   /* what the callback returns, as a bare int */
static atomic_int g_seen;
static void *_Atomic g_held;   /* one buffer kept by the literal 2 */

static int literal_filter(const struct rawpipe_packet *pkt, void *ctx) {
  (void)ctx;
  atomic_fetch_add(&g_seen, 1);
  int v = atomic_load(&g_literal);
  if (v == 2) {
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(&g_held, &expected, pkt->handle)) return 1;
  }
  return v;
}

/* Only registered, never called: set_allocator is reset before any create. */
static void *never_alloc(size_t bytes, void *ctx) {
  (void)bytes, (void)ctx;
  return NULL;
}
static void never_free(void *addr, void *ctx) { (void)addr, (void)ctx; }

/* Packets on endpoint 0 within ~300 ms of traffic, all freed. */
static int received_for_a_while(const rawpipe_api_t *api, rawpipe_pipeline *h) {
  struct rawpipe_packet pkts[64];
  int total = 0;
  int seen0 = atomic_load(&g_seen);
  double end = c_test_now() + 0.3;
  while (c_test_now() < end || atomic_load(&g_seen) - seen0 < 100) {
    int n = api->recvfrom_zcopy(h, 0, pkts, 64);
    if (n > 0) {
      total += n;
      CHECK(api->free_packets(h, pkts, (unsigned)n) == 0);
    } else {
      c_test_sleep_ms(1);
    }
    if (c_test_now() > end + 5) break;
  }
  return total;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: values CONFIG\n");
    return 2;
  }
  const rawpipe_api_t *api = rawpipe_get_api(2);
  if (!api) {
    fprintf(stderr, "%s\n", rawpipe_api_error());
    return 1;
  }
  rawpipe_pipeline *h = api->create(argv[1]);
  if (!h) {
    fprintf(stderr, "create: %s\n", api->last_error(NULL));
    return 1;
  }
  atomic_store(&g_literal, 0);
  CHECK(api->endpoint_filter(h, 0, literal_filter, NULL, NULL) == 0);
  CHECK(api->start(h) == 0);
  /* 0 is VMA_PACKET_DROP: nothing reaches the ring. Drain what was queued before. */
  (void)received_for_a_while(api, h);
  CHECK(received_for_a_while(api, h) == 0);
  /* 1 is VMA_PACKET_RECV. */
  atomic_store(&g_literal, 1);
  (void)received_for_a_while(api, h);
  CHECK(received_for_a_while(api, h) > 0);
  /* 2 is VMA_PACKET_HOLD: the callback keeps one buffer, which is live until freed. */
  atomic_store(&g_literal, 2);
  double end = c_test_now() + 5;
  while (!atomic_load(&g_held) && c_test_now() < end) c_test_sleep_ms(1);
  atomic_store(&g_literal, 1);
  CHECK(atomic_load(&g_held) != NULL);
  CHECK(api->stop(h) == 0);
  if (atomic_load(&g_held)) {
    CHECK(api->free_buff(atomic_load(&g_held)) == 0);
    CHECK(api->free_buff(atomic_load(&g_held)) == -1);
  }
  CHECK(api->destroy(h) == 0);

  /* The allocator flags are XLIO's: TX_ZC is accepted, an unknown bit is not. */
  CHECK(api->set_allocator(NULL, NULL, NULL, 0) == 0);
  CHECK(api->set_allocator(never_alloc, never_free, NULL, RAWPIPE_ALLOC_TX_ZC) == 0);
  CHECK(api->set_allocator(never_alloc, never_free, NULL, 1u << 3) == -1);
  CHECK_ERROR(api->last_error(NULL), "RAWPIPE_ALLOC_TX (1)");
  CHECK(api->set_allocator(NULL, NULL, NULL, 0) == 0);
  return c_test_finish("values");
}
