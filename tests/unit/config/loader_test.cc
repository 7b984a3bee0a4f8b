#include "rawpipe/config.hh"

#include <gtest/gtest.h>

#include <string>

#if __has_include(<xdp/xsk.h>)
#include <xdp/xsk.h>
#define RAWPIPE_TEST_HAS_LIBXDP 1
#endif

#include "pipeline/config/section.hh"
#include "pipeline/port/registry.hh"
#include "pipeline/port/driver.hh"

namespace rawpipe {
namespace {

// A driver that reads one key of its own, so the tests see the loader hand the port table to the
// driver and reject what neither read.
class FakeSpec final : public PortSpec {
 public:
  FakeSpec(std::uint16_t max_queues, bool frames, bool steers, bool posts)
      : max_queues_(max_queues), frames_(frames), steers_(steers), posts_(posts) {}
  Result<std::unique_ptr<Port>> open(const PortEnv&) const override { return Status::error("fake: not openable"); }
  std::uint16_t max_rx_queues() const override { return max_queues_; }
  bool needs_exact_pool_stride() const override { return frames_; }
  std::string unmatched_go_elsewhere() const override { return steers_ ? "fake steers matched traffic only" : ""; }
  std::uint64_t buffers_kept(std::uint16_t rx_queues, std::uint16_t, std::uint32_t rx_ring_size) const override {
    return posts_ ? std::uint64_t(rx_queues) * rx_ring_size : 0;
  }

