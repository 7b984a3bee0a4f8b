// The traffic generator behind rawpipe/generator.hh: one source rx queue, one target tx queue,
// one thread, nothing between them.
#include "rawpipe/generator.hh"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "pipeline/buf/pool.hh"
#include "pipeline/engine/builder.hh"
#include "pipeline/plan/pool_sizing.hh"
#include "pipeline/plan/validate.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/port/port.hh"
#include "pipeline/port/steering.hh"
#include "rawpipe/instance_lock.hh"

namespace rawpipe {

namespace {

constexpr std::uint16_t kMaxGenBurst = 256;

std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace

struct TrafficGenerator::Impl {
  // Declared first, released last: the queues and CPU stay claimed until the ports are closed.
  ops::InstanceLocks locks;
  GeneratorOptions options;
  std::string source_pmd, target_pmd;
  std::size_t source_rules = 0;  // endpoint rules steered to a source that receives only steered traffic
  std::vector<std::unique_ptr<Pool>> pools;  // outlive the ports (declared first, destroyed last)
  std::unique_ptr<Port> source, target;
  RxQueueHandle rx;
  TxQueueHandle tx;
  std::thread thread;
  bool started = false, stopped = false;

  // Written by the sending thread only (relaxed stores), read by any thread: each value is exact,
  // the set is not read atomically.
  std::atomic<std::uint64_t> generated{0}, sent{0}, sent_bytes{0}, refused{0};
  std::atomic<bool> finished{false};
  std::atomic<bool> stop_flag{false};
  std::atomic<int> go{0};  // 0: wait, 1: run, 2: leave without running (pinning failed)
  std::uint32_t outstanding = 0;

  ~Impl() {
    request_stop();
    go.store(2, std::memory_order_release);  // a thread still waiting to be let go leaves at once
    join();
    // Started ports hold pool buffers until stopped; stop them before the pools go.
    if (started && !stopped) {
      target->stop();
      source->stop();
    }
    target.reset();
    source.reset();
  }

  void request_stop() noexcept { stop_flag.store(true, std::memory_order_relaxed); }
  void join() {
    if (thread.joinable()) thread.join();
  }

