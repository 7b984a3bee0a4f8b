// For the auto ladder (pmd = "auto"): can the mlx5 PMD drive this interface here? OK when the
// interface is mlx5_core, rdma-core (libibverbs + libmlx5) loads, the kernel lists the
// interface's RDMA device and the process has CAP_NET_RAW; otherwise the one message saying which
// is missing and what to do. Touches no device state (nothing is opened).
#pragma once

#include <string_view>

#include "rawpipe/status.hh"

namespace rawpipe {

Status probe_mlx5(std::string_view ifname);

}  // namespace rawpipe
