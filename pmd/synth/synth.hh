// synth poll-mode driver: a packet generator behind the port interface, internal types shared by
// device.cc (config and control), frames.cc (templates and flows), rx.cc and tx.cc.
//
// Receive generates frames. At start() the driver builds one frame template per (address family,
// frame size, malformation) with the frame builder (pipeline/wire/builder.hh), and one small record
// per flow (addresses, ports, their checksum contributions). Per packet rx_burst only copies a
// template into the buffer and patches the flow's addresses, ports and two checksums
// incrementally (RFC 1624): no per-packet header building, no division, no allocation.
//
// Determinism: which packets are malformed is spread evenly by an accumulator (exactly
// floor(n * fraction) of the first n packets of a queue, rounding the fraction to 1/2^32), and the
// kinds take turns. `seed` shuffles the flow order and the IMIX size sequence, so the same config
// always generates the same frames in the same order.
//
// Rate: with rate_pps set, a token bucket per queue is refilled once per burst from one clock read
// (steady_clock, a vDSO call, not a system call). Count: with `packets` set, each queue stops after
// its share and rx_burst returns 0 from then on, so tests get exact totals.
//
// Transmit counts and frees.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/buf/pool.hh"
#include "pipeline/wire/checksum.hh"
#include "pipeline/wire/wire.hh"
#include "pipeline/stats/counter.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::synth {

// Malformations, in the order of the `malformed_kinds` names.
enum class Malformed : std::uint8_t {
  kNone = 0,
  kTruncated,     // frame ends inside the IP header              -> truncated_ipv4 / truncated_ipv6
  kBadIhl,        // IPv4 IHL below 5; IPv6: hop-by-hop header longer than the packet
                  //                                              -> bad_ipv4_ihl / bad_ipv6_ext_header
  kBadLength,     // IPv4 total / IPv6 payload length beyond the frame
                  //                                              -> bad_ipv4_total_length / bad_ipv6_payload_length
  kBadUdpLength,  // UDP length beyond the IP payload             -> bad_udp_length
  kFragment,      // a non-first fragment (offset 1480, more fragments): no L4 header
  kCount
};
inline constexpr std::array<std::string_view, static_cast<std::size_t>(Malformed::kCount)> kMalformedNames = {
    "none", "truncated", "bad_ihl", "bad_length", "bad_udp_length", "fragment"};

// Everything the config says, validated; immutable once parsed.
struct Spec {
  double rate_pps = 0;            // 0: as fast as the lcore polls
  std::uint64_t packets = 0;      // 0: unlimited
  std::vector<std::uint16_t> sizes;   // frame sizes (no FCS), one per IMIX entry
  std::vector<std::uint32_t> weights; // IMIX weights, same length as sizes
  wire::MacAddr src_mac{};
  wire::MacAddr dst_mac{};
  wire::Ipv4Addr ipv4_src{}, ipv4_dst{};
  wire::Ipv6Addr ipv6_src{}, ipv6_dst{};
  std::uint32_t src_addrs = 1, dst_addrs = 1;  // consecutive addresses from the base
  std::uint16_t src_port = 0, dst_port = 0;
  std::uint32_t src_ports = 1, dst_ports = 1;  // consecutive ports from the base
  double ipv6_fraction = 0;       // share of flows that are IPv6
  std::uint8_t l4_proto = wire::kIpProtoUdp;
  std::vector<std::uint16_t> vlans;   // 0-2 VLAN ids, outer first
  double malformed_fraction = 0;
  std::vector<Malformed> malformed_kinds;
  std::uint64_t seed = 1;
  std::vector<std::uint8_t> payload_prefix;  // first bytes of every L4 payload; the rest keeps the counting pattern

  std::uint64_t flow_count() const noexcept {
    return std::uint64_t(src_addrs) * dst_addrs * src_ports * dst_ports;
  }
};

// Patch steps a template needs per packet.
namespace patch {
inline constexpr std::uint8_t kAddrs = 1u << 0;     // source and destination IP addresses
inline constexpr std::uint8_t kPorts = 1u << 1;     // L4 source and destination ports
inline constexpr std::uint8_t kIpCsum = 1u << 2;    // IPv4 header checksum
inline constexpr std::uint8_t kL4Csum = 1u << 3;    // UDP/TCP checksum
inline constexpr std::uint8_t kUdpZero = 1u << 4;   // a computed UDP checksum of 0 goes out as 0xffff
}  // namespace patch

// One prebuilt frame. Addresses and ports are zero in `bytes`; ip_sum/l4_sum are the one's
// complement sums of the template's covered words with those fields zero, so adding a flow's
// contribution and folding gives the packet's checksum.
struct alignas(kCacheLine) Template {
  std::uint16_t len = 0;          // bytes copied and the frame's data_len
  std::uint16_t addr_off = 0;     // first address byte (IPv4 src at +12, IPv6 src at +8 of L3)
  std::uint16_t addr_len = 0;     // 8 (IPv4) or 32 (IPv6)
  std::uint16_t ports_off = 0;
  std::uint16_t ip_csum_off = 0;
  std::uint16_t l4_csum_off = 0;
  std::uint8_t flags = 0;         // patch::
  std::uint32_t ip_sum = 0;
  std::uint32_t l4_sum = 0;
  std::uint8_t* bytes = nullptr;  // points into SynthFrames::storage
};

