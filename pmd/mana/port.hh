// What the MANA port and the mana-model port share: their queues, statistics, capabilities and
// the path report. Subclasses own the device (verbs objects or the model) and pick the burst
// functions (rdma::HwDoorbell or rdma::ModelDoorbell instances).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "pmd/mana/rx.hh"
#include "pmd/mana/tx.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe::mana {

// How RSS spreads the vPort's traffic over the receive queues.
enum class RssFields : std::uint8_t { kL3, kL4 };

struct ManaCommonSpec {
  std::array<std::uint8_t, 40> rss_key{};
  RssFields rss = RssFields::kL4;
};

// The smallest MANA ring, and the step ring sizes go in (DPDK mana.h MIN_BUFFERS_PER_QUEUE).
inline constexpr std::int64_t kMinRingSize = 64;

// Reads the keys both MANA drivers accept (rss, rss_key) from a port's table.
void parse_common_keys(ConfigSection& section, ManaCommonSpec& out);
extern const KeyTable kManaCommonKeys;

class ManaPortBase : public Port {
 public:
  PortCaps caps() const override;
  PortStats stats() const override;
  LinkInfo link() const override { return link_; }

 protected:
  std::string queue_report(std::string_view pmd, std::string_view where) const;
  void release_buffers() noexcept;

  // Views of the queues; the subclass owns them (the model port's queues carry more state).
  std::vector<RxQueue*> rxq_;
  std::vector<TxQueue*> txq_;
  LinkInfo link_{};
  RssFields rss_ = RssFields::kL4;
};

// The message every MANA path prints about filtering (path_report, docs).
inline constexpr std::string_view kNoFlowRulesNote =
    "MANA has no flow rules: the whole vPort's traffic arrives on these queues and classify/dispatch does the "
    "filtering";

}  // namespace rawpipe::mana
