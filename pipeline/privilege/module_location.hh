#pragma once
// Which files a running rawpipe trusts depends on where its code was loaded from. Code running
// from this build tree uses what the build produced beside it (plugins/, the XDP object); an
// installed copy uses the installed files, found relative to itself so that a `meson install
// --destdir` tree or a moved prefix finds its own, and never a build directory's: that path
// exists only on the machine that built the package, and whoever can create it there could
// plant a plugin that a privileged rawpipe would load.

#include <filesystem>
#include <string>

namespace rawpipe {

// librawpipe.so.1, or the executable that linked the core statically; canonical. Empty when
// the loader cannot say.
std::filesystem::path loaded_module();

// Whether `path` (canonical) lies under `dir` (made canonical here: the build root may be
// reached through a symbolic link).
bool is_within(const std::filesystem::path& path, const std::filesystem::path& dir);

// Whether this code runs from the build tree it was built in.
bool running_from_build_tree();

// Where `install_path` (an absolute path under the configured prefix) is for this installed
// copy: moved as the loaded module was moved from the configured libdir (shared library) or
// bindir (static link). `install_path` itself when the module is unknown.
std::string relocated_install_path(const std::string& install_path);

}  // namespace rawpipe
