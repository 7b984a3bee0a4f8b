// ConnectX (mlx5) descriptor layouts as the device reads and writes them.
//
// Every multi-byte field is big-endian in memory; the structs hold raw device-order values and the
// be*/from_be* helpers convert. The layouts mirror rdma-core's mlx5dv.h (the public contract)
// plus the Ethernet meanings of fields that mlx5dv.h leaves as reserved bytes (DPDK's mlx5_prm.h
// names them). When the rdma-core headers are installed, every size and offset is cross-checked
// against mlx5dv.h's structs below, so a mistake here fails the build.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace rawpipe::mlx5 {

constexpr std::uint16_t be16(std::uint16_t v) noexcept { return __builtin_bswap16(v); }
constexpr std::uint32_t be32(std::uint32_t v) noexcept { return __builtin_bswap32(v); }
constexpr std::uint64_t be64(std::uint64_t v) noexcept { return __builtin_bswap64(v); }
static_assert(std::endian::native == std::endian::little, "the helpers assume a little-endian host");

// ---- completion queue entries ----

inline constexpr std::uint32_t kCqeSize = 64;

// CQE opcodes (op_own bits 4..7).
inline constexpr std::uint8_t kCqeReq = 0x0;       // send completion
inline constexpr std::uint8_t kCqeRespSend = 0x2;  // receive completion
inline constexpr std::uint8_t kCqeReqErr = 0xd;
inline constexpr std::uint8_t kCqeRespErr = 0xe;
inline constexpr std::uint8_t kCqeInvalid = 0xf;
inline constexpr std::uint8_t kCqeInvalidOpOwn = kCqeInvalid << 4;  // how rdma-core initialises a CQ
inline constexpr std::uint8_t kCqeFormatCompressed = 3;             // op_own bits 2..3

// Error syndromes (mlx5_err_cqe.syndrome).
inline constexpr std::uint8_t kSyndromeLocalLength = 0x01;
inline constexpr std::uint8_t kSyndromeLocalQpOp = 0x02;
inline constexpr std::uint8_t kSyndromeLocalProt = 0x04;
inline constexpr std::uint8_t kSyndromeWrFlush = 0x05;
inline constexpr std::uint8_t kSyndromeLocalAccess = 0x11;

// hds_ip_ext bits
inline constexpr std::uint8_t kCqeL2Ok = 1u << 0;
inline constexpr std::uint8_t kCqeL3Ok = 1u << 1;
inline constexpr std::uint8_t kCqeL4Ok = 1u << 2;
// l4_hdr_type_etc: bit 0 CVLAN stripped, bits 2..3 L3 type, bits 4..6 L4 type, bit 7 fragment
inline constexpr std::uint8_t kCqeVlanStripped = 1u << 0;
inline constexpr std::uint8_t kCqeL3Ipv6 = 1u << 2;
inline constexpr std::uint8_t kCqeL3Ipv4 = 2u << 2;
inline constexpr std::uint8_t kCqeL3Mask = 3u << 2;
inline constexpr std::uint8_t kCqeL4Tcp = 1u << 4;
inline constexpr std::uint8_t kCqeL4Udp = 2u << 4;
inline constexpr std::uint8_t kCqeL4Mask = 7u << 4;

// Striding RQ byte_cnt fields.
inline constexpr std::uint32_t kMprqLenMask = 0xffff;
inline constexpr std::uint32_t kMprqStrideShift = 16;
inline constexpr std::uint32_t kMprqStrideMask = 0x3fff;
inline constexpr std::uint32_t kMprqFiller = 1u << 31;

inline constexpr std::uint32_t kFlowTagMask = 0x00ffffff;  // sop_drop_qpn low 24 bits on RX

struct Cqe64 {
  std::uint8_t pkt_info;            // 0
  std::uint8_t rsvd1;               // 1
  std::uint16_t wqe_id;             // 2  striding RQ: WQE index
  std::uint8_t lro[8];              // 4
  std::uint32_t rx_hash_res;        // 12 RSS hash
  std::uint8_t rx_hash_type;        // 16
  std::uint8_t ml_path;             // 17
  std::uint8_t rsvd18[2];           // 18
  std::uint16_t csum;               // 20
  std::uint16_t slid;               // 22
  std::uint32_t flags_rqpn;         // 24
  std::uint8_t hds_ip_ext;          // 28 L2/L3/L4 ok bits
  std::uint8_t l4_hdr_type_etc;     // 29
  std::uint16_t vlan_info;          // 30
  std::uint32_t srqn_uidx;          // 32
  std::uint32_t flow_table_metadata;// 36
  std::uint8_t app;                 // 40
  std::uint8_t app_op;              // 41
  std::uint16_t app_info;           // 42
  std::uint32_t byte_cnt;           // 44 length; striding: len|strides|filler; title: mini count
  std::uint64_t timestamp;          // 48
  std::uint32_t sop_drop_qpn;       // 56 RX: flow tag (low 24 bits), drop counter (top byte)
  std::uint16_t wqe_counter;        // 60
  std::uint8_t signature;           // 62
  std::uint8_t op_own;              // 63 opcode<<4 | format<<2 | se<<1 | owner
};
static_assert(sizeof(Cqe64) == kCqeSize);
static_assert(offsetof(Cqe64, rx_hash_res) == 12);
static_assert(offsetof(Cqe64, hds_ip_ext) == 28);
static_assert(offsetof(Cqe64, byte_cnt) == 44);
static_assert(offsetof(Cqe64, sop_drop_qpn) == 56);
static_assert(offsetof(Cqe64, op_own) == 63);

