#include "pmd/rdma/preflight.hh"

#include <linux/capability.h>

#include <cerrno>
#include <cstring>

#include "pmd/host/caps.hh"

namespace rawpipe::rdma {

bool has_cap_net_raw() { return host::has_capability(CAP_NET_RAW); }

Result<PreflightResult> rdma_preflight(std::string_view ifname, const PreflightOptions& o) {
  auto netdev = discover_netdev(ifname, o.sysfs_root);
  if (!netdev) return netdev.status().context(fmt::format("pmd {}", o.pmd));
  PreflightResult r;
  r.netdev = std::move(netdev).value();

  if (r.netdev.driver != o.expected_driver) {
    std::string driver = r.netdev.driver.empty() ? std::string("no driver (a virtual interface)")
                                                 : fmt::format("driver '{}'", r.netdev.driver);
    return Status::errorf(
        "pmd {}: interface {} has {}, not {}: this PMD drives only {} interfaces; use pmd = \"af_xdp\" or "
        "\"af_packet\" for this one, or pmd = \"auto\" to pick the best available",
        o.pmd, ifname, driver, o.expected_driver, o.expected_driver);
  }

  auto verbs = load_ibverbs(o.ibverbs_soname);
  if (!verbs)
    return verbs.status().context(
        fmt::format("pmd {} on {}: rdma-core is missing (or use pmd = \"af_xdp\" meanwhile)", o.pmd, ifname));
  r.verbs = verbs.value();
  if (o.load_provider) RAWPIPE_TRY(o.load_provider().context(fmt::format("pmd {} on {}", o.pmd, ifname)));

  auto devices = std::make_shared<DeviceList>();
  devices->verbs = r.verbs;
  errno = 0;
  devices->list = r.verbs->get_device_list(&devices->count);
  if (!devices->list) {
    int err = errno;
    if (err == ENOSYS)
      return Status::errorf(
          "pmd {} on {}: the running kernel has no RDMA support (ibv_get_device_list: {}); rdma-core is installed "
          "but needs the kernel side: load ib_uverbs and the {} RDMA module (modprobe ib_uverbs {}) on a kernel "
          "built with CONFIG_INFINIBAND_USER_ACCESS, or use pmd = \"af_xdp\"",
          o.pmd, ifname, std::strerror(err), o.pmd, o.pmd == "mana" ? "mana_ib" : "mlx5_ib");
    return Status::errorf("pmd {} on {}: ibv_get_device_list failed: {}; check that /dev/infiniband exists and is readable",
                          o.pmd, ifname, std::strerror(err));
  }
  if (r.netdev.rdma_devices.empty())
    return Status::errorf(
        "pmd {} on {}: the interface has no RDMA device (no {}/class/net/{}/device/infiniband); load the RDMA module "
        "(modprobe {}) and check 'rdma link show'",
        o.pmd, ifname, o.sysfs_root, ifname, o.pmd == "mana" ? "mana_ib" : "mlx5_ib");
  // Every IB device of the interface's PCI function, in libibverbs' order: one on mlx5 and on
  // MANA before the 2025 mana_ib split, two on MANA after it (the PMD picks the right one).
  for (int i = 0; i < devices->count; ++i) {
    const char* name = r.verbs->get_device_name(devices->list[i]);
    for (const std::string& want : r.netdev.rdma_devices)
      if (name && want == name) r.candidates.push_back(devices->list[i]);
  }
  if (!r.candidates.empty()) r.device = r.candidates.front();
  if (!r.device)
    return Status::errorf(
        "pmd {} on {}: RDMA device {} is in sysfs but libibverbs does not list it ({} devices visible); install the "
        "provider (apt-get install ibverbs-providers) and check permissions on /dev/infiniband/uverbs*",
        o.pmd, ifname, r.netdev.rdma_devices.front(), devices->count);
  r.devices = std::move(devices);

  if (o.require_cap_net_raw && !has_cap_net_raw())
    return Status::errorf(
        "pmd {} on {}: raw-packet queues need CAP_NET_RAW; run as root or grant it to the binary: "
        "sudo setcap cap_net_raw,cap_ipc_lock=ep <path to rawpipe> (cap_ipc_lock lets ibv_reg_mr pin the pool; "
        "otherwise raise 'ulimit -l')",
        o.pmd, ifname);
  return r;
}

}  // namespace rawpipe::rdma
