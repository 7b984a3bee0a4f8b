#include "rawpipe/pipeline.hh"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "pipeline/capture/lcore_taps.hh"
#include "pipeline/buf/audit.hh"
#include "pipeline/classify/classifier.hh"
#include "pipeline/classify/rule.hh"
#include "pipeline/dispatch/dispatch.hh"
#include "pipeline/dispatch/wake.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/filter/plugin.hh"
#include "pipeline/lcore/lcore.hh"
#include "pipeline/neigh/port_keys.hh"
#include "pipeline/neigh/stage.hh"
#include "pipeline/buf/pool.hh"
#include "pipeline/capture/tap.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {

// The rings of one kRing endpoint, one pair per lcore. Each lcore is the only producer of its
// ring and the only consumer of its return ring; whoever holds `busy` is the only consumer of the
// rings and the only producer of the return rings.
struct EndpointRings {
  std::vector<std::unique_ptr<EndpointRing>> per_lcore;
  std::vector<std::unique_ptr<EndpointRing>> returns;  // by lcore: endpoint_release() -> that lcore
  // Consumer side. `busy` makes a second consumer (or stop() draining) back off instead of
  // breaking the single-consumer rule; `next` rotates the first ring read for fairness; `last`
  // is the lcore whose ring gave the latest packets (where their release goes); `closed` is set
  // once the lcores are gone, after which releases free directly. All three are guarded by busy.
  std::atomic<bool> busy{false};
  unsigned next = 0;
  unsigned last = 0;
  bool closed = false;
};

namespace {

std::string where(const SourceLocation& w) {
  if (w.file.empty()) return "";
  return w.line > 0 ? fmt::format("{}:{}: ", w.file, w.line) : fmt::format("{}: ", w.file);
}

std::string allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "unknown";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out += fmt::format("{}{}", out.empty() ? "" : ",", c);
  return out;
}

bool lock_consumer(std::atomic<bool>& busy) noexcept {
  // Acquire pairs with the release in unlock_consumer(): the previous consumer's ring reads and
  // index updates are visible to us.
  return !busy.exchange(true, std::memory_order_acquire);
}
void unlock_consumer(std::atomic<bool>& busy) noexcept { busy.store(false, std::memory_order_release); }

}  // namespace

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
  (void)stop();
  plugins_.clear();  // a plugin that holds packets frees them in destroy(): pools still exist
  lcores_.clear();
  rings_.clear();
  classifier_.reset();
  ports_.clear();  // ports return their buffers before the pools go away
  pools_.clear();
}

Result<std::unique_ptr<Pipeline>> Pipeline::create(const Plan& plan) {
  std::unique_ptr<Pipeline> p(new Pipeline(plan));
  RAWPIPE_TRY(p->build());
  return p;
}

