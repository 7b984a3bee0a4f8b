// The two DevX firmware commands the mlx5 control path issues through mlx5dv_devx_general_cmd to
// learn the minimum TX inline header the device requires, and the choice made from their answers.
//
// The reference is DPDK (DPDK/dpdk at 38f72e500b3b159eca3ba2f4ca0e46a26a7cb057):
//   drivers/common/mlx5/mlx5_devx_cmds.c  mlx5_devx_cmd_query_hca_attr: QUERY_HCA_CAP with
//       op_mod ETHERNET_OFFLOAD_CAPS (current) -> per_protocol_networking_offload_caps
//       .wqe_inline_mode; when that is VPORT_CONTEXT, QUERY_NIC_VPORT_CONTEXT ->
//       nic_vport_context.min_wqe_inline_mode (mlx5_devx_cmd_query_nic_vport_context);
//   drivers/net/mlx5/mlx5.c  mlx5_set_min_inline: L2 -> 18 bytes, NOT_REQUIRED -> none,
//       VPORT_CONTEXT -> the vport mode (NONE / L2 / IP / TCP_UDP -> 0 / 18 / 58 / 78 bytes), and
//       the PCI device id table only when the device said nothing.
// The layouts are mlx5_ifc's (DPDK drivers/common/mlx5/mlx5_prm.h, the kernel's
// include/linux/mlx5/mlx5_ifc.h): big-endian words, fields numbered from the most significant bit.
// The kernel (drivers/infiniband/hw/mlx5/devx.c devx_get_uid) lets QUERY_HCA_CAP through on any
// context but QUERY_NIC_VPORT_CONTEXT only on a DevX one, which is why the device is opened with
// mlx5dv_open_device(MLX5DV_CONTEXT_FLAGS_DEVX) first, as DPDK's mlx5_open_device
// (drivers/common/mlx5/linux/mlx5_common_os.c) does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace rawpipe::mlx5::devx {

inline constexpr std::uint16_t kCmdQueryHcaCap = 0x100;            // MLX5_CMD_OP_QUERY_HCA_CAP
inline constexpr std::uint16_t kCmdQueryNicVportContext = 0x754;   // MLX5_CMD_OP_QUERY_NIC_VPORT_CONTEXT
// MLX5_GET_HCA_CAP_OP_MOD_ETHERNET_OFFLOAD_CAPS: capability type 1 (Ethernet offloads) << 1 | current.
inline constexpr std::uint16_t kOpModEthOffloadCapsCurrent = (1u << 1) | 1u;

inline constexpr std::size_t kInSize = 16;                        // query_hca_cap_in / query_nic_vport_context_in
inline constexpr std::size_t kOutHeader = 16;                     // status, syndrome, reserved
inline constexpr std::size_t kHcaCapOutSize = kOutHeader + 4096;  // query_hca_cap_out: the capability union
inline constexpr std::size_t kNicVportOutSize = kOutHeader + 256; // query_nic_vport_context_out without the address lists

// per_protocol_networking_offload_caps.wqe_inline_mode (MLX5_CAP_INLINE_MODE_*).
enum class CapInlineMode : std::uint8_t { kL2 = 0, kVportContext = 1, kNotRequired = 2 };
// nic_vport_context.min_wqe_inline_mode (MLX5_INLINE_MODE_*); 5..7 are the inner (tunnelled)
// header modes.
enum class VportInlineMode : std::uint8_t { kNone = 0, kL2 = 1, kIp = 2, kTcpUdp = 3, kInnerL2 = 5, kInnerIp = 6, kInnerTcpUdp = 7 };

// Command mailboxes (the `in` of mlx5dv_devx_general_cmd).
void query_eth_offload_caps_in(std::uint8_t (&in)[kInSize]);
void query_nic_vport_context_in(std::uint8_t (&in)[kInSize]);

// The answer's status byte: 0 is MLX5_CMD_STAT_OK.
std::uint8_t out_status(const std::uint8_t* out);
// Fields of the answers (`out` of the sizes above, status OK).
CapInlineMode wqe_inline_mode(const std::uint8_t* hca_cap_out);
std::uint8_t min_wqe_inline_mode(const std::uint8_t* nic_vport_out);

// The inline header the device requires, as mlx5_set_min_inline decides it, or nothing when the
// device's answer does not settle it (the caller falls back to the PCI id). An inner-header mode
// leaves `error` set: rawpipe builds no tunnel-aware inline header.
struct InlineDecision {
  std::optional<std::uint16_t> bytes;
  std::string source;   // what decided it, for the path report
  std::string error;
};
InlineDecision decide_min_inline(std::optional<CapInlineMode> cap, std::optional<std::uint8_t> vport_mode);

// The PCI-id fallback of mlx5_set_min_inline: ConnectX-4 and -4 Lx and their VFs need the L2
// header inline; later devices in their default mode need none.
std::uint16_t min_inline_by_pci_id(std::uint32_t vendor_part_id);

}  // namespace rawpipe::mlx5::devx
