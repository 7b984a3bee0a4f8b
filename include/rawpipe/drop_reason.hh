// Why a packet left the pipeline without reaching an endpoint or a transmit queue.
//
// One list feeds the enum, the names printed by the app and written to JSON, and the per-lcore
// counters, so a reason cannot exist in one place and be missing in another.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace rawpipe {

// X(identifier, "name printed and exported", "what it means")
#define RAWPIPE_FOREACH_DROP_REASON(X)                                                              \
  X(kNone, "none", "not dropped")                                                                    \
  X(kRuntEthernet, "runt_ethernet", "frame shorter than an Ethernet header")                         \
  X(kTruncatedVlan, "truncated_vlan", "frame ends inside an 802.1Q/802.1ad tag")                     \
  X(kTooManyVlans, "too_many_vlans", "more than two VLAN tags")                                      \
  X(kTruncatedIpv4, "truncated_ipv4", "frame ends inside the IPv4 header")                           \
  X(kBadIpv4Version, "bad_ipv4_version", "EtherType says IPv4 but the version field is not 4")       \
  X(kBadIpv4Ihl, "bad_ipv4_ihl", "IPv4 header length below 20 bytes or beyond the frame")            \
  X(kBadIpv4TotalLength, "bad_ipv4_total_length", "IPv4 total length below the header or beyond the frame") \
  X(kTruncatedIpv6, "truncated_ipv6", "frame ends inside the IPv6 header")                           \
  X(kBadIpv6Version, "bad_ipv6_version", "EtherType says IPv6 but the version field is not 6")       \
  X(kBadIpv6PayloadLength, "bad_ipv6_payload_length", "IPv6 payload length beyond the frame")        \
  X(kBadIpv6ExtHeader, "bad_ipv6_ext_header", "IPv6 extension header truncated or chain too long")   \
  X(kTruncatedUdp, "truncated_udp", "IP payload ends inside the UDP header")                          \
  X(kBadUdpLength, "bad_udp_length", "UDP length below 8 or beyond the IP payload")                  \
  X(kTruncatedTcp, "truncated_tcp", "IP payload ends inside the TCP header")                         \
  X(kBadL3Checksum, "bad_l3_checksum", "the port reported a bad IPv4 header checksum")               \
  X(kBadL4Checksum, "bad_l4_checksum", "the port reported a bad UDP/TCP checksum")                   \
  X(kNoMatch, "no_match", "no endpoint rule matched and the default action is drop")                 \
  X(kFilterDrop, "filter_drop", "a filter callback returned DROP")                                   \
  X(kFilterInvalidVerdict, "filter_invalid_verdict", "a filter callback returned a value that is not a verdict") \
  X(kEndpointRingFull, "endpoint_ring_full", "the endpoint's consumer did not keep up")              \
  X(kEndpointOffloadOff, "endpoint_offload_off", "the endpoint is not offloaded and the port cannot pass to the kernel") \
  X(kTxFailed, "tx_failed", "the transmit queue did not take the packet")                            \
  X(kNotForUs, "not_for_us", "a transmit action could not be applied (e.g. echo of a non-UDP packet)") \
  X(kBadTcpHeader, "bad_tcp_header", "TCP data offset below the 20-byte minimum header")                 \
  X(kCutByCapture, "cut_by_capture", "a capture file kept fewer bytes than the frame had (snap length) and the headers it kept are consistent")

enum class DropReason : std::uint8_t {
#define RAWPIPE_DROP_ENUM(id, name, help) id,
  RAWPIPE_FOREACH_DROP_REASON(RAWPIPE_DROP_ENUM)
#undef RAWPIPE_DROP_ENUM
      kCount
};

inline constexpr std::size_t kDropReasonCount = static_cast<std::size_t>(DropReason::kCount);

inline constexpr std::array<std::string_view, kDropReasonCount> kDropReasonNames = {
#define RAWPIPE_DROP_NAME(id, name, help) name,
    RAWPIPE_FOREACH_DROP_REASON(RAWPIPE_DROP_NAME)
#undef RAWPIPE_DROP_NAME
};

inline constexpr std::array<std::string_view, kDropReasonCount> kDropReasonHelp = {
#define RAWPIPE_DROP_HELP(id, name, help) help,
    RAWPIPE_FOREACH_DROP_REASON(RAWPIPE_DROP_HELP)
#undef RAWPIPE_DROP_HELP
};

constexpr std::string_view drop_reason_name(DropReason r) noexcept {
  return kDropReasonNames[static_cast<std::size_t>(r)];
}

}  // namespace rawpipe
