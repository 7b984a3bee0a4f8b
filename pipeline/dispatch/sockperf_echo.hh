// The echo action's sockperf format: answer like a sockperf server, not like a byte mirror.
//
// sockperf (github.com/Mellanox/sockperf, src/message.h) starts every UDP payload with a 14-byte
// header packed to 2 bytes, all fields in network order:
//   offset 0  u64 sequence number
//   offset 8  u16 flags: 1 = sent by a client, 2 = pong requested, 4 = warm-up message
//   offset 10 u32 message length
// Its client ignores every reply that still has the client flag set, so a byte-exact echo makes
// ping-pong wait forever. Its server (src/server.h, server_receive_then_send) sends a reply only
// for a complete message that has the client flag and the pong flag and is not a warm-up message,
// and in the reply it clears the client flag and changes nothing else. A message whose length
// field runs past the datagram is not complete: the server waits for the rest and answers nothing.
// sockperf_reply() does the same to a frame whose addresses echo_swap() has already swapped. One
// rule of the server's is left out: it also ignores a complete message longer than its largest
// payload, a limit its command line sets (at most 65507 bytes for UDP).
//
// The UDP checksum covers the flags word (an even offset in the datagram), so it is updated
// incrementally (RFC 1624: HC' = ~(~HC + ~m + m')); a zero IPv4 UDP checksum (none sent) stays
// zero, and a result of zero is sent as 0xffff (RFC 768).
#pragma once

#include <cstdint>

#include "rawpipe/mbuf.hh"
#include "pipeline/wire/wire.hh"

namespace rawpipe {

inline constexpr std::uint32_t kSockperfHeaderSize = 14;
inline constexpr std::uint16_t kSockperfClient = 1;
inline constexpr std::uint16_t kSockperfPong = 2;
inline constexpr std::uint16_t kSockperfWarmup = 4;

// New UDP checksum after one 16-bit word of the datagram changed from `old_word` to `new_word`.
inline std::uint16_t udp_checksum_update(std::uint16_t check, std::uint16_t old_word, std::uint16_t new_word) noexcept {
  std::uint32_t sum = static_cast<std::uint16_t>(~check) + static_cast<std::uint32_t>(static_cast<std::uint16_t>(~old_word)) + new_word;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  const std::uint16_t out = static_cast<std::uint16_t>(~sum);
  return out == 0 ? 0xffff : out;
}

// True when a sockperf server would answer this parsed UDP frame; then the client flag is cleared
// in place and the UDP checksum fixed. False (frame unchanged) for anything it would not answer:
// a payload shorter than the header, a message without the client or pong flag, a warm-up message,
// a message longer than the datagram carries.
inline bool sockperf_reply(Mbuf* m) noexcept {
  if (m->payload_len < kSockperfHeaderSize ||
      std::uint32_t(m->payload_off) + kSockperfHeaderSize > m->data_len || m->l4_off == 0)
    return false;
  std::uint8_t* d = m->data();
  std::uint8_t* flags_at = d + m->payload_off + 8;
  const std::uint16_t flags = wire::load_be16(flags_at);
  if ((flags & (kSockperfClient | kSockperfPong)) != (kSockperfClient | kSockperfPong) || (flags & kSockperfWarmup))
    return false;
  if (wire::load_be32(flags_at + 2) > m->payload_len) return false;
  const std::uint16_t reply = static_cast<std::uint16_t>(flags & ~kSockperfClient);
  wire::store_be16(flags_at, reply);
  std::uint8_t* check_at = d + m->l4_off + 6;
  const std::uint16_t check = wire::load_be16(check_at);
  if (check != 0 || m->l3_type == L3Type::kIpv6) wire::store_be16(check_at, udp_checksum_update(check, flags, reply));
  return true;
}

}  // namespace rawpipe
