// The [run] keys of least privilege, read by the config loader:
//   drop_privileges = true          drop capabilities and set no_new_privs after setup (default)
//   user = "nobody"                 switch the whole process to this user after setup
//   group = "nogroup"               ... and this group (default: the user's primary group)
//   plugin_dirs = ["/usr/lib/..."]  where filter plugins may be loaded from (absolute paths;
//                                   default: pipeline/privilege/plugin_path.hh default_plugin_dirs)
#pragma once

#include <string>
#include <vector>

#include "rawpipe/config.hh"

namespace rawpipe {

class ConfigSection;

// Reads the keys above from the [run] table; errors are recorded at their key.
PrivilegeSettings read_privilege_keys(ConfigSection& run);

}  // namespace rawpipe
