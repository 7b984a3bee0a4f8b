// The MANA port on a real NIC: the rdma-core bring-up through the loader tables.
//
// Sequence (DPDK drivers/net/mana and rdma-core providers/mana; reference/direct-verbs.md 3.2):
//   open the device of the netdev's RDMA port; PD; parent domain whose pd_context is the port;
//   queue-buffer allocators (manadv_set_context_attr); ibv_reg_mr over the pool's region;
//   TX CQs and raw-packet QPs first (they configure the vPort), then RX CQs, WQs, the indirection
//   table and the RSS hash QP (Toeplitz, 40-byte key); manadv_init_obj once the queues exist
//   (their ids come from the QP create responses). No state transitions, no flow rules.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "pmd/mana/port.hh"
#include "pmd/mana/verbs.hh"

namespace rawpipe::mana {

struct ManaSpec : ManaCommonSpec {
  std::string interface;
};

// The bring-up on an already chosen RDMA device and port; `api` is the loader's tables (tests pass
// their own). `ifname` only names the interface in messages.
Result<std::unique_ptr<Port>> open_mana_on_device(const PortEnv& env, const ManaSpec& spec, const ManaApi& api,
                                                  ibv_device* device, std::uint8_t port_num, std::string_view ifname);

// Of the IB devices on the interface's PCI function (rdma_preflight's candidates, in
// ibv_get_device_list order), the first that is MANA's Ethernet function: vendor_part_id 0 (the
// only device on kernels before the 2025 mana_ib split) or 2 with raw-packet capability; the RC
// function (3) and anything else is skipped, as DPDK's mana_pci_probe_mac does. Each device is
// opened only to be queried.
Result<ibv_device*> select_mana_device(const rdma::IbverbsTable& verbs, std::span<ibv_device* const> candidates,
                                       std::string_view ifname);

// The message for a raw QP that cannot be created because the kernel's netdev holds the vPort
// (EBUSY per manadv(7); ENODEV on kernels whose mana_ib maps the error).
std::string port_in_use_message(std::string_view ifname, int err);

}  // namespace rawpipe::mana
