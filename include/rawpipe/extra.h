/* rawpipe Extra API: a versioned C table of functions for applications and filter plugins that
 * want more than the config file gives them (like libvma's vma_get_api() / XLIO's xlio_get_api()).
 *
 * Finding it: call rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION). The result is NULL when this
 * library does not provide that ABI version; rawpipe_api_error() then says why, naming both
 * versions. A non-NULL table lists what it supports in `caps` (RAWPIPE_CAP_* bits); test a bit
 * before using the functions it names. Fields are only ever appended; `size` is sizeof the table
 * this library was built with, so a newer client can tell which trailing fields exist
 * (RAWPIPE_API_HAS). Appending is a minor revision (RAWPIPE_EXTRA_ABI_MINOR) and keeps the ABI
 * version; a client built against a newer minor still gets the table from an older library and
 * must test the capability bit (or RAWPIPE_API_HAS) of anything added after minor 0.
 *
 * Ownership rules (the whole contract):
 *  - A filter callback runs on an lcore thread, after parse and classify, before the packet is
 *    queued to its endpoint. It must not block or allocate. The rawpipe_packet it sees is valid
 *    only during the call. Control calls from a callback: create, start, stop, destroy and
 *    load_filter_plugin return -1 at once (they would wait for the lcores, or stall this one);
 *    every other call works (remove_rule then returns without waiting for the other lcores).
 *  - RAWPIPE_HOLD hands the buffer to the filter's owner: it must call free_buff(pkt->handle)
 *    exactly once, later, from any thread. A held packet counts as delivered to its endpoint.
 *  - recvfrom_zcopy and poll hand buffers to the caller; free_packets / free_buff return them.
 *
 * Thread-safety: control functions (create, start, stop, rules, filters, plugins, stats) from one
 * control thread at a time, except get_stats, which only reads counters and may be called from
 * any thread; receive functions from one consumer thread per endpoint; send
 * functions (alloc_tx, send_burst, sendto) from one sending thread per port; ref_buff and
 * free_buff from any thread.
 */
#ifndef RAWPIPE_EXTRA_H
#define RAWPIPE_EXTRA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rawpipe/api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RAWPIPE_EXTRA_ABI_VERSION 2u
/* ABI version 2 (version 1 had no users outside this tree, so nothing keeps it alive):
 *  - every entry point checks its arguments: a NULL or unknown handle, an unknown endpoint, port
 *    or queue, a NULL array or string give -1 (NULL) and count in rawpipe_api_counters, never a
 *    crash; with a NULL or unknown handle, last_error(NULL) says why;
 *  - ref_buff, free_buff, free_packets return a status and refuse a NULL, a pointer that is no
 *    rawpipe buffer, a buffer already free (see free_buff);
 *  - destroy returns a status and keeps the pools of buffers the application still holds;
 *  - api_counters, get_stats, drop_reason_name, endpoint_fd, arm_fd, recv_wait appended; a pipeline from create() publishes
 *    the stats segment that `rawpipe stat` reads, as `rawpipe run` does ([metrics]
 *    stats_segment = false turns it off);
 *  - the values of VMA and XLIO: verdicts DROP = 0, RECV = 1, HOLD = 2 (were RECV = 0, DROP = 1);
 *    allocator flags TX = 1 << 0, RX = 1 << 1, TX_ZC = 1 << 2 (were RX = 1 << 0, TX = 1 << 1).
 *    RAWPIPE_FILTER_PLUGIN_ABI_VERSION is 2 for the same reason.
 * Minor revisions of ABI version 2 (fields appended to rawpipe_api_t):
 *   0  the table of version 2
 *   1  port_id, alloc_tx, send_burst, sendto (RAWPIPE_CAP_SEND); struct rawpipe_stats gained the
 *      send counters at its end (sent ... neigh_learned), filled only when its size covers them
 *   2  progress, progress_fds (RAWPIPE_CAP_PROGRESS): lcores without a thread
 *   3  stats_section (RAWPIPE_CAP_STATS_SECTION): the application's figures in the stats segment */
#define RAWPIPE_EXTRA_ABI_MINOR 3u

