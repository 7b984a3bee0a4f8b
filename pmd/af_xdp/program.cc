#include "pmd/af_xdp/program.hh"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>
#include <xdp/libxdp.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "pipeline/classify/rule.hh"
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

std::string lib_error(long err) {
  char buf[256];
  libxdp_strerror(static_cast<int>(err), buf, sizeof(buf));
  return buf;
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

namespace {

// The file this code was loaded from: librawpipe.so.1, or the executable that linked it statically.
std::filesystem::path loaded_module() {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&find_program_object), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0)
    return {};
  std::error_code ec;
  // The main program's link_map has an empty name (dli_fname is then argv[0], maybe relative).
  std::filesystem::path path = map && map->l_name && *map->l_name ? std::filesystem::path(map->l_name)
                                                                   : std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  std::filesystem::path real = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : real;
}

// path is canonical already; dir is made so (the build root may be reached through a symlink).
bool is_within(const std::filesystem::path& path, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::weakly_canonical(dir, ec);
  auto rel = path.lexically_relative(ec ? dir : real);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

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
  const fs::path module = loaded_module();
#ifdef RAWPIPE_XDP_OBJ_BUILD
  if (!module.empty() && is_within(module, RAWPIPE_BUILD_ROOT)) candidates.push_back(RAWPIPE_XDP_OBJ_BUILD);
#endif
#ifdef RAWPIPE_XDP_OBJ_INSTALL
  if (!module.empty() && !is_within(module, RAWPIPE_BUILD_ROOT)) {
    // librawpipe.so lives in libdir, an executable that linked librawpipe.a in bindir.
    const bool shared = module.filename().string().starts_with("librawpipe.so");
    const fs::path from = shared ? RAWPIPE_INSTALL_LIBDIR : RAWPIPE_INSTALL_BINDIR;
    candidates.push_back((module.parent_path() / fs::path(RAWPIPE_XDP_OBJ_INSTALL).lexically_relative(from))
                             .lexically_normal()
                             .string());
  }
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
  if (xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(ifindex); mp && !libxdp_get_error(mp)) {
    // A libxdp dispatcher takes our program beside the others; a plain (legacy) program cannot.
    xdp_program* main = xdp_multiprog__is_legacy(mp) ? xdp_multiprog__main_prog(mp) : nullptr;
    std::string name = main ? xdp_program__name(main) : "";
    std::uint32_t id = main ? xdp_program__id(main) : 0;
    xdp_multiprog__close(mp);
    if (main)
      return Status::errorf("interface {} already has an XDP program ('{}', id {}); remove it with "
                            "'ip link set dev {} xdp off' (or xdp-loader unload) if nothing else needs it",
                            ifname, name, id, ifname);
  }

  // Each attach gets a freshly opened object: a failed native attach leaves a loaded program behind
  // that cannot be attached in another mode.
  const std::pair<xdp_attach_mode, const char*> modes[] = {{XDP_MODE_NATIVE, "native"}, {XDP_MODE_SKB, "generic"}};
  std::string failures;
  for (const auto& [m, label] : modes) {
    if ((attach == Attach::kNative && m != XDP_MODE_NATIVE) || (attach == Attach::kGeneric && m != XDP_MODE_SKB))
      continue;
    xdp_program* prog = xdp_program__open_file(p->path_.c_str(), "xdp", nullptr);
    if (long err = libxdp_get_error(prog)) {
      return Status::errorf("cannot open the XDP program {}: {}{}", p->path_, lib_error(err), msgs.take());
    }
    int err = xdp_program__attach(prog, ifindex, m, 0);
    if (err == 0) {
      p->prog_ = prog;
      p->attached_mode_ = m;
      p->attach_mode_ = label;
      break;
    }
    failures += fmt::format("{}{} mode: {}{}", failures.empty() ? "" : "; ", label, lib_error(err), msgs.take());
    xdp_program__close(prog);
  }
  if (!p->prog_)
    return Status::errorf("cannot attach the XDP program to {}: {}{}", ifname, failures,
                          geteuid() != 0 ? " (run as root or grant CAP_NET_ADMIN and CAP_BPF)" : "");

  if (xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(ifindex); mp && !libxdp_get_error(mp)) {
    p->dispatcher_ = !xdp_multiprog__is_legacy(mp);
    xdp_multiprog__close(mp);
  }

  p->prog_fd_ = xdp_program__fd(p->prog_);
  RAWPIPE_TRY(p->find_maps(xdp_program__bpf_obj(p->prog_), mode));
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
  bpf_program* prog = bpf_object__find_program_by_name(obj, "rawpipe_steer");
  if (!prog) return Status::errorf("the XDP program {} has no function rawpipe_steer", p->path_);
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
  if (own_obj_) bpf_object__close(own_obj_);
  if (!prog_) return;
  LibMessages quiet;
  (void)xdp_program__detach(prog_, ifindex_, static_cast<xdp_attach_mode>(attached_mode_), 0);
  xdp_program__close(prog_);
}

