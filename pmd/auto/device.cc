// `pmd = "auto"`: walks a ladder of drivers for a named interface and opens the first that works,
// saying why each rung above it was skipped.
//
// Ladder, best first: mlx5 (ConnectX, rdma-core direct verbs), mana (Azure MANA), af_xdp (zero
// copy into the pool, XDP steering), af_packet (one copy, any Linux interface, needs
// CAP_NET_RAW), socket (ordinary UDP sockets, unprivileged). A rung is usable when its driver is
// built into this binary, its probe (mlx5, mana) says the device is there, and opening the port
// succeeds; otherwise its reason is recorded and the next rung is tried. The chosen port runs
// unwrapped on the data path: rx_queue/tx_queue hand out the chosen driver's own burst functions.
#include <algorithm>
#include <array>
#include <vector>

#include "pipeline/classify/rule.hh"
#include "pipeline/config/section.hh"
#include "pmd/drivers.hh"
#include "pipeline/port/registry.hh"

// ---- Hardware rungs. The mlx5 and mana drivers provide `Status probe_<name>(std::string_view
// ifname)` (ok = usable, else the reason); each is used only when its driver is built in. ----
#if defined(RAWPIPE_HAVE_PMD_MLX5) && __has_include("pmd/mlx5/probe.hh")
#include "pmd/mlx5/probe.hh"
#define RAWPIPE_AUTO_MLX5 1
#endif
#if defined(RAWPIPE_HAVE_PMD_MANA) && __has_include("pmd/mana/probe.hh")
#include "pmd/mana/probe.hh"
#define RAWPIPE_AUTO_MANA 1
#endif

namespace rawpipe {
namespace auto_pmd {
namespace {

constexpr std::array<std::string_view, 5> kLadder = {"mlx5", "mana", "af_xdp", "af_packet", "socket"};

struct Spec final : PortSpec {
  std::string interface;
  std::vector<std::string> ladder;  // rungs to consider, in kLadder order

  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override;
  // af_xdp may be the rung chosen at open time.
  bool needs_exact_pool_stride() const override {
    return std::find(ladder.begin(), ladder.end(), "af_xdp") != ladder.end();
  }
};

struct Rung {
  std::string name;
  std::string outcome;  // "chosen" or the reason it was skipped
};

class AutoPort final : public Port {
 public:
  AutoPort(std::unique_ptr<Port> inner, std::string interface, std::vector<Rung> rungs)
      : inner_(std::move(inner)), interface_(std::move(interface)), rungs_(std::move(rungs)) {}

  std::string_view pmd_name() const noexcept override { return inner_->pmd_name(); }
  std::string path_report() const override {
    std::string out = fmt::format("auto {}: chose {}", interface_, inner_->pmd_name());
    for (const Rung& r : rungs_)
      if (r.outcome != "chosen") out += fmt::format("\n  skipped {}: {}", r.name, r.outcome);
    return out + "\n" + inner_->path_report();
  }
  PortCaps caps() const override { return inner_->caps(); }
  LinkInfo link() const override { return inner_->link(); }
  Status start() override { return inner_->start(); }
  void stop() override { inner_->stop(); }
  RxQueueHandle rx_queue(std::uint16_t q) override { return inner_->rx_queue(q); }
  TxQueueHandle tx_queue(std::uint16_t q) override { return inner_->tx_queue(q); }
  int rx_wait_fd(std::uint16_t q) const override { return inner_->rx_wait_fd(q); }
  PortStats stats() const override {
    PortStats s = inner_->stats();
    // The choice as metrics: auto_chosen_<driver> = 1, auto_skipped_<driver> = 1.
    for (const Rung& r : rungs_)
      s.extended[fmt::format("auto_{}_{}", r.outcome == "chosen" ? "chosen" : "skipped", r.name)] = 1;
    return s;
  }
  Status update_steering(const SteeringRules& rules) override { return inner_->update_steering(rules); }

