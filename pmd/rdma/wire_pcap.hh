// The device models' `wire_pcap` key (mlx5-model, mana-model): the frames a model put on its
// simulated wire, written to a capture file by the time the port is closed (mana-model: at stop; mlx5-model: when its
// simulated device stops, at close), so a test (or a person) can read
// what the data path really transmitted, byte for byte. The frames are kept in memory until then:
// a key for tests and short runs, not for long ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/capture/writer.hh"
#include "rawpipe/status.hh"

namespace rawpipe::rdma {

inline Status write_wire_pcap(const std::string& path, const std::vector<std::vector<std::uint8_t>>& frames) {
  auto w = CaptureWriter::create(path, capture_format_for_path(path), CaptureWriter::kMaxSnaplen);
  if (!w) return Status::errorf("wire_pcap '{}': {}", path, w.message());
  for (std::size_t i = 0; i < frames.size(); ++i)
    (void)w.value()->write(i * 1000, frames[i].data(), static_cast<std::uint32_t>(frames[i].size()),
                           static_cast<std::uint32_t>(frames[i].size()));
  return w.value()->close();
}

}  // namespace rawpipe::rdma
