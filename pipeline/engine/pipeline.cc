#include "rawpipe/pipeline.hh"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "pipeline/classify/classifier.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/engine/builder.hh"
#include "pipeline/send/send_port.hh"
#include "pipeline/engine/endpoint_queues.hh"
#include "pipeline/engine/run_control.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/filter/plugin.hh"
#include "pipeline/lcore/lcore.hh"
#include "pipeline/neigh/stage.hh"
#include "pipeline/plan/pool_sizing.hh"
#include "pipeline/buf/pool.hh"
#include "pipeline/capture/tap.hh"
#include "pipeline/port/port.hh"

namespace rawpipe {

std::uint64_t LcoreStats::dropped() const noexcept {
  std::uint64_t s = 0;
  for (std::uint64_t d : drops) s += d;
  return s;
}

std::uint64_t Accounting::dropped() const noexcept {
  std::uint64_t s = 0;
  for (std::uint64_t d : drops) s += d;
  return s;
}

std::uint64_t Accounting::outstanding() const noexcept {
  std::uint64_t s = 0;
  for (const PoolUsage& p : pools) s += p.outstanding;
  return s;
}

bool Accounting::balanced() const noexcept {
  return rx_packets == delivered + transmitted + dropped() && outstanding() == 0;
}

Pipeline::Pipeline(const Plan& plan) : plan_(plan) {}

Pipeline::~Pipeline() {
  if (run_) (void)run_->stop();
  run_.reset();
  parts_.reset();  // in dependency order (PipelineParts::~PipelineParts)
}

Result<std::unique_ptr<Pipeline>> Pipeline::create(const Plan& plan) {
  std::unique_ptr<Pipeline> p(new Pipeline(plan));
  // A plan built in code gets the pools a config would: sized from its ports and lcores where it
  // left the count at kPoolSizedFromPlan.
  size_pools_from_plan(p->plan_);
  // Plans built in code have no file: the refusal names the program instead.
  std::string owner = plan.source;
  if (owner.empty()) {
    std::error_code ec;
    owner = fmt::format("a plan built in code by {}", std::filesystem::read_symlink("/proc/self/exe", ec).string());
  }
  auto locks = ops::take_instance_locks(p->plan_, owner);
  if (!locks) return locks.status();
  p->locks_ = std::move(locks).value();
  auto parts = build_pipeline(p->plan_);
  if (!parts) return parts.status();
  p->parts_ = std::move(parts).value();
  p->queues_ = p->parts_->queues.get();
  p->run_ = std::make_unique<RunControl>(p->plan_, *p->parts_);
  return p;
}

Status Pipeline::start() {
  RAWPIPE_TRY(run_->start());
  // The ports' descriptors exist once they started; waiters read the list on every sleep.
  ProgressFds collected;
  for (const LcorePlan& l : plan_.lcores) {
    if (l.thread) continue;
    for (const LcorePlan::RxQueue& q : l.rx) {
      const int fd = port(q.port).rx_wait_fd(q.queue);
      if (fd >= 0) {
        collected.fds.push_back(fd);
      } else if (collected.missing.empty()) {
        collected.missing = fmt::format(
            "lcore {} (thread = false): port '{}' (driver {}) offers no descriptor to wait on for queue {}; a waiting "
            "thread must poll",
            l.id, port_name(q.port), port_pmd(q.port), q.queue);
      }
    }
  }
  if (!collected.missing.empty()) collected.fds.clear();
  progress_fds_ = std::move(collected);
  return Status::ok();
}
void Pipeline::request_stop() noexcept { run_->request_stop(); }
Status Pipeline::stop() { return run_->stop(); }
bool Pipeline::running() const noexcept { return run_->running(); }
bool Pipeline::stop_requested() const noexcept { return run_->stop_requested(); }

unsigned Pipeline::progress() noexcept {
  unsigned n = 0;
  for (std::size_t l = 0; l < parts_->lcores.size(); ++l)
    if (!plan_.lcores[l].thread) n += parts_->lcores[l]->try_pass();
  return n;
}

bool Pipeline::has_threadless_lcores() const noexcept {
  for (const LcorePlan& l : plan_.lcores)
    if (!l.thread) return true;
  return false;
}

unsigned Pipeline::endpoint_receive(std::uint16_t endpoint, Mbuf** out, unsigned n) noexcept {
  return queues_->receive(endpoint, out, n);
}

void Pipeline::set_far_consumer_ns(double ns) { queues_->set_far_consumer_ns(ns); }

bool Pipeline::endpoint_consumer_far(std::uint16_t endpoint) const noexcept {
  for (std::size_t l = 0; l < plan_.lcores.size(); ++l)
    if (const ConsumerDistance* d = queues_->distance(endpoint, l); d && d->far()) return true;
  return false;
}

void Pipeline::endpoint_release(std::uint16_t endpoint, Mbuf* const* bufs, unsigned n) noexcept {
  queues_->release(endpoint, bufs, n);
}

FilterStage& Pipeline::filters() noexcept { return *parts_->filters; }
const FilterStage& Pipeline::filters() const noexcept { return *parts_->filters; }
const std::vector<std::unique_ptr<FilterPlugin>>& Pipeline::filter_plugins() const noexcept { return parts_->plugins; }
Port& Pipeline::port(std::uint16_t id) { return *parts_->ports.at(id); }
const Port& Pipeline::port(std::uint16_t id) const { return *parts_->ports.at(id); }
// As the port stated them when it opened: what the builder decided steering and queues on.
PortCaps Pipeline::port_caps(std::uint16_t id) const { return parts_->caps.at(id); }
std::string_view Pipeline::port_pmd(std::uint16_t id) const { return port(id).pmd_name(); }
PortStats Pipeline::port_stats(std::uint16_t id) const { return port(id).stats(); }
LinkInfo Pipeline::port_link(std::uint16_t id) const { return port(id).link(); }
// The driver's own account of its path, then the capabilities the builder decided on (queues,
// steering, dummy sends) and what they leave to software, so the reader of a run's setup lines
// sees which offloads it relies on.
std::string Pipeline::port_path_report(std::uint16_t id) const {
  std::string report = port(id).path_report();
  if (!report.empty() && !report.ends_with('\n')) report += '\n';
  const PortCaps& c = parts_->caps.at(id);
  report += fmt::format(
      "port {} capabilities: rx checksums {}, {}, flow rules {}, {}, timestamps {}, transmit {}, dummy sends {}, "
      "up to {} rx / {} tx queues",
      port_name(id), c.rx_checksum ? "checked by the device" : "not checked by the device",
      c.rss ? "RSS spreads flows over the queues" : "no RSS",
      !c.flow_rules                ? "none (every frame of a queue reaches its lcore, classified there)"
      : port(id).steered_only() ? "on the device (only the endpoints' traffic reaches the queues)"
                                : "on the device for flow tags and group joins (every frame reaches the queues)",
      c.kernel_pass ? "the kernel keeps the traffic not steered here" : "the kernel sees nothing of these queues",
      c.timestamps ? "from the device" : "none", c.tx ? "to the wire" : "counted and freed (no wire)",
      c.dummy_send ? "no-ops on the device" : "not offered", c.max_rx_queues, c.max_tx_queues);
  return report;
}
std::vector<std::string> Pipeline::port_notices(std::uint16_t id) const { return port(id).notices(); }

std::string Pipeline::pool_memory_notice(std::string_view name) const {
  const Pool* p = pool(name);
  return p ? p->memory_notice() : std::string();
}

std::vector<FilterReport> Pipeline::filter_reports() const {
  std::vector<FilterReport> out;
  const auto& plugins = parts_->plugins;
  for (std::size_t i = 0; i < plugins.size(); ++i)
    out.push_back({i < plan_.filters.size() ? plan_.filters[i].label : fmt::format("filters[{}]", i), plugins[i]->name(),
                   plugins[i]->report()});
  return out;
}

std::vector<TapReport> Pipeline::tap_reports() const {
  std::vector<TapReport> out;
  for (const auto& t : parts_->taps) {
    const TapStats ts = t->stats();
    out.push_back({t->config().name, ts.captured, ts.dropped, ts.written, ts.bytes, ts.files, t->files()});
  }
  return out;
}

std::vector<const TapWriter*> Pipeline::taps() const {
  std::vector<const TapWriter*> out;
  for (const auto& t : parts_->taps) out.push_back(t.get());
  return out;
}

NeighStats Pipeline::neigh_stats() const { return run_->neigh_stats(); }

Result<std::uint32_t> Pipeline::add_rule(std::uint16_t endpoint, std::string_view text) {
  if (endpoint >= plan_.endpoints.size())
    return Status::errorf("endpoint id {} does not exist (there are {})", endpoint, plan_.endpoints.size());
  auto rule = parse_match_rule(text);
  if (!rule) return rule.status();
  MatchRule m = std::move(rule).value();
  if (!m.ingress_port_name.empty()) {
    auto id = port_id(m.ingress_port_name);
    if (!id) return Status::errorf("rule '{}': no port named '{}'", text, m.ingress_port_name);
    m.ingress_port = *id;
  }
  auto id = parts_->classifier->add(SteeringRule{std::move(m), endpoint, 0});
  if (!id) return id;
  Status s = push_steering(plan_, *parts_);
  if (!s) {
    (void)parts_->classifier->remove(id.value());
    (void)push_steering(plan_, *parts_);
    return s;
  }
  return id;
}

Status Pipeline::set_endpoint_offload(std::uint16_t endpoint, bool offloaded) {
  if (endpoint >= plan_.endpoints.size())
    return Status::errorf("endpoint id {} does not exist (there are {})", endpoint, plan_.endpoints.size());
  if (parts_->filters->endpoint_offloaded(endpoint) == offloaded) return Status::ok();
  // The flag first: switching on, nothing the ports start steering to us is dropped; switching
  // off, what is already on its way is counted as offload_off rather than delivered.
  RAWPIPE_TRY(parts_->filters->set_endpoint_offload(endpoint, offloaded));
  Status s = push_steering(plan_, *parts_);
  if (!s) {
    (void)parts_->filters->set_endpoint_offload(endpoint, !offloaded);
    (void)push_steering(plan_, *parts_);
  }
  return s;
}

bool Pipeline::endpoint_offloaded(std::uint16_t endpoint) const { return parts_->filters->endpoint_offloaded(endpoint); }

Status Pipeline::remove_rule(std::uint32_t rule_id) {
  RAWPIPE_TRY(parts_->classifier->remove(rule_id));
  // Every lcore passes a quiescent point after the swap: no burst is still classified with it.
  // Not from a filter callback: the calling lcore is inside its pass and would wait for itself.
  // The old table is then freed by a later reclaim, once every lcore has moved past it.
  if (current_lcore() < 0) parts_->classifier->synchronize();
  return push_steering(plan_, *parts_);
}

std::vector<RuleInfo> Pipeline::rules() const {
  std::vector<RuleInfo> out;
  for (const TableRule& r : parts_->classifier->rules())
    out.push_back({r.id, r.rule.endpoint, format_match_rule(r.rule.match), r.id <= parts_->config_rules});
  return out;
}

std::optional<std::uint16_t> Pipeline::endpoint_id(std::string_view name) const noexcept {
  for (const EndpointPlan& e : plan_.endpoints)
    if (e.name == name) return e.id;
  return std::nullopt;
}

std::optional<std::uint16_t> Pipeline::port_id(std::string_view name) const noexcept {
  for (const PortPlan& p : plan_.ports)
    if (p.name == name) return p.id;
  return std::nullopt;
}

const StageLatency* Pipeline::lcore_latency(std::size_t lcore) const noexcept {
  return lcore < parts_->lcores.size() ? parts_->lcores[lcore]->latency() : nullptr;
}

std::vector<std::unique_ptr<Pool>> Pipeline::release_pools() noexcept { return std::move(parts_->pools); }

EndpointWake* Pipeline::endpoint_wake(std::uint16_t endpoint) const noexcept { return queues_->wake(endpoint); }

SendPort* Pipeline::send_port(std::uint16_t port) const noexcept {
  return port < parts_->send_ports.size() ? parts_->send_ports[port].get() : nullptr;
}

std::size_t Pipeline::endpoint_queued(std::uint16_t endpoint) const noexcept { return queues_->queued(endpoint); }

const Pool* Pipeline::pool(std::string_view name) const noexcept {
  for (const auto& p : parts_->pools)
    if (p->name() == name) return p.get();
  return nullptr;
}

PipelineSnapshot Pipeline::snapshot() const {
  PipelineSnapshot s;
  s.time_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  s.running = run_->running();
  s.delivered_per_endpoint.assign(plan_.endpoints.size(), 0);
  s.ring_full_per_endpoint.assign(plan_.endpoints.size(), 0);
  s.transmitted_per_endpoint.assign(plan_.endpoints.size(), 0);
  s.transmitted_per_port.assign(plan_.ports.size(), 0);
  s.total.id = 0xffff;
  for (const auto& lc : parts_->lcores) {
    const LcoreCounters& c = lc->counters();
    LcoreStats st;
    st.id = lc->plan().id;
    st.cpu = lc->plan().cpu;
    // The lcore adds to a drop reason before the per-endpoint count of the same drop, so reading
    // the per-endpoint counts first keeps each reason's total at or above them in the snapshot;
    // the slow read of the switch count (/proc) comes after all counters, not between them.
    for (std::size_t e = 0; e < s.delivered_per_endpoint.size(); ++e) {
      s.delivered_per_endpoint[e] += c.delivered_per_endpoint[e].load();
      s.ring_full_per_endpoint[e] += c.ring_full_per_endpoint[e].load();
      s.transmitted_per_endpoint[e] += c.transmitted_per_endpoint[e].load();
    }
    for (std::size_t p = 0; p < s.transmitted_per_port.size(); ++p) s.transmitted_per_port[p] += c.transmitted_per_port[p].load();
    st.rx_packets = c.rx_packets.load();
    st.rx_bytes = c.rx_bytes.load();
    st.bursts = c.bursts.load();
    st.empty_polls = c.empty_polls.load();
    st.delivered = c.delivered.load();
    st.transmitted = c.transmitted.load();
    for (std::size_t r = 0; r < kDropReasonCount; ++r) st.drops[r] = c.drops[r].load();
    st.involuntary_switches = run_->involuntary_switches(s.lcores.size());
    s.total.involuntary_switches += st.involuntary_switches;
    s.total.rx_packets += st.rx_packets;
    s.total.rx_bytes += st.rx_bytes;
    s.total.bursts += st.bursts;
    s.total.empty_polls += st.empty_polls;
    s.total.delivered += st.delivered;
    s.total.transmitted += st.transmitted;
    for (std::size_t r = 0; r < kDropReasonCount; ++r) s.total.drops[r] += st.drops[r];
    s.lcores.push_back(st);
  }
  return s;
}

Accounting Pipeline::accounting() const {
  PipelineSnapshot s = snapshot();
  Accounting a;
  a.rx_packets = s.total.rx_packets;
  a.rx_bytes = s.total.rx_bytes;
  a.delivered = s.total.delivered;
  a.transmitted = s.total.transmitted;
  a.drops = s.total.drops;
  a.delivered_per_endpoint = std::move(s.delivered_per_endpoint);
  a.transmitted_per_port = std::move(s.transmitted_per_port);
  a.transmitted_per_endpoint = std::move(s.transmitted_per_endpoint);
  a.drained = parts_->queues->drained();
  for (const auto& p : parts_->pools) a.pools.push_back({p->name(), p->count(), p->in_use()});
  return a;
}

}  // namespace rawpipe
