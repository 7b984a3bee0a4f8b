// Checked frees for pointers an application hands back (the Extra API's free_buff, free_packets,
// ref_buff): in every build, not only with the ownership auditor, a pointer that is not a buffer,
// a buffer already free, a payload pointer and NULL are told apart before anything is written.
//
// Two facts make the check cheap (no lock, no system call, a handful of compares):
//   - every pool registers its region here when it is created, so "is this one of ours" is a
//     range compare over at most Pool::kMaxPools entries (usually one or two), made before the
//     pointer is dereferenced;
//   - the reference count is the state word: mbuf_free_bulk stores 0 when a buffer goes back to
//     its pool (the line is already in the cache: the count was just read), alloc sets 1. An
//     application drop is a compare-and-swap on it, so two threads freeing the same buffer cannot
//     both succeed. Dropping the last reference stores kRefReleased instead of 0: the buffer may
//     still travel back to its lcore (Pipeline::endpoint_release), and a
//     second free meanwhile must already be refused; mbuf_free_bulk takes a kRefReleased buffer
//     as its last reference.
//
// A pointer inside a buffer's data area (the payload pointer a VMA application keeps) is mapped to
// its buffer and counted; a pointer into a header or the padding between slots is foreign.
#pragma once

#include <cstdint>

#include "rawpipe/mbuf.hh"

namespace rawpipe {

class Pool;

// Mbuf::refcnt is also the buffer's state word: 0 while it is in its pool (mbuf_free_bulk stores
// it), 1.. while held, and kRefReleased once an application dropped the last reference through a
// checked free and the buffer is on its way back.
inline constexpr std::uint16_t kRefReleased = 0xffff;

namespace buffer_regions {
// Called by Pool::create / ~Pool (control path, any thread).
void add(const Pool* pool) noexcept;
void remove(const Pool* pool) noexcept;
// The pool whose slots contain p, or null. Reads no memory through p.
const Pool* find(const void* p) noexcept;
}  // namespace buffer_regions

enum class BufferCheck : std::uint8_t {
  kOk = 0,
  kPayload,      // p pointed into the buffer's data; mapped to its header
  kNull,
  kForeign,      // no pool contains p
  kInsideHeader, // p points into a buffer's header or the padding after it, not at its start
  kBadHeader,    // the header at p names another pool (overwritten, or built elsewhere)
};

// The buffer that application pointer p stands for. `out` is set for kOk and kPayload only.
BufferCheck resolve_buffer(const void* p, Mbuf** out) noexcept;

enum class DropResult : std::uint8_t {
  kNotLast = 0,  // other holders remain
  kLast,         // the caller dropped the last reference: refcnt is now kRefReleased; give the
                 // buffer to mbuf_free_bulk (directly or through a return ring)
  kAlreadyFree,  // refcnt 0: in its pool
  kReleased,     // refcnt kRefReleased: freed already, on its way back to its pool
};

// Drops one reference of a resolved buffer, refusing a buffer that is free or being freed.
inline DropResult drop_reference_checked(Mbuf* m) noexcept {
  // Relaxed load: the CAS below decides; its acq_rel orders our reads of the packet before
  // whoever recycles it (as R3 in mbuf_free_bulk) and pairs with other holders' drops.
  std::uint16_t r = m->refcnt.load(std::memory_order_relaxed);
  for (;;) {
    if (r == 0) return DropResult::kAlreadyFree;
    if (r == kRefReleased) return DropResult::kReleased;
    const std::uint16_t next = r == 1 ? kRefReleased : static_cast<std::uint16_t>(r - 1);
    if (m->refcnt.compare_exchange_weak(r, next, std::memory_order_acq_rel, std::memory_order_relaxed))
      return r == 1 ? DropResult::kLast : DropResult::kNotLast;
  }
}

// Adds a reference to a resolved buffer unless it is free or being freed (or at the limit).
inline bool add_reference_checked(Mbuf* m) noexcept {
  std::uint16_t r = m->refcnt.load(std::memory_order_relaxed);
  for (;;) {
    if (r == 0 || r >= kRefReleased - 1) return false;
    if (m->refcnt.compare_exchange_weak(r, static_cast<std::uint16_t>(r + 1), std::memory_order_relaxed))
      return true;
  }
}

}  // namespace rawpipe
