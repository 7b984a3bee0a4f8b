/* UDP sequence-gap detector (market-data style), a rawpipe filter plugin in C.
 *
 * Each flow (source and destination address and port) carries a big-endian sequence number at a
 * fixed payload offset. The filter tracks the next expected number per flow and counts gaps
 * (a jump forward; `missing` adds up the numbers skipped) and reorders (a number below the
 * expected one: late or duplicate). Every packet passes (RECV).
 *
 * Config: offset (payload byte offset, default 0), width (4 or 8 bytes, default 8), max_flows
 * (default 1024; packets of further flows are counted as untracked).
 *
 * Threading: the flow table has one writer. Attach it to one rx queue, or to an endpoint whose
 * traffic one lcore receives. Totals are atomics so report() may read them from the control
 * thread at any time.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawpipe/filter_plugin.h"

struct flow {
  uint8_t used;
  uint8_t key[36];
  uint64_t next;
};

struct seq_gap {
  unsigned offset;
  unsigned width;
  size_t mask; /* table size - 1 */
  size_t max_flows;
  struct flow *table;
  atomic_ullong flows, packets, gaps, missing, reorders, short_pkts, untracked;
};

static void bump(atomic_ullong *c, unsigned long long n) {
  /* Relaxed: single writer; report() only needs each value eventually. */
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

static uint64_t hash_key(const uint8_t *k, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; ++i) h = (h ^ k[i]) * 1099511628211ull;
  return h;
}

static int parse_uint(const char *v, unsigned long *out) {
  char *end = NULL;
  if (!v || !*v) return -1;
  *out = strtoul(v, &end, 10);
  return *end ? -1 : 0;
}

static void *seq_gap_create(const rawpipe_api_t *api, const char *const *keys, const char *const *values, unsigned n,
                            char *err, size_t err_len) {
  (void)api;
  unsigned long offset = 0, width = 8, max_flows = 1024;
  for (unsigned i = 0; i < n; ++i) {
    unsigned long *dst = NULL;
    if (!strcmp(keys[i], "offset")) dst = &offset;
    else if (!strcmp(keys[i], "width")) dst = &width;
    else if (!strcmp(keys[i], "max_flows")) dst = &max_flows;
    else {
      snprintf(err, err_len, "unknown key '%s' (known: offset, width, max_flows)", keys[i]);
      return NULL;
    }
    if (parse_uint(values[i], dst) != 0) {
      snprintf(err, err_len, "key '%s': '%s' is not a non-negative integer", keys[i], values[i]);
      return NULL;
    }
  }
  if (width != 4 && width != 8) {
    snprintf(err, err_len, "key 'width': %lu must be 4 or 8", width);
    return NULL;
  }
  if (max_flows == 0 || max_flows > (1ul << 24)) {
    snprintf(err, err_len, "key 'max_flows': %lu must be from 1 to 16777216", max_flows);
    return NULL;
  }
  struct seq_gap *s = calloc(1, sizeof *s);
  size_t size = 1;
  while (size < 2 * max_flows) size <<= 1;
  if (s) s->table = calloc(size, sizeof *s->table);
  if (!s || !s->table) {
    free(s);
    snprintf(err, err_len, "out of memory for %lu flows", max_flows);
    return NULL;
  }
  s->offset = (unsigned)offset;
  s->width = (unsigned)width;
  s->mask = size - 1;
  s->max_flows = max_flows;
  return s;
}

static int seq_gap_filter(const struct rawpipe_packet *p, void *ctx) {
  struct seq_gap *s = ctx;
  bump(&s->packets, 1);
  if (p->payload.iov_len < (size_t)s->offset + s->width || p->src.family == 0) {
    bump(&s->short_pkts, 1);
    return RAWPIPE_RECV;
  }
  const uint8_t *b = (const uint8_t *)p->payload.iov_base + s->offset;
  uint64_t seq = 0;
  for (unsigned i = 0; i < s->width; ++i) seq = (seq << 8) | b[i];

  uint8_t key[36];
  memcpy(key, p->src.addr, 16);
  memcpy(key + 16, p->dst.addr, 16);
  memcpy(key + 32, &p->src.port, 2);
  memcpy(key + 34, &p->dst.port, 2);
  size_t i = (size_t)hash_key(key, sizeof key) & s->mask;
  for (;;) {
    struct flow *f = &s->table[i];
    if (!f->used) {
      if (atomic_load_explicit(&s->flows, memory_order_relaxed) >= s->max_flows) {
        bump(&s->untracked, 1);
        return RAWPIPE_RECV;
      }
      f->used = 1;
      memcpy(f->key, key, sizeof key);
      f->next = seq + 1;
      bump(&s->flows, 1);
      return RAWPIPE_RECV;
    }
    if (!memcmp(f->key, key, sizeof key)) {
      if (seq == f->next) {
        f->next = seq + 1;
      } else if (seq > f->next) {
        bump(&s->gaps, 1);
        bump(&s->missing, seq - f->next);
        f->next = seq + 1;
      } else {
        bump(&s->reorders, 1);
      }
      return RAWPIPE_RECV;
    }
    i = (i + 1) & s->mask;
  }
}

static void seq_gap_report(void *ctx, char *buf, size_t len) {
  struct seq_gap *s = ctx;
  snprintf(buf, len, "flows=%llu packets=%llu gaps=%llu missing=%llu reorders=%llu short=%llu untracked=%llu",
           atomic_load(&s->flows), atomic_load(&s->packets), atomic_load(&s->gaps), atomic_load(&s->missing),
           atomic_load(&s->reorders), atomic_load(&s->short_pkts), atomic_load(&s->untracked));
}

static void seq_gap_destroy(void *ctx) {
  struct seq_gap *s = ctx;
  free(s->table);
  free(s);
}

static const struct rawpipe_filter_plugin kPlugin = {
    RAWPIPE_FILTER_PLUGIN_ABI_VERSION, "seq_gap", seq_gap_create, seq_gap_filter, NULL, seq_gap_report, seq_gap_destroy,
};

const struct rawpipe_filter_plugin *RAWPIPE_FILTER_PLUGIN_ENTRY(void) { return &kPlugin; }
