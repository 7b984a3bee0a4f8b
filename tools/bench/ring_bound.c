/* What handing packets to a thread on another CPU costs on this machine with nothing else in the
 * way: a plain ring, no rawpipe code, beside row 10.ring-vs-sink. Not a strict bound (a ring can
 * batch what crosses differently, and the host moves the CPUs between runs), but a target that a
 * hand-over this simple misses by far is one that the host sets, not the ring endpoint.
 *
 * A producer pinned to the first CPU takes buffers from a LIFO free stack, writes a 64-byte frame
 * and a metadata line into each, reads a few header fields back (parse's loads), and then either
 *   sink: puts them back on its stack at once (the sink endpoint), or
 *   ring: writes their pointers into a single-producer single-consumer ring whose slot lines it
 *         asks for one burst ahead, and publishes its tail once per burst. A consumer pinned to
 *         the second CPU polls the tail, reads the pointers, and publishes how far it has read;
 *         it never touches a buffer. Once every 8 bursts the producer takes back every slot the
 *         consumer has passed, reading the pointers from its own ring (rawpipe's lending ring).
 * So what crosses between the CPUs is only what any hand-over must move: the slot lines, the
 * tail and the consumer's position. Bursts of 32, as configs/bench-synth.toml.
 *
 *   ring_bound [--cpus 0,1] [--seconds 3] [--rounds 3] [--ring 65536] [--work N | --sink-mpps R]
 *              [--publish-every 1] [--ahead 1]
 *
 * Runs sink, ring, sink, ring... (--rounds pairs) and prints one JSON object: each run's Mpps and
 * the ratio ring / sink of the medians. The lighter the producer's own work, the larger the share
 * the crossing takes of it: --work adds N multiply-adds per packet, and --sink-mpps R picks the N
 * whose sink runs nearest R Mpps (rawpipe's sink rate in the same minutes: tools/bench/ring-vs-sink
 * --bound passes it). --publish-every and --ahead try other ways of running the ring. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pinned_thread.h"

enum { kBurst = 32, kBufSize = 2048, kFrameOff = 256, kFrameLen = 64, kReclaimEvery = 8 };

struct Ring {
  _Alignas(128) atomic_ulong tail; /* the producer's */
  _Alignas(128) atomic_ulong head; /* the consumer's */
  _Alignas(128) uint8_t **slot;
  unsigned long mask;
};

static struct Ring g_ring;
static atomic_int g_stop;
static int g_cpus[2] = {0, 1};

static void *consume(void *arg) {
  (void)arg;
  if (pin(g_cpus[1]) != 0) {
    fprintf(stderr, "ring_bound: cannot pin the consumer to cpu %d\n", g_cpus[1]);
    exit(1);
  }
  unsigned long head = atomic_load_explicit(&g_ring.head, memory_order_relaxed);
  uintptr_t seen = 0;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    const unsigned long tail = atomic_load_explicit(&g_ring.tail, memory_order_acquire);
    if (tail == head) {
      __builtin_ia32_pause();
      continue;
    }
    unsigned long n = tail - head;
    if (n > 256) n = 256;
    for (unsigned long i = 0; i < n; ++i) seen += (uintptr_t)g_ring.slot[(head + i) & g_ring.mask];
    head += n;
    atomic_store_explicit(&g_ring.head, head, memory_order_release);
  }
  return (void *)seen;
}

struct Producer {
  uint8_t **stack;
  unsigned long depth;
  unsigned long reclaimed; /* ring position up to which slots were taken back */
  unsigned long tail;
  uint64_t drops;
  uint64_t sum;
  unsigned work;
  unsigned publish_every; /* bursts per tail publication */
  unsigned ahead;         /* bursts of slot lines asked for ahead of the writes; 0: none */
};

static void reclaim(struct Producer *p) {
  const unsigned long head = atomic_load_explicit(&g_ring.head, memory_order_acquire);
  for (unsigned long i = p->reclaimed; i != head; ++i) p->stack[p->depth++] = g_ring.slot[i & g_ring.mask];
  p->reclaimed = head;
}

static const uint8_t kTemplate[kFrameLen] = {
    0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00,                       /* Ethernet */
    0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 198, 18, 0, 1,       /* IPv4 */
    0x27, 0x10, 0x13, 0x88, 0, 30, 0, 0};                                        /* UDP 10000 -> 5000 */

