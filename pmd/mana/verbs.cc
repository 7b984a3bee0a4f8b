#include "pmd/mana/verbs.hh"

#include <mutex>
#include <optional>

namespace rawpipe::mana {
namespace {

Status load_into(std::string_view soname, ManaTable& t) {
  const rdma::SymbolSlot slots[] = {
      rdma::symbol_slot(t.set_context_attr, "manadv_set_context_attr"),
      rdma::symbol_slot(t.init_obj, "manadv_init_obj"),
  };
  void* handle = nullptr;
  return rdma::load_library(soname, slots, kManaInstallHint, &handle);
}

}  // namespace

Result<const ManaTable*> load_mana(std::string_view soname) {
  if (soname != kManaSoname) {
    // Leaked on purpose: libraries are never unloaded, so neither are their tables.
    auto* t = new ManaTable();
    Status s = load_into(soname, *t);
    if (!s) {
      delete t;
      return s;
    }
    return static_cast<const ManaTable*>(t);
  }
  static std::once_flag once;
  static ManaTable table;
  static std::optional<Status> status;
  std::call_once(once, [] { status = load_into(kManaSoname, table); });
  if (!*status) return *status;
  return static_cast<const ManaTable*>(&table);
}

}  // namespace rawpipe::mana
