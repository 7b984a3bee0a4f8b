/* SocketXtreme through a socket fd, written the way the VMA seed's example is (get_socket_rings_fds
 * after bind, socketxtreme_poll on the ring descriptor, free_buff per packet), run under
 * librawpipe-preload.so. add_conf_rule first offloads PORT and keeps PORT+1 on the kernel; the
 * program then sleeps
 * in epoll_wait on the ring descriptor whenever socketxtreme_poll finds nothing, so every packet
 * after the first is a wake-up from the armed ring. Prints "xtreme received R sleeps S" and exits
 * 0 when R == COUNT.
 *
 *   preload_xtreme_fd PORT COUNT
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vma_way.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: preload_xtreme_fd PORT COUNT\n");
    return 2;
  }
  const int port = atoi(argv[1]);
  const unsigned count = (unsigned)atoi(argv[2]);
  struct rawpipe_socket_api *api = vma_way_api();
  if (!api) return 3;
  if (!RAWPIPE_SOCKET_API_HAS(api, add_conf_rule)) {
    printf("the library's table has no SocketXtreme calls\n");
    return 1;
  }
  /* A malformed rule is refused; a good one applies to the sockets bound after it. */
  const int bad_rule = api->add_conf_rule("use rawpipe tcp *:1") == -1 && errno == EINVAL;
  char rule[64];
  for (int p = port; p <= port + 1; ++p) { /* once rules exist, a socket no rule names stays on the kernel */
    snprintf(rule, sizeof rule, "use %s udp *:%d", p == port ? "rawpipe" : "os", p);
    if (api->add_conf_rule(rule) != 0) {
      printf("add_conf_rule: %s\n", strerror(errno));
      return 1;
    }
  }
  const int fd = vma_way_bound(port);
  const int kernel_fd = vma_way_bound(port + 1);
  const int kept_on_kernel = api->socket_endpoint(kernel_fd) == -1 && errno == EBADF;

  /* RX ring is available after bind() */
  int ring_fd = -1;
  if (api->get_socket_rings_fds(fd, &ring_fd, 1) < 1 || ring_fd < 0) {
    printf("get_socket_rings_fds: %s\n", strerror(errno));
    return 1;
  }
  const int not_a_ring = api->socketxtreme_poll(fd, NULL, 0, 0) == -1;
  const int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, ring_fd, &ev);
  printf("ready\n");
  fflush(stdout);
  alarm(20);

  unsigned received = 0, sleeps = 0, foreign = 0, refs_ok = 1;
  while (received < count) {
    struct rawpipe_completion comps[16];
    const int rc = api->socketxtreme_poll(ring_fd, comps, 16, 0);
    if (rc < 0) {
      printf("socketxtreme_poll: %s\n", strerror(errno));
      return 1;
    }
    if (rc == 0) { /* nothing waiting, the ring descriptor is armed: sleep */
      struct epoll_event out;
      ++sleeps;
      if (epoll_wait(ep, &out, 1, 5000) != 1) {
        printf("no wake-up after %u packets\n", received);
        break;
      }
      continue;
    }
    for (int i = 0; i < rc; ++i) {
      if ((int)comps[i].user_data != fd || comps[i].packet.payload.iov_len == 0) ++foreign;
      /* Hold one reference more, then drop both, as an application that keeps a buffer does. */
      if (i == 0) refs_ok &= api->socketxtreme_ref_buff(comps[i].packet.handle) == 0;
      if (i == 0) refs_ok &= api->socketxtreme_free_buff(comps[i].packet.handle) == 0;
      refs_ok &= api->socketxtreme_free_buff(comps[i].packet.handle) == 0;
    }
    received += (unsigned)rc;
  }
  printf("xtreme received %u sleeps %u foreign %u refs %u bad-rule-refused %d kernel-socket %d not-a-ring %d\n",
         received, sleeps, foreign, refs_ok, bad_rule, kept_on_kernel, not_a_ring);
  close(ep);
  close(kernel_fd);
  close(fd);
  return received == count && foreign == 0 && refs_ok && bad_rule && kept_on_kernel && not_a_ring ? 0 : 1;
}
