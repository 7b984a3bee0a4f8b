// The classifier: the rule set, and the table the lcores read, swapped at run time without locks.
//
// Lcores never see a table change under them. The control thread builds a complete new
// ClassifyTable, publishes it with one atomic pointer store and retires the old one; the old table
// is freed once every lcore has passed a quiescent point after the swap (quiescent-state-based
// reclamation, as in userspace RCU's QSBR flavour and DPDK's rte_rcu_qsbr):
//
//   lcore, once per loop pass:            control thread, per change:
//     t = acquire(reader)    (A1)           build new table
//     classify bursts with t                old = current_.exchange(new)    (R1)
//     quiesce(reader)        (A2, R2)       epoch_ += 1                     (R3)
//                                           free old when every online reader's epoch >= E (A3)
//
// A packet is therefore classified entirely by the old table or entirely by the new one, and a
// table is never freed while a burst uses it. Nothing is lost or misdelivered across a swap.
//
// Readers are numbered 0..readers-1 (one per lcore). A reader is offline until reader_online()
// and after reader_offline(); offline readers never hold a table and do not delay reclamation.
//
// Thread-safety: acquire/quiesce/reader_online/reader_offline are called only by the reader's own
// thread. Every other member is control path and MT-safe (one internal mutex).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "pipeline/classify/table.hh"
#include "rawpipe/compiler.hh"

namespace rawpipe {

class Classifier {
 public:
  static Result<std::unique_ptr<Classifier>> create(unsigned readers, std::vector<TableRule> rules,
                                                    TableDefault dflt);
  ~Classifier();
  Classifier(const Classifier&) = delete;
  Classifier& operator=(const Classifier&) = delete;

  // ---- data path (reader's own thread) ----
  const ClassifyTable* acquire(unsigned reader) const noexcept {
    (void)reader;
    // A1: pairs with R1: the table's contents, written before publication, are visible.
    return current_.load(std::memory_order_acquire);
  }
  void quiesce(unsigned reader) noexcept {
    // A2: pairs with R3: having seen epoch E, our next acquire() sees the table published before E.
    std::uint64_t e = epoch_.load(std::memory_order_acquire);
    // R2: pairs with A3: our reads of the previous table happen before the control thread frees it.
    readers_[reader].epoch.store(e, std::memory_order_release);
  }
  void reader_online(unsigned reader) noexcept;
  void reader_offline(unsigned reader) noexcept;

  // ---- control path ----
  // Adds a rule (ingress port already resolved) and publishes a new table; returns the rule id.
  Result<std::uint32_t> add(const SteeringRule& rule);
  Status remove(std::uint32_t rule_id);
  std::vector<TableRule> rules() const;
  // Frees retired tables that no reader can still use; returns how many remain retired.
  std::size_t reclaim();
  // Waits until every table retired so far is freed (readers must be making progress or offline).
  void synchronize();
  std::size_t retired_count() const;
  std::uint64_t tables_published() const;

  // The same quiescent-state scheme for other structures the lcores read within a pass (the
  // filter stage's sets, pipeline/filter/filter.hh): after unpublishing an object, retire_epoch()
  // returns the epoch E every online reader must report before the object may be freed, and
  // passed(E) says whether all have. MT-safe, lock-free.
  std::uint64_t retire_epoch() noexcept;
  bool passed(std::uint64_t epoch) const noexcept;

 private:
  static constexpr std::uint64_t kOffline = ~std::uint64_t{0};
  struct alignas(kFalseSharingRange) Reader {
    std::atomic<std::uint64_t> epoch{kOffline};
  };
  struct Retired {
    const ClassifyTable* table;
    std::uint64_t epoch;  // freed when every online reader reported at least this
  };

  Classifier(unsigned readers, TableDefault dflt);
  Status publish_locked(std::vector<TableRule> next);
  std::size_t reclaim_locked();

  std::atomic<const ClassifyTable*> current_{nullptr};
  alignas(kFalseSharingRange) std::atomic<std::uint64_t> epoch_{1};
  std::unique_ptr<Reader[]> readers_;
  unsigned reader_count_;

  mutable std::mutex mu_;  // control path only
  std::vector<TableRule> rules_;
  std::vector<Retired> retired_;
  TableDefault default_;
  std::uint32_t next_id_ = 1;
  std::uint64_t published_ = 0;
};

}  // namespace rawpipe
