/* The Extra API on sockets, in a process running under librawpipe-preload.so (`rawpipe exec`):
 * the calls of VMA's vma_api_t that take a socket fd, on rawpipe's offloaded UDP sockets.
 *
 * Finding it, as VMA's vma_get_api() does (a getsockopt on fd -1; any fd works):
 *
 *   struct rawpipe_socket_api *api = NULL;
 *   socklen_t len = sizeof api;
 *   if (getsockopt(-1, SOL_SOCKET, SO_RAWPIPE_GET_API, &api, &len) != 0 || !api)
 *     ...  not under the preload library: use plain sockets (VMA's SimulatedApi)
 *
 * Without the preload library the kernel answers (EBADF for fd -1, ENOPROTOOPT otherwise), so the
 * same program runs on kernel sockets. Each call takes a socket fd and returns -1 with errno
 * EBADF for a descriptor that is no offloaded socket (one the kernel serves: the offload rules
 * gave it to the kernel, or no port could be opened, or a forked child's copy).
 * The packets and their ownership are those of rawpipe/extra.h: a callback's RAWPIPE_HOLD or a
 * recvfrom_zcopy hands buffers to the application, which returns them with free_packets (or the
 * pipeline table's free_buff) from any thread.
 */
#ifndef RAWPIPE_SOCKET_EXTRA_H
#define RAWPIPE_SOCKET_EXTRA_H

#include <stdint.h>

#include "rawpipe/extra.h"

#ifdef __cplusplus
extern "C" {
#endif

/* getsockopt(fd, SOL_SOCKET, SO_RAWPIPE_GET_API, &ptr, &len): ptr = the table (VMA: SO_VMA_GET_API
 * 2800; XLIO: SO_XLIO_GET_API 2800). A number of its own, so a program that asks for libvma
 * learns that this is not libvma. */
#define SO_RAWPIPE_GET_API 2900
/* A send flag for send/sendto/sendmsg: warm the transmit path, send nothing (VMA_SND_FLAGS_DUMMY
 * and XLIO_SND_FLAGS_DUMMY are MSG_SYN too). */
#define RAWPIPE_SND_FLAGS_DUMMY 0x400

struct rawpipe_socket_api {
  uint32_t size;                 /* sizeof this table in the library: fields are only appended */
  uint32_t reserved;
  const rawpipe_api_t *api;      /* the pipeline-level table (rawpipe/extra.h) */
  /* The process's pipeline, for the pipeline-level calls; NULL until the first offloaded bind. */
  rawpipe_pipeline *(*pipeline)(void);
  /* The endpoint serving fd (for the pipeline-level calls), or -1 (EBADF). */
  int (*socket_endpoint)(int fd);
  /* VMA's register_recv_callback: cb runs on the lcore for each packet of fd's endpoint and
   * returns RAWPIPE_DROP, RAWPIPE_RECV (queued for recv/recvfrom_zcopy) or RAWPIPE_HOLD (the
   * application owns the buffer now). cb NULL removes it. 0 or -1. */
  int (*register_recv_callback)(int fd, rawpipe_filter_fn cb, void *ctx);
  /* VMA's recvfrom_zcopy: up to max packets of fd without a copy; blocks while none is waiting
   * unless flags has MSG_DONTWAIT or fd is O_NONBLOCK (then -1 with EAGAIN). Returns the count. */
  int (*recvfrom_zcopy)(int fd, struct rawpipe_packet *pkts, unsigned max, int flags);
  /* VMA's free_packets: returns packets of fd (from recvfrom_zcopy or held by a callback). */
  int (*free_packets)(int fd, const struct rawpipe_packet *pkts, unsigned n);
  /* VMA's dump_fd_stats: one line about fd on stderr (offloaded, endpoint, rx/tx counters, and the
   * endpoint's own line from the pipeline) when level <= RAWPIPE_LOG_LEVEL (default INFO). */
  int (*dump_fd_stats)(int fd, int level);
  /* XLIO's thread_offload at socket level: on = 0 leaves fd's traffic to the kernel socket (ports
   * that can steer it back: af_xdp, mlx5), 1 takes it again. 0 or -1. */
  int (*offload)(int fd, int on);
};

#ifdef __cplusplus
}
#endif

#endif /* RAWPIPE_SOCKET_EXTRA_H */
