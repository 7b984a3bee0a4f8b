// Bounded lock-free ring of trivially copyable elements (normally buffer pointers).
//
// Capacity is a power of two; head and tail indices are free-running 32-bit counters masked on
// access, so the full capacity is usable and wrap needs no special case. Producer and consumer
// state sit on separate 128-byte ranges, and each side's published tail on one more. Each side caches the other side's last seen index and
// reloads it only when the cached value says the ring looks full (producer) or empty (consumer).
//
// The producer and consumer synchronisation are template policies chosen at construction:
//   SpscRing  - one producer thread, one consumer thread (lcore -> endpoint consumer)
//   MpscRing  - any number of producers, one consumer (frees from any thread into a pool)
//   MpmcRing  - any number of both (a pool's shared free list)
// A lending ring (LendingRing, SPSC only) hands its elements to the consumer on loan: the consumer
// gives them back in the order it received them by moving its tail past their slots, and the
// producer, which wrote those slots and still has them in its cache, reclaims them from there.
// Nothing travels back on a second ring. Elements the consumer keeps for good, or gives back out
// of order, are blanked in their slots (T{}) so that reclaim() passes them over.
// A single producer may also hold back its tail and publish it later, and write it past the caches
// for a consumer on a distant core (publish_streaming()).
// Multi-producer enqueue follows DPDK's rte_ring: claim a range by CAS on the head, fill it, then
// wait for earlier claimers to publish before moving the tail. That wait is bounded by the other
// producer's copy loop, never by a consumer.
//
// Burst operations move as many elements as possible and return the count; bulk operations move
// all n or none. All data-path calls are noexcept and never allocate.
#pragma once

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "rawpipe/compiler.hh"
#include "rawpipe/status.hh"

namespace rawpipe {

enum class Sync { kSingle, kMulti };

// ThreadSanitizer sees neither a streaming store nor an sfence as a release, so a build with it
// publishes every tail plainly, in the same C++ memory order, and still checks the protocol.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kRingStreamsTail = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kRingStreamsTail = false;
#else
inline constexpr bool kRingStreamsTail = true;
#endif
#else
inline constexpr bool kRingStreamsTail = true;
#endif

template <typename T, Sync kProd, Sync kCons, bool kLends = false>
class Ring {
  static_assert(std::is_trivially_copyable_v<T>, "ring elements are copied with memcpy semantics");
  static_assert(!kLends || (kProd == Sync::kSingle && kCons == Sync::kSingle), "only one producer can reclaim a loan");
  static_assert(!kLends || std::is_pointer_v<T>, "a blanked slot is a null pointer");

 public:
  // Control path: validates the capacity and allocates the slots once.
  static Result<std::unique_ptr<Ring>> create(std::uint32_t capacity) {
    if (!is_power_of_two(capacity) || capacity > (1u << 30))
      return Status::errorf("ring capacity {} is not a power of two between 1 and 2^30", capacity);
    // A lending ring has twice the slots: loans take slots but not queue room (enqueue()).
    return std::unique_ptr<Ring>(new Ring(kLends ? 2 * capacity : capacity));
  }

  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring() { ::operator delete[](slots_, std::align_val_t{kCacheLine}); }

  // Elements that can be queued at once (for a lending ring, besides what is on loan).
  std::uint32_t capacity() const noexcept { return kLends ? slot_count() / 2 : slot_count(); }

  // Elements currently queued, as seen from any thread; exact only when the ring is quiescent.
  std::uint32_t size() const noexcept {
    // Relaxed: a statistic, no data is read through it.
    std::uint32_t prod = prod_.tail.load(std::memory_order_relaxed);
    // A lending ring's tail stays behind what is on loan, which is no longer queued.
    std::uint32_t cons = (kLends ? cons_.head : cons_.tail).load(std::memory_order_relaxed);
    std::uint32_t used = prod - cons;
    return used > capacity() ? capacity() : used;
  }
  bool empty() const noexcept { return size() == 0; }

  [[nodiscard]] unsigned enqueue_burst(const T* objs, unsigned n) noexcept { return enqueue<false>(objs, n); }
  [[nodiscard]] bool enqueue_bulk(const T* objs, unsigned n) noexcept { return enqueue<true>(objs, n) == n; }
  [[nodiscard]] bool enqueue(const T& obj) noexcept { return enqueue<true>(&obj, 1) == 1; }

