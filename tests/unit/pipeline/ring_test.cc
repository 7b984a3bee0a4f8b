#include "pipeline/ring/ring.hh"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace rawpipe {
namespace {

TEST(Ring, RejectsCapacityThatIsNotAPowerOfTwo) {
  auto r = SpscRing<int>::create(1000);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("power of two"), std::string::npos);
  EXPECT_FALSE(SpscRing<int>::create(0));
  EXPECT_TRUE(SpscRing<int>::create(1));
}

TEST(Ring, BurstTakesWhatFitsAndBulkIsAllOrNothing) {
  auto ring = std::move(SpscRing<int>::create(8)).value();
  int in[12];
  std::iota(in, in + 12, 0);
  EXPECT_FALSE(ring->enqueue_bulk(in, 9));
  EXPECT_EQ(ring->size(), 0u);
  EXPECT_EQ(ring->enqueue_burst(in, 12), 8u);
  EXPECT_EQ(ring->size(), 8u);
  EXPECT_EQ(ring->enqueue_burst(in, 1), 0u);
  int out[12] = {};
  EXPECT_FALSE(ring->dequeue_bulk(out, 9));
  EXPECT_EQ(ring->dequeue_burst(out, 12), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], i);
  EXPECT_TRUE(ring->empty());
}

TEST(Ring, OrderSurvivesIndexWrapAroundTheSlots) {
  auto ring = std::move(SpscRing<std::uint32_t>::create(4)).value();
  std::uint32_t next_in = 0, next_out = 0;
  for (int round = 0; round < 1000; ++round) {
    std::uint32_t in[3] = {next_in, next_in + 1, next_in + 2};
    unsigned n = ring->enqueue_burst(in, 3);
    next_in += n;
    std::uint32_t out[3];
    unsigned m = ring->dequeue_burst(out, 2);
    for (unsigned i = 0; i < m; ++i) ASSERT_EQ(out[i], next_out++);
  }
}

// The split receive (look, read ahead, take what was seen) never hands out more than the look
// found, keeps order across the wrap, and a look is the only thing that sees new elements.
TEST(Ring, SplitReceiveTakesOnlyWhatTheLookSaw) {
  auto ring = std::move(SpscRing<std::uint64_t>::create(64)).value();
  std::uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 500; ++round) {
    std::uint64_t in[13];
    for (auto& v : in) v = next_in++;
    const unsigned queued = ring->enqueue_burst(in, 5 + round % 9);
    next_in -= 13 - queued;
    const std::uint32_t before = ring->readable_seen();
    ring->read_ahead(3);
    EXPECT_EQ(ring->readable_seen(), before) << "read_ahead only fetches lines";
    const std::uint32_t seen = ring->look_readable();
    ASSERT_EQ(seen, next_in - next_out);
    // Take part of it, in odd sizes, then read ahead over the rest before the next round.
    std::uint64_t out[64];
    const unsigned take = seen == 0 ? 0 : seen / 2 + 1;
    ASSERT_EQ(ring->dequeue_burst(out, take), take);
    for (unsigned i = 0; i < take; ++i) ASSERT_EQ(out[i], next_out++);
    EXPECT_EQ(ring->readable_seen(), seen - take);
    ring->read_ahead(1);
    ring->read_ahead(64);
  }
  std::uint64_t rest[64];
  const unsigned left = ring->look_readable();
  ASSERT_EQ(ring->dequeue_burst(rest, 64), left);
  for (unsigned i = 0; i < left; ++i) ASSERT_EQ(rest[i], next_out++);
  EXPECT_EQ(next_out, next_in);
}

