// SendPort::submit hands the lcore what fits in the port's hand-off ring and leaves the rest with
// the caller, as rte_eth_tx_burst leaves what it did not take with the application: the Extra
// API's send_burst returns that count and the caller sends the rest again or frees it.
#include "pipeline/send/send_port.hh"

#include <gtest/gtest.h>

#include <vector>

#include "pipeline/buf/pool.hh"

namespace rawpipe {
namespace {

TEST(SendPort, WhatTheRingCannotTakeStaysWithTheCaller) {
  PoolConfig c;
  c.name = "send";
  c.count = 128;
  c.cache_size = 0;
  c.huge_pages = HugePages::kNever;
  auto pool = Pool::create(c);
  ASSERT_TRUE(pool) << pool.message();
  SendPort sp;
  auto ring = MbufRing::create(32);
  ASSERT_TRUE(ring) << ring.message();
  sp.ring = std::move(ring).value();

  std::vector<Mbuf*> bufs(48);
  ASSERT_TRUE((*pool)->alloc_bulk(bufs.data(), 48));
  const unsigned k = sp.submit(bufs.data(), 48);
  ASSERT_LT(k, 48u);
  EXPECT_GE(k, 31u);
  EXPECT_EQ(sp.stats().ring_full, 48u - k);
  // The refused buffers were not freed: all 48 are still out of the pool, and each refused one
  // still has its one holder.
  EXPECT_EQ((*pool)->in_use(), 48u);
  for (unsigned i = k; i < 48; ++i) EXPECT_EQ(bufs[i]->refcnt.load(), 1u) << i;

  // The caller sends them again once the lcore has made room; here the ring is emptied by hand.
  std::vector<Mbuf*> taken(48);
  const unsigned drained = sp.ring->dequeue_burst(taken.data(), 48);
  EXPECT_EQ(drained, k);
  EXPECT_EQ(sp.submit(bufs.data() + k, 48 - k), 48 - k);
  const unsigned rest = sp.ring->dequeue_burst(taken.data() + drained, 48);
  EXPECT_EQ(drained + rest, 48u);
  mbuf_free_bulk(taken.data(), 48);
  EXPECT_EQ((*pool)->in_use(), 0u);
}

}  // namespace
}  // namespace rawpipe