/* Capability bits of rawpipe_api_t::caps. */
#define RAWPIPE_CAP_FILTERS (1ull << 0)       /* endpoint_filter, queue_filter */
#define RAWPIPE_CAP_ZCOPY_RECV (1ull << 1)    /* recvfrom_zcopy, free_packets, recv */
#define RAWPIPE_CAP_COMPLETIONS (1ull << 2)   /* poll, ref_buff, free_buff */
#define RAWPIPE_CAP_RULES (1ull << 3)         /* add_conf_rule, remove_rule */
#define RAWPIPE_CAP_STATS (1ull << 4)         /* dump_fd_stats */
#define RAWPIPE_CAP_PLUGINS (1ull << 5)       /* load_filter_plugin */
#define RAWPIPE_CAP_ALLOCATOR (1ull << 6)     /* set_allocator */
#define RAWPIPE_CAP_OFFLOAD (1ull << 7)       /* set_endpoint_offload */
#define RAWPIPE_CAP_WAIT (1ull << 8)          /* endpoint_fd, arm_fd, recv_wait */
#define RAWPIPE_CAP_SEND (1ull << 9)          /* port_id, alloc_tx, send_burst, sendto (minor 1) */
#define RAWPIPE_CAP_PROGRESS (1ull << 10)     /* progress, progress_fds (minor 2) */
#define RAWPIPE_CAP_STATS_SECTION (1ull << 11) /* stats_section (minor 3) */

/* Filter verdicts, with the values of VMA's vma_recv_callback_retval_t (VMA_PACKET_DROP = 0,
 * VMA_PACKET_RECV = 1, VMA_PACKET_HOLD = 2), so a ported callback that returns VMA's enum or a
 * literal keeps its meaning (version 1 had RECV = 0, DROP = 1). Any other value returned by a
 * filter is counted as filter_invalid_verdict and the packet is dropped. */
enum rawpipe_verdict { RAWPIPE_DROP = 0, RAWPIPE_RECV = 1, RAWPIPE_HOLD = 2 };

/* An address as received: family 4 or 6 (0 when the packet has no IP header); IPv4 in the first
 * 4 bytes of addr, network byte order; port in host byte order (0 without UDP/TCP). */
struct rawpipe_addr {
  uint8_t family;
  uint8_t reserved;
  uint16_t port;
  uint8_t addr[16];
};

/* One received packet as a filter or a receiver sees it. */
struct rawpipe_packet {
  struct iovec payload;      /* UDP/TCP payload (the whole frame when there is no L4 header) */
  struct iovec frame;        /* the whole frame from the Ethernet header */
  struct rawpipe_addr src;
  struct rawpipe_addr dst;
  uint16_t ingress_port;
  uint16_t ingress_queue;
  uint16_t endpoint;         /* matched endpoint id */
  uint16_t vlan_tci;         /* outer tag, host order; valid when vlan_count > 0 */
  uint8_t vlan_count;
  uint8_t l4_proto;          /* IP protocol number (17 UDP, 6 TCP) */
  uint16_t flags;            /* RAWPIPE_PKT_* bits */
  uint32_t rss_hash;         /* valid with RAWPIPE_PKT_RSS_HASH */
  uint32_t flow_tag;         /* valid with RAWPIPE_PKT_FLOW_TAG */
  uint64_t timestamp_ns;     /* valid with RAWPIPE_PKT_TIMESTAMP */
  void *user_ctx;            /* the ctx given when the callback/endpoint was registered */
  void *handle;              /* the buffer: pass to ref_buff / free_buff / free_packets */
};

#define RAWPIPE_PKT_VLAN (1u << 0)
#define RAWPIPE_PKT_MULTICAST (1u << 5)
#define RAWPIPE_PKT_RSS_HASH (1u << 10)
#define RAWPIPE_PKT_FLOW_TAG (1u << 11)
#define RAWPIPE_PKT_TIMESTAMP (1u << 12)

/* A completion from poll(): the packet plus the endpoint's user_data. */
struct rawpipe_completion {
  struct rawpipe_packet packet;
  uint64_t user_data;        /* set with set_user_data for the endpoint */
};

