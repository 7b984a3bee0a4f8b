// libmana (the MANA rdma-core provider) loaded at run time through the shared loader
// (pmd/rdma/loader.hh), and the pair of tables the MANA control path calls through. Tests hand the
// control path tables of their own to inject failures (no device, port in use).
#pragma once

#include <infiniband/manadv.h>

#include <string_view>

#include "rawpipe/status.hh"
#include "pmd/rdma/loader.hh"

namespace rawpipe::mana {

inline constexpr std::string_view kManaSoname = "libmana.so.1";
inline constexpr std::string_view kManaInstallHint =
    "install the MANA provider of rdma-core 44 or newer (Debian/Ubuntu: apt-get install ibverbs-providers; "
    "RHEL/Fedora: dnf install libibverbs)";

struct ManaTable {
  decltype(&::manadv_set_context_attr) set_context_attr = nullptr;
  decltype(&::manadv_init_obj) init_obj = nullptr;
};

// Loads libmana once per process (later calls return the same table or the same error). A
// non-default soname is loaded afresh (tests).
Result<const ManaTable*> load_mana(std::string_view soname = kManaSoname);

struct ManaApi {
  const rdma::IbverbsTable* verbs = nullptr;
  const ManaTable* mana = nullptr;
};

}  // namespace rawpipe::mana