// consume_in_place hands the elements in order, as one span or two where they wrap past the
// end of the slots, never more than asked or than are queued, and frees exactly those slots.
TEST(Ring, ConsumeInPlaceHandsSpansInOrderAcrossTheWrap) {
  auto ring = std::move(SpscRing<std::uint32_t>::create(8)).value();
  std::uint32_t next_in = 0, next_out = 0;
  unsigned two_span_calls = 0;
  for (int round = 0; round < 200; ++round) {
    std::uint32_t in[8];
    for (auto& v : in) v = next_in++;
    const unsigned queued = ring->enqueue_burst(in, 1 + round % 8);
    next_in -= 8 - queued;
    const unsigned ask = 1 + round % 5;
    unsigned spans = 0, handed = 0;
    const unsigned got = ring->consume_in_place(ask, [&](const std::uint32_t* span, unsigned n) {
      ++spans;
      ASSERT_GT(n, 0u);
      for (unsigned i = 0; i < n; ++i) ASSERT_EQ(span[i], next_out++);
      handed += n;
    });
    ASSERT_EQ(got, handed);
    ASSERT_EQ(got, std::min<unsigned>(ask, next_in - (next_out - got)));
    ASSERT_LE(spans, 2u);
    two_span_calls += spans == 2;
    ASSERT_EQ(ring->size(), next_in - next_out) << "the handed slots are free again";
  }
  EXPECT_GT(two_span_calls, 0u) << "the test never made a span wrap";
  EXPECT_EQ(ring->consume_in_place(0, [](const std::uint32_t*, unsigned) { FAIL() << "nothing was asked"; }), 0u);
}

// A producer that holds back its tail (for a consumer on a distant core) fills slots the consumer
// cannot see until it publishes; the free space still counts them.
TEST(Ring, UnpublishedElementsStayInvisibleUntilPublished) {
  auto ring = std::move(SpscRing<std::uint32_t>::create(8)).value();
  const std::uint32_t in[6] = {1, 2, 3, 4, 5, 6};
  EXPECT_FALSE(ring->publish()) << "nothing to publish";
  ASSERT_EQ(ring->enqueue_burst_unpublished(in, 3), 3u);
  std::uint32_t out[8];
  EXPECT_EQ(ring->size(), 0u);
  EXPECT_EQ(ring->look_readable(), 0u);
  EXPECT_EQ(ring->dequeue_burst(out, 8), 0u);
  ASSERT_EQ(ring->enqueue_burst_unpublished(in + 3, 3), 3u);
  EXPECT_EQ(ring->unpublished(), 6u);
  EXPECT_EQ(ring->enqueue_burst(in, 6), 2u) << "held-back slots are taken: only 2 of 8 are left";
  EXPECT_EQ(ring->size(), 8u) << "a publishing enqueue publishes what was held back before it";
  ASSERT_EQ(ring->enqueue_burst_unpublished(in, 1), 0u);
  ASSERT_EQ(ring->dequeue_burst(out, 3), 3u);
  ASSERT_EQ(ring->enqueue_burst_unpublished(in, 2), 2u);
  EXPECT_EQ(ring->size(), 5u);
  EXPECT_EQ(ring->unpublished(), 2u);
  EXPECT_TRUE(ring->publish());
  EXPECT_EQ(ring->unpublished(), 0u);
  EXPECT_FALSE(ring->publish()) << "published already";
  ASSERT_EQ(ring->dequeue_burst(out, 8), 7u);
  const std::uint32_t expect[7] = {4, 5, 6, 1, 2, 1, 2};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(out[i], expect[i]) << i;
}