/* Per-packet filter: returns a rawpipe_verdict. */
typedef int (*rawpipe_filter_fn)(const struct rawpipe_packet *pkt, void *ctx);
/* Burst filter: writes verdicts[0..n). Every entry starts as RAWPIPE_RECV. */
typedef void (*rawpipe_filter_burst_fn)(const struct rawpipe_packet *pkts, int *verdicts, unsigned n, void *ctx);

/* Memory for pool regions. alloc must return 4 KiB-aligned memory or NULL. */
typedef void *(*rawpipe_alloc_fn)(size_t bytes, void *ctx);
typedef void (*rawpipe_free_fn)(void *addr, void *ctx);
/* Which pools use it, with the values of XLIO's IOCTL_USER_ALLOC_TX / _RX / _TX_ZC (version 1 had
 * RX = 1 << 0, TX = 1 << 1): RX = pools some port receives into (their buffers are also what echo
 * and forward transmit); TX = pools no port receives into (buffers the application allocates to
 * send). rawpipe transmits every buffer without a copy, so TX_ZC selects the same pools as TX;
 * either bit is enough. */
#define RAWPIPE_ALLOC_TX (1u << 0)
#define RAWPIPE_ALLOC_RX (1u << 1)
#define RAWPIPE_ALLOC_TX_ZC (1u << 2)

#define RAWPIPE_ANY_ENDPOINT 0xffffu

/* Log levels for dump_fd_stats. */
enum rawpipe_log_level { RAWPIPE_LOG_ERROR = 0, RAWPIPE_LOG_WARN = 1, RAWPIPE_LOG_INFO = 2, RAWPIPE_LOG_DEBUG = 3 };

typedef struct rawpipe_pipeline rawpipe_pipeline;

/* ---- Statistics through the API (get_stats) ---- */
#define RAWPIPE_STATS_MAX_DROP_REASONS 32u

struct rawpipe_endpoint_stats {
  char name[32];          /* NUL-terminated, truncated */
  uint16_t id;
  uint8_t action;         /* 0 ring, 1 sink, 2 echo, 3 forward */
  uint8_t offloaded;      /* set_endpoint_offload state */
  uint32_t reserved;
  uint64_t delivered;     /* queued to its ring, counted by its sink, or held by a filter */
  uint64_t queued;        /* in its rings now, not yet received (VMA's socket_ready_queue_pkt_count) */
  uint64_t ring_full;     /* dropped: its ring was full (the consumer did not keep up) */
  uint64_t wakeups;       /* times an lcore signalled its descriptor (endpoint_fd) */
};

struct rawpipe_filter_stats {
  char name[48];          /* plugin name, the callback's symbol, or its address */
  uint8_t on_queue;       /* attached to (port, queue), else to endpoint */
  uint8_t attached;       /* still the filter of its attachment point (else: removed ones, summed) */
  uint16_t endpoint;
  uint16_t port;
  uint16_t queue;
  uint64_t seen, recv, drop, hold, invalid;
};

struct rawpipe_pool_stats {
  char name[32];
  uint32_t count;         /* buffers in the pool */
  uint32_t outstanding;   /* not back in the pool (held by ports, lcores, rings, the application) */
};

/* Versioned by size: set size = sizeof(struct rawpipe_stats), and give arrays (or NULL) with
 * their capacity in *_max; the library fills what fits and says in n_* how many there are. */
