#include "pmd/af_xdp/program.hh"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <xdp/libxdp.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include "pipeline/classify/rule.hh"
#include "pipeline/privilege/module_location.hh"
#include "pmd/af_xdp/installed.hh"
#include "pmd/af_xdp/xdp_paths.h"
#include "pmd/af_xdp/xdp_steer_abi.h"

namespace rawpipe::af_xdp {
namespace {

// libbpf and libxdp print from inside calls we make; while a LibMessages is alive the text is
// kept for the error message instead of going to stderr. Control path, serialised by the mutex.
std::mutex g_print_mu;
std::string* g_print_sink = nullptr;

int collect(const char* format, va_list args) {
  char buf[512];
  int n = vsnprintf(buf, sizeof(buf), format, args);
  if (g_print_sink) g_print_sink->append(buf);
  return n;
}
int libbpf_collect(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  return collect(format, args);
}
int libxdp_collect(enum libxdp_print_level level, const char* format, va_list args) {
  if (level == LIBXDP_DEBUG) return 0;
  return collect(format, args);
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (auto& c : s)
    if (c == '\n') c = ';';
  return s;
}

}  // namespace

LibMessages::LibMessages() {
  g_print_mu.lock();
  g_print_sink = new std::string();
  libbpf_set_print(libbpf_collect);
  libxdp_set_print(libxdp_collect);
}

LibMessages::~LibMessages() {
  delete g_print_sink;
  g_print_sink = nullptr;
  g_print_mu.unlock();
}

std::string LibMessages::take() {
  std::string s = trimmed(*g_print_sink);
  g_print_sink->clear();
  return s.empty() ? s : " (" + s + ")";
}

Result<std::string> find_program_object() {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("RAWPIPE_XDP_OBJ"); env && *env) {
    // An explicit override is the only candidate: silently using another object would hide a typo.
    if (fs::exists(env)) return std::string(env);
    return Status::errorf("RAWPIPE_XDP_OBJ={} does not exist", env);
  }
  // A build-tree binary uses the object built beside it; an installed one uses the installed
  // object, found relative to where it was loaded from, so that a `meson install --destdir` tree
  // or a moved prefix finds its own copy, and never a build directory's (which an installed,
  // privileged rawpipe must not trust, and which may be stale or gone).
  const bool from_build_tree = running_from_build_tree();
#ifdef RAWPIPE_XDP_OBJ_BUILD
  if (from_build_tree) candidates.push_back(RAWPIPE_XDP_OBJ_BUILD);
#endif
#ifdef RAWPIPE_XDP_OBJ_INSTALL
  if (!from_build_tree) candidates.push_back(relocated_install_path(RAWPIPE_XDP_OBJ_INSTALL));
  if (candidates.empty() || candidates.back() != RAWPIPE_XDP_OBJ_INSTALL) candidates.push_back(RAWPIPE_XDP_OBJ_INSTALL);
#endif
  std::error_code ec;
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return c;
  std::string list;
  for (const auto& c : candidates) list += (list.empty() ? "" : ", ") + c;
  return Status::errorf("the XDP program xdp_steer.bpf.o was not found (looked in {}); build it with ninja, "
                        "install rawpipe, or point RAWPIPE_XDP_OBJ at it",
                        list);
}

