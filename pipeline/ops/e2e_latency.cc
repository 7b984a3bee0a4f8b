#include "rawpipe/e2e_latency.hh"

#include <time.h>

#include "pipeline/ops/publisher.hh"
#include "pipeline/stats/histogram.hh"
#include "pipeline/stats/lcore_counters.hh"

namespace rawpipe {

struct E2eLatency::PerEndpoint {
  LatencyHistogram ns;
  Counter unusable;
};


E2eLatency::E2eLatency(std::size_t endpoints, std::uint32_t every)
    : every_(every ? every : 1), countdown_(every_) {
  for (std::size_t e = 0; e < endpoints; ++e) eps_.push_back(std::make_unique<PerEndpoint>());
}

E2eLatency::~E2eLatency() = default;

void E2eLatency::record(std::uint16_t ep, Mbuf* const* pkts, unsigned n) noexcept {
  if (ep >= eps_.size()) return;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  const std::uint64_t now = std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
  constexpr std::uint64_t kMinute = 60ull * 1000000000ull;
  PerEndpoint& e = *eps_[ep];
  unsigned unusable = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (!(pkts[i]->flags & pkt_flag::kTimestamp)) continue;
    const std::uint64_t t = pkts[i]->timestamp_ns;
    // A stamp slightly in the future (clock adjustments between cores) counts as 0.
    if (t > now + kMinute || now - t > kMinute) {
      ++unusable;
      continue;
    }
    e.ns.record(t > now ? 0 : now - t);
  }
  if (unusable) e.unusable.add(unusable);
}

nlohmann::json E2eLatency::json(const Pipeline& pipeline) const {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t ep = 0; ep < eps_.size(); ++ep) {
    const HistogramSnapshot h = eps_[ep]->ns.snapshot();
    const std::uint64_t unusable = eps_[ep]->unusable.load();
    if (h.count == 0 && unusable == 0) continue;
    out.push_back({{"endpoint", pipeline.endpoint_name(static_cast<std::uint16_t>(ep))},
                   {"latency", ops::histogram_json(h, 1.0)},
                   {"unusable", unusable}});
  }
  return out;
}

}  // namespace rawpipe
