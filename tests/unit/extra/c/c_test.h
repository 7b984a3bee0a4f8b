/* Helpers for the C programs that use the Extra API as an application would: a check that names
 * the failed expression and the library's message, and a receive that waits for traffic. */
#ifndef RAWPIPE_C_TEST_H
#define RAWPIPE_C_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <rawpipe/extra.h>

static int c_test_failures;

#define CHECK(expr)                                                                      \
  do {                                                                                   \
    if (!(expr)) {                                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr);           \
      ++c_test_failures;                                                                 \
    }                                                                                    \
  } while (0)

/* The message must mention `needle`. */
#define CHECK_ERROR(msg, needle)                                                         \
  do {                                                                                   \
    const char *m_ = (msg);                                                              \
    if (!m_ || !strstr(m_, (needle))) {                                                  \
      fprintf(stderr, "%s:%d: error '%s' does not mention '%s'\n", __FILE__, __LINE__,   \
              m_ ? m_ : "(null)", (needle));                                             \
      ++c_test_failures;                                                                 \
    }                                                                                    \
  } while (0)

static inline double c_test_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline void c_test_sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Receives at least `want` packets (up to max) within 5 s; returns how many. */
static inline int c_test_recv(const rawpipe_api_t *api, rawpipe_pipeline *h, uint16_t ep,
                              struct rawpipe_packet *pkts, int want, int max) {
  int got = 0;
  double end = c_test_now() + 5.0;
  while (got < want && c_test_now() < end) {
    int n = api->recvfrom_zcopy(h, ep, pkts + got, (unsigned)(max - got));
    if (n < 0) return n;
    got += n;
    if (n == 0) c_test_sleep_ms(1);
  }
  return got;
}

static inline int c_test_finish(const char *name) {
  if (c_test_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, c_test_failures);
    return 1;
  }
  printf("%s: ok\n", name);
  return 0;
}

#endif
