// synth control path: config keys, open/start/stop, statistics.
#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <limits>

#include "pipeline/config/hex.hh"
#include "pipeline/config/section.hh"
#include "pmd/drivers.hh"
#include "pmd/synth/synth.hh"

namespace rawpipe {
namespace synth {
namespace {

constexpr std::uint64_t kMaxFlows = 1u << 20;
constexpr std::int64_t kMaxFrame = 9216;
constexpr std::uint32_t kMaxImixWeight = 4096;
constexpr std::uint16_t kMaxQueues = 64;
constexpr std::size_t kMaxPayloadPrefix = 256;

std::size_t header_bytes(const Spec& s, bool ipv6, bool fragment) {
  std::size_t n = 14 + 4 * s.vlans.size() + (ipv6 ? 40 : 20);
  if (fragment) return n + (ipv6 ? 8 : 0);
  return n + (s.l4_proto == wire::kIpProtoUdp ? 8 : 20);
}

void read_mac(ConfigSection& s, std::string_view key, std::string_view fallback, wire::MacAddr& out) {
  std::string text = s.string(key, fallback);
  unsigned b[6];
  char tail;
  if (std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6) {
    s.fail(key, fmt::format("expected a MAC address like \"02:00:00:00:00:01\", got \"{}\"", text));
    return;
  }
  for (int i = 0; i < 6; ++i) out[i] = static_cast<std::uint8_t>(b[i]);
}

template <std::size_t N>
void read_ip(ConfigSection& s, std::string_view key, std::string_view fallback, std::array<std::uint8_t, N>& out) {
  std::string text = s.string(key, fallback);
  if (inet_pton(N == 4 ? AF_INET : AF_INET6, text.c_str(), out.data()) != 1)
    s.fail(key, fmt::format("expected an {} address, got \"{}\"", N == 4 ? "IPv4" : "IPv6", text));
}

// A base value and a count that must stay inside 16 bits.
void read_port_range(ConfigSection& s, std::string_view base_key, std::string_view count_key, std::int64_t fallback,
                     std::uint16_t& base, std::uint32_t& count) {
  base = static_cast<std::uint16_t>(s.integer(base_key, 0, 65535, fallback));
  count = static_cast<std::uint32_t>(s.integer(count_key, 1, 65536, 1));
  if (std::uint32_t(base) + count - 1 > 65535)
    s.fail(count_key, fmt::format("{} ports from {} run past 65535", count, base));
}

Result<Spec> parse_spec(ConfigSection& s) {
  Spec spec;
  spec.rate_pps = s.number("rate_pps", 0, 1e10, 0);
  spec.packets = static_cast<std::uint64_t>(s.integer("packets", 0, std::numeric_limits<std::int64_t>::max(), 0));

  if (s.has("frame_size") && s.has("imix")) {
    (void)s.integer("frame_size", 60, kMaxFrame);  // read, so this is the one error reported
    s.fail("imix", "set either frame_size (one size) or imix (weighted sizes), not both");
  }
  if (s.has("imix")) {
    auto entries = s.integer_tuples("imix", 2, 0, kMaxFrame);
    if (entries.empty() && s.status()) s.fail("imix", "expected at least one [size, weight] pair");
    std::uint64_t total = 0;
    for (const auto& e : entries) {
      if (e[0] < 60 || e[1] < 1) {
        s.fail("imix", fmt::format("[{}, {}]: sizes are 60 to {} bytes and weights at least 1", e[0], e[1], kMaxFrame));
        break;
      }
      spec.sizes.push_back(static_cast<std::uint16_t>(e[0]));
      spec.weights.push_back(static_cast<std::uint32_t>(e[1]));
      total += static_cast<std::uint64_t>(e[1]);
    }
    if (total > kMaxImixWeight)
      s.fail("imix", fmt::format("the weights add up to {}; keep them at most {} (they are a ratio)", total,
                                 kMaxImixWeight));
    if (spec.sizes.size() > 255) s.fail("imix", "at most 255 sizes");
  } else {
    spec.sizes.push_back(static_cast<std::uint16_t>(s.integer("frame_size", 60, kMaxFrame, 64)));
    spec.weights.push_back(1);
  }

  read_mac(s, "src_mac", "02:00:00:00:00:01", spec.src_mac);
  read_mac(s, "dst_mac", "02:00:00:00:00:02", spec.dst_mac);
  read_ip(s, "ipv4_src", "10.0.0.1", spec.ipv4_src);
  read_ip(s, "ipv4_dst", "198.18.0.1", spec.ipv4_dst);
  read_ip(s, "ipv6_src", "fd00::1", spec.ipv6_src);
  read_ip(s, "ipv6_dst", "fd00:1::1", spec.ipv6_dst);
  spec.src_addrs = static_cast<std::uint32_t>(s.integer("src_addrs", 1, kMaxFlows, 1));
  spec.dst_addrs = static_cast<std::uint32_t>(s.integer("dst_addrs", 1, kMaxFlows, 1));
  read_port_range(s, "src_port", "src_ports", 1024, spec.src_port, spec.src_ports);
  read_port_range(s, "dst_port", "dst_ports", 5000, spec.dst_port, spec.dst_ports);
  if (s.status() && spec.flow_count() > kMaxFlows)
    s.fail("", fmt::format("src_addrs x dst_addrs x src_ports x dst_ports = {} flows; at most {} are supported",
                           spec.flow_count(), kMaxFlows));
  spec.ipv6_fraction = s.number("ipv6_fraction", 0, 1, 0);
  std::string proto = s.choice("protocol", {"udp", "tcp"}, "udp");
  spec.l4_proto = proto == "tcp" ? wire::kIpProtoTcp : wire::kIpProtoUdp;

  for (std::int64_t vid : s.integer_list("vlans", 0, 4095)) spec.vlans.push_back(static_cast<std::uint16_t>(vid));
  if (spec.vlans.size() > 2) s.fail("vlans", fmt::format("at most 2 VLAN ids (outer, inner), got {}", spec.vlans.size()));

  spec.malformed_fraction = s.number("malformed_fraction", 0, 1, 0);
  if (s.has("malformed_kinds")) {
    for (const auto& name : s.string_list("malformed_kinds")) {
      Malformed kind = Malformed::kNone;
      for (std::size_t i = 1; i < kMalformedNames.size(); ++i)
        if (kMalformedNames[i] == name) kind = static_cast<Malformed>(i);
      if (kind == Malformed::kNone) {
        s.fail("malformed_kinds", fmt::format("unknown kind \"{}\"; expected some of \"truncated\", \"bad_ihl\", "
                                              "\"bad_length\", \"bad_udp_length\", \"fragment\"",
                                              name));
        continue;
      }
      if (kind == Malformed::kBadUdpLength && spec.l4_proto != wire::kIpProtoUdp)
        s.fail("malformed_kinds", "\"bad_udp_length\" needs protocol = \"udp\"");
      spec.malformed_kinds.push_back(kind);
    }
    if (spec.malformed_kinds.empty() && s.status()) s.fail("malformed_kinds", "expected at least one kind");
  } else {
    spec.malformed_kinds = {Malformed::kTruncated, Malformed::kBadIhl, Malformed::kBadLength, Malformed::kFragment};
    if (spec.l4_proto == wire::kIpProtoUdp) spec.malformed_kinds.insert(spec.malformed_kinds.begin() + 3, Malformed::kBadUdpLength);
  }
  if (spec.malformed_fraction == 0) spec.malformed_kinds.clear();
  spec.seed = static_cast<std::uint64_t>(s.integer("seed", 0, std::numeric_limits<std::int64_t>::max(), 1));
  const std::string prefix = s.string("payload_prefix", "");
  if (!hex_bytes(prefix, spec.payload_prefix) || spec.payload_prefix.size() > kMaxPayloadPrefix)
    s.fail("payload_prefix", fmt::format("expected at most {} bytes as pairs of hex digits (\"0001ff\"), got \"{}\"",
                                         kMaxPayloadPrefix, prefix));

  // Every size must hold the headers of every frame shape it will be used for.
  if (s.status()) {
    const bool v4 = spec.ipv6_fraction < 1, v6 = spec.ipv6_fraction > 0;
    bool fragments = false;
    for (auto k : spec.malformed_kinds) fragments |= k == Malformed::kFragment;
    std::size_t need = 0, whole = 0;  // whole: the headers of a well-formed frame
    for (bool ipv6 : {false, true}) {
      if ((ipv6 && !v6) || (!ipv6 && !v4)) continue;
      whole = std::max(whole, header_bytes(spec, ipv6, false));
      need = std::max(need, whole);
      if (fragments) need = std::max(need, header_bytes(spec, ipv6, true));
    }
    for (auto size : spec.sizes) {
      if (size < need) {
        s.fail(s.has("imix") ? "imix" : "frame_size",
               fmt::format("{}-byte frames cannot hold the {} bytes of headers this port generates ({}{}{})", size,
                           need, v6 ? "IPv6" : "IPv4", spec.vlans.empty() ? "" : fmt::format(", {} VLAN tag{}",
                                                                                              spec.vlans.size(),
                                                                                              spec.vlans.size() == 1 ? "" : "s"),
                           spec.l4_proto == wire::kIpProtoUdp ? ", UDP" : ", TCP"));
        break;
      }
      // Malformed frames keep what fits of the prefix; a well-formed one carries all of it.
      if (size - whole < spec.payload_prefix.size()) {
        s.fail("payload_prefix", fmt::format("{} bytes do not fit the {}-byte payload of the {}-byte frames",
                                             spec.payload_prefix.size(), size - whole, size));
        break;
      }
    }
  }
  if (!s.status()) return s.status();
  return spec;
}

class SynthPort final : public Port {
 public:
  SynthPort(const Spec& spec, const PortEnv& env) : spec_(spec), env_(env) {}

