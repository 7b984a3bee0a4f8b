#include "pipeline/port/registry.hh"

#include "pmd/drivers.hh"

namespace rawpipe {
namespace {

// Order is the order `rawpipe --list-pmds` prints; the auto ladder has its own order.
// Pointers, not copies: the descriptors live in other translation units and static
// initialisation order between them is unspecified.
const PmdDriver* const kDrivers[] = {
#ifdef RAWPIPE_HAVE_PMD_SYNTH
    &kSynthDriver,
#endif
#ifdef RAWPIPE_HAVE_PMD_PCAP
    &kPcapDriver,
#endif
#ifdef RAWPIPE_HAVE_PMD_AF_PACKET
    &kAfPacketDriver,
#endif
#ifdef RAWPIPE_HAVE_PMD_AF_XDP
    &kAfXdpDriver,
#endif
#ifdef RAWPIPE_HAVE_PMD_SOCKET
    &kSocketDriver,
#endif
#ifdef RAWPIPE_HAVE_PMD_MLX5
    &kMlx5Driver,
    &kMlx5ModelDriver,
#endif
#ifdef RAWPIPE_HAVE_PMD_MANA
    &kManaDriver,
    &kManaModelDriver,
#endif
#ifdef RAWPIPE_HAVE_PMD_DPDK
    &kDpdkDriver,
#endif
#ifdef RAWPIPE_HAVE_PMD_AUTO
    &kAutoDriver,
#endif
    nullptr,  // keeps the array non-empty whatever is configured out
};

}  // namespace

std::span<const PmdDriver* const> all_pmds() { return {kDrivers, std::size(kDrivers) - 1}; }

std::vector<DriverInfo> builtin_drivers() {
  std::vector<DriverInfo> out;
  for (const PmdDriver* d : all_pmds()) out.push_back({std::string(d->name), std::string(d->summary)});
  return out;
}

const PmdDriver* find_pmd(std::string_view name) {
  for (const PmdDriver* d : all_pmds())
    if (d->name == name) return d;
  return nullptr;
}

}  // namespace rawpipe