 private:
  std::unique_ptr<Port> inner_;
  std::string interface_;
  std::vector<Rung> rungs_;
};

// Opens `driver` for the interface with its own config parser, as if the user had written
// pmd = "<driver>" and interface = "<name>".
Result<std::unique_ptr<Port>> open_rung(std::string_view driver, const std::string& interface, const PortEnv& env) {
  const PmdDriver* d = find_pmd(driver);
  if (!d) return Status::error("not built into this binary");
  auto sec = ConfigSection::parse_string(fmt::format("interface = \"{}\"\n", interface), "<auto>");
  if (!sec) return sec.status();
  auto spec = d->parse(sec.value());
  if (!spec) return spec.status();
  RAWPIPE_TRY(sec->finish());
  return spec.value()->open(env);
}

Status probe(std::string_view rung, const std::string& interface) {
  (void)interface;
  if (rung == "mlx5") {
#ifdef RAWPIPE_AUTO_MLX5
    return probe_mlx5(interface);
#else
    return Status::error("the mlx5 driver is not built into this binary");
#endif
  }
  if (rung == "mana") {
#ifdef RAWPIPE_AUTO_MANA
    return probe_mana(interface);
#else
    return Status::error("the mana driver is not built into this binary");
#endif
  }
  return Status::ok();
}

Result<std::unique_ptr<Port>> Spec::open(const PortEnv& env) const {
  std::vector<Rung> rungs;
  for (std::string_view rung : kLadder) {
    if (std::find(ladder.begin(), ladder.end(), rung) == ladder.end()) continue;
    Status p = probe(rung, interface);
    if (!p) {
      rungs.push_back({std::string(rung), p.message()});
      continue;
    }
    auto port = open_rung(rung, interface, env);
    if (!port) {
      rungs.push_back({std::string(rung), port.message()});
      continue;
    }
    rungs.push_back({std::string(rung), "chosen"});
    return std::unique_ptr<Port>(new AutoPort(std::move(port).value(), interface, std::move(rungs)));
  }
  std::string why;
  for (const Rung& r : rungs) why += fmt::format("\n  {}: {}", r.name, r.outcome);
  return Status::errorf("port '{}': pmd = \"auto\" found no usable driver for interface '{}':{}", env.name, interface,
                        why);
}

Result<std::unique_ptr<PortSpec>> parse(ConfigSection& section) {
  auto spec = std::make_unique<Spec>();
  spec->interface = section.string("interface");
  if (section.has("ladder")) {
    for (const std::string& r : section.string_list("ladder")) {
      if (std::find(kLadder.begin(), kLadder.end(), r) == kLadder.end()) {
        section.fail("ladder", fmt::format("unknown rung '{}'; expected some of mlx5, mana, af_xdp, af_packet, socket", r));
        continue;
      }
      spec->ladder.push_back(r);
    }
    if (spec->ladder.empty()) section.fail("ladder", "expected at least one rung");
  } else {
    spec->ladder.assign(kLadder.begin(), kLadder.end());
  }
  RAWPIPE_TRY(section.status());
  return std::unique_ptr<PortSpec>(std::move(spec));
}

}  // namespace
}  // namespace auto_pmd

namespace {
const KeyDoc kAutoKeyDocs[] = {
    {"interface", "string", "an interface name", "required", "interface to open with the best driver that works"},
    {"ladder", "string list", "\"mlx5\", \"mana\", \"af_xdp\", \"af_packet\", \"socket\"", "all, in that order",
     "drivers to try, in order"},
};
}  // namespace
const KeyTable kAutoKeys{"auto", "[[ports]] pmd = \"auto\"", "the best driver for an interface", kAutoKeyDocs};

const PmdDriver kAutoDriver{
    .name = "auto",
    .summary = "the best driver that works for an interface: mlx5, mana, af_xdp, af_packet, then socket",
    .parse = &auto_pmd::parse,
    .keys = &kAutoKeys,
};

}  // namespace rawpipe