 private:
  std::uint16_t max_queues_;
  bool frames_;
  bool steers_;
  bool posts_;
};

Result<std::unique_ptr<PortSpec>> parse_fake(ConfigSection& s) {
  auto max_queues = static_cast<std::uint16_t>(s.integer("max_queues", 1, 64, 4));
  bool frames = s.boolean("frames", false);  // like af_xdp: needs slots exactly buf_size apart
  bool steers = s.boolean("steers", false);  // like af_xdp in steer mode: unmatched traffic goes to the kernel
  bool posts = s.boolean("posts", false);    // like af_xdp's fill rings: keeps its ring's buffers
  if (!s.status()) return s.status();
  return std::unique_ptr<PortSpec>(new FakeSpec(max_queues, frames, steers, posts));
}

const PmdDriver kFake{"fake", "test driver", parse_fake};
// A driver whose library posts more receive descriptors by default, as libxdp does.
const PmdDriver kDeepFake{"deepfake", "test driver with 2048 receive descriptors by default", parse_fake, nullptr, 2048};

const PmdDriver* find_fake(std::string_view name) {
  if (name == "fake") return &kFake;
  return name == "deepfake" ? &kDeepFake : nullptr;
}

LoadOptions options() {
  LoadOptions o;
  o.find_pmd = find_fake;
  o.known_pmds = {"fake"};
  o.cpu_count = 2;
  return o;
}

// Line numbers in the expectations below refer to this text.
const std::string kValid = R"([run]
duration = 2.5
stats_interval = 0.5
default_action = "endpoint"
default_endpoint = "rest"
consumer_cpu = 1

[[pools]]
name = "rx"
count = 4096
buf_size = 2048

[[ports]]
name = "p0"
pmd = "fake"
rx_queues = 2
max_queues = 8

[[endpoints]]
name = "video"
action = "ring"
match = ["udp dst 239.1.1.1:5000"]
ring_size = 1024

[[endpoints]]
name = "rest"
action = "sink"

[[lcores]]
cpu = 0
rx = ["p0:0", "p0:1"]
burst = 64
)";

Result<LoadedConfig> load(const std::string& text) { return load_config_string(text, "t.toml", options()); }

std::string error_of(const std::string& text) {
  auto r = load(text);
  EXPECT_FALSE(r) << "config was accepted:\n" << text;
  return r ? std::string() : r.message();
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(ConfigLoader, ValidConfigBecomesAPlan) {
  auto r = load(kValid);
  ASSERT_TRUE(r) << r.message();
  const Plan& plan = r->plan;
  EXPECT_EQ(plan.source, "t.toml");
  EXPECT_DOUBLE_EQ(plan.duration_s, 2.5);
  EXPECT_DOUBLE_EQ(plan.stats_interval_s, 0.5);
  EXPECT_EQ(r->app.consumer_cpu, 1);
  ASSERT_EQ(plan.pools.size(), 1u);
  EXPECT_EQ(plan.pools[0].config.name, "rx");
  EXPECT_EQ(plan.pools[0].config.count, 4096u);
  ASSERT_EQ(plan.ports.size(), 1u);
  EXPECT_EQ(plan.ports[0].pool, "rx");  // the only pool is the default
  EXPECT_EQ(plan.ports[0].rx_queues, 2);
  EXPECT_EQ(plan.ports[0].where.line, 13);
  ASSERT_TRUE(plan.ports[0].spec);
  EXPECT_EQ(plan.ports[0].spec->max_rx_queues(), 8);
  ASSERT_EQ(plan.endpoints.size(), 2u);
  EXPECT_EQ(plan.endpoints[0].action, EndpointAction::kRing);
  EXPECT_EQ(plan.endpoints[0].ring_size, 1024u);
  EXPECT_EQ(plan.endpoints[1].action, EndpointAction::kSink);
  EXPECT_EQ(plan.default_action, DefaultAction::kEndpoint);
  EXPECT_EQ(plan.default_endpoint, 1);
  ASSERT_EQ(plan.lcores.size(), 1u);
  EXPECT_EQ(plan.lcores[0].cpu, 0);
  EXPECT_EQ(plan.lcores[0].burst, 64);
  ASSERT_EQ(plan.lcores[0].rx.size(), 2u);
  EXPECT_EQ(plan.lcores[0].rx[1].port, 0);
  EXPECT_EQ(plan.lcores[0].rx[1].queue, 1);
  EXPECT_NE(describe_plan(plan).find("port p0"), std::string::npos);
}

TEST(ConfigLoader, PoolsOfPortsThatNeedExactSlotsGetThem) {
  auto padded = load(kValid);
  ASSERT_TRUE(padded) << padded.message();
  EXPECT_FALSE(padded->plan.pools[0].config.exact_stride);
  auto exact = load(replace(kValid, "max_queues = 8\n", "max_queues = 8\nframes = true\n"));
  ASSERT_TRUE(exact) << exact.message();
  EXPECT_TRUE(exact->plan.pools[0].config.exact_stride);
}

TEST(ConfigLoader, RxRingSizeDefaultsToTheDriversOwn) {
  auto generic = load(kValid);
  ASSERT_TRUE(generic) << generic.message();
  EXPECT_EQ(generic->plan.ports[0].rx_ring_size, 1024u);
  auto deep = load(replace(kValid, "pmd = \"fake\"", "pmd = \"deepfake\""));
  ASSERT_TRUE(deep) << deep.message();
  EXPECT_EQ(deep->plan.ports[0].rx_ring_size, 2048u);
  EXPECT_EQ(deep->plan.ports[0].tx_ring_size, 1024u);
  auto set = load(replace(kValid, "pmd = \"fake\"", "pmd = \"deepfake\"\nrx_ring_size = 512"));
  ASSERT_TRUE(set) << set.message();
  EXPECT_EQ(set->plan.ports[0].rx_ring_size, 512u);
}

TEST(ConfigLoader, PoolSmallerThanWhatItsPortKeepsPostedIsRefused) {
  // Two queues of 2048 keep the whole pool of 4096: enough.
  const std::string deep = replace(kValid, "pmd = \"fake\"", "pmd = \"deepfake\"\nposts = true");
  auto fits = load(deep);
  ASSERT_TRUE(fits) << fits.message();
  EXPECT_EQ(error_of(replace(deep, "posts = true", "posts = true\nrx_ring_size = 4096")),
            "t.toml:17: ports[0] 'p0': key 'rx_ring_size': at 4096 the deepfake driver keeps 8192 buffers posted, "
            "more than pool 'rx' has (4096); raise the pool's count to at least 8192 or lower rx_ring_size");
  // A port that keeps none may have any ring.
  auto idle = load(replace(kValid, "rx_queues = 2", "rx_queues = 2\nrx_ring_size = 65536"));
  ASSERT_TRUE(idle) << idle.message();
  // Two ports on one pool: the pool's count is what to raise.
  std::string two = replace(deep, "[[endpoints]]",
                            "[[ports]]\nname = \"p1\"\npmd = \"deepfake\"\nposts = true\nrx_queues = 1\n\n[[endpoints]]");
  two = replace(two, "rx = [", "rx = [\"p1:0\", ");
  const std::string err = error_of(two);
  EXPECT_NE(err.find("pools[0] 'rx': key 'count': 4096 buffers, but ports 'p0', 'p1' keep 6144 posted between them"),
            std::string::npos)
      << err;
}

TEST(ConfigLoader, PoolWithoutACountHoldsWhatItsPortsAndLcoresDo) {
  const std::string unsized = replace(kValid, "count = 4096\n", "");
  // Two queues of 1024 and one transmit queue of 1024, a burst of 64 and a cache of 256: under the floor.
  auto small = load(unsized);
  ASSERT_TRUE(small) << small.message();
  EXPECT_EQ(small->plan.pools[0].config.count, 8192u);
  // Four queues keeping libxdp-sized rings posted, on two lcores: each descriptor, a burst per
  // queue each lcore polls and twice its cache (l3fwd's NB_MBUF with rawpipe's cache bound).
  std::string deep = replace(unsized, "pmd = \"fake\"", "pmd = \"deepfake\"\nposts = true");
  deep = replace(deep, "rx_queues = 2", "rx_queues = 4\ntx_queues = 2");
  deep = replace(deep, "rx = [\"p0:0\", \"p0:1\"]\nburst = 64", "rx = [\"p0:0\", \"p0:1\"]\nburst = 64\n\n"
                       "[[lcores]]\ncpu = 1\nrx = [\"p0:2\", \"p0:3\"]\nburst = 32");
  auto big = load(deep);
  ASSERT_TRUE(big) << big.message();
  EXPECT_EQ(big->plan.pools[0].config.count, 4u * 2048 + 2u * 1024 + (2 * 64 + 2 * 256) + (2 * 32 + 2 * 256));
  // A count given is kept, and checked against what the port keeps posted.
  EXPECT_NE(error_of(replace(deep, "buf_size = 2048", "buf_size = 2048\ncount = 8000"))
                .find("at 2048 the deepfake driver keeps 8192 buffers posted, more than pool 'rx' has (8000)"),
            std::string::npos);
  auto given = load(replace(deep, "buf_size = 2048", "buf_size = 2048\ncount = 9000"));
  ASSERT_TRUE(given) << given.message();
  EXPECT_EQ(given->plan.pools[0].config.count, 9000u);
}

TEST(ConfigLoader, PoolItsPortsKeepNearlyAllOfIsWarnedAbout) {
  // Two queues of 2048 posted from a pool of 4096, one lcore polling both with a burst of 64 and a cache of 256.
  const std::string deep = replace(kValid, "pmd = \"fake\"", "pmd = \"deepfake\"\nposts = true");
  auto full = load(deep);
  ASSERT_TRUE(full) << full.message();
  ASSERT_EQ(full->warnings.size(), 1u);
  EXPECT_EQ(full->warnings[0],
            "t.toml:10: pools[0] 'rx': key 'count': 4096 buffers, and its ports keep 4096 posted: the 0 left are fewer "
            "than the lcores polling them hold in bursts and caches (640), so a received frame can find no buffer to "
            "take its place and be dropped as rx_nombuf; raise count to at least 4736, or leave it out to have it sized");
  auto enough = load(replace(deep, "count = 4096", "count = 4736"));
  ASSERT_TRUE(enough) << enough.message();
  EXPECT_TRUE(enough->warnings.empty());
  // Ports that keep nothing posted take a buffer per frame received: nothing to warn about.
  auto idle = load(replace(kValid, "count = 4096", "count = 64"));
  ASSERT_TRUE(idle) << idle.message();
  EXPECT_TRUE(idle->warnings.empty());
}

TEST(ConfigLoader, Mlx5CyclicQueuesKeepTheirRingPostedStridingOnesDoNot) {
  if (!find_pmd("mlx5-model")) GTEST_SKIP() << "the mlx5 driver is not built into this library";
  const std::string text = R"([[pools]]
name = "rx"
count = 1024
[[ports]]
name = "m"
pmd = "mlx5-model"
rx_queues = 2
rx_ring_size = 1024
[[endpoints]]
name = "u"
action = "sink"
match = ["udp"]
[[lcores]]
cpu = 0
rx = ["m:0", "m:1"]
)";
  LoadOptions real;
  real.cpu_count = 2;
  auto cyclic = load_config_string(text, "m.toml", real);
  ASSERT_FALSE(cyclic);
  EXPECT_NE(cyclic.message().find("at 1024 the mlx5-model driver keeps 2048 buffers posted, more than pool 'rx' has "
                                  "(1024)"),
            std::string::npos)
      << cyclic.message();
  auto striding = load_config_string(replace(text, "rx_ring_size = 1024", "rx_ring_size = 1024\nstriding_rq = true"),
                                     "m.toml", real);
  EXPECT_TRUE(striding) << striding.message();
}

TEST(ConfigLoader, AfXdpDefaultsToLibxdpsRingSize) {
  const PmdDriver* af_xdp = find_pmd("af_xdp");
  if (!af_xdp) GTEST_SKIP() << "the af_xdp driver is not built into this library";
#ifdef RAWPIPE_TEST_HAS_LIBXDP
  // libxdp's default, which DPDK's net_af_xdp also takes: read from the installed header, so that
  // the test has no copy of the value to agree with.
  EXPECT_EQ(af_xdp->default_rx_ring_size, std::uint32_t{XSK_RING_CONS__DEFAULT_NUM_DESCS});
  EXPECT_NE(find_pmd("synth"), nullptr);
  EXPECT_EQ(find_pmd("synth")->default_rx_ring_size, kDefaultRxRingSize);
#else
  GTEST_SKIP() << "<xdp/xsk.h> is not installed, so libxdp's default cannot be read";
#endif
}

TEST(ConfigLoader, DefaultEndpointOnAPortThatSteersOnlyMatchedTrafficIsRefused) {
  const std::string msg = error_of(replace(kValid, "max_queues = 8\n", "max_queues = 8\nsteers = true\n"));
  EXPECT_NE(msg.find("key 'mode': [run] default_endpoint \"rest\" would receive nothing from port \"p0\": fake "
                     "steers matched traffic only"),
            std::string::npos)
      << msg;
  std::string no_default = replace(kValid, "default_action = \"endpoint\"\ndefault_endpoint = \"rest\"\n", "");
  no_default = replace(no_default, "name = \"rest\"\naction = \"sink\"\n", "name = \"rest\"\naction = \"sink\"\nmatch = [\"udp\"]\n");
  auto ok = load(replace(no_default, "max_queues = 8\n", "max_queues = 8\nsteers = true\n"));
  EXPECT_TRUE(ok) << ok.message();
  const std::string addr = error_of(
      replace(no_default, "max_queues = 8\n", "max_queues = 8\nsteers = true\naddresses = [\"10.0.0.1\"]\n"));
  EXPECT_NE(addr.find("key 'addresses': the pipeline cannot answer ARP/ND on port \"p0\""), std::string::npos) << addr;
}

TEST(ConfigLoader, MissingFileSaysSo) {
  auto r = load_config("/nonexistent/rawpipe.toml", options());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(), "/nonexistent/rawpipe.toml: cannot open the config file: No such file or directory");
}