  Status init() {
    if (env_.rx_queues > spec_.flow_count())
      return Status::errorf("synth port '{}': {} rx queues but only {} flows; each queue needs at least one flow "
                            "(raise src_ports or dst_ports)",
                            env_.name, env_.rx_queues, spec_.flow_count());
    rx_.reset(new RxQueue[env_.rx_queues]);
    tx_.reset(new TxQueue[std::max<std::uint16_t>(env_.tx_queues, 1)]);
    return Status::ok();
  }

  std::string_view pmd_name() const noexcept override { return "synth"; }

  std::string path_report() const override {
    std::string sizes;
    for (std::size_t i = 0; i < spec_.sizes.size(); ++i)
      sizes += fmt::format("{}{}{}", i ? "/" : "", spec_.sizes[i],
                           spec_.sizes.size() > 1 ? fmt::format("x{}", spec_.weights[i]) : std::string());
    std::string out;
    for (std::uint16_t q = 0; q < env_.rx_queues; ++q) {
      out += fmt::format("port {} rx queue {}: synth generator, {} flow{}, {}-byte frames, {:.0f}% IPv6, {} VLAN tag{}, "
                         "{}, {}\n",
                         env_.name, q, queue_flows(q), queue_flows(q) == 1 ? "" : "s", sizes,
                         spec_.ipv6_fraction * 100, spec_.vlans.size(), spec_.vlans.size() == 1 ? "" : "s",
                         spec_.rate_pps > 0 ? fmt::format("{:.0f} pps", spec_.rate_pps / env_.rx_queues)
                                            : std::string("full speed"),
                         spec_.packets ? fmt::format("stops after {} packets", queue_packets(q))
                                       : std::string("unlimited"));
    }
    if (spec_.malformed_fraction > 0) {
      std::string kinds;
      for (auto k : spec_.malformed_kinds) kinds += fmt::format("{}{}", kinds.empty() ? "" : ", ", kMalformedNames[static_cast<std::size_t>(k)]);
      out += fmt::format("port {}: {:.4g}% malformed frames ({})\n", env_.name, spec_.malformed_fraction * 100, kinds);
    }
    for (std::uint16_t q = 0; q < env_.tx_queues; ++q)
      out += fmt::format("port {} tx queue {}: synth sink (counts and frees)\n", env_.name, q);
    return out;
  }

