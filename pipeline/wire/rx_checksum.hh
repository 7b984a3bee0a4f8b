// Receive-side L4 checksums for ports whose frames carry no checksum verdict from the kernel or
// NIC (AF_XDP: an XDP program sees the frame before the stack, and veth or a local sender may hand
// it over with the checksum left to offload). A frame generated on the same host (or across a
// veth) under CHECKSUM_PARTIAL holds the folded pseudo-header sum in its checksum field, not the
// checksum; a receiver that trusts it sees a bad checksum, and an echo of it is dropped by the
// peer's kernel (UdpInCsumErrors).
#pragma once

#include <cstdint>

#include "pipeline/wire/checksum.hh"

namespace rawpipe::wire {

enum class RxL4Csum : std::uint8_t {
  kNotChecked,  // not UDP/TCP over IPv4/IPv6, a fragment, cut short, or UDP without a checksum
  kGood,        // the checksum in the frame is right
  kCompleted,   // it was the pseudo-header sum of a checksum left to offload: completed in place
  kBad,         // neither
};

// Verifies the UDP/TCP checksum of an Ethernet frame (up to two VLAN tags) and completes one left
// to offload, in place. Data path: one pass over the L4 bytes, no allocation.
inline RxL4Csum verify_or_complete_l4(std::uint8_t* frame, std::uint32_t len) noexcept {
  std::uint32_t off = 12;
  if (len < off + 2) return RxL4Csum::kNotChecked;
  std::uint16_t type = load_be16(frame + off);
  for (int tags = 0; (type == 0x8100 || type == 0x88a8) && tags < 2; ++tags) {
    off += 4;
    if (len < off + 2) return RxL4Csum::kNotChecked;
    type = load_be16(frame + off);
  }
  off += 2;
  std::uint32_t l4 = 0, l4_end = 0;
  std::uint8_t proto = 0;
  std::uint64_t pseudo = 0;
  bool v4 = false;
  if (type == 0x0800) {
    if (len < off + 20 || (frame[off] >> 4) != 4) return RxL4Csum::kNotChecked;
    const std::uint32_t ihl = (frame[off] & 0x0f) * 4u, total = load_be16(frame + off + 2);
    if (ihl < 20 || total < ihl || off + total > len) return RxL4Csum::kNotChecked;
    if (load_be16(frame + off + 6) & 0x3fff) return RxL4Csum::kNotChecked;  // fragments: no whole segment
    proto = frame[off + 9];
    l4 = off + ihl;
    l4_end = off + total;
    pseudo = ipv4_pseudo_sum(frame + off + 12, frame + off + 16, proto, l4_end - l4);
    v4 = true;
  } else if (type == 0x86dd) {
    if (len < off + 40 || (frame[off] >> 4) != 6) return RxL4Csum::kNotChecked;
    proto = frame[off + 6];  // extension headers: not checked
    l4 = off + 40;
    l4_end = l4 + load_be16(frame + off + 4);
    if (l4_end > len) return RxL4Csum::kNotChecked;
    pseudo = ipv6_pseudo_sum(frame + off + 8, frame + off + 24, proto, l4_end - l4);
  } else {
    return RxL4Csum::kNotChecked;
  }
  const std::uint32_t field = proto == 17 ? 6 : proto == 6 ? 16 : 0;
  if (!field || l4 + field + 2 > l4_end) return RxL4Csum::kNotChecked;
  std::uint8_t* csum = frame + l4 + field;
  const std::uint16_t in_frame = load_be16(csum);
  if (proto == 17 && v4 && in_frame == 0) return RxL4Csum::kNotChecked;
  const std::uint64_t data = csum_add(0, frame + l4, l4_end - l4);  // the field included
  if (csum_fold(pseudo + data) == 0) return RxL4Csum::kGood;
  // Left to offload: the field holds the folded pseudo-header sum (not complemented), which
  // csum_fold gives complemented.
  if (in_frame != static_cast<std::uint16_t>(~csum_fold(pseudo))) return RxL4Csum::kBad;
  std::uint16_t c = csum_fold(pseudo + data - in_frame);
  if (proto == 17) c = udp_checksum_on_wire(c);
  store_be16(csum, c);
  return RxL4Csum::kCompleted;
}

}  // namespace rawpipe::wire
