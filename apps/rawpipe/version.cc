#include "version.hh"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <fmt/core.h>

#include "build_facts.h"
#include "rawpipe/build_config.h"
#include "rawpipe/config.hh"
#include "version_info.h"

namespace rawpipe::app {
namespace {

// The file behind a loaded shared object whose name starts with `prefix` (librte_eal.so.23 is a
// link to librte_eal.so.23.0): its real name carries the version the dynamic linker chose.
std::string loaded_object(std::string_view prefix) {
  struct Search {
    std::string_view prefix;
    std::string found;
  } search{prefix, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const std::string_view path = info->dlpi_name ? info->dlpi_name : "";
        const std::string_view base = path.substr(path.rfind('/') + 1);
        if (!base.starts_with(s->prefix)) return 0;
        std::error_code ec;
        s->found = std::filesystem::canonical(std::string(path), ec).filename().string();
        if (ec) s->found = std::string(base);
        return 1;
      },
      &search);
  return search.found;
}

// "libibverbs.so.1.14.44.0" -> "1.14.44.0".
std::string so_version(const std::string& file) {
  const auto at = file.find(".so.");
  return at == std::string::npos ? std::string() : file.substr(at + 4);
}

std::string or_absent(const char* v, const char* absent) { return *v ? std::string(v) : std::string(absent); }

std::string dpdk_line() {
  const std::string built = or_absent(RAWPIPE_BUILT_DPDK, "not built in");
  // The library links DPDK when the dpdk port is built in, so rte_version is already in the process.
  using VersionFn = const char* (*)();
  std::string loaded = "not loaded";
  if (auto fn = reinterpret_cast<VersionFn>(dlsym(RTLD_DEFAULT, "rte_version"))) {
    loaded = fn();  // "DPDK 22.11.11"
    if (loaded.starts_with("DPDK ")) loaded.erase(0, 5);
  }
  return fmt::format("DPDK        built with {}, loaded {}", built, loaded);
}

std::string libxdp_line() {
  const std::string built = or_absent(RAWPIPE_BUILT_LIBXDP, "not built in");
  const std::string xdp = loaded_object("libxdp.so");
  const std::string bpf = loaded_object("libbpf.so");
  return fmt::format("libxdp      built with {}, loaded {}; libbpf built with {}, loaded {}", built,
                     xdp.empty() ? "none" : so_version(xdp), or_absent(RAWPIPE_BUILT_LIBBPF, "none"),
                     bpf.empty() ? "none" : so_version(bpf));
}

// rdma-core is opened at run time only by the ports that need it, so look for it the way those
// ports would; the soname's last two numbers are the rdma-core release (libibverbs.so.1.14.44.0 is 44.0).
std::string rdma_line() {
  const std::string built = or_absent(RAWPIPE_BUILT_LIBIBVERBS, "");
  std::string found = "not found (the mlx5 and mana ports need rdma-core's libibverbs.so.1)";
  if (void* h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    const std::string file = loaded_object("libibverbs.so");
    const std::string v = so_version(file);
    const auto last_dot = v.rfind('.'), before = last_dot == std::string::npos ? v.npos : v.rfind('.', last_dot - 1);
    found = before == std::string::npos ? fmt::format("{}", file) : fmt::format("{} (rdma-core {})", file, v.substr(before + 1));
    dlclose(h);
  }
  return fmt::format("rdma-core   built with libibverbs {}, loads {}", built.empty() ? "headers only" : built, found);
}

}  // namespace

std::string version_text() {
  std::string drivers;
  for (const DriverInfo& d : builtin_drivers()) drivers += (drivers.empty() ? "" : " ") + d.name;
  std::string out = fmt::format("rawpipe {} (commit {}, {} build)\n", RAWPIPE_VERSION, RAWPIPE_COMMIT, RAWPIPE_BUILD_TYPE);
  out += fmt::format("drivers     {}\n", drivers);
  out += dpdk_line() + "\n" + libxdp_line() + "\n" + rdma_line() + "\n";
  return out;
}

}  // namespace rawpipe::app