TEST(ConfigLoader, SyntaxErrorNamesLine) {
  EXPECT_EQ(error_of("[run\n").substr(0, 9), "t.toml:1:");
}

TEST(ConfigLoader, DuplicatePoolName) {
  std::string text = replace(kValid, "[[ports]]", "[[pools]]\nname = \"rx\"\n\n[[ports]]\npool = \"rx\"");
  EXPECT_EQ(error_of(text), "t.toml:14: pools[1] 'rx': key 'name': pool name \"rx\" is already used by pools[0] 'rx'");
}

TEST(ConfigLoader, DuplicatePortName) {
  std::string text = replace(kValid, "[[endpoints]]", "[[ports]]\nname = \"p0\"\npmd = \"fake\"\n\n[[endpoints]]");
  // Both errors, one per line: the duplicate name, and its queue 0 that no lcore polls.
  EXPECT_EQ(error_of(text), "t.toml:20: ports[1] 'p0': key 'name': port name \"p0\" is already used by ports[0] 'p0'\n"
                            "t.toml:33: top level: key 'lcores': rx queue 0 of port \"p0\" (t.toml:19) is polled by no "
                            "lcore; add \"p0:0\" to an lcore's rx list");
}

TEST(ConfigLoader, DuplicateEndpointName) {
  std::string text = replace(kValid, "name = \"rest\"", "name = \"video\"");
  // The default endpoint's name no longer resolves, which is a reading error: the plan is not
  // validated (names unique, ...) until everything reads cleanly.
  EXPECT_EQ(error_of(text), "t.toml:5: [run]: key 'default_endpoint': no [[endpoints]] table is named \"rest\"");
  std::string dup = replace(kValid, "name = \"rest\"\naction = \"sink\"",
                            "name = \"rest\"\naction = \"sink\"\n\n[[endpoints]]\nname = \"video\"\nmatch = [\"udp\"]");
  EXPECT_EQ(error_of(dup), "t.toml:30: endpoints[2] 'video': key 'name': endpoint name \"video\" is already used by "
                           "endpoints[0] 'video'");
}

