/* What the C programs in this directory do first, the way VMA programs do: find the socket table
 * (VMA's vma_get_api is a getsockopt on fd -1), and bind a UDP socket on the wildcard. */
#ifndef RAWPIPE_TESTS_PRELOAD_VMA_WAY_H
#define RAWPIPE_TESTS_PRELOAD_VMA_WAY_H

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rawpipe/socket_extra.h"

/* The table, or NULL after printing why (not under the preload library: plain sockets). */
static inline struct rawpipe_socket_api *vma_way_api(void) {
  struct rawpipe_socket_api *api = NULL;
  socklen_t len = sizeof api;
  if (getsockopt(-1, SOL_SOCKET, SO_RAWPIPE_GET_API, &api, &len) != 0 || !api) {
    printf("no rawpipe socket API (%s): plain sockets\n", strerror(errno));
    return NULL;
  }
  return api;
}

/* A UDP socket bound to *:port; exits 1 when bind fails. */
static inline int vma_way_bound(int port) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY)};
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    printf("bind %d: %s\n", port, strerror(errno));
    exit(1);
  }
  return fd;
}

#endif
