// The C library's own socket calls, found with dlsym(RTLD_NEXT) once at load (as VMA's
// orig_os_api): every interposed call that is not ours ends here, and ours use them for the
// kernel socket each offloaded socket keeps.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

namespace rawpipe::preload {

struct Libc {
  int (*socket)(int, int, int);
  int (*bind)(int, const sockaddr*, socklen_t);
  int (*connect)(int, const sockaddr*, socklen_t);
  int (*close)(int);
  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*fcntl)(int, int, ...);
  int (*ioctl)(int, unsigned long, ...);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  int (*getsockopt)(int, int, int, void*, socklen_t*);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
  ssize_t (*recvmsg)(int, msghdr*, int);
  int (*recvmmsg)(int, mmsghdr*, unsigned, int, timespec*);
  ssize_t (*read)(int, void*, size_t);
  ssize_t (*readv)(int, const iovec*, int);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
  ssize_t (*sendmsg)(int, const msghdr*, int);
  int (*sendmmsg)(int, mmsghdr*, unsigned, int);
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*writev)(int, const iovec*, int);
  int (*poll)(pollfd*, nfds_t, int);
  int (*ppoll)(pollfd*, nfds_t, const timespec*, const sigset_t*);
  int (*select)(int, fd_set*, fd_set*, fd_set*, timeval*);
  int (*pselect)(int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*);
  int (*epoll_create)(int);
  int (*epoll_create1)(int);
  int (*epoll_ctl)(int, int, int, epoll_event*);
  int (*epoll_wait)(int, epoll_event*, int, int);
  int (*epoll_pwait)(int, epoll_event*, int, int, const sigset_t*);
  pid_t (*fork)();
};

// Resolved on first use (a constructor may run after another library's constructor already
// called socket()); never null afterwards: a symbol libc lacks aborts with its name.
const Libc& libc();

}  // namespace rawpipe::preload
