#include "pipeline/privilege/module_location.hh"

#include <dlfcn.h>
#include <link.h>

#include "pipeline/build_paths.h"

namespace rawpipe {

std::filesystem::path loaded_module() {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&loaded_module), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) ==
      0)
    return {};
  std::error_code ec;
  // The main program's link_map has an empty name (dli_fname is then argv[0], maybe relative).
  std::filesystem::path path = map && map->l_name && *map->l_name ? std::filesystem::path(map->l_name)
                                                                   : std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  std::filesystem::path real = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : real;
}

bool is_within(const std::filesystem::path& path, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::weakly_canonical(dir, ec);
  auto rel = path.lexically_relative(ec ? dir : real);
  return !rel.empty() && *rel.begin() != "..";
}

bool running_from_build_tree() {
  const std::filesystem::path module = loaded_module();
  return !module.empty() && is_within(module, RAWPIPE_BUILD_ROOT);
}

std::string relocated_install_path(const std::string& install_path) {
  namespace fs = std::filesystem;
  const fs::path module = loaded_module();
  if (module.empty()) return install_path;
  const bool shared = module.filename().string().starts_with("librawpipe.so");
  const fs::path from = shared ? RAWPIPE_INSTALL_LIBDIR : RAWPIPE_INSTALL_BINDIR;
  return (module.parent_path() / fs::path(install_path).lexically_relative(from)).lexically_normal().string();
}

}  // namespace rawpipe
