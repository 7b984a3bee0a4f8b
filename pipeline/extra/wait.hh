// The descriptor to wait on, for the Extra API (endpoint_fd, arm_fd, recv_wait): the consumer's
// side of pipeline/dispatch/wake.hh. One consumer thread per endpoint, as for receive.
#pragma once

#include <span>

#include <cstdint>

#include "rawpipe/status.hh"

namespace rawpipe {

class Pipeline;
struct EndpointWake;

// The endpoint's eventfd, created on first use (the lcores start looking at the flag then).
// `asymmetric`: membarrier on arming instead of a fence per delivered run (WakeFence::kRareSleep),
// decided by the call that creates the descriptor.
Result<int> wake_fd(EndpointWake& w, bool asymmetric = false);
// Prepares to sleep: clears the eventfd, arms it, and re-checks the endpoint's rings. Returns
// true when packets are already waiting (disarmed again: do not sleep), false when armed.
bool wake_arm(EndpointWake& w, const Pipeline& p, std::uint16_t endpoint);
// Sleeps on fd until it is readable or timeout_ms passes (-1: no limit). False on timeout.
// `also`: more descriptors that end the sleep when readable (the queues of threadless lcores).
Result<bool> wake_sleep(int fd, int timeout_ms, std::span<const int> also = {});

}  // namespace rawpipe
