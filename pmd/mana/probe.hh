// For the `pmd = "auto"` ladder: can the mana PMD drive this interface here, and if not, why.
#pragma once

#include <string_view>

#include "rawpipe/status.hh"

namespace rawpipe {

// OK when `ifname` is a MANA netdev, rdma-core (libibverbs + libmana) loads, the kernel lists its
// RDMA device and the process has CAP_NET_RAW. Otherwise the Status says which rung failed and what
// to do. Opens no device and creates no queue, so it cannot tell whether the vPort is free: the
// port's open says that (EBUSY/ENODEV on raw QP creation).
Status probe_mana(std::string_view ifname);

}  // namespace rawpipe