// A tail published with a streaming store is seen like a plain one, by this thread at once, and
// a plain publication after it (a consumer that came near) carries on from it.
TEST(Ring, StreamedTailsPublishLikePlainOnes) {
  using R = SpscRing<std::uint32_t>;
  auto ring = std::move(R::create(8192)).value();
  std::uint32_t in[R::kPlainTailEvery];
  std::iota(std::begin(in), std::end(in), 0u);
  std::uint32_t out[R::kPlainTailEvery];
  EXPECT_FALSE(ring->publish_streaming()) << "nothing to publish";
  ASSERT_EQ(ring->enqueue_burst_unpublished(in, 100), 100u);
  EXPECT_EQ(ring->look_readable(), 0u);
  EXPECT_TRUE(ring->publish_streaming());
  EXPECT_EQ(ring->unpublished(), 0u);
  EXPECT_FALSE(ring->publish_streaming()) << "published already";
  EXPECT_EQ(ring->look_readable(), 100u);
  EXPECT_EQ(ring->tail_seen(), 100u);
  // The next publication crosses the first mark and is stored plainly; the one after is streamed
  // again, and settle() leaves nothing in flight.
  ASSERT_EQ(ring->enqueue_burst_unpublished(in, R::kPlainTailEvery - 50), R::kPlainTailEvery - 50);
  EXPECT_TRUE(R::crosses_plain_mark(100, R::kPlainTailEvery + 50));
  EXPECT_TRUE(ring->publish_streaming());
  ASSERT_EQ(ring->enqueue_burst_unpublished(in, 10), 10u);
  EXPECT_FALSE(R::crosses_plain_mark(R::kPlainTailEvery + 50, R::kPlainTailEvery + 60));
  EXPECT_TRUE(ring->publish_streaming());
  ring->settle();
  EXPECT_EQ(ring->look_readable(), R::kPlainTailEvery + 60);
  ASSERT_EQ(ring->enqueue_burst(in, 5), 5u) << "a plain publication after a streamed one";
  EXPECT_EQ(ring->look_readable(), R::kPlainTailEvery + 65);
  std::uint32_t taken = 0;
  for (unsigned n; (n = ring->dequeue_burst(out, R::kPlainTailEvery)) != 0;) taken += n;
  EXPECT_EQ(taken, R::kPlainTailEvery + 65);
  // Marks are crossed across the wrap of the 32-bit indices too.
  EXPECT_TRUE(R::crosses_plain_mark(0xffffff00u, 0x10u));
  EXPECT_FALSE(R::crosses_plain_mark(0xffffff00u, 0xffffff80u));
  // The consumer times its look only when the tail it saw is this close to the next mark.
  EXPECT_TRUE(R::near_plain_mark(R::kPlainTailEvery - 512, 512));
  EXPECT_FALSE(R::near_plain_mark(R::kPlainTailEvery - 513, 512));
  EXPECT_FALSE(R::near_plain_mark(R::kPlainTailEvery, 512)) << "just past a mark, a whole interval to go";
  EXPECT_TRUE(R::near_plain_mark(0xffffffffu, 1)) << "the mark at the wrap of the indices";
}

template <typename RingT>
void run_producers_consumers(unsigned producers, unsigned consumers) {
  constexpr std::uint64_t kPerProducer = 200000;
  auto ring = std::move(RingT::create(256)).value();
  std::atomic<std::uint64_t> consumed{0};
  std::vector<std::vector<std::uint64_t>> seen(consumers);
  std::vector<std::thread> threads;
  for (unsigned p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      std::uint64_t v[16];
      std::uint64_t sent = 0;
      while (sent < kPerProducer) {
        unsigned n = 0;
        for (; n < 16 && sent + n < kPerProducer; ++n) v[n] = (std::uint64_t(p) << 32) | (sent + n);
        unsigned done = ring->enqueue_burst(v, n);
        sent += done;
        // Only the accepted prefix is consumed; retry the rest by rebuilding it from `sent`.
      }
    });
  }
  const std::uint64_t total = kPerProducer * producers;
  for (unsigned c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      std::uint64_t v[32];
      while (consumed.load(std::memory_order_relaxed) < total) {
        unsigned n = ring->dequeue_burst(v, 32);
        for (unsigned i = 0; i < n; ++i) seen[c].push_back(v[i]);
        consumed.fetch_add(n, std::memory_order_relaxed);
      }
    });
  }
  for (auto& t : threads) t.join();
  // Every value exactly once, and each producer's values in order within any one consumer.
  std::vector<std::uint64_t> all;
  for (auto& s : seen) {
    std::vector<std::uint64_t> last(producers, 0);
    std::vector<bool> any(producers, false);
    for (auto v : s) {
      unsigned p = unsigned(v >> 32);
      std::uint64_t seq = v & 0xffffffffu;
      if (any[p]) {
        ASSERT_GT(seq, last[p]);
      }
      any[p] = true;
      last[p] = seq;
    }
    all.insert(all.end(), s.begin(), s.end());
  }
  ASSERT_EQ(all.size(), total);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