  PortCaps caps() const override {
    PortCaps c;
    c.rss = true;
    c.max_rx_queues = static_cast<std::uint16_t>(std::min<std::uint64_t>(kMaxQueues, spec_.flow_count()));
    c.max_tx_queues = kMaxQueues;
    return c;
  }

  LinkInfo link() const override {
    LinkInfo l;
    l.mac = spec_.dst_mac;
    return l;
  }

  Status start() override {
    if (!frames_) {
      auto built = build_frames(spec_, env_.pool->data_room(), prebuild_budget(env_.rx_queues));
      if (!built) return built.status().context(fmt::format("synth port '{}'", env_.name));
      frames_ = std::move(built).value();
      std::vector<std::uint32_t> order = shuffled_flow_order(spec_);
      queue_flows_.assign(env_.rx_queues, {});
      for (std::size_t j = 0; j < order.size(); ++j) queue_flows_[j % env_.rx_queues].push_back(order[j]);
      sizes_ = imix_sequence(spec_);
    }
    // Each start begins the sequence again, so a stopped and restarted port repeats its frames.
    const auto step = static_cast<std::uint64_t>(spec_.malformed_fraction * 4294967296.0 + 0.5);
    const auto now = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
    for (std::uint16_t qi = 0; qi < env_.rx_queues; ++qi) {
      RxQueue& q = rx_[qi];
      q.frames = frames_.get();
      q.flow_frames = frames_->flow_frames;
      q.meta = frames_->meta.data();
      q.flow_stride = frames_->flow_stride;
      q.flow_len = frames_->flow_len;
      q.block_copy = frames_->block_copy;
      q.pool = env_.pool;
      q.port = env_.port_id;
      q.queue = qi;
      q.flow_order = queue_flows_[qi].data();
      q.flow_count = static_cast<std::uint32_t>(queue_flows_[qi].size());
      q.flow_pos = 0;
      q.size_seq = sizes_.data();
      q.size_count = static_cast<std::uint32_t>(sizes_.size());
      q.size_pos = 0;
      q.malformed_step = spec_.malformed_kinds.empty() ? 0 : step;
      q.malformed_acc = 0;
      q.kinds = spec_.malformed_kinds.data();
      q.kind_count = static_cast<std::uint32_t>(spec_.malformed_kinds.size());
      q.kind_pos = 0;
      q.remaining = spec_.packets ? queue_packets(qi) : std::numeric_limits<std::uint64_t>::max();
      if (spec_.rate_pps > 0) {
        const double per_queue = spec_.rate_pps / env_.rx_queues;
        q.rate_per_ns = per_queue / 1e9;
        // A millisecond of packets (at least one burst) may accumulate while the lcore is busy elsewhere.
        q.bucket_depth = std::max(per_queue / 1000.0, double(kDefaultBurst));
        q.tokens = 0;
        q.last_ns = now;
      }
    }
    return Status::ok();
  }

