// Frame templates and flow records for the synth driver (control path, run once by start()).
#include <unistd.h>

#include <algorithm>
#include <numeric>

#include "pipeline/wire/builder.hh"
#include "pipeline/wire/checksum.hh"
#include "pmd/synth/synth.hh"

namespace rawpipe::synth {
namespace {

using namespace rawpipe::wire;

// splitmix64: a small, well-mixed generator; its whole state is the seed, so runs repeat exactly.
std::uint64_t next_random(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
void shuffle(std::vector<T>& v, std::uint64_t seed) {
  if (seed == 0) return;  // seed 0: natural order
  std::uint64_t state = seed;
  for (std::size_t i = v.size(); i > 1; --i) {
    std::size_t j = static_cast<std::size_t>(next_random(state) % i);
    std::swap(v[i - 1], v[j]);
  }
}

std::uint32_t mix32(std::uint32_t x) noexcept {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Folds a one's complement sum to 16 bits without complementing it.
std::uint32_t fold16(std::uint64_t sum) noexcept {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint32_t>(sum);
}

bool is_ipv6_flow(std::uint64_t i, std::uint64_t flows, std::uint64_t v6_flows) noexcept {
  // Spreads v6_flows IPv6 flows evenly over the flow indices; exactly v6_flows of them.
  return (i * v6_flows) / flows != ((i + 1) * v6_flows) / flows;
}

void add_to_address(std::uint8_t* addr, std::size_t len, std::uint32_t n) noexcept {
  // Adds n to the low 32 bits (network order), wrapping: ranges stay within one /96 or /0.
  std::uint32_t low = load_be32(addr + len - 4);
  store_be32(addr + len - 4, low + n);
}

struct Built {
  Template t;
  std::vector<std::uint8_t> bytes;
};

std::size_t l2_len(const Spec& spec) { return sizeof(EthernetHeader) + 4 * spec.vlans.size(); }
std::size_t l4_len(const Spec& spec) { return spec.l4_proto == kIpProtoUdp ? sizeof(UdpHeader) : sizeof(TcpHeader); }

Result<Built> build_one(const Spec& spec, Malformed kind, bool ipv6, std::uint16_t size) {
  FrameSpec fs;
  fs.eth.dst = spec.dst_mac;
  fs.eth.src = spec.src_mac;
  fs.eth.vlan_count = static_cast<std::uint8_t>(spec.vlans.size());
  for (std::size_t i = 0; i < spec.vlans.size(); ++i) fs.eth.vlans[i].tci = spec.vlans[i];
  fs.ip_version = ipv6 ? 6 : 4;
  fs.l4 = spec.l4_proto == kIpProtoUdp ? L4Kind::kUdp : L4Kind::kTcp;
  const std::size_t l3 = ipv6 ? sizeof(Ipv6Header) : sizeof(Ipv4Header);
  std::size_t headers = l2_len(spec) + l3 + l4_len(spec);
  Ipv6ExtSpec frag_ext;
  if (kind == Malformed::kFragment) {
    fs.l4 = L4Kind::kRaw;
    fs.raw_proto = spec.l4_proto;
    headers = l2_len(spec) + l3;
    if (ipv6) {
      frag_ext.kind = Ipv6ExtKind::kFragment;
      frag_ext.frag_offset = 1480;
      frag_ext.more = true;
      frag_ext.frag_id = 1;
      fs.ipv6.ext = std::span<const Ipv6ExtSpec>(&frag_ext, 1);
      headers += sizeof(Ipv6FragmentHeader);
    } else {
      fs.ipv4.frag_offset = 1480;
      fs.ipv4.mf = true;
      fs.ipv4.id = 1;
    }
  }
  if (size < headers)
    return Status::errorf("a {}-byte {} frame cannot hold its {} bytes of headers", size, ipv6 ? "IPv6" : "IPv4",
                          headers);
  fs.payload_len = static_cast<std::uint16_t>(size - headers);
  // A recognisable payload: byte i of the frame is i, so a capture shows where payload starts.
  std::vector<std::uint8_t> payload(fs.payload_len);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(headers + i);
  std::copy_n(spec.payload_prefix.begin(), std::min(spec.payload_prefix.size(), payload.size()), payload.begin());
  fs.payload = payload.data();

  Built b;
  b.bytes.assign(size, 0);
  FrameLayout layout;
  std::size_t len = write_frame(fs, b.bytes.data(), b.bytes.size(), &layout);
  if (len != size)
    return Status::errorf("the frame builder could not make a {}-byte {} frame", size, ipv6 ? "IPv6" : "IPv4");

  std::uint8_t* d = b.bytes.data();
  const std::uint16_t l3_off = layout.l3_off;
  const std::uint16_t l4_off = layout.l4_off;
  Template& t = b.t;
  t.len = size;
  t.addr_off = static_cast<std::uint16_t>(l3_off + (ipv6 ? 8 : 12));
  t.addr_len = ipv6 ? 32 : 8;
  t.ports_off = l4_off;
  t.ip_csum_off = static_cast<std::uint16_t>(l3_off + 10);
  t.l4_csum_off = static_cast<std::uint16_t>(l4_off + (spec.l4_proto == kIpProtoUdp ? 6 : 16));
  t.flags = patch::kAddrs | patch::kPorts | patch::kL4Csum | (ipv6 ? 0 : patch::kIpCsum) |
            (spec.l4_proto == kIpProtoUdp ? patch::kUdpZero : 0);

  switch (kind) {
    case Malformed::kNone:
    case Malformed::kCount:
      break;
    case Malformed::kTruncated:
      t.len = static_cast<std::uint16_t>(l3_off + 10);  // inside either IP header
      t.flags = 0;  // every patched field lies beyond the frame's end
      break;
    case Malformed::kBadIhl:
      if (ipv6) {
        // Next header hop-by-hop, whose length byte (where the UDP/TCP header starts) claims
        // 2048 bytes: the chain runs past the packet.
        d[l3_off + 6] = kIpProtoHopByHop;
        d[l4_off + 1] = 255;
        t.flags = patch::kAddrs;
      } else {
        d[l3_off] = 0x44;  // IHL 4 words = 16 bytes, below the 20-byte minimum
        t.flags &= static_cast<std::uint8_t>(~(patch::kL4Csum | patch::kUdpZero));
      }
      break;
    case Malformed::kBadLength:
      if (ipv6)
        store_be16(d + l3_off + 4, static_cast<std::uint16_t>(load_be16(d + l3_off + 4) + 100));
      else
        store_be16(d + l3_off + 2, static_cast<std::uint16_t>(load_be16(d + l3_off + 2) + 100));
      t.flags &= static_cast<std::uint8_t>(~(patch::kL4Csum | patch::kUdpZero));
      break;
    case Malformed::kBadUdpLength:
      store_be16(d + l4_off + 4, static_cast<std::uint16_t>(load_be16(d + l4_off + 4) + 100));
      t.flags &= static_cast<std::uint8_t>(~(patch::kL4Csum | patch::kUdpZero));
      break;
    case Malformed::kFragment:
      t.flags = patch::kAddrs | (ipv6 ? 0 : patch::kIpCsum);
      break;
  }

  // Checksum bases with addresses and ports zero (they are zero in the template).
  if (t.flags & patch::kIpCsum) {
    store_be16(d + t.ip_csum_off, 0);
    t.ip_sum = fold16(csum_add(0, d + l3_off, sizeof(Ipv4Header)));
    store_be16(d + t.ip_csum_off, csum_fold(t.ip_sum));
  }
  if (t.flags & patch::kL4Csum) {
    const std::size_t seg = layout.ip_end - l4_off;
    store_be16(d + t.l4_csum_off, 0);
    t.l4_sum = fold16(csum_add(std::uint64_t(spec.l4_proto) + seg, d + l4_off, seg));
  }
  return b;
}

}  // namespace

std::vector<std::uint32_t> shuffled_flow_order(const Spec& spec) {
  std::vector<std::uint32_t> order(static_cast<std::size_t>(spec.flow_count()));
  std::iota(order.begin(), order.end(), 0u);
  shuffle(order, spec.seed);
  return order;
}

std::vector<std::uint8_t> imix_sequence(const Spec& spec) {
  std::vector<std::uint8_t> seq;
  for (std::size_t i = 0; i < spec.sizes.size(); ++i)
    seq.insert(seq.end(), spec.weights[i], static_cast<std::uint8_t>(i));
  shuffle(seq, spec.seed ^ 0x1d8e4e27c47d124full);
  return seq;
}

Result<std::unique_ptr<SynthFrames>> build_frames(const Spec& spec, std::uint32_t data_room,
                                                   std::size_t prebuild_bytes) {
  auto frames = std::make_unique<SynthFrames>();
  const std::uint64_t n = spec.flow_count();
  const auto v6_flows = static_cast<std::uint64_t>(static_cast<double>(n) * spec.ipv6_fraction + 0.5);

  frames->flows.resize(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t rest = i;
    const auto dp = static_cast<std::uint32_t>(rest % spec.dst_ports);
    rest /= spec.dst_ports;
    const auto sp = static_cast<std::uint32_t>(rest % spec.src_ports);
    rest /= spec.src_ports;
    const auto da = static_cast<std::uint32_t>(rest % spec.dst_addrs);
    const auto sa = static_cast<std::uint32_t>(rest / spec.dst_addrs);

    Flow& f = frames->flows[static_cast<std::size_t>(i)];
    f.ipv6 = is_ipv6_flow(i, n, v6_flows) ? 1 : 0;
    const std::size_t alen = f.ipv6 ? 16 : 4;
    std::memset(f.addrs, 0, sizeof f.addrs);
    std::memcpy(f.addrs, f.ipv6 ? spec.ipv6_src.data() : spec.ipv4_src.data(), alen);
    std::memcpy(f.addrs + alen, f.ipv6 ? spec.ipv6_dst.data() : spec.ipv4_dst.data(), alen);
    add_to_address(f.addrs, alen, sa);
    add_to_address(f.addrs + alen, alen, da);
    store_be16(f.ports, static_cast<std::uint16_t>(spec.src_port + sp));
    store_be16(f.ports + 2, static_cast<std::uint16_t>(spec.dst_port + dp));
    f.addr_sum = fold16(csum_add(0, f.addrs, 2 * alen));
    f.l4_sum = fold16(std::uint64_t(f.addr_sum) + load_be16(f.ports) + load_be16(f.ports + 2));
    f.hash = mix32(static_cast<std::uint32_t>(i) ^ static_cast<std::uint32_t>(spec.seed));
  }
  const bool any_v4 = v6_flows < n;
  const bool any_v6 = v6_flows > 0;

  std::vector<Malformed> kinds = {Malformed::kNone};
  kinds.insert(kinds.end(), spec.malformed_kinds.begin(), spec.malformed_kinds.end());
  const std::size_t kind_slots = static_cast<std::size_t>(Malformed::kCount);
  frames->size_count = spec.sizes.size();
  frames->templates.assign(kind_slots * 2 * spec.sizes.size(), Template{});

  std::vector<std::pair<std::size_t, Built>> built;
  std::size_t total = 0;
  for (Malformed kind : kinds) {
    for (unsigned v6 = 0; v6 < 2; ++v6) {
      if ((v6 && !any_v6) || (!v6 && !any_v4)) continue;
      for (std::size_t s = 0; s < spec.sizes.size(); ++s) {
        if (spec.sizes[s] > data_room)
          return Status::errorf("{}-byte frames do not fit the pool's {} bytes of data room per buffer; raise the "
                                "pool's buf_size or lower the frame size",
                                spec.sizes[s], data_room);
        auto b = build_one(spec, kind, v6 != 0, spec.sizes[s]);
        if (!b) return b.status();
        std::size_t index = ((static_cast<std::size_t>(kind) * 2) + v6) * spec.sizes.size() + s;
        total += align_up(b->bytes.size(), kCacheLine);
        built.emplace_back(index, std::move(b).value());
      }
    }
  }
  // One block for every template, each on its own cache lines, so copying one touches no other.
  frames->storage.assign(total + kCacheLine, 0);
  std::uint8_t* base = reinterpret_cast<std::uint8_t*>(align_up(reinterpret_cast<std::uintptr_t>(frames->storage.data()), kCacheLine));
  for (auto& [index, b] : built) {
    std::memcpy(base, b.bytes.data(), b.bytes.size());
    b.t.bytes = base;
    frames->templates[index] = b.t;
    base += align_up(b.bytes.size(), kCacheLine);
  }

  frames->meta.resize(frames->flows.size());
  for (std::size_t i = 0; i < frames->flows.size(); ++i)
    frames->meta[i] = {frames->flows[i].hash, frames->flows[i].ipv6};

  std::uint32_t largest = 0;
  for (auto size : spec.sizes) largest = std::max<std::uint32_t>(largest, size);
  frames->block_copy = align_up(largest, kCacheLine) <= data_room;

  // Whole frames per flow when they are plain enough and fit the budget (prebuild_budget()).
  const std::uint32_t stride = static_cast<std::uint32_t>(align_up(spec.sizes[0], kCacheLine));
  if (spec.sizes.size() == 1 && spec.malformed_kinds.empty() && n * stride <= prebuild_bytes) {
    frames->flow_storage.assign(n * stride + kCacheLine, 0);
    std::uint8_t* fbase = reinterpret_cast<std::uint8_t*>(
        align_up(reinterpret_cast<std::uintptr_t>(frames->flow_storage.data()), kCacheLine));
    for (std::size_t i = 0; i < frames->flows.size(); ++i) {
      const Flow& f = frames->flows[i];
      const Template& t = frames->at(Malformed::kNone, f.ipv6, 0);
      std::uint8_t* d = fbase + i * stride;
      std::memcpy(d, t.bytes, t.len);
      patch_flow(t, f, d);
    }
    frames->flow_frames = fbase;
    frames->flow_stride = stride;
    frames->flow_len = spec.sizes[0];
  }
  return frames;
}

std::size_t prebuild_budget(std::uint16_t rx_queues) noexcept {
  // A prebuilt frame is read from wherever the last copy of it left it, and the flows come in a
  // shuffled order, so the set pays only while each lcore's share stays in its L2 cache. Beyond
  // that the template (one frame, always in L1) plus a patch wins. On this project's 2-vCPU
  // machine (1 MiB L2), 1024 flows through `rawpipe gen` to net_null: prebuilt 48.7 against
  // patched 39.0 Mpps at 64 bytes (64 KiB of frames), 31.7 against 28.0 at 512 (512 KiB), 22.7
  // against 22.5 at 1024 (1 MiB), and 16.6 against 19.7 at 1518 (1.5 MiB).
  constexpr std::size_t kUnknownL2 = 1u << 20;
  constexpr std::size_t kMostPrebuilt = 8u << 20;  // memory held for the frames at most
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const std::size_t per_lcore = l2 > 0 ? static_cast<std::size_t>(l2) : kUnknownL2;
  return std::min(per_lcore * std::max<std::uint16_t>(rx_queues, 1), kMostPrebuilt);
}

}  // namespace rawpipe::synth
