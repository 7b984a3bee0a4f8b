// Capture taps wired into the pipeline: exact frame counts per stage (rx, filtered, drops, drops of
// one reason, one port), several lcores feeding one file, rotation through the engine, and the
// [[taps]] config section (keys, cross-table checks, errors naming file, line and key).
#include <pcap/pcap.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "pipeline/capture/tap.hh"
#include "rawpipe/config.hh"
#include "rawpipe/pipeline.hh"
#include "pipeline/port/registry.hh"
#include "tests/support/test_port.hh"

namespace rawpipe {
namespace {

namespace fs = std::filesystem;
using testing::Frame;
using testing::TestPortConfig;
using testing::udp_frame;

struct Recs {
  std::uint64_t frames = 0;
  std::uint64_t dport_6000 = 0;  // UDP destination port 6000 (IPv4, untagged)
  std::uint64_t short_frames = 0;
};

Recs read_pcap(const std::string& file) {
  Recs r;
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(file.c_str(), err);
  EXPECT_NE(p, nullptr) << err;
  if (!p) return r;
  pcap_pkthdr* h;
  const u_char* d;
  while (pcap_next_ex(p, &h, &d) == 1) {
    ++r.frames;
    if (h->caplen >= 38 && d[36] == 0x17 && d[37] == 0x70) ++r.dport_6000;
    if (h->len < 14) ++r.short_frames;
  }
  pcap_close(p);
  return r;
}

class PipelineTaps : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("rawpipe-pipeline-taps-{}", getpid());
    fs::create_directories(dir_);
    plan_.source = "taps.toml";
    PoolPlan pp;
    pp.config.name = "rx";
    pp.config.count = 1024;
    pp.config.huge_pages = HugePages::kNever;
    plan_.pools.push_back(pp);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void add_port(const std::string& name, TestPortConfig cfg) {
    PortPlan p;
    p.name = name;
    p.id = static_cast<std::uint16_t>(plan_.ports.size());
    p.pmd = "test";
    p.spec = std::make_shared<testing::TestPortSpec>(std::move(cfg));
    p.pool = "rx";
    plan_.ports.push_back(p);
    LcorePlan l;
    l.id = static_cast<std::uint16_t>(plan_.lcores.size());
    l.rx = {{p.id, 0}};
    plan_.lcores.push_back(l);
  }
  TapConfig& add_tap(const std::string& name, TapStage stage) {
    TapConfig t;
    t.name = name;
    t.stage = stage;
    t.path = (dir_ / (name + ".pcap")).string();
    t.lane_bytes = 1 << 20;
    plan_.taps.push_back(t);
    return plan_.taps.back();
  }
  // Runs until every frame has an outcome; returns the accounting after stop().
  Accounting run(Pipeline& p, std::uint64_t expect_rx) {
    EXPECT_TRUE(p.start());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      PipelineSnapshot s = p.snapshot();
      if (s.total.rx_packets == expect_rx && s.total.delivered + s.total.transmitted + s.total.dropped() == expect_rx) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "rx " << s.total.rx_packets << " of " << expect_rx;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(p.stop());
    return p.accounting();
  }