TEST(ConfigLoader, UnknownKeyInEachSection) {
  EXPECT_EQ(error_of(replace(kValid, "consumer_cpu = 1", "consumer_cpu = 1\nduratoin = 3")),
            "t.toml:7:1: [run]: unknown key 'duratoin' (did you mean \"duration\"?)");
  EXPECT_EQ(error_of(replace(kValid, "count = 4096", "count = 4096\nbufsize = 1")),
            "t.toml:11:1: pools[0] 'rx': unknown key 'bufsize' (did you mean \"buf_size\"?)");
  EXPECT_EQ(error_of(replace(kValid, "max_queues = 8", "max_queues = 8\nrate = 1")),
            "t.toml:18:1: ports[0] 'p0': unknown key 'rate' (`rawpipe config-ref ports` lists the keys this table "
            "takes)");
  EXPECT_EQ(error_of(replace(kValid, "ring_size = 1024", "ring_size = 1024\nprio = 1")),
            "t.toml:24:1: endpoints[0] 'video': unknown key 'prio' (`rawpipe config-ref endpoints` lists the keys this "
            "table takes)");
  EXPECT_EQ(error_of(replace(kValid, "burst = 64", "burst = 64\ncores = 2")), "t.toml:33:1: lcores[0]: unknown key 'cores' (`rawpipe config-ref lcores` lists the keys this table takes)");
  EXPECT_EQ(error_of(kValid + "[extra]\na = 1\n"), "t.toml:33:2: top level: unknown key 'extra' (`rawpipe config-ref top` lists the keys this table takes)");
}

