/* A kernel UDP receiver for tools/bench/ndr: binds 0.0.0.0:PORT, receives with recvmmsg in
 * batches of 32 until SIGINT/SIGTERM, and prints one JSON line with the datagrams and bytes it
 * received and the socket's own count of datagrams the kernel dropped for it (SO_RXQ_OVFL: the
 * receive buffer was full), so a loss is attributed to the receiver, not guessed.
 * Usage: udp_count PORT   (prints "ready" once bound) */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: udp_count PORT\n");
    return 2;
  }
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int big = 8 << 20, one = 1;
  setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  setsockopt(s, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
  if (bind(s, (struct sockaddr *)&a, sizeof a) != 0) {
    fprintf(stderr, "udp_count: bind port %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  /* Wake every 50 ms to notice the signal without relying on EINTR timing. */
  struct timeval tv = {0, 50000};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  enum { kBatch = 32 };
  static char bufs[kBatch][2048];
  static char ctrl[kBatch][CMSG_SPACE(sizeof(uint32_t))];
  struct iovec iov[kBatch];
  struct mmsghdr msgs[kBatch];
  uint64_t got = 0, bytes = 0;
  uint32_t drops = 0;
  printf("ready\n");
  fflush(stdout);
  while (!stop) {
    for (unsigned i = 0; i < kBatch; ++i) {
      iov[i].iov_base = bufs[i];
      iov[i].iov_len = sizeof bufs[i];
      memset(&msgs[i], 0, sizeof msgs[i]);
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = ctrl[i];
      msgs[i].msg_hdr.msg_controllen = sizeof ctrl[i];
    }
    int n = recvmmsg(s, msgs, kBatch, MSG_WAITFORONE, NULL);
    for (int i = 0; i < n; ++i) {
      ++got;
      bytes += msgs[i].msg_len;
      for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) memcpy(&drops, CMSG_DATA(c), sizeof drops);
    }
  }
  printf("{\"received\": %llu, \"bytes\": %llu, \"kernel_drops\": %u}\n", (unsigned long long)got,
         (unsigned long long)bytes, drops);
  close(s);
  return 0;
}
