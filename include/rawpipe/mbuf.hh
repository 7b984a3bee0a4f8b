// Packet buffer metadata header.
//
// Every buffer in a pool is one fixed-size slot: this 128-byte header, then headroom, then packet
// data. The header is the first bytes of the slot so that the buffer address, the header address
// and the NIC/UMEM frame address are the same and a PMD converts between them with arithmetic.
//
// Line 0 holds what receive writes and parse/classify/dispatch read; line 1 holds what the slow
// path, transmit and the ownership auditor use. Who writes each field:
//   (rx)  the PMD's rx_burst          (parse) pipeline/parse       (cls) pipeline/classify
//   (pool) the pool on allocation      (any) whoever owns the buffer at that moment
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "rawpipe/api.h"
#include "rawpipe/compiler.hh"

namespace rawpipe {

class Pool;

// Layer-3 type found by parse.
enum class L3Type : std::uint8_t { kNone = 0, kIpv4 = 4, kIpv6 = 6 };

// Packet flags (Mbuf::flags). Parse sets the L3/L4 facts; PMDs set checksum and offload facts.
namespace pkt_flag {
inline constexpr std::uint16_t kVlan = 1u << 0;          // at least one 802.1Q/802.1ad tag
inline constexpr std::uint16_t kQinQ = 1u << 1;          // two tags
inline constexpr std::uint16_t kIpFragment = 1u << 2;    // fragment (first or later)
inline constexpr std::uint16_t kMoreFragments = 1u << 3; // IPv4 MF bit or IPv6 M flag
inline constexpr std::uint16_t kIpOptions = 1u << 4;     // IPv4 options or IPv6 extension headers
inline constexpr std::uint16_t kMulticast = 1u << 5;     // destination IP is multicast
inline constexpr std::uint16_t kL3CsumGood = 1u << 6;    // (rx) NIC verified the IPv4 header checksum
inline constexpr std::uint16_t kL4CsumGood = 1u << 7;    // (rx) NIC verified the L4 checksum
inline constexpr std::uint16_t kL3CsumBad = 1u << 8;     // (rx)
inline constexpr std::uint16_t kL4CsumBad = 1u << 9;     // (rx)
inline constexpr std::uint16_t kRssHash = 1u << 10;      // (rx) rss_hash is valid
inline constexpr std::uint16_t kFlowTag = 1u << 11;      // (rx) flow_tag is valid
inline constexpr std::uint16_t kTimestamp = 1u << 12;    // (rx) timestamp_ns is valid
inline constexpr std::uint16_t kBroadcast = 1u << 13;    // destination MAC is broadcast
inline constexpr std::uint16_t kCutByCapture = 1u << 14; // (rx) a capture file kept fewer bytes than the frame had
}  // namespace pkt_flag

// Transmit requests (Mbuf::tx_flags), set by whoever hands the packet to tx_burst, every time:
// the pool does not reset them on alloc, because that would write the header's second cache line
// for every received packet while only transmitted ones read it. Checksum requests need valid
// parse results (l3_type, l3_off, l4_off, l4_proto).
namespace tx_flag {
inline constexpr std::uint16_t kL3Csum = 1u << 0;  // the port fills the IPv4 header checksum
inline constexpr std::uint16_t kL4Csum = 1u << 1;  // the port fills the UDP/TCP checksum
inline constexpr std::uint16_t kDummy = 1u << 2;   // VMA_SND_FLAGS_DUMMY: post a send the NIC drops (keeps the path warm)
}  // namespace tx_flag

struct alignas(kCacheLine) Mbuf {
  // ---- cache line 0: receive and parse ----
  Pool* pool;               // (pool) owning pool, never changes
  std::uint32_t data_off;   // (rx) first data byte, counted from the start of this header
  std::uint32_t data_len;   // (rx) bytes of packet data
  std::uint16_t port;       // (rx) ingress port id
  std::uint16_t queue;      // (rx) ingress queue
  std::uint16_t l3_off;     // (parse) from the first data byte
  std::uint16_t l4_off;     // (parse) from the first data byte; 0 when there is no L4 header
  std::uint16_t payload_off;// (parse) first L4 payload byte (UDP/TCP payload), from the first data byte
  std::uint16_t payload_len;// (parse) UDP payload length taken from the UDP header
  std::uint16_t vlan_tci[2];// (parse) outer, inner TCI in host order
  std::uint16_t flags;      // (parse, rx) pkt_flag bits
  std::uint16_t frag_off;   // (parse) fragment offset in bytes
  L3Type l3_type;           // (parse)
  std::uint8_t l4_proto;    // (parse) IP protocol number of the last header (UDP 17, TCP 6, ...)
  std::uint8_t vlan_count;  // (parse) 0..2
  std::uint8_t drop_reason; // (parse, cls, dispatch) a DropReason, 0 while the packet is alive
  std::uint32_t rss_hash;   // (rx)
  std::uint32_t flow_tag;   // (rx) the NIC's flow mark, or the matched rule's tag
  std::uint64_t timestamp_ns;     // (rx)
  std::atomic<std::uint16_t> refcnt; // (any) holders of this buffer; returns to the pool at zero
  std::uint16_t endpoint;   // (cls) matched endpoint id, kNoEndpoint when nothing matched
  std::uint32_t index;      // (pool) slot number in the pool, never changes