  void stop() override {}  // generated frames live in the caller's buffers; the port holds none

  RxQueueHandle rx_queue(std::uint16_t queue) override {
    // Called after start() (the engine starts ports before resolving queues), when the mode is known.
    const bool flows = frames_ && frames_->flow_frames;
    if (spec_.rate_pps > 0) return {flows ? &rx_burst_rate_flows : &rx_burst_rate, &rx_[queue]};
    return {flows ? &rx_burst_full_flows : &rx_burst_full, &rx_[queue]};
  }
  TxQueueHandle tx_queue(std::uint16_t queue) override { return {&tx_burst, &tx_[queue]}; }

  PortStats stats() const override {
    PortStats st;
    std::array<std::uint64_t, static_cast<std::size_t>(Malformed::kCount)> malformed{};
    std::uint64_t v6 = 0;
    for (std::uint16_t q = 0; q < env_.rx_queues; ++q) {
      st.rx_queues.push_back(load_counters(rx_[q].counters));
      for (std::size_t k = 0; k < malformed.size(); ++k) malformed[k] += count_load(rx_[q].malformed[k]);
      v6 += count_load(rx_[q].ipv6_packets);
    }
    for (std::uint16_t q = 0; q < env_.tx_queues; ++q) st.tx_queues.push_back(load_counters(tx_[q].counters));
    for (std::size_t k = 1; k < malformed.size(); ++k)
      st.extended[fmt::format("malformed_{}", kMalformedNames[k])] = malformed[k];
    st.extended["ipv6_packets"] = v6;
    st.extended["flows"] = spec_.flow_count();
    return st;
  }

 private:
  // Flows are dealt to the queues in turn, so queue q gets this many (known before start()).
  std::uint64_t queue_flows(std::uint16_t q) const {
    return spec_.flow_count() / env_.rx_queues + (q < spec_.flow_count() % env_.rx_queues ? 1 : 0);
  }

  std::uint64_t queue_packets(std::uint16_t q) const {
    return spec_.packets / env_.rx_queues + (q < spec_.packets % env_.rx_queues ? 1 : 0);
  }

  const Spec spec_;
  const PortEnv env_;
  std::unique_ptr<SynthFrames> frames_;
  std::vector<std::vector<std::uint32_t>> queue_flows_;
  std::vector<std::uint8_t> sizes_;
  std::unique_ptr<RxQueue[]> rx_;
  std::unique_ptr<TxQueue[]> tx_;
};

class SynthSpec final : public PortSpec {
 public:
  explicit SynthSpec(Spec spec) : spec_(std::move(spec)) {}

