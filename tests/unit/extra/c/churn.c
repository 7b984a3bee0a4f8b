/* Filter churn keeps memory flat: 200,000 endpoint_filter register/unregister pairs while the
 * lcore runs, with the resident set measured after a warm-up and at the end. Replaced filter sets
 * and their counter blocks are reclaimed once the lcore has passed a quiescent point; before
 * that, each pair kept about 2.85 kB until destroy (200,000 pairs: over 500 MiB). A caller leaves
 * at most FilterStage::kMaxRetired (256) sets waiting for the lcore; before that bound, a busy
 * host that kept the lcore off its CPU let thousands pile up (up to 24 MiB in this test).
 * Usage: churn CONFIG */
#include <string.h>
#include <unistd.h>

#include "c_test.h"

/* Under ASan, freed memory sits in a quarantine (256 MiB by default) before it is reused, which
 * would look like growth; a small one keeps the measurement about this code. */
const char *__asan_default_options(void) { return "quarantine_size_mb=4"; }

static long resident_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int pass(const struct rawpipe_packet *pkt, void *ctx) {
  (void)pkt, (void)ctx;
  return RAWPIPE_RECV;
}

static int churn(const rawpipe_api_t *api, rawpipe_pipeline *h, int pairs) {
  for (int i = 0; i < pairs; ++i) {
    if (api->endpoint_filter(h, 1, pass, NULL, NULL) != 0 || api->endpoint_filter(h, 1, NULL, NULL, NULL) != 0) {
      fprintf(stderr, "endpoint_filter: %s\n", api->last_error(h));
      return -1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: churn CONFIG\n");
    return 2;
  }
  const rawpipe_api_t *api = c_test_api();
  if (!api) return 1;
  rawpipe_pipeline *h = api->create(argv[1]);
  if (!h) {
    fprintf(stderr, "create: %s\n", api->last_error(NULL));
    return 1;
  }
  CHECK(api->start(h) == 0);
  CHECK(churn(api, h, 20000) == 0);
  const long warm = resident_kib();
  const double t0 = c_test_now();
  CHECK(churn(api, h, 200000) == 0);
  const double secs = c_test_now() - t0;
  const long end = resident_kib();
  printf("churn: 200000 pairs in %.2f s; resident %ld KiB after warm-up, %ld KiB at the end (%+ld KiB)\n", secs,
         warm, end, end - warm);
  CHECK(warm > 0 && end > 0);
  /* Flat: one kilobyte per pair would be 195 MiB, and 256 waiting sets take under 1 MiB; allow
   * 4 MiB for the allocator. */
  CHECK(end - warm < 4 * 1024);
  CHECK(api->stop(h) == 0);
  CHECK(api->destroy(h) == 0);
  return c_test_finish("churn");
}
