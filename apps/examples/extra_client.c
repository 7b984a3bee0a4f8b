/* extra_client: the smallest complete Extra API application, in C, against the installed library.
 *
 * It creates a pipeline from a config file, starts it, receives packets from one ring endpoint
 * without copying them (recvfrom_zcopy, then free_packets to hand the buffers back), stops and
 * destroys the pipeline, and prints what it received. It exits non-zero when an API call fails or
 * nothing arrived, so it doubles as a check that an installed rawpipe works.
 *
 * Build (rawpipe installed, or PKG_CONFIG_PATH pointing at its rawpipe.pc):
 *     cc extra_client.c $(pkg-config --cflags --libs rawpipe) -o extra_client
 * Run, on the synth config installed beside this file:
 *     ./extra_client extra_client.toml [ENDPOINT [PACKETS]]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rawpipe/extra.h>

enum { kBurst = 32, kTimeoutSeconds = 10 };

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void format_addr(const struct rawpipe_addr *a, char *buf, size_t len) {
  if (a->family == 4)
    snprintf(buf, len, "%u.%u.%u.%u:%u", a->addr[0], a->addr[1], a->addr[2], a->addr[3], a->port);
  else if (a->family == 6)
    snprintf(buf, len, "[%02x%02x:%02x%02x:...:%02x%02x]:%u", a->addr[0], a->addr[1], a->addr[2], a->addr[3],
             a->addr[14], a->addr[15], a->port);
  else
    snprintf(buf, len, "(no IP header)");
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: %s CONFIG [ENDPOINT [PACKETS]]\n", argv[0]);
    return 2;
  }
  const char *config = argv[1];
  const char *endpoint_name = argc > 2 ? argv[2] : "app";
  unsigned long want = argc > 3 ? strtoul(argv[3], NULL, 10) : 100000;

  const rawpipe_api_t *api = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  if (!api) {
    fprintf(stderr, "extra_client: rawpipe_get_api: %s\n", rawpipe_api_error());
    return 1;
  }
  if (!(api->caps & RAWPIPE_CAP_ZCOPY_RECV)) {
    fprintf(stderr, "extra_client: this librawpipe has no zero-copy receive (caps 0x%llx)\n",
            (unsigned long long)api->caps);
    return 1;
  }

  rawpipe_pipeline *p = api->create(config);
  if (!p) {
    fprintf(stderr, "extra_client: create(%s): %s\n", config, api->last_error(NULL));
    return 1;
  }
  int status = 1;
  int endpoint = api->endpoint_id(p, endpoint_name);
  if (endpoint < 0) {
    fprintf(stderr, "extra_client: %s has no endpoint named '%s'\n", config, endpoint_name);
    goto out_destroy;
  }
  if (api->start(p) != 0) {
    fprintf(stderr, "extra_client: start: %s\n", api->last_error(p));
    goto out_destroy;
  }

  /* The consumer loop: everything recvfrom_zcopy returns is ours until free_packets. */
  struct rawpipe_packet pkts[kBurst];
  unsigned long received = 0, payload_bytes = 0;
  struct rawpipe_packet first;
  memset(&first, 0, sizeof first);
  double deadline = now_seconds() + kTimeoutSeconds;
  while (received < want && now_seconds() < deadline) {
    int n = api->recvfrom_zcopy(p, (uint16_t)endpoint, pkts, kBurst);
    if (n < 0) {
      fprintf(stderr, "extra_client: recvfrom_zcopy: %s\n", api->last_error(p));
      break;
    }
    if (received == 0 && n > 0) first = pkts[0]; /* addresses are copies; payload pointers die at free */
    for (int i = 0; i < n; ++i) payload_bytes += pkts[i].payload.iov_len;
    received += (unsigned long)n;
    api->free_packets(p, pkts, (unsigned)n);
  }

  if (api->stop(p) != 0) {
    fprintf(stderr, "extra_client: stop: %s\n", api->last_error(p));
    goto out_destroy;
  }
  char src[64], dst[64];
  format_addr(&first.src, src, sizeof src);
  format_addr(&first.dst, dst, sizeof dst);
  printf("extra_client: received %lu packets (%lu payload bytes) on endpoint '%s'; first %s -> %s\n", received,
         payload_bytes, endpoint_name, src, dst);
  if (received == 0)
    fprintf(stderr, "extra_client: nothing arrived on '%s' in %d s; does a rule of the config send traffic there?\n",
            endpoint_name, kTimeoutSeconds);
  else
    status = 0;

out_destroy:
  api->destroy(p);
  return status;
}