  // Single producer, batched publication: claims and fills slots as enqueue_burst does but leaves
  // the tail where it was, so the consumer sees none of them until publish(). A producer whose
  // consumer sits on a distant core publishes once per several bursts: each publication moves
  // the tail's line to that core and back, and a burst's worth of packets does not pay for it.
  [[nodiscard]] unsigned enqueue_burst_unpublished(const T* objs, unsigned n) noexcept {
    static_assert(kProd == Sync::kSingle, "only the single producer may hold back its tail");
    return enqueue<false, false>(objs, n);
  }
  // Single producer: elements enqueued and not yet published.
  std::uint32_t unpublished() const noexcept {
    static_assert(kProd == Sync::kSingle, "only the single producer may hold back its tail");
    // Relaxed: this thread's own store.
    return prod_.head.load(std::memory_order_relaxed) - prod_.published;
  }
  // Single producer: makes every element enqueued so far visible to the consumer. Returns whether
  // any was not yet (the tail moved).
  bool publish() noexcept {
    static_assert(kProd == Sync::kSingle, "only the single producer may hold back its tail");
    const std::uint32_t head = prod_.head.load(std::memory_order_relaxed);
    if (prod_.published == head) return false;
    store_tail(head);
    return true;
  }
  // Single producer, for a consumer on a distant core: publishes as publish() does, but writes
  // the tail with a non-temporal store. The consumer polls the tail, so its line sits in the
  // consumer's cache; a plain store must first take it back from there, and the stores behind it
  // wait a whole crossing in this core's store queue. A streaming store leaves the line to memory
  // and holds up nothing. The tail reaches the consumer when the core drains its write-combining
  // buffer: at once in practice, and at the latest with the next publication or settle().
  // A tail that crosses a multiple of kPlainTailEvery is stored plainly, so that the consumer
  // can still time a crossing between the cores (EndpointQueues::receive).
  bool publish_streaming() noexcept {
    static_assert(kProd == Sync::kSingle, "only the single producer may hold back its tail");
    const std::uint32_t head = prod_.head.load(std::memory_order_relaxed);
    if (prod_.published == head) return false;
    if (!kRingStreamsTail || crosses_plain_mark(prod_.published, head)) {
      store_tail(head);
      return true;
    }
    // R1 for a streaming store, which the release order of plain stores does not cover: the slot
    // stores, and an earlier streamed tail, are visible before this tail.
    _mm_sfence();
    prod_.published = head;
    prod_.streamed = true;
    _mm_stream_si32(reinterpret_cast<int*>(&prod_.tail), static_cast<int>(head));
    return true;
  }
  // Single producer: a tail written by publish_streaming() is visible when this returns, so an
  // idle producer leaves none waiting in its write-combining buffer.
  void settle() noexcept {
    static_assert(kProd == Sync::kSingle, "only the single producer may hold back its tail");
    if (!prod_.streamed) return;
    _mm_sfence();
    prod_.streamed = false;
  }
  // Tails that cross a multiple of this are stored plainly by publish_streaming().
  static constexpr std::uint32_t kPlainTailEvery = 2048;
  static constexpr bool crosses_plain_mark(std::uint32_t from, std::uint32_t to) noexcept {
    return ((from ^ to) & ~(kPlainTailEvery - 1)) != 0;
  }
  // Whether a tail at `tail` is within `lead` elements of the next plainly stored one.
  static constexpr bool near_plain_mark(std::uint32_t tail, std::uint32_t lead) noexcept {
    return kPlainTailEvery - (tail & (kPlainTailEvery - 1)) <= lead;
  }

  [[nodiscard]] unsigned dequeue_burst(T* objs, unsigned n) noexcept { return dequeue<false>(objs, n); }
  [[nodiscard]] bool dequeue_bulk(T* objs, unsigned n) noexcept { return dequeue<true>(objs, n) == n; }
  [[nodiscard]] bool dequeue(T& obj) noexcept { return dequeue<true>(&obj, 1) == 1; }

  // Single consumer: hands up to n readable elements to `take` where they lie in the ring (one
  // call per contiguous span, at most two), then frees their slots. For a consumer that only
  // reads them, such as a free of buffer pointers, this saves copying them out first. Returns how
  // many were handed.
  template <typename F>
  unsigned consume_in_place(unsigned n, F&& take) noexcept {
    static_assert(kCons == Sync::kSingle, "in-place reads need the only consumer");
    static_assert(!kLends, "a lending ring's tail says which slots the producer frees");
    std::uint32_t head;
    n = claim_single_consumer<false>(head, n);
    if (n == 0) return 0;
    for_each_span(head, n, [&](std::uint32_t at, unsigned, unsigned k) { take(static_cast<const T*>(&slots_[at]), k); });
    // R2, as in dequeue: the reads in `take` happen before the producer reuses the slots.
    cons_.tail.store(head + n, std::memory_order_release);
    return n;
  }