  fs::path dir_;
  Plan plan_;
};

TEST_F(PipelineTaps, EachStageCapturesExactlyItsPackets) {
  // p0: 10 delivered, 3 unmatched, 2 runts; p1: 5 delivered. Twice over each.
  std::vector<Frame> q0, q1;
  for (int i = 0; i < 10; ++i) q0.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 6000));
  for (int i = 0; i < 3; ++i) q0.push_back(udp_frame("10.0.0.7", 1, "10.0.0.9", 7777));
  for (int i = 0; i < 2; ++i) q0.push_back(Frame(10, 0xab));
  for (int i = 0; i < 5; ++i) q1.push_back(udp_frame("10.0.0.8", static_cast<std::uint16_t>(i), "10.0.0.1", 6000));
  TestPortConfig c0, c1;
  c0.rx_frames = {q0};
  c0.repeat = 2;
  c1.rx_frames = {q1};
  c1.repeat = 2;
  add_port("p0", c0);
  add_port("p1", c1);
  EndpointPlan e;
  e.name = "sink";
  e.action = EndpointAction::kSink;
  e.match = {"udp dst 10.0.0.1:6000"};
  plan_.endpoints.push_back(e);
  EndpointPlan other;
  other.name = "other";
  other.id = 1;
  other.action = EndpointAction::kSink;
  other.match = {"udp dst 10.0.0.1:6001"};
  plan_.endpoints.push_back(other);
  add_tap("rx", TapStage::kRx);
  add_tap("filtered", TapStage::kFiltered);
  add_tap("drops", TapStage::kDrops).format = CaptureFormat::kPcapng;
  add_tap("nomatch", TapStage::kDrops).drop_reason_mask = 1ull << static_cast<unsigned>(DropReason::kNoMatch);
  TapConfig& p1 = add_tap("rx-p1", TapStage::kRx);
  p1.port = "p1";
  p1.port_id = 1;
  TapConfig& ep = add_tap("to-sink", TapStage::kFiltered);
  ep.endpoint = "sink";
  ep.endpoint_id = 0;
  TapConfig& none = add_tap("to-other", TapStage::kFiltered);
  none.endpoint = "other";
  none.endpoint_id = 1;

  auto created = Pipeline::create(plan_);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  ASSERT_EQ(p.taps().size(), 7u);
  Accounting a = run(p, 40);
  EXPECT_TRUE(a.balanced());
  EXPECT_EQ(a.delivered, 30u);
  EXPECT_EQ(a.drops[static_cast<unsigned>(DropReason::kNoMatch)], 6u);
  EXPECT_EQ(a.drops[static_cast<unsigned>(DropReason::kRuntEthernet)], 4u);

  struct Expect {
    const char* name;
    std::uint64_t frames, dport_6000, short_frames;
  };
  for (Expect x : {Expect{"rx", 40, 30, 4}, Expect{"filtered", 30, 30, 0}, Expect{"drops", 10, 0, 4},
                   Expect{"nomatch", 6, 0, 0}, Expect{"rx-p1", 10, 10, 0}, Expect{"to-sink", 30, 30, 0},
                   Expect{"to-other", 0, 0, 0}}) {
    SCOPED_TRACE(x.name);
    const TapWriter* w = nullptr;
    for (const TapWriter* t : p.taps())
      if (t->config().name == x.name) w = t;
    ASSERT_NE(w, nullptr);
    TapStats s = w->stats();
    EXPECT_EQ(s.captured, x.frames);
    EXPECT_EQ(s.dropped, 0u);
    EXPECT_EQ(s.written, x.frames);
    ASSERT_EQ(w->files().size(), 1u);
    Recs r = read_pcap(w->files()[0]);
    EXPECT_EQ(r.frames, x.frames);
    EXPECT_EQ(r.dport_6000, x.dport_6000);
    EXPECT_EQ(r.short_frames, x.short_frames);
    struct stat st {};
    ASSERT_EQ(stat(w->files()[0].c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
}

TEST_F(PipelineTaps, RotationThroughTheEngineKeepsEveryFrameOnce) {
  std::vector<Frame> q0;
  for (int i = 0; i < 50; ++i) q0.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 6000));
  TestPortConfig c0;
  c0.rx_frames = {q0};
  c0.repeat = 4;
  add_port("p0", c0);
  EndpointPlan e;
  e.name = "sink";
  e.action = EndpointAction::kSink;
  e.match = {"udp dst 10.0.0.1:6000"};
  plan_.endpoints.push_back(e);
  add_tap("rot", TapStage::kRx).rotate_bytes = 4096;
  auto created = Pipeline::create(plan_);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  Accounting a = run(p, 200);
  EXPECT_TRUE(a.balanced());
  auto files = p.taps()[0]->files();
  EXPECT_GE(files.size(), 4u);
  std::uint64_t total = 0;
  for (const auto& f : files) {
    EXPECT_LE(fs::file_size(f), 4096u);
    total += read_pcap(f).frames;
  }
  EXPECT_EQ(total, 200u);
  EXPECT_EQ(files[0], (dir_ / "rot-00000.pcap").string());
}

