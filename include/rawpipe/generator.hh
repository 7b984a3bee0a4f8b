// A traffic generator: the frames one port's receive queue makes (the synth port's recipes:
// sizes, IMIX, flows, IPv4/IPv6, VLAN, a malformed share; or a pcap replay) transmitted on another
// port's transmit queue by one thread, with nothing between them: no parse, no classify, so a
// malformed frame goes out as it was made. The peer of `dpdk-testpmd --forward-mode=txonly` and
// pktgen; `rawpipe gen` is its command line.
//
// Per burst: take up to `burst` frames from the source (fewer when the token bucket or the count
// says so), hand them to tx_burst, free what the queue did not take and count it as refused (as
// testpmd's txonly does without --tx-retry). Nothing is allocated, locked, logged or
// system-called per packet; at rate_pps the bucket is refilled from one steady_clock read per
// burst (a vDSO call).
//
// Life cycle: create() opens the two ports and their pools from a validated Plan (the pools and
// ports of a config; its lcores and endpoints are not used), start() launches the thread,
// request_stop() (async-signal-safe) asks it to stop, stop() joins it and stops the ports, after
// which every buffer is back in its pool (counts().outstanding says so).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rawpipe/api.h"
#include "rawpipe/plan.hh"
#include "rawpipe/port_info.hh"
#include "rawpipe/status.hh"

namespace rawpipe {

struct GeneratorOptions {
  std::string source;              // port that makes the frames (its rx queue); empty: the plan's only synth port
  std::string target;              // port that transmits them
  std::uint16_t source_queue = 0;
  std::uint16_t target_queue = 0;
  double rate_pps = 0;             // 0: as fast as the target takes them
  std::uint64_t count = 0;         // frames to take from the source; 0: until stopped
  int cpu = -1;                    // pin the sending thread; -1: not pinned
  std::uint16_t burst = 32;        // 1..256
};

struct GeneratorCounts {
  std::uint64_t time_ns = 0;       // steady_clock when read
  std::uint64_t generated = 0;     // frames taken from the source: sent + refused
  std::uint64_t sent = 0;          // taken by the target's tx queue
  std::uint64_t sent_bytes = 0;    // their frame bytes (no FCS)
  std::uint64_t refused = 0;       // not taken by the tx queue, freed (the queue was full)
  bool finished = false;           // the count is reached or the thread stopped
  std::uint32_t outstanding = 0;   // after stop(): buffers not back in their pools (0 when all is well)
};

class RAWPIPE_API TrafficGenerator {
 public:
  static Result<std::unique_ptr<TrafficGenerator>> create(const Plan& plan, const GeneratorOptions& options);
  ~TrafficGenerator();
  TrafficGenerator(const TrafficGenerator&) = delete;
  TrafficGenerator& operator=(const TrafficGenerator&) = delete;

  Status start();
  void request_stop() noexcept;
  void stop();
  // Readable from any thread while it runs; exact after stop().
  GeneratorCounts counts() const noexcept;
  // "synth0 queue 0 -> p1 queue 0 (af_packet), burst 32, 1000000 pps, 5000 frames, cpu 1" and the
  // target's path report.
  std::string describe() const;
  PortStats target_stats() const;
  // The source port's counters: what it lost before the thread could take it (rx_nombuf,
  // rx_errors, a kernel ring or a NIC that ran out of buffers; lost_before_pipeline() in
  // port_info.hh adds them up). Exact after stop(), as some drivers read them as they stop.
  PortStats source_stats() const;
  std::vector<std::string> notices() const;  // both ports' (Port::notices)

  struct Impl;

 private:
  explicit TrafficGenerator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rawpipe