namespace {

template <typename Key>
Status clear_map(int fd) {
  Key key{}, next{};
  // Deleting while iterating restarts from the first key each time, which a trie allows.
  while (bpf_map_get_next_key(fd, nullptr, &next) == 0) {
    key = next;
    if (bpf_map_delete_elem(fd, &key) != 0) return Status::errorf("cannot clear a steering map: {}", std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace

Result<unsigned> SteerProgram::set_rules(const SteeringRules& rules) {
  RAWPIPE_TRY(clear_map<rawpipe_port_key>(port_fd_));
  RAWPIPE_TRY(clear_map<rawpipe_proto_key>(proto_fd_));
  RAWPIPE_TRY(clear_map<rawpipe_addr_key>(addr_fd_));
  unsigned written = 0;
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
    std::uint32_t value = r.endpoint;
    for (std::uint8_t family : families) {
      std::uint8_t addr[16] = {};
      std::uint32_t bits = 0;
      if (m.dst_ip) {
        std::memcpy(addr, m.dst_ip->addr.data(), 16);
        bits = m.dst_ip->len;
      }
      int err = 0;
      int fd = -1;
      if (m.dst_port) {
        for (std::uint8_t proto : protos) {
          rawpipe_port_key k{};
          k.prefixlen = RAWPIPE_PORT_KEY_FIXED_BITS + bits;
          k.family = family;
          k.proto = proto;
          k.port = htons(*m.dst_port);
          std::memcpy(k.addr, addr, 16);
          fd = port_fd_;
          if ((err = bpf_map_update_elem(fd, &k, &value, BPF_ANY)) != 0) break;
          ++written;
        }
      } else if (!protos.empty()) {
        rawpipe_proto_key k{};
        k.prefixlen = RAWPIPE_PROTO_KEY_FIXED_BITS + bits;
        k.family = family;
        k.proto = protos[0];
        std::memcpy(k.addr, addr, 16);
        fd = proto_fd_;
        if ((err = bpf_map_update_elem(fd, &k, &value, BPF_ANY)) == 0) ++written;
      } else {
        rawpipe_addr_key k{};
        k.prefixlen = RAWPIPE_ADDR_KEY_FIXED_BITS + bits;
        k.family = family;
        std::memcpy(k.addr, addr, 16);
        fd = addr_fd_;
        if ((err = bpf_map_update_elem(fd, &k, &value, BPF_ANY)) == 0) ++written;
      }
      if (err != 0)
        return Status::errorf("cannot steer rule '{}' to the AF_XDP socket: {}{}", m.text, std::strerror(errno),
                              errno == E2BIG || errno == ENOMEM
                                  ? fmt::format(" (the XDP program holds at most {} entries per rule kind)",
                                                RAWPIPE_XDP_MAX_RULES)
                                  : "");
    }
  }
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