TEST_F(PipelineTaps, DropsDecidedInDispatchReachTheDropsTap) {
  // A ring endpoint nobody consumes (ring of 2) and an echo endpoint whose tx queue takes 3.
  std::vector<Frame> q0;
  for (int i = 0; i < 20; ++i) q0.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 6000));
  for (int i = 0; i < 10; ++i) q0.push_back(udp_frame("10.0.0.7", static_cast<std::uint16_t>(i), "10.0.0.1", 7007));
  TestPortConfig c0;
  c0.rx_frames = {q0};
  c0.tx_capacity = 3;
  add_port("p0", c0);
  EndpointPlan ring;
  ring.name = "ring";
  ring.action = EndpointAction::kRing;
  ring.ring_size = 2;
  ring.match = {"udp dst 10.0.0.1:6000"};
  plan_.endpoints.push_back(ring);
  EndpointPlan echo;
  echo.name = "echo";
  echo.id = 1;
  echo.action = EndpointAction::kEcho;
  echo.match = {"udp dst 10.0.0.1:7007"};
  plan_.endpoints.push_back(echo);
  add_tap("drops", TapStage::kDrops).format = CaptureFormat::kPcapng;
  add_tap("ringfull", TapStage::kDrops).drop_reason_mask = 1ull << static_cast<unsigned>(DropReason::kEndpointRingFull);
  auto created = Pipeline::create(plan_);
  ASSERT_TRUE(created) << created.message();
  Pipeline& p = *created.value();
  Accounting a = run(p, 30);
  EXPECT_TRUE(a.balanced());
  const std::uint64_t ring_full = a.drops[static_cast<unsigned>(DropReason::kEndpointRingFull)];
  const std::uint64_t tx_failed = a.drops[static_cast<unsigned>(DropReason::kTxFailed)];
  EXPECT_EQ(a.transmitted, 3u);
  EXPECT_EQ(tx_failed, 7u);
  EXPECT_GE(ring_full, 18u);
  EXPECT_EQ(a.dropped(), ring_full + tx_failed);
  EXPECT_EQ(read_pcap(p.taps()[0]->files()[0]).frames, ring_full + tx_failed);
  EXPECT_EQ(read_pcap(p.taps()[1]->files()[0]).frames, ring_full);
}