Status Pipeline::build() {
  const Plan& plan = plan_;
  const std::size_t n_ep = plan.endpoints.size();
  const std::size_t n_ports = plan.ports.size();
  if (plan.lcores.empty()) return Status::errorf("{}the plan has no lcores: add at least one [[lcores]] entry", where({plan.source, 0}));
  if (n_ep >= Mbuf::kNoEndpoint) return Status::errorf("{}more than {} endpoints", where({plan.source, 0}), Mbuf::kNoEndpoint - 1);
  for (std::size_t i = 0; i < n_ep; ++i)
    if (plan.endpoints[i].id != i)
      return Status::errorf("{}endpoint '{}' has id {} but is entry {} (internal: ids must be positions)",
                            where(plan.endpoints[i].where), plan.endpoints[i].name, plan.endpoints[i].id, i);
  for (std::size_t i = 0; i < n_ports; ++i)
    if (plan.ports[i].id != i)
      return Status::errorf("{}port '{}' has id {} but is entry {} (internal: ids must be positions)",
                            where(plan.ports[i].where), plan.ports[i].name, plan.ports[i].id, i);
  if (plan.default_action == DefaultAction::kEndpoint && plan.default_endpoint >= n_ep)
    return Status::errorf("{}the default endpoint id {} does not exist", where({plan.source, 0}), plan.default_endpoint);

  // Pools.
  for (const PoolPlan& pp : plan.pools) {
    auto pool = Pool::create(pp.config);
    if (!pool) return Status::errorf("{}{}", where(pp.where), pool.message());
    pools_.push_back(std::move(pool).value());
  }
  if constexpr (kMbufAudit) {
    std::vector<std::string> names;
    for (const EndpointPlan& ep : plan.endpoints) names.push_back(ep.name);
    for (const auto& pool : pools_) audit_set_endpoint_names(*pool, names);
  }

  // Ports.
  for (const PortPlan& pp : plan.ports) {
    Pool* pool = nullptr;
    for (auto& pl : pools_)
      if (pl->name() == pp.pool) pool = pl.get();
    if (!pool) return Status::errorf("{}port '{}': pool '{}' is not defined", where(pp.where), pp.name, pp.pool);
    if (!pp.spec) return Status::errorf("{}port '{}': no driver settings (internal: PortPlan::spec is null)", where(pp.where), pp.name);
    PortEnv env;
    env.port_id = pp.id;
    env.name = pp.name;
    env.rx_queues = pp.rx_queues;
    env.tx_queues = pp.tx_queues;
    env.rx_ring_size = pp.rx_ring_size;
    env.tx_ring_size = pp.tx_ring_size;
    env.pool = pool;
    auto port = pp.spec->open(env);
    if (!port) return Status::errorf("{}port '{}' (pmd {}): {}", where(pp.where), pp.name, pp.pmd, port.message());
    ports_.push_back(std::move(port).value());
  }
  RAWPIPE_TRY(build_neigh_tables());

  std::vector<std::uint16_t> rx_queues;
  for (const PortPlan& pp : plan.ports) rx_queues.push_back(pp.rx_queues);
  filters_ = std::make_unique<FilterStage>(n_ep, rx_queues, plan.lcores.size());
  auto plugins = attach_plan_filters(plan.filters, *filters_, rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION),
                                     plan.plugin_dirs_set ? &plan.plugin_dirs : nullptr);
  if (!plugins) return plugins.status();
  plugins_ = std::move(plugins).value();

  // Endpoints: actions and rules.
  std::vector<TableRule> rules;
  for (const EndpointPlan& ep : plan.endpoints) {
    if (ep.action == EndpointAction::kForward && ep.forward_port_id >= n_ports)
      return Status::errorf("{}endpoint '{}': forward port id {} does not exist", where(ep.where), ep.name, ep.forward_port_id);
    if (ep.action == EndpointAction::kRing && (!is_power_of_two(ep.ring_size) || ep.ring_size < 2))
      return Status::errorf("{}endpoint '{}': ring_size {} must be a power of two >= 2", where(ep.where), ep.name, ep.ring_size);
    for (const std::string& text : ep.match) {
      auto rule = parse_match_rule(text);
      if (!rule) return Status::errorf("{}endpoint '{}': {}", where(ep.where), ep.name, rule.message());
      MatchRule m = std::move(rule).value();
      if (!m.ingress_port_name.empty()) {
        auto id = port_id(m.ingress_port_name);
        if (!id) return Status::errorf("{}endpoint '{}': rule '{}': no port named '{}'", where(ep.where), ep.name, text, m.ingress_port_name);
        m.ingress_port = *id;
      }
      rules.push_back({SteeringRule{std::move(m), ep.id, 0}, 0});
    }
  }
  TableDefault dflt;
  if (plan.default_action == DefaultAction::kEndpoint) dflt.endpoint = plan.default_endpoint;
  auto cls = Classifier::create(static_cast<unsigned>(plan.lcores.size()), rules, dflt);
  if (!cls) return cls.status().context(plan.source.empty() ? "classifier" : plan.source);
  classifier_ = std::move(cls).value();
  // The lcores are the classifier's readers and run the filter stage inside the same pass.
  filters_->set_quiescence(classifier_.get());
  config_rules_ = static_cast<std::uint32_t>(rules.size());
  RAWPIPE_TRY(push_steering());

  // Lcores: queue ownership, bursts.
  std::map<std::pair<std::uint16_t, std::uint16_t>, std::uint16_t> owner;
  for (const LcorePlan& lp : plan.lcores) {
    if (lp.burst == 0 || lp.burst > kMaxBurst)
      return Status::errorf("{}lcore {}: burst {} must be from 1 to {}", where(lp.where), lp.id, lp.burst, kMaxBurst);
    if (lp.rx.empty()) return Status::errorf("{}lcore {}: polls no queue; give it at least one rx queue", where(lp.where), lp.id);
    for (const LcorePlan::RxQueue& q : lp.rx) {
      if (q.port >= n_ports) return Status::errorf("{}lcore {}: port id {} does not exist", where(lp.where), lp.id, q.port);
      if (q.queue >= plan.ports[q.port].rx_queues)
        return Status::errorf("{}lcore {}: port '{}' has {} rx queue(s); queue {} does not exist", where(lp.where), lp.id,
                              plan.ports[q.port].name, plan.ports[q.port].rx_queues, q.queue);
      auto [it, fresh] = owner.emplace(std::make_pair(q.port, q.queue), lp.id);
      if (!fresh)
        return Status::errorf("{}lcore {}: port '{}' rx queue {} is already polled by lcore {}; each queue has one owner",
                              where(lp.where), lp.id, plan.ports[q.port].name, q.queue, it->second);
    }
  }

  // Transmit queues: every lcore gets its own tx queue on each port it may send on.
  bool any_echo = false;
  std::set<std::uint16_t> forward_ports;
  for (const EndpointPlan& ep : plan.endpoints) {
    any_echo |= ep.action == EndpointAction::kEcho;
    if (ep.action == EndpointAction::kForward) forward_ports.insert(ep.forward_port_id);
  }
  std::vector<std::uint16_t> next_txq(n_ports, 0);
  tx_queue_of_.assign(plan.lcores.size(), std::vector<int>(n_ports, -1));
  for (std::size_t l = 0; l < plan.lcores.size(); ++l) {
    std::set<std::uint16_t> ports = forward_ports;
    for (const LcorePlan::RxQueue& q : plan.lcores[l].rx)
      if (any_echo || neigh_tables_[q.port]) ports.insert(q.port);
    for (std::uint16_t port : ports) {
      const PortPlan& pp = plan.ports[port];
      if (next_txq[port] >= pp.tx_queues)
        return Status::errorf("{}port '{}' has {} tx queue(s) but more lcores may transmit on it (echo or forward "
                              "endpoints, ARP/ND replies); give it tx_queues = {} or more so each lcore owns one",
                              where(pp.where), pp.name, pp.tx_queues, next_txq[port] + 1u);
      tx_queue_of_[l][port] = next_txq[port]++;
    }
  }

  // Endpoint rings.
  rings_.resize(n_ep);
  wakes_.resize(n_ep);
  for (const EndpointPlan& ep : plan.endpoints) {
    if (ep.action != EndpointAction::kRing) continue;
    auto r = std::make_unique<EndpointRings>();
    for (std::size_t l = 0; l < plan.lcores.size(); ++l) {
      auto ring = EndpointRing::create(ep.ring_size);
      if (!ring) return Status::errorf("{}endpoint '{}': {}", where(ep.where), ep.name, ring.message());
      r->per_lcore.push_back(std::move(ring).value());
      // Twice the ring: a consumer can hold a whole ring's worth while the lcore is still
      // freeing the previous one.
      auto back = EndpointRing::create(2 * ep.ring_size);
      if (!back) return Status::errorf("{}endpoint '{}': {}", where(ep.where), ep.name, back.message());
      r->returns.push_back(std::move(back).value());
    }
    rings_[ep.id] = std::move(r);
    wakes_[ep.id] = std::make_unique<EndpointWake>();
  }

  for (std::size_t l = 0; l < plan.lcores.size(); ++l)
    lcores_.push_back(std::make_unique<Lcore>(plan.lcores[l], static_cast<unsigned>(l), n_ep, n_ports));
  for (auto& lc : lcores_) lc->enable_latency(plan.metrics.latency_sample);
  return build_taps();
}

