#include "rawpipe/dissect.hh"

#include <arpa/inet.h>
#include <pcap/pcap.h>

#include <cstring>
#include <iostream>

#include "pipeline/buf/pool.hh"
#include "pipeline/parse/parse.hh"
#include "rawpipe/drop_reason.hh"

namespace rawpipe {
namespace {

constexpr const char* kHeader =
    "frame\tlength\tverdict\tvlan\tip\tsrc\tdst\tproto\tmf\tfrag_off\tsport\tdport\tudp_len\n";

std::string address(const Mbuf& m, bool source) {
  const std::uint8_t* ip = m.data() + m.l3_off;
  char buf[INET6_ADDRSTRLEN];
  if (m.l3_type == L3Type::kIpv4) return inet_ntop(AF_INET, ip + (source ? 12 : 16), buf, sizeof buf);
  return inet_ntop(AF_INET6, ip + (source ? 8 : 24), buf, sizeof buf);
}

// A frame the capture cut short (caplen < len) is parsed as the wire carried it: its captured bytes
// followed by zeros up to its original length, so that every length field is checked against the
// length the frame really had. A check that failed is believed only when the fields it read were
// captured; one that read the zeros, or a frame that passed, is "cut by capture" (tshark's "Packet
// size limited during capture"): nothing in its own headers contradicts anything else.
// The end of the bytes the check behind `reason` reads.
unsigned fields_read_by(DropReason reason, const Mbuf& m) {
  switch (reason) {
    case DropReason::kRuntEthernet:
    case DropReason::kTruncatedVlan:
    case DropReason::kTruncatedIpv4:
    case DropReason::kTruncatedIpv6:
    case DropReason::kTruncatedUdp:
      return 0;  // a length against the wire length: no field of the frame read
    case DropReason::kTooManyVlans:
      return m.l3_off ? m.l3_off : 12 + 4 * 3 + 2;
    case DropReason::kBadIpv4Version:
    case DropReason::kBadIpv4Ihl:
    case DropReason::kBadIpv4TotalLength:
      return m.l3_off + 4u;
    case DropReason::kBadIpv6Version:
      return m.l3_off + 1u;
    case DropReason::kBadIpv6PayloadLength:
      // Judged once the whole fixed header is in, as tshark does (it reads the header first).
      return m.l3_off + 40u;
    case DropReason::kBadIpv6ExtHeader:
      return 0xffffffffu;  // somewhere in the chain: believed only when the whole frame was captured
    case DropReason::kBadUdpLength:
      return m.l4_off + 6u;
    case DropReason::kTruncatedTcp:
    case DropReason::kBadTcpHeader:
      return m.l4_off + 13u;
    default:
      return 0xffffffffu;
  }
}

// One line; "-" where the frame has no such field, parse stopped before it, or the capture did not
// keep its bytes (`captured` of them).
void print_line(std::ostream& out, std::uint64_t frame, std::uint32_t wire_len, const Mbuf& m, bool cut,
                unsigned captured) {
  auto reason = static_cast<DropReason>(m.drop_reason);
  if (cut && (reason == DropReason::kNone || fields_read_by(reason, m) > captured)) reason = DropReason::kCutByCapture;
  out << frame << '\t' << wire_len << '\t' << (reason == DropReason::kNone ? "ok" : drop_reason_name(reason))
      << '\t';
  if (m.vlan_count)
    out << (m.vlan_tci[0] & 0x0fff);
  else
    out << '-';
  // Addresses are printed only when the IP header passed its checks (an IP frame's l3_type is set
  // before the checks, and a frame too short for the header must not be read).
  const unsigned ip_header = m.l3_type == L3Type::kIpv4 ? 20u : 40u;
  const bool ip_ok = m.l3_type != L3Type::kNone && m.l3_off + ip_header <= captured &&
                     !(reason >= DropReason::kTruncatedIpv4 && reason <= DropReason::kBadIpv6PayloadLength);
  if (ip_ok) {
    out << '\t' << (m.l3_type == L3Type::kIpv4 ? 4 : 6) << '\t' << address(m, true) << '\t' << address(m, false)
        << '\t' << unsigned(m.l4_proto) << '\t' << ((m.flags & pkt_flag::kMoreFragments) ? 1 : 0) << '\t'
        << m.frag_off;
  } else {
    out << "\t-\t-\t-\t-\t-\t-";
  }
  // Ports are read only when parse found the whole header: UDP unless truncated_udp (a bad UDP
  // length still has its 8 header bytes), TCP when parse accepted the header.
  const bool l4_ports = ip_ok && m.l4_off != 0 && m.l4_off + 8u <= captured &&
                        ((m.l4_proto == 17 && reason != DropReason::kTruncatedUdp) ||
                         (m.l4_proto == 6 && m.payload_off != 0));
  if (l4_ports) {
    const std::uint8_t* l4 = m.data() + m.l4_off;
    out << '\t' << wire::load_be16(l4) << '\t' << wire::load_be16(l4 + 2) << '\t';
    if (m.l4_proto == 17)
      out << wire::load_be16(l4 + 4);
    else
      out << '-';
  } else {
    out << "\t-\t-\t-";
  }
  out << '\n';
}

}  // namespace

int run_dissect(const std::string& pcap_file, std::ostream& out) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline_with_tstamp_precision(pcap_file.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  if (!p) {
    std::cerr << "rawpipe dissect: cannot read '" << pcap_file << "': " << err << '\n';
    return 1;
  }
  if (pcap_datalink(p) != DLT_EN10MB) {
    std::cerr << "rawpipe dissect: '" << pcap_file << "' has link type " << pcap_datalink(p)
              << "; only Ethernet captures can be dissected\n";
    pcap_close(p);
    return 1;
  }
  // One buffer, reused: the frame is copied in exactly as a PMD would deliver it.
  PoolConfig pc;
  pc.name = "dissect";
  pc.count = 1;
  pc.buf_size = 65536;
  pc.headroom = 0;
  pc.cache_size = 0;
  pc.huge_pages = HugePages::kNever;
  auto pool = Pool::create(pc);
  if (!pool) {
    std::cerr << "rawpipe dissect: " << pool.message() << '\n';
    pcap_close(p);
    return 1;
  }
  Mbuf* m = pool.value()->alloc();
  const std::uint32_t room = pool.value()->data_room();
  out << kHeader;
  std::uint64_t frame = 0;
  int rc = 0;
  for (;;) {
    pcap_pkthdr* h = nullptr;
    const u_char* data = nullptr;
    int r = pcap_next_ex(p, &h, &data);
    if (r == PCAP_ERROR_BREAK) break;
    if (r != 1) {
      std::cerr << "rawpipe dissect: '" << pcap_file << "' ends inside frame " << frame + 1 << ": " << pcap_geterr(p)
                << '\n';
      rc = 2;
      break;
    }
    ++frame;
    pool.value()->reset(m);
    // Frames beyond a 64 KiB buffer are cut to it.
    const std::uint32_t len = h->caplen < room ? h->caplen : room;
    const std::uint32_t wire = h->len < room ? h->len : room;
    const bool cut = len < wire;
    std::memcpy(m->data(), data, len);
    if (cut) std::memset(m->data() + len, 0, wire - len);  // see fields_read_by
    m->data_len = cut ? wire : len;
    parse_burst(&m, 1);
    print_line(out, frame, h->len, *m, cut, len);
  }
  mbuf_free(m);
  pcap_close(p);
  return rc;
}

}  // namespace rawpipe
