#include "pipeline/classify/classifier.hh"

#include <algorithm>
#include <chrono>
#include <thread>

namespace rawpipe {

Classifier::Classifier(unsigned readers, TableDefault dflt)
    : readers_(new Reader[readers == 0 ? 1 : readers]), reader_count_(readers), default_(dflt) {}

Result<std::unique_ptr<Classifier>> Classifier::create(unsigned readers, std::vector<TableRule> rules,
                                                       TableDefault dflt) {
  std::unique_ptr<Classifier> c(new Classifier(readers, dflt));
  for (TableRule& r : rules) {
    if (r.id == 0) r.id = c->next_id_;
    c->next_id_ = std::max(c->next_id_, r.id + 1);
  }
  std::lock_guard lock(c->mu_);
  RAWPIPE_TRY(c->publish_locked(std::move(rules)));
  return c;
}

Classifier::~Classifier() {
  // Only called once no reader runs any more.
  delete current_.load(std::memory_order_relaxed);
  for (const Retired& r : retired_) delete r.table;
}

void Classifier::reader_online(unsigned reader) noexcept {
  readers_[reader].epoch.store(epoch_.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
  // Orders the store above before this thread's first acquire(): a publisher that saw us offline
  // (and so may free the table it replaced) published before we read current_.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void Classifier::reader_offline(unsigned reader) noexcept {
  // R2 as in quiesce(): reads of the last table happen before it can be freed.
  readers_[reader].epoch.store(kOffline, std::memory_order_release);
}

Status Classifier::publish_locked(std::vector<TableRule> next) {
  auto built = ClassifyTable::build(next, default_);
  if (!built) return built.status();
  const ClassifyTable* table = std::move(built).value().release();
  // R1: pairs with A1: the table is complete before any reader can load the pointer.
  const ClassifyTable* old = current_.exchange(table, std::memory_order_acq_rel);
  // R3: pairs with A2: a reader that sees the new epoch then sees `table` in its next acquire().
  std::uint64_t e = epoch_.fetch_add(1, std::memory_order_release) + 1;
  // Pairs with the fence in reader_online(): either we see that reader online, or it sees `table`.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  rules_ = std::move(next);
  ++published_;
  if (old) retired_.push_back({old, e});
  reclaim_locked();
  return Status::ok();
}

std::size_t Classifier::reclaim_locked() {
  std::uint64_t min_epoch = kOffline;
  for (unsigned i = 0; i < reader_count_; ++i)
    // A3: pairs with R2: the reader finished with every table retired before the epoch it reports.
    min_epoch = std::min(min_epoch, readers_[i].epoch.load(std::memory_order_acquire));
  std::erase_if(retired_, [min_epoch](const Retired& r) {
    if (r.epoch > min_epoch) return false;
    delete r.table;
    return true;
  });
  return retired_.size();
}

Result<std::uint32_t> Classifier::add(const SteeringRule& rule) {
  std::lock_guard lock(mu_);
  std::vector<TableRule> next = rules_;
  std::uint32_t id = next_id_;
  next.push_back({rule, id});
  RAWPIPE_TRY(publish_locked(std::move(next)));
  ++next_id_;
  return id;
}

Status Classifier::remove(std::uint32_t rule_id) {
  std::lock_guard lock(mu_);
  std::vector<TableRule> next = rules_;
  auto it = std::find_if(next.begin(), next.end(), [rule_id](const TableRule& r) { return r.id == rule_id; });
  if (it == next.end()) return Status::errorf("no rule with id {} (it may have been removed already)", rule_id);
  next.erase(it);
  return publish_locked(std::move(next));
}

std::vector<TableRule> Classifier::rules() const {
  std::lock_guard lock(mu_);
  return rules_;
}

std::size_t Classifier::reclaim() {
  std::lock_guard lock(mu_);
  return reclaim_locked();
}

void Classifier::synchronize() {
  for (;;) {
    if (reclaim() == 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::uint64_t Classifier::retire_epoch() noexcept {
  // R3 as in publish_locked(): a reader that reports the new epoch loads the new pointer next.
  const std::uint64_t e = epoch_.fetch_add(1, std::memory_order_release) + 1;
  // Pairs with the fence in reader_online(), as in publish_locked().
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return e;
}

bool Classifier::passed(std::uint64_t epoch) const noexcept {
  for (unsigned i = 0; i < reader_count_; ++i)
    // A3: pairs with R2: the reader finished with every object retired before the epoch it reports.
    if (readers_[i].epoch.load(std::memory_order_acquire) < epoch) return false;
  return true;
}

std::size_t Classifier::retired_count() const {
  std::lock_guard lock(mu_);
  return retired_.size();
}

std::uint64_t Classifier::tables_published() const {
  std::lock_guard lock(mu_);
  return published_;
}

}  // namespace rawpipe
