/* Helpers for the C programs that use the Extra API as an application would: a check that names
 * the failed expression and the library's message, and a receive that waits for traffic. */
#ifndef RAWPIPE_C_TEST_H
#define RAWPIPE_C_TEST_H

#include <stdint.h>
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

/* The library's table, or NULL after printing why (the caller exits 1). */
static inline const rawpipe_api_t *c_test_api(void) {
  const rawpipe_api_t *api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  if (!api) fprintf(stderr, "%s\n", rawpipe_api_error());
  return api;
}

/* create(config), or NULL after printing the library's error. */
static inline rawpipe_pipeline *c_test_create(const rawpipe_api_t *api, const char *config) {
  rawpipe_pipeline *h = api->create(config);
  if (!h) fprintf(stderr, "create: %s\n", api->last_error(NULL));
  return h;
}

/* A pcap file of `frames` 60-byte UDP datagrams 10.0.0.1:4000 -> 239.1.1.1:5000, one per
 * microsecond of capture time (a port with timing = "rate" paces them itself). 0 or -1. */
static inline int c_test_write_group_pcap(const char *path, unsigned frames) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  uint32_t gh[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
  fwrite(gh, sizeof gh, 1, f);
  for (unsigned i = 0; i < frames; ++i) {
    uint8_t b[60] = {0x01, 0x00, 0x5e, 0x01, 0x01, 0x01, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00};
    uint8_t *ip = b + 14, *udp = b + 34;
    ip[0] = 0x45, ip[3] = 28 + 10, ip[8] = 64, ip[9] = 17;
    ip[12] = 10, ip[15] = 1, ip[16] = 239, ip[17] = 1, ip[18] = 1, ip[19] = 1;
    udp[0] = 0x0f, udp[1] = 0xa0, udp[2] = 0x13, udp[3] = 0x88, udp[5] = 18;
    uint32_t rh[4] = {1, i, 60, 60};
    fwrite(rh, sizeof rh, 1, f);
    fwrite(b, sizeof b, 1, f);
  }
  return fclose(f);
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
