/* What the harness's C programs that time threads on chosen CPUs share: a monotonic clock in ns
 * and pinning the calling thread to one CPU. */
#pragma once

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* 0, or the error number pthread_setaffinity_np gave. */
static inline int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
