// synth receive: copy a prebuilt frame (whole per flow, or a template patched with the flow), count.
#include <chrono>
#include <cstring>

#include "pmd/synth/synth.hh"

namespace rawpipe::synth {
namespace {

constexpr std::uint64_t kMalformedOne = 1ull << 32;

// From this many bytes a frame goes to libc's memcpy, which picks the widest moves this CPU has
// at run time, where the inline blocks below are the build's 16-byte ones (x86-64-v2). On this
// project's machine (AVX-512), `rawpipe gen` to net_null with 1024 flows: 23.6 against 19.2 Mpps
// at 1518 bytes, 37.7 against 31.1 at 512, 41.9 against 38.6 at 256; at 64 and 128 bytes the
// call cost what it saved (45.1 against 46.4, 44.4 against 43.8).
constexpr unsigned kLibcCopyFrom = 256;

// Copies whole 64-byte blocks (constant-size moves the compiler inlines) when the rounding fits
// the buffer's data room, which start() checked once for every frame.
RAWPIPE_ALWAYS_INLINE void copy_frame(std::uint8_t* d, const std::uint8_t* s, unsigned len, bool blocks) noexcept {
  if (len >= kLibcCopyFrom) {
    std::memcpy(d, s, len);
    return;
  }
  if (RAWPIPE_LIKELY(blocks)) {
    unsigned off = 0;
    do {
      std::memcpy(d + off, s + off, kCacheLine);
      off += kCacheLine;
    } while (off < len);
  } else {
    std::memcpy(d, s, len);
  }
}

RAWPIPE_ALWAYS_INLINE void set_meta(const RxQueue* q, Mbuf* m, std::uint32_t len, std::uint32_t hash) noexcept {
  m->data_len = len;
  m->port = q->port;
  m->queue = q->queue;
  m->rss_hash = hash;
  m->flags = pkt_flag::kRssHash;
}

RAWPIPE_ALWAYS_INLINE std::uint32_t next_flow(RxQueue* q) noexcept {
  const std::uint32_t f = q->flow_order[q->flow_pos];
  if (++q->flow_pos == q->flow_count) q->flow_pos = 0;
  return f;
}

// Template mode: IMIX sizes, malformed frames, or too many flows to prebuild.
RAWPIPE_ALWAYS_INLINE void fill_template(RxQueue* q, Mbuf* m, std::uint64_t& bytes, std::uint64_t& v6) noexcept {
  const SynthFrames& fr = *q->frames;
  const Flow& f = fr.flows[next_flow(q)];
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
  copy_frame(d, t.bytes, t.len, q->block_copy);
  patch_flow(t, f, d);
  set_meta(q, m, t.len, f.hash);
  bytes += t.len;
  v6 += f.ipv6;
}

// Flow-frame mode: the flow's whole frame is ready; one copy.
RAWPIPE_ALWAYS_INLINE void fill_flow(RxQueue* q, Mbuf* m, std::uint64_t& v6) noexcept {
  const std::uint32_t f = next_flow(q);
  copy_frame(m->data(), q->flow_frames + std::size_t(f) * q->flow_stride, q->flow_len, q->block_copy);
  set_meta(q, m, q->flow_len, q->meta[f].hash);
  v6 += q->meta[f].ipv6;
}

template <bool kFlows>
RAWPIPE_ALWAYS_INLINE std::uint16_t generate(RxQueue* q, Mbuf** pkts, std::uint16_t n) noexcept {
  if (!q->pool->alloc_bulk(pkts, n)) [[unlikely]] {
    count_add(q->counters.rx_nombuf, n);
    return 0;
  }
  // The data lines were last touched by whoever freed the buffers (often the consumer's core):
  // ask for all of them before writing the first, so the ownership transfers overlap.
  for (std::uint16_t i = 0; i < n; ++i) prefetchw(pkts[i]->data());
  std::uint64_t bytes = 0;
  std::uint64_t v6 = 0;
  if constexpr (kFlows) {
    for (std::uint16_t i = 0; i < n; ++i) fill_flow(q, pkts[i], v6);
    bytes = std::uint64_t(n) * q->flow_len;
  } else {
    for (std::uint16_t i = 0; i < n; ++i) fill_template(q, pkts[i], bytes, v6);
  }
  q->remaining -= n;
  count_add(q->counters.rx_packets, n);
  count_add(q->counters.rx_bytes, bytes);
  if (v6) count_add(q->ipv6_packets, v6);
  return n;
}

template <bool kFlows>
RAWPIPE_ALWAYS_INLINE std::uint16_t rx_full(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  auto* q = static_cast<RxQueue*>(queue);
  if (q->remaining < n) [[unlikely]] {
    n = static_cast<std::uint16_t>(q->remaining);
    if (n == 0) return 0;
  }
  return generate<kFlows>(q, pkts, n);
}

template <bool kFlows>
RAWPIPE_ALWAYS_INLINE std::uint16_t rx_rate(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
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
  std::uint16_t got = generate<kFlows>(q, pkts, n);
  q->tokens -= got;
  return got;
}

}  // namespace

std::uint16_t rx_burst_full(void* queue, Mbuf** pkts, std::uint16_t n) noexcept { return rx_full<false>(queue, pkts, n); }
std::uint16_t rx_burst_rate(void* queue, Mbuf** pkts, std::uint16_t n) noexcept { return rx_rate<false>(queue, pkts, n); }
std::uint16_t rx_burst_full_flows(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  return rx_full<true>(queue, pkts, n);
}
std::uint16_t rx_burst_rate_flows(void* queue, Mbuf** pkts, std::uint16_t n) noexcept {
  return rx_rate<true>(queue, pkts, n);
}

}  // namespace rawpipe::synth
