#include "pmd/rdma/loader.hh"

#include <dlfcn.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace rawpipe::rdma {
namespace {

// Context-op dispatchers. Same logic as verbs.h's inline wrappers, minus their fallbacks to
// exported symbols (which would need link-time libibverbs): a provider without the op gets
// EOPNOTSUPP, which the callers turn into a message.
int ctx_query_port(ibv_context* ctx, std::uint8_t port, ibv_port_attr* attr) {
  verbs_context* v = verbs_get_ctx_op(ctx, query_port);
  if (!v) return EOPNOTSUPP;
  return v->query_port(ctx, port, attr, sizeof(*attr));
}
int ctx_query_device_ex(ibv_context* ctx, ibv_device_attr_ex* attr) {
  verbs_context* v = verbs_get_ctx_op(ctx, query_device_ex);
  if (!v) return EOPNOTSUPP;
  return v->query_device_ex(ctx, nullptr, attr, sizeof(*attr));
}
ibv_qp* ctx_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
  verbs_context* v = verbs_get_ctx_op(ctx, create_qp_ex);
  if (!v) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return v->create_qp_ex(ctx, attr);
}
ibv_wq* ctx_create_wq(ibv_context* ctx, ibv_wq_init_attr* attr) {
  verbs_context* v = verbs_get_ctx_op(ctx, create_wq);
  if (!v) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  ibv_wq* wq = v->create_wq(ctx, attr);
  if (wq) wq->events_completed = 0;  // verbs.h's wrapper does this; the provider does not
  return wq;
}
int ctx_modify_wq(ibv_wq* wq, ibv_wq_attr* attr) {
  verbs_context* v = verbs_get_ctx_op(wq->context, modify_wq);
  if (!v) return EOPNOTSUPP;
  return v->modify_wq(wq, attr);
}
int ctx_destroy_wq(ibv_wq* wq) {
  verbs_context* v = verbs_get_ctx_op(wq->context, destroy_wq);
  if (!v) return EOPNOTSUPP;
  return v->destroy_wq(wq);
}
ibv_rwq_ind_table* ctx_create_rwq_ind_table(ibv_context* ctx, ibv_rwq_ind_table_init_attr* attr) {
  verbs_context* v = verbs_get_ctx_op(ctx, create_rwq_ind_table);
  if (!v) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return v->create_rwq_ind_table(ctx, attr);
}
int ctx_destroy_rwq_ind_table(ibv_rwq_ind_table* table) {
  verbs_context* v = verbs_get_ctx_op(table->context, destroy_rwq_ind_table);
  if (!v) return EOPNOTSUPP;
  return v->destroy_rwq_ind_table(table);
}
ibv_flow* ctx_create_flow(ibv_qp* qp, ibv_flow_attr* attr) {
  verbs_context* v = verbs_get_ctx_op(qp->context, ibv_create_flow);
  if (!v) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return v->ibv_create_flow(qp, attr);
}
int ctx_destroy_flow(ibv_flow* flow) {
  verbs_context* v = verbs_get_ctx_op(flow->context, ibv_destroy_flow);
  if (!v) return EOPNOTSUPP;
  return v->ibv_destroy_flow(flow);
}
ibv_pd* ctx_alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) {
  verbs_context* v = verbs_get_ctx_op(ctx, alloc_parent_domain);
  if (!v) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return v->alloc_parent_domain(ctx, attr);
}

