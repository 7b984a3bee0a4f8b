/* destroy() while the application still holds buffers: the pipeline stops and goes, the pools'
 * memory stays until the last held buffer is freed, and then goes back to the allocator it came
 * from. Reading a held packet after destroy is therefore valid (under ASan with the user
 * allocator's memory from aligned_alloc, a use after free would be reported).
 * Usage: destroy_held CONFIG */
#include <stdint.h>
#include <string.h>

#include "c_test.h"

static int g_allocs, g_frees;

static void *test_alloc(size_t bytes, void *ctx) {
  (void)ctx;
  ++g_allocs;
  return aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
}

static void test_free(void *addr, void *ctx) {
  (void)ctx;
  ++g_frees;
  free(addr);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: destroy_held CONFIG\n");
    return 2;
  }
  const rawpipe_api_t *api = c_test_api();
  if (!api) return 1;
  CHECK(api->set_allocator(test_alloc, test_free, NULL, RAWPIPE_ALLOC_RX) == 0);
  rawpipe_pipeline *h = api->create(argv[1]);
  if (!h) {
    fprintf(stderr, "create: %s\n", api->last_error(NULL));
    return 1;
  }
  CHECK(g_allocs == 1);
  CHECK(api->start(h) == 0);
  struct rawpipe_packet pkts[16];
  int n = c_test_recv(api, h, 0, pkts, 16, 16);
  CHECK(n == 16);
  unsigned char first[16][8];
  for (int i = 0; i < n; ++i) memcpy(first[i], pkts[i].payload.iov_base, 8);
  /* One more holder on the last packet: it needs two frees. */
  CHECK(api->ref_buff(pkts[n - 1].handle) == 0);

  CHECK(api->destroy(h) == 0);
  CHECK(g_frees == 0); /* 16 buffers are still out: the pool stays */
  for (int i = 0; i < n; ++i) CHECK(memcmp(first[i], pkts[i].payload.iov_base, 8) == 0);
  /* After destroy the handle is gone: free_packets without one, free_buff for the rest. */
  CHECK(api->free_packets(h, pkts, 1) == -1); /* a dead handle is refused, nothing freed */
  CHECK(api->free_packets(NULL, pkts, 8) == 0);
  CHECK(api->free_packets(NULL, pkts, 8) == -1); /* a second time: already free */
  CHECK(g_frees == 0);
  for (int i = 8; i < n; ++i) CHECK(api->free_buff(pkts[i].handle) == 0);
  CHECK(g_frees == 0); /* the last packet has a second holder */
  CHECK(api->free_buff(pkts[n - 1].payload.iov_base) == 0);
  CHECK(g_frees == 1); /* last buffer back: the region went back to the allocator */
  CHECK(api->free_buff(pkts[0].handle) == -1); /* the pool is gone: no longer a rawpipe buffer */

  /* Nothing held at destroy: the pool goes at once. */
  h = api->create(argv[1]);
  CHECK(h != NULL);
  if (h) {
    CHECK(api->start(h) == 0);
    n = c_test_recv(api, h, 0, pkts, 4, 4);
    CHECK(api->free_packets(h, pkts, (unsigned)n) == 0);
    CHECK(api->destroy(h) == 0);
    CHECK(g_frees == 2);
  }
  CHECK(api->set_allocator(NULL, NULL, NULL, 0) == 0);
  return c_test_finish("destroy_held");
}
