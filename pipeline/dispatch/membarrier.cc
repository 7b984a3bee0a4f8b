#include "pipeline/dispatch/membarrier.hh"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace rawpipe {
namespace {

long membarrier(int cmd) noexcept { return ::syscall(__NR_membarrier, cmd, 0u, 0); }

}  // namespace

bool membarrier_register() noexcept {
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || !(supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

bool membarrier_private() noexcept { return membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0; }

}  // namespace rawpipe