  // Lending ring, consumer: copies up to n readable elements out on loan; their slots stay
  // reserved until give_back() or keep_lent(). Returns how many.
  [[nodiscard]] unsigned lend_burst(T* objs, unsigned n) noexcept {
    static_assert(kLends, "only a lending ring lends");
    std::uint32_t head;
    n = claim_single_consumer<false>(head, n);
    if (n) copy_out(head, objs, n);
    return n;
  }
  // Lending ring, consumer: elements on loan.
  std::uint32_t lent() const noexcept {
    static_assert(kLends, "only a lending ring lends");
    // Relaxed: both are this thread's own stores.
    return cons_.head.load(std::memory_order_relaxed) - cons_.tail.load(std::memory_order_relaxed);
  }
  // Lending ring, consumer: gives back the longest prefix of objs that matches the oldest loans,
  // slot for slot, and returns its length. The slots were read by lend_burst(), so the comparison
  // reads this core's cache and writes only the tail.
  [[nodiscard]] unsigned give_back(const T* objs, unsigned n) noexcept {
    static_assert(kLends, "only a lending ring lends");
    const std::uint32_t tail = cons_.tail.load(std::memory_order_relaxed);
    const std::uint32_t on_loan = cons_.head.load(std::memory_order_relaxed) - tail;
    if (n > on_loan) n = on_loan;
    unsigned matched = 0;
    bool whole = true;
    for_each_span(tail, n, [&](std::uint32_t at, unsigned off, unsigned k) {
      if (!whole) return;
      if (std::memcmp(&slots_[at], objs + off, k * sizeof(T)) == 0) {
        matched += k;
        return;
      }
      whole = false;
      unsigned same = 0;
      while (same < k && slots_[at + same] == objs[off + same]) ++same;
      matched += same;
    });
    // R2, as in dequeue: our reads of the given-back elements happen before the producer reclaims.
    if (matched) cons_.tail.store(tail + matched, std::memory_order_release);
    return matched;
  }
  // Lending ring, consumer: everything on loan becomes the consumer's for good. Its slots are
  // blanked, so that the producer frees nothing from them, and handed back for reuse.
  void keep_lent() noexcept {
    static_assert(kLends, "only a lending ring lends");
    const std::uint32_t tail = cons_.tail.load(std::memory_order_relaxed);
    const std::uint32_t head = cons_.head.load(std::memory_order_relaxed);
    if (tail == head) return;
    for_each_span(tail, head - tail, [&](std::uint32_t at, unsigned, unsigned k) {
      std::fill_n(&slots_[at], k, T{});
    });
    // R2: the blanks are written before the producer reclaims these slots.
    cons_.tail.store(head, std::memory_order_release);
  }
  // Lending ring, producer: hands up to `max` given-back slots to `take` where they lie (one call
  // per contiguous span, blanked slots included as T{}) and makes them free for enqueues. This is
  // the only way a lending ring's producer learns of free room: enqueue does not look at the tail.
  template <typename F>
  unsigned reclaim(unsigned max, F&& take) noexcept {
    static_assert(kLends, "only a lending ring lends");
    // A1: pairs with R2 of give_back() and keep_lent(): their slot reads and blanks are done.
    const std::uint32_t tail = cons_.tail.load(std::memory_order_acquire);
    std::uint32_t n = tail - prod_.cached_cons;
    if (n > max) n = max;
    if (n == 0) return 0;
    for_each_span(prod_.cached_cons, n, [&](std::uint32_t at, unsigned, unsigned k) { take(static_cast<const T*>(&slots_[at]), k); });
    prod_.cached_cons += n;
    return n;
  }

