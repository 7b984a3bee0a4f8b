// Buffer ownership auditor, built with `meson configure -Dmbuf_debug=true` (RAWPIPE_MBUF_DEBUG).
//
// Every buffer records, in its header's second cache line (Mbuf::audit_*), whether it is free or
// handed out, to whom (the pipeline, an application consumer of an endpoint, a filter's HOLD) and
// at which call site it was last handed out ("endpoint_receive", "recvfrom_zcopy", "poll",
// "hold verdict", ...). With that:
//   - a double free (a buffer freed again after it went back to its pool) and a foreign free (a
//     pointer that is no buffer of any pool, points inside a buffer, or whose header names another
//     pool) are refused: the buffer is not touched, the event is counted, and a message naming the
//     pool, slot, and last holder goes to stderr and to audit_errors();
//   - audit_outstanding() counts the buffers a pool has out, per consumer and call site, and
//     Pipeline::stop() reports what is still out then (leaks, unless the application frees them
//     later) with the endpoint's name and the call site.
// Ownership marks use relaxed atomic accesses to the header fields: a buffer has one holder at a
// time, and the hand-off that passes it (a ring, a free list) orders the marks.
//
// Without mbuf_debug every hook below is an empty inline function and Pool's alloc_bulk /
// mbuf_free_bulk compile exactly as they would without this file; the control-path functions
// report nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/mbuf.hh"
#include "rawpipe/build_config.h"

namespace rawpipe {

class Pool;

inline constexpr bool kMbufAudit = RAWPIPE_MBUF_DEBUG != 0;

// Who holds a handed-out buffer.
enum class AuditOwner : std::uint8_t {
  kFree = 0,   // in its pool
  kPipeline,   // a port, an lcore, an endpoint ring: the pipeline's own
  kApp,        // the application consumer of an endpoint (zero-copy receive, poll)
  kHold,       // a filter's owner, after a HOLD verdict
};

// Where it was handed out last.
enum class AuditSite : std::uint8_t {
  kNone = 0,
  kPoolAlloc,        // Pool::alloc_bulk (a port's receive, an application's allocation)
  kEndpointReceive,  // Pipeline::endpoint_receive
  kRecvfromZcopy,    // api recvfrom_zcopy
  kPoll,             // api poll
  kRecv,             // api recv (copying; freed before it returns)
  kHoldVerdict,      // a filter returned HOLD
};
std::string_view audit_owner_name(AuditOwner o) noexcept;
std::string_view audit_site_name(AuditSite s) noexcept;

namespace audit_detail {
void register_pool(const Pool* pool) noexcept;
void unregister_pool(const Pool* pool) noexcept;
void on_alloc(Mbuf* const* bufs, unsigned n) noexcept;
// Before a holder drops its reference: false when `m` is foreign or already free (reported).
bool check_free(Mbuf* m) noexcept;
// The last reference is gone: marks `m` free; false when another free got there first (reported).
bool on_release(Mbuf* m) noexcept;
void handout(Mbuf* m, AuditOwner owner, std::uint16_t endpoint, AuditSite site) noexcept;
}  // namespace audit_detail

// Records a hand-off of bufs[0..n) (endpoint: Mbuf::kNoEndpoint when none). No-op without mbuf_debug.
inline void audit_handout(Mbuf* const* bufs, unsigned n, AuditOwner owner, std::uint16_t endpoint,
                          AuditSite site) noexcept {
  if constexpr (kMbufAudit) {
    for (unsigned i = 0; i < n; ++i) audit_detail::handout(bufs[i], owner, endpoint, site);
  } else {
    (void)bufs, (void)n, (void)owner, (void)endpoint, (void)site;
  }
}

// ---- control path (any thread; empty results without mbuf_debug) ----

struct AuditCounts {
  std::uint64_t double_frees = 0;
  std::uint64_t foreign_frees = 0;
};
// Process-wide since start (or since audit_reset_counts()).
AuditCounts audit_counts() noexcept;
void audit_reset_counts() noexcept;
// The messages of refused frees, oldest first (the first 256 are kept).
std::vector<std::string> audit_errors();

// Names the pipeline's endpoints for the messages about buffers of `pool`.
void audit_set_endpoint_names(const Pool& pool, std::vector<std::string> names);

// The buffers of `pool` that are not free, grouped by holder and call site.
struct AuditConsumer {
  AuditOwner owner = AuditOwner::kFree;
  std::uint16_t endpoint = Mbuf::kNoEndpoint;
  AuditSite site = AuditSite::kNone;
  std::uint32_t count = 0;
  std::vector<std::uint32_t> slots;  // the first few slot numbers
};
std::vector<AuditConsumer> audit_outstanding(const Pool& pool);

// One line per consumer of the buffers `pool` still has out, e.g.
//   pool 'rx': 3 buffers outstanding: 2 held by the application of endpoint 'md' (last handed out
//   by recvfrom_zcopy; slots 5, 9); 1 held after a filter HOLD on endpoint 'md' (hold verdict; slot 7)
// Empty when every buffer is back (or without mbuf_debug).
std::string audit_report(const Pool& pool);

}  // namespace rawpipe