Result<std::unique_ptr<SteerProgram>> SteerProgram::attach(const std::string& ifname, int ifindex, Attach attach,
                                                           SteerMode mode) {
  auto path = find_program_object();
  if (!path) return path.status();
  std::unique_ptr<SteerProgram> p(new SteerProgram());
  p->path_ = path.value();
  p->ifindex_ = ifindex;

  LibMessages msgs;
  auto installed = installed_program(ifindex);
  if (!installed) return installed.status().context(fmt::format("interface {}", ifname));
  if (const auto& prog = installed.value()) {
    if (!prog->is_rawpipe())
      return Status::errorf("interface {} already has an XDP program ('{}', id {}{}); remove it with "
                            "'ip link set dev {} xdp off' (or xdp-loader unload) if nothing else needs it",
                            ifname, prog->name, prog->id,
                            prog->holders.empty() ? "" : ", held by " + describe_holders(prog->holders), ifname);
    if (!prog->holders.empty())
      return Status::errorf("interface {} already carries rawpipe's XDP program (id {}), held by {}: another "
                            "pipeline runs on this interface; stop it first (its program goes away with it)",
                            ifname, prog->id, describe_holders(prog->holders));
    // rawpipe's program and no process holds it: a run that died before it could detach (one
    // attached through netlink by an older rawpipe, or by hand). Nothing can be using it.
    RAWPIPE_TRY(remove_leftover(ifindex, *prog).context(fmt::format(
        "interface {} has a leftover rawpipe XDP program that no process holds", ifname)));
    p->removed_leftover_ = fmt::format("removed a leftover rawpipe XDP program (id {}) from {}: no process held it, "
                                       "so an earlier run ended without detaching it",
                                       prog->id, ifname);
  }

  // Attached through a bpf_link: the kernel detaches the program when the link's last fd closes,
  // which happens however the process ends (SIGKILL included) and needs no privilege, whereas a
  // netlink attach stays behind a dead process. Each attempt gets a freshly opened object: a
  // program loaded for a failed native attach cannot be reused in another mode.
  const std::pair<std::uint32_t, const char*> modes[] = {{XDP_FLAGS_DRV_MODE, "native"},
                                                         {XDP_FLAGS_SKB_MODE, "generic"}};
  std::string failures;
  for (const auto& [flag, label] : modes) {
    if ((attach == Attach::kNative && flag != XDP_FLAGS_DRV_MODE) ||
        (attach == Attach::kGeneric && flag != XDP_FLAGS_SKB_MODE))
      continue;
    bpf_object* obj = bpf_object__open_file(p->path_.c_str(), nullptr);
    if (long err = libbpf_get_error(obj))
      return Status::errorf("cannot open the XDP program {}: {}{}", p->path_, std::strerror(static_cast<int>(-err)),
                            msgs.take());
    if (int err = bpf_object__load(obj)) {
      bpf_object__close(obj);
      return Status::errorf("cannot load the XDP program {}: {}{}{}", p->path_, std::strerror(-err), msgs.take(),
                            geteuid() != 0 ? " (run as root or grant CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON)" : "");
    }
    bpf_program* prog = bpf_object__find_program_by_name(obj, kSteerProgramName);
    if (!prog) {
      bpf_object__close(obj);
      return Status::errorf("the XDP program {} has no function {}", p->path_, kSteerProgramName);
    }
    LIBBPF_OPTS(bpf_link_create_opts, lopts, .flags = flag);
    int link = bpf_link_create(bpf_program__fd(prog), ifindex, BPF_XDP, &lopts);
    if (link >= 0) {
      p->own_obj_ = obj;
      p->link_fd_ = link;
      p->prog_fd_ = bpf_program__fd(prog);
      p->attach_mode_ = label;
      break;
    }
    const int err = errno;
    failures += fmt::format("{}{} mode: {}{}", failures.empty() ? "" : "; ", label, std::strerror(err), msgs.take());
    bpf_object__close(obj);
  }
  if (p->link_fd_ < 0)
    return Status::errorf("cannot attach the XDP program to {} through a bpf_link: {}{}", ifname, failures,
                          geteuid() != 0 ? " (run as root or grant CAP_NET_ADMIN and CAP_BPF)" : "");
  RAWPIPE_TRY(p->find_maps(p->own_obj_, mode));
  return p;
}

Status SteerProgram::find_maps(bpf_object* obj, SteerMode mode) {
  struct {
    const char* name;
    int* fd;
  } maps[] = {{"xsks_map", &xsks_fd_}, {"port_rules", &port_fd_}, {"proto_rules", &proto_fd_},
              {"addr_rules", &addr_fd_}, {"cfg", &cfg_fd_},         {"stats", &stats_fd_}};
  for (auto& m : maps) {
    *m.fd = bpf_object__find_map_fd_by_name(obj, m.name);
    if (*m.fd < 0) return Status::errorf("the XDP program {} has no map '{}': is it rawpipe's xdp_steer.bpf.o?", path_, m.name);
  }
  std::uint32_t key = 0, value = mode == SteerMode::kAll ? RAWPIPE_XDP_MODE_ALL : RAWPIPE_XDP_MODE_STEER;
  if (bpf_map_update_elem(cfg_fd_, &key, &value, BPF_ANY) != 0)
    return Status::errorf("cannot set the XDP program's mode: {}", std::strerror(errno));
  quiesce_inner_fd_ = bpf_map_create(BPF_MAP_TYPE_ARRAY, "rawpipe_quiet_i", 4, 4, 1, nullptr);
  LIBBPF_OPTS(bpf_map_create_opts, outer_opts, .inner_map_fd = static_cast<__u32>(quiesce_inner_fd_));
  if (quiesce_inner_fd_ >= 0)
    quiesce_outer_fd_ = bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "rawpipe_quiet", 4, 4, 1, &outer_opts);
  if (quiesce_outer_fd_ < 0)
    return Status::errorf("cannot create the map through which steering updates wait for the XDP program: {}",
                          std::strerror(errno));
  return Status::ok();
}

