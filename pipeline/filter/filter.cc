#include "pipeline/filter/filter.hh"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "pipeline/buf/audit.hh"
#include "pipeline/classify/classifier.hh"
#include "pipeline/stats/tsc.hh"
#include "pipeline/wire/wire.hh"

namespace rawpipe {

void describe_packet(Mbuf* m, rawpipe_packet* out) noexcept {
  std::uint8_t* d = m->data();
  out->frame.iov_base = d;
  out->frame.iov_len = m->data_len;
  std::memset(&out->src, 0, sizeof out->src);
  std::memset(&out->dst, 0, sizeof out->dst);
  // Parse guarantees the headers it reports lie inside data_len.
  if (m->l3_type == L3Type::kIpv4) {
    out->src.family = out->dst.family = 4;
    std::memcpy(out->src.addr, d + m->l3_off + 12, 4);
    std::memcpy(out->dst.addr, d + m->l3_off + 16, 4);
  } else if (m->l3_type == L3Type::kIpv6) {
    out->src.family = out->dst.family = 6;
    std::memcpy(out->src.addr, d + m->l3_off + 8, 16);
    std::memcpy(out->dst.addr, d + m->l3_off + 24, 16);
  }
  if (m->l4_off != 0 && (m->l4_proto == wire::kIpProtoUdp || m->l4_proto == wire::kIpProtoTcp)) {
    out->src.port = wire::load_be16(d + m->l4_off);
    out->dst.port = wire::load_be16(d + m->l4_off + 2);
  }
  if (m->payload_off != 0) {
    out->payload.iov_base = d + m->payload_off;
    out->payload.iov_len = m->payload_len;
  } else {
    out->payload = out->frame;
  }
  out->ingress_port = m->port;
  out->ingress_queue = m->queue;
  out->endpoint = m->endpoint;
  out->vlan_tci = m->vlan_tci[0];
  out->vlan_count = m->vlan_count;
  out->l4_proto = m->l4_proto;
  out->flags = m->flags;
  out->rss_hash = m->rss_hash;
  out->flow_tag = m->flow_tag;
  out->timestamp_ns = m->timestamp_ns;
  out->user_ctx = nullptr;
  out->handle = m;
}

FilterStage::FilterStage(std::size_t endpoints, const std::vector<std::uint16_t>& rx_queues, std::size_t lcores)
    : lcores_(lcores ? lcores : 1) {
  auto s = std::make_unique<FilterSet>();
  s->by_endpoint.resize(endpoints);
  s->offload_off.assign(endpoints, 0);
  for (std::uint16_t q : rx_queues) s->by_queue.emplace_back(q);
  current_.store(s.get(), std::memory_order_relaxed);
  cur_ = std::move(s);
}

void FilterStage::set_quiescence(Classifier* c, bool (*may_wait)()) {
  std::lock_guard lock(mu_);
  quiescence_ = c;
  may_wait_ = may_wait;
}

std::size_t FilterStage::retired_count() const {
  std::lock_guard lock(mu_);
  return retired_.size();
}

namespace {
bool same_point(const FilterAttachPoint& a, const FilterAttachPoint& b) {
  return a.on_queue == b.on_queue && (a.on_queue ? a.port == b.port && a.queue == b.queue : a.endpoint == b.endpoint);
}
// One lcore's verdicts added to a snapshot; seen is their sum (filter_counters.hh).
void add_verdicts(FilterStats& st, const FilterLcoreCounters& k) noexcept {
  const std::uint64_t recv = k.recv.load(), drop = k.drop.load(), hold = k.hold.load(), invalid = k.invalid.load();
  st.recv += recv;
  st.drop += drop;
  st.hold += hold;
  st.invalid += invalid;
  st.seen += recv + drop + hold + invalid;
}

// The counters blocks a set references.
void counters_of(const FilterSet& s, std::vector<const FilterCounters*>& out) {
  for (const FilterFn& f : s.by_endpoint)
    if (f.counters) out.push_back(f.counters);
  for (const auto& port : s.by_queue)
    for (const FilterFn& f : port)
      if (f.counters) out.push_back(f.counters);
}
}  // namespace

void FilterStage::fold_locked(const FilterCounters& c) {
  auto it = std::find_if(removed_.begin(), removed_.end(),
                         [&](const FilterStats& r) { return r.name == c.name && same_point(r.at, c.at); });
  if (it == removed_.end()) {
    FilterStats st;
    st.name = c.name;
    st.at = c.at;
    removed_.push_back(std::move(st));
    it = removed_.end() - 1;
  }
  for (std::size_t l = 0; l < c.lcore_count; ++l) {
    const FilterLcoreCounters& k = c.per_lcore[l];
    add_verdicts(*it, k);
    it->latency.merge(k.latency.snapshot());
  }
}

void FilterStage::reclaim_locked() {
  if (!quiescence_) return;
  // Epochs grow with each retirement, so the sets that may go are a prefix.
  std::size_t done = 0;
  while (done < retired_.size() && quiescence_->passed(retired_[done].epoch)) ++done;
  for (std::size_t i = 0; i < done; ++i) {
    for (const FilterCounters* c : retired_[i].leaving) {
      fold_locked(*c);
      std::erase_if(counters_, [c](const auto& owned) { return owned.get() == c; });
    }
  }
  retired_.erase(retired_.begin(), retired_.begin() + static_cast<std::ptrdiff_t>(done));
}

void FilterStage::publish(std::unique_ptr<FilterSet> next) {
  next->any_endpoint = false;
  for (const FilterFn& f : next->by_endpoint) next->any_endpoint |= f.set();
  next->any_queue = false;
  for (const auto& port : next->by_queue)
    for (const FilterFn& f : port) next->any_queue |= f.set();
  next->any_offload_off = false;
  for (std::uint8_t off : next->offload_off) next->any_offload_off |= off != 0;
  next->active = next->any_endpoint || next->any_queue || next->any_offload_off;
  // Release pairs with the acquire in run(): lcores see the finished vectors.
  current_.store(next.get(), std::memory_order_release);
  Retired r;
  std::vector<const FilterCounters*> before, after;
  counters_of(*cur_, before);
  counters_of(*next, after);
  for (const FilterCounters* c : before)
    if (std::find(after.begin(), after.end(), c) == after.end()) r.leaving.push_back(c);
  r.set = std::move(cur_);
  r.epoch = quiescence_ ? quiescence_->retire_epoch() : 0;
  cur_ = std::move(next);
  retired_.push_back(std::move(r));
  reclaim_locked();
}

void FilterStage::bound_retired(std::unique_lock<std::mutex>& lock) {
  if (retired_.size() <= kMaxRetired || quiescence_ == nullptr || may_wait_ == nullptr || !may_wait_()) return;
  // Epochs grow with each retirement: once the lcores pass this one, every older set goes too.
  const std::uint64_t epoch = retired_[retired_.size() - kMaxRetired - 1].epoch;
  Classifier* const q = quiescence_;
  // Unlocked, so that stats() readers do not wait with us for an lcore that is off its CPU.
  lock.unlock();
  while (!q->passed(epoch)) std::this_thread::sleep_for(std::chrono::microseconds(50));
  lock.lock();
  reclaim_locked();
}

Status FilterStage::set_endpoint_filter(std::uint16_t endpoint, FilterFn f) {
  if (f.fn && f.burst) return Status::error("give a per-packet callback or a burst callback, not both");
  std::unique_lock lock(mu_);
  const FilterSet& cur = *cur_;
  if (endpoint >= cur.by_endpoint.size())
    return Status::errorf("endpoint id {} does not exist (there are {})", endpoint, cur.by_endpoint.size());
  auto next = std::make_unique<FilterSet>(cur);
  attach_counters(f, false, endpoint, 0);
  next->by_endpoint[endpoint] = f;
  publish(std::move(next));
  bound_retired(lock);
  return Status::ok();
}

Status FilterStage::set_queue_filter(std::uint16_t port, std::uint16_t queue, FilterFn f) {
  if (f.fn && f.burst) return Status::error("give a per-packet callback or a burst callback, not both");
  std::unique_lock lock(mu_);
  const FilterSet& cur = *cur_;
  if (port >= cur.by_queue.size()) return Status::errorf("port id {} does not exist (there are {})", port, cur.by_queue.size());
  if (queue >= cur.by_queue[port].size())
    return Status::errorf("port {} has {} rx queue(s); queue {} does not exist", port, cur.by_queue[port].size(), queue);
  auto next = std::make_unique<FilterSet>(cur);
  attach_counters(f, true, port, queue);
  next->by_queue[port][queue] = f;
  publish(std::move(next));
  bound_retired(lock);
  return Status::ok();
}

Status FilterStage::set_endpoint_offload(std::uint16_t endpoint, bool offloaded) {
  std::unique_lock lock(mu_);
  const FilterSet& cur = *cur_;
  if (endpoint >= cur.offload_off.size())
    return Status::errorf("endpoint id {} does not exist (there are {})", endpoint, cur.offload_off.size());
  if ((cur.offload_off[endpoint] == 0) == offloaded) return Status::ok();
  auto next = std::make_unique<FilterSet>(cur);
  next->offload_off[endpoint] = offloaded ? 0 : 1;
  publish(std::move(next));
  bound_retired(lock);
  return Status::ok();
}

bool FilterStage::endpoint_offloaded(std::uint16_t endpoint) const {
  std::lock_guard lock(mu_);
  const FilterSet& cur = *cur_;
  return endpoint >= cur.offload_off.size() || cur.offload_off[endpoint] == 0;
}

void FilterStage::attach_counters(FilterFn& f, bool on_queue, std::uint16_t a, std::uint16_t b) {
  f.counters = nullptr;
  if (!f.set()) return;
  std::string name;
  if (f.name) {
    name = f.name;
  } else {
    Dl_info info{};
    void* addr = f.fn ? reinterpret_cast<void*>(f.fn) : reinterpret_cast<void*>(f.burst);
    name = dladdr(addr, &info) && info.dli_sname ? info.dli_sname : fmt::format("{}", addr);
  }
  FilterAttachPoint at;
  at.on_queue = on_queue;
  if (on_queue) {
    at.port = a;
    at.queue = b;
  } else {
    at.endpoint = a;
  }
  counters_.push_back(std::make_unique<FilterCounters>(std::move(name), at, lcores_));
  f.counters = counters_.back().get();
}

std::vector<FilterStats> FilterStage::stats() const {
  std::lock_guard lock(mu_);
  const FilterSet& cur = *cur_;
  std::vector<FilterStats> out;
  for (const auto& c : counters_) {
    FilterStats st;
    st.name = c->name;
    st.at = c->at;
    const FilterFn& now = c->at.on_queue ? cur.by_queue[c->at.port][c->at.queue] : cur.by_endpoint[c->at.endpoint];
    st.attached = now.counters == c.get();
    for (std::size_t l = 0; l < c->lcore_count; ++l) {
      const FilterLcoreCounters& k = c->per_lcore[l];
      add_verdicts(st, k);
      st.latency.merge(k.latency.snapshot());
    }
    out.push_back(std::move(st));
  }
  for (const FilterStats& r : removed_) out.push_back(r);
  return out;
}

bool FilterStage::empty() const noexcept {
  const FilterSet* s = current_.load(std::memory_order_acquire);
  return !s->any_endpoint && !s->any_queue;
}

namespace {

// Verdicts of one callback in one burst, added to its counters once (single writer: the lcore).
struct VerdictTally {
  unsigned recv = 0, drop = 0, hold = 0, invalid = 0;
  void flush(FilterLcoreCounters& c) const noexcept {
    if (recv) c.recv.add(recv);
    if (drop) c.drop.add(drop);
    if (hold) c.hold.add(hold);
    if (invalid) c.invalid.add(invalid);
  }
};

FilterLcoreCounters& lcore_counters(const FilterFn& f, unsigned lcore) noexcept {
  return f.counters->per_lcore[lcore < f.counters->lcore_count ? lcore : 0];
}

// Applies a callback's value to one packet.
inline void apply(int v, Mbuf* m, Verdict& verdict, VerdictTally& t) noexcept {
  switch (v) {
    case RAWPIPE_RECV:
      ++t.recv;
      return;
    case RAWPIPE_DROP:
      ++t.drop;
      verdict = Verdict::kDrop;  // dispatch sets kFilterDrop
      return;
    case RAWPIPE_HOLD:
      ++t.hold;
      verdict = Verdict::kHold;
      audit_handout(&m, 1, AuditOwner::kHold, m->endpoint, AuditSite::kHoldVerdict);
      return;
    default:
      ++t.invalid;
      verdict = Verdict::kDrop;
      m->drop_reason = static_cast<std::uint8_t>(DropReason::kFilterInvalidVerdict);
      return;
  }
}

}  // namespace

void FilterStage::run_slow(const FilterSet& s, std::uint16_t port, std::uint16_t queue, Mbuf* const* pkts,
                           Verdict* verdicts, unsigned n, unsigned lcore, bool timed) noexcept {
  if (s.any_offload_off) {
    const std::size_t n_ep = s.offload_off.size();
    for (unsigned i = 0; i < n; ++i) {
      const std::uint16_t ep = pkts[i]->endpoint;
      if (verdicts[i] != Verdict::kRecv || ep >= n_ep || !s.offload_off[ep]) continue;
      verdicts[i] = Verdict::kDrop;
      pkts[i]->drop_reason = static_cast<std::uint8_t>(DropReason::kEndpointOffloadOff);
    }
  }
  rawpipe_packet desc[kMaxBurst];
  int vals[kMaxBurst];
  unsigned idx[kMaxBurst];

  if (s.any_queue && port < s.by_queue.size() && queue < s.by_queue[port].size()) {
    const FilterFn& f = s.by_queue[port][queue];
    if (f.set()) {
      unsigned k = 0;
      for (unsigned i = 0; i < n; ++i) {
        if (verdicts[i] != Verdict::kRecv) continue;
        describe_packet(pkts[i], &desc[k]);
        desc[k].user_ctx = f.ctx;
        idx[k++] = i;
      }
      VerdictTally tally;
      const std::uint64_t t0 = timed ? tsc_now() : 0;
      if (f.fn) {
        for (unsigned j = 0; j < k; ++j) apply(f.fn(&desc[j], f.ctx), pkts[idx[j]], verdicts[idx[j]], tally);
      } else if (k) {
        for (unsigned j = 0; j < k; ++j) vals[j] = RAWPIPE_RECV;
        f.burst(desc, vals, k, f.ctx);
        for (unsigned j = 0; j < k; ++j) apply(vals[j], pkts[idx[j]], verdicts[idx[j]], tally);
      }
      if (f.counters && k) {
        FilterLcoreCounters& fc = lcore_counters(f, lcore);
        if (timed) fc.latency.record((tsc_now() - t0) / k);
        tally.flush(fc);
      }
    }
  }
  if (!s.any_endpoint) return;

  // Per-packet endpoint filters in packet order; burst filters gathered per endpoint, each
  // endpoint's packets in order. `done` marks packets whose endpoint was already handled.
  bool done[kMaxBurst];
  for (unsigned i = 0; i < n; ++i) done[i] = false;
  const std::size_t n_ep = s.by_endpoint.size();
  for (unsigned i = 0; i < n; ++i) {
    if (done[i] || verdicts[i] != Verdict::kRecv) continue;
    const std::uint16_t ep = pkts[i]->endpoint;
    if (ep >= n_ep) continue;
    const FilterFn& f = s.by_endpoint[ep];
    if (!f.set()) continue;
    if (f.fn) {
      describe_packet(pkts[i], &desc[0]);
      desc[0].user_ctx = f.ctx;
      VerdictTally tally;
      const std::uint64_t t0 = timed ? tsc_now() : 0;
      apply(f.fn(&desc[0], f.ctx), pkts[i], verdicts[i], tally);
      if (f.counters) {
        FilterLcoreCounters& fc = lcore_counters(f, lcore);
        if (timed) fc.latency.record(tsc_now() - t0);
        tally.flush(fc);
      }
      continue;
    }
    unsigned k = 0;
    for (unsigned j = i; j < n; ++j) {
      if (done[j] || verdicts[j] != Verdict::kRecv || pkts[j]->endpoint != ep) continue;
      done[j] = true;
      describe_packet(pkts[j], &desc[k]);
      desc[k].user_ctx = f.ctx;
      vals[k] = RAWPIPE_RECV;
      idx[k++] = j;
    }
    VerdictTally tally;
    const std::uint64_t t0 = timed ? tsc_now() : 0;
    f.burst(desc, vals, k, f.ctx);
    for (unsigned j = 0; j < k; ++j) apply(vals[j], pkts[idx[j]], verdicts[idx[j]], tally);
    if (f.counters) {
      FilterLcoreCounters& fc = lcore_counters(f, lcore);
      if (timed) fc.latency.record((tsc_now() - t0) / k);
      tally.flush(fc);
    }
  }
}

}  // namespace rawpipe