  // Single consumer, split receive for a consumer that must not wait on the producer's core:
  // look_readable() reads the producer's tail (the one line that core keeps writing) and returns
  // what is readable; read_ahead() then asks for the slot lines of what that look found, a few
  // lines per call and without loading anything; readable_seen() says how much of it is left, and
  // a dequeue of no more than that copies from lines already fetched, touching nothing shared but
  // its own tail.
  std::uint32_t look_readable() noexcept {
    static_assert(kCons == Sync::kSingle, "the consumer-side cache is single-consumer state");
    // A2, as in dequeue: the slots up to the tail seen here are filled and visible.
    cons_.cached_prod = prod_.tail.load(std::memory_order_acquire);
    return readable_seen();
  }
  std::uint32_t readable_seen() const noexcept {
    static_assert(kCons == Sync::kSingle, "the consumer-side cache is single-consumer state");
    return cons_.cached_prod - cons_.head.load(std::memory_order_relaxed);
  }
  // Single consumer: the producer's tail as of the last look.
  std::uint32_t tail_seen() const noexcept {
    static_assert(kCons == Sync::kSingle, "the consumer-side cache is single-consumer state");
    return cons_.cached_prod;
  }
  // Lending ring, producer: asks for the line of the consumer's tail, which reclaim() loads next.
  void prefetch_given_back() const noexcept {
    static_assert(kLends, "only a lending ring's producer reads the consumer's tail");
    prefetch0(&cons_.tail);
  }
  // Single producer: asks, for writing, for the slot lines the next `slots` enqueues will fill,
  // as far as they are known to be free (the consumer's last seen tail), without loading anything.
  // The consumer read those lines last, so they sit in its core's cache: asked for now, they move
  // while the producer does other work, instead of stalling its next enqueue (or a fence after it).
  void write_ahead(unsigned slots) noexcept {
    static_assert(kProd == Sync::kSingle, "the producer-side cache is single-producer state");
    constexpr std::uint32_t kPerLine = kCacheLine / sizeof(T) ? kCacheLine / sizeof(T) : 1;
    const std::uint32_t head = prod_.head.load(std::memory_order_relaxed);
    const std::uint32_t free_slots = slot_count() - (head - prod_.cached_cons);
    const std::uint32_t n = slots < free_slots ? slots : free_slots;
    for (std::uint32_t off = 0; off < n;) {
      const std::uint32_t idx = (head + off) & mask_;
      prefetchw(&slots_[idx]);
      off += kPerLine - idx % kPerLine;
    }
  }
  void read_ahead(unsigned lines) noexcept {
    static_assert(kCons == Sync::kSingle, "the consumer-side cache is single-consumer state");
    constexpr std::uint32_t kPerLine = kCacheLine / sizeof(T) ? kCacheLine / sizeof(T) : 1;
    const std::uint32_t head = cons_.head.load(std::memory_order_relaxed);
    const std::uint32_t seen = cons_.cached_prod - head;
    std::uint32_t ahead = cons_.read_ahead - head;
    if (ahead > seen) ahead = 0;  // a dequeue went past the last read-ahead
    for (unsigned l = 0; l < lines && ahead < seen; ++l) {
      const std::uint32_t idx = (head + ahead) & mask_;
      prefetch0(&slots_[idx]);
      ahead += kPerLine - idx % kPerLine;
    }
    // A line only partly published is asked for again next time, with the rest of its elements.
    cons_.read_ahead = head + (ahead < seen ? ahead : seen);
  }

 private:
  explicit Ring(std::uint32_t slots)
      : mask_(slots - 1),
        slots_(static_cast<T*>(::operator new[](sizeof(T) * slots, std::align_val_t{kCacheLine}))) {}

  std::uint32_t slot_count() const noexcept { return mask_ + 1; }

