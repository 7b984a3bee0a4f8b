#include "tests/support/build_tree.hh"

#include <fstream>
#include <nlohmann/json.hpp>

namespace rawpipe::test {

namespace fs = std::filesystem;

BuildDirs build_dirs() {
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  for (fs::path dir = exe.parent_path(); dir.has_relative_path(); dir = dir.parent_path()) {
    const fs::path info = dir / "meson-info" / "meson-info.json";
    if (!fs::exists(info)) continue;
    std::ifstream in(info);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("directories")) return {{}, dir};
    return {fs::path(j["directories"]["source"].get<std::string>()), dir};
  }
  return {};
}

fs::path build_dir() { return build_dirs().build; }

fs::path source_dir() { return build_dirs().source; }

fs::path rawpipe_binary() {
  const fs::path build = build_dir();
  return build.empty() ? fs::path() : build / "apps" / "rawpipe" / "rawpipe";
}

}  // namespace rawpipe::test