struct rawpipe_stats {
  uint32_t size;
  uint32_t n_drop_reasons;                        /* out: entries of drops[] in use */
  uint64_t rx_packets;
  uint64_t rx_bytes;
  uint64_t delivered;
  uint64_t transmitted;
  uint64_t dropped;                               /* sum of drops[] */
  uint64_t drops[RAWPIPE_STATS_MAX_DROP_REASONS]; /* by reason: drop_reason_name(i) */
  struct rawpipe_endpoint_stats *endpoints;
  uint32_t endpoints_max;
  uint32_t n_endpoints;
  struct rawpipe_filter_stats *filters;
  uint32_t filters_max;
  uint32_t n_filters;
  struct rawpipe_pool_stats *pools;
  uint32_t pools_max;
  uint32_t n_pools;
  uint32_t reserved;
  /* minor 1: the application's sends over all ports (send_burst, sendto). Not part of rx:
   * rx == delivered + transmitted + dropped holds without them. Once the lcores have drained
   * the hand-off rings, every frame the library took is in sent or send_failed, or is a dummy
   * counted without posting (dummy_sends - dummies_posted); send_refused counts what it did not
   * take (left with the caller of send_burst, or a sendto that returned ENOBUFS). */
  uint64_t sent;               /* frames the transmit queues took (posted dummies included) */
  uint64_t sent_bytes;
  uint64_t send_failed;        /* taken, but the tx queue did not take them, or the pipeline stopped first */
  uint64_t dummy_sends;        /* RAWPIPE_SEND_DUMMY frames */
  uint64_t dummies_posted;     /* of those, handed to a port that posts them as no-ops (mlx5 NOP WQE) */
  uint64_t neigh_solicits;     /* ARP requests / neighbour solicitations sendto sent */
  uint64_t unresolved;         /* sendto calls refused with EAGAIN */
  uint64_t neigh_learned;      /* mappings the ports' neighbour caches learnt */
  uint64_t send_refused;       /* not taken: the hand-off ring was full (the lcore did not keep up) */
};

/* ---- Sending (RAWPIPE_CAP_SEND, minor 1) ---- */

/* A transmit buffer. alloc_tx fills every field (len 0); the application writes the frame from
 * `data` (room bytes are free there) and sets len. To send a received or held packet back out,
 * give {pkt.handle, pkt.frame.iov_base, pkt.frame.iov_len, 0}: data may point anywhere inside the
 * buffer's data area (a frame may start earlier or later than where it was received). */
struct rawpipe_tx_buf {
  void *handle;     /* the buffer (as rawpipe_packet.handle) */
  uint8_t *data;    /* first byte of the Ethernet frame */
  uint32_t len;     /* frame length, from 14 bytes (an Ethernet header) */
  uint32_t room;    /* alloc_tx: bytes available from data; ignored by send_burst */
};

/* send_burst / sendto flags. */
#define RAWPIPE_SEND_CSUM (1u << 0)   /* fill the IPv4 header and UDP/TCP checksums in software */
#define RAWPIPE_SEND_DUMMY (1u << 1)  /* VMA's dummy send: warm the transmit path, put nothing on the
                                       * wire. Ports that can post a no-op (mlx5: a NOP WQE) do;
                                       * on the others the frame is counted and freed at once. */
#define RAWPIPE_SEND_MAX_BURST 256u   /* most buffers one send_burst call takes */

/* Refused calls, process-wide since the library loaded. Versioned by size: set size to
 * sizeof(struct rawpipe_api_counters) before the call; the library fills the fields it knows
 * that fit and leaves the rest alone. */
struct rawpipe_api_counters {
  uint32_t size;
  uint32_t reserved;
  uint64_t bad_handle;         /* NULL or unknown rawpipe_pipeline handle */
  uint64_t bad_argument;       /* unknown endpoint/port/queue/plugin, NULL array or string, bad flags */
  uint64_t free_null;          /* free_buff / free_packets / ref_buff of NULL */
  uint64_t free_foreign;       /* a pointer into no pool, into a header, or a header naming another pool */
  uint64_t free_already_free;  /* a buffer in its pool, or freed already and on its way back */
  uint64_t free_payload_mapped;/* a payload pointer, accepted and mapped to its buffer (not an error) */
  uint64_t from_callback;      /* create/start/stop/destroy/load_filter_plugin from a filter callback */
};

