// Remembers the network namespace a port was opened in, so the control calls that act on the
// interface (socket teardown, program detach) happen there even when stop() or the destructor run
// on another thread: a Pipeline is often destroyed by a thread in a different namespace, and an
// interface index means another interface (or none) there.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

namespace rawpipe::af_xdp {

class OpenedNetns {
 public:
  OpenedNetns() : fd_(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) {}
  ~OpenedNetns() {
    if (fd_ >= 0) close(fd_);
  }
  OpenedNetns(const OpenedNetns&) = delete;
  OpenedNetns& operator=(const OpenedNetns&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Switches the calling thread into `home` for its lifetime when it is elsewhere, and back.
class EnterNetns {
 public:
  explicit EnterNetns(const OpenedNetns& home) {
    if (home.fd() < 0) return;
    OpenedNetns here;
    struct stat a {}, b {};
    if (here.fd() < 0 || fstat(home.fd(), &a) != 0 || fstat(here.fd(), &b) != 0) return;
    if (a.st_ino == b.st_ino && a.st_dev == b.st_dev) return;
    back_ = dup(here.fd());
    if (back_ >= 0 && setns(home.fd(), CLONE_NEWNET) != 0) {
      close(back_);
      back_ = -1;
    }
  }
  ~EnterNetns() {
    if (back_ < 0) return;
    (void)setns(back_, CLONE_NEWNET);
    close(back_);
  }
  EnterNetns(const EnterNetns&) = delete;
  EnterNetns& operator=(const EnterNetns&) = delete;

 private:
  int back_ = -1;
};

}  // namespace rawpipe::af_xdp
