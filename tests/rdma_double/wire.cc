// The double's wire: the frames its NIC receives, and MANA's device thread.
#include <charconv>
#include <thread>

#include "pipeline/wire/builder.hh"
#include "tests/rdma_double/core.hh"

namespace rpdouble {
namespace {

// ---- the wire: frames the double's NIC receives ---------------------------------------------

bool parse_endpoint(const std::string& text, rawpipe::wire::Ipv4Addr& addr, std::uint16_t& port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  in_addr a{};
  if (inet_pton(AF_INET, text.substr(0, colon).c_str(), &a) != 1) return false;
  std::memcpy(addr.data(), &a, 4);
  unsigned p = 0;
  auto [end, ec] = std::from_chars(text.data() + colon + 1, text.data() + text.size(), p);
  port = static_cast<std::uint16_t>(p);
  return ec == std::errc() && end == text.data() + text.size() && p <= 65535;
}

}  // namespace

WireFrames wire_frames() {
  WireFrames w;
  w.total = std::strtoull(env_or("RAWPIPE_RDMA_DOUBLE_FRAMES", "0"), nullptr, 10);
  if (w.total == 0) return w;
  rawpipe::wire::Ipv4Addr dst{}, src{};
  std::uint16_t dport = 0, sport = 0;
  if (!parse_endpoint(env_or("RAWPIPE_RDMA_DOUBLE_DST", "10.0.0.2:5000"), dst, dport) ||
      !parse_endpoint(env_or("RAWPIPE_RDMA_DOUBLE_SRC", "10.0.0.1:1024"), src, sport)) {
    trace_line("UNSUPPORTED RAWPIPE_RDMA_DOUBLE_DST/SRC: expected IPV4:PORT");
    w.total = 0;
    return w;
  }
  unsigned mac[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::sscanf(env_or("RAWPIPE_RDMA_DOUBLE_MAC", "02:00:00:00:00:02"), "%x:%x:%x:%x:%x:%x", &mac[0], &mac[1], &mac[2],
              &mac[3], &mac[4], &mac[5]);
  const std::uint64_t flows = std::max<std::uint64_t>(1, std::strtoull(env_or("RAWPIPE_RDMA_DOUBLE_FLOWS", "1"), nullptr, 10));
  const std::uint16_t size = static_cast<std::uint16_t>(std::strtoul(env_or("RAWPIPE_RDMA_DOUBLE_SIZE", "64"), nullptr, 10));
  for (std::uint64_t i = 0; i < std::min(flows, w.total); ++i) {
    rawpipe::wire::FrameSpec s;
    for (int b = 0; b < 6; ++b) s.eth.dst[b] = static_cast<std::uint8_t>(mac[b]);
    s.eth.src = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
    s.ip_version = 4;
    s.ipv4.src = src;
    s.ipv4.dst = dst;
    s.udp = {static_cast<std::uint16_t>(sport + i), dport};
    s.payload_len = size > 42 ? static_cast<std::uint16_t>(size - 42) : 0;
    s.min_frame_len = 60;
    std::vector<std::uint8_t> f(9216);
    f.resize(rawpipe::wire::write_frame(s, f.data(), f.size()));
    w.distinct.push_back(std::move(f));
  }
  return w;
}

// MANA has no wire thread in its model: the double plays it. It forwards each queue's doorbell
// (the last value the driver wrote to the queue's page: doorbell values carry the tail, so a
// later one covers an earlier one) and delivers frames to the queue RSS picks, waiting for posted
// receive WQEs rather than dropping.
namespace {
void mana_wire_loop(Context* c, WireFrames frames, std::vector<Qp*> sqs, std::vector<Wq*> rqs) {
  rawpipe::mana::ManaModel& m = *c->mana;
  std::vector<std::uint64_t> last_sq(sqs.size()), last_rq(rqs.size());
  std::uint64_t next = 0;
  while (!c->mana_wire_stop.load(std::memory_order_acquire)) {
    bool busy = false;
    for (std::size_t i = 0; i < rqs.size(); ++i) {
      const std::uint64_t v = std::atomic_ref<std::uint64_t>(rqs[i]->db_page[rawpipe::mana::kDoorbellRq / 8]).load(std::memory_order_acquire);
      if (v != last_rq[i]) {
        last_rq[i] = v;
        m.on_doorbell(rawpipe::mana::kDoorbellRq, v);
        busy = true;
      }
    }
    for (std::size_t i = 0; i < sqs.size(); ++i) {
      const std::uint64_t v = std::atomic_ref<std::uint64_t>(sqs[i]->db_page[rawpipe::mana::kDoorbellSq / 8]).load(std::memory_order_acquire);
      if (v != last_sq[i]) {
        last_sq[i] = v;
        m.on_doorbell(rawpipe::mana::kDoorbellSq, v);
        busy = true;
      }
    }
    for (int n = 0; n < 32 && next < frames.total; ++n) {
      const auto& f = frames.distinct[next % frames.distinct.size()];
      const auto r = rawpipe::mana::rss_of(c->mana_key.data(), f.data(), static_cast<std::uint32_t>(f.size()), true);
      const std::uint32_t rq = c->mana_table[r.hash % c->mana_table.size()];
      if (m.rq_available(rq) == 0) break;  // the wire waits for the driver to post
      m.receive_one(rq, f.data(), static_cast<std::uint32_t>(f.size()));
      ++next;
      busy = true;
    }
    if (!busy) std::this_thread::yield();
  }
}

}  // namespace

void start_mana_wire(Context* c, std::vector<Qp*> sqs, std::vector<Wq*> rqs) {
  c->mana_wire_stop.store(false, std::memory_order_relaxed);
  c->mana_wire = std::thread(mana_wire_loop, c, wire_frames(), std::move(sqs), std::move(rqs));
}

void stop_wire(Context* c) {
  if (c->mlx5 && c->wire_started) {
    c->mlx5->stop_thread();
    c->wire_started = false;
  }
  if (c->mana_wire.joinable()) {
    c->mana_wire_stop.store(true, std::memory_order_release);
    c->mana_wire.join();
  }
}

}  // namespace rpdouble
