#include "pmd/af_xdp/installed.hh"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace rawpipe::af_xdp {
namespace {

std::string read_cmdline(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && s.back() == '\0') s.pop_back();
  for (char& c : s)
    if (c == '\0') c = ' ';
  return s;
}

// True when some XDP link on ifindex exists (its program was attached through bpf_link).
bool xdp_link_on(int ifindex) {
  std::uint32_t id = 0;
  while (bpf_link_get_next_id(id, &id) == 0) {
    int fd = bpf_link_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_link_info info{};
    std::uint32_t len = sizeof info;
    const bool match = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.type == BPF_LINK_TYPE_XDP &&
                       static_cast<int>(info.xdp.ifindex) == ifindex;
    close(fd);
    if (match) return true;
  }
  return false;
}

}  // namespace

std::vector<ProgramHolder> program_holders(std::uint32_t prog_id) {
  namespace fs = std::filesystem;
  std::vector<ProgramHolder> out;
  const std::string needle = fmt::format("prog_id:\t{}\n", prog_id);
  const pid_t self = getpid();
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator("/proc", ec)) {
    const std::string pid_text = proc.path().filename().string();
    pid_t pid = 0;
    auto [p, e] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
    if (e != std::errc() || p != pid_text.data() + pid_text.size() || pid == self) continue;
    std::error_code ec2;
    for (const auto& fdinfo : fs::directory_iterator(proc.path() / "fdinfo", ec2)) {
      std::ifstream in(fdinfo.path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.find(needle) != std::string::npos) {
        out.push_back({pid, read_cmdline(pid)});
        break;
      }
    }
  }
  return out;
}

Result<std::optional<InstalledProgram>> installed_program(int ifindex) {
  LIBBPF_OPTS(bpf_xdp_query_opts, q);
  if (int err = bpf_xdp_query(ifindex, 0, &q); err)
    return Status::errorf("cannot ask the kernel which XDP program interface index {} has: {}", ifindex,
                          std::strerror(-err));
  if (q.prog_id == 0) return std::optional<InstalledProgram>();
  InstalledProgram p;
  p.id = q.prog_id;
  p.attach_mode = q.attach_mode;
  int fd = bpf_prog_get_fd_by_id(p.id);
  if (fd >= 0) {
    bpf_prog_info info{};
    std::uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) p.name = info.name;
    close(fd);
  }
  p.through_link = xdp_link_on(ifindex);
  p.holders = program_holders(p.id);
  return std::optional<InstalledProgram>(std::move(p));
}

Status remove_leftover(int ifindex, const InstalledProgram& prog) {
  if (auto h = program_holders(prog.id); !h.empty())
    return Status::errorf("XDP program {} is held by {}", prog.id, describe_holders(h));
  std::uint32_t flags = prog.attach_mode == XDP_ATTACHED_SKB   ? XDP_FLAGS_SKB_MODE
                        : prog.attach_mode == XDP_ATTACHED_DRV ? XDP_FLAGS_DRV_MODE
                        : prog.attach_mode == XDP_ATTACHED_HW  ? XDP_FLAGS_HW_MODE
                                                               : 0;
  int old_fd = bpf_prog_get_fd_by_id(prog.id);
  LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = old_fd);
  // XDP_FLAGS_REPLACE with the old program: detach only that one, not one attached meanwhile.
  int err = bpf_xdp_detach(ifindex, flags | (old_fd >= 0 ? XDP_FLAGS_REPLACE : 0), old_fd >= 0 ? &opts : nullptr);
  if (old_fd >= 0) close(old_fd);
  if (err)
    return Status::errorf("cannot detach XDP program {}: {}{}", prog.id, std::strerror(-err),
                          prog.through_link ? " (it is attached through a bpf_link, probably pinned in bpffs: "
                                              "remove the pin)"
                                            : "");
  return Status::ok();
}

std::string describe_holders(const std::vector<ProgramHolder>& holders) {
  std::string out;
  for (const auto& h : holders)
    out += fmt::format("{}pid {} ({})", out.empty() ? "" : ", ", h.pid, h.command.empty() ? "?" : h.command);
  return out;
}

}  // namespace rawpipe::af_xdp
