#include "tests/support/test_port.hh"

#include <arpa/inet.h>

#include <cstring>
#include <stdexcept>

#include "pipeline/classify/rule.hh"
#include "pipeline/wire/builder.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe::testing {

TestPort::TestPort(const PortEnv& env, TestPortConfig config)
    : env_(env), config_(std::move(config)), steering_(std::make_unique<SteeringRules>()) {
  for (std::uint16_t q = 0; q < env.rx_queues; ++q) {
    auto r = std::make_unique<RxQ>();
    r->port = this;
    r->id = q;
    if (q < config_.rx_frames.size()) r->frames = config_.rx_frames[q];
    rx_.push_back(std::move(r));
  }
  for (std::uint16_t q = 0; q < env.tx_queues; ++q) {
    auto t = std::make_unique<TxQ>();
    t->port = this;
    t->capacity = config_.tx_capacity;
    t->record = config_.record_tx;
    tx_.push_back(std::move(t));
  }
}

std::string TestPort::path_report() const {
  return fmt::format("port {}: test replay port, {} rx queue(s), {} tx queue(s)", env_.name, rx_.size(), tx_.size());
}

PortCaps TestPort::caps() const {
  PortCaps c;
  c.tx = true;
  c.flow_rules = config_.flow_rules;  // it records what it is asked to steer (steering())
  c.max_rx_queues = static_cast<std::uint16_t>(rx_.size());
  c.max_tx_queues = static_cast<std::uint16_t>(tx_.size());
  if (config_.max_queues) c.max_rx_queues = c.max_tx_queues = config_.max_queues;  // a device smaller than the plan
  return c;
}

Status TestPort::start() {
  started_ = true;
  return Status::ok();
}

void TestPort::stop() { started_ = false; }

RxQueueHandle TestPort::rx_queue(std::uint16_t queue) {
  if (queue >= rx_.size()) return {};
  return {&TestPort::rx_burst, rx_[queue].get()};
}

TxQueueHandle TestPort::tx_queue(std::uint16_t queue) {
  if (queue >= tx_.size()) return {};
  return {&TestPort::tx_burst, tx_[queue].get()};
}

Status TestPort::update_steering(const SteeringRules& rules) {
  *steering_ = rules;
  return Status::ok();
}

std::uint64_t TestPort::rx_total() const noexcept {
  std::uint64_t n = 0;
  for (const auto& q : rx_) n += q->frames.size() * config_.repeat;
  return n;
}

std::uint64_t TestPort::rx_done() const noexcept {
  std::uint64_t n = 0;
  for (const auto& q : rx_) n += q->handed.load(std::memory_order_relaxed);
  return n;
}

PortStats TestPort::stats() const {
  PortStats s;
  for (const auto& q : rx_) {
    QueueCounters c;
    c.rx_packets = q->handed.load(std::memory_order_relaxed);
    c.rx_bytes = q->bytes.load(std::memory_order_relaxed);
    c.rx_nombuf = q->nombuf.load(std::memory_order_relaxed);
    s.rx_queues.push_back(c);
  }
  for (const auto& q : tx_) {
    QueueCounters c;
    c.tx_packets = q->accepted.load(std::memory_order_relaxed);
    c.tx_bytes = q->bytes.load(std::memory_order_relaxed);
    c.tx_errors = q->refused.load(std::memory_order_relaxed);
    s.tx_queues.push_back(c);
  }
  return s;
}