TEST_F(PipelineTaps, NoTapsNoFiles) {
  TestPortConfig c0;
  c0.rx_frames = {{udp_frame("10.0.0.7", 1, "10.0.0.1", 6000)}};
  add_port("p0", c0);
  EndpointPlan e;
  e.name = "sink";
  e.action = EndpointAction::kSink;
  e.match = {"udp dst 10.0.0.1:6000"};
  plan_.endpoints.push_back(e);
  auto created = Pipeline::create(plan_);
  ASSERT_TRUE(created) << created.message();
  EXPECT_TRUE(created.value()->taps().empty());
  EXPECT_TRUE(run(*created.value(), 1).balanced());
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(PipelineTaps, AnUnwritablePathFailsAtCreate) {
  TestPortConfig c0;
  add_port("p0", c0);
  TapConfig& t = add_tap("bad", TapStage::kRx);
  t.path = (dir_ / "no-such-dir" / "x.pcap").string();
  auto created = Pipeline::create(plan_);
  ASSERT_FALSE(created);
  EXPECT_NE(created.message().find("tap 'bad'"), std::string::npos) << created.message();
}

std::string synth_config(const std::string& taps) {
  return "[[pools]]\nname = 'rx'\ncount = 1024\n"
         "[[ports]]\nname = 's0'\npmd = 'synth'\n"
         "[[endpoints]]\nname = 'e'\naction = 'sink'\nmatch = ['udp dst *:5000']\n"
         "[[lcores]]\nrx = ['s0:0']\n" +
         taps;
}

Result<LoadedConfig> load(const std::string& text) {
  LoadOptions o;
  o.find_pmd = &find_pmd;
  return load_config_string(text, "taps.toml", o);
}

TEST(TapsSection, ReadsEveryKey) {
  auto c = load(synth_config(
      "[[taps]]\nname = 'd'\nstage = 'drops'\npath = '/tmp/d.pcapng'\nformat = 'pcapng'\nsnaplen = 128\n"
      "rotate_bytes = 8192\nrotate_seconds = 2.5\nmax_files = 3\nlane_bytes = 65536\ndrop_reasons = ['no_match']\n"
      "port = 's0'\n"
      "[[taps]]\npath = '/tmp/r.pcap'\n"
      "[[taps]]\nstage = 'filtered'\nendpoint = 'e'\npath = '/tmp/e.pcap'\n"));
  ASSERT_TRUE(c) << c.message();
  const auto& taps = c->plan.taps;
  ASSERT_EQ(taps.size(), 3u);
  EXPECT_EQ(taps[0].name, "d");
  EXPECT_EQ(taps[0].stage, TapStage::kDrops);
  EXPECT_EQ(taps[0].format, CaptureFormat::kPcapng);
  EXPECT_EQ(taps[0].snaplen, 128u);
  EXPECT_EQ(taps[0].rotate_bytes, 8192u);
  EXPECT_DOUBLE_EQ(taps[0].rotate_seconds, 2.5);
  EXPECT_EQ(taps[0].max_files, 3u);
  EXPECT_EQ(taps[0].lane_bytes, 65536u);
  EXPECT_EQ(taps[0].drop_reason_mask, 1ull << static_cast<unsigned>(DropReason::kNoMatch));
  EXPECT_EQ(taps[0].port_id, 0);
  EXPECT_EQ(taps[1].name, "taps[1]");
  EXPECT_EQ(taps[1].stage, TapStage::kRx);
  EXPECT_EQ(taps[1].format, CaptureFormat::kPcap);
  EXPECT_EQ(taps[1].port_id, -1);
  EXPECT_EQ(taps[1].endpoint_id, -1);
  EXPECT_EQ(taps[2].endpoint_id, 0);
}

TEST(TapsSection, ErrorsNameFileLineAndKey) {
  struct Case {
    std::string taps, expect;
  };
  for (const Case& x : {
           Case{"[[taps]]\npath = '/tmp/a.pcap'\nport = 'nope'\n", "taps.toml:15: taps[0]: key 'port'"},
           Case{"[[taps]]\npath = '/tmp/a.pcap'\nstage = 'tx'\n", "'stage'"},
           Case{"[[taps]]\npath = '/tmp/a.pcap'\n[[taps]]\npath = '/tmp/./a.pcap'\n", "already written by"},
           Case{"[[taps]]\nname = 'x'\npath = '/tmp/a.pcap'\n[[taps]]\nname = 'x'\npath = '/tmp/b.pcap'\n",
                "already used by"},
           Case{"[[taps]]\npath = '/tmp/a.pcap'\nrotate = 5\n", "'rotate'"},
           Case{"[[taps]]\nstage = 'rx'\n", "'path'"},
           Case{"[[taps]]\npath = '/tmp/a.pcap'\nendpoint = 'e'\n", "before classify"},
           Case{"[[taps]]\npath = '/tmp/a.pcap'\nstage = 'drops'\nendpoint = 'x'\n", "no [[endpoints]] table"},
       }) {
    auto c = load(synth_config(x.taps));
    ASSERT_FALSE(c) << x.taps;
    EXPECT_NE(c.message().find(x.expect), std::string::npos) << c.message();
  }
}

}  // namespace
}  // namespace rawpipe
