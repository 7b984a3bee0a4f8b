// libFuzzer target for the pcap port's receive side.
//
// Each input is a whole capture file (pcap or pcapng, well-formed or not). It is written to a
// temporary file and replayed once through the pcap PMD, as the pipeline would: open, start,
// rx bursts until the port reports rx_finished, stop. The port must either refuse the file with
// a message or replay it; every frame handed out must lie inside its buffer, the port's rx count
// must equal the frames received, and every buffer must be back in the pool after stop().
//
// Seeds: tests/fuzz/corpus/pcap/ (small pcap and pcapng captures, a truncated one, junk).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "pipeline/buf/pool.hh"
#include "pipeline/config/section.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/port/driver.hh"

namespace {

using namespace rawpipe;

// Names the failed check on stderr before aborting, so a crash input explains itself.
#define must(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

Pool* pool() {
  static Pool* p = [] {
    PoolConfig c;
    c.name = "pcap_fuzz";
    c.count = 256;
    c.buf_size = 2048;
    c.cache_size = 0;
    c.huge_pages = HugePages::kNever;
    auto r = Pool::create(c);
    if (!r) std::abort();
    return std::move(r).value().release();
  }();
  return p;
}

const std::string& temp_file() {
  static const std::string f = fmt::format("/tmp/rawpipe-pcap-fuzz-{}.pcap", getpid());
  // A bounded run (-runs=N) ends in exit(), which takes the file along; a crash leaves it. Registered
  // once f is built, so that the handler runs before f's destructor.
  [[maybe_unused]] static const bool removed_at_exit = std::atexit([] { std::remove(temp_file().c_str()); }) == 0;
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 1 << 20) return -1;
  const std::string& file = temp_file();
  {
    std::FILE* f = std::fopen(file.c_str(), "wb");
    if (!f) std::abort();
    if (size) must(std::fwrite(data, 1, size, f) == size);
    std::fclose(f);
  }
  auto sec = ConfigSection::parse_string(fmt::format("rx_file = '{}'\n", file), "fuzz.toml");
  must(static_cast<bool>(sec));
  const PmdDriver* d = find_pmd("pcap");
  must(d != nullptr);
  auto spec = d->parse(sec.value());
  must(static_cast<bool>(spec));
  must(static_cast<bool>(sec->finish()));
  Pool* p = pool();
  PortEnv env;
  env.name = "p0";
  env.port_id = 1;
  env.pool = p;
  auto port = spec.value()->open(env);
  if (!port) {
    must(!port.message().empty());
    must(p->available() == p->count());
    return 0;
  }
  Status st = port.value()->start();
  if (!st) {
    must(!st.message().empty());
    (void)port.value()->stop();
    must(p->available() == p->count());
    return 0;
  }
  RxQueueHandle rx = port.value()->rx_queue(0);
  std::uint64_t received = 0;
  bool finished = false;
  // A file of `size` bytes holds at most size / 16 records (pcap's smallest record header).
  const std::size_t max_bursts = size / 16 + 64;
  for (std::size_t b = 0; b < max_bursts && !finished; ++b) {
    Mbuf* pkts[32];
    const unsigned n = rx(pkts, 32);
    for (unsigned i = 0; i < n; ++i) {
      Mbuf* m = pkts[i];
      must(m->port == 1);
      must(std::size_t(m->data_off) + m->data_len <= m->buf_len);
      // Touch every byte: ASan (and the pool's bounds) catch a length beyond the copy.
      volatile std::uint8_t sink = 0;
      for (std::uint32_t j = 0; j < m->data_len; ++j) sink = sink ^ m->data()[j];
      (void)sink;
    }
    received += n;
    mbuf_free_bulk(pkts, n);
    if (n == 0) finished = port.value()->stats().extended.at("rx_finished") != 0;
  }
  must(finished);  // one pass over a finite file ends
  PortStats s = port.value()->stats();
  must(s.rx_queues.at(0).rx_packets == received);
  (void)port.value()->stop();
  port.value().reset();
  must(p->available() == p->count());
  return 0;
}
