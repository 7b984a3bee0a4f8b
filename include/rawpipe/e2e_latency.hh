// End-to-end latency of a ring consumer: from the port's receive timestamp
// (Mbuf::timestamp_ns, pkt_flag::kTimestamp) to the moment the consumer dequeues the packet.
//
// Clock: the consumer compares with CLOCK_REALTIME, the clock of the kernel's socket timestamps
// (AF_PACKET, the socket port). Stamps more than a minute away from that clock (a pcap file's
// recorded times, a NIC's free-running clock) cannot give a latency; they are counted as
// `unusable` instead of recorded. Sampling: one dequeued batch in `every` reads the clock once and
// records every stamped packet of it.
//
// Writer: the consumer thread only (single-writer counters); readers: the stats publisher and
// the metrics server, through json().
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rawpipe/api.h"
#include "rawpipe/mbuf.hh"
#include "rawpipe/pipeline.hh"

namespace rawpipe {

class RAWPIPE_API E2eLatency {
 public:
  E2eLatency(std::size_t endpoints, std::uint32_t every);
  ~E2eLatency();

  // Consumer thread: packets just dequeued from endpoint `ep` (before they are freed).
  void on_batch(std::uint16_t ep, Mbuf* const* pkts, unsigned n) noexcept {
    if (--countdown_ != 0) [[likely]] return;
    countdown_ = every_;
    record(ep, pkts, n);
  }

  // Any thread: [{"endpoint", "latency": histogram (ns), "unusable"}] for endpoints that saw a
  // stamped packet.
  nlohmann::json json(const Pipeline& pipeline) const;

 private:
  void record(std::uint16_t ep, Mbuf* const* pkts, unsigned n) noexcept;

  struct PerEndpoint;  // a latency histogram and an unusable count (pipeline/ops/e2e_latency.cc)
  std::vector<std::unique_ptr<PerEndpoint>> eps_;
  std::uint32_t every_;
  std::uint32_t countdown_;  // consumer thread only
};

}  // namespace rawpipe