Status SteerProgram::wait_for_running_programs() {
  const std::uint32_t key = 0;
  if (bpf_map_update_elem(quiesce_outer_fd_, &key, &quiesce_inner_fd_, BPF_ANY) != 0)
    return Status::errorf("cannot wait for the XDP program's running passes: {}", std::strerror(errno));
  return Status::ok();
}

Result<std::unique_ptr<SteerProgram>> SteerProgram::load_unattached(SteerMode mode) {
  auto path = find_program_object();
  if (!path) return path.status();
  std::unique_ptr<SteerProgram> p(new SteerProgram());
  p->path_ = path.value();
  p->attach_mode_ = "none";
  LibMessages msgs;
  bpf_object* obj = bpf_object__open_file(p->path_.c_str(), nullptr);
  if (long err = libbpf_get_error(obj))
    return Status::errorf("cannot open the XDP program {}: {}{}", p->path_, std::strerror(static_cast<int>(-err)),
                          msgs.take());
  p->own_obj_ = obj;
  if (int err = bpf_object__load(obj))
    return Status::errorf("cannot load the XDP program {}: {}{}", p->path_, std::strerror(-err), msgs.take());
  bpf_program* prog = bpf_object__find_program_by_name(obj, kSteerProgramName);
  if (!prog) return Status::errorf("the XDP program {} has no function {}", p->path_, kSteerProgramName);
  p->prog_fd_ = bpf_program__fd(prog);
  RAWPIPE_TRY(p->find_maps(obj, mode));
  return p;
}

Result<int> SteerProgram::test_run(const std::uint8_t* frame, std::size_t len) {
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = static_cast<std::uint32_t>(len),
              .repeat = 1);
  if (bpf_prog_test_run_opts(prog_fd_, &opts) != 0)
    return Status::errorf("BPF_PROG_TEST_RUN: {}", std::strerror(errno));
  return static_cast<int>(opts.retval);
}

SteerProgram::~SteerProgram() {
  // Closing the link detaches the program (nothing else holds the link: it is never pinned).
  if (link_fd_ >= 0) close(link_fd_);
  if (own_obj_) bpf_object__close(own_obj_);
  if (quiesce_outer_fd_ >= 0) close(quiesce_outer_fd_);
  if (quiesce_inner_fd_ >= 0) close(quiesce_inner_fd_);
}

namespace {

// The entries one rule set puts in a trie, by key bytes (the kernel compares keys byte for byte).
template <typename Key>
using Entries = std::map<std::string, std::pair<Key, std::uint32_t>>;

template <typename Key>
std::string key_bytes(const Key& k) {
  return std::string(reinterpret_cast<const char*>(&k), sizeof k);
}

template <typename Key>
Status write_entries(int fd, const Entries<Key>& entries, unsigned& written) {
  for (const auto& [bytes, kv] : entries) {
    if (bpf_map_update_elem(fd, &kv.first, &kv.second, BPF_ANY) != 0)
      return Status::errorf("cannot write a steering entry: {}{}", std::strerror(errno),
                            errno == E2BIG || errno == ENOMEM || errno == ENOSPC
                                ? fmt::format(" (the XDP program holds at most {} entries per rule kind, old and "
                                              "new rules together while an update is made)",
                                              RAWPIPE_XDP_MAX_RULES)
                                : "");
    ++written;
  }
  return Status::ok();
}

// The entries of the trie that `keep` does not have.
template <typename Key>
std::vector<Key> others(int fd, const Entries<Key>& keep) {
  std::vector<Key> stale;
  Key next{};
  bool first = true;
  Key cur{};
  while (bpf_map_get_next_key(fd, first ? nullptr : &cur, &next) == 0) {
    first = false;
    cur = next;
    if (!keep.count(key_bytes(next))) stale.push_back(next);
  }
  return stale;
}

template <typename Key>
Status remove(int fd, const std::vector<Key>& stale) {
  for (const Key& k : stale)
    if (bpf_map_delete_elem(fd, &k) != 0 && errno != ENOENT)
      return Status::errorf("cannot remove a steering entry: {}", std::strerror(errno));
  return Status::ok();
}

}  // namespace

