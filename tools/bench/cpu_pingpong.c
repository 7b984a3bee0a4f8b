/* How far apart two CPUs are: the round trip of one cache line handed back and forth between a
 * thread pinned to each. Everything a ring endpoint moves from an lcore to its consumer thread
 * crosses this distance (the slot lines, the tail), so its rate depends on it. On a virtual
 * machine the host decides where the two virtual CPUs run, and may move them while we measure:
 * on the 2-vCPU benchmark host the same pair read about 110, 275 and 550 ns within an hour.
 * tools/bench/ring-vs-sink runs this before and after each ring run.
 *
 *   cpu_pingpong [--cpus 0,1] [--rounds 5] [--trips 200000]
 *
 * One JSON object on stdout: cpus, trips per round, each round's mean round trip in ns, and
 * their median. */
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

/* The two flags on lines of their own, so each trip moves exactly one line each way. */
struct Line {
  _Alignas(128) atomic_long value;
};
static struct Line g_ping, g_pong;
static long g_trips;

static void* answer(void* arg) {
  const int cpu = *(const int*)arg;
  if (pin(cpu) != 0) {
    fprintf(stderr, "cpu_pingpong: cannot run on cpu %d\n", cpu);
    exit(1);
  }
  for (long i = 1; i <= g_trips; ++i) {
    while (atomic_load_explicit(&g_ping.value, memory_order_acquire) != i) {
    }
    atomic_store_explicit(&g_pong.value, i, memory_order_release);
  }
  return NULL;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  int cpus[2] = {0, 1};
  int rounds = 5;
  g_trips = 200000;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--cpus") && i + 1 < argc) {
      if (sscanf(argv[++i], "%d,%d", &cpus[0], &cpus[1]) != 2) {
        fprintf(stderr, "cpu_pingpong: --cpus takes two CPU numbers, as 0,1\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--trips") && i + 1 < argc) {
      g_trips = atol(argv[++i]);
    } else {
      fprintf(stderr, "usage: cpu_pingpong [--cpus A,B] [--rounds N] [--trips N]\n");
      return 2;
    }
  }
  if (rounds < 1 || rounds > 100 || g_trips < 1) {
    fprintf(stderr, "cpu_pingpong: --rounds must be 1 to 100 and --trips positive\n");
    return 2;
  }
  if (pin(cpus[0]) != 0) {
    fprintf(stderr, "cpu_pingpong: cannot run on cpu %d: %s\n", cpus[0], strerror(errno));
    return 1;
  }
  double ns[100];
  for (int r = 0; r < rounds; ++r) {
    atomic_store(&g_ping.value, 0);
    atomic_store(&g_pong.value, 0);
    pthread_t peer;
    if (pthread_create(&peer, NULL, answer, &cpus[1]) != 0) {
      fprintf(stderr, "cpu_pingpong: cannot start the second thread\n");
      return 1;
    }
    /* The first trip waits for the peer to start and pin itself; it is not timed. */
    atomic_store_explicit(&g_ping.value, 1, memory_order_release);
    while (atomic_load_explicit(&g_pong.value, memory_order_acquire) != 1) {
    }
    const uint64_t start = now_ns();
    for (long i = 2; i <= g_trips; ++i) {
      atomic_store_explicit(&g_ping.value, i, memory_order_release);
      while (atomic_load_explicit(&g_pong.value, memory_order_acquire) != i) {
      }
    }
    ns[r] = (double)(now_ns() - start) / (double)(g_trips > 1 ? g_trips - 1 : 1);
    pthread_join(peer, NULL);
  }
  double sorted[100];
  memcpy(sorted, ns, sizeof(double) * (size_t)rounds);
  qsort(sorted, (size_t)rounds, sizeof(double), by_value);
  printf("{\"cpus\": [%d, %d], \"trips\": %ld, \"round_trip_ns\": [", cpus[0], cpus[1], g_trips);
  for (int r = 0; r < rounds; ++r) printf("%s%.1f", r ? ", " : "", ns[r]);
  printf("], \"median_ns\": %.1f}\n", sorted[rounds / 2]);
  return 0;
}
