#include "pipeline/privilege/settings.hh"

#include "pipeline/config/section.hh"
#include "pipeline/config/tables.hh"

namespace rawpipe {

namespace {
const KeyDoc kPrivilegeDocs[] = {
    {"drop_privileges", "boolean", "", "true",
     "after setup, drop every capability the ports no longer need and set no_new_privs"},
    {"user", "string", "a user name", "keep the uid", "switch the process to this user after setup"},
    {"group", "string", "a group name", "the user's primary group", "switch the process to this group after setup"},
    {"plugin_dirs", "string list", "absolute directories", "RAWPIPE_PLUGIN_PATH, the build's and install's plugins",
     "the only directories filter plugins may load from"},
};
}  // namespace

const KeyTable kPrivilegeKeys{"privileges", "[run]", "privilege keys of [run]", kPrivilegeDocs};

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
