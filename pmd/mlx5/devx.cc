#include "pmd/mlx5/devx.hh"

#include <cstring>

#include <fmt/format.h>

#include "pmd/mlx5/hw.hh"

namespace rawpipe::mlx5::devx {
namespace {

void put_be16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}

std::uint32_t get_be32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) << 24 | std::uint32_t(p[1]) << 16 | std::uint32_t(p[2]) << 8 | p[3];
}

}  // namespace

// Both inputs start with opcode [0x10] at bit 0 and op_mod [0x10] at bit 0x30.
void query_eth_offload_caps_in(std::uint8_t (&in)[kInSize]) {
  std::memset(in, 0, sizeof(in));
  put_be16(in + 0, kCmdQueryHcaCap);
  put_be16(in + 6, kOpModEthOffloadCapsCurrent);
}

// other_vport = 0, vport_number = 0: this function's own vport, as DPDK queries it.
void query_nic_vport_context_in(std::uint8_t (&in)[kInSize]) {
  std::memset(in, 0, sizeof(in));
  put_be16(in + 0, kCmdQueryNicVportContext);
}

std::uint8_t out_status(const std::uint8_t* out) { return out[0]; }

// wqe_inline_mode is bits 0x12..0x13 of the capability (after the 16-byte header).
CapInlineMode wqe_inline_mode(const std::uint8_t* hca_cap_out) {
  return static_cast<CapInlineMode>((get_be32(hca_cap_out + kOutHeader) >> (32 - 0x12 - 2)) & 0x3);
}

// min_wqe_inline_mode is bits 0x5..0x7 of nic_vport_context (after the 16-byte header).
std::uint8_t min_wqe_inline_mode(const std::uint8_t* nic_vport_out) {
  return static_cast<std::uint8_t>((get_be32(nic_vport_out + kOutHeader) >> (32 - 0x5 - 3)) & 0x7);
}

InlineDecision decide_min_inline(std::optional<CapInlineMode> cap, std::optional<std::uint8_t> vport_mode) {
  InlineDecision d;
  if (!cap) return d;
  switch (*cap) {
    case CapInlineMode::kL2:
      d.bytes = kEthL2InlineHeader;
      d.source = "device: HCA wqe_inline_mode L2";
      return d;
    case CapInlineMode::kNotRequired:
      d.bytes = 0;
      d.source = "device: HCA wqe_inline_mode not required";
      return d;
    case CapInlineMode::kVportContext:
      break;
    default:
      return d;  // a value mlx5_ifc does not define: as if unreported
  }
  if (!vport_mode) return d;
  switch (static_cast<VportInlineMode>(*vport_mode)) {
    case VportInlineMode::kNone: d.bytes = 0; d.source = "device: vport min_wqe_inline_mode none"; return d;
    case VportInlineMode::kL2: d.bytes = kEthL2InlineHeader; d.source = "device: vport min_wqe_inline_mode L2"; return d;
    case VportInlineMode::kIp: d.bytes = kInlineL3; d.source = "device: vport min_wqe_inline_mode IP"; return d;
    case VportInlineMode::kTcpUdp: d.bytes = kInlineL4; d.source = "device: vport min_wqe_inline_mode TCP/UDP"; return d;
    case VportInlineMode::kInnerL2:
    case VportInlineMode::kInnerIp:
    case VportInlineMode::kInnerTcpUdp:
      d.error = fmt::format("the device requires the inner (tunnelled) headers inline (vport min_wqe_inline_mode {}); "
                            "rawpipe builds no tunnel-aware inline header: set the vport's inline mode to l2/ip/transport "
                            "(devlink dev eswitch set ... inline-mode) or give tx_inline explicitly",
                            *vport_mode);
      return d;
  }
  return d;  // 4 is reserved: as if unreported
}

std::uint16_t min_inline_by_pci_id(std::uint32_t vendor_part_id) {
  switch (vendor_part_id) {
    case 4115: case 4116: case 4117: case 4118: return kEthL2InlineHeader;
    default: return 0;
  }
}

}  // namespace rawpipe::mlx5::devx
