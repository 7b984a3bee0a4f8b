// Frames the mana-model PMD's simulated wire carries: a synthetic UDP generator or a pcap file
// read into memory at open. Frame i of the sequence is fixed, so every receive queue can walk the
// same sequence and keep the frames RSS sends to it: each frame reaches exactly one queue without
// any state shared between lcores.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rawpipe/status.hh"

namespace rawpipe::mana {

struct SourceSpec {
  enum class Kind : std::uint8_t { kSynth, kPcap } kind = Kind::kSynth;
  std::string pcap;               // kPcap: file to replay
  std::uint64_t frames = 0;       // frames in the whole run; 0: endless (synth) / one pass (pcap)
  std::uint32_t frame_size = 64;  // kSynth: bytes per frame, CRC excluded
  std::uint32_t flows = 256;      // kSynth: distinct 5-tuples (source port and address vary)
};

class FrameSource {
 public:
  static Result<std::unique_ptr<FrameSource>> create(const SourceSpec& spec);

  // Frames the run will carry (UINT64_MAX when endless).
  std::uint64_t total() const noexcept { return total_; }
  std::size_t distinct() const noexcept { return frames_.size(); }
  // Frame i (i < total()).
  const std::vector<std::uint8_t>& frame(std::uint64_t i) const noexcept { return frames_[i % frames_.size()]; }
  std::string describe() const { return description_; }

 private:
  std::vector<std::vector<std::uint8_t>> frames_;
  std::uint64_t total_ = 0;
  std::string description_;
};

}  // namespace rawpipe::mana