TEST(ConfigLoader, DriverKeysAreCheckedByTheDriver) {
  EXPECT_EQ(error_of(replace(kValid, "max_queues = 8", "max_queues = 100")),
            "t.toml:17: ports[0] 'p0': key 'max_queues': expected an integer from 1 to 64, got 100");
}

TEST(ConfigLoader, RxQueuesBeyondTheDriversLimit) {
  EXPECT_EQ(error_of(replace(kValid, "max_queues = 8", "max_queues = 1")),
            "t.toml:16: ports[0] 'p0': key 'rx_queues': the fake driver supports at most 1 rx queue for this port, got 2");
}

TEST(ConfigLoader, UnknownPmdListsTheBuiltInOnes) {
  // Only the pmd error: the driver keys of a port without a driver are not reported as unknown.
  EXPECT_EQ(error_of(replace(kValid, "pmd = \"fake\"", "pmd = \"fast\"")),
            "t.toml:15: ports[0] 'p0': key 'pmd': no driver named \"fast\" is built into this binary "
            "(available: \"fake\"; `rawpipe list-pmds` describes them)");
}

TEST(ConfigLoader, PortNamingAMissingPool) {
  EXPECT_EQ(error_of(replace(kValid, "pmd = \"fake\"", "pmd = \"fake\"\npool = \"tx\"")),
            "t.toml:16: ports[0] 'p0': key 'pool': no [[pools]] table is named \"tx\"");
}

TEST(ConfigLoader, ForwardEndpointNamingAMissingPort) {
  std::string text = replace(kValid, "action = \"sink\"", "action = \"forward\"\nport = \"p9\"");
  EXPECT_EQ(error_of(text), "t.toml:28: endpoints[1] 'rest': key 'port': no [[ports]] table is named \"p9\"");
}

TEST(ConfigLoader, PortKeyOnANonForwardEndpoint) {
  std::string text = replace(kValid, "action = \"sink\"", "action = \"sink\"\nport = \"p0\"");
  EXPECT_EQ(error_of(text),
            "t.toml:28: endpoints[1] 'rest': key 'port': only endpoints with action \"forward\" name a port (this one is \"sink\")");
}