struct ErrCqe {
  std::uint8_t rsvd0[32];
  std::uint32_t srqn;               // 32
  std::uint8_t rsvd1[8];
  std::uint32_t byte_cnt;           // 44 striding RQ: the strides the failed packet consumed (bits 16..29)
  std::uint8_t rsvd2[6];
  std::uint8_t vendor_err_synd;     // 54
  std::uint8_t syndrome;            // 55
  std::uint32_t s_wqe_opcode_qpn;   // 56
  std::uint16_t wqe_counter;        // 60
  std::uint8_t signature;           // 62
  std::uint8_t op_own;              // 63
};
static_assert(sizeof(ErrCqe) == kCqeSize);
static_assert(offsetof(ErrCqe, syndrome) == 55);
static_assert(offsetof(ErrCqe, byte_cnt) == 44);  // DPDK mlx5_prm.h struct mlx5_error_cqe

// Compressed sessions (HASH response format): 8 mini-CQEs per 64-byte slot.
struct MiniCqe8 {
  std::uint32_t rx_hash_result;
  std::uint32_t byte_cnt;
};
static_assert(sizeof(MiniCqe8) == 8);
inline constexpr unsigned kMinisPerSlot = kCqeSize / sizeof(MiniCqe8);
inline constexpr unsigned kMaxSessionLength = 64;  // rawpipe's model cap; the driver takes any count

// Slot (relative to the title) holding mini-CQE i: the first array is right after the title,
// later ones every 8 slots from the title (title+8, title+16, ...).
constexpr std::uint32_t mini_array_slot(std::uint32_t i) noexcept { return i < kMinisPerSlot ? 1 : (i & ~7u); }

constexpr std::uint8_t cqe_opcode(std::uint8_t op_own) noexcept { return op_own >> 4; }
constexpr std::uint8_t cqe_format(std::uint8_t op_own) noexcept { return (op_own >> 2) & 3; }

// ---- work queue entries ----

inline constexpr std::uint32_t kWqeBb = 64;        // MLX5_SEND_WQE_BB
inline constexpr std::uint32_t kDsSize = 16;       // one "data segment" unit
inline constexpr std::uint32_t kInvalidLkey = 0x100;
inline constexpr std::uint32_t kInlineSeg = 0x80000000;

inline constexpr std::uint8_t kOpcodeNop = 0x00;
inline constexpr std::uint8_t kOpcodeSend = 0x0a;
inline constexpr std::uint8_t kCtrlCqUpdate = 0x08;       // MLX5_WQE_CTRL_CQ_UPDATE
inline constexpr std::uint8_t kEthL3Csum = 0x40;
inline constexpr std::uint8_t kEthL4Csum = 0x80;
inline constexpr std::uint16_t kEthL2InlineHeader = 18;   // MLX5_ETH_L2_INLINE_HEADER_SIZE (L2 + one VLAN)

struct WqeCtrlSeg {
  std::uint32_t opmod_idx_opcode;   // opmod<<24 | wqe_index<<8 | opcode
  std::uint32_t qpn_ds;             // qpn<<8 | ds (16-byte units)
  std::uint8_t signature;
  std::uint8_t dci_stream_channel_id[2];
  std::uint8_t fm_ce_se;
  std::uint32_t imm;
};
static_assert(sizeof(WqeCtrlSeg) == 16);

struct WqeEthSeg {
  std::uint32_t swp_offs;           // 0
  std::uint8_t cs_flags;            // 4
  std::uint8_t swp_flags;           // 5
  std::uint16_t mss;                // 6
  std::uint32_t metadata;           // 8
  std::uint16_t inline_hdr_sz;      // 12
  std::uint8_t inline_hdr_start[2]; // 14: the inline header starts here and runs on
  std::uint8_t inline_hdr[16];      // 16
};
static_assert(sizeof(WqeEthSeg) == 32);
static_assert(offsetof(WqeEthSeg, inline_hdr_sz) == 12);
static_assert(offsetof(WqeEthSeg, inline_hdr_start) == 14);

