#include "pipeline/lcore/lcore.hh"

#include <time.h>

#include <algorithm>
#include <thread>

#include "pipeline/capture/lcore_taps.hh"
#include "pipeline/filter/filter.hh"
#include "pipeline/neigh/stage.hh"
#include "pipeline/parse/parse.hh"
#include "pipeline/send/send_port.hh"
#include "pipeline/stats/tsc.hh"

namespace rawpipe {

namespace {
thread_local int t_current_lcore = -1;
}  // namespace

int current_lcore() noexcept { return t_current_lcore; }

Lcore::Lcore(const LcorePlan& plan, unsigned index, std::size_t endpoints, std::size_t ports)
    : plan_(plan), index_(index), counters_(std::make_unique<LcoreCounters>(endpoints, ports)) {}

void Lcore::enable_latency(std::uint32_t every) {
  latency_ = every ? std::make_unique<StageLatency>(every) : nullptr;
}

void Lcore::bind(std::vector<RxQueue> rx, std::unique_ptr<Dispatcher> dispatcher, Classifier* classifier,
                 std::vector<Pool*> pools) {
  rx_ = std::move(rx);
  dispatcher_ = std::move(dispatcher);
  classifier_ = classifier;
  pools_ = std::move(pools);
}

unsigned Lcore::poll_queues(const ClassifyTable* table) noexcept {
  unsigned total = 0;
  for (const RxQueue& q : rx_) {
    // Sampled stage timing (pipeline/stats/stage_latency.hh): one predictable branch per poll
    // when it is off, a countdown when on; the timed body is the same code with TSC reads.
    if (latency_ && latency_->due()) [[unlikely]]
      total += poll_queue<true>(q, table);
    else
      total += poll_queue<false>(q, table);
  }
  return total;
}

template <bool kTimed>
RAWPIPE_ALWAYS_INLINE unsigned Lcore::poll_queue(const RxQueue& q, const ClassifyTable* table) noexcept {
  Mbuf* pkts[kMaxBurst];
  Verdict verdicts[kMaxBurst];
  LcoreCounters& c = *counters_;
  [[maybe_unused]] std::uint64_t t0 = 0, t1 = 0;
  if constexpr (kTimed) t0 = tsc_now();
  const std::uint16_t got = q.rx(pkts, plan_.burst);
  if (got == 0) {
    c.empty_polls.add(1);
    return 0;
  }
  unsigned n = got;
  // Records the stage that ended now and starts the next one.
  [[maybe_unused]] auto lap = [&](Stage s) {
    const std::uint64_t t = tsc_now();
    latency_->record(s, t - t1, got);
    t1 = t;
  };
  if constexpr (kTimed) {
    t1 = tsc_now();
    latency_->record(Stage::kRx, t1 - t0, n);
  }
  c.bursts.add(1);
  c.rx_packets.add(n);
  if (taps_) [[unlikely]] taps_->on_rx(pkts, n);
  std::uint64_t udp4_keys[kMaxBurst];
  c.rx_bytes.add(parse_burst(pkts, n, udp4_keys));
  if constexpr (kTimed) lap(Stage::kParse);
  const std::uint16_t one_endpoint = table->classify_burst(pkts, n, udp4_keys, &classify_memo_);
  // The whole burst alive and bound for one endpoint, and no stage after classify that could
  // change that: no verdicts to make, nothing for dispatch to look at per packet.
  if (one_endpoint != Mbuf::kNoEndpoint && neigh_ == nullptr && (filters_ == nullptr || !filters_->active()) &&
      taps_ == nullptr &&
      dispatcher_->takes_whole_bursts(one_endpoint)) [[likely]] {
    if constexpr (kTimed) {
      lap(Stage::kClassify);
      lap(Stage::kFilter);
    }
    dispatcher_->deliver_burst_to(one_endpoint, pkts, n);
    if constexpr (kTimed) {
      lap(Stage::kDispatch);
      latency_->record(Stage::kBurst, t1 - t0, got);
    }
    return got;
  }
  make_verdicts(pkts, verdicts, n);
  if (neigh_) [[unlikely]] n = neigh_->run(q.port, pkts, verdicts, n);
  if constexpr (kTimed) lap(Stage::kClassify);
  // Filter stage (Extra API): may rewrite verdicts; see dispatch.hh.
  if (filters_) filters_->run(q.port, q.queue, pkts, verdicts, n, index_, kTimed);
  if (taps_) [[unlikely]] taps_->on_verdicts(pkts, verdicts, n);
  if constexpr (kTimed) lap(Stage::kFilter);
  dispatcher_->dispatch_burst(pkts, verdicts, n);
  if constexpr (kTimed) {
    lap(Stage::kDispatch);
    latency_->record(Stage::kBurst, t1 - t0, got);
  }
  return got;
}

void Lcore::free_returns(bool idle) noexcept {
  // Taking buffers back costs two waits on the consumer's core: its tail, and then the slot lines
  // it wrote. The tail is looked at once per passes_per_return_look_ busy passes. What a look
  // finds is not taken then but read ahead over the following passes, a receive's worth of lines
  // per pass, and taken on the next visit from this core's cache. An idle pass has time to spare
  // and takes everything at once.
  for (MbufRing* ring : returns_) ring->read_ahead(return_lines_per_pass_);
  if (++passes_ < passes_per_return_look_ && !idle) {
    // The consumers' tails are asked for half a look early. A far consumer moves its tail only
    // in answer to a publication (once per kPassesPerPublish passes, which is one look at
    // 32-packet bursts), so by then it has written the line and leaves it alone until the
    // next, and the line arrives before the look. Loaded cold, it held the lcore up for a
    // whole crossing at every look.
    if (passes_ == passes_per_return_look_ / 2) dispatcher_->prefetch_given_back();
    return;
  }
  passes_ = 0;
  // What came back in order waits in the endpoint rings' own slots, on lines this core wrote:
  // only the consumer's tail has to cross.
  dispatcher_->reclaim_given_back(return_take_per_look_);
  for (MbufRing* ring : returns_) {
    unsigned take = std::min(ring->readable_seen(), return_take_per_look_);
    const unsigned fresh = ring->look_readable();
    if (idle) take = std::min(fresh, return_take_per_look_);
    // Freed from the ring's own slots: the pointers are only read once.
    (void)ring->consume_in_place(take, [](Mbuf* const* bufs, unsigned n) noexcept { mbuf_free_bulk(bufs, n); });
  }
}

void Lcore::publish_rings(bool idle) noexcept {
  if (++passes_since_follow_ >= kPassesPerFollow) {
    passes_since_follow_ = 0;
    dispatcher_->follow_consumers();
  }
  if (!dispatcher_->holding()) return;
  if (++passes_since_publish_ < kPassesPerPublish && !idle) return;
  passes_since_publish_ = 0;
  dispatcher_->publish_held(idle);
}

unsigned Lcore::poll_once() noexcept {
  const ClassifyTable* table = classifier_->acquire(index_);
  unsigned n = poll_queues(table);
  classifier_->quiesce(index_);
  for (SendPort* s : sends_) s->drain();
  free_returns(n == 0);
  return n;
}

unsigned Lcore::try_pass() noexcept {
  int expected = kPassFree;
  // A1: acquire pairs with the release at the end of the previous pass (R1), whichever thread ran
  // it: its ring indices, counters and queue state are visible here, as on an lcore's own thread.
  if (!pass_state_.compare_exchange_strong(expected, kPassBusy, std::memory_order_acquire, std::memory_order_relaxed))
    return 0;
  const int outer = t_current_lcore;
  t_current_lcore = static_cast<int>(index_);
  classifier_->reader_online(index_);
  const unsigned n = poll_once();
  classifier_->reader_offline(index_);
  t_current_lcore = outer;
  // R1: pairs with A1 of the next pass and with close_passes().
  pass_state_.store(kPassFree, std::memory_order_release);
  return n;
}

void Lcore::close_passes() noexcept {
  int expected = kPassFree;
  // A pass under way ends within one burst per queue; acquire pairs with its R1.
  while (!pass_state_.compare_exchange_weak(expected, kPassClosed, std::memory_order_acquire, std::memory_order_relaxed)) {
    if (expected == kPassClosed) return;
    expected = kPassFree;
    std::this_thread::yield();
  }
}

void Lcore::run(const std::atomic<bool>& stop) noexcept {
  t_current_lcore = static_cast<int>(index_);
  for (Pool* p : pools_) p->attach_thread();
  classifier_->reader_online(index_);
  const bool sleep_when_idle = plan_.idle_sleep_us != 0;
  // Decided once: the routes are fixed for the dispatcher's life, and an lcore without a ring
  // endpoint has nothing to publish, so its passes skip that bookkeeping altogether.
  const bool has_ring_routes = dispatcher_->has_ring_routes();
  const timespec idle{static_cast<time_t>(plan_.idle_sleep_us / 1000000),
                      static_cast<long>(plan_.idle_sleep_us % 1000000) * 1000};
  // Relaxed: the flag only ends the loop; thread join orders everything that follows.
  while (!stop.load(std::memory_order_relaxed)) {
    const ClassifyTable* table = classifier_->acquire(index_);
    const unsigned got = poll_queues(table);
    classifier_->quiesce(index_);
    for (SendPort* s : sends_) s->drain();
    free_returns(got == 0);
    if (has_ring_routes) publish_rings(got == 0);
    if (got == 0 && sleep_when_idle) nanosleep(&idle, nullptr);
  }
  // Nothing may stay held back: stop() drains the rings up to their published tails, and passes
  // run by other threads (try_pass) publish every run.
  dispatcher_->stop_holding();
  classifier_->reader_offline(index_);
  for (Pool* p : pools_) p->detach_thread();
  t_current_lcore = -1;
}

}  // namespace rawpipe
