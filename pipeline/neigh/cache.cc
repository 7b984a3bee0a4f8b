#include "pipeline/neigh/cache.hh"

#include <cstring>

#include "pipeline/wire/checksum.hh"

namespace rawpipe {
namespace {

struct Key {
  std::uint64_t hi = 0, lo = 0;
};

Key key_of(L3Type family, const std::uint8_t* ip) noexcept {
  Key k;
  if (family == L3Type::kIpv4) {
    std::uint32_t v;
    std::memcpy(&v, ip, 4);
    k.lo = v;
  } else {
    std::memcpy(&k.hi, ip, 8);
    std::memcpy(&k.lo, ip + 8, 8);
  }
  return k;
}

unsigned slot_of(const Key& k) noexcept {
  std::uint64_t h = (k.hi ^ (k.lo * 0x9e3779b97f4a7c15ull));
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return static_cast<unsigned>(h & (NeighCache::kSlots - 1));
}

std::uint64_t pack(L3Type family, const wire::MacAddr& mac) noexcept {
  std::uint64_t v = static_cast<std::uint64_t>(family) << 56;
  for (unsigned i = 0; i < 6; ++i) v |= std::uint64_t(mac[i]) << (8 * i);
  return v;
}

bool usable_mac(const std::uint8_t* m) noexcept {
  static constexpr std::uint8_t kZero[6] = {};
  return !(m[0] & 1) && std::memcmp(m, kZero, 6) != 0;  // neither multicast/broadcast nor zero
}

}  // namespace

void NeighCache::learn(L3Type family, const std::uint8_t* ip, const wire::MacAddr& mac) noexcept {
  const Key k = key_of(family, ip);
  Slot& s = slots_[slot_of(k)];
  const std::uint64_t packed = pack(family, mac);
  std::uint32_t seq = s.seq.load(std::memory_order_acquire);
  // Already known (the common case for a repeated ARP): read only, so the line stays shared.
  if (!(seq & 1) && s.ip_hi.load(std::memory_order_relaxed) == k.hi && s.ip_lo.load(std::memory_order_relaxed) == k.lo &&
      s.mac.load(std::memory_order_relaxed) == packed)
    return;
  // W1: takes the slot (even -> odd); acquire so the field stores below stay after it.
  if ((seq & 1) || !s.seq.compare_exchange_strong(seq, seq + 1, std::memory_order_acquire, std::memory_order_relaxed))
    return;  // another lcore writes this slot right now
  // W1': a reader that sees any field below sees the odd sequence too (pairs with R2).
  std::atomic_thread_fence(std::memory_order_release);
  s.ip_hi.store(k.hi, std::memory_order_relaxed);
  s.ip_lo.store(k.lo, std::memory_order_relaxed);
  s.mac.store(packed, std::memory_order_relaxed);
  // W2: release publishes the fields with the even sequence; pairs with R1 in lookup.
  s.seq.store(seq + 2, std::memory_order_release);
  learned_.fetch_add(1, std::memory_order_relaxed);
}

std::optional<wire::MacAddr> NeighCache::lookup(L3Type family, const std::uint8_t* ip) const noexcept {
  const Key k = key_of(family, ip);
  const Slot& s = slots_[slot_of(k)];
  for (int attempt = 0; attempt < 64; ++attempt) {
    const std::uint32_t before = s.seq.load(std::memory_order_acquire);  // R1, pairs with W2
    if (before & 1) continue;
    const std::uint64_t hi = s.ip_hi.load(std::memory_order_relaxed);
    const std::uint64_t lo = s.ip_lo.load(std::memory_order_relaxed);
    const std::uint64_t mac = s.mac.load(std::memory_order_relaxed);
    // R2: the field loads above complete before the sequence is read again (seqlock reader).
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != before) continue;
    if (hi != k.hi || lo != k.lo || (mac >> 56) != static_cast<std::uint64_t>(family)) return std::nullopt;
    wire::MacAddr out;
    for (unsigned i = 0; i < 6; ++i) out[i] = static_cast<std::uint8_t>(mac >> (8 * i));
    return out;
  }
  return std::nullopt;  // a writer kept the slot busy: as good as not known yet
}

bool neigh_learn(NeighCache& cache, const std::uint8_t* f, std::uint32_t len) noexcept {
  if (len < 14) return false;
  std::uint32_t off = 12;
  std::uint16_t type = wire::load_be16(f + off);
  for (int tags = 0; type == wire::kEtherTypeVlan || type == wire::kEtherTypeQinQ || type == wire::kEtherTypeQinQLegacy;
       ++tags) {
    if (tags == 2 || len < off + 6) return false;
    off += 4;
    type = wire::load_be16(f + off);
  }
  const std::uint32_t l3 = off + 2;
  if (type == wire::kEtherTypeArp) {
    if (len < l3 + 28) return false;
    const std::uint8_t* a = f + l3;
    if (wire::load_be16(a) != wire::kArpHtypeEthernet || wire::load_be16(a + 2) != wire::kEtherTypeIpv4 || a[4] != 6 ||
        a[5] != 4)
      return false;
    const std::uint16_t op = wire::load_be16(a + 6);
    const std::uint8_t* sha = a + 8;
    const std::uint8_t* spa = a + 14;
    static constexpr std::uint8_t kAny[4] = {};
    if ((op != wire::kArpOpRequest && op != wire::kArpOpReply) || !usable_mac(sha) || !std::memcmp(spa, kAny, 4))
      return false;
    wire::MacAddr mac;
    std::memcpy(mac.data(), sha, 6);
    cache.learn(L3Type::kIpv4, spa, mac);
    return true;
  }
  if (type != wire::kEtherTypeIpv6 || len < l3 + 40) return false;
  const std::uint8_t* ip = f + l3;
  if ((ip[0] >> 4) != 6 || ip[6] != wire::kIpProtoIcmpv6 || ip[7] != 255) return false;  // ND keeps hop limit 255
  const std::uint32_t plen = wire::load_be16(ip + 4);
  if (plen < 24 || len < l3 + 40 + plen) return false;
  const std::uint8_t* icmp = ip + 40;
  const bool na = icmp[0] == wire::kIcmpv6NeighborAdvert, ns = icmp[0] == wire::kIcmpv6NeighborSolicit;
  if ((!na && !ns) || icmp[1] != 0) return false;
  if (wire::l4_checksum_ipv6(ip + 8, ip + 24, wire::kIpProtoIcmpv6, icmp, plen) != 0) return false;
  const std::uint8_t* lla = na ? f + 6 : nullptr;  // an NA without the option: its frame's source
  const std::uint8_t want = na ? 2 : 1;            // target / source link-layer address option
  for (std::uint32_t o = 24; o + 2 <= plen;) {
    const std::uint32_t olen = icmp[o + 1] * 8u;
    if (olen == 0 || o + olen > plen) return false;
    if (icmp[o] == want && olen >= 8) lla = icmp + o + 2;
    o += olen;
  }
  if (!lla || !usable_mac(lla)) return false;
  const std::uint8_t* addr = na ? icmp + 8 : ip + 8;  // NA: the target; NS: its sender
  static constexpr std::uint8_t kUnspecified[16] = {};
  if (addr[0] == 0xff || !std::memcmp(addr, kUnspecified, 16)) return false;
  wire::MacAddr mac;
  std::memcpy(mac.data(), lla, 6);
  cache.learn(L3Type::kIpv6, addr, mac);
  return true;
}

}  // namespace rawpipe