struct WqeDataSeg {
  std::uint32_t byte_count;
  std::uint32_t lkey;
  std::uint64_t addr;
};
static_assert(sizeof(WqeDataSeg) == 16);

struct WqeSrqNextSeg {              // first half of a striding-RQ WQE; zero for a cyclic WQ
  std::uint8_t rsvd0[2];
  std::uint16_t next_wqe_index;
  std::uint8_t signature;
  std::uint8_t rsvd1[11];
};
static_assert(sizeof(WqeSrqNextSeg) == 16);

struct MprqWqe {
  WqeSrqNextSeg next;
  WqeDataSeg data;
};
static_assert(sizeof(MprqWqe) == 32);

// The canonical one-packet send WQE: ctrl, eth with up to 18 inline bytes, one data segment:
// exactly one WQEBB (ds = 4; ds = 3 without inline header).
struct SendWqe {
  WqeCtrlSeg ctrl;
  WqeEthSeg eth;
  WqeDataSeg data;
};
static_assert(sizeof(SendWqe) == kWqeBb);

// DS units of the eth segment: 1 without an inline header, 2 with the 18-byte L2 header (it starts
// at inline_hdr_start and ends exactly at the segment's 32nd byte). rawpipe inlines 0 or 18 bytes.
// 16-byte units of the eth segment with `inline_bytes` inline: its first 2 inline bytes sit in the
// segment, the rest follow it contiguously, padded to 16 bytes.
constexpr std::uint32_t eth_seg_ds(std::uint32_t inline_bytes) noexcept {
  return inline_bytes <= 2 ? 1 : 1 + (inline_bytes - 2 + kDsSize - 1) / kDsSize;
}
// WQEBBs a send WQE of `ds` 16-byte units takes.
constexpr std::uint32_t wqe_bbs(std::uint32_t ds) noexcept { return (ds * kDsSize + kWqeBb - 1) / kWqeBb; }
// The minimum inline header sizes of the device inline modes (DPDK drivers/net/mlx5/mlx5_defs.h
// MLX5_INLINE_HSIZE_*): L2 (Ethernet + one VLAN), L3 (+ an IPv6 header), L4 (+ a TCP header).
inline constexpr std::uint16_t kInlineL3 = kEthL2InlineHeader + 40;
inline constexpr std::uint16_t kInlineL4 = kInlineL3 + 20;
static_assert(eth_seg_ds(0) == 1 && eth_seg_ds(kEthL2InlineHeader) == 2 && eth_seg_ds(kInlineL3) == 5 &&
              eth_seg_ds(kInlineL4) == 6);

// ---- doorbell records ----
inline constexpr unsigned kRcvDbr = 0;  // MLX5_RCV_DBR
inline constexpr unsigned kSndDbr = 1;  // MLX5_SND_DBR
inline constexpr std::uint32_t kCqCiMask = 0xffffff;
inline constexpr std::uint32_t kWqeCounterMask = 0xffff;

}  // namespace rawpipe::mlx5

