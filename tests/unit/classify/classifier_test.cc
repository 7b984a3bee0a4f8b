// Run-time rule changes: a control thread swaps tables while a reader thread classifies.
#include "pipeline/classify/classifier.hh"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "pipeline/parse/parse.hh"
#include "tests/support/test_port.hh"
#include "pipeline/port/driver.hh"
#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

SteeringRule rule(std::string_view text, std::uint16_t endpoint) {
  return SteeringRule{parse_match_rule(text).value(), endpoint, 0};
}

std::unique_ptr<Pool> make_pool(std::uint32_t count) {
  PoolConfig pc;
  pc.name = "classifier_test";
  pc.count = count;
  pc.huge_pages = HugePages::kNever;
  return std::move(Pool::create(pc)).value();
}

TEST(Classifier, AddAndRemovePublishNewTablesAndKeepIds) {
  auto c = std::move(Classifier::create(1, {{rule("udp dst *:1", 0), 0}}, {})).value();
  EXPECT_EQ(c->rules().size(), 1u);
  EXPECT_EQ(c->rules()[0].id, 1u);
  auto id = c->add(rule("udp dst *:2", 1));
  ASSERT_TRUE(id);
  EXPECT_EQ(id.value(), 2u);
  EXPECT_EQ(c->tables_published(), 2u);
  EXPECT_EQ(c->acquire(0)->wildcard_count(), 2u);
  EXPECT_TRUE(c->remove(1));
  EXPECT_EQ(c->acquire(0)->wildcard_count(), 1u);
  auto again = c->remove(1);
  ASSERT_FALSE(again);
  EXPECT_NE(again.message().find("no rule with id 1"), std::string::npos);
  // No reader was ever online, so nothing waits to be freed.
  EXPECT_EQ(c->retired_count(), 0u);
}

TEST(Classifier, AnOnlineReaderDelaysReclamationUntilItQuiesces) {
  auto c = std::move(Classifier::create(2, {}, {})).value();
  c->reader_online(0);
  const ClassifyTable* held = c->acquire(0);
  ASSERT_TRUE(c->add(rule("udp dst *:2", 1)));
  EXPECT_EQ(c->retired_count(), 1u);     // reader 0 may still use `held`
  EXPECT_EQ(held->wildcard_count(), 0u);  // and it is intact
  c->quiesce(0);
  EXPECT_EQ(c->reclaim(), 0u);
  EXPECT_EQ(c->acquire(0)->wildcard_count(), 1u);
  ASSERT_TRUE(c->add(rule("udp dst *:3", 1)));
  EXPECT_EQ(c->retired_count(), 1u);
  c->reader_offline(0);                   // offline readers hold nothing
  EXPECT_EQ(c->reclaim(), 0u);
}

// The reader classifies a fixed stream of two flows: A (rule always present -> endpoint 1) and B
// (rule toggled by the control thread -> endpoint 2, or the default drop). Every packet must get
// exactly one outcome and A must never be misdelivered while tables are swapped under the reader.
// To check that a change takes effect as soon as synchronize() returns, the control thread
// announces a stable phase (B present or absent) only after synchronize(), and before the next
// change it announces "changing" and waits until the reader has started a burst under that
// announcement, so no burst checked against a stable phase can straddle a change.
TEST(Classifier, RulesSwappedUnderTrafficLoseAndMisdeliverNothing) {
  auto pool = make_pool(256);
  auto c = std::move(Classifier::create(1, {{rule("udp dst 10.0.0.1:1000", 1), 0}}, {})).value();
  const testing::Frame fa = testing::udp_frame("10.9.9.9", 7, "10.0.0.1", 1000);
  const testing::Frame fb = testing::udp_frame("10.9.9.9", 7, "10.0.0.2", 2000);
  Mbuf* burst[32];
  for (int i = 0; i < 32; ++i) burst[i] = testing::load_frame(*pool, i % 2 ? fb : fa);
  parse_burst(burst, 32);

  // phase = sequence << 2 | state; state 0 changing, 1 B present, 2 B absent.
  constexpr std::uint32_t kChanging = 0, kPresent = 1, kAbsent = 2;
  std::atomic<std::uint32_t> phase{kChanging};
  std::atomic<std::uint32_t> ack{~0u};
  std::atomic<bool> done{false};
  std::uint64_t a_ok = 0, b_to_2 = 0, b_dropped = 0, wrong = 0, classified = 0, checked_bursts = 0;
  std::thread reader([&] {
    c->reader_online(0);
    while (!done.load(std::memory_order_acquire)) {
      // Acquire: pairs with the control thread's release of phase after synchronize().
      const std::uint32_t p = phase.load(std::memory_order_acquire);
      ack.store(p, std::memory_order_release);
      const ClassifyTable* t = c->acquire(0);
      for (Mbuf* m : burst) {
        m->drop_reason = 0;
        m->endpoint = Mbuf::kNoEndpoint;
      }
      t->classify_burst(burst, 32);
      const std::uint32_t state = p & 3;
      checked_bursts += state != kChanging;
      for (int i = 0; i < 32; ++i) {
        ++classified;
        Mbuf* m = burst[i];
        if (i % 2 == 0) {
          (m->endpoint == 1 && m->drop_reason == 0) ? ++a_ok : ++wrong;
          continue;
        }
        bool to_2 = m->endpoint == 2 && m->drop_reason == 0;
        bool dropped = m->endpoint == Mbuf::kNoEndpoint && m->drop_reason == static_cast<std::uint8_t>(DropReason::kNoMatch);
        to_2 ? ++b_to_2 : dropped ? ++b_dropped : ++wrong;
        if ((state == kPresent && !to_2) || (state == kAbsent && !dropped)) ++wrong;
      }
      c->quiesce(0);
    }
    c->reader_offline(0);
  });

  auto announce = [&](std::uint32_t value) {
    phase.store(value, std::memory_order_release);
    while (ack.load(std::memory_order_acquire) != value) std::this_thread::yield();
  };
  constexpr std::uint32_t kRounds = 200;
  std::uint32_t seq = 0;
  for (std::uint32_t r = 0; r < kRounds; ++r) {
    auto id = c->add(rule("udp dst 10.0.0.2:2000", 2));
    ASSERT_TRUE(id);
    c->synchronize();
    announce(++seq << 2 | kPresent);
    announce(++seq << 2 | kChanging);
    ASSERT_TRUE(c->remove(id.value()));
    c->synchronize();
    announce(++seq << 2 | kAbsent);
    announce(++seq << 2 | kChanging);
  }
  done.store(true, std::memory_order_release);
  reader.join();

  EXPECT_EQ(wrong, 0u) << "a_ok " << a_ok << " b_to_2 " << b_to_2 << " b_dropped " << b_dropped << " classified " << classified;
  EXPECT_EQ(a_ok + b_to_2 + b_dropped, classified);
  EXPECT_EQ(a_ok * 2, classified);
  EXPECT_GE(checked_bursts, 2u * kRounds);
  EXPECT_EQ(c->tables_published(), 1u + 2u * kRounds);
  EXPECT_EQ(c->reclaim(), 0u);  // every retired table freed once the reader went offline
  mbuf_free_bulk(burst, 32);
  EXPECT_EQ(pool->in_use(), 0u);
}

}  // namespace
}  // namespace rawpipe