/* One burst's work on each buffer: write the frame and a metadata line, read the headers back. */
static void work(struct Producer *p, uint8_t **bufs, uint64_t seq) {
  for (int i = 0; i < kBurst; ++i) {
    uint8_t *b = bufs[i];
    uint8_t *f = b + kFrameOff;
    memcpy(f, kTemplate, kFrameLen);
    const uint16_t sport = (uint16_t)(10000 + ((seq + (uint64_t)i) & 1023));
    f[34] = (uint8_t)(sport >> 8);
    f[35] = (uint8_t)sport;
    uint64_t meta[8] = {kFrameOff, kFrameLen, 14, 34, 42, 0, seq + (uint64_t)i, 0};
    memcpy(b, meta, sizeof meta);
    uint64_t h = (uint64_t)f[12] << 8 | f[13];
    h = h * 31 + f[23];
    h = h * 31 + ((uint64_t)f[36] << 8 | f[37]);
    h = h * 31 + ((uint64_t)f[34] << 8 | f[35]);
    for (unsigned k = 0; k < p->work; ++k) h = h * 0x9e3779b97f4a7c15ull + k;
    p->sum += h;
  }
}

struct Options {
  double warm, seconds;
  unsigned long ring_size;
  unsigned work, publish_every, ahead;
};

static double run(int ring, const struct Options *o, uint8_t *region, unsigned long nbufs, uint64_t *drops_out) {
  const double seconds = o->seconds;
  const unsigned long ring_size = o->ring_size;
  struct Producer p = {.work = o->work, .publish_every = o->publish_every, .ahead = o->ahead};
  p.stack = malloc(nbufs * sizeof *p.stack);
  if (!p.stack) exit(1);
  for (unsigned long i = 0; i < nbufs; ++i) p.stack[p.depth++] = region + (nbufs - 1 - i) * kBufSize;
  atomic_store(&g_ring.tail, 0);
  atomic_store(&g_ring.head, 0);
  atomic_store(&g_stop, 0);
  pthread_t consumer;
  if (ring && pthread_create(&consumer, NULL, consume, NULL) != 0) {
    fprintf(stderr, "ring_bound: cannot start the consumer\n");
    exit(1);
  }
  uint8_t *bufs[kBurst];
  uint64_t packets = 0, seq = 0, counted_from = 0;
  const uint64_t warm_until = now_ns() + (uint64_t)(o->warm * 1e9);
  uint64_t start = 0, end = 0;
  for (unsigned long burst = 0;; ++burst) {
    if ((burst & 1023) == 0) {
      const uint64_t t = now_ns();
      if (!start && t >= warm_until) {
        start = t;
        counted_from = packets;
      } else if (start && t >= start + (uint64_t)(seconds * 1e9)) {
        end = t;
        break;
      }
    }
    if (ring && (p.depth < kBurst || burst % kReclaimEvery == 0)) reclaim(&p);
    if (p.depth < kBurst) continue; /* every buffer is with the consumer */
    p.depth -= kBurst;
    memcpy(bufs, p.stack + p.depth, sizeof bufs);
    work(&p, bufs, seq);
    seq += kBurst;
    packets += kBurst;
    if (!ring) {
      memcpy(p.stack + p.depth, bufs, sizeof bufs);
      p.depth += kBurst;
      continue;
    }
    if (p.tail + kBurst - p.reclaimed > ring_size) reclaim(&p);
    if (p.tail + kBurst - p.reclaimed > ring_size) { /* full: dropped, as endpoint_ring_full */
      memcpy(p.stack + p.depth, bufs, sizeof bufs);
      p.depth += kBurst;
      p.drops += kBurst;
      continue;
    }
    for (int i = 0; i < kBurst; ++i) g_ring.slot[(p.tail + (unsigned long)i) & g_ring.mask] = bufs[i];
    /* The slot lines of the burst `ahead` bursts on, asked for writing now (rawpipe's ring: 1). */
    if (p.ahead)
      for (int l = 0; l < kBurst; l += 8)
        __builtin_prefetch(&g_ring.slot[(p.tail + p.ahead * kBurst + (unsigned long)l) & g_ring.mask], 1);
    p.tail += kBurst;
    if (burst % p.publish_every == 0) atomic_store_explicit(&g_ring.tail, p.tail, memory_order_release);
  }
  atomic_store(&g_stop, 1);
  if (ring) {
    void *seen;
    pthread_join(consumer, &seen);
    p.sum += (uint64_t)(uintptr_t)seen;
  }
  if (p.sum == 42) fprintf(stderr, " "); /* keeps the work from being optimised away */
  *drops_out = p.drops;
  free(p.stack);
  return (double)(packets - counted_from) / ((double)(end - start) / 1e9) / 1e6;
}

/* The --work whose sink runs nearest `target` Mpps. The rate falls as the work grows; the scan goes
 * on past the first rate below the target, so that one slow sample (the host took the CPU) does not
 * end it early. */
