#include "pipeline/neigh/stage.hh"

#include <cstring>

#include "pipeline/buf/pool.hh"

namespace rawpipe {

NeighStage::NeighStage(std::vector<const NeighTable*> tables, std::vector<TxQueueHandle> tx, LcoreCounters* counters)
    : tables_(std::move(tables)), tx_(std::move(tx)), counters_(counters) {}

unsigned NeighStage::run(std::uint16_t port, Mbuf** pkts, Verdict* verdicts, unsigned n) noexcept {
  const NeighTable* table = port < tables_.size() ? tables_[port] : nullptr;
  if (!table) return n;
  NeighCache* cache = port < caches_.size() ? caches_[port] : nullptr;
  Mbuf* replies[kMaxBurst];
  unsigned n_replies = 0, kept = 0;
  std::uint64_t ignored = 0, malformed = 0;
  for (unsigned i = 0; i < n; ++i) {
    Mbuf* m = pkts[i];
    const std::uint8_t reason = m->drop_reason;
    // ARP has no L3 type in parse; ND is ICMPv6. Frames parse found malformed are not read again.
    const bool candidate = (reason == 0 || reason == static_cast<std::uint8_t>(DropReason::kNoMatch)) &&
                           verdicts[i] != Verdict::kHold &&
                           (m->l3_type == L3Type::kNone || (m->l3_type == L3Type::kIpv6 && m->l4_proto == 58));
    if (candidate) {
      if (cache) (void)neigh_learn(*cache, m->data(), m->data_len);
      // The reply is built beside the request (neigh_respond reads the request while writing).
      std::uint8_t out[128];
      NeighResult r = neigh_respond(*table, m->data(), m->data_len, out, sizeof out);
      if (r.outcome == NeighOutcome::kReplied && m->buf_len - m->data_off >= r.len) {
        std::memcpy(m->data(), out, r.len);
        m->data_len = r.len;
        m->tx_flags = 0;
        m->drop_reason = 0;
        replies[n_replies++] = m;
        continue;
      }
      ignored += r.outcome == NeighOutcome::kNotOurs;
      malformed += r.outcome == NeighOutcome::kMalformed;
    }
    pkts[kept] = m;
    verdicts[kept] = verdicts[i];
    ++kept;
  }
  if (ignored) ignored_.add(ignored);
  if (malformed) malformed_.add(malformed);
  if (n_replies) {
    LcoreCounters& c = *counters_;
    const TxQueueHandle& tx = tx_[port];
    const unsigned done = tx.burst ? tx(replies, static_cast<std::uint16_t>(n_replies)) : 0;
    replies_.add(done);
    c.transmitted.add(done);
    c.transmitted_per_port[port].add(done);
    if (done < n_replies) {
      const unsigned failed = n_replies - done;
      tx_failed_.add(failed);
      c.drops[static_cast<unsigned>(DropReason::kTxFailed)].add(failed);
      for (unsigned j = done; j < n_replies; ++j) replies[j]->drop_reason = static_cast<std::uint8_t>(DropReason::kTxFailed);
      mbuf_free_bulk(replies + done, failed);
    }
  }
  return kept;
}

NeighStats NeighStage::stats() const noexcept {
  return {replies_.load(), ignored_.load(), malformed_.load(), tx_failed_.load()};
}

}  // namespace rawpipe
