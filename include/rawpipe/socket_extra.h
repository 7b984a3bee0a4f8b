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

#include <stddef.h>
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
  /* XLIO's thread_offload at socket level: on = 0 leaves fd's traffic to the kernel socket (af_xdp
   * and mlx5 steer it back there; on af_packet the kernel has its own copy), and the receive calls
   * read it from there when the library reads kernel sides (with RAWPIPE_INTERFACE, see
   * docs/preload.md); 1 takes it again. 0 or -1. */
  int (*offload)(int fd, int on);

  /* ---- appended after the first release of this table: test `size` (RAWPIPE_SOCKET_API_HAS) ---- */

  /* VMA's get_socket_rings_fds: fd's ring descriptor, to wait on (epoll, poll) and to give
   * socketxtreme_poll: readable when fd has packets, and in no-lcore mode (rawpipe exec
   * --no-lcore) also when the port has some and a pass is due (socketxtreme_poll runs it).
   * Writes it when n >= 1 and returns 1, or -1 (EBADF, or EINVAL for ring_fds NULL with n > 0). */
  int (*get_socket_rings_fds)(int fd, int *ring_fds, int n);
  /* VMA's socketxtreme_poll on a ring descriptor from get_socket_rings_fds: up to n completions,
   * each a packet of the ring's socket without a copy, user_data = that socket's fd. The caller
   * owns each packet and returns it with socketxtreme_free_buff(packet.handle) (or free_packets).
   * Never blocks: 0 when nothing is waiting, and then the ring descriptor is armed, so an
   * epoll/poll on it wakes for the next packet. flags must be 0. -1 with EBADF for a descriptor
   * that is no ring descriptor (or whose socket was closed), EINVAL for bad arguments. */
  int (*socketxtreme_poll)(int ring_fd, struct rawpipe_completion *out, unsigned n, int flags);
  /* VMA's socketxtreme_ref_vma_buff / socketxtreme_free_vma_buff: the pipeline table's ref_buff
   * and free_buff, for the handles of socketxtreme_poll's packets. */
  int (*socketxtreme_ref_buff)(void *handle);
  int (*socketxtreme_free_buff)(void *handle);
  /* VMA's add_conf_rule: one offload rule ("use rawpipe udp 239.1.0.0/16:*", the grammar of
   * RAWPIPE_OFFLOAD) at the top of the list, for sockets bound from now on (not those already
   * bound, as in VMA). 0, or -1 with errno EINVAL (the reason on stderr). */
  int (*add_conf_rule)(const char *line);
};

/* Whether a table from SO_RAWPIPE_GET_API has `field` (an older library's table is shorter). */
#define RAWPIPE_SOCKET_API_HAS(api, field) (offsetof(struct rawpipe_socket_api, field) < (api)->size)

#ifdef __cplusplus
}
#endif

#endif /* RAWPIPE_SOCKET_EXTRA_H */