TEST(Ring, SpscDeliversEverythingInOrder) { run_producers_consumers<SpscRing<std::uint64_t>>(1, 1); }
TEST(Ring, MpscDeliversEverythingOnceWithPerProducerOrder) {
  run_producers_consumers<MpscRing<std::uint64_t>>(3, 1);
}
TEST(Ring, MpmcDeliversEverythingOnce) { run_producers_consumers<MpmcRing<std::uint64_t>>(3, 2); }

// Operations of no elements between producers and consumers that move some. An empty claim on a
// multi-producer (or multi-consumer) ring once took the range [head, head): a claimer right after
// it started at the same index, published past it, and the empty one waited for its turn forever.
TEST(Ring, EmptyOperationsNeverWaitForATurnThatWasTaken) {
  auto ring = std::move(MpmcRing<std::uint64_t>::create(64)).value();
  constexpr unsigned kRounds = 200000;
  std::atomic<unsigned> finished{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      std::uint64_t v[4] = {1, 2, 3, 4};
      for (unsigned i = 0; i < kRounds; ++i) {
        (void)ring->enqueue_burst(v, 0);
        (void)ring->enqueue_burst(v, 4);
        (void)ring->dequeue_burst(v, 0);
        (void)ring->dequeue_burst(v, 4);
      }
      finished.fetch_add(1);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (finished.load() < threads.size() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (finished.load() < threads.size()) {
    ADD_FAILURE() << "a thread is still waiting for its turn after 30 s";
    std::abort();  // the waiting thread cannot be joined
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ring->enqueue_burst(nullptr, 0), 0u);
  EXPECT_EQ(ring->dequeue_burst(nullptr, 0), 0u);
}

// A lending ring's elements, as the endpoint rings carry them: pointers the consumer borrows and
// gives back, which the producer then frees from its own slots.
class LendingRingTest : public ::testing::Test {
 protected:
  int items_[64] = {};
  int* at(unsigned i) { return &items_[i]; }
  // Reclaims up to `max` slots; returns what they held, blanks as nullptr.
  std::vector<int*> reclaim(LendingRing<int*>& ring, unsigned max = 64) {
    std::vector<int*> out;
    (void)ring.reclaim(max, [&](int* const* slots, unsigned n) { out.insert(out.end(), slots, slots + n); });
    return out;
  }
};

TEST_F(LendingRingTest, LoansTakeNoQueueRoomAndGivenBackSlotsWaitForReclaim) {
  auto ring = std::move(LendingRing<int*>::create(4)).value();
  EXPECT_EQ(ring->capacity(), 4u);
  int* in[8];
  for (unsigned i = 0; i < 8; ++i) in[i] = at(i);
  ASSERT_EQ(ring->enqueue_burst(in, 8), 4u);
  EXPECT_EQ(ring->enqueue_burst(in, 1), 0u) << "the queue is full";
  int* out[4] = {};
  ASSERT_EQ(ring->lend_burst(out, 4), 4u);
  EXPECT_EQ(ring->lent(), 4u);
  EXPECT_EQ(ring->size(), 0u) << "what is on loan is no longer queued";
  ASSERT_EQ(ring->enqueue_burst(in + 4, 4), 4u) << "loans take no queue room";
  EXPECT_EQ(ring->give_back(out, 3), 3u);
  int* later[4] = {};
  ASSERT_EQ(ring->lend_burst(later, 4), 4u);
  EXPECT_EQ(later[0], at(4));
  EXPECT_EQ(ring->lent(), 5u);
  EXPECT_EQ(ring->enqueue_burst(in, 1), 0u) << "given back is not free until reclaimed";
  EXPECT_EQ(reclaim(*ring), (std::vector<int*>{at(0), at(1), at(2)}));
  EXPECT_TRUE(reclaim(*ring).empty()) << "each slot is reclaimed once";
  ASSERT_EQ(ring->enqueue_burst(in, 4), 3u) << "only the reclaimed slots are free";
  EXPECT_EQ(ring->give_back(out + 3, 1), 1u);
  EXPECT_EQ(ring->give_back(later, 4), 4u);
  EXPECT_EQ(reclaim(*ring, 2), (std::vector<int*>{at(3), at(4)}));
  EXPECT_EQ(reclaim(*ring), (std::vector<int*>{at(5), at(6), at(7)}));
  // The three queued last sit at the start of the slots again.
  ASSERT_EQ(ring->lend_burst(out, 4), 3u);
  EXPECT_EQ(ring->give_back(out, 3), 3u);
  EXPECT_EQ(reclaim(*ring), (std::vector<int*>{at(0), at(1), at(2)}));
  EXPECT_EQ(ring->lent(), 0u);
}

TEST_F(LendingRingTest, GiveBackTakesOnlyTheInOrderPrefixAndKeptLoansAreBlank) {
  auto ring = std::move(LendingRing<int*>::create(8)).value();
  int* in[6];
  for (unsigned i = 0; i < 6; ++i) in[i] = at(i);
  ASSERT_EQ(ring->enqueue_burst(in, 6), 6u);
  int* out[6] = {};
  ASSERT_EQ(ring->lend_burst(out, 4), 4u);
  int* const skips_one[] = {at(0), at(2)};
  EXPECT_EQ(ring->give_back(skips_one, 2), 1u);
  int* const not_lent[] = {at(4)};
  EXPECT_EQ(ring->give_back(not_lent, 1), 0u) << "queued but not lent";
  int* const foreign[] = {at(40)};
  EXPECT_EQ(ring->give_back(foreign, 1), 0u);
  ring->keep_lent();
  EXPECT_EQ(ring->lent(), 0u);
  EXPECT_EQ(reclaim(*ring), (std::vector<int*>{at(0), nullptr, nullptr, nullptr}));
  // A take for good (dequeue) keeps what was on loan with it.
  ASSERT_EQ(ring->lend_burst(out, 1), 1u);
  ASSERT_EQ(ring->dequeue_burst(out, 1), 1u);
  EXPECT_EQ(out[0], at(5));
  EXPECT_EQ(ring->lent(), 0u);
  EXPECT_EQ(reclaim(*ring), (std::vector<int*>{nullptr, nullptr}));
  EXPECT_EQ(ring->enqueue_burst(in, 6), 6u) << "every slot is free again";
}

TEST_F(LendingRingTest, GiveBackStopsAtAMismatchInTheSecondSpanOfAWrap) {
  auto ring = std::move(LendingRing<int*>::create(4)).value();  // 8 slots
  int* in[4];
  for (unsigned i = 0; i < 4; ++i) in[i] = at(i);
  int* out[4] = {};
  for (unsigned n : {4u, 2u}) {  // moves the indices to slot 6
    ASSERT_EQ(ring->enqueue_burst(in, n), n);
    ASSERT_EQ(ring->lend_burst(out, n), n);
    ASSERT_EQ(ring->give_back(out, n), n);
    ASSERT_EQ(reclaim(*ring).size(), n);
  }
  ASSERT_EQ(ring->enqueue_burst(in, 4), 4u);  // slots 6, 7, 0, 1
  ASSERT_EQ(ring->lend_burst(out, 4), 4u);
  int* back[4] = {out[0], out[1], out[2], at(33)};
  EXPECT_EQ(ring->give_back(back, 4), 3u);
  EXPECT_EQ(ring->give_back(out + 3, 1), 1u);
  EXPECT_EQ(reclaim(*ring), (std::vector<int*>{at(0), at(1), at(2), at(3)}));
}

// How the producer of the concurrency test below publishes: with every burst, as for a near
// consumer; or, as for a far one, held back and published every few bursts with a streaming store
// (a plain one across each mark), and now and then plainly, as when the consumer comes near.
enum class Publication { kEveryBurst, kHeldAndStreamed };

// One thread lends and gives back, mostly in order, now and then keeping a loan or giving a
// burst back in a different order; the other queues and reclaims. Every element must reach the
// producer's reclaim exactly once unless the consumer kept it, and arrive at the consumer in order.
void lend_and_reclaim_concurrently(Publication publication) {
  constexpr unsigned kItems = 300000;
  std::vector<int> items(kItems);
  std::vector<std::uint8_t> reclaimed(kItems, 0);
  std::vector<std::uint8_t> kept(kItems, 0);
  auto ring = std::move(LendingRing<int*>::create(64)).value();
  std::atomic<bool> consumer_done{false};
  std::thread producer([&] {
    unsigned sent = 0;
    unsigned bursts = 0;
    auto on_reclaim = [&](int* const* slots, unsigned n) {
      for (unsigned i = 0; i < n; ++i)
        if (slots[i]) ++reclaimed[static_cast<std::size_t>(slots[i] - items.data())];
    };
    // A consumer that failed stops early: then so does the producer, instead of waiting for room.
    while (sent < kItems && !consumer_done.load(std::memory_order_acquire)) {
      int* v[16];
      unsigned n = 0;
      for (; n < 16 && sent + n < kItems; ++n) v[n] = &items[sent + n];
      if (publication == Publication::kEveryBurst) {
        sent += ring->enqueue_burst(v, n);
      } else {
        sent += ring->enqueue_burst_unpublished(v, n);
        // Never wait for room with everything held back: the consumer could not give any back.
        if (++bursts % 97 == 0) (void)ring->publish();
        else if (bursts % 3 == 0 || ring->unpublished() >= ring->capacity() / 2) (void)ring->publish_streaming();
      }
      (void)ring->reclaim(32, on_reclaim);
    }
    (void)ring->publish_streaming();
    ring->settle();
    while (!consumer_done.load(std::memory_order_acquire)) (void)ring->reclaim(64, on_reclaim);
    (void)ring->reclaim(64, on_reclaim);
  });
  // Loans are always the newest elements received: [next - lent, next).
  std::size_t next = 0;
  auto keep_loans = [&] {
    for (std::size_t i = next - ring->lent(); i < next; ++i) ++kept[i];
    ring->keep_lent();
  };
  std::string failure;
  for (unsigned round = 0; next < kItems && failure.empty();) {
    int* got[24];
    const unsigned n = ring->lend_burst(got, 24);
    for (unsigned i = 0; i < n; ++i)
      if (got[i] != &items[next + i]) failure = fmt::format("element {} arrived as {}", next + i, got[i] - items.data());
    next += n;
    if (n == 0) continue;
    ++round;
    if (round % 13 == 0 && n > 1) {
      std::swap(got[0], got[n - 1]);
      if (ring->give_back(got, n) != 0) failure = "a burst given back out of order was taken";
      keep_loans();
    } else if (round % 7 == 0) {
      // The last one is held over into the next round, where it stands first and the mismatch
      // makes every loan kept.
      if (ring->give_back(got, n - 1) != n - 1) failure = "an in-order prefix was refused";
    } else if (ring->give_back(got, n) < n) {
      keep_loans();
    }
  }
  keep_loans();  // a loan held over from the last round
  consumer_done.store(true, std::memory_order_release);
  producer.join();
  ASSERT_EQ(failure, "");
  for (unsigned i = 0; i < kItems; ++i) ASSERT_EQ(reclaimed[i] + kept[i], 1) << "element " << i;
}

TEST(LendingRing, EveryElementIsReclaimedOnceOrKeptUnderConcurrency) {
  lend_and_reclaim_concurrently(Publication::kEveryBurst);
}

TEST(LendingRing, HeldAndStreamedTailsLoseAndRepeatNothingUnderConcurrency) {
  lend_and_reclaim_concurrently(Publication::kHeldAndStreamed);
}

static_assert(noexcept(std::declval<SpscRing<int>&>().enqueue_burst(nullptr, 0)));
static_assert(noexcept(std::declval<MpmcRing<int>&>().dequeue_burst(nullptr, 0)));

}  // namespace
}  // namespace rawpipe