#if __has_include(<infiniband/mlx5dv.h>)
#include <infiniband/mlx5dv.h>
namespace rawpipe::mlx5::check {
// Cross-check against the installed rdma-core contract.
static_assert(sizeof(::mlx5_cqe64) == sizeof(Cqe64));
static_assert(offsetof(::mlx5_cqe64, wqe_id) == offsetof(Cqe64, wqe_id));
static_assert(offsetof(::mlx5_cqe64, ml_path) == offsetof(Cqe64, ml_path));
static_assert(offsetof(::mlx5_cqe64, slid) == offsetof(Cqe64, slid));
static_assert(offsetof(::mlx5_cqe64, flags_rqpn) == offsetof(Cqe64, flags_rqpn));
static_assert(offsetof(::mlx5_cqe64, hds_ip_ext) == offsetof(Cqe64, hds_ip_ext));
static_assert(offsetof(::mlx5_cqe64, l4_hdr_type_etc) == offsetof(Cqe64, l4_hdr_type_etc));
static_assert(offsetof(::mlx5_cqe64, vlan_info) == offsetof(Cqe64, vlan_info));
static_assert(offsetof(::mlx5_cqe64, srqn_uidx) == offsetof(Cqe64, srqn_uidx));
static_assert(offsetof(::mlx5_cqe64, imm_inval_pkey) == offsetof(Cqe64, flow_table_metadata));
static_assert(offsetof(::mlx5_cqe64, app) == offsetof(Cqe64, app));
static_assert(offsetof(::mlx5_cqe64, app_info) == offsetof(Cqe64, app_info));
static_assert(offsetof(::mlx5_cqe64, byte_cnt) == offsetof(Cqe64, byte_cnt));
static_assert(offsetof(::mlx5_cqe64, timestamp) == offsetof(Cqe64, timestamp));
static_assert(offsetof(::mlx5_cqe64, sop_drop_qpn) == offsetof(Cqe64, sop_drop_qpn));
static_assert(offsetof(::mlx5_cqe64, wqe_counter) == offsetof(Cqe64, wqe_counter));
static_assert(offsetof(::mlx5_cqe64, signature) == offsetof(Cqe64, signature));
static_assert(offsetof(::mlx5_cqe64, op_own) == offsetof(Cqe64, op_own));
static_assert(sizeof(::mlx5_err_cqe) == sizeof(ErrCqe));
static_assert(offsetof(::mlx5_err_cqe, srqn) == offsetof(ErrCqe, srqn));
static_assert(offsetof(::mlx5_err_cqe, vendor_err_synd) == offsetof(ErrCqe, vendor_err_synd));
static_assert(offsetof(::mlx5_err_cqe, syndrome) == offsetof(ErrCqe, syndrome));
static_assert(offsetof(::mlx5_err_cqe, s_wqe_opcode_qpn) == offsetof(ErrCqe, s_wqe_opcode_qpn));
static_assert(offsetof(::mlx5_err_cqe, wqe_counter) == offsetof(ErrCqe, wqe_counter));
static_assert(sizeof(::mlx5_wqe_ctrl_seg) == sizeof(WqeCtrlSeg));
static_assert(offsetof(::mlx5_wqe_ctrl_seg, qpn_ds) == offsetof(WqeCtrlSeg, qpn_ds));
static_assert(offsetof(::mlx5_wqe_ctrl_seg, signature) == offsetof(WqeCtrlSeg, signature));
static_assert(offsetof(::mlx5_wqe_ctrl_seg, fm_ce_se) == offsetof(WqeCtrlSeg, fm_ce_se));
static_assert(offsetof(::mlx5_wqe_ctrl_seg, imm) == offsetof(WqeCtrlSeg, imm));
static_assert(sizeof(::mlx5_wqe_eth_seg) == sizeof(WqeEthSeg));
static_assert(offsetof(::mlx5_wqe_eth_seg, cs_flags) == offsetof(WqeEthSeg, cs_flags));
static_assert(offsetof(::mlx5_wqe_eth_seg, mss) == offsetof(WqeEthSeg, mss));
static_assert(offsetof(::mlx5_wqe_eth_seg, inline_hdr_sz) == offsetof(WqeEthSeg, inline_hdr_sz));
static_assert(offsetof(::mlx5_wqe_eth_seg, inline_hdr_start) == offsetof(WqeEthSeg, inline_hdr_start));
static_assert(offsetof(::mlx5_wqe_eth_seg, inline_hdr) == offsetof(WqeEthSeg, inline_hdr));
static_assert(sizeof(::mlx5_wqe_data_seg) == sizeof(WqeDataSeg));
static_assert(offsetof(::mlx5_wqe_data_seg, lkey) == offsetof(WqeDataSeg, lkey));
static_assert(offsetof(::mlx5_wqe_data_seg, addr) == offsetof(WqeDataSeg, addr));
static_assert(sizeof(::mlx5_wqe_srq_next_seg) == sizeof(WqeSrqNextSeg));
static_assert(offsetof(::mlx5_wqe_srq_next_seg, next_wqe_index) == offsetof(WqeSrqNextSeg, next_wqe_index));
static_assert(MLX5_CQE_REQ == kCqeReq && MLX5_CQE_RESP_SEND == kCqeRespSend && MLX5_CQE_REQ_ERR == kCqeReqErr &&
              MLX5_CQE_RESP_ERR == kCqeRespErr && MLX5_CQE_INVALID == kCqeInvalid);
static_assert(MLX5_CQE_SYNDROME_WR_FLUSH_ERR == kSyndromeWrFlush && MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR == kSyndromeLocalLength &&
              MLX5_CQE_SYNDROME_LOCAL_PROT_ERR == kSyndromeLocalProt);
static_assert(MLX5_CQE_L2_OK == kCqeL2Ok && MLX5_CQE_L3_OK == kCqeL3Ok && MLX5_CQE_L4_OK == kCqeL4Ok);
static_assert(MLX5_OPCODE_SEND == kOpcodeSend && MLX5_OPCODE_NOP == kOpcodeNop);
static_assert(MLX5_WQE_CTRL_CQ_UPDATE == kCtrlCqUpdate && MLX5_INLINE_SEG == kInlineSeg && MLX5_INVALID_LKEY == kInvalidLkey);
static_assert(MLX5_ETH_WQE_L3_CSUM == kEthL3Csum && MLX5_ETH_WQE_L4_CSUM == kEthL4Csum);
static_assert(MLX5_SEND_WQE_BB == kWqeBb && MLX5_RCV_DBR == kRcvDbr && MLX5_SND_DBR == kSndDbr);
}  // namespace rawpipe::mlx5::check
#endif