TEST(ConfigLoader, RuleNamingAMissingIngressPort) {
  std::string text = replace(kValid, "udp dst 239.1.1.1:5000", "udp dst 239.1.1.1:5000 port p7");
  EXPECT_EQ(error_of(text),
            "t.toml:22: endpoints[0] 'video': key 'match': rule \"udp dst 239.1.1.1:5000 port p7\": no [[ports]] "
            "table is named \"p7\"");
}

TEST(ConfigLoader, BadMatchRuleCarriesTheParsersReason) {
  std::string msg = error_of(replace(kValid, "udp dst 239.1.1.1:5000", "udp dst 239.1.1.300:5000"));
  EXPECT_EQ(msg.rfind("t.toml:22: endpoints[0] 'video': key 'match': rule \"udp dst 239.1.1.300:5000\": ", 0), 0u) << msg;
}

TEST(ConfigLoader, EndpointWithoutRulesThatIsNotTheDefault) {
  std::string text = replace(kValid, "default_action = \"endpoint\"\ndefault_endpoint = \"rest\"\n", "");
  EXPECT_EQ(error_of(text),
            "t.toml:23: endpoints[1] 'rest': key 'match': expected at least one rule (e.g. \"udp dst *:5000\"): "
            "without rules an endpoint receives nothing unless it is [run] default_endpoint");
}

TEST(ConfigLoader, DefaultEndpointMustExist) {
  EXPECT_EQ(error_of(replace(kValid, "default_endpoint = \"rest\"", "default_endpoint = \"best\"")),
            "t.toml:5: [run]: key 'default_endpoint': no [[endpoints]] table is named \"best\"");
}

TEST(ConfigLoader, LcoreNamingAMissingPort) {
  EXPECT_EQ(error_of(replace(kValid, "\"p0:1\"", "\"p0:1\", \"p1:0\"")),
            "t.toml:31: lcores[0]: key 'rx': \"p1:0\": no [[ports]] table is named \"p1\"");
}

TEST(ConfigLoader, LcoreQueueBeyondThePortsQueues) {
  EXPECT_EQ(error_of(replace(kValid, "\"p0:1\"", "\"p0:1\", \"p0:2\"")),
            "t.toml:31: lcores[0]: key 'rx': \"p0:2\": port \"p0\" has 2 rx queues (0 to 1)");
}

TEST(ConfigLoader, LcoreRxEntryThatIsNotPortColonQueue) {
  EXPECT_EQ(error_of(replace(kValid, "\"p0:1\"", "\"p0:1\", \"p0\"")),
            "t.toml:31: lcores[0]: key 'rx': \"p0\" is not \"port:queue\" (e.g. \"synth0:0\")");
  EXPECT_EQ(error_of(replace(kValid, "\"p0:1\"", "\"p0:1\", \"p0:x\"")),
            "t.toml:31: lcores[0]: key 'rx': \"p0:x\": queue \"x\" is not a number");
}

TEST(ConfigLoader, LcoreCpuBeyondTheMachine) {
  EXPECT_EQ(error_of(replace(kValid, "cpu = 0", "cpu = 2")),
            "t.toml:30: lcores[0]: key 'cpu': cpu 2 is beyond this machine's 2 CPUs (0 to 1)");
  EXPECT_EQ(error_of(replace(kValid, "consumer_cpu = 1", "consumer_cpu = 5")),
            "t.toml:6: [run]: key 'consumer_cpu': cpu 5 is beyond this machine's 2 CPUs (0 to 1)");
}

TEST(ConfigLoader, TwoLcoresOnOneCpu) {
  std::string text = replace(kValid, "rx = [\"p0:0\", \"p0:1\"]", "rx = [\"p0:0\"]") + "\n[[lcores]]\ncpu = 0\nrx = [\"p0:1\"]\n";
  EXPECT_EQ(error_of(text),
            "t.toml:35: lcores[1]: key 'cpu': cpu 0 is already polled by lcores[0]; two polling lcores on one CPU halve "
            "each other's rate");
}

TEST(ConfigLoader, RxQueuePolledByTwoLcores) {
  std::string text = kValid + "\n[[lcores]]\ncpu = 1\nrx = [\"p0:1\"]\n";
  EXPECT_EQ(error_of(text),
            "t.toml:36: lcores[1]: key 'rx': \"p0:1\" is already polled by lcores[0]; each rx queue belongs to exactly "
            "one lcore");
}