  Result<std::unique_ptr<Port>> open(const PortEnv& env) const override {
    if (!env.pool) return Status::errorf("synth port '{}': no pool for receive buffers", env.name);
    auto port = std::make_unique<SynthPort>(spec_, env);
    RAWPIPE_TRY(port->init());
    return std::unique_ptr<Port>(std::move(port));
  }

  std::uint16_t max_rx_queues() const override {
    return static_cast<std::uint16_t>(std::min<std::uint64_t>(kMaxQueues, spec_.flow_count()));
  }

  const Spec& spec() const noexcept { return spec_; }

 private:
  Spec spec_;
};

Result<std::unique_ptr<PortSpec>> parse(ConfigSection& section) {
  auto spec = parse_spec(section);
  if (!spec) return spec.status();
  return std::unique_ptr<PortSpec>(new SynthSpec(std::move(spec).value()));
}

}  // namespace
}  // namespace synth

namespace {
const KeyDoc kSynthDocs[] = {
    {"rate_pps", "number", "0 to 1e10", "0", "packets per second for the whole port; 0: as fast as the lcore polls"},
    {"packets", "integer", "0 and more", "0", "stop after this many packets (split over the rx queues); 0: never"},
    {"frame_size", "integer", "60 to 9216", "64", "frame size without the FCS (or imix, not both)"},
    {"imix", "array of [size, weight]", "sizes 60 to 9216, weights >= 1, at most 255 sizes", "one size",
     "weighted frame sizes, e.g. [[64, 7], [576, 4], [1500, 1]]"},
    {"src_mac", "string", "a MAC address", "\"02:00:00:00:00:01\"", "source Ethernet address"},
    {"dst_mac", "string", "a MAC address", "\"02:00:00:00:00:02\"", "destination Ethernet address"},
    {"ipv4_src", "string", "an IPv4 address", "\"10.0.0.1\"", "first IPv4 source address"},
    {"ipv4_dst", "string", "an IPv4 address", "\"198.18.0.1\"", "first IPv4 destination address"},
    {"ipv6_src", "string", "an IPv6 address", "\"fd00::1\"", "first IPv6 source address"},
    {"ipv6_dst", "string", "an IPv6 address", "\"fd00:1::1\"", "first IPv6 destination address"},
    {"src_addrs", "integer", "1 to 1048576", "1", "consecutive source addresses"},
    {"dst_addrs", "integer", "1 to 1048576", "1", "consecutive destination addresses"},
    {"src_port", "integer", "0 to 65535", "1024", "first source port"},
    {"src_ports", "integer", "1 to 65536", "1", "consecutive source ports (flows: addrs x ports, at most 1048576)"},
    {"dst_port", "integer", "0 to 65535", "5000", "first destination port"},
    {"dst_ports", "integer", "1 to 65536", "1", "consecutive destination ports"},
    {"ipv6_fraction", "number", "0 to 1", "0", "share of the flows that are IPv6"},
    {"protocol", "string", "\"udp\", \"tcp\"", "\"udp\"", "layer 4 protocol"},
    {"vlans", "integer list", "at most 2 ids, 0 to 4095", "[]", "VLAN tags: one 802.1Q, or 802.1ad outer + inner"},
    {"malformed_fraction", "number", "0 to 1", "0", "share of frames that are malformed, spread evenly"},
    {"malformed_kinds", "string list",
     "\"truncated\", \"bad_ihl\", \"bad_length\", \"bad_udp_length\", \"fragment\"", "all (UDP)",
     "the kinds of malformed frames, taking turns"},
    {"seed", "integer", "0 and more", "1", "order of flows and IMIX sizes; the same seed gives the same frames; 0: natural order"},
    {"payload_prefix", "string", "pairs of hex digits, at most 256 bytes", "\"\"",
     "bytes every L4 payload starts with (a header the receiver checks); after them byte i of the frame is i"},
};
}  // namespace
const KeyTable kSynthKeys{"synth", "[[ports]] pmd = \"synth\"", "synthetic generator", kSynthDocs};

const PmdDriver kSynthDriver{
    .name = "synth",
    .summary = "synthetic generator: flows, IPv4/IPv6 mix, VLAN tags, fixed sizes or IMIX, malformed frames, rate "
               "and count limits; transmit counts and frees",
    .parse = &synth::parse,
    .keys = &kSynthKeys,
};

}  // namespace rawpipe
