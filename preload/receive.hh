// Receiving on an offloaded socket: one datagram from the endpoint's ring into the caller's
// buffers, with the kernel's semantics (blocking or not, source address, MSG_TRUNC, MSG_PEEK,
// SO_TIMESTAMP/NS).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include "preload/runtime.hh"

namespace rawpipe::preload {

// Receives one datagram, from the ring or, once it is empty, from the socket's kernel side
// (Slot::read_kernel). Returns the bytes copied (or the datagram's length with MSG_TRUNC in
// flags), or -1 with errno (EAGAIN, EBADF when the socket was closed meanwhile, ETIMEDOUT as
// EAGAIN after SO_RCVTIMEO). msg may be null (then no name, no control, no flags out).
// deadline_ns (CLOCK_MONOTONIC, -1: none) bounds a blocking wait as SO_RCVTIMEO does (recvmmsg's
// timeout); whichever ends first ends the wait with EAGAIN.
ssize_t offloaded_recv(FdEntry& e, const iovec* iov, int iovcnt, int flags, msghdr* msg, std::int64_t deadline_ns = -1);

// Up to max packets of the slot without a copy, into pkts: the stash first (what MSG_PEEK or a
// readiness check took), then the endpoint's ring, with a pass of the pipeline in no-lcore mode
// when the ring is empty. A connected socket keeps its peer's datagrams only (the kernel's
// socket lookup passes it by for other sources); the rest are freed, counted in rx_not_peer.
// The caller is the slot's consumer. Returns how many pkts holds.
unsigned take_burst(Runtime& rt, Slot& s, rawpipe_packet* pkts, unsigned max);

// Counts datagrams handed to the application without a copy (rx_packets, rx_bytes).
void count_taken(Slot& s, const rawpipe_packet* pkts, unsigned n);

// CLOCK_MONOTONIC in nanoseconds.
std::int64_t monotonic_ns();

// Sleeps until fd or kernel_fd (-1: none) is readable or wait_ms (-1: no limit) passes; in
// no-lcore mode also until the port's queues have packets (the caller then runs a pass). poll's
// result.
int sleep_on(Runtime& rt, int fd, int kernel_fd, int wait_ms);

// Whether a datagram is waiting (takes it into the stash without consuming it). Sets *len to its
// payload length when one is.
bool offloaded_ready(Slot& s, std::uint32_t gen, int* len);

}  // namespace rawpipe::preload