Status load_ibverbs_into(std::string_view soname, IbverbsTable& t) {
  const SymbolSlot slots[] = {
      symbol_slot(t.get_device_list, "ibv_get_device_list"),
      symbol_slot(t.free_device_list, "ibv_free_device_list"),
      symbol_slot(t.get_device_name, "ibv_get_device_name"),
      symbol_slot(t.open_device, "ibv_open_device"),
      symbol_slot(t.close_device, "ibv_close_device"),
      symbol_slot(t.query_device, "ibv_query_device"),
      symbol_slot(t.alloc_pd, "ibv_alloc_pd"),
      symbol_slot(t.dealloc_pd, "ibv_dealloc_pd"),
      symbol_slot(t.reg_mr, "ibv_reg_mr"),
      symbol_slot(t.dereg_mr, "ibv_dereg_mr"),
      symbol_slot(t.create_cq, "ibv_create_cq"),
      symbol_slot(t.destroy_cq, "ibv_destroy_cq"),
      symbol_slot(t.create_qp, "ibv_create_qp"),
      symbol_slot(t.modify_qp, "ibv_modify_qp"),
      symbol_slot(t.destroy_qp, "ibv_destroy_qp"),
  };
  void* handle = nullptr;
  RAWPIPE_TRY(load_library(soname, slots, kIbverbsInstallHint, &handle));
  t.query_port = ctx_query_port;
  t.query_device_ex = ctx_query_device_ex;
  t.create_qp_ex = ctx_create_qp_ex;
  t.create_wq = ctx_create_wq;
  t.modify_wq = ctx_modify_wq;
  t.destroy_wq = ctx_destroy_wq;
  t.create_rwq_ind_table = ctx_create_rwq_ind_table;
  t.destroy_rwq_ind_table = ctx_destroy_rwq_ind_table;
  t.create_flow = ctx_create_flow;
  t.destroy_flow = ctx_destroy_flow;
  t.alloc_parent_domain = ctx_alloc_parent_domain;
  return Status::ok();
}

Status load_mlx5_into(std::string_view soname, Mlx5Table& t) {
  const SymbolSlot slots[] = {
      symbol_slot(t.is_supported, "mlx5dv_is_supported"),
      symbol_slot(t.query_device, "mlx5dv_query_device"),
      symbol_slot(t.create_cq, "mlx5dv_create_cq"),
      symbol_slot(t.create_wq, "mlx5dv_create_wq"),
      symbol_slot(t.create_qp, "mlx5dv_create_qp"),
      symbol_slot(t.init_obj, "mlx5dv_init_obj"),
      symbol_slot(t.open_device, "mlx5dv_open_device"),
      symbol_slot(t.devx_general_cmd, "mlx5dv_devx_general_cmd"),
  };
  void* handle = nullptr;
  return load_library(soname, slots, kMlx5InstallHint, &handle);
}

// Loads a table once for the default soname and keeps the outcome (success or error) for the
// life of the process; other sonames (tests) are loaded afresh into a table kept for the life of
// the process too, so returned pointers stay valid.
template <typename Table>
Result<const Table*> load_cached(std::string_view soname, std::string_view default_soname,
                                 Status (*load_into)(std::string_view, Table&)) {
  if (soname != default_soname) {
    static std::mutex kept_mu;
    static std::vector<std::unique_ptr<Table>> kept;
    auto table = std::make_unique<Table>();
    RAWPIPE_TRY(load_into(soname, *table));
    std::lock_guard lock(kept_mu);
    kept.push_back(std::move(table));
    return static_cast<const Table*>(kept.back().get());
  }
  static std::mutex mu;
  static std::optional<Result<const Table*>> outcome;
  static Table table;
  std::lock_guard lock(mu);
  if (!outcome) {
    Status s = load_into(soname, table);
    if (s.is_ok())
      outcome.emplace(static_cast<const Table*>(&table));
    else
      outcome.emplace(std::move(s));
  }
  return *outcome;
}

}  // namespace

Status load_library(std::string_view soname, std::span<const SymbolSlot> slots, std::string_view install_hint,
                    void** handle) {
  const std::string name(soname);
  dlerror();
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return Status::errorf("rdma-core library {} is not installed or cannot be loaded ({}); {}", name,
                          why ? why : "unknown dlopen error", install_hint);
  }
  std::vector<void*> found(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    dlerror();
    found[i] = dlsym(h, slots[i].name);
    if (!found[i]) {
      dlclose(h);
      return Status::errorf("{} has no symbol {}: the installed rdma-core is too old (rawpipe needs v44 or newer); {}",
                            name, slots[i].name, install_hint);
    }
  }
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i].store(slots[i].target, found[i]);
  *handle = h;
  return Status::ok();
}

Result<const IbverbsTable*> load_ibverbs(std::string_view soname) {
  return load_cached<IbverbsTable>(soname, kIbverbsSoname, load_ibverbs_into);
}

Result<const Mlx5Table*> load_mlx5(std::string_view soname) {
  return load_cached<Mlx5Table>(soname, kMlx5Soname, load_mlx5_into);
}

}  // namespace rawpipe::rdma
