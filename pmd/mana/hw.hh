// MANA (Microsoft Azure Network Adapter) hardware layouts: GDMA work-queue elements, completion
// queue entries and doorbells, as the NIC reads and writes them.
//
// Every field is little-endian; this header assumes a little-endian host (static_assert below)
// and builds each bitfield with explicit shifts instead of C bitfields, so the byte image is
// fixed by this file and pinned by tests/model/mana/hw_test.cc (golden bytes).
//
// Facts: rdma-core providers/mana (gdma.h, doorbells.h), Linux include/net/mana/{gdma,mana}.h,
// DPDK drivers/net/mana; summarised in reference/direct-verbs.md section 3.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace rawpipe::mana {

static_assert(std::endian::native == std::endian::little, "MANA layouts are little-endian; port the shifts first");

// ---- queues ------------------------------------------------------------------------------------

// Work queues are counted in 32-byte basic units (BU); head and tail are free-running BU counts.
inline constexpr std::uint32_t kWqeBu = 32;
inline constexpr std::uint32_t kMaxTxWqeBytes = 512;
inline constexpr std::uint32_t kMaxRxWqeBytes = 256;
inline constexpr std::uint32_t kCqeSize = 64;
// Owner bits are 3 bits wide: a CQE written on pass p over the ring carries (p + 1) & 7.
inline constexpr std::uint32_t kOwnerBits = 3;
inline constexpr std::uint32_t kOwnerMask = (1u << kOwnerBits) - 1;

// ---- work-queue element ------------------------------------------------------------------------

// DMA OOB: the first 8 bytes of every WQE (kernel struct gdma_wqe, DPDK gdma_wqe_dma_oob).
struct DmaOob {
  std::uint32_t dw0;    // reserved:24, last_vbytes:8
  std::uint32_t flags;  // num_sge:8, inline_oob_size_div4:3, client_oob_in_sgl:1, consume_credit:1,
                        // fence:1, reserved:2, client_data_unit:14, check_sn:1, sgl_direct:1
};
static_assert(sizeof(DmaOob) == 8);

inline constexpr std::uint32_t kSmallOobBytes = 8;   // inline client OOB sizes the GDMA accepts
inline constexpr std::uint32_t kLargeOobBytes = 24;

constexpr std::uint32_t dma_oob_flags(std::uint32_t num_sge, std::uint32_t client_oob_bytes,
                                      std::uint32_t client_data_unit = 0) noexcept {
  return (num_sge & 0xff) | ((client_oob_bytes / 4) & 0x7) << 8 | (client_data_unit & 0x3fff) << 16;
}
constexpr std::uint32_t dma_oob_num_sge(std::uint32_t flags) noexcept { return flags & 0xff; }
constexpr std::uint32_t dma_oob_client_oob_bytes(std::uint32_t flags) noexcept { return ((flags >> 8) & 0x7) * 4; }
constexpr bool dma_oob_client_oob_in_sgl(std::uint32_t flags) noexcept { return (flags >> 11) & 1; }

// Scatter-gather entry (gdma_sge). An empty SGL must still carry one {address = 1, 0, 0} entry.
struct Sge {
  std::uint64_t address;  // virtual address inside a registered memory region
  std::uint32_t mem_key;  // the region's lkey
  std::uint32_t size;     // bytes
};
static_assert(sizeof(Sge) == 16);
static_assert(offsetof(Sge, mem_key) == 8 && offsetof(Sge, size) == 12);

// TX short OOB (mana_tx_oob's short part, DPDK transmit_short_oob_v2), the 8-byte client OOB of a
// send WQE.
struct TxShortOob {
  std::uint32_t dw0;  // pkt_fmt:2, is_outer_ipv4:1, is_outer_ipv6:1, comp_iphdr_csum:1, comp_tcp_csum:1,
                      // comp_udp_csum:1, suppress_txcqe_gen:1, vcq_num:24
  std::uint32_t dw1;  // trans_off:10, vsq_frame:14, short_vp_offset:8
};
static_assert(sizeof(TxShortOob) == 8);