  // The loop. `kRate` is a template parameter so the flat-out loop reads no clock at all.
  template <bool kRate>
  void run() noexcept {
    for (auto& p : pools) p->attach_thread();
    const std::uint16_t burst = options.burst;
    const std::uint64_t limit = options.count ? options.count : UINT64_MAX;
    const double per_ns = options.rate_pps / 1e9;
    // Whole bursts only (a burst of one per token would spend the time on per-call costs). The
    // bucket holds 1 ms of the rate (at least two bursts): a thread that lost its CPU for up to a
    // millisecond catches up with one short spike; a longer stall is lost offered load, which the
    // final rate shows, rather than a burst at line rate that no receiver was offered in the plan.
    const double depth = std::max(2.0 * burst, options.rate_pps / 1000.0);
    double tokens = 0;
    std::uint64_t last = kRate ? now_ns() : 0;
    std::uint64_t gen = 0, n_sent = 0, n_bytes = 0, n_refused = 0;
    Mbuf* pkts[kMaxGenBurst];
    while (!stop_flag.load(std::memory_order_relaxed) && gen < limit) {
      std::uint64_t want = std::min<std::uint64_t>(burst, limit - gen);
      if constexpr (kRate) {
        const std::uint64_t t = now_ns();
        tokens = std::min(depth, tokens + double(t - last) * per_ns);
        last = t;
        if (tokens < double(want)) continue;
      }
      const std::uint16_t n = rx(pkts, static_cast<std::uint16_t>(want));
      if (n == 0) continue;
      if constexpr (kRate) tokens -= n;
      std::uint64_t bytes = 0;
      for (std::uint16_t i = 0; i < n; ++i) bytes += pkts[i]->data_len;
      const std::uint16_t took = tx(pkts, n);
      // pkts[took..n) are still ours: their bytes did not go out.
      for (std::uint16_t i = took; i < n; ++i) bytes -= pkts[i]->data_len;
      if (took < n) mbuf_free_bulk(pkts + took, n - took);
      gen += n;
      n_sent += took;
      n_bytes += bytes;
      n_refused += n - took;
      generated.store(gen, std::memory_order_relaxed);
      sent.store(n_sent, std::memory_order_relaxed);
      sent_bytes.store(n_bytes, std::memory_order_relaxed);
      refused.store(n_refused, std::memory_order_relaxed);
    }
    for (auto& p : pools) p->detach_thread();
    // R: pairs with the acquire load in counts(): the last counter stores are visible with it.
    finished.store(true, std::memory_order_release);
  }
};

TrafficGenerator::TrafficGenerator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrafficGenerator::~TrafficGenerator() = default;

Result<std::unique_ptr<TrafficGenerator>> TrafficGenerator::create(const Plan& plan, const GeneratorOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  GeneratorOptions& o = impl->options;
  if (o.burst == 0 || o.burst > kMaxGenBurst)
    return Status::errorf("burst {} is out of range: use 1 to {}", o.burst, kMaxGenBurst);
  if (o.rate_pps < 0) return Status::errorf("rate {} pps is negative: give a rate above 0, or 0 for flat out", o.rate_pps);

  auto find = [&plan](const std::string& name) -> const PortPlan* {
    for (const PortPlan& p : plan.ports)
      if (p.name == name) return &p;
    return nullptr;
  };
  auto names = [&plan] {
    std::string out;
    for (const PortPlan& p : plan.ports) out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", p.name, p.pmd);
    return out.empty() ? std::string("none") : out;
  };
  if (o.source.empty()) {
    for (const PortPlan& p : plan.ports)
      if (p.pmd == "synth") {
        if (!o.source.empty())
          return Status::errorf("{}: more than one synth port ({} and {}); name the frame source with --source",
                                plan.source, o.source, p.name);
        o.source = p.name;
      }
    if (o.source.empty())
      return Status::errorf("{}: no synth port to make the frames; add a [[ports]] table with pmd = \"synth\" or name "
                            "the source port with --source (ports: {})",
                            plan.source, names());
  }
  const PortPlan* src = find(o.source);
  if (!src) return Status::errorf("{}: no port named '{}' to take frames from (ports: {})", plan.source, o.source, names());
  if (o.target.empty()) return Status::errorf("name the port to transmit on (--port); ports in {}: {}", plan.source, names());
  const PortPlan* dst = find(o.target);
  if (!dst) return Status::errorf("{}: no port named '{}' to transmit on (ports: {})", plan.source, o.target, names());
  if (src == dst)
    return Status::errorf("{}port '{}' cannot be both the frame source and the transmit port; add a second port",
                          location_prefix(dst->where), dst->name);
  if (o.source_queue >= src->rx_queues)
    return Status::errorf("{}port '{}' has {} rx queue(s); the generator takes frames from queue {}",
                          location_prefix(src->where), src->name, src->rx_queues, o.source_queue);
  if (o.target_queue >= dst->tx_queues)
    return Status::errorf("{}port '{}' has {} tx queue(s) and the generator sends on queue {}; set tx_queues = {}",
                          location_prefix(dst->where), dst->name, dst->tx_queues, o.target_queue, o.target_queue + 1);
  impl->source_pmd = src->pmd;
  impl->target_pmd = dst->pmd;

  // The same claims a run makes, before any port opens: a second gen or a run on the same
  // interface queue or CPU is refused with this one's pid and config, and this one never steps on
  // a pipeline that got there first.
  Plan claimed;
  claimed.ports = {*src, *dst};
  if (o.cpu >= 0) {
    LcorePlan sender;
    sender.cpu = o.cpu;
    claimed.lcores.push_back(sender);
  }
  auto locks = ops::take_instance_locks(claimed, plan.source.empty() ? std::string("rawpipe gen") : plan.source);
  if (!locks) return locks.status();
  impl->locks = std::move(locks).value();

  // Only the pools these two ports use.
  auto pool_of = [&](const PortPlan& pp) -> Result<Pool*> {
    for (auto& pl : impl->pools)
      if (pl->name() == pp.pool) return pl.get();
    for (std::size_t i = 0; i < plan.pools.size(); ++i)
      if (const PoolPlan& ppl = plan.pools[i]; ppl.config.name == pp.pool) {
        PoolConfig config = ppl.config;
        config.count = pool_count(plan, i);
        auto pool = Pool::create(config);
        if (!pool) return Status::errorf("{}{}", location_prefix(ppl.where), pool.message());
        impl->pools.push_back(std::move(pool).value());
        return impl->pools.back().get();
      }
    return Status::errorf("{}port '{}': no pool named '{}'", location_prefix(pp.where), pp.name, pp.pool);
  };
  auto open = [&](const PortPlan& pp) -> Result<std::unique_ptr<Port>> {
    auto pool = pool_of(pp);
    if (!pool) return pool.status();
    PortEnv env;
    env.port_id = pp.id;
    env.name = pp.name;
    env.rx_queues = pp.rx_queues;
    env.tx_queues = pp.tx_queues;
    env.rx_ring_size = pp.rx_ring_size;
    env.tx_ring_size = pp.tx_ring_size;
    env.pool = *pool;
    auto port = pp.spec->open(env);
    if (!port)
      return Status::errorf("{}port '{}' (pmd {}): {}", location_prefix(pp.where), pp.name, pp.pmd, port.message());
    return std::move(port).value();
  };
  auto s = open(*src);
  if (!s) return s.status();
  impl->source = std::move(s).value();
  // Such a port gets nothing that no rule asks for (mlx5 with steering = "rules", af_xdp in steer
  // mode, the socket port). gen classifies nothing, but the config's endpoint rules still say what
  // traffic its user wants taken from the port; with none, gen would wait for frames that never
  // come, so it says so. It never asks for everything on its own: on a shared NIC that would take
  // the host's own traffic from the kernel.
  if (impl->source->steered_only()) {
    auto rules = plan_endpoint_rules(plan);
    if (!rules) return rules.status();
    SteeringRules wanted;
    for (SteeringRule& r : rules.value())
      if (!r.match.ingress_port || *r.match.ingress_port == src->id) wanted.rules.push_back(std::move(r));
    if (wanted.rules.empty())
      return Status::errorf(
          "{}port '{}' (pmd {}) receives only the traffic steered to it, and {} has no endpoint "
          "rule to steer there: add an [[endpoints]] table whose match names the traffic to take "
          "(\"any\" takes every IP frame), or set the port to receive every frame",
          location_prefix(src->where), src->name, src->pmd, plan.source.empty() ? "the plan" : plan.source);
    if (Status st = impl->source->update_steering(wanted); !st)
      return Status::errorf(
          "{}port '{}' (pmd {}) receives only the traffic steered to it, and gen could not steer the "
          "endpoints' rules there: {}",
          location_prefix(src->where), src->name, src->pmd, st.message());
    impl->source_rules = wanted.rules.size();
  }
  auto t = open(*dst);
  if (!t) return t.status();
  impl->target = std::move(t).value();
  return std::unique_ptr<TrafficGenerator>(new TrafficGenerator(std::move(impl)));
}

Status TrafficGenerator::start() {
  Impl& g = *impl_;
  if (g.started) return Status::errorf("the generator was already started; create a new one to run again");
  RAWPIPE_TRY(g.source->start());
  if (Status st = g.target->start(); !st) {
    g.source->stop();
    return st;
  }
  g.rx = g.source->rx_queue(g.options.source_queue);
  g.tx = g.target->tx_queue(g.options.target_queue);
  if (!g.rx.burst || !g.tx.burst) {
    g.target->stop();
    g.source->stop();
    return Status::errorf("port '{}' ({}) gave no {} queue {}", !g.rx.burst ? g.options.source : g.options.target,
                          !g.rx.burst ? g.source_pmd : g.target_pmd, !g.rx.burst ? "rx" : "tx",
                          !g.rx.burst ? g.options.source_queue : g.options.target_queue);
  }
  g.thread = std::thread([&g] {
    int v;
    // A: pairs with the release stores of go below: the pinning was decided before the loop starts.
    while ((v = g.go.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
    if (v != 1) {
      g.finished.store(true, std::memory_order_release);
      return;
    }
    if (g.options.rate_pps > 0)
      g.run<true>();
    else
      g.run<false>();
  });
  (void)pthread_setname_np(g.thread.native_handle(), "rawpipe-gen");
  if (g.options.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    int err = g.options.cpu < CPU_SETSIZE ? 0 : EINVAL;
    if (!err) {
      CPU_SET(g.options.cpu, &set);
      err = pthread_setaffinity_np(g.thread.native_handle(), sizeof set, &set);
    }
    if (err) {
      g.go.store(2, std::memory_order_release);
      g.join();
      g.target->stop();
      g.source->stop();
      return Status::errorf("cannot pin the generator to cpu {}: {}; pick a CPU this process may use (taskset -p {})",
                            g.options.cpu, std::strerror(err), getpid());
    }
  }
  g.started = true;
  g.go.store(1, std::memory_order_release);
  return Status::ok();
}

void TrafficGenerator::request_stop() noexcept { impl_->request_stop(); }

void TrafficGenerator::stop() {
  Impl& g = *impl_;
  if (!g.started || g.stopped) return;
  g.request_stop();
  g.join();
  // The ports give back every buffer they hold (a tx ring's frames in flight) when stopped.
  g.target->stop();
  g.source->stop();
  g.stopped = true;
  std::uint32_t out = 0;
  for (auto& p : g.pools) out += p->in_use();
  g.outstanding = out;
}

GeneratorCounts TrafficGenerator::counts() const noexcept {
  const Impl& g = *impl_;
  GeneratorCounts c;
  c.finished = g.finished.load(std::memory_order_acquire);
  c.time_ns = now_ns();
  c.generated = g.generated.load(std::memory_order_relaxed);
  c.sent = g.sent.load(std::memory_order_relaxed);
  c.sent_bytes = g.sent_bytes.load(std::memory_order_relaxed);
  c.refused = g.refused.load(std::memory_order_relaxed);
  c.outstanding = g.outstanding;
  return c;
}

std::string TrafficGenerator::describe() const {
  const Impl& g = *impl_;
  const GeneratorOptions& o = g.options;
  std::string out = fmt::format("gen: {} ({}) rx queue {} -> {} ({}) tx queue {}, burst {}, {}, {}, {}", o.source,
                                g.source_pmd, o.source_queue, o.target, g.target_pmd, o.target_queue, o.burst,
                                o.rate_pps > 0 ? fmt::format("{:.0f} pps", o.rate_pps) : std::string("flat out"),
                                o.count ? fmt::format("{} frames", o.count) : std::string("until stopped"),
                                o.cpu >= 0 ? fmt::format("cpu {}", o.cpu) : std::string("not pinned"));
  if (g.source_rules)
    out += fmt::format("\ngen: port {} receives only steered traffic; the config's {} endpoint rule(s) are steered to it",
                       o.source, g.source_rules);
  std::string path = g.target->path_report();
  if (!path.empty()) out += "\n" + path;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

PortStats TrafficGenerator::target_stats() const { return impl_->target->stats(); }
PortStats TrafficGenerator::source_stats() const { return impl_->source->stats(); }

std::vector<std::string> TrafficGenerator::notices() const {
  std::vector<std::string> out;
  for (const Port* p : {impl_->source.get(), impl_->target.get()})
    for (std::string& n : p->notices()) out.push_back(std::move(n));
  return out;
}

}  // namespace rawpipe
