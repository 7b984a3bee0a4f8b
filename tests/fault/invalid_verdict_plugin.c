/* A misbehaving filter plugin for the fault tests: returns `value` (by default 7, which is no
 * verdict at all) for every `every`-th packet it sees and RAWPIPE_RECV for the others. Counts what
 * it returned; report() gives "bad=N good=M". Several lcores may call it: relaxed atomics. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawpipe/filter_plugin.h"

struct bad_verdicts {
  unsigned long every;
  int value;
  atomic_ulong seen;
  atomic_ulong bad;
};

static void *create(const rawpipe_api_t *api, const char *const *keys, const char *const *values, unsigned n,
                    char *err, size_t err_len) {
  (void)api;
  struct bad_verdicts *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  s->every = 3;
  s->value = 7;
  for (unsigned i = 0; i < n; ++i) {
    char *end = NULL;
    long v = strtol(values[i], &end, 10);
    if (!end || *end != '\0') {
      snprintf(err, err_len, "key '%s': '%s' is not an integer", keys[i], values[i]);
      free(s);
      return NULL;
    }
    if (strcmp(keys[i], "every") == 0 && v > 0) {
      s->every = (unsigned long)v;
    } else if (strcmp(keys[i], "value") == 0) {
      s->value = (int)v;
    } else {
      snprintf(err, err_len, "unknown or invalid key '%s' (known: every > 0, value)", keys[i]);
      free(s);
      return NULL;
    }
  }
  return s;
}

static int filter(const struct rawpipe_packet *pkt, void *ctx) {
  (void)pkt;
  struct bad_verdicts *s = ctx;
  unsigned long k = atomic_fetch_add_explicit(&s->seen, 1, memory_order_relaxed) + 1;
  if (k % s->every != 0) return RAWPIPE_RECV;
  atomic_fetch_add_explicit(&s->bad, 1, memory_order_relaxed);
  return s->value;
}

static void report(void *ctx, char *buf, size_t len) {
  struct bad_verdicts *s = ctx;
  unsigned long bad = atomic_load(&s->bad), seen = atomic_load(&s->seen);
  snprintf(buf, len, "bad=%lu good=%lu", bad, seen - bad);
}

static void destroy(void *ctx) { free(ctx); }

static const struct rawpipe_filter_plugin kPlugin = {
    RAWPIPE_FILTER_PLUGIN_ABI_VERSION, "fault_bad_verdicts", create, filter, NULL, report, destroy,
};

const struct rawpipe_filter_plugin *RAWPIPE_FILTER_PLUGIN_ENTRY(void) { return &kPlugin; }
