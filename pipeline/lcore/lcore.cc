#include "pipeline/lcore/lcore.hh"

#include <time.h>

#include "pipeline/filter/filter.hh"
#include "pipeline/parse/parse.hh"

namespace rawpipe {

Lcore::Lcore(const LcorePlan& plan, unsigned index, std::size_t endpoints, std::size_t ports)
    : plan_(plan), index_(index), counters_(std::make_unique<LcoreCounters>(endpoints, ports)) {}

void Lcore::bind(std::vector<RxQueue> rx, std::unique_ptr<Dispatcher> dispatcher, Classifier* classifier,
                 std::vector<Pool*> pools) {
  rx_ = std::move(rx);
  dispatcher_ = std::move(dispatcher);
  classifier_ = classifier;
  pools_ = std::move(pools);
}

unsigned Lcore::poll_queues(const ClassifyTable* table) noexcept {
  Mbuf* pkts[kMaxBurst];
  Verdict verdicts[kMaxBurst];
  LcoreCounters& c = *counters_;
  const std::uint16_t burst = plan_.burst;
  unsigned total = 0;
  for (const RxQueue& q : rx_) {
    const std::uint16_t n = q.rx(pkts, burst);
    if (n == 0) {
      c.empty_polls.add(1);
      continue;
    }
    total += n;
    std::uint64_t bytes = 0;
    for (unsigned i = 0; i < n; ++i) bytes += pkts[i]->data_len;
    c.bursts.add(1);
    c.rx_packets.add(n);
    c.rx_bytes.add(bytes);
    parse_burst(pkts, n);
    table->classify_burst(pkts, n);
    make_verdicts(pkts, verdicts, n);
    // Filter stage (Extra API): may rewrite verdicts; see dispatch.hh.
    if (filters_) filters_->run(q.port, q.queue, pkts, verdicts, n);
    dispatcher_->dispatch_burst(pkts, verdicts, n);
  }
  return total;
}

unsigned Lcore::poll_once() noexcept {
  const ClassifyTable* table = classifier_->acquire(index_);
  unsigned n = poll_queues(table);
  classifier_->quiesce(index_);
  return n;
}

void Lcore::run(const std::atomic<bool>& stop) noexcept {
  for (Pool* p : pools_) p->attach_thread();
  classifier_->reader_online(index_);
  const bool sleep_when_idle = plan_.idle_sleep_us != 0;
  const timespec idle{static_cast<time_t>(plan_.idle_sleep_us / 1000000),
                      static_cast<long>(plan_.idle_sleep_us % 1000000) * 1000};
  // Relaxed: the flag only ends the loop; thread join orders everything that follows.
  while (!stop.load(std::memory_order_relaxed)) {
    const ClassifyTable* table = classifier_->acquire(index_);
    const unsigned got = poll_queues(table);
    classifier_->quiesce(index_);
    if (got == 0 && sleep_when_idle) nanosleep(&idle, nullptr);
  }
  classifier_->reader_offline(index_);
  for (Pool* p : pools_) p->detach_thread();
}

}  // namespace rawpipe
