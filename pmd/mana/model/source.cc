#include "pmd/mana/model/source.hh"

#include <limits>

#include "pipeline/wire/builder.hh"

#ifdef RAWPIPE_MANA_MODEL_PCAP
#include <pcap/pcap.h>
#endif

namespace rawpipe::mana {

Result<std::unique_ptr<FrameSource>> FrameSource::create(const SourceSpec& spec) {
  auto src = std::unique_ptr<FrameSource>(new FrameSource());
  if (spec.kind == SourceSpec::Kind::kSynth) {
    if (spec.frame_size < 60 || spec.frame_size > 9000)
      return Status::errorf("frame_size {} must be from 60 to 9000 bytes", spec.frame_size);
    if (spec.flows == 0 || spec.flows > 65536) return Status::errorf("flows {} must be from 1 to 65536", spec.flows);
    const std::uint32_t header = 14 + 20 + 8;
    for (std::uint32_t f = 0; f < spec.flows; ++f) {
      wire::FrameSpec s;
      s.eth.dst = {0x02, 0x6d, 0x61, 0x6e, 0x61, 0x01};
      s.eth.src = {0x02, 0x6d, 0x61, 0x6e, 0x61, 0x02};
      s.ipv4.src = wire::ipv4(10, 1, static_cast<std::uint8_t>(f >> 8), static_cast<std::uint8_t>(f));
      s.ipv4.dst = wire::ipv4(10, 2, 0, 1);
      s.udp = {static_cast<std::uint16_t>(10000 + f % 50000), 9000, true};
      s.payload_len = static_cast<std::uint16_t>(spec.frame_size > header ? spec.frame_size - header : 0);
      s.min_frame_len = static_cast<std::uint16_t>(spec.frame_size);
      std::vector<std::uint8_t> out(spec.frame_size + 64);
      out.resize(wire::write_frame(s, out.data(), out.size()));
      if (out.empty()) return Status::error("internal error building a synthetic frame");
      src->frames_.push_back(std::move(out));
    }
    src->total_ = spec.frames ? spec.frames : std::numeric_limits<std::uint64_t>::max();
    src->description_ = fmt::format("synthetic UDP/IPv4, {} bytes, {} flows, {}", spec.frame_size, spec.flows,
                                    spec.frames ? fmt::format("{} frames", spec.frames) : std::string("endless"));
    return src;
  }
#ifdef RAWPIPE_MANA_MODEL_PCAP
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_open_offline(spec.pcap.c_str(), err);
  if (!p) return Status::errorf("cannot open pcap file '{}': {}", spec.pcap, err);
  if (pcap_datalink(p) != DLT_EN10MB) {
    pcap_close(p);
    return Status::errorf("pcap file '{}' is not Ethernet (link type {}); the model carries Ethernet frames", spec.pcap,
                          pcap_datalink(p));
  }
  pcap_pkthdr* h;
  const u_char* data;
  int rc;
  std::uint64_t shortened = 0;
  while ((rc = pcap_next_ex(p, &h, &data)) == 1) {
    if (h->caplen < h->len) ++shortened;
    src->frames_.emplace_back(data, data + h->caplen);
  }
  std::string why = rc == PCAP_ERROR ? pcap_geterr(p) : "";
  pcap_close(p);
  if (rc == PCAP_ERROR) return Status::errorf("reading pcap file '{}': {}", spec.pcap, why);
  if (src->frames_.empty()) return Status::errorf("pcap file '{}' has no packets", spec.pcap);
  src->total_ = spec.frames ? spec.frames : src->frames_.size();
  src->description_ = fmt::format("pcap {} ({} packets{}), {} frames", spec.pcap, src->frames_.size(),
                                  shortened ? fmt::format(", {} cut by the capture's snaplen", shortened) : "",
                                  src->total_);
  return src;
#else
  return Status::errorf("source = \"pcap\" needs libpcap, which this build did not find (install libpcap-dev and "
                        "reconfigure)");
#endif
}

}  // namespace rawpipe::mana