static unsigned calibrate(struct Options o, double target, uint8_t *region, unsigned long nbufs) {
  o.warm = 0.2;
  o.seconds = 0.5;
  unsigned best = 0;
  double best_gap = 1e300;
  for (unsigned w = 0; w <= 200; w += w < 40 ? 2 : 10) {
    o.work = w;
    uint64_t unused;
    const double rate = run(0, &o, region, nbufs, &unused);
    const double gap = rate > target ? rate - target : target - rate;
    if (gap < best_gap) best_gap = gap, best = w;
    if (rate < 0.85 * target) break;
  }
  return best;
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  double s[64];
  memcpy(s, v, (size_t)n * sizeof *v);
  qsort(s, (size_t)n, sizeof *s, cmp);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

int main(int argc, char **argv) {
  struct Options o = {.warm = 0.5, .seconds = 3, .ring_size = 65536, .work = 0, .publish_every = 1, .ahead = 1};
  int rounds = 3;
  double sink_target = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--cpus") && i + 1 < argc && sscanf(argv[i + 1], "%d,%d", &g_cpus[0], &g_cpus[1]) == 2) ++i;
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) o.seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ring") && i + 1 < argc) o.ring_size = strtoul(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--work") && i + 1 < argc) o.work = (unsigned)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--publish-every") && i + 1 < argc) o.publish_every = (unsigned)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ahead") && i + 1 < argc) o.ahead = (unsigned)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sink-mpps") && i + 1 < argc) sink_target = atof(argv[++i]);
    else {
      fprintf(stderr, "usage: ring_bound [--cpus 0,1] [--seconds 3] [--rounds 3] [--ring 65536] [--work N | "
                      "--sink-mpps R] [--publish-every 1] [--ahead 1]\n");
      return 2;
    }
  }
  const unsigned long ring_size = o.ring_size;
  if (rounds < 1 || rounds > 64 || o.seconds <= 0 || ring_size < 2 * kBurst || (ring_size & (ring_size - 1)) ||
      o.publish_every < 1 || o.ahead > 64 || (o.ahead + o.publish_every) * kBurst >= ring_size) {
    fprintf(stderr, "ring_bound: --rounds 1-64, --seconds above 0, --ring a power of two of at least %d and more "
                    "than (--ahead + --publish-every) bursts, --publish-every at least 1, --ahead at most 64\n",
            2 * kBurst);
    return 2;
  }
  if (pin(g_cpus[0]) != 0) {
    fprintf(stderr, "ring_bound: cannot pin to cpu %d: %s\n", g_cpus[0], strerror(errno));
    return 1;
  }
  /* Enough buffers that the ring can hold all it may and the producer still has a burst. */
  const unsigned long nbufs = ring_size + 8 * kBurst * kReclaimEvery;
  uint8_t *region = aligned_alloc(4096, nbufs * kBufSize);
  g_ring.slot = aligned_alloc(128, ring_size * sizeof *g_ring.slot);
  if (!region || !g_ring.slot) {
    fprintf(stderr, "ring_bound: out of memory\n");
    return 1;
  }
  memset(region, 0, nbufs * kBufSize);
  memset(g_ring.slot, 0, ring_size * sizeof *g_ring.slot);
  g_ring.mask = ring_size - 1;
  if (sink_target > 0) o.work = calibrate(o, sink_target, region, nbufs);
  double sink[64], ringr[64];
  uint64_t drops[64];
  for (int r = 0; r < rounds; ++r) {
    uint64_t unused;
    sink[r] = run(0, &o, region, nbufs, &unused);
    ringr[r] = run(1, &o, region, nbufs, &drops[r]);
  }
  printf("{\"cpus\": [%d, %d], \"seconds\": %g, \"ring\": %lu, \"work\": %u, \"publish_every\": %u, \"ahead\": %u, "
         "\"sink_mpps\": [",
         g_cpus[0], g_cpus[1], o.seconds, ring_size, o.work, o.publish_every, o.ahead);
  for (int r = 0; r < rounds; ++r) printf("%s%.2f", r ? ", " : "", sink[r]);
  printf("], \"ring_mpps\": [");
  for (int r = 0; r < rounds; ++r) printf("%s%.2f", r ? ", " : "", ringr[r]);
  printf("], \"ring_drops\": [");
  for (int r = 0; r < rounds; ++r) printf("%s%llu", r ? ", " : "", (unsigned long long)drops[r]);
  const double ms = median(sink, rounds), mr = median(ringr, rounds);
  printf("], \"sink_median\": %.2f, \"ring_median\": %.2f, \"ratio\": %.3f}\n", ms, mr, mr / ms);
  return 0;
}