namespace tx_oob {
inline constexpr std::uint32_t kPktFmtShort = 0;
inline constexpr std::uint32_t kPktFmtLong = 1;
inline constexpr std::uint32_t kOuterIpv4 = 1u << 2;
inline constexpr std::uint32_t kOuterIpv6 = 1u << 3;
inline constexpr std::uint32_t kCompIpHdrCsum = 1u << 4;
inline constexpr std::uint32_t kCompTcpCsum = 1u << 5;
inline constexpr std::uint32_t kCompUdpCsum = 1u << 6;
inline constexpr std::uint32_t kSuppressCqe = 1u << 7;
inline constexpr std::uint32_t kVcqShift = 8;
}  // namespace tx_oob

constexpr std::uint32_t tx_oob_dw0(std::uint32_t flags, std::uint32_t vcq) noexcept {
  return (flags & 0xff) | (vcq & 0xffffff) << tx_oob::kVcqShift;
}
constexpr std::uint32_t tx_oob_dw1(std::uint32_t trans_off, std::uint32_t vsq_frame, std::uint32_t vp_offset) noexcept {
  return (trans_off & 0x3ff) | (vsq_frame & 0x3fff) << 10 | (vp_offset & 0xff) << 24;
}
// The VSQ frame is bits 10..23 of the SQ id (DPDK get_vsq_frame_num).
constexpr std::uint32_t vsq_frame_of(std::uint32_t sq_id) noexcept { return (sq_id >> 10) & 0x3fff; }
constexpr std::uint32_t tx_oob_vcq(std::uint32_t dw0) noexcept { return dw0 >> 8; }
constexpr std::uint32_t tx_oob_trans_off(std::uint32_t dw1) noexcept { return dw1 & 0x3ff; }
constexpr std::uint32_t tx_oob_vsq_frame(std::uint32_t dw1) noexcept { return (dw1 >> 10) & 0x3fff; }
constexpr std::uint32_t tx_oob_vp_offset(std::uint32_t dw1) noexcept { return dw1 >> 24; }

// The one-SGE WQEs this driver posts: 8 + 8 + 16 bytes = exactly one BU each.
struct RxWqe {
  DmaOob dma;                // num_sge 1, small (8-byte) OOB
  std::uint8_t oob[8];       // receive has no client OOB data, but the slot exists and is zero
  Sge sge;                   // the buffer's data room
};
static_assert(sizeof(RxWqe) == kWqeBu);
static_assert(offsetof(RxWqe, sge) == 16);

struct TxWqe {
  DmaOob dma;
  TxShortOob oob;
  Sge sge;
};
static_assert(sizeof(TxWqe) == kWqeBu);
static_assert(offsetof(TxWqe, oob) == 8 && offsetof(TxWqe, sge) == 16);

// ---- completion-queue entry --------------------------------------------------------------------

inline constexpr std::size_t kCqeClientBytes = 60;  // GDMA_COMP_DATA_SIZE

struct Cqe {
  std::uint8_t client[kCqeClientBytes];
  std::uint32_t wq_owner;  // wq_num:24, is_sq:1, reserved:4, owner_bits:3; the NIC writes it last
};
static_assert(sizeof(Cqe) == kCqeSize);
static_assert(offsetof(Cqe, wq_owner) == 60);

constexpr std::uint32_t cqe_wq_owner(std::uint32_t wq_num, bool is_sq, std::uint32_t owner) noexcept {
  return (wq_num & 0xffffff) | std::uint32_t(is_sq) << 24 | (owner & kOwnerMask) << 29;
}
constexpr std::uint32_t cqe_owner(std::uint32_t wq_owner) noexcept { return wq_owner >> 29; }
constexpr std::uint32_t cqe_wq_num(std::uint32_t wq_owner) noexcept { return wq_owner & 0xffffff; }
constexpr bool cqe_is_sq(std::uint32_t wq_owner) noexcept { return (wq_owner >> 24) & 1; }

