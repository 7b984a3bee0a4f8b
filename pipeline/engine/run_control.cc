#include "pipeline/engine/run_control.hh"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "pipeline/buf/audit.hh"
#include "pipeline/capture/lcore_taps.hh"
#include "pipeline/capture/tap.hh"
#include "pipeline/classify/classifier.hh"
#include "pipeline/dispatch/dispatch.hh"
#include "pipeline/engine/builder.hh"
#include "pipeline/engine/endpoint_queues.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/lcore/lcore.hh"
#include "pipeline/neigh/stage.hh"
#include "pipeline/plan/validate.hh"
#include "pipeline/send/send_port.hh"

namespace rawpipe {
namespace {

std::string allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "unknown";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out += fmt::format("{}{}", out.empty() ? "" : ",", c);
  return out;
}

}  // namespace

RunControl::~RunControl() {
  // The facade stops before destroying; this only covers a failed start that left threads.
  go_.store(2, std::memory_order_release);
  join_lcores();
}

Status RunControl::start() {
  if (running()) return Status::error("the pipeline is already running");
  if (started_once_) return Status::error("the pipeline was stopped and cannot be restarted; create a new one");
  started_once_ = true;
  stop_flag_.store(false, std::memory_order_relaxed);
  auto& ports = parts_.ports;

  for (std::size_t p = 0; p < ports.size(); ++p) {
    Status s = ports[p]->start();
    if (!s) {
      for (std::size_t q = 0; q < p; ++q) ports[q]->stop();
      return Status::errorf("{}port '{}': cannot start: {}", location_prefix(plan_.ports[p].where), plan_.ports[p].name,
                            s.message());
    }
  }
  ports_started_ = true;

  std::vector<Pool*> pools;
  for (auto& pl : parts_.pools) pools.push_back(pl.get());
  for (std::size_t l = 0; l < parts_.lcores.size(); ++l) {
    Lcore& lcore = *parts_.lcores[l];
    const LcorePlan& lp = plan_.lcores[l];
    std::vector<Lcore::RxQueue> rx;
    for (const LcorePlan::RxQueue& q : lp.rx) rx.push_back({ports[q.port]->rx_queue(q.queue), q.port, q.queue});
    std::vector<TxQueueHandle> tx(ports.size());
    for (std::size_t p = 0; p < ports.size(); ++p)
      if (parts_.tx_queue_of[l][p] >= 0) tx[p] = ports[p]->tx_queue(static_cast<std::uint16_t>(parts_.tx_queue_of[l][p]));
    std::vector<Dispatcher::Route> routes(plan_.endpoints.size());
    for (const EndpointPlan& ep : plan_.endpoints) {
      Dispatcher::Route& r = routes[ep.id];
      r.action = ep.action;
      r.forward_port = ep.forward_port_id;
      r.sockperf = ep.action == EndpointAction::kEcho && ep.echo_format == EchoFormat::kSockperf;
      r.ring = parts_.queues->ring(ep.id, l);
      if (r.ring) {
        r.wake = parts_.queues->wake(ep.id);
        r.consumer = parts_.queues->distance(ep.id, l);
      }
    }
    for (const Lcore::RxQueue& q : rx)
      if (!q.rx.burst) {
        stop_ports();
        return Status::errorf("{}port '{}' gave no receive function for queue {} (driver bug)",
                              location_prefix(plan_.ports[q.port].where), plan_.ports[q.port].name, q.queue);
      }
    auto dispatcher = std::make_unique<Dispatcher>(std::move(routes), tx, &lcore.counters_mut());
    if (!parts_.lcore_taps.empty()) dispatcher->set_taps(parts_.lcore_taps[l].get());
    lcore.bind(std::move(rx), std::move(dispatcher), parts_.classifier.get(), pools);
    lcore.set_filters(parts_.filters.get());
    lcore.set_returns(parts_.queues->returns_of(l));
    if (!parts_.lcore_taps.empty()) lcore.set_taps(parts_.lcore_taps[l].get());
    if (std::any_of(parts_.neigh_tables.begin(), parts_.neigh_tables.end(), [](const auto& t) { return t != nullptr; })) {
      std::vector<const NeighTable*> tables;
      for (const auto& t : parts_.neigh_tables) tables.push_back(t.get());
      neigh_stages_.push_back(std::make_unique<NeighStage>(std::move(tables), tx, &lcore.counters_mut()));
      std::vector<NeighCache*> caches;
      for (const auto& sp : parts_.send_ports) caches.push_back(sp->cache.get());
      neigh_stages_.back()->set_caches(std::move(caches));
      lcore.set_neigh(neigh_stages_.back().get());
    }
    // The application's send path of each port this lcore drains (send/send_port.hh).
    std::vector<SendPort*> sends;
    for (auto& sp : parts_.send_ports)
      if (sp->lcore == static_cast<int>(l)) {
        sp->tx = tx[sp->port];
        sends.push_back(sp.get());
      }
    lcore.set_sends(std::move(sends));
  }
  for (auto& t : parts_.taps) RAWPIPE_TRY(t->start());

  // Threads wait for `go` so a failed pin can abort them before they touch a queue.
  go_.store(0, std::memory_order_relaxed);
  for (std::size_t l = 0; l < parts_.lcores.size(); ++l) {
    Lcore* lc = parts_.lcores[l].get();
    if (!plan_.lcores[l].thread) continue;  // opened for the application's threads below
    LcorePreemption* preemption = preemption_[l].get();
    threads_.emplace_back([this, lc, preemption] {
      preemption->thread_started();
      int g;
      // A: pairs with the release stores of go_ below: binding above is visible.
      while ((g = go_.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
      if (g == 1) lc->run(stop_flag_);
      preemption->thread_leaving();
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
                              location_prefix(plan_.lcores[l].where), plan_.lcores[l].id, cpu, std::strerror(err),
                              allowed);
      }
    }
  }
  go_.store(1, std::memory_order_release);
  for (std::size_t l = 0; l < parts_.lcores.size(); ++l)
    if (!plan_.lcores[l].thread) parts_.lcores[l]->open_passes();
  // R: pairs with the acquire in running(): a reader that sees true sees the bound lcores.
  running_.store(true, std::memory_order_release);
  return Status::ok();
}

void RunControl::join_lcores() noexcept {
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void RunControl::stop_ports() noexcept {
  if (!ports_started_) return;
  for (auto& port : parts_.ports) port->stop();
  ports_started_ = false;
}

Status RunControl::stop() {
  request_stop();
  join_lcores();
  for (std::size_t l = 0; l < parts_.lcores.size(); ++l)
    if (!plan_.lcores[l].thread) parts_.lcores[l]->close_passes();
  // What the application handed over and no lcore sent any more: freed, counted as tx_failed.
  for (auto& sp : parts_.send_ports) sp->drain_stopped();
  stop_ports();
  if (parts_.queues) parts_.queues->drain_at_stop();
  if (parts_.classifier) parts_.classifier->reclaim();
  if (kMbufAudit && running_.load(std::memory_order_relaxed)) {
    // What the application (or a filter's owner) still holds now leaks unless it frees it later.
    // Once, at the stop that ended the run: stop() is idempotent and called again by destroy.
    for (const auto& pool : parts_.pools)
      if (std::string r = audit_report(*pool); !r.empty()) std::fprintf(stderr, "rawpipe: mbuf audit at stop: %s\n", r.c_str());
  }
  // S: pairs with the acquire in running(): a reader that sees false sees the drained count and
  // the buffers the ports and the drain returned.
  running_.store(false, std::memory_order_release);
  // The lcores are joined: the writers drain what the lanes still hold, then close their files.
  Status taps_status = Status::ok();
  for (auto& t : parts_.taps) {
    Status s = t->stop();
    if (!s && taps_status.is_ok()) taps_status = s;
  }
  return taps_status;
}

NeighStats RunControl::neigh_stats() const {
  NeighStats s;
  for (const auto& n : neigh_stages_) s += n->stats();
  return s;
}

}  // namespace rawpipe