typedef struct rawpipe_api {
  uint32_t abi_version;      /* RAWPIPE_EXTRA_ABI_VERSION of the library */
  uint32_t size;             /* sizeof(rawpipe_api_t) of the library */
  uint64_t caps;             /* RAWPIPE_CAP_* */

  /* Life cycle. Errors: NULL / negative, with last_error() saying why. */
  rawpipe_pipeline *(*create)(const char *config_file);
  int (*start)(rawpipe_pipeline *p);
  int (*stop)(rawpipe_pipeline *p);
  /* Frees the handle; an owned pipeline (from create) is stopped and freed; a wrapped one that
   * still runs with plugins loaded is stopped first (their code is unloaded here). Buffers the
   * application still holds stay valid: the pools they belong to are kept until the last of them
   * is freed (free_buff, or free_packets with p = NULL, since the handle is gone), then their
   * memory goes (to the user allocator's free, if any). Returns 0, or -1 for a NULL or unknown
   * handle or a call from a filter callback. */
  int (*destroy)(rawpipe_pipeline *p);
  /* Why the calling thread's last failed call on p failed (per thread, like errno; "" when this
   * thread has had no failure on p); with NULL or an unknown handle, why the last call of this
   * thread that had no live handle failed. */
  const char *(*last_error)(const rawpipe_pipeline *p);
  int (*endpoint_id)(const rawpipe_pipeline *p, const char *name);  /* -1 when unknown */

  /* Filters (RAWPIPE_CAP_FILTERS). Give fn or burst (not both); NULL for both removes. Usable
   * while lcores run: a replaced filter is released once every lcore has finished its pass, and
   * when 256 replaced ones are already waiting for that, the call (and set_endpoint_offload)
   * waits for the lcores' next pass, except from a filter callback. */
  int (*endpoint_filter)(rawpipe_pipeline *p, uint16_t endpoint, rawpipe_filter_fn fn, rawpipe_filter_burst_fn burst,
                         void *ctx);
  int (*queue_filter)(rawpipe_pipeline *p, uint16_t port, uint16_t queue, rawpipe_filter_fn fn,
                      rawpipe_filter_burst_fn burst, void *ctx);

  /* Receive (RAWPIPE_CAP_ZCOPY_RECV), for ring endpoints (on a sink, echo or forward endpoint
   * they return -1 with errno EOPNOTSUPP: nothing is ever queued there). recvfrom_zcopy returns
   * how many packets it wrote to pkts (0: none waiting); free_packets returns them to their pools,
   * through the lcores that received them while the pipeline runs (one consumer thread per
   * endpoint). recv copies one packet's payload into buf (truncating, like recvfrom) and frees
   * the buffer; like a non-blocking recvfrom it returns the bytes copied (0 for an empty
   * datagram), or -1 with errno EAGAIN when none is waiting (EBADF, EINVAL, EOPNOTSUPP for a bad
   * handle, endpoint or buffer); src may be NULL.
   * free_packets checks each handle as free_buff does; it frees every good one and returns 0, or
   * -1 when it refused any (last_error says which and why). p may be NULL (after destroy): the
   * buffers then go straight to their pools. */
  int (*recvfrom_zcopy)(rawpipe_pipeline *p, uint16_t endpoint, struct rawpipe_packet *pkts, unsigned max);
  int (*free_packets)(rawpipe_pipeline *p, const struct rawpipe_packet *pkts, unsigned n);
  long (*recv)(rawpipe_pipeline *p, uint16_t endpoint, void *buf, size_t len, struct rawpipe_addr *src);

  /* Completions (RAWPIPE_CAP_COMPLETIONS): poll one endpoint or RAWPIPE_ANY_ENDPOINT. */
  int (*set_user_data)(rawpipe_pipeline *p, uint16_t endpoint, uint64_t user_data);
  int (*poll)(rawpipe_pipeline *p, uint16_t endpoint, struct rawpipe_completion *out, unsigned max);
  /* ref_buff adds a holder, free_buff drops one (the buffer returns to its pool at zero); from
   * any thread. Both return 0, or -1 (last_error(NULL) says why, a counter in api_counters)
   * without touching anything for: NULL; a pointer into no rawpipe pool, into a buffer's header
   * or between buffers; a buffer already free (also one freed by another thread at the same
   * time: one of the two frees wins). A pointer into a buffer's data (the payload iov_base, as
   * VMA applications keep) is mapped to its buffer and accepted (counted as payload_mapped). A
   * buffer freed and handed out again cannot be told from a live one: a late second free then
   * frees the new holder's buffer, as with any allocator. */
  int (*ref_buff)(void *handle);
  int (*free_buff)(void *handle);

  /* Rules at run time (RAWPIPE_CAP_RULES): "ENDPOINT: RULE" in the grammar of docs/rules.md.
   * Returns the rule id (> 0) for remove_rule, or -1. */
  long (*add_conf_rule)(rawpipe_pipeline *p, const char *line);
  int (*remove_rule)(rawpipe_pipeline *p, uint32_t rule_id);

  /* Stats (RAWPIPE_CAP_STATS): one line per endpoint (delivered, queued, ring_full, rules,
   * user_data; at RAWPIPE_LOG_DEBUG also its filters), to stderr, when level <= the
   * RAWPIPE_LOG_LEVEL environment variable (default RAWPIPE_LOG_INFO). RAWPIPE_ANY_ENDPOINT
   * dumps every endpoint (0 is endpoint 0, not all). */
  int (*dump_fd_stats)(rawpipe_pipeline *p, uint16_t endpoint, int level);

  /* Plugins (RAWPIPE_CAP_PLUGINS): path is a file path or a bare name looked for as the config's
   * [[filters]] path is (the pipeline's [run] plugin_dirs, RAWPIPE_PLUGIN_PATH, the build's and
   * the install's plugin directories); attach "endpoint NAME" or "queue PORT:QUEUE", refused when
   * that point already has a filter (as the config refuses two); config is n key/value strings
   * handed to the plugin. */
  /* Returns the plugin's number (>= 0) for plugin_report, or -1. Plugins stay loaded until
   * destroy(). */
  int (*load_filter_plugin)(rawpipe_pipeline *p, const char *path, const char *attach, const char *const *keys,
                            const char *const *values, unsigned n);
  /* The plugin's one-line summary into buf; returns its length or -1. */
  int (*plugin_report)(rawpipe_pipeline *p, int plugin, char *buf, size_t len);

  /* User allocator (RAWPIPE_CAP_ALLOCATOR) for the pools of pipelines create() builds from now
   * on (process-wide, like libvma's, so set it before create). alloc NULL restores rawpipe's own
   * memory (hugepages or anonymous). free is called with each region at destroy. Returns -1 for
   * bad flags. */
  int (*set_allocator)(rawpipe_alloc_fn alloc, rawpipe_free_fn free, void *ctx, uint32_t flags);

  /* ---- appended while ABI version 1 was current (all part of version 2 minor 0) ---- */

  /* Offload on/off for one endpoint while lcores run (RAWPIPE_CAP_OFFLOAD; XLIO's
   * thread_offload at the ring level). on = 0: ports that can leave traffic to the kernel (AF_XDP
   * with its steering program, mlx5 flow rules) stop steering the endpoint's rules to rawpipe, so
   * the kernel stack receives that traffic; on other ports (synth, pcap, AF_PACKET, MANA) its
   * packets are dropped and counted as endpoint_offload_off. on = 1 restores it. Returns 0 or -1. */
  int (*set_endpoint_offload)(rawpipe_pipeline *p, uint16_t endpoint, int on);

  /* Process-wide counts of calls the API refused (see struct rawpipe_api_counters); out->size
   * must be set by the caller. Returns 0, or -1 for a NULL out or a size below the first
   * fields. */
  int (*api_counters)(struct rawpipe_api_counters *out);

  /* Statistics (RAWPIPE_CAP_STATS): rx, drops by reason, per endpoint delivered / queued /
   * ring_full, per filter verdicts, buffers outstanding per pool (struct rawpipe_stats). Any
   * thread, while lcores run. Returns 0, or -1 for a bad handle, NULL out or a size below
   * offsetof(struct rawpipe_stats, endpoints). */
  int (*get_stats)(rawpipe_pipeline *p, struct rawpipe_stats *out);
  /* The name of drop reason i ("no_match", "filter_drop", "endpoint_ring_full", ...), NULL
   * beyond the last. */
  const char *(*drop_reason_name)(unsigned reason);

  /* Waiting (RAWPIPE_CAP_WAIT), for ring endpoints. endpoint_fd gives a descriptor for
   * epoll/poll/select that becomes readable when packets are waiting: an eventfd per endpoint,
   * or with RAWPIPE_ANY_ENDPOINT an epoll descriptor over every ring endpoint's. It signals only
   * while armed: when the consumer runs out of packets it calls arm_fd, and sleeps unless that
   * returned 1 (packets already waiting; then receive again). An lcore writes the eventfd once
   * per arming and never while the consumer busy-polls. The descriptors belong to the handle
   * (destroy closes them); one consumer thread per endpoint. Both return -1 for a bad handle or
   * a non-ring endpoint.
   * recv_wait is recvfrom_zcopy that sleeps (on the descriptor) up to timeout_ms while nothing is
   * waiting (-1: no limit); it returns the packets received, 0 on timeout, -1 on error. With
   * RAWPIPE_ANY_ENDPOINT it receives from every ring endpoint (each packet's `endpoint` says
   * which), taking turns as poll does, and sleeps on the any-endpoint descriptor. */
  int (*endpoint_fd)(rawpipe_pipeline *p, uint16_t endpoint);
  int (*arm_fd)(rawpipe_pipeline *p, uint16_t endpoint);
  int (*recv_wait)(rawpipe_pipeline *p, uint16_t endpoint, struct rawpipe_packet *pkts, unsigned max,
                   int timeout_ms);

  /* ---- ABI 2 minor 1: sending (RAWPIPE_CAP_SEND) ----
   *
   * Frames go out on a port's transmit queue without a copy. Transmit queues belong to lcores, so
   * a send hands the buffers to the lcore that owns a queue on the port (the one that forwards,
   * echoes or answers ARP there, else the one that polls it) through a ring, and that lcore
   * transmits them on its next loop pass: a send returns before the frame is on the wire. One
   * sending thread per port: a second thread sending on the same port while a call is in
   * progress gets -1 with EBUSY. The pipeline must be running (else -1 with ENETDOWN; stop waits
   * for a send in progress); a port without a transmit path (tx_queues = 0, no lcore) gives -1
   * with EOPNOTSUPP. Every failure sets errno and last_error(p); counters are in get_stats (sent,
   * send_failed, dummy_sends, ...).
   *
   * port_id: a port's id by its [[ports]] name, or -1. */
  int (*port_id)(const rawpipe_pipeline *p, const char *name);
  /* Allocates n transmit buffers for `port` from the pool that port receives into (its AF_XDP
   * UMEM, its registered memory on mlx5 and MANA), so no driver copies them. All or nothing:
   * returns n, or -1 with ENOBUFS when fewer are free (nothing taken). The caller owns them: it
   * sends them (send_burst) or frees them (free_buff). */
  int (*alloc_tx)(rawpipe_pipeline *p, uint16_t port, struct rawpipe_tx_buf *bufs, unsigned n);
  /* Sends bufs[0..n) (n <= RAWPIPE_SEND_MAX_BURST) on `port`, zero-copy: buffers from alloc_tx,
   * or received / held buffers sent back out (forward, reflect). Each handle is checked as
   * free_buff checks it, data/len must lie inside its buffer's data area, and a buffer listed
   * twice needs as many references (ref_buff); any bad entry refuses the whole call (-1 with
   * EINVAL, nothing sent, the caller still owns every buffer). Otherwise, like rte_eth_tx_burst,
   * it returns k: bufs[0..k) now belong to the library (never free them), bufs[k..n) did not fit
   * in the port's hand-off ring (its lcore is behind; counted in send_refused) and are still the
   * caller's, to send again or free. flags: RAWPIPE_SEND_CSUM, RAWPIPE_SEND_DUMMY. */
  int (*send_burst)(rawpipe_pipeline *p, uint16_t port, const struct rawpipe_tx_buf *bufs, unsigned n,
                    uint32_t flags);
  /* A copying send of one UDP datagram to dst (family 4 or 6, port in host order): rawpipe
   * builds Ethernet/IP/UDP with checksums in a buffer of the port's pool. Source: src->addr when
   * src->family is set, else the port's first `addresses` entry of dst's family; source UDP port
   * src->port, or dst->port when src is NULL. Destination MAC: the port's next_hop_mac when it is
   * configured; the group MAC for a multicast or broadcast dst; else the port's neighbour cache,
   * which learns from the ARP and ND frames the lcores see on the port (ports with `addresses`).
   * When dst is not resolved yet, sendto sends an ARP request (IPv4) or a neighbour solicitation
   * (IPv6), at most one per destination per 100 ms, and returns -1 with errno EAGAIN: call again
   * (the answer arrives through the pipeline within a round trip). Returns len, or -1 with errno:
   * EAGAIN (unresolved), EADDRNOTAVAIL (no source address), EMSGSIZE (does not fit a buffer),
   * ENOBUFS (pool empty or hand-off ring full), EINVAL, EBADF, EBUSY, ENETDOWN, EOPNOTSUPP.
   * flags: RAWPIPE_SEND_DUMMY. */
  long (*sendto)(rawpipe_pipeline *p, uint16_t port, const void *buf, size_t len, const struct rawpipe_addr *dst,
                 const struct rawpipe_addr *src, uint32_t flags);

  /* ---- ABI 2 minor 2: lcores without a thread (RAWPIPE_CAP_PROGRESS) ----
   *
   * An [[lcores]] entry with `thread = false` gets no thread: the application's threads run its
   * loop passes (receive, parse, classify, filters, dispatch, the application's sends) while they
   * wait, as VMA's receive calls poll their ring, so no core spins unless a thread is waiting.
   * progress runs one pass of each such lcore that no other thread is running at that moment and
   * returns the packets it received (0 also when another thread holds every such lcore: its pass
   * delivers what arrived); -1 for a bad handle. Call it while an endpoint's ring is empty, then
   * receive again. It is refused (-1) from a filter callback.
   * progress_fds writes up to max descriptors that poll readable while a queue of those lcores
   * has packets waiting (level-triggered; they only say "call progress") and returns how many
   * there are, possibly more than max. A thread that wants to sleep waits on them together with
   * its endpoints' descriptors (endpoint_fd, armed with arm_fd). -1 when a queue's driver offers
   * no such descriptor (last_error names it): wait with a timeout and call progress on waking.
   * The descriptors belong to the ports; they are valid while the pipeline runs. */
  int (*progress)(rawpipe_pipeline *p);
  int (*progress_fds)(rawpipe_pipeline *p, int *fds, unsigned max);

  /* ---- ABI 2 minor 3: the application's figures in the stats segment (RAWPIPE_CAP_STATS_SECTION) ----
   *
   * A pipeline from create() publishes the document `rawpipe stat` reads once per stats interval
   * ([run] stats_interval, 0.1 s at the least). stats_section adds the application's own part to
   * it, under "sections" -> name, as the preload library adds its sockets: on every publish, on
   * the library's publishing thread, fn(ctx, buf, cap) writes one JSON value into buf (not
   * NUL-terminated) and returns its length. A return above cap asks for a buffer of that size
   * (up to RAWPIPE_STATS_SECTION_MAX): fn is called once more with it. A negative return leaves
   * the section out of that document; text that is not JSON is published as {"error": ...}.
   * fn runs while control threads make their calls: it may call get_stats, nothing else on p.
   * The last call comes from destroy (the final document, "running": false), where get_stats
   * fails: the handle is already gone.
   * name: 1 to 63 of [A-Za-z0-9_-]; a second call with the same name replaces the section; fn
   * NULL removes it, and fn is not called after that returns. At most 16 sections. Returns 0, or
   * -1 with errno: EINVAL (a bad name), ENOSPC (16 sections), ENOENT (this pipeline publishes no
   * segment: [metrics] stats_segment = false, /dev/shm unusable, or a handle over a pipeline
   * the caller made). */
  int (*stats_section)(rawpipe_pipeline *p, const char *name, long (*fn)(void *ctx, char *buf, size_t cap),
                       void *ctx);
} rawpipe_api_t;

/* The largest section stats_section publishes. */
#define RAWPIPE_STATS_SECTION_MAX (1u << 20)

/* Whether a table from rawpipe_get_api() has `field` (it may come from an older minor revision). */
#define RAWPIPE_API_HAS(api, field) (offsetof(rawpipe_api_t, field) < (api)->size)

/* NULL when `abi_version` is not provided by this library (rawpipe_api_error() says why). */
RAWPIPE_API const rawpipe_api_t *rawpipe_get_api(uint32_t abi_version);
RAWPIPE_API const char *rawpipe_api_error(void);

#ifdef __cplusplus
}
#endif

#endif /* RAWPIPE_EXTRA_H */
