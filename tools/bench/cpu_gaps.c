/* How much of a busy CPU this machine takes away, in what pieces: a thread pinned to each CPU in
 * turn reads the clock in a tight loop for the given seconds, and every step between two reads
 * longer than the threshold is time the thread did not run (an interrupt, another task, or on a
 * virtual machine the host running something else on that physical CPU). A poll-mode thread loses
 * exactly this; a packet that arrives in such a gap waits for its end, which is what sets the tail
 * of a round trip through a spinning server (tools/bench/preload-latency prints it beside its
 * figures).
 *
 *   cpu_gaps [--seconds S] [--threshold-us T] [--cpus 0,1]
 *
 * One JSON object per CPU on stdout: cpu, seconds, gaps, gaps_per_s, lost_share, and the gap
 * lengths in microseconds at p50, p99 and max. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinned_thread.h"

enum { kMaxGaps = 1 << 20 };

static int by_value(const void* a, const void* b) {
  const uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return x < y ? -1 : x > y;
}

static int measure(int cpu, double seconds, uint64_t threshold_ns, uint32_t* gaps) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    fprintf(stderr, "cpu_gaps: cannot run on cpu %d: %s\n", cpu, strerror(errno));
    return -1;
  }
  const uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9);
  uint64_t prev = start, lost = 0;
  size_t n = 0, over = 0;
  for (;;) {
    const uint64_t t = now_ns();
    const uint64_t step = t - prev;
    prev = t;
    if (step > threshold_ns) {
      lost += step;
      if (n < kMaxGaps)
        gaps[n++] = step > UINT32_MAX ? UINT32_MAX : (uint32_t)step;
      else
        ++over;
    }
    if (t >= end) break;
  }
  qsort(gaps, n, sizeof *gaps, by_value);
  const double elapsed = (double)(prev - start) / 1e9;
  printf("{\"cpu\": %d, \"seconds\": %.3f, \"gaps\": %zu, \"gaps_per_s\": %.1f, \"lost_share\": %.5f, "
         "\"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}\n",
         cpu, elapsed, n + over, (double)(n + over) / elapsed, (double)lost / 1e9 / elapsed,
         n ? gaps[n / 2] / 1e3 : 0.0, n ? gaps[(size_t)(n * 0.99)] / 1e3 : 0.0, n ? gaps[n - 1] / 1e3 : 0.0);
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  double seconds = 2.0, threshold_us = 5.0;
  const char* cpus = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--threshold-us") && i + 1 < argc) {
      threshold_us = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--cpus") && i + 1 < argc) {
      cpus = argv[++i];
    } else {
      fprintf(stderr, "usage: cpu_gaps [--seconds S] [--threshold-us T] [--cpus 0,1]\n");
      return 2;
    }
  }
  if (seconds <= 0 || threshold_us <= 0) {
    fprintf(stderr, "cpu_gaps: --seconds and --threshold-us must be positive\n");
    return 2;
  }
  uint32_t* gaps = malloc(sizeof *gaps * kMaxGaps);
  if (!gaps) return 1;
  int status = 0;
  if (cpus) {
    char* list = strdup(cpus);
    for (char* tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
      if (measure(atoi(tok), seconds, (uint64_t)(threshold_us * 1e3), gaps) != 0) status = 1;
    free(list);
  } else {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &allowed) && measure(cpu, seconds, (uint64_t)(threshold_us * 1e3), gaps) != 0) status = 1;
  }
  free(gaps);
  return status;
}
