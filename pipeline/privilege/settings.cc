#include "pipeline/privilege/settings.hh"

#include "pipeline/config/section.hh"

namespace rawpipe {

PrivilegeSettings read_privilege_keys(ConfigSection& s) {
  PrivilegeSettings p;
  p.drop = s.boolean("drop_privileges", true);
  if (s.has("user")) {
    p.user = s.string("user");
    if (p.user.empty()) s.fail("user", "expected a user name, got an empty string");
  }
  if (s.has("group")) {
    p.group = s.string("group");
    if (p.group.empty()) s.fail("group", "expected a group name, got an empty string");
    else if (p.user.empty()) s.fail("group", "is only used together with user = \"...\"");
  }
  if (!p.user.empty() && !p.drop)
    s.fail("user", "switching user drops privileges; it cannot be combined with drop_privileges = false");
  if (s.has("plugin_dirs")) {
    p.plugin_dirs_set = true;
    p.plugin_dirs = s.string_list("plugin_dirs");
    for (const auto& d : p.plugin_dirs)
      if (d.empty() || d.front() != '/')
        s.fail("plugin_dirs", fmt::format("expected absolute directory paths, got \"{}\"", d));
  }
  return p;
}

}  // namespace rawpipe
