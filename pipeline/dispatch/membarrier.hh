// An asymmetric fence for the consumer wake-up (wake.hh): the lcore, which queues packets all the
// time, pays only a compiler barrier; the consumer, which arms its descriptor only when it is
// about to sleep, pays a membarrier(2) system call that makes every running thread of the process
// execute a full barrier. This is the pattern of membarrier(2)'s manual page and of liburcu /
// folly's asymmetric barriers: a full fence (mfence or a locked instruction) on every delivered
// run waits for the lcore's pending stores, which on a ring endpoint are the slot lines the
// consumer just read, and cost the lcore a third of its time in ring-vs-sink.
#pragma once

namespace rawpipe {

// Registers the process for private expedited membarrier. Control path; idempotent, and must be
// repeated in a child after fork() (registration belongs to the address space). False when the
// kernel (before 4.14) or a seccomp policy refuses it: the caller then keeps full fences on both
// sides.
bool membarrier_register() noexcept;

// The heavy side: returns once every thread of the process that runs on another CPU has executed
// a full memory barrier. False when the call failed (the caller falls back to full fences).
bool membarrier_private() noexcept;

}  // namespace rawpipe