TEST(ConfigLoader, RxQueuePolledByNoLcore) {
  EXPECT_EQ(error_of(replace(kValid, "rx = [\"p0:0\", \"p0:1\"]", "rx = [\"p0:0\"]")),
            "t.toml:29: top level: key 'lcores': rx queue 1 of port \"p0\" (t.toml:13) is polled by no lcore; add "
            "\"p0:1\" to an lcore's rx list");
}

TEST(ConfigLoader, RingSizesArePowersOfTwo) {
  EXPECT_EQ(error_of(replace(kValid, "rx_queues = 2", "rx_queues = 2\nrx_ring_size = 1000")),
            "t.toml:17: ports[0] 'p0': key 'rx_ring_size': expected a power of two from 1 to 1048576, got 1000 (try 1024)");
  EXPECT_EQ(error_of(replace(kValid, "ring_size = 1024", "ring_size = 3000")),
            "t.toml:23: endpoints[0] 'video': key 'ring_size': expected a power of two from 2 to 1048576, got 3000 (try "
            "4096)");
  EXPECT_EQ(error_of(replace(kValid, "ring_size = 1024", "ring_size = 1")),
            "t.toml:23: endpoints[0] 'video': key 'ring_size': expected a power of two from 2 to 1048576, got 1 (try 2)");
}

TEST(ConfigLoader, RingSizeOnAnEndpointWithoutARing) {
  EXPECT_EQ(error_of(replace(kValid, "action = \"sink\"", "action = \"sink\"\nring_size = 64")),
            "t.toml:28: endpoints[1] 'rest': key 'ring_size': only endpoints with action \"ring\" have a ring (this one "
            "is \"sink\")");
}

TEST(ConfigLoader, EchoNeedsATxQueuePerSendingLcore) {
  std::string text = replace(kValid, "rx = [\"p0:0\", \"p0:1\"]", "rx = [\"p0:0\"]") +
                     "\n[[lcores]]\ncpu = 1\nrx = [\"p0:1\"]\n";
  text = replace(text, "action = \"sink\"", "action = \"echo\"");
  EXPECT_EQ(error_of(text),
            "t.toml:13: ports[0] 'p0': key 'tx_queues': 2 lcores may transmit on port \"p0\" (echo endpoints) but it "
            "has 1 tx queue; set tx_queues = 2 so each lcore owns one");
  EXPECT_TRUE(load(replace(text, "rx_queues = 2", "rx_queues = 2\ntx_queues = 2")));
}

TEST(ConfigLoader, PoolBufferSizeAndHeadroom) {
  EXPECT_EQ(error_of(replace(kValid, "buf_size = 2048", "buf_size = 3000")),
            "t.toml:11: pools[0] 'rx': key 'buf_size': expected a power of two from 512 to 65536, got 3000");
  EXPECT_EQ(error_of(replace(kValid, "buf_size = 2048", "buf_size = 512\nheadroom = 400")),
            "t.toml:12: pools[0] 'rx': key 'headroom': headroom 400 leaves less than 64 data bytes in a 512-byte "
            "buffer (128 bytes go to the buffer header)");
}

TEST(ConfigLoader, SeveralPoolsNeedAnExplicitPool) {
  std::string text = replace(kValid, "[[ports]]", "[[pools]]\nname = \"other\"\n\n[[ports]]");
  EXPECT_EQ(error_of(text), "t.toml:16: ports[0] 'p0': key 'pool': expected a string, got nothing (the key is required)");
}

TEST(ConfigLoader, MissingSections) {
  EXPECT_EQ(error_of("[run]\nduration = 1\n"),
            "t.toml:1: top level: key 'pools': expected at least one [[pools]] table (where receive buffers come from)\n"
            "t.toml:1: top level: key 'ports': expected at least one [[ports]] table\n"
            "t.toml:1: top level: key 'lcores': expected at least one [[lcores]] table (the worker threads that poll the "
            "ports)");
}

TEST(ConfigLoader, WrongTypeNamesTheKey) {
  EXPECT_EQ(error_of(replace(kValid, "duration = 2.5", "duration = \"2.5\"")),
            "t.toml:2: [run]: key 'duration': expected a number from 0 to 1000000000, got a string");
}

}  // namespace
}  // namespace rawpipe
