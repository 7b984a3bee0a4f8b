#include "pmd/host/caps.hh"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace rawpipe::host {

Result<CapSet> read_caps() {
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (syscall(SYS_capget, &header, data) != 0) return Status::errorf("capget: {}", std::strerror(errno));
  CapSet s;
  s.effective = data[0].effective | (std::uint64_t(data[1].effective) << 32);
  s.permitted = data[0].permitted | (std::uint64_t(data[1].permitted) << 32);
  return s;
}

Result<CapSet> parse_proc_status_caps(std::string_view text) {
  CapSet s;
  bool eff = false;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    auto field = [&](std::string_view key, std::uint64_t& out) {
      if (!line.starts_with(key)) return false;
      std::string value(line.substr(key.size()));
      char* end = nullptr;
      out = std::strtoull(value.c_str(), &end, 16);
      return end != value.c_str();
    };
    if (field("CapEff:", s.effective)) eff = true;
    (void)field("CapPrm:", s.permitted);
    (void)field("CapBnd:", s.bounding);
  }
  if (!eff) return Status::error("no CapEff line in the process status text");
  return s;
}

bool has_capability(int cap) {
  auto caps = read_caps();
  return caps && caps->has(cap);
}

std::string_view capability_name(int cap) {
  switch (cap) {
    case CAP_NET_RAW: return "CAP_NET_RAW";
    case CAP_NET_ADMIN: return "CAP_NET_ADMIN";
    case CAP_IPC_LOCK: return "CAP_IPC_LOCK";
    case CAP_SYS_ADMIN: return "CAP_SYS_ADMIN";
#ifdef CAP_BPF
    case CAP_BPF: return "CAP_BPF";
#endif
    default: return "CAP_?";
  }
}

}  // namespace rawpipe::host
