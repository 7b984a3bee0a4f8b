// AF_PACKET poll-mode driver: internal types shared by device.cc (control), rx.cc and tx.cc.
//
// Receive: one AF_PACKET socket per queue with a TPACKET_V3 ring (blocks of variable-length frames
// in one mmap). The kernel fills a block and hands it over by setting TP_STATUS_USER in the block
// header; rx_burst copies each frame into a pool buffer and gives the block back (TP_STATUS_KERNEL)
// once every frame in it has been copied. One copy per frame is unavoidable: the ring belongs to
// the kernel and is recycled block by block, so a frame cannot outlive its block the way a pool
// buffer outlives an rx_burst (AF_XDP is the zero-copy rung). Several queues join one
// PACKET_FANOUT group (hash by flow) so each flow stays on one queue.
//
// Transmit: one unbound-protocol AF_PACKET socket per queue; tx_burst hands the whole burst to
// sendmmsg (one system call per burst) with iovecs that point into the buffers, so the kernel's
// copy is the only one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/buf/pool.hh"
#include "pipeline/stats/counter.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::af_packet {

struct RxQueue {
  int fd = -1;
  std::uint8_t* ring = nullptr;
  std::size_t ring_bytes = 0;
  std::uint32_t block_size = 0;
  std::uint32_t block_count = 0;
  // V2 only: fixed frame slots, frames_per_block of them in each block.
  std::uint32_t frame_size = 0;
  std::uint32_t frame_count = 0;
  std::uint32_t frames_per_block = 0;
  // Reader position (lcore only): V3: the block being drained, frames left in it, the next frame.
  // V2: `block` is the next frame slot.
  std::uint32_t block = 0;
  std::uint32_t frames_left = 0;
  const std::uint8_t* next_frame = nullptr;
  Pool* pool = nullptr;
  std::uint16_t port = 0;
  std::uint16_t queue = 0;
  QueueCounters counters;
  std::uint64_t oversize = 0;          // frames larger than a pool buffer's data room (dropped)
  std::uint64_t truncated = 0;         // frames the kernel cut to the ring's frame size (dropped)
  std::uint64_t csum_completed = 0;    // partial checksums (locally generated frames) completed
  std::uint64_t vlan_reinserted = 0;   // 802.1Q tags the kernel had stripped, written back
};

struct TxQueue {
  int fd = -1;
  int ifindex = 0;
  QueueCounters counters;
  std::uint64_t would_block = 0;       // bursts the kernel refused for lack of room (EAGAIN/ENOBUFS)
};

std::uint16_t rx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;     // TPACKET_V3
std::uint16_t rx_burst_v2(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;  // TPACKET_V2
std::uint16_t tx_burst(void* queue, Mbuf** pkts, std::uint16_t n) noexcept;

// Completes a CHECKSUM_PARTIAL UDP/TCP checksum in place (the kernel left the pseudo-header sum in
// the checksum field for frames generated on this host). Returns false when the frame is not
// Ethernet/[VLAN]/IPv4-or-IPv6/UDP-or-TCP or is too short; the frame is then left untouched.
bool complete_partial_checksum(std::uint8_t* frame, std::uint32_t len) noexcept;

}  // namespace rawpipe::af_packet
