/* 1-in-N sampler, a rawpipe filter plugin in C: HOLDs every Nth packet and hands it to its own
 * thread, which frees it (api->free_buff) from outside the lcore; every other packet passes.
 * Shows the HOLD ownership contract: a held buffer belongs to the plugin until it frees it.
 *
 * Config: every (N, default 100), queue (held packets in flight, a power of two, default 1024;
 * when full the packet passes instead of being held, counted as `overflow`).
 *
 * Threading: one producer (attach to one rx queue, or an endpoint one lcore receives) and the
 * plugin's one consumer thread, through a single-producer/single-consumer ring.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rawpipe/filter_plugin.h"

struct sampler {
  const rawpipe_api_t *api;
  unsigned long every;
  unsigned long count; /* producer only */
  size_t mask;
  void **slots;
  /* head: producer writes (release), consumer reads (acquire); tail the other way round. */
  atomic_size_t head, tail;
  atomic_bool stop;
  pthread_t thread;
  atomic_ullong seen, held, freed, overflow;
};

static void bump(atomic_ullong *c) {
  /* Relaxed: single writer per counter; report() only needs the value eventually. */
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

static size_t drain(struct sampler *s) {
  size_t n = 0;
  size_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
  /* Acquire pairs with the producer's release store of head: the slot is written. */
  size_t head = atomic_load_explicit(&s->head, memory_order_acquire);
  while (tail != head) {
    s->api->free_buff(s->slots[tail & s->mask]);
    bump(&s->freed);
    ++tail;
    ++n;
  }
  /* Release pairs with the producer's acquire load of tail: the slots are free again. */
  atomic_store_explicit(&s->tail, tail, memory_order_release);
  return n;
}

static void *freer(void *arg) {
  struct sampler *s = arg;
  const struct timespec nap = {0, 100000};
  while (!atomic_load(&s->stop))
    if (drain(s) == 0) nanosleep(&nap, NULL);
  drain(s);
  return NULL;
}

static void *sampler_create(const rawpipe_api_t *api, const char *const *keys, const char *const *values, unsigned n,
                            char *err, size_t err_len) {
  unsigned long every = 100, queue = 1024;
  for (unsigned i = 0; i < n; ++i) {
    unsigned long *dst = NULL;
    char *end = NULL;
    if (!strcmp(keys[i], "every")) dst = &every;
    else if (!strcmp(keys[i], "queue")) dst = &queue;
    else {
      snprintf(err, err_len, "unknown key '%s' (known: every, queue)", keys[i]);
      return NULL;
    }
    *dst = strtoul(values[i], &end, 10);
    if (!*values[i] || *end) {
      snprintf(err, err_len, "key '%s': '%s' is not a positive integer", keys[i], values[i]);
      return NULL;
    }
  }
  if (every == 0) {
    snprintf(err, err_len, "key 'every' must be at least 1");
    return NULL;
  }
  if (queue < 2 || (queue & (queue - 1))) {
    snprintf(err, err_len, "key 'queue': %lu must be a power of two >= 2", queue);
    return NULL;
  }
  struct sampler *s = calloc(1, sizeof *s);
  if (s) s->slots = calloc(queue, sizeof *s->slots);
  if (!s || !s->slots) {
    free(s);
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  s->api = api;
  s->every = every;
  s->mask = queue - 1;
  int rc = pthread_create(&s->thread, NULL, freer, s);
  if (rc != 0) {
    free(s->slots);
    free(s);
    snprintf(err, err_len, "cannot start the freeing thread: %s", strerror(rc));
    return NULL;
  }
  return s;
}

static int sampler_filter(const struct rawpipe_packet *p, void *ctx) {
  struct sampler *s = ctx;
  bump(&s->seen);
  if (++s->count % s->every != 0) return RAWPIPE_RECV;
  size_t head = atomic_load_explicit(&s->head, memory_order_relaxed);
  /* Acquire pairs with the consumer's release store of tail. */
  if (head - atomic_load_explicit(&s->tail, memory_order_acquire) > s->mask) {
    bump(&s->overflow);
    return RAWPIPE_RECV;
  }
  s->slots[head & s->mask] = p->handle;
  bump(&s->held);
  atomic_store_explicit(&s->head, head + 1, memory_order_release);
  return RAWPIPE_HOLD;
}

static void sampler_report(void *ctx, char *buf, size_t len) {
  struct sampler *s = ctx;
  snprintf(buf, len, "seen=%llu held=%llu freed=%llu overflow=%llu", atomic_load(&s->seen), atomic_load(&s->held),
           atomic_load(&s->freed), atomic_load(&s->overflow));
}

static void sampler_destroy(void *ctx) {
  struct sampler *s = ctx;
  atomic_store(&s->stop, 1);
  pthread_join(s->thread, NULL);
  free(s->slots);
  free(s);
}

static const struct rawpipe_filter_plugin kPlugin = {
    RAWPIPE_FILTER_PLUGIN_ABI_VERSION, "sampler", sampler_create, sampler_filter, NULL, sampler_report, sampler_destroy,
};

const struct rawpipe_filter_plugin *RAWPIPE_FILTER_PLUGIN_ENTRY(void) { return &kPlugin; }
