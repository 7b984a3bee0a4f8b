#include "pmd/mana/port.hh"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "pipeline/config/hex.hh"
#include "pipeline/config/section.hh"
#include "pmd/mana/model/device.hh"

namespace rawpipe::mana {

namespace {
const KeyDoc kManaCommonDocs[] = {
    {"rss", "string", "\"l4\", \"l3\" (\"l3\" in mana-model only)", "\"l4\"", "fields the receive hash spreads flows by"},
    {"rss_key", "string", "80 hex digits", "the default Toeplitz key", "the 40-byte Toeplitz key"},
};
}  // namespace
const KeyTable kManaCommonKeys{"mana-common", "[[ports]] pmd = \"mana\" or \"mana-model\"", "MANA RSS keys",
                               kManaCommonDocs};

void parse_common_keys(ConfigSection& section, ManaCommonSpec& out) {
  // DPDK's mana PMD advertises nb_min = nb_align = MIN_BUFFERS_PER_QUEUE (64) for both rings
  // (drivers/net/mana/mana.c mana_dev_info_get, mana.h, DPDK 38f72e50). Ring sizes are powers of
  // two already (the port loader checks that), so "a multiple of 64" is "at least 64".
  for (std::string_view key : {std::string_view("rx_ring_size"), std::string_view("tx_ring_size")}) {
    if (!section.has(key)) continue;
    const std::int64_t v = section.integer(key, 1, std::int64_t(1) << 32, kMinRingSize);
    if (v < kMinRingSize || v % kMinRingSize != 0)
      section.fail(key, fmt::format("MANA queues take at least {0} descriptors, in multiples of {0} (as DPDK's mana "
                                    "PMD requires), got {1}; use {0} or more",
                                    kMinRingSize, v));
  }
  out.rss = section.choice("rss", {"l4", "l3"}, "l4") == "l3" ? RssFields::kL3 : RssFields::kL4;
  out.rss_key = kDefaultRssKey;
  if (section.has("rss_key")) {
    const std::string hex = section.string("rss_key");
    std::vector<std::uint8_t> key;
    const bool ok = hex_bytes(hex, key) && key.size() == out.rss_key.size();
    if (ok) std::copy(key.begin(), key.end(), out.rss_key.begin());
    if (!ok)
      section.fail("rss_key", fmt::format("expected 80 hex digits (MANA takes exactly a 40-byte Toeplitz key), got "
                                          "\"{}\"",
                                          hex));
  } else {
    section.string("rss_key", "");
  }
}

PortCaps ManaPortBase::caps() const {
  PortCaps c;
  c.rx_checksum = true;
  c.rss = true;
  c.flow_rules = false;   // no ibv_create_flow on MANA
  c.kernel_pass = false;  // the raw QP owns the vPort: the kernel sees nothing while we run
  c.tx = true;
  c.max_rx_queues = static_cast<std::uint16_t>(rxq_.size());
  c.max_tx_queues = static_cast<std::uint16_t>(txq_.size());
  return c;
}

PortStats ManaPortBase::stats() const {
  PortStats s;
  auto r = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  std::uint64_t cqes = 0, coalesced = 0, truncated = 0, fences = 0, bad = 0, overflow = 0, refill = 0, vlan = 0,
                vlan_lost = 0, tx_cqes = 0, offload = 0, unreg = 0, tx_overflow = 0;
  std::array<std::uint64_t, kTxErrorTypes + 1> types{};
  for (const auto& q : rxq_) {
    QueueCounters c;
    c.rx_packets = r(q->counters.packets);
    c.rx_bytes = r(q->counters.bytes);
    c.rx_nombuf = r(q->counters.refill_failed);
    c.rx_errors = r(q->counters.truncated) + r(q->counters.bad_cqes);
    s.rx_queues.push_back(c);
    cqes += r(q->counters.cqes);
    coalesced += r(q->counters.coalesced_cqes);
    truncated += r(q->counters.truncated);
    fences += r(q->counters.fences);
    bad += r(q->counters.bad_cqes);
    overflow += r(q->counters.cq_overflow);
    refill += r(q->counters.refill_failed);
    vlan += r(q->counters.vlan_reinserted);
    vlan_lost += r(q->counters.vlan_no_headroom);
  }
  for (const auto& q : txq_) {
    QueueCounters c;
    c.tx_packets = r(q->counters.packets);
    c.tx_bytes = r(q->counters.bytes);
    c.tx_errors = r(q->counters.errors);
    s.tx_queues.push_back(c);
    tx_cqes += r(q->counters.cqes);
    offload += r(q->counters.csum_offloaded);
    unreg += r(q->counters.not_registered);
    tx_overflow += r(q->counters.cq_overflow);
    for (std::size_t i = 0; i < types.size(); ++i) types[i] += r(q->counters.error_types[i]);
  }
  s.extended["rx_cqes"] = cqes;
  s.extended["rx_coalesced_cqes"] = coalesced;
  s.extended["rx_truncated"] = truncated;
  s.extended["rx_object_fences"] = fences;
  s.extended["rx_unknown_cqes"] = bad;
  s.extended["rx_cq_overflow"] = overflow;
  s.extended["rx_refill_failed"] = refill;
  s.extended["rx_vlan_reinserted"] = vlan;
  s.extended["rx_vlan_no_headroom"] = vlan_lost;
  s.extended["tx_cqes"] = tx_cqes;
  s.extended["tx_csum_offloaded"] = offload;
  s.extended["tx_not_registered"] = unreg;
  s.extended["tx_cq_overflow"] = tx_overflow;
  static constexpr const char* kNames[kTxErrorTypes + 1] = {
      "tx_err_sa_drop",        "tx_err_mtu_drop",          "tx_err_invalid_oob",
      "tx_err_invalid_eth_type", "tx_err_hdr_processing",  "tx_err_vf_disabled",
      "tx_err_vport_idx_out_of_range", "tx_err_vport_disabled", "tx_err_vlan_tagging_violation",
      "tx_err_unknown_type"};
  for (std::size_t i = 0; i < types.size(); ++i) s.extended[kNames[i]] = types[i];
  return s;
}

std::string ManaPortBase::queue_report(std::string_view pmd, std::string_view where) const {
  std::string out;
  for (std::size_t i = 0; i < rxq_.size(); ++i) {
    const RxQueue& q = *rxq_[i];
    out += fmt::format("{} {} rx queue {}: raw WQ {:#x}, {} one-SGE WQEs, CQ {:#x} of {} entries (owner-bit polling, "
                       "up to 4 packets per CQE), RSS Toeplitz over {} queues on {}; {}\n",
                       pmd, where, i, q.rq.id, q.rq.count, q.cq.id, q.cq.count, rxq_.size(),
                       rss_ == RssFields::kL4 ? "IP addresses and UDP/TCP ports" : "IP addresses", kNoFlowRulesNote);
  }
  for (std::size_t i = 0; i < txq_.size(); ++i) {
    const TxQueue& q = *txq_[i];
    out += fmt::format("{} {} tx queue {}: raw SQ {:#x}, {} WQEs with the short OOB (VSQ frame {}, vPort offset {}), "
                       "CQ {:#x} of {} entries, one CQE per burst (suppression), IPv4/TCP/UDP checksum offload\n",
                       pmd, where, i, q.sq.id, q.sq.count, q.vsq_frame, q.vp_offset, q.cq.id, q.cq.count);
  }
  return out;
}

void ManaPortBase::release_buffers() noexcept {
  for (auto& q : rxq_) rx_release_all(*q);
  for (auto& q : txq_) tx_release_all(*q);
}

}  // namespace rawpipe::mana
