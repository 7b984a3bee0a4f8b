// The doctor's checks. Each judges the facts of this machine (facts.hh) against what a config
// needs (needs.hh; nullptr when doctor runs without a config and checks the machine in general)
// and adds findings with fixes to the report. One concern per file:
//   capabilities.cc  CAP_NET_RAW, CAP_NET_ADMIN, CAP_BPF (or CAP_SYS_ADMIN), CAP_IPC_LOCK
//   memlock.cc       RLIMIT_MEMLOCK against the pool memory AF_XDP and rdma-core pin
//   hugepages.cc     free 2 MiB hugepages against the pools; hugetlbfs for the dpdk port
//   memory.cc        RAM (MemAvailable, the overcommit policy) against the pools' anonymous memory
//   checksum.cc      tx checksum offload of the interface feeding each port (a veth's peer)
//   taps.cc          capture tap directories: exist, writable, free space
//   metrics_port.cc  the [metrics] address is free, and who holds it when not
//   interface.cc     interface exists, its driver, link state, MTU against the XDP limits, queues
//   numa.cc          NUMA node of the NIC against the CPUs of the lcores that poll it
//   cpu_isolation.cc lcore CPUs against isolcpus, nohz_full, rcu_nocbs and IRQ affinity
//   bpffs.cc         /sys/fs/bpf for libxdp
//   xdp_program.cc   the af_xdp driver is built in and its XDP program object is where it looks
//   rdma.cc          rdma-core libraries, RDMA devices, the mlx5/mana preflight, the MANA vPort
//   path.cc          which driver and mode each port will run in, and why auto skips each rung
//   run_user.cc      the [run] user and group exist and are not root
#pragma once

#include "services/doctor/facts.hh"
#include "services/doctor/needs.hh"
#include "services/doctor/report.hh"

namespace rawpipe::doctor {

void check_capabilities(const Needs* needs, const HostFacts& host, Report& report);
// The one capability set for `setcap` that covers every port of the config (nullptr: every driver).
std::string config_setcap_caps(const Needs* needs);
void check_memlock(const Needs* needs, const HostFacts& host, Report& report);
void check_hugepages(const Needs* needs, const HostFacts& host, Report& report);
void check_memory(const Needs* needs, const HostFacts& host, Report& report);
void check_checksum_offload(const Needs* needs, const HostFacts& host, Report& report);
void check_taps(const Needs* needs, const HostFacts& host, Report& report);
void check_metrics_port(const Needs* needs, const HostFacts& host, Report& report);
void check_interfaces(const Needs* needs, const HostFacts& host, Report& report);
void check_numa(const Needs* needs, const HostFacts& host, Report& report);
void check_cpu_isolation(const Needs* needs, const HostFacts& host, Report& report);
void check_bpffs(const Needs* needs, const HostFacts& host, Report& report);
void check_xdp_program(const Needs* needs, const HostFacts& host, Report& report);
void check_rdma(const Needs* needs, const HostFacts& host, Report& report);
void check_paths(const Needs* needs, const HostFacts& host, Report& report);
void check_run_user(const Needs* needs, const HostFacts& host, Report& report);

// All of the above, in the order a user fixes things.
Report run_checks(const Needs* needs, const HostFacts& host);

// The interfaces (with the rung probes to run on each) a config's ports need looked at.
GatherOptions gather_options_for(const Needs* needs);

}  // namespace rawpipe::doctor
