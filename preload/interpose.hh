// Shared by the files that define the interposed calls.
#pragma once

#define RAWPIPE_INTERPOSE extern "C" __attribute__((visibility("default")))

#include "preload/fd_table.hh"
#include "preload/runtime.hh"

namespace rawpipe::preload {

// The entry of fd when it is offloaded and the caller is not the library itself, else nullptr:
// the one check every interposed data call makes before going to the kernel.
inline FdEntry* offloaded(int fd) {
  FdEntry* e = fd_entry(fd);
  if (!e || e->kind.load(std::memory_order_acquire) != FdKind::kOffloaded || inside()) return nullptr;
  return e;
}

}  // namespace rawpipe::preload
