// The Extra API's create(): the PMD registry hook, config errors, and the user allocator backing
// the pools of pipelines it builds (configs/default.toml, synth port).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>

#include "pipeline/extra/extra.hh"
#include "pipeline/port/registry.hh"

namespace rawpipe {
namespace {

const rawpipe_api_t* api() {
  const rawpipe_api_t* a = rawpipe_get_api(RAWPIPE_EXTRA_ABI_VERSION);
  EXPECT_NE(a, nullptr) << rawpipe_api_error();
  return a;
}

std::string build_root() {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir = n > 0 ? std::string(exe, static_cast<std::size_t>(n)) : std::string();
  for (int i = 0; i < 3; ++i) dir = dir.substr(0, dir.rfind('/'));  // <build>/tests/unit/<exe>
  return dir;
}

TEST(ExtraApi, CreateUsesTheBuiltInDriversAndReportsConfigErrors) {
  LoadOptions o;
  o.find_pmd = nullptr;
  extra_set_load_options(o);
  EXPECT_EQ(api()->create("/nonexistent.toml"), nullptr);
  extra_set_load_options({});
  EXPECT_EQ(api()->create("/nonexistent/rawpipe.toml"), nullptr);
  EXPECT_NE(std::string(api()->last_error(nullptr)).find("/nonexistent/rawpipe.toml"), std::string::npos)
      << api()->last_error(nullptr);
  extra_set_load_options({});
}

std::string source_file(const std::string& rel) {
  std::string f = __FILE__;  // absolute, or relative to the build root
  std::string dir = f.substr(0, f.rfind('/'));
  if (!f.empty() && f[0] != '/') {
    dir = build_root() + "/" + dir;
  }
  return dir + "/../../../" + rel;
}

struct AllocLog {
  std::atomic<int> allocs{0}, frees{0};
  std::size_t bytes = 0;
};
void* test_alloc(std::size_t bytes, void* ctx) {
  auto* log = static_cast<AllocLog*>(ctx);
  log->allocs.fetch_add(1);
  log->bytes += bytes;
  return std::aligned_alloc(4096, bytes);
}
void test_free(void* p, void* ctx) {
  static_cast<AllocLog*>(ctx)->frees.fetch_add(1);
  std::free(p);
}

TEST(ExtraApi, UserAllocatorBacksReceivePoolsOfCreatedPipelines) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  extra_set_load_options(o);
  AllocLog log;
  EXPECT_EQ(api()->set_allocator(&test_alloc, nullptr, &log, RAWPIPE_ALLOC_RX), -1);
  EXPECT_EQ(api()->set_allocator(&test_alloc, &test_free, &log, 8), -1);
  ASSERT_EQ(api()->set_allocator(&test_alloc, &test_free, &log, RAWPIPE_ALLOC_RX), 0);
  const std::string cfg = source_file("configs/default.toml");
  rawpipe_pipeline* h = api()->create(cfg.c_str());
  ASSERT_NE(h, nullptr) << api()->last_error(nullptr);
  EXPECT_EQ(log.allocs.load(), 1);
  EXPECT_EQ(log.bytes, 16384u * (2048u + 64u));  // configs/default.toml's one pool, slots padded by a line
  ASSERT_EQ(api()->start(h), 0) << api()->last_error(h);
  while (h->pipeline->snapshot().total.rx_packets < 1000) std::this_thread::yield();
  ASSERT_EQ(api()->stop(h), 0);
  api()->destroy(h);
  EXPECT_EQ(log.frees.load(), 1);
  // TX only: the receive pool keeps rawpipe's own memory.
  ASSERT_EQ(api()->set_allocator(&test_alloc, &test_free, &log, RAWPIPE_ALLOC_TX), 0);
  h = api()->create(cfg.c_str());
  ASSERT_NE(h, nullptr) << api()->last_error(nullptr);
  EXPECT_EQ(log.allocs.load(), 1);
  api()->destroy(h);
  EXPECT_EQ(api()->set_allocator(nullptr, nullptr, nullptr, 0), 0);
  extra_set_load_options({});
}

}  // namespace
}  // namespace rawpipe