// MANA client CQE types (mana_cqe_header.cqe_type, 6 bits).
enum CqeType : std::uint32_t {
  kCqeInvalid = 0,
  kCqeRxOkay = 1,
  kCqeRxCoalesced4 = 2,  // up to four packets, one per consumed RQ WQE; pkt_len 0 ends the list
  kCqeRxObjectFence = 3,
  kCqeRxTruncated = 4,
  kCqeTxOkay = 32,
  kCqeTxSaDrop = 33,
  kCqeTxMtuDrop = 34,
  kCqeTxInvalidOob = 35,
  kCqeTxInvalidEthType = 36,
  kCqeTxHdrProcessingError = 37,
  kCqeTxVfDisabled = 38,
  kCqeTxVportIdxOutOfRange = 39,
  kCqeTxVportDisabled = 40,
  kCqeTxVlanTaggingViolation = 41,
};
inline constexpr std::uint32_t kFirstTxError = kCqeTxSaDrop;
inline constexpr std::uint32_t kLastTxError = kCqeTxVlanTaggingViolation;
inline constexpr std::uint32_t kTxErrorTypes = kLastTxError - kFirstTxError + 1;

constexpr std::uint32_t cqe_header(std::uint32_t type, std::uint32_t vendor_err = 0) noexcept {
  return (type & 0x3f) | (vendor_err & 0xffffff) << 8;  // client_type (bits 6..7) is 0
}
constexpr std::uint32_t cqe_header_type(std::uint32_t hdr) noexcept { return hdr & 0x3f; }
constexpr std::uint32_t cqe_header_vendor_err(std::uint32_t hdr) noexcept { return hdr >> 8; }

inline constexpr unsigned kRxPacketsPerCqe = 4;

struct RxPacketInfo {
  std::uint32_t len;       // pkt_len:16, reserved:16
  std::uint32_t reserved;
  std::uint32_t hash;      // Toeplitz hash of the packet
};
static_assert(sizeof(RxPacketInfo) == 12);

// mana_rxcomp_oob: the client part of a receive CQE.
struct RxCompOob {
  std::uint32_t header;
  std::uint32_t flags;     // see rx_flag
  RxPacketInfo ppi[kRxPacketsPerCqe];
  std::uint32_t rx_wqe_offset;
};
static_assert(sizeof(RxCompOob) == kCqeClientBytes);
static_assert(offsetof(RxCompOob, flags) == 4 && offsetof(RxCompOob, ppi) == 8);
static_assert(offsetof(RxCompOob, rx_wqe_offset) == 56);

namespace rx_flag {
inline constexpr std::uint32_t kVlanIdMask = 0xfff;
inline constexpr std::uint32_t kVlanPresent = 1u << 12;
inline constexpr std::uint32_t kOuterIpCsumOk = 1u << 13;
inline constexpr std::uint32_t kOuterIpCsumFail = 1u << 14;
inline constexpr std::uint32_t kHashTypeShift = 16;  // 9 bits of NDIS hash types
inline constexpr std::uint32_t kHashTypeMask = 0x1ffu << kHashTypeShift;
inline constexpr std::uint32_t kIpCsumOk = 1u << 25;
inline constexpr std::uint32_t kIpCsumFail = 1u << 26;
inline constexpr std::uint32_t kTcpCsumOk = 1u << 27;
inline constexpr std::uint32_t kTcpCsumFail = 1u << 28;
inline constexpr std::uint32_t kUdpCsumOk = 1u << 29;
inline constexpr std::uint32_t kUdpCsumFail = 1u << 30;
}  // namespace rx_flag

// NDIS hash types reported in rx_hashtype.
namespace ndis_hash {
inline constexpr std::uint32_t kIpv4 = 1u << 0;
inline constexpr std::uint32_t kTcpIpv4 = 1u << 1;
inline constexpr std::uint32_t kUdpIpv4 = 1u << 2;
inline constexpr std::uint32_t kIpv6 = 1u << 3;
inline constexpr std::uint32_t kTcpIpv6 = 1u << 4;
inline constexpr std::uint32_t kUdpIpv6 = 1u << 5;
}  // namespace ndis_hash

