// The stats segment of a running pipeline, read through the reader API while synth ports run,
// agrees with the pipeline's own accounting at stop; the seqlock never hands out a torn document.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/ops/publisher.hh"
#include "rawpipe/shm_stats.hh"
#include "pipeline/port/registry.hh"

namespace rawpipe::ops {
namespace {

const char* kConfig = R"(
[run]
default_action = "drop"

[[pools]]
name = "rx"
count = 4096

[[ports]]
name = "gen"
pmd = "synth"
packets = 200000
ipv4_dst = "239.1.1.1"
dst_addrs = 2

[[endpoints]]
name = "sinked"
action = "sink"
match = ["udp dst 239.1.1.1:5000"]

[[lcores]]
rx = ["gen:0"]
)";

TEST(ShmStats, SegmentIsPrivateAndTornReadsAreRejected) {
  auto w = ShmStatsWriter::create("ops-test-seqlock");
  ASSERT_TRUE(w) << w.message();
  struct stat st {};
  ASSERT_EQ(::stat(w->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto r = ShmStatsReader::open("ops-test-seqlock");
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->pid(), static_cast<std::uint32_t>(getpid()));
  auto by_pid = ShmStatsReader::open(std::to_string(getpid()));
  ASSERT_TRUE(by_pid) << by_pid.message();
  EXPECT_TRUE(r->read()->empty());

  // Each document repeats the letter its length selects: a torn copy mixes letters or lengths.
  std::atomic<bool> done{false};
  std::atomic<int> checked{0};
  std::thread writer([&] {
    // Keep publishing until the reader has checked enough copies taken during writes.
    for (int i = 0; checked.load() < 2000 && i < 50'000'000; ++i) {
      const std::size_t len = 100 + static_cast<std::size_t>(i % 900);
      ASSERT_TRUE(w->publish(std::string(len, char('a' + len % 26))));
    }
    done = true;
  });
  while (!done) {
    auto text = r->read();
    // A reader may give up (with a message) while this writer publishes without pausing, which
    // a real publisher (once per interval) never does; that is not a torn read, so try again.
    if (!text) continue;
    if (text->empty()) continue;
    const char c = (*text)[0];
    ASSERT_EQ(c, char('a' + text->size() % 26));
    ASSERT_EQ(text->find_first_not_of(c), std::string::npos);
    ++checked;
  }
  writer.join();
  EXPECT_GT(checked, 0);
  const std::string path = w->path();
  *w = ShmStatsWriter();
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the segment is removed with its writer";
}

// The writer's side of the seqlock, held from outside as a preempted publisher would hold it.
class PublishInProgress {
 public:
  explicit PublishInProgress(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR);
    EXPECT_GE(fd, 0) << path;
    void* p = ::mmap(nullptr, sizeof(ShmStatsHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    EXPECT_NE(p, MAP_FAILED);
    header_ = static_cast<ShmStatsHeader*>(p);
    header_->seq.fetch_add(1);  // odd: a publish has begun
  }
  void end() {
    if (header_) header_->seq.fetch_add(1);
    if (header_) ::munmap(header_, sizeof(ShmStatsHeader));
    header_ = nullptr;
  }
  ~PublishInProgress() { end(); }

 private:
  ShmStatsHeader* header_ = nullptr;
};

// A segment with one document published, and a reader of it.
struct PublishedSegment {
  explicit PublishedSegment(const char* name, std::string_view document) {
    auto created = ShmStatsWriter::create(name);
    EXPECT_TRUE(created) << created.message();
    if (created) writer = std::move(*created);
    EXPECT_TRUE(writer.publish(document));
    auto opened = ShmStatsReader::open(name);
    EXPECT_TRUE(opened) << opened.message();
    if (opened) reader = std::move(*opened);
  }
  ShmStatsWriter writer;
  ShmStatsReader reader;
};

TEST(ShmStats, ReaderWaitsOutAWriterPreemptedMidPublish) {
  PublishedSegment seg("ops-test-preempted", "{\"n\":1}");
  ASSERT_FALSE(::testing::Test::HasFailure());

  // The writer is off its CPU for 300 ms in the middle of a publish; the reader gets the document
  // once it resumes, and does not burn its own CPU meanwhile.
  PublishInProgress stalled(seg.writer.path());
  std::thread resume([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stalled.end();
  });
  const std::clock_t cpu_before = std::clock();
  auto text = seg.reader.read();
  const double cpu_ms = 1000.0 * double(std::clock() - cpu_before) / CLOCKS_PER_SEC;
  resume.join();
  ASSERT_TRUE(text) << text.message();
  EXPECT_EQ(*text, "{\"n\":1}");
  EXPECT_LT(cpu_ms, 150) << "the reader spun while it waited";
}

TEST(ShmStats, ReaderOfAWriterStuckMidPublishGivesUpSayingWhy) {
  PublishedSegment seg("ops-test-stuck", "{}");
  ASSERT_FALSE(::testing::Test::HasFailure());
  PublishInProgress stuck(seg.writer.path());
  const auto t0 = std::chrono::steady_clock::now();
  auto text = seg.reader.read(std::chrono::milliseconds(200));
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(text);
  EXPECT_NE(text.message().find("in the middle of a publish for 200 ms"), std::string::npos) << text.message();
  EXPECT_NE(text.message().find(std::to_string(getpid())), std::string::npos) << text.message();
  EXPECT_GE(waited, std::chrono::milliseconds(200));
  EXPECT_LT(waited, std::chrono::seconds(5));
  stuck.end();
  auto after = seg.reader.read();
  ASSERT_TRUE(after) << after.message();
  EXPECT_EQ(*after, "{}");
}

TEST(ShmStats, ReaderOfAWriterKilledMidPublishSaysTheSegmentIsStale) {
  int to_parent[2], to_child[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  ASSERT_EQ(::pipe(to_child), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = ShmStatsWriter::create("ops-test-killed");
    char c = w && w->publish("{}") ? 'y' : 'n';
    (void)!::write(to_parent[1], &c, 1);
    (void)!::read(to_child[0], &c, 1);
    { PublishInProgress dies_here(w->path()); _exit(0); }  // no destructor runs: as SIGKILL leaves it
  }
  char ready = 0;
  ASSERT_EQ(::read(to_parent[0], &ready, 1), 1);
  ASSERT_EQ(ready, 'y');
  auto r = ShmStatsReader::open("ops-test-killed");
  ASSERT_TRUE(r) << r.message();
  (void)!::write(to_child[1], &ready, 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) ::close(fd);

  auto text = r->read(std::chrono::milliseconds(100));
  ASSERT_FALSE(text);
  EXPECT_NE(text.message().find(fmt::format("writer (pid {}) died in the middle of a publish", child)),
            std::string::npos)
      << text.message();
  // Only this test's leftovers: other test programs may hold stale segments on purpose.
  EXPECT_EQ(::unlink(shm_stats_path(child).c_str()), 0);
  EXPECT_EQ(::unlink(shm_stats_name_link("ops-test-killed").c_str()), 0);
}

TEST(ShmStats, RunningPipelineMatchesFinalAccounting) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  o.cpu_count = 2;
  auto loaded = load_config_string(kConfig, "ops.toml", o);
  ASSERT_TRUE(loaded) << loaded.message();
  auto created = Pipeline::create(loaded->plan);
  ASSERT_TRUE(created) << created.message();
  Pipeline& pipe = *created.value();
  ASSERT_TRUE(pipe.start());
  StatsPublisher pub;
  ASSERT_TRUE(pub.start(pipe, "ops-test-run", std::chrono::milliseconds(10)));
  auto reader = ShmStatsReader::open("ops-test-run");
  ASSERT_TRUE(reader) << reader.message();

  // While running: totals never go backwards and each document is balanced per lcore.
  std::uint64_t last_rx = 0;
  int seen_running = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // Until the port has sent everything and at least one running document was read: a fast machine
  // can generate all packets before the publisher's first interval ends.
  while ((pipe.accounting().rx_packets < 200000 || seen_running == 0) && std::chrono::steady_clock::now() < deadline) {
    auto text = reader->read();
    ASSERT_TRUE(text) << text.message();
    auto doc = nlohmann::json::parse(*text);
    const std::uint64_t rx = doc["total"]["rx_packets"].get<std::uint64_t>();
    EXPECT_GE(rx, last_rx);
    last_rx = rx;
    if (doc["running"].get<bool>()) ++seen_running;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(seen_running, 0);
  ASSERT_TRUE(pipe.stop());
  pub.publish_now();
  auto text = reader->read();
  ASSERT_TRUE(text);
  auto doc = nlohmann::json::parse(*text);
  pub.stop();
  const Accounting a = pipe.accounting();
  EXPECT_EQ(a.rx_packets, 200000u);
  EXPECT_FALSE(doc["running"].get<bool>());
  EXPECT_EQ(doc["total"]["rx_packets"].get<std::uint64_t>(), a.rx_packets);
  EXPECT_EQ(doc["total"]["delivered"].get<std::uint64_t>(), a.delivered);
  EXPECT_EQ(doc["total"]["dropped"].get<std::uint64_t>(), a.dropped());
  EXPECT_EQ(doc["drops"]["pipeline_total"].get<std::uint64_t>(), a.dropped());
  EXPECT_EQ(doc["endpoints"][0]["delivered"].get<std::uint64_t>(), a.delivered_per_endpoint[0]);
  EXPECT_EQ(doc["drops"]["pipeline"]["classify"]["no_match"].get<std::uint64_t>(),
            a.drops[static_cast<std::size_t>(DropReason::kNoMatch)]);
  EXPECT_GT(a.drops[static_cast<std::size_t>(DropReason::kNoMatch)], 0u);  // the second destination
  EXPECT_EQ(doc["ports"][0]["pmd"].get<std::string>(), "synth");
  EXPECT_FALSE(doc["ports"][0]["path_report"].get<std::string>().empty());
  // The port's capabilities as it stated them: a synth port spreads flows (RSS), steers nothing,
  // verifies no checksum and stamps no packet.
  const auto& caps = doc["ports"][0]["caps"];
  EXPECT_TRUE(caps["rss"].get<bool>());
  EXPECT_FALSE(caps["flow_rules"].get<bool>());
  EXPECT_FALSE(caps["rx_checksum"].get<bool>());
  EXPECT_FALSE(caps["timestamps"].get<bool>());
  EXPECT_EQ(caps["max_rx_queues"].get<unsigned>(), pipe.port_caps(0).max_rx_queues);
}

// A pid that is certainly not running: a child that has exited and been reaped.
int dead_pid() {
  pid_t c = fork();
  if (c == 0) _exit(0);
  int st = 0;
  waitpid(c, &st, 0);
  return c;
}

std::string shm_file(const std::string& name) { return "/dev/shm/" + name; }

// A second pipeline with the same name leaves the live first one's link alone (and so cannot
// remove it when it ends); a dead one's link is taken over.
TEST(ShmStats, NameLinkBelongsToTheLivePipelineThatHasIt) {
  const std::string name = fmt::format("owner-test-{}", getpid());
  const std::string link = shm_stats_name_link(name);
  // pid 1 is alive and is not us: it stands for another running pipeline.
  ASSERT_EQ(symlink("rawpipe.1", link.c_str()), 0) << std::strerror(errno);
  {
    auto w = ShmStatsWriter::create(name);
    ASSERT_TRUE(w) << w.message();
    EXPECT_EQ(w->name_owner(), 1);
  }
  char target[64] = {};
  ASSERT_GT(readlink(link.c_str(), target, sizeof target - 1), 0) << "the writer removed a link it did not own";
  EXPECT_STREQ(target, "rawpipe.1");
  unlink(link.c_str());

  const int dead = dead_pid();
  ASSERT_EQ(symlink(fmt::format("rawpipe.{}", dead).c_str(), link.c_str()), 0);
  {
    auto w = ShmStatsWriter::create(name);
    ASSERT_TRUE(w) << w.message();
    EXPECT_EQ(w->name_owner(), 0);
    std::memset(target, 0, sizeof target);
    ASSERT_GT(readlink(link.c_str(), target, sizeof target - 1), 0);
    EXPECT_EQ(std::string(target), fmt::format("rawpipe.{}", getpid()));
  }
  EXPECT_NE(access(link.c_str(), F_OK), 0) << "the owner removes its link";
}

// What a SIGKILLed run leaves (its segment, its name link) is removed; a live process's is not,
// and only live segments are listed.
TEST(ShmStats, StaleSegmentsOfDeadProcessesAreRemovedLiveOnesKept) {
  const int dead = dead_pid();
  const std::string stale_seg = fmt::format("rawpipe.{}", dead);
  const std::string stale_link = shm_stats_name_link(fmt::format("stale-test-{}", getpid()));
  {
    int fd = shm_open(("/" + stale_seg).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    close(fd);
  }
  ASSERT_EQ(symlink(stale_seg.c_str(), stale_link.c_str()), 0);
  auto live = ShmStatsWriter::create(fmt::format("live-test-{}", getpid()));
  ASSERT_TRUE(live) << live.message();

  bool listed_dead = false, listed_self = false;
  for (const auto& s : live_stats_segments()) {
    listed_dead |= s.pid == dead;
    listed_self |= s.pid == getpid();
  }
  EXPECT_FALSE(listed_dead);
  EXPECT_TRUE(listed_self);

  const auto removed = remove_stale_stats_segments();
  std::string all;
  for (const auto& m : removed) all += m + "\n";
  EXPECT_NE(all.find(shm_file(stale_seg)), std::string::npos) << all;
  EXPECT_NE(all.find(stale_link), std::string::npos) << all;
  EXPECT_NE(access(shm_file(stale_seg).c_str(), F_OK), 0);
  EXPECT_NE(access(stale_link.c_str(), F_OK), 0);
  EXPECT_EQ(access(live->path().c_str(), F_OK), 0) << "a live process's segment was removed";
}

}  // namespace
}  // namespace rawpipe::ops
