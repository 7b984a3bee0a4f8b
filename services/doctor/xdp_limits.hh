// Kernel facts about XDP per driver, for the MTU and zero-copy checks.
//
// Native XDP on a driver with single-page receive buffers fits a frame in one 4 KiB page after
// XDP_PACKET_HEADROOM (256) and the skb_shared_info tail (320 bytes on x86-64 since 5.x), less
// the Ethernet header: 4096 - 256 - 320 - 14 = 3506 bytes of MTU. veth (veth_xdp_set checks the
// peer's MTU), virtio_net and mana compute exactly that; ena also subtracts FCS and a VLAN tag
// (3498). Drivers not listed (ixgbe, i40e: 2 or 3 KiB buffers) are reported as unknown.
// A program loaded with frags support (SEC("xdp.frags")) lifts the limit; ours is plain "xdp".
// Generic (skb) XDP has no such limit but runs after the stack allocated an skb (slower, no
// zero-copy). AF_XDP's own limit comes from the UMEM frame: one pool buffer, at most a page.
#pragma once

#include <cstdint>
#include <string_view>

namespace rawpipe::doctor {

inline constexpr std::uint32_t kPageSize = 4096;
inline constexpr std::uint32_t kXdpHeadroom = 256;       // XDP_PACKET_HEADROOM
inline constexpr std::uint32_t kSkbSharedInfo = 320;     // SKB_DATA_ALIGN(sizeof(struct skb_shared_info)), x86-64
inline constexpr std::uint32_t kEthHeader = 14;
inline constexpr std::uint32_t kL2Overhead = 14 + 8;     // Ethernet + two VLAN tags on top of the MTU (af_xdp port)

// The largest MTU with which native XDP attaches on `driver`; 0 when we do not know the driver.
constexpr std::uint32_t native_xdp_max_mtu(std::string_view driver) {
  constexpr std::uint32_t single_page = kPageSize - kXdpHeadroom - kSkbSharedInfo - kEthHeader;  // 3506
  if (driver == "veth" || driver == "virtio_net" || driver == "mana") return single_page;
  if (driver == "ena") return single_page - 4 - 4;  // FCS and a VLAN tag: 3498
  // Linear receive queue without a frags program: about a page as well (the exact figure depends
  // on the stride configuration).
  if (driver == "mlx5_core") return single_page;
  return 0;
}

// Drivers whose AF_XDP support includes zero-copy (XDP_ZEROCOPY binds succeed).
constexpr bool driver_has_xsk_zero_copy(std::string_view driver) {
  for (std::string_view d : {"i40e", "ice", "ixgbe", "mlx5_core", "igc", "igb", "stmmac", "ena", "virtio_net",
                             "bnxt_en", "mlx4_en", "gve", "idpf", "fec", "tsnep"})
    if (driver == d) return true;
  return false;
}

// The largest MTU an af_xdp port with `buf_size`-byte pool buffers accepts: the UMEM frame is one
// buffer; our header sits at its start, the kernel keeps XDP headroom after it.
constexpr std::uint32_t af_xdp_frame_mtu(std::uint32_t buf_size, std::uint32_t mbuf_header) {
  const std::uint32_t used = mbuf_header + kXdpHeadroom + kL2Overhead;
  return buf_size > used ? buf_size - used : 0;
}

}  // namespace rawpipe::doctor