// mana_tx_comp_oob: the client part of a send CQE.
struct TxCompOob {
  std::uint32_t header;
  std::uint32_t tx_data_offset;
  std::uint32_t offsets;   // tx_sgl_offset:5, tx_wqe_offset:27 (the WQE's queue offset in 32-byte units)
  std::uint32_t reserved[12];
};
static_assert(sizeof(TxCompOob) == kCqeClientBytes);
static_assert(offsetof(TxCompOob, offsets) == 8);

constexpr std::uint32_t tx_comp_offsets(std::uint32_t sgl_offset, std::uint32_t wqe_offset) noexcept {
  return (sgl_offset & 0x1f) | wqe_offset << 5;
}
constexpr std::uint32_t tx_comp_wqe_offset(std::uint32_t offsets) noexcept { return offsets >> 5; }

// ---- doorbells ---------------------------------------------------------------------------------

// One 4 KiB doorbell page per device context, shared by all its queues; each queue type has one
// 64-bit register, written with the queue id in the low bits. The page is write-only: reading it
// back says nothing about earlier writes, which is why the device model takes writes as calls.
inline constexpr std::uint32_t kDoorbellPageSize = 4096;
inline constexpr std::uint32_t kDoorbellSq = 0x000;
inline constexpr std::uint32_t kDoorbellRq = 0x400;
inline constexpr std::uint32_t kDoorbellCq = 0x800;
inline constexpr std::uint32_t kDoorbellEq = 0xff8;

// SQ: id:24, reserved:8, tail_ptr:32 = head in BU x 32 (a free-running byte offset, not masked).
constexpr std::uint64_t sq_doorbell(std::uint32_t sq_id, std::uint32_t head_bu) noexcept {
  return std::uint64_t(sq_id & 0xffffff) | std::uint64_t(head_bu * kWqeBu) << 32;
}
// RQ: id:24, wqe_cnt:8, tail_ptr:32. The hardware spec asks clients to leave wqe_cnt 0 for
// receive queues (DPDK mana_rq_ring_doorbell).
constexpr std::uint64_t rq_doorbell(std::uint32_t rq_id, std::uint32_t head_bu) noexcept {
  return std::uint64_t(rq_id & 0xffffff) | std::uint64_t(head_bu * kWqeBu) << 32;
}
// CQ: id:24, reserved:8, tail_ptr:31 = head % (count << 3), arm:1. Only needed to arm interrupts;
// a polling driver never rings it.
constexpr std::uint64_t cq_doorbell(std::uint32_t cq_id, std::uint32_t tail, bool arm) noexcept {
  return std::uint64_t(cq_id & 0xffffff) | std::uint64_t(tail & 0x7fffffff) << 32 | std::uint64_t(arm) << 63;
}
constexpr std::uint32_t doorbell_id(std::uint64_t v) noexcept { return std::uint32_t(v & 0xffffff); }
constexpr std::uint32_t doorbell_wqe_cnt(std::uint64_t v) noexcept { return std::uint32_t(v >> 24) & 0xff; }
constexpr std::uint32_t doorbell_tail(std::uint64_t v) noexcept { return std::uint32_t(v >> 32); }
// The doorbell's tail_ptr is a 32-bit byte offset, so the position it names in basic units wraps
// every 2^27 BU (about 134 M receive WQEs: under a minute at line rate), while the driver's and
// the device's BU counters run on. The BU counter a tail names, given the last one seen: the
// nearest one at or after `last` with the same low 27 bits.
constexpr std::uint32_t doorbell_bu(std::uint32_t last_bu, std::uint32_t tail) noexcept {
  constexpr std::uint32_t kTailBuMask = (1u << 27) - 1;
  return last_bu + ((tail / kWqeBu - last_bu) & kTailBuMask);
}

}  // namespace rawpipe::mana
