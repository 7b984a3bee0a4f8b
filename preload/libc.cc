#include "preload/libc.hh"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace rawpipe::preload {
namespace {

Libc g_libc;
std::atomic<bool> g_ready{false};

template <typename Fn>
void resolve(Fn*& slot, const char* name) {
  void* sym = dlsym(RTLD_NEXT, name);
  if (!sym) {
    // No stdio: this can run inside the very first socket() of a program.
    const char* msg = "librawpipe-preload: the C library has no ";
    ::write(2, msg, std::strlen(msg));
    ::write(2, name, std::strlen(name));
    ::write(2, "; cannot interpose it\n", 22);
    std::abort();
  }
  slot = reinterpret_cast<Fn*>(sym);
}

void resolve_all() {
  Libc l{};
  resolve(l.socket, "socket");
  resolve(l.bind, "bind");
  resolve(l.connect, "connect");
  resolve(l.close, "close");
  resolve(l.dup, "dup");
  resolve(l.dup2, "dup2");
  resolve(l.dup3, "dup3");
  resolve(l.fcntl, "fcntl");
  resolve(l.ioctl, "ioctl");
  resolve(l.setsockopt, "setsockopt");
  resolve(l.getsockopt, "getsockopt");
  resolve(l.recv, "recv");
  resolve(l.recvfrom, "recvfrom");
  resolve(l.recvmsg, "recvmsg");
  resolve(l.recvmmsg, "recvmmsg");
  resolve(l.read, "read");
  resolve(l.readv, "readv");
  resolve(l.send, "send");
  resolve(l.sendto, "sendto");
  resolve(l.sendmsg, "sendmsg");
  resolve(l.sendmmsg, "sendmmsg");
  resolve(l.write, "write");
  resolve(l.writev, "writev");
  resolve(l.poll, "poll");
  resolve(l.ppoll, "ppoll");
  resolve(l.select, "select");
  resolve(l.pselect, "pselect");
  resolve(l.epoll_create, "epoll_create");
  resolve(l.epoll_create1, "epoll_create1");
  resolve(l.epoll_ctl, "epoll_ctl");
  resolve(l.epoll_wait, "epoll_wait");
  resolve(l.epoll_pwait, "epoll_pwait");
  resolve(l.fork, "fork");
  g_libc = l;
  // Release: a thread that sees ready sees every pointer.
  g_ready.store(true, std::memory_order_release);
}

__attribute__((constructor)) void resolve_at_load() {
  if (!g_ready.load(std::memory_order_acquire)) resolve_all();
}

}  // namespace

const Libc& libc() {
  // Acquire pairs with the release in resolve_all. Two threads racing here both resolve the same
  // pointers; the stores are identical.
  if (!g_ready.load(std::memory_order_acquire)) [[unlikely]]
    resolve_all();
  return g_libc;
}

}  // namespace rawpipe::preload
