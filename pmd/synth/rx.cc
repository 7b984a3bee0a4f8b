// synth receive: copy a template, patch the flow, count.
#include <chrono>
#include <cstring>

#include "pipeline/wire/checksum.hh"
#include "pmd/synth/synth.hh"

namespace rawpipe::synth {
namespace {

constexpr std::uint64_t kMalformedOne = 1ull << 32;

RAWPIPE_ALWAYS_INLINE void fill(RxQueue* q, Mbuf* m, std::uint64_t& bytes, std::uint64_t& v6) noexcept {
  const SynthFrames& fr = *q->frames;
  const Flow& f = fr.flows[q->flow_order[q->flow_pos]];
  if (++q->flow_pos == q->flow_count) q->flow_pos = 0;
  const unsigned size = q->size_seq[q->size_pos];
  if (++q->size_pos == q->size_count) q->size_pos = 0;

  Malformed kind = Malformed::kNone;
  if (q->malformed_step) {
    q->malformed_acc += q->malformed_step;
    if (q->malformed_acc >= kMalformedOne) {
      q->malformed_acc -= kMalformedOne;
      kind = q->kinds[q->kind_pos];
      if (++q->kind_pos == q->kind_count) q->kind_pos = 0;
      count_add(q->malformed[static_cast<std::size_t>(kind)], 1);
    }
  }
  const Template& t = fr.at(kind, f.ipv6, size);

  std::uint8_t* d = m->data();
  std::memcpy(d, t.bytes, t.len);
  const std::uint8_t flags = t.flags;
  if (flags & patch::kAddrs) std::memcpy(d + t.addr_off, f.addrs, t.addr_len);
  if (flags & patch::kPorts) std::memcpy(d + t.ports_off, f.ports, 4);
  if (flags & patch::kIpCsum) wire::store_be16(d + t.ip_csum_off, wire::csum_fold(std::uint64_t(t.ip_sum) + f.addr_sum));
  if (flags & patch::kL4Csum) {
    std::uint16_t c = wire::csum_fold(std::uint64_t(t.l4_sum) + f.l4_sum);
    if ((flags & patch::kUdpZero) && c == 0) c = 0xffff;
    wire::store_be16(d + t.l4_csum_off, c);
  }
  m->data_len = t.len;
  m->port = q->port;
  m->queue = q->queue;
  m->rss_hash = f.hash;
  m->flags = pkt_flag::kRssHash;
  bytes += t.len;
  v6 += f.ipv6;
}

RAWPIPE_ALWAYS_INLINE std::uint16_t generate(RxQueue* q, Mbuf** pkts, std::uint16_t n) noexcept {
  if (!q->pool->alloc_bulk(pkts, n)) [[unlikely]] {
    count_add(q->counters.rx_nombuf, n);
    return 0;
  }
  std::uint64_t bytes = 0;
  std::uint64_t v6 = 0;
  for (std::uint16_t i = 0; i < n; ++i) fill(q, pkts[i], bytes, v6);
  q->remaining -= n;
  count_add(q->counters.rx_packets, n);
  count_add(q->counters.rx_bytes, bytes);
  if (v6) count_add(q->ipv6_packets, v6);
  return n;
}

}  // namespace

std::uint16_t rx_burst_full(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  auto* q = static_cast<RxQueue*>(queue);
  if (q->remaining < n) [[unlikely]] {
    n = static_cast<std::uint16_t>(q->remaining);
    if (n == 0) return 0;
  }
  return generate(q, pkts, n);
}

std::uint16_t rx_burst_rate(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  auto* q = static_cast<RxQueue*>(queue);
  if (q->remaining < n) {
    n = static_cast<std::uint16_t>(q->remaining);
    if (n == 0) return 0;
  }
  // One clock read per burst (vDSO, no system call).
  const auto now = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  q->tokens += static_cast<double>(now - q->last_ns) * q->rate_per_ns;
  q->last_ns = now;
  if (q->tokens > q->bucket_depth) q->tokens = q->bucket_depth;
  if (q->tokens < static_cast<double>(n)) {
    n = static_cast<std::uint16_t>(q->tokens);
    if (n == 0) return 0;
  }
  std::uint16_t got = generate(q, pkts, n);
  q->tokens -= got;
  return got;
}

}  // namespace rawpipe::synth