  template <bool kAll, bool kPublish = true>
  unsigned enqueue(const T* objs, unsigned n) noexcept {
    std::uint32_t head;
    if constexpr (kProd == Sync::kSingle) {
      // Only this thread writes prod_.head; relaxed is enough for our own value.
      head = prod_.head.load(std::memory_order_relaxed);
      if constexpr (kLends) {
        // Queue room counts what the consumer has not received, as in a plain ring, so that
        // a consumer that frees its loans with mbuf_free_bulk (and so lets the port fill the
        // pool again) never shortens the queue: the loans live in the second half of the slots.
        std::uint32_t room = capacity() - (head - prod_.cached_received);
        if (room < n) {
          // Relaxed: the count bounds the queue only; slot reuse waits for reclaim() (A1 there).
          prod_.cached_received = cons_.head.load(std::memory_order_relaxed);
          room = capacity() - (head - prod_.cached_received);
          if (room < n) {
            if (kAll || room == 0) return 0;
            n = room;
          }
        }
      }
      std::uint32_t free_slots = slot_count() - (head - prod_.cached_cons);
      if (free_slots < n) {
        // A1: pairs with R2 (consumer's release of cons_.tail): slots it read are free to overwrite.
        // A lending ring's slots come free only through reclaim(), which frees what they hold.
        if constexpr (!kLends) prod_.cached_cons = cons_.tail.load(std::memory_order_acquire);
        free_slots = slot_count() - (head - prod_.cached_cons);
        if (free_slots < n) {
          if (kAll || free_slots == 0) return 0;
          n = free_slots;
        }
      }
      prod_.head.store(head + n, std::memory_order_relaxed);
    } else {
      // An empty claim would take no range of its own: a producer claiming after it would start
      // at the same index, publish past it, and leave it waiting for a tail that never comes back.
      if (n == 0) return 0;
      head = prod_.head.load(std::memory_order_relaxed);
      for (;;) {
        // A1: pairs with R2, as in the single-producer case.
        std::uint32_t cons = cons_.tail.load(std::memory_order_acquire);
        std::uint32_t free_slots = slot_count() - (head - cons);
        unsigned take = n;
        if (free_slots < take) {
          if (kAll || free_slots == 0) return 0;
          take = free_slots;
        }
        // Relaxed CAS: the claim only orders producers among themselves; publication is R1.
        if (prod_.head.compare_exchange_weak(head, head + take, std::memory_order_relaxed,
                                             std::memory_order_relaxed)) {
          n = take;
          break;
        }
      }
    }
    copy_in(head, objs, n);
    if constexpr (kProd == Sync::kMulti) {
      // Producers that claimed earlier ranges publish first, so the tail only ever covers filled slots.
      // A3: acquire pairs with R1 of the previous producer; keeps our tail store after theirs.
      wait_for_turn(prod_.tail, head);
    }
    // R1: pairs with A2 (consumer's acquire of prod_.tail): the slot writes above become visible.
    if constexpr (kPublish) {
      if constexpr (kProd == Sync::kSingle) store_tail(head + n);
      else prod_.tail.store(head + n, std::memory_order_release);
    }
    return n;
  }

  template <bool kAll>
  unsigned dequeue(T* objs, unsigned n) noexcept {
    std::uint32_t head;
    if constexpr (kLends) {
      // Taken for good, with whatever was on loan before.
      std::uint32_t at;
      n = claim_single_consumer<kAll>(at, n);
      if (n == 0) return 0;
      copy_out(at, objs, n);
      keep_lent();
      return n;
    } else if constexpr (kCons == Sync::kSingle) {
      n = claim_single_consumer<kAll>(head, n);
      if (n == 0) return 0;
    } else {
      if (n == 0) return 0;  // as in enqueue: an empty claim could wait forever for its turn
      head = cons_.head.load(std::memory_order_relaxed);
      for (;;) {
        // A2: pairs with R1.
        std::uint32_t prod = prod_.tail.load(std::memory_order_acquire);
        std::uint32_t avail = prod - head;
        unsigned take = n;
        if (avail < take) {
          if (kAll || avail == 0) return 0;
          take = avail;
        }
        if (cons_.head.compare_exchange_weak(head, head + take, std::memory_order_relaxed,
                                             std::memory_order_relaxed)) {
          n = take;
          break;
        }
      }
    }
    copy_out(head, objs, n);
    if constexpr (kCons == Sync::kMulti) {
      // A4: acquire pairs with R2 of the previous consumer, keeping tail moves in claim order.
      wait_for_turn(cons_.tail, head);
    }
    // R2: pairs with A1 (producer's acquire of cons_.tail): our slot reads happen before reuse.
    cons_.tail.store(head + n, std::memory_order_release);
    return n;
  }

  // The only consumer takes [head, head + n) for itself, n cut to what is readable (all or none
  // when kAll). Returns the n taken; the caller publishes the tail once it has read the slots.
  template <bool kAll>
  RAWPIPE_ALWAYS_INLINE unsigned claim_single_consumer(std::uint32_t& head, unsigned n) noexcept {
    head = cons_.head.load(std::memory_order_relaxed);
    std::uint32_t avail = cons_.cached_prod - head;
    if (avail < n) {
      // A2: pairs with R1: everything the producer wrote before publishing is visible.
      cons_.cached_prod = prod_.tail.load(std::memory_order_acquire);
      avail = cons_.cached_prod - head;
      if (avail < n) {
        if (kAll || avail == 0) return 0;
        n = avail;
      }
    }
    cons_.head.store(head + n, std::memory_order_relaxed);
    return n;
  }

