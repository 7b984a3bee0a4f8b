/* The Extra API through a socket fd, written the way VMA programs are (the VMA seed's
 * vma_get_api: getsockopt on fd -1), run under librawpipe-preload.so: a receive callback HOLDs
 * every other packet, recvfrom_zcopy takes the rest, free_packets returns both, dump_fd_stats
 * prints the socket's line. Prints "held H received R" and exits 0 when H + R == COUNT. Then
 * offload(fd, 0) hands the socket to the kernel: "offload off", and the next datagram is read
 * from the kernel side ("off got ..."); offload(fd, 1) takes it back: "offload on", "on got ...".
 * One held packet is freed a second time: "second free refused 1".
 *
 *   preload_extra_fd PORT COUNT
 */
#define _DEFAULT_SOURCE /* usleep under -std=c11 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vma_way.h"

#define MAX_HELD 4096

static struct rawpipe_packet held[MAX_HELD];
static unsigned n_seen, n_held;

/* Runs on the lcore: must not block or allocate. */
static int every_other(const struct rawpipe_packet *pkt, void *ctx) {
  (void)ctx;
  unsigned seen = __atomic_fetch_add(&n_seen, 1, __ATOMIC_RELAXED);
  if (seen % 2 || n_held == MAX_HELD) return RAWPIPE_RECV;
  held[n_held] = *pkt;
  __atomic_store_n(&n_held, n_held + 1, __ATOMIC_RELEASE); /* pairs with the acquire in main */
  return RAWPIPE_HOLD;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: preload_extra_fd PORT COUNT\n");
    return 2;
  }
  const int port = atoi(argv[1]);
  const unsigned count = (unsigned)atoi(argv[2]);
  struct rawpipe_socket_api *api = vma_way_api();
  if (!api) return 3;
  int fd = vma_way_bound(port);
  if (api->register_recv_callback(fd, every_other, NULL) != 0) {
    printf("register_recv_callback: %s (is the socket offloaded?)\n", strerror(errno));
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  alarm(20);
  unsigned received = 0;
  struct rawpipe_packet pkts[32];
  while (received + __atomic_load_n(&n_held, __ATOMIC_ACQUIRE) < count) {
    int n = api->recvfrom_zcopy(fd, pkts, 32, MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) {
      usleep(1000);
      continue;
    }
    if (n < 0) {
      printf("recvfrom_zcopy: %s\n", strerror(errno));
      return 1;
    }
    for (int i = 0; i < n; ++i)
      if (pkts[i].payload.iov_len == 0 || pkts[i].src.family != 4) printf("bad packet %d\n", i);
    received += (unsigned)n;
    if (api->free_packets(fd, pkts, (unsigned)n) != 0) printf("free_packets refused\n");
  }
  api->register_recv_callback(fd, NULL, NULL);
  const unsigned h = __atomic_load_n(&n_held, __ATOMIC_ACQUIRE);
  if (api->free_packets(fd, held, h) != 0) printf("free_packets of held refused\n");
  /* A packet freed twice: the second free is refused, and the exit summary counts it. */
  const int second_refused = h > 0 && api->free_packets(fd, held, 1) == -1;
  printf("second free refused %d\n", second_refused);
  api->dump_fd_stats(fd, RAWPIPE_LOG_INFO);
  /* A descriptor the kernel serves is refused, not crashed on. */
  int other = socket(AF_INET, SOCK_DGRAM, 0);
  const int refused = api->recvfrom_zcopy(other, pkts, 1, MSG_DONTWAIT) == -1 && errno == EBADF;
  printf("held %u received %u kernel-fd-refused %d\n", h, received, refused);
  close(other);
  int toggled = 1;
  for (int on = 0; on < 2; ++on) {
    if (api->offload(fd, on) != 0) {
      printf("offload(fd, %d): %s\n", on, strerror(errno));
      toggled = 0;
      break;
    }
    printf("offload %s\n", on ? "on" : "off");
    fflush(stdout);
    char buf[64] = {0};
    const ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    printf("%s got %s\n", on ? "on" : "off", n > 0 ? buf : strerror(errno));
    fflush(stdout);
    /* On af_packet the pipeline gets its own copy of that datagram. Switched on again before
     * the lcore has taken that copy from the port (and dropped it, the socket being off), the
     * copy would reach the ring too: a datagram in flight at a switch can be read twice. */
    if (!on) usleep(200 * 1000);
  }
  close(fd);
  return h + received == count && h > 0 && received > 0 && refused && second_refused && toggled ? 0 : 1;
}