Status Pipeline::push_steering() {
  std::vector<TableRule> all = classifier_->rules();
  for (std::size_t p = 0; p < ports_.size(); ++p) {
    SteeringRules sr;
    for (const TableRule& r : all)
      if ((!r.rule.match.ingress_port || *r.rule.match.ingress_port == p) && filters_->endpoint_offloaded(r.rule.endpoint))
        sr.rules.push_back(r.rule);
    Status s = ports_[p]->update_steering(sr);
    if (!s) return Status::errorf("{}port '{}': cannot steer the endpoints' traffic: {}", where(plan_.ports[p].where),
                                  plan_.ports[p].name, s.message());
  }
  return Status::ok();
}

Status Pipeline::start() {
  if (running_) return Status::error("the pipeline is already running");
  if (started_once_) return Status::error("the pipeline was stopped and cannot be restarted; create a new one");
  started_once_ = true;
  stop_flag_.store(false, std::memory_order_relaxed);

  for (std::size_t p = 0; p < ports_.size(); ++p) {
    Status s = ports_[p]->start();
    if (!s) {
      for (std::size_t q = 0; q < p; ++q) ports_[q]->stop();
      return Status::errorf("{}port '{}': cannot start: {}", where(plan_.ports[p].where), plan_.ports[p].name, s.message());
    }
  }
  ports_started_ = true;

  std::vector<Pool*> pools;
  for (auto& pl : pools_) pools.push_back(pl.get());
  for (std::size_t l = 0; l < lcores_.size(); ++l) {
    const LcorePlan& lp = plan_.lcores[l];
    std::vector<Lcore::RxQueue> rx;
    for (const LcorePlan::RxQueue& q : lp.rx) rx.push_back({ports_[q.port]->rx_queue(q.queue), q.port, q.queue});
    std::vector<TxQueueHandle> tx(ports_.size());
    for (std::size_t p = 0; p < ports_.size(); ++p)
      if (tx_queue_of_[l][p] >= 0) tx[p] = ports_[p]->tx_queue(static_cast<std::uint16_t>(tx_queue_of_[l][p]));
    std::vector<Dispatcher::Route> routes(plan_.endpoints.size());
    for (const EndpointPlan& ep : plan_.endpoints) {
      Dispatcher::Route& r = routes[ep.id];
      r.action = ep.action;
      r.forward_port = ep.forward_port_id;
      r.sockperf = ep.action == EndpointAction::kEcho && ep.echo_format == EchoFormat::kSockperf;
      if (rings_[ep.id]) {
        r.ring = rings_[ep.id]->per_lcore[l].get();
        r.wake = wakes_[ep.id].get();
      }
    }
    for (const Lcore::RxQueue& q : rx)
      if (!q.rx.burst) {
        stop_ports();
        return Status::errorf("{}port '{}' gave no receive function for queue {} (driver bug)", where(plan_.ports[q.port].where),
                              plan_.ports[q.port].name, q.queue);
      }
    auto dispatcher = std::make_unique<Dispatcher>(std::move(routes), tx, &lcores_[l]->counters_mut());
    if (!lcore_taps_.empty()) dispatcher->set_taps(lcore_taps_[l].get());
    lcores_[l]->bind(std::move(rx), std::move(dispatcher), classifier_.get(), pools);
    lcores_[l]->set_filters(filters_.get());
    std::vector<EndpointRing*> returns;
    for (const auto& r : rings_)
      if (r) returns.push_back(r->returns[l].get());
    lcores_[l]->set_returns(std::move(returns));
    if (!lcore_taps_.empty()) lcores_[l]->set_taps(lcore_taps_[l].get());
    if (std::any_of(neigh_tables_.begin(), neigh_tables_.end(), [](const auto& t) { return t != nullptr; })) {
      std::vector<const NeighTable*> tables;
      for (const auto& t : neigh_tables_) tables.push_back(t.get());
      neigh_stages_.push_back(std::make_unique<NeighStage>(std::move(tables), tx, &lcores_[l]->counters_mut()));
      lcores_[l]->set_neigh(neigh_stages_.back().get());
    }
  }
  for (auto& t : taps_) RAWPIPE_TRY(t->start());

  // Threads wait for `go` so a failed pin can abort them before they touch a queue.
  go_.store(0, std::memory_order_relaxed);
  for (std::size_t l = 0; l < lcores_.size(); ++l) {
    Lcore* lc = lcores_[l].get();
    threads_.emplace_back([this, lc] {
      int g;
      // A: pairs with the release stores of go_ below: binding above is visible.
      while ((g = go_.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
      if (g == 1) lc->run(stop_flag_);
    });
    const int cpu = plan_.lcores[l].cpu;
    std::string name = fmt::format("rawpipe-lc{}", plan_.lcores[l].id);
    (void)pthread_setname_np(threads_.back().native_handle(), name.substr(0, 15).c_str());
    if (cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      int err = cpu < CPU_SETSIZE ? 0 : EINVAL;
      if (!err) {
        CPU_SET(cpu, &set);
        err = pthread_setaffinity_np(threads_.back().native_handle(), sizeof set, &set);
      }
      if (err) {
        std::string allowed = allowed_cpus();
        go_.store(2, std::memory_order_release);
        join_lcores();
        stop_ports();
        return Status::errorf("{}lcore {}: cannot pin to cpu {}: {}; this process may use cpus {}",
                              where(plan_.lcores[l].where), plan_.lcores[l].id, cpu, std::strerror(err), allowed);
      }
    }
  }
  go_.store(1, std::memory_order_release);
  running_ = true;
  return Status::ok();
}

void Pipeline::request_stop() noexcept {
  // Relaxed: lcores only need to see it eventually; join() gives the ordering.
  stop_flag_.store(true, std::memory_order_relaxed);
}

void Pipeline::join_lcores() noexcept {
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void Pipeline::stop_ports() noexcept {
  if (!ports_started_) return;
  for (auto& port : ports_) port->stop();
  ports_started_ = false;
}

Status Pipeline::stop() {
  request_stop();
  join_lcores();
  stop_ports();
  // The rings' packets were counted as delivered when queued; nobody will consume them now.
  for (auto& r : rings_) {
    if (!r) continue;
    while (!lock_consumer(r->busy)) std::this_thread::yield();
    Mbuf* batch[kMaxBurst];
    for (auto& ring : r->per_lcore)
      while (unsigned n = ring->dequeue_burst(batch, kMaxBurst)) {
        mbuf_free_bulk(batch, n);
        drained_ += n;
      }
    // Released by the consumer, not yet freed by their lcore: no longer counted anywhere.
    for (auto& ring : r->returns)
      while (unsigned n = ring->dequeue_burst(batch, kMaxBurst)) mbuf_free_bulk(batch, n);
    r->closed = true;
    unlock_consumer(r->busy);
  }
  if (classifier_) classifier_->reclaim();
  if (kMbufAudit && running_) {
    // What the application (or a filter's owner) still holds now leaks unless it frees it later.
    // Once, at the stop that ended the run: stop() is idempotent and called again by destroy.
    for (const auto& pool : pools_)
      if (std::string r = audit_report(*pool); !r.empty()) std::fprintf(stderr, "rawpipe: mbuf audit at stop: %s\n", r.c_str());
  }
  running_ = false;
  // The lcores are joined: the writers drain what the lanes still hold, then close their files.
  Status taps_status = Status::ok();
  for (auto& t : taps_) {
    Status s = t->stop();
    if (!s && taps_status.is_ok()) taps_status = s;
  }
  return taps_status;
}

Status Pipeline::build_neigh_tables() {
  neigh_tables_.resize(ports_.size());
  for (const PortPlan& pp : plan_.ports) {
    if (pp.neigh.addresses.empty()) continue;
    wire::MacAddr mac{};
    if (!pp.neigh.mac.empty()) {
      auto m = parse_mac_address(pp.neigh.mac);
      if (!m) return Status::errorf("{}port '{}': mac: {}", where(pp.where), pp.name, m.message());
      mac = *m;
    } else {
      mac = ports_[pp.id]->link().mac;
      if (mac == wire::MacAddr{})
        return Status::errorf("{}port '{}' (pmd {}) has no MAC address to answer ARP/ND for its addresses with; "
                              "set mac = \"02:...\" in its table",
                              where(pp.where), pp.name, pp.pmd);
    }
    std::vector<NeighAddress> addrs;
    for (const std::string& a : pp.neigh.addresses) {
      auto na = parse_neigh_address(a, mac);
      if (!na) return Status::errorf("{}port '{}': addresses: {}", where(pp.where), pp.name, na.message());
      addrs.push_back(*na);
    }
    auto table = NeighTable::create(addrs);
    if (!table) return Status::errorf("{}port '{}': {}", where(pp.where), pp.name, table.message());
    neigh_tables_[pp.id] = std::make_unique<NeighTable>(std::move(table).value());
  }
  return Status::ok();
}

Status Pipeline::build_taps() {
  for (const TapConfig& tc : plan_.taps) {
    if (tc.port_id >= static_cast<std::int32_t>(ports_.size()))
      return Status::errorf("{}tap '{}': port id {} does not exist", where({plan_.source, 0}), tc.name, tc.port_id);
    auto w = TapWriter::create(tc);
    if (!w) return Status::errorf("{}{}", where({plan_.source, 0}), w.message());
    taps_.push_back(std::move(w).value());
  }
  if (taps_.empty()) return Status::ok();
  for (std::size_t l = 0; l < lcores_.size(); ++l) {
    auto lt = std::make_unique<LcoreTaps>();
    for (auto& t : taps_) lt->add(t->config().stage, t->add_lane());
    lcore_taps_.push_back(std::move(lt));
  }
  return Status::ok();
}

std::vector<const TapWriter*> Pipeline::taps() const {
  std::vector<const TapWriter*> out;
  for (const auto& t : taps_) out.push_back(t.get());
  return out;
}

NeighStats Pipeline::neigh_stats() const {
  NeighStats s;
  for (const auto& n : neigh_stages_) s += n->stats();
  return s;
}

unsigned Pipeline::endpoint_receive(std::uint16_t endpoint, Mbuf** out, unsigned n) noexcept {
  if (endpoint >= rings_.size() || !rings_[endpoint]) return 0;
  EndpointRings& r = *rings_[endpoint];
  if (!lock_consumer(r.busy)) return 0;
  const unsigned rings = static_cast<unsigned>(r.per_lcore.size());
  unsigned got = 0;
  for (unsigned i = 0; i < rings && got < n; ++i) {
    unsigned idx = r.next + i;
    if (idx >= rings) idx -= rings;
    const unsigned took = r.per_lcore[idx]->dequeue_burst(out + got, n - got);
    if (took) r.last = idx;
    got += took;
  }
  if (++r.next >= rings) r.next = 0;
  unlock_consumer(r.busy);
  audit_handout(out, got, AuditOwner::kApp, endpoint, AuditSite::kEndpointReceive);
  return got;
}

EndpointWake* Pipeline::endpoint_wake(std::uint16_t endpoint) const noexcept {
  return endpoint < wakes_.size() ? wakes_[endpoint].get() : nullptr;
}

std::size_t Pipeline::endpoint_queued(std::uint16_t endpoint) const noexcept {
  if (endpoint >= rings_.size() || !rings_[endpoint]) return 0;
  std::size_t n = 0;
  for (const auto& ring : rings_[endpoint]->per_lcore) n += ring->size();
  return n;
}

void Pipeline::endpoint_release(std::uint16_t endpoint, Mbuf* const* bufs, unsigned n) noexcept {
  if constexpr (kMbufAudit) {
    // The ownership auditor must see each free where the application makes it: a buffer parked
    // on a return ring would still look held, and a second free of it would pass unnoticed.
    mbuf_free_bulk(bufs, n);
    return;
  }
  unsigned queued = 0;
  if (endpoint < rings_.size() && rings_[endpoint]) {
    EndpointRings& r = *rings_[endpoint];
    if (lock_consumer(r.busy)) {
      if (!r.closed) queued = r.returns[r.last]->enqueue_burst(bufs, n);
      unlock_consumer(r.busy);
    }
  }
  if (queued < n) mbuf_free_bulk(bufs + queued, n - queued);
}

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
  auto id = classifier_->add(SteeringRule{std::move(m), endpoint, 0});
  if (!id) return id;
  Status s = push_steering();
  if (!s) {
    (void)classifier_->remove(id.value());
    (void)push_steering();
    return s;
  }
  return id;
}

Status Pipeline::set_endpoint_offload(std::uint16_t endpoint, bool offloaded) {
  if (endpoint >= plan_.endpoints.size())
    return Status::errorf("endpoint id {} does not exist (there are {})", endpoint, plan_.endpoints.size());
  if (filters_->endpoint_offloaded(endpoint) == offloaded) return Status::ok();
  // The flag first: switching on, nothing the ports start steering to us is dropped; switching
  // off, what is already on its way is counted as offload_off rather than delivered.
  RAWPIPE_TRY(filters_->set_endpoint_offload(endpoint, offloaded));
  Status s = push_steering();
  if (!s) {
    (void)filters_->set_endpoint_offload(endpoint, !offloaded);
    (void)push_steering();
  }
  return s;
}

bool Pipeline::endpoint_offloaded(std::uint16_t endpoint) const { return filters_->endpoint_offloaded(endpoint); }

Status Pipeline::remove_rule(std::uint32_t rule_id) {
  RAWPIPE_TRY(classifier_->remove(rule_id));
  // Every lcore passes a quiescent point after the swap: no burst is still classified with it.
  // Not from a filter callback: the calling lcore is inside its pass and would wait for itself.
  // The old table is then freed by a later reclaim, once every lcore has moved past it.
  if (current_lcore() < 0) classifier_->synchronize();
  return push_steering();
}

std::vector<RuleInfo> Pipeline::rules() const {
  std::vector<RuleInfo> out;
  for (const TableRule& r : classifier_->rules())
    out.push_back({r.id, r.rule.endpoint, format_match_rule(r.rule.match), r.id <= config_rules_});
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
  return lcore < lcores_.size() ? lcores_[lcore]->latency() : nullptr;
}

Port& Pipeline::port(std::uint16_t id) { return *ports_.at(id); }
const Port& Pipeline::port(std::uint16_t id) const { return *ports_.at(id); }
std::string_view Pipeline::port_pmd(std::uint16_t id) const { return port(id).pmd_name(); }
PortCaps Pipeline::port_caps(std::uint16_t id) const { return port(id).caps(); }
PortStats Pipeline::port_stats(std::uint16_t id) const { return port(id).stats(); }
LinkInfo Pipeline::port_link(std::uint16_t id) const { return port(id).link(); }
std::string Pipeline::port_path_report(std::uint16_t id) const { return port(id).path_report(); }
std::vector<std::string> Pipeline::port_notices(std::uint16_t id) const { return port(id).notices(); }

std::string Pipeline::pool_memory_notice(std::string_view name) const {
  const Pool* p = pool(name);
  return p ? p->memory_notice() : std::string();
}

std::vector<FilterReport> Pipeline::filter_reports() const {
  std::vector<FilterReport> out;
  for (std::size_t i = 0; i < plugins_.size(); ++i)
    out.push_back({i < plan_.filters.size() ? plan_.filters[i].label : fmt::format("filters[{}]", i), plugins_[i]->name(),
                   plugins_[i]->report()});
  return out;
}

std::vector<TapReport> Pipeline::tap_reports() const {
  std::vector<TapReport> out;
  for (const auto& t : taps_) {
    const TapStats ts = t->stats();
    out.push_back({t->config().name, ts.captured, ts.dropped, ts.written, ts.bytes, ts.files, t->files()});
  }
  return out;
}

std::vector<std::unique_ptr<Pool>> Pipeline::release_pools() noexcept { return std::move(pools_); }

const Pool* Pipeline::pool(std::string_view name) const noexcept {
  for (const auto& p : pools_)
    if (p->name() == name) return p.get();
  return nullptr;
}

PipelineSnapshot Pipeline::snapshot() const {
  PipelineSnapshot s;
  s.time_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  s.running = running_;
  s.delivered_per_endpoint.assign(plan_.endpoints.size(), 0);
  s.ring_full_per_endpoint.assign(plan_.endpoints.size(), 0);
  s.transmitted_per_port.assign(ports_.size(), 0);
  s.total.id = 0xffff;
  for (const auto& lc : lcores_) {
    const LcoreCounters& c = lc->counters();
    LcoreStats st;
    st.id = lc->plan().id;
    st.cpu = lc->plan().cpu;
    st.rx_packets = c.rx_packets.load();
    st.rx_bytes = c.rx_bytes.load();
    st.bursts = c.bursts.load();
    st.empty_polls = c.empty_polls.load();
    st.delivered = c.delivered.load();
    st.transmitted = c.transmitted.load();
    for (std::size_t r = 0; r < kDropReasonCount; ++r) st.drops[r] = c.drops[r].load();
    for (std::size_t e = 0; e < s.delivered_per_endpoint.size(); ++e) {
      s.delivered_per_endpoint[e] += c.delivered_per_endpoint[e].load();
      s.ring_full_per_endpoint[e] += c.ring_full_per_endpoint[e].load();
    }
    for (std::size_t p = 0; p < s.transmitted_per_port.size(); ++p) s.transmitted_per_port[p] += c.transmitted_per_port[p].load();
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
  a.drained = drained_;
  for (const auto& p : pools_) a.pools.push_back({p->name(), p->count(), p->in_use()});
  return a;
}

}  // namespace rawpipe