  // Single producer: the plain publication of `tail` (R1, as in enqueue).
  RAWPIPE_ALWAYS_INLINE void store_tail(std::uint32_t tail) noexcept {
    // A streamed tail still in the write-combining buffer could otherwise land after this store
    // and move the tail back.
    if (prod_.streamed) [[unlikely]] {
      _mm_sfence();
      prod_.streamed = false;
    }
    prod_.published = tail;
    prod_.tail.store(tail, std::memory_order_release);
  }

  // Calls f(first slot, offset into the caller's array, count) for the one or two contiguous runs
  // of slots that hold elements [head, head + n).
  template <typename F>
  RAWPIPE_ALWAYS_INLINE void for_each_span(std::uint32_t head, unsigned n, F&& f) const noexcept {
    const std::uint32_t idx = head & mask_;
    const unsigned first = slot_count() - idx;
    if (RAWPIPE_LIKELY(n <= first)) {
      f(idx, 0u, n);
    } else {
      f(idx, 0u, first);
      f(0u, first, n - first);
    }
  }

  // Spins until the earlier claimer publishes. When threads outnumber cores the earlier claimer may
  // be descheduled mid-copy; after a bounded spin we yield the core so it can finish, instead of
  // burning our whole time slice (DPDK's MP ring has the same preemption hazard).
  static void wait_for_turn(const std::atomic<std::uint32_t>& tail, std::uint32_t head) noexcept {
    unsigned spins = 0;
    while (tail.load(std::memory_order_acquire) != head) {
      if (++spins < 256) {
        cpu_relax();
      } else {
        sched_yield();
        spins = 0;
      }
    }
  }

  // One block copy per contiguous span: libc's vector copy moves a burst of pointers in a few
  // full-line stores instead of one store per pointer, which keeps the store buffer short while
  // the slot lines are still on their way from the other core.
  RAWPIPE_ALWAYS_INLINE void copy_in(std::uint32_t head, const T* objs, unsigned n) noexcept {
    for_each_span(head, n, [&](std::uint32_t at, unsigned off, unsigned k) {
      std::memcpy(&slots_[at], objs + off, k * sizeof(T));
    });
  }

  RAWPIPE_ALWAYS_INLINE void copy_out(std::uint32_t head, T* objs, unsigned n) const noexcept {
    for_each_span(head, n, [&](std::uint32_t at, unsigned off, unsigned k) {
      std::memcpy(objs + off, &slots_[at], k * sizeof(T));
    });
  }

  // Each side's tail, which the other side polls, has a range of its own: a single producer
  // (consumer) then finds its head and cached index in its own cache on every call, instead of
  // missing on the line the other core just read the tail from.
  struct alignas(kFalseSharingRange) Producer {
    std::atomic<std::uint32_t> head{0};
    std::uint32_t cached_cons = 0;  // single-producer only; a lending ring's reclaim index
    std::uint32_t cached_received = 0;  // lending ring only: the consumer's head last seen
    // Single-producer only: the tail as this thread last stored it, read here rather than from
    // the tail's line, which a streaming store leaves out of this core's cache; and whether that
    // store was streamed and may not be visible yet.
    std::uint32_t published = 0;
    bool streamed = false;
    alignas(kFalseSharingRange) std::atomic<std::uint32_t> tail{0};
  };
  struct alignas(kFalseSharingRange) Consumer {
    std::atomic<std::uint32_t> head{0};
    std::uint32_t cached_prod = 0;  // single-consumer only
    std::uint32_t read_ahead = 0;   // single-consumer only: slots requested up to here
    alignas(kFalseSharingRange) std::atomic<std::uint32_t> tail{0};
  };

  const std::uint32_t mask_;
  T* const slots_;
  Producer prod_;
  Consumer cons_;
};

template <typename T>
using SpscRing = Ring<T, Sync::kSingle, Sync::kSingle>;
template <typename T>
using MpscRing = Ring<T, Sync::kMulti, Sync::kSingle>;
template <typename T>
using MpmcRing = Ring<T, Sync::kMulti, Sync::kMulti>;
template <typename T>
using LendingRing = Ring<T, Sync::kSingle, Sync::kSingle, true>;

}  // namespace rawpipe