std::uint16_t TestPort::rx_burst(void* qp, Mbuf** pkts, std::uint16_t n) noexcept {
  RxQ& q = *static_cast<RxQ*>(qp);
  const std::uint64_t repeat = q.port->config_.repeat;
  if (q.frames.empty() || (repeat != 0 && q.pass >= repeat)) return 0;
  // Never hand out more than remain in the last pass.
  if (repeat != 0) {
    std::uint64_t left = (repeat - q.pass) * q.frames.size() - q.next;
    if (left < n) n = static_cast<std::uint16_t>(left);
  }
  Pool* pool = q.port->env_.pool;
  unsigned got = n;
  while (got > 0 && !pool->alloc_bulk(pkts, got)) got /= 2;
  if (got < n) q.nombuf.store(q.nombuf.load(std::memory_order_relaxed) + (n - got), std::memory_order_relaxed);
  std::uint64_t bytes = 0;
  for (unsigned i = 0; i < got; ++i) {
    const Frame& f = q.frames[q.next];
    Mbuf* m = pkts[i];
    std::uint32_t len = static_cast<std::uint32_t>(std::min<std::size_t>(f.size(), pool->data_room()));
    std::memcpy(m->data(), f.data(), len);
    m->data_len = len;
    m->port = q.port->env_.port_id;
    m->queue = q.id;
    bytes += len;
    if (++q.next == q.frames.size()) {
      q.next = 0;
      ++q.pass;
    }
  }
  // Relaxed: statistics for the test thread, which reads them after join or as progress hints.
  q.handed.store(q.handed.load(std::memory_order_relaxed) + got, std::memory_order_relaxed);
  q.bytes.store(q.bytes.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  return static_cast<std::uint16_t>(got);
}

std::uint16_t TestPort::tx_burst(void* qp, Mbuf** pkts, std::uint16_t n) noexcept {
  TxQ& q = *static_cast<TxQ*>(qp);
  const std::uint64_t accepted = q.accepted.load(std::memory_order_relaxed);
  std::uint64_t room = q.capacity - accepted;
  unsigned take = room < n ? static_cast<unsigned>(room) : n;
  std::uint64_t bytes = 0;
  for (unsigned i = 0; i < take; ++i) {
    bytes += pkts[i]->data_len;
    if (q.record) q.frames.emplace_back(pkts[i]->data(), pkts[i]->data() + pkts[i]->data_len);
  }
  mbuf_free_bulk(pkts, take);
  q.accepted.store(accepted + take, std::memory_order_relaxed);
  q.refused.store(q.refused.load(std::memory_order_relaxed) + (n - take), std::memory_order_relaxed);
  q.bytes.store(q.bytes.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  return static_cast<std::uint16_t>(take);
}

namespace {

wire::FrameSpec ip_spec(std::string_view src, std::string_view dst, int vlan) {
  wire::FrameSpec f;
  f.eth.dst = {0x02, 0, 0, 0, 0, 0x02};
  f.eth.src = {0x02, 0, 0, 0, 0, 0x01};
  if (vlan >= 0) {
    f.eth.vlan_count = 1;
    f.eth.vlans[0].tci = static_cast<std::uint16_t>(vlan);
  }
  const bool v6 = src.find(':') != std::string_view::npos;
  f.ip_version = v6 ? 6 : 4;
  std::string s(src), d(dst);
  int ok = v6 ? inet_pton(AF_INET6, s.c_str(), f.ipv6.src.data()) + inet_pton(AF_INET6, d.c_str(), f.ipv6.dst.data())
              : inet_pton(AF_INET, s.c_str(), f.ipv4.src.data()) + inet_pton(AF_INET, d.c_str(), f.ipv4.dst.data());
  if (ok != 2) throw std::invalid_argument("test frame: bad address " + s + " or " + d);
  f.min_frame_len = wire::kEthMinFrame;
  return f;
}

Frame write(const wire::FrameSpec& f) {
  Frame out(2048);
  std::size_t len = wire::write_frame(f, out.data(), out.size());
  if (len == 0) throw std::invalid_argument("test frame: builder rejected the spec");
  out.resize(len);
  return out;
}

}  // namespace

Frame udp_frame(std::string_view src, std::uint16_t sport, std::string_view dst, std::uint16_t dport, int vlan,
                std::uint16_t payload_len) {
  wire::FrameSpec f = ip_spec(src, dst, vlan);
  f.l4 = wire::L4Kind::kUdp;
  f.udp.src_port = sport;
  f.udp.dst_port = dport;
  f.payload_len = payload_len;
  return write(f);
}

Frame icmp_frame(std::string_view src, std::string_view dst) {
  wire::FrameSpec f = ip_spec(src, dst, -1);
  f.l4 = wire::L4Kind::kIcmp;
  f.icmp.type = f.ip_version == 4 ? 8 : 128;
  f.payload_len = 16;
  return write(f);
}

Mbuf* load_frame(Pool& pool, const Frame& frame, std::uint16_t port) {
  Mbuf* m = pool.alloc();
  if (!m) return nullptr;
  std::memcpy(m->data(), frame.data(), frame.size());
  m->data_len = static_cast<std::uint32_t>(frame.size());
  m->port = port;
  return m;
}

Result<std::unique_ptr<Port>> TestPortSpec::open(const PortEnv& env) const {
  if (!env.pool) return Status::error("test port needs a pool");
  return std::unique_ptr<Port>(new TestPort(env, config_));
}

}  // namespace rawpipe::testing
