// poll, ppoll, select, pselect and epoll with offloaded and kernel descriptors mixed.
//
// An offloaded socket is waited for through its endpoint's descriptor (an eventfd an lcore
// writes when a packet arrives for an armed endpoint): poll and select put it in place of the
// socket, epoll_ctl registers it in the application's epoll set with a record that carries the
// application's epoll_data. One kernel wait therefore wakes for either kind. Before sleeping the
// waiter checks the ring and arms the descriptor (arm_fd re-checks the ring after arming, so a
// packet that lands between the look and the arming is not missed), and after waking it checks
// the ring again, so a stale eventfd never reports a socket that has nothing to read.
#pragma once

namespace rawpipe::preload {

// An epoll descriptor is being closed: its registrations of offloaded sockets go with it.
void epoll_closed(int epfd);

// The process forked: offloaded sockets' kernel sides leave the epoll sets (they now hold copies
// of the ring's datagrams for the child, and would keep the sets ready).
void epoll_forget_kernel_sides();

}  // namespace rawpipe::preload