// Make before break: the new rules' entries are written first (an entry both sets have is
// overwritten in place, atomically for the program), and only then are the entries the new set
// lacks removed. Traffic both sets steer is steered throughout; clearing first would hand it to
// the kernel for the length of the update. Between the two the update waits for the program's
// passes in flight: a pass looks in the port, proto and addr tries one after another, so one
// that read the port trie before a rule moved into it from the addr trie, and the addr trie after
// the old entry went, would find neither and pass a steered frame to the kernel (seen on veth
// under AddressSanitizer's slower pace). The wait is one synchronize_rcu, milliseconds, and only
// an update that removes something pays it.
Result<unsigned> SteerProgram::set_rules(const SteeringRules& rules) {
  Entries<rawpipe_port_key> port_entries;
  Entries<rawpipe_proto_key> proto_entries;
  Entries<rawpipe_addr_key> addr_entries;
  for (const SteeringRule& r : rules.rules) {
    const MatchRule& m = r.match;
    std::vector<std::uint8_t> families;
    if (m.dst_ip)
      families.push_back(m.dst_ip->family == L3Type::kIpv6 ? 6 : 4);
    else if (m.family() != L3Type::kNone)
      families.push_back(m.family() == L3Type::kIpv6 ? 6 : 4);
    else
      families = {4, 6};
    std::vector<std::uint8_t> protos;
    if (m.ip_proto != kIpProtoAny)
      protos.push_back(m.ip_proto);
    else if (m.dst_port)
      protos = {17, 6, 132};  // a port means a protocol with ports: UDP, TCP, SCTP
    const std::uint32_t value = r.endpoint;
    for (std::uint8_t family : families) {
      std::uint8_t addr[16] = {};
      std::uint32_t bits = 0;
      if (m.dst_ip) {
        std::memcpy(addr, m.dst_ip->addr.data(), 16);
        bits = m.dst_ip->len;
      }
      // The first rule to claim a key keeps it, as classify's first match wins.
      if (m.dst_port) {
        for (std::uint8_t proto : protos) {
          rawpipe_port_key k{};
          k.prefixlen = RAWPIPE_PORT_KEY_FIXED_BITS + bits;
          k.family = family;
          k.proto = proto;
          k.port = htons(*m.dst_port);
          std::memcpy(k.addr, addr, 16);
          port_entries.emplace(key_bytes(k), std::pair{k, value});
        }
      } else if (!protos.empty()) {
        rawpipe_proto_key k{};
        k.prefixlen = RAWPIPE_PROTO_KEY_FIXED_BITS + bits;
        k.family = family;
        k.proto = protos[0];
        std::memcpy(k.addr, addr, 16);
        proto_entries.emplace(key_bytes(k), std::pair{k, value});
      } else {
        rawpipe_addr_key k{};
        k.prefixlen = RAWPIPE_ADDR_KEY_FIXED_BITS + bits;
        k.family = family;
        std::memcpy(k.addr, addr, 16);
        addr_entries.emplace(key_bytes(k), std::pair{k, value});
      }
    }
  }
  unsigned written = 0;
  RAWPIPE_TRY(write_entries(port_fd_, port_entries, written));
  RAWPIPE_TRY(write_entries(proto_fd_, proto_entries, written));
  RAWPIPE_TRY(write_entries(addr_fd_, addr_entries, written));
  const auto stale_ports = others(port_fd_, port_entries);
  const auto stale_protos = others(proto_fd_, proto_entries);
  const auto stale_addrs = others(addr_fd_, addr_entries);
  if (stale_ports.empty() && stale_protos.empty() && stale_addrs.empty()) return written;
  RAWPIPE_TRY(wait_for_running_programs());
  RAWPIPE_TRY(remove(port_fd_, stale_ports));
  RAWPIPE_TRY(remove(proto_fd_, stale_protos));
  RAWPIPE_TRY(remove(addr_fd_, stale_addrs));
  return written;
}

Status SteerProgram::remove_socket(std::uint32_t device_queue) {
  if (bpf_map_delete_elem(xsks_fd_, &device_queue) != 0 && errno != ENOENT)
    return Status::errorf("cannot remove queue {} from the XSK map: {}", device_queue, std::strerror(errno));
  return Status::ok();
}

std::map<std::string, std::uint64_t> SteerProgram::counters() const {
  std::map<std::string, std::uint64_t> out;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return out;
  std::vector<std::uint64_t> per_cpu(static_cast<std::size_t>(ncpu));
  const char* names[RAWPIPE_XDP_STAT_COUNT] = {"xdp_redirected", "xdp_passed", "xdp_passed_not_ip"};
  for (std::uint32_t i = 0; i < RAWPIPE_XDP_STAT_COUNT; ++i) {
    if (bpf_map_lookup_elem(stats_fd_, &i, per_cpu.data()) != 0) continue;
    std::uint64_t sum = 0;
    for (auto v : per_cpu) sum += v;
    out[names[i]] = sum;
  }
  return out;
}

}  // namespace rawpipe::af_xdp
