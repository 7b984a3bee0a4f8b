#include "preload/copy_interfaces.hh"

#include <net/if.h>

#include <toml++/toml.h>

namespace rawpipe::preload {

bool copy_interfaces(const std::string& text, CopyInterfaces* out) {
  *out = CopyInterfaces{};
  toml::table doc;
  try {
    doc = toml::parse(text);
  } catch (const toml::parse_error&) {
    return false;  // create() reports the config's error
  }
  const toml::array* ports = doc["ports"].as_array();
  if (!ports) return false;
  for (const toml::node& node : *ports) {
    const toml::table* port = node.as_table();
    if (!port) return false;
    const std::string pmd = (*port)["pmd"].value_or(std::string());
    if (pmd == "af_xdp") continue;
    if (pmd != "af_packet" && pmd != "auto") return false;
    const unsigned ifindex = if_nametoindex((*port)["interface"].value_or(std::string()).c_str());
    if (ifindex == 0 || out->n == CopyInterfaces::kMax) return false;
    out->ifindex[out->n++] = static_cast<int>(ifindex);
  }
  return true;
}

}  // namespace rawpipe::preload
