// rdma-core loaded at run time.
//
// rawpipe links no rdma-core library: the binary must start on hosts without rdma-core or RDMA
// devices and say exactly what is missing. Each library is dlopen'ed by its soname and every
// function the PMDs call is resolved into one table of function pointers; a missing library or
// symbol is a Status naming both and what to install.
//
// Calls go through the table, never through the headers' inline wrappers: several of those
// (ibv_create_qp_ex, ibv_query_device_ex, ibv_query_port, ibv_reg_mr) reference exported symbols
// and would make the link depend on libibverbs. The verbs that rdma-core dispatches through the
// device context's ops (flows, WQs, indirection tables, extended QPs, parent domains) are table
// entries too, filled with small dispatchers defined in loader.cc.
//
// Member names drop the ibv_ prefix on purpose: several ibv_* names are function-like macros in
// verbs.h and `table.ibv_reg_mr(...)` would expand them.
//
// The tables are loaded once per process (control path) and never unloaded: providers keep
// pointers into libibverbs for the life of the process.
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <span>
#include <string>
#include <string_view>

#include "rawpipe/status.hh"

namespace rawpipe::rdma {

inline constexpr std::string_view kIbverbsSoname = "libibverbs.so.1";
inline constexpr std::string_view kMlx5Soname = "libmlx5.so.1";

// One symbol a table needs: its exported name and how to store the address into the table.
struct SymbolSlot {
  const char* name;
  void* target;                          // the table member
  void (*store)(void* target, void* sym);
};

template <typename Fn>
SymbolSlot symbol_slot(Fn*& member, const char* name) {
  return {name, &member, [](void* target, void* sym) {
            // POSIX guarantees dlsym's object pointer converts to the function's pointer type.
            *static_cast<Fn**>(target) = reinterpret_cast<Fn*>(sym);
          }};
}

// Generic helper for every rdma-core library table (libibverbs, libmlx5, libmana): dlopens
// `soname` (RTLD_NOW | RTLD_LOCAL) and resolves every slot. On failure nothing is stored and the
// Status names the library or the first missing symbol, with `install_hint` (what to install).
// On success `*handle` holds the library handle (never closed).
Status load_library(std::string_view soname, std::span<const SymbolSlot> slots, std::string_view install_hint,
                    void** handle);

// libibverbs: everything the mlx5 and mana control paths call.
struct IbverbsTable {
  decltype(&::ibv_get_device_list) get_device_list = nullptr;
  decltype(&::ibv_free_device_list) free_device_list = nullptr;
  decltype(&::ibv_get_device_name) get_device_name = nullptr;
  decltype(&::ibv_open_device) open_device = nullptr;
  decltype(&::ibv_close_device) close_device = nullptr;
  decltype(&::ibv_query_device) query_device = nullptr;
  decltype(&::ibv_alloc_pd) alloc_pd = nullptr;
  decltype(&::ibv_dealloc_pd) dealloc_pd = nullptr;
  decltype(&::ibv_reg_mr) reg_mr = nullptr;
  decltype(&::ibv_dereg_mr) dereg_mr = nullptr;
  decltype(&::ibv_create_cq) create_cq = nullptr;
  decltype(&::ibv_destroy_cq) destroy_cq = nullptr;
  decltype(&::ibv_create_qp) create_qp = nullptr;
  decltype(&::ibv_modify_qp) modify_qp = nullptr;
  decltype(&::ibv_destroy_qp) destroy_qp = nullptr;

  // Dispatched through the device context's ops (see the file comment); never null after load.
  int (*query_port)(ibv_context* ctx, std::uint8_t port, ibv_port_attr* attr) = nullptr;
  int (*query_device_ex)(ibv_context* ctx, ibv_device_attr_ex* attr) = nullptr;
  ibv_qp* (*create_qp_ex)(ibv_context* ctx, ibv_qp_init_attr_ex* attr) = nullptr;
  ibv_wq* (*create_wq)(ibv_context* ctx, ibv_wq_init_attr* attr) = nullptr;
  int (*modify_wq)(ibv_wq* wq, ibv_wq_attr* attr) = nullptr;
  int (*destroy_wq)(ibv_wq* wq) = nullptr;
  ibv_rwq_ind_table* (*create_rwq_ind_table)(ibv_context* ctx, ibv_rwq_ind_table_init_attr* attr) = nullptr;
  int (*destroy_rwq_ind_table)(ibv_rwq_ind_table* table) = nullptr;
  ibv_flow* (*create_flow)(ibv_qp* qp, ibv_flow_attr* attr) = nullptr;
  int (*destroy_flow)(ibv_flow* flow) = nullptr;
  ibv_pd* (*alloc_parent_domain)(ibv_context* ctx, ibv_parent_domain_init_attr* attr) = nullptr;
};

// libmlx5: the direct-verbs entry points of the mlx5 provider.
struct Mlx5Table {
  decltype(&::mlx5dv_is_supported) is_supported = nullptr;
  decltype(&::mlx5dv_query_device) query_device = nullptr;
  decltype(&::mlx5dv_create_cq) create_cq = nullptr;
  decltype(&::mlx5dv_create_wq) create_wq = nullptr;
  decltype(&::mlx5dv_create_qp) create_qp = nullptr;
  decltype(&::mlx5dv_init_obj) init_obj = nullptr;
  // DevX: the context the firmware commands need, and the commands (the device's inline mode).
  // Null in a table that does not offer them: the driver opens with ibv_open_device and falls
  // back to what the PCI id implies.
  decltype(&::mlx5dv_open_device) open_device = nullptr;
  decltype(&::mlx5dv_devx_general_cmd) devx_general_cmd = nullptr;
};

// Loads (once; later calls return the same table or the same error) libibverbs from `soname`.
// Tests pass a bogus soname to exercise the missing-library path; a non-default soname is loaded
// afresh each time and not cached.
Result<const IbverbsTable*> load_ibverbs(std::string_view soname = kIbverbsSoname);
Result<const Mlx5Table*> load_mlx5(std::string_view soname = kMlx5Soname);

// What to install, for messages (Debian/Ubuntu and RHEL package names).
inline constexpr std::string_view kIbverbsInstallHint =
    "install rdma-core's user-space libraries (Debian/Ubuntu: apt-get install libibverbs1 ibverbs-providers; "
    "RHEL/Fedora: dnf install libibverbs)";
inline constexpr std::string_view kMlx5InstallHint =
    "install the mlx5 provider of rdma-core (Debian/Ubuntu: apt-get install ibverbs-providers; "
    "RHEL/Fedora: dnf install libibverbs)";

}  // namespace rawpipe::rdma
