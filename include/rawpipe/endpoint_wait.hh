// Sleeping instead of spinning, for the consumer of a ring endpoint: the C++ side of the Extra
// API's endpoint_fd and arm_fd (docs/consumer-wait.md has the whole policy).
//
// endpoint_wait_fd gives the endpoint's eventfd, created on the first call; from then on an lcore
// that queues packets for the endpoint writes it once when it finds it armed, never while the
// consumer busy-polls. endpoint_arm, when a receive found nothing, arms the descriptor and looks
// at the rings again: true means packets are already waiting (receive again, do not sleep), false
// means sleep in poll/epoll on the descriptor. Both fail for an endpoint without a ring, and
// endpoint_arm before endpoint_wait_fd. Same thread rules as Pipeline::endpoint_receive.
#pragma once

#include <cstdint>

#include "rawpipe/api.h"
#include "rawpipe/status.hh"

namespace rawpipe {

class Pipeline;

RAWPIPE_API Result<int> endpoint_wait_fd(Pipeline& pipeline, std::uint16_t endpoint);

// How the lcores and the consumer order a wake-up (docs/consumer-wait.md has the argument).
//   kFull       a full fence on both sides: each delivered run costs the lcores an mfence, each
//               arm is cheap. For a consumer that sleeps after most messages (latency).
//   kRareSleep  the lcores pay a compiler barrier per delivered run; each arm costs a
//               membarrier(2) that interrupts the CPUs of the process's running threads, the
//               lcores among them. For a consumer that sleeps only when traffic stops
//               (throughput). Falls back to kFull where the kernel refuses membarrier.
// Decided by the call that creates the descriptor; later calls return it as it is.
enum class WakeFence : std::uint8_t { kFull, kRareSleep };
RAWPIPE_API Result<int> endpoint_wait_fd(Pipeline& pipeline, std::uint16_t endpoint, WakeFence fence);
RAWPIPE_API Result<bool> endpoint_arm(Pipeline& pipeline, std::uint16_t endpoint);

}  // namespace rawpipe
