// Pools that outlive their pipeline: api->destroy() with buffers still held by the application.
//
// destroy() stops the pipeline and frees everything else (lcores, ports, rings, plugins); each
// pool that still has buffers out is kept here instead, still registered for the checked frees
// (pipeline/buf/checked_free.hh), so the application may keep reading its packets and free them
// later with free_buff or free_packets(NULL, ...). The checked frees call reap() after returning
// a buffer of a kept pool; the pool goes (its region unmapped, or handed to the user allocator's
// free) when its last buffer is back.
//
// A pool is deleted only under the mutex and only when every slot is back in its free list: a
// buffer is counted back once its free-list enqueue has completed, after which the freeing thread
// no longer touches the pool, so deleting cannot race with a free. (A free that misses the
// kept flag of a pool being kept at that very moment leaves the pool to the next reap_all(): a
// region kept longer than needed, never one freed too early.)
#pragma once

#include <memory>
#include <vector>

namespace rawpipe {

class Pool;

namespace kept_pools {

// Takes the pools of a destroyed pipeline: frees those with nothing out at once, keeps the rest.
// Returns how many buffers are still out.
std::size_t keep(std::vector<std::unique_ptr<Pool>> pools);
// After a checked free returned a buffer of `pool` (a pointer only compared, never read unless
// the pool is kept): deletes it when it is kept and complete. Cheap when nothing is kept.
void reap(const Pool* pool) noexcept;
// Deletes every kept pool that is complete (create and destroy call it).
void reap_all() noexcept;
// Buffers still out in kept pools.
std::size_t outstanding();

}  // namespace kept_pools
}  // namespace rawpipe
