// The checks every rdma-core PMD (mlx5, mana) makes before touching a device, in the order a
// user has to fix them, ending in exactly one message that says which is missing and what to do:
//   1. the interface exists and its kernel driver is the one the PMD drives (mlx5_core, mana);
//   2. libibverbs (and the provider library) load;
//   3. the kernel has RDMA (ibv_get_device_list fails with ENOSYS without it) and the interface's
//      RDMA device is visible;
//   4. the process has CAP_NET_RAW (raw-packet QPs need it).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rawpipe/status.hh"
#include "pmd/rdma/discovery.hh"
#include "pmd/rdma/loader.hh"

namespace rawpipe::rdma {

struct PreflightOptions {
  std::string_view pmd;                          // "mlx5" or "mana", for messages
  std::string_view expected_driver;              // "mlx5_core" or "mana"
  std::string_view ibverbs_soname = kIbverbsSoname;
  std::function<Status()> load_provider;         // loads libmlx5/libmana; may be empty
  std::string sysfs_root = default_sysfs_root();
  bool require_cap_net_raw = true;
};

// Owns the device list from ibv_get_device_list (the chosen ibv_device lives in it).
struct DeviceList {
  const IbverbsTable* verbs = nullptr;
  ibv_device** list = nullptr;
  int count = 0;
  DeviceList() = default;
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  ~DeviceList() {
    if (list) verbs->free_device_list(list);
  }
};

struct PreflightResult {
  NetdevInfo netdev;
  const IbverbsTable* verbs = nullptr;
  std::shared_ptr<DeviceList> devices;
  std::vector<ibv_device*> candidates;           // every RDMA device of the interface's PCI function
  ibv_device* device = nullptr;                  // the first of them (the only one on mlx5)
};

Result<PreflightResult> rdma_preflight(std::string_view ifname, const PreflightOptions& options);

// True when the effective capability set has CAP_NET_RAW (pmd/host/caps.hh).
bool has_cap_net_raw();

}  // namespace rawpipe::rdma