  // ---- cache line 1: slow path, transmit, ownership ----
  std::uint32_t buf_len;    // (pool) whole slot size including this header
  std::uint16_t tx_flags;   // (tx) per-packet transmit requests; not reset by the pool (see tx_flag)
  std::uint16_t user_u16;   // (any) free for the current owner
  std::uint64_t user_u64;   // (any) free for the current owner (Extra API user_data)
  void* user_ptr;           // (any) free for the current owner
  std::uint64_t audit_site; // (pool) debug builds: where this buffer was last handed out
  std::uint32_t audit_owner;// (pool) debug builds: consumer id holding it
  std::uint32_t audit_state;// (pool) debug builds: free/allocated marker
  std::uint8_t reserved[24];

  static constexpr std::uint16_t kNoEndpoint = 0xffff;

  std::uint8_t* buf_addr() noexcept { return reinterpret_cast<std::uint8_t*>(this); }
  const std::uint8_t* buf_addr() const noexcept { return reinterpret_cast<const std::uint8_t*>(this); }
  std::uint8_t* data() noexcept { return buf_addr() + data_off; }
  const std::uint8_t* data() const noexcept { return buf_addr() + data_off; }
  std::uint32_t tailroom() const noexcept { return buf_len - data_off - data_len; }
};

static_assert(sizeof(Mbuf) == 2 * kCacheLine, "Mbuf header must stay two cache lines");
static_assert(offsetof(Mbuf, data_off) == 8);
static_assert(offsetof(Mbuf, l3_off) == 20);
static_assert(offsetof(Mbuf, flags) == 32);
static_assert(offsetof(Mbuf, drop_reason) == 39);
static_assert(offsetof(Mbuf, rss_hash) == 40);
static_assert(offsetof(Mbuf, timestamp_ns) == 48);
static_assert(offsetof(Mbuf, refcnt) == 56);
static_assert(offsetof(Mbuf, index) == 60, "line 0 must end with the slot index");
static_assert(offsetof(Mbuf, buf_len) == kCacheLine, "line 1 starts with buf_len");
static_assert(std::atomic<std::uint16_t>::is_always_lock_free);

inline constexpr std::uint32_t kMbufHeaderSize = sizeof(Mbuf);

// Adds `n` holders to a buffer (a HOLD, a second consumer, a transmit that keeps a copy).
inline void mbuf_ref(Mbuf* m, std::uint16_t n = 1) noexcept {
  // Relaxed: taking another reference needs no ordering; the holder already sees the buffer.
  m->refcnt.fetch_add(n, std::memory_order_relaxed);
}

// Drops one holder of each buffer; buffers whose count reaches zero return to their pool (through
// the calling thread's cache if it has one). Safe from any thread, for buffers of any pools.
// Null entries are skipped, as rte_pktmbuf_free_bulk skips them.
RAWPIPE_API void mbuf_free_bulk(Mbuf* const* bufs, unsigned n) noexcept;
inline void mbuf_free(Mbuf* m) noexcept { mbuf_free_bulk(&m, 1); }

}  // namespace rawpipe
