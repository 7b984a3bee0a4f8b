#include "preload/fd_table.hh"

#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace rawpipe::preload {
namespace {

// Sized once at load: growing it later would need a lock on the path every call takes. fds at
// or above the limit at load time are left to the kernel (a process that raises its limit
// later keeps its high fds on kernel sockets).
struct Table {
  FdEntry* entries = nullptr;
  int size = 0;
  Table() {
    rlimit lim{};
    rlim_t n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0) n = lim.rlim_max == RLIM_INFINITY ? lim.rlim_cur : lim.rlim_max;
    if (n < 1024) n = 1024;
    if (n > (1u << 20)) n = 1u << 20;
    // Lives for the process: interposed calls can run during and after exit handlers.
    entries = new (std::nothrow) FdEntry[n];
    size = entries ? static_cast<int>(n) : 0;
  }
};

Table& table() {
  static Table t;
  return t;
}

std::atomic<int> g_high{0};

}  // namespace

int fd_high_water() { return g_high.load(std::memory_order_relaxed); }

void fd_touch(int fd) {
  int high = g_high.load(std::memory_order_relaxed);
  while (fd >= high && !g_high.compare_exchange_weak(high, fd + 1, std::memory_order_relaxed)) {
  }
}

FdEntry* fd_entry(int fd) {
  Table& t = table();
  if (fd < 0 || fd >= t.size) return nullptr;
  return &t.entries[fd];
}

int fd_of(const FdEntry& e) { return static_cast<int>(&e - table().entries); }

void fd_forget(int fd) {
  if (FdEntry* e = fd_entry(fd)) {
    e->kind.store(FdKind::kNone, std::memory_order_release);
    e->nonblock.store(false, std::memory_order_relaxed);
    e->why.store(KernelWhy::kNotBound, std::memory_order_relaxed);
  }
}

}  // namespace rawpipe::preload