struct Flow {
  std::uint8_t addrs[32];         // src then dst, 4 or 16 bytes each, network order
  std::uint8_t ports[4];          // src then dst, network order
  std::uint32_t addr_sum = 0;     // one's complement sum of the address words (IPv4 header checksum)
  std::uint32_t l4_sum = 0;       // addresses + ports (pseudo header and L4 header)
  std::uint32_t hash = 0;         // written to Mbuf::rss_hash
  std::uint8_t ipv6 = 0;
};

// What rx needs of a flow besides its bytes, packed so a burst touches few cache lines.
struct FlowMeta {
  std::uint32_t hash = 0;
  std::uint32_t ipv6 = 0;
};

// Writes flow f's addresses, ports and checksums into d, which holds template t's bytes.
RAWPIPE_ALWAYS_INLINE void patch_flow(const Template& t, const Flow& f, std::uint8_t* d) noexcept {
  const std::uint8_t flags = t.flags;
  if (flags & patch::kAddrs) std::memcpy(d + t.addr_off, f.addrs, t.addr_len);
  if (flags & patch::kPorts) std::memcpy(d + t.ports_off, f.ports, 4);
  if (flags & patch::kIpCsum) wire::store_be16(d + t.ip_csum_off, wire::csum_fold(std::uint64_t(t.ip_sum) + f.addr_sum));
  if (flags & patch::kL4Csum) {
    std::uint16_t c = wire::csum_fold(std::uint64_t(t.l4_sum) + f.l4_sum);
    if ((flags & patch::kUdpZero) && c == 0) c = 0xffff;
    wire::store_be16(d + t.l4_csum_off, c);
  }
}

// Built by start(); read-only while lcores run.
struct SynthFrames {
  std::vector<std::uint8_t> storage;
  std::vector<Template> templates;  // index: ((kind * 2) + ipv6) * sizes + size
  std::vector<Flow> flows;
  std::vector<FlowMeta> meta;       // by flow index
  std::size_t size_count = 0;
  // With one frame size, no malformed frames and few enough flows, every flow's whole frame is
  // prebuilt (checksums included) and rx copies it as is: no per-packet patching at all.
  std::vector<std::uint8_t> flow_storage;
  const std::uint8_t* flow_frames = nullptr;  // null when not prebuilt
  std::uint32_t flow_stride = 0;              // bytes between flow frames (a multiple of 64)
  std::uint16_t flow_len = 0;
  // Copies may round up to whole 64-byte blocks: every template plus its rounding fits the data room.
  bool block_copy = false;
  const Template& at(Malformed kind, unsigned ipv6, unsigned size) const noexcept {
    return templates[((static_cast<unsigned>(kind) * 2u) + ipv6) * size_count + size];
  }
};

// Builds templates and flows for a spec. Fails when a frame does not fit `data_room`. Whole
// frames per flow are prebuilt when they take at most `prebuild_bytes`.
Result<std::unique_ptr<SynthFrames>> build_frames(const Spec& spec, std::uint32_t data_room,
                                                   std::size_t prebuild_bytes);
// Bytes of prebuilt flow frames worth keeping for `rx_queues` queues on as many lcores.
std::size_t prebuild_budget(std::uint16_t rx_queues) noexcept;

// Flow order and IMIX sequence for the queues, from the seed (deterministic).
std::vector<std::uint32_t> shuffled_flow_order(const Spec& spec);
std::vector<std::uint8_t> imix_sequence(const Spec& spec);

struct alignas(kFalseSharingRange) RxQueue {
  const SynthFrames* frames = nullptr;
  const std::uint8_t* flow_frames = nullptr;  // SynthFrames::flow_frames, or null
  const FlowMeta* meta = nullptr;
  std::uint32_t flow_stride = 0;
  std::uint16_t flow_len = 0;
  bool block_copy = false;
  Pool* pool = nullptr;
  std::uint16_t port = 0;
  std::uint16_t queue = 0;
  // This queue's flows in generation order, and the IMIX size sequence.
  const std::uint32_t* flow_order = nullptr;
  std::uint32_t flow_count = 0;
  std::uint32_t flow_pos = 0;
  const std::uint8_t* size_seq = nullptr;
  std::uint32_t size_count = 0;
  std::uint32_t size_pos = 0;
  // Malformed spacing: add `malformed_step` per packet; each carry past 2^32 makes one malformed
  // frame of kind kinds[kind_pos].
  std::uint64_t malformed_step = 0;
  std::uint64_t malformed_acc = 0;
  const Malformed* kinds = nullptr;
  std::uint32_t kind_count = 0;
  std::uint32_t kind_pos = 0;
  // Count limit: frames left; UINT64_MAX when unlimited.
  std::uint64_t remaining = 0;
  // Token bucket (rate mode only): tokens in packets, refilled from the clock once per burst.
  double rate_per_ns = 0;
  double tokens = 0;
  double bucket_depth = 0;
  std::uint64_t last_ns = 0;

  QueueCounters counters;
  std::array<std::uint64_t, static_cast<std::size_t>(Malformed::kCount)> malformed{};
  std::uint64_t ipv6_packets = 0;
};

struct alignas(kFalseSharingRange) TxQueue {
  QueueCounters counters;
};

// Burst functions, chosen once per queue by rx_queue(): full speed or rate-limited, copying whole
// prebuilt flow frames or patching templates.
std::uint16_t rx_burst_full(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t rx_burst_rate(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t rx_burst_full_flows(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t rx_burst_rate_flows(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;
std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;

}  // namespace rawpipe::synth
