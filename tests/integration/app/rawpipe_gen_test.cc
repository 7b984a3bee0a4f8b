// `rawpipe gen` end to end: the synth port's recipes (IMIX sizes, VLAN, IPv4 and IPv6 flows, a
// malformed share) transmitted on a pcap port, read back record by record: the count, the bytes and
// the malformed share match exactly what gen reports and what the recipe says, and tshark checks
// the checksums behind the VLAN tag. Then over a veth pair in namespaces the test creates, from an
// af_packet port and from an af_xdp port to a kernel AF_PACKET reader, and to the kernel's own UDP
// sockets, which check every header and checksum synth wrote, tagged frames included (root only).
// A source port that receives only steered traffic (the mlx5 model, af_xdp over veth, the socket
// port) gets the config's endpoint rules. Bad invocations get a message naming what is wrong.
#include <arpa/inet.h>
#ifdef RAWPIPE_TEST_HAVE_LIBBPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#endif
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <variant>

#include <fmt/format.h>

#include "tests/support/build_tree.hh"
#include "tests/support/netns.hh"
#include "tests/support/process.hh"
#include "tests/support/scratch_dir.hh"

namespace {

namespace fs = std::filesystem;
using namespace rawpipe::test;

struct PcapRecords {
  bool ok = false;
  std::vector<std::vector<std::uint8_t>> frames;
  std::uint64_t bytes = 0;
};

// A classic pcap file (either byte order and either timestamp precision): every record's bytes.
PcapRecords read_pcap(const fs::path& p) {
  PcapRecords out;
  std::ifstream in(p, std::ios::binary);
  std::uint8_t hdr[24];
  if (!in.read(reinterpret_cast<char*>(hdr), sizeof hdr)) return out;
  std::uint32_t magic;
  std::memcpy(&magic, hdr, 4);
  const bool swapped = magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1;
  if (!swapped && magic != 0xa1b2c3d4 && magic != 0xa1b23c4d) return out;
  auto u32 = [swapped](const std::uint8_t* b) {
    std::uint32_t v;
    std::memcpy(&v, b, 4);
    return swapped ? __builtin_bswap32(v) : v;
  };
  std::uint8_t rec[16];
  while (in.read(reinterpret_cast<char*>(rec), sizeof rec)) {
    const std::uint32_t caplen = u32(rec + 8), len = u32(rec + 12);
    if (caplen != len || caplen > 65535) return out;
    std::vector<std::uint8_t> f(caplen);
    if (!in.read(reinterpret_cast<char*>(f.data()), caplen)) return out;
    out.bytes += caplen;
    out.frames.push_back(std::move(f));
  }
  out.ok = in.eof();
  return out;
}

class RawpipeGen : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = rawpipe_binary();
    ASSERT_TRUE(fs::exists(bin_)) << bin_ << " is not built";
    tmp_ = make_scratch_dir("rawpipe-gen-test");
  }
  void TearDown() override { fs::remove_all(tmp_); }

  ProcessOutput run(std::vector<std::string> args) {
    args.insert(args.begin(), bin_.string());
    return run_process(args, tmp_, {});
  }
  nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    auto j = nlohmann::json::parse(in, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << p << " is not JSON";
    return j;
  }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = tmp_ / name;
    std::ofstream(p) << text;
    return p;
  }

  fs::path bin_, tmp_;
};

constexpr char kRecipe[] = R"(
pmd = "synth"
pool = "p"
imix = [[78, 7], [594, 4], [1518, 1]]
src_ports = 64
ipv6_fraction = 0.25
vlans = [100]
malformed_fraction = 0.1
malformed_kinds = ["truncated"]
)";

TEST_F(RawpipeGen, SendsTheRecipeToAPcapPortExactly) {
  const fs::path out_pcap = tmp_ / "out.pcap";
  const fs::path cfg = write("gen.toml", std::string("[[pools]]\nname = \"p\"\ncount = 4096\n[[ports]]\nname = \"synth0\"\n") +
                                             kRecipe + "[[ports]]\nname = \"out\"\npmd = \"pcap\"\npool = \"p\"\ntx_file = \"" +
                                             out_pcap.string() + "\"\n[[lcores]]\nrx = [\"synth0:0\", \"out:0\"]\n");
  constexpr std::uint64_t kFrames = 5000;
  const fs::path json = tmp_ / "gen.json";
  ProcessOutput o = run({"gen", cfg.string(), "--port", "out", "--count", std::to_string(kFrames), "--json", json.string()});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("gen: synth0 (synth) rx queue 0 -> out (pcap) tx queue 0"), std::string::npos) << o.out;
  auto j = read_json(json);
  EXPECT_EQ(j["generated"].get<std::uint64_t>(), kFrames);
  EXPECT_EQ(j["sent"].get<std::uint64_t>(), kFrames);  // a file takes everything
  EXPECT_EQ(j["refused"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(j["outstanding"].get<std::uint64_t>(), 0u);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_TRUE(j["lossless"].get<bool>());
  EXPECT_EQ(j["lost_at_source"].get<std::uint64_t>(), 0u);
  EXPECT_NE(o.out.find("  OK: generated 5000 == sent 5000 + refused 0; 0 buffer(s) outstanding\n"), std::string::npos) << o.out;

  const PcapRecords r = read_pcap(out_pcap);
  ASSERT_TRUE(r.ok) << out_pcap << " is not a complete pcap file";
  EXPECT_EQ(r.frames.size(), kFrames);
  EXPECT_EQ(r.bytes, j["sent_bytes"].get<std::uint64_t>());

  // The recipe as it went out: every frame tagged with VLAN 100; IPv4 and IPv6 behind the tag; the
  // malformed share (truncated inside the IP header) transmitted too, exactly floor(n * 0.1) of n;
  // the rest in the IMIX sizes.
  std::set<std::size_t> sizes;
  std::uint64_t v4 = 0, v6 = 0, short_frames = 0;
  for (const auto& f : r.frames) {
    ASSERT_GE(f.size(), 18u);
    EXPECT_EQ(f[12], 0x81);
    EXPECT_EQ(f[13], 0x00);
    EXPECT_EQ(((f[14] << 8) | f[15]) & 0x0fff, 100);
    const int type = (f[16] << 8) | f[17];
    v4 += type == 0x0800;
    v6 += type == 0x86dd;
    if (f.size() < 60)
      ++short_frames;
    else
      sizes.insert(f.size());
  }
  EXPECT_EQ(short_frames, kFrames / 10);
  EXPECT_EQ(v4 + v6, kFrames);
  EXPECT_GT(v6, kFrames / 8);
  EXPECT_GT(v4, kFrames / 2);
  EXPECT_EQ(sizes, (std::set<std::size_t>{78, 594, 1518}));
}

// tshark, a reader independent of the kernel and of rawpipe, decodes the tagged recipe: behind VLAN
// 100 every full frame's IPv4 header checksum and IPv4 or IPv6 UDP checksum is right, and exactly
// the malformed share is malformed (a kernel socket would drop those without a word).
TEST_F(RawpipeGen, TaggedFramesCarryChecksumsTsharkAccepts) {
  if (!command_output({"tshark", "--version"})) GTEST_SKIP() << "tshark is not installed (apt-get install tshark)";
  const fs::path out_pcap = tmp_ / "tagged.pcap";
  const fs::path cfg = write("tagged.toml", std::string("[[pools]]\nname = \"p\"\ncount = 4096\n[[ports]]\nname = \"synth0\"\n") +
                                                kRecipe + "[[ports]]\nname = \"out\"\npmd = \"pcap\"\npool = \"p\"\ntx_file = \"" +
                                                out_pcap.string() + "\"\n[[lcores]]\nrx = [\"synth0:0\", \"out:0\"]\n");
  constexpr std::uint64_t kFrames = 2000;
  ProcessOutput o = run({"gen", cfg.string(), "--port", "out", "--count", std::to_string(kFrames)});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  // Wireshark's checksum status: 1 good, 0 bad, empty when the layer is absent (no IPv4 header
  // checksum in IPv6).
  auto fields = command_output({"tshark", "-r", out_pcap.string(), "-n", "-o", "ip.check_checksum:TRUE", "-o",
                                "udp.check_checksum:TRUE", "-T", "fields", "-e", "frame.len", "-e",
                                "vlan.id", "-e", "ip.checksum.status", "-e", "udp.checksum.status", "-e",
                                "_ws.expert.message"});
  ASSERT_TRUE(fields) << fields.message();
  std::istringstream lines(*fields);
  std::string line;
  std::uint64_t frames = 0, full = 0, v4_checked = 0, malformed = 0;
  while (std::getline(lines, line)) {
    ++frames;
    std::vector<std::string> f;
    std::istringstream cols(line);
    for (std::string c; std::getline(cols, c, '\t');) f.push_back(c);
    f.resize(5);
    EXPECT_EQ(f[1], "100") << line;
    if (std::stoul(f[0]) < 60) {  // the truncated share: too short for its own IP header
      malformed += f[4].find("Malformed") != std::string::npos;
      continue;
    }
    ++full;
    EXPECT_EQ(f[3], "1") << "UDP checksum: " << line;
    if (!f[2].empty()) {
      EXPECT_EQ(f[2], "1") << "IPv4 header checksum: " << line;
      ++v4_checked;
    }
    EXPECT_TRUE(f[4].empty()) << line;
  }
  EXPECT_EQ(frames, kFrames);
  EXPECT_EQ(malformed, kFrames / 10);
  EXPECT_EQ(full, kFrames - kFrames / 10);
  EXPECT_GT(v4_checked, full / 2);
}

TEST_F(RawpipeGen, HoldsTheAskedRateAndCountsWhatItSent) {
  const fs::path cfg = write("rate.toml", "[[pools]]\nname = \"p\"\ncount = 4096\n[[ports]]\nname = \"synth0\"\npmd = \"synth\"\n"
                                          "pool = \"p\"\n[[ports]]\nname = \"m\"\npmd = \"mlx5-model\"\npool = \"p\"\n"
                                          "[[lcores]]\nrx = [\"synth0:0\", \"m:0\"]\n");
  const fs::path json = tmp_ / "rate.json";
  // 2000 frames at 20000 pps: 0.1 s if the bucket holds the rate; flat out would take a few ms.
  const auto t0 = std::chrono::steady_clock::now();
  ProcessOutput o = run({"gen", cfg.string(), "--port", "m", "--rate", "20000", "--count", "2000", "--json", json.string()});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  auto j = read_json(json);
  EXPECT_EQ(j["generated"].get<std::uint64_t>(), 2000u);
  EXPECT_EQ(j["sent"].get<std::uint64_t>() + j["refused"].get<std::uint64_t>(), 2000u);
  EXPECT_EQ(j["outstanding"].get<std::uint64_t>(), 0u);
  // Never faster than asked (the bucket starts empty); slower only if the machine is busy.
  EXPECT_GE(j["window_seconds"].get<double>(), 0.09) << o.out;
  EXPECT_GE(secs, 0.09);
}

TEST_F(RawpipeGen, RefusesWhatItCannotDo) {
  const fs::path cfg = write("bad.toml", "[[pools]]\nname = \"p\"\n[[ports]]\nname = \"synth0\"\npmd = \"synth\"\npool = \"p\"\n"
                                         "[[lcores]]\nrx = [\"synth0:0\"]\n");
  ProcessOutput o = run({"gen", cfg.string(), "--port", "nope"});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("no port named 'nope' to transmit on (ports: synth0 (synth))"), std::string::npos) << o.err;
  o = run({"gen", cfg.string(), "--port", "synth0"});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("cannot be both the frame source and the transmit port"), std::string::npos) << o.err;
}

// What the source port loses before gen takes it is in the verdict, as in `rawpipe run`: the mlx5
// model completes the last of its 100 frames with an error CQE, so gen takes 99 and its verdict is
// LOSSY with rx_errors 1, and the frames the queue could have dropped while it was in the error
// state as unknown, in the text and the JSON; `[run] on_loss = "fail"` makes that exit status 3.
// A lossless source (the other tests here) keeps OK.
TEST_F(RawpipeGen, ReportsWhatTheSourcePortLost) {
  const fs::path out_pcap = tmp_ / "from-mlx5.pcap";
  auto config = [&](const std::string& run_section) {
    return run_section +
           "[[pools]]\nname = \"p\"\ncount = 4096\n"
           "[[ports]]\nname = \"mlx0\"\npmd = \"mlx5-model\"\npool = \"p\"\nrx_ring_size = 1024\n"
           "steering = \"all\"\ninject_count = 100\ninject_loops = 1\ninject_rx_error_every = 100\n"
           "[[ports]]\nname = \"out\"\npmd = \"pcap\"\npool = \"p\"\ntx_file = \"" +
           out_pcap.string() + "\"\n[[lcores]]\nrx = [\"mlx0:0\", \"out:0\"]\n";
  };
  const fs::path json = tmp_ / "lossy.json";
  ProcessOutput o = run({"gen", write("lossy.toml", config("")).string(), "--source", "mlx0", "--port", "out",
                         "--duration", "1", "--json", json.string()});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("port mlx0 lost before gen took them: rx_errors 1, rx_queue_error_state unknown"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("LOSSY: generated 99 == sent 99 + refused 0; 0 buffer(s) outstanding; 1 frame(s) lost at the "
                       "source before gen took them and counters that could not be read"),
            std::string::npos)
      << o.out;
  auto j = read_json(json);
  EXPECT_EQ(j["generated"].get<std::uint64_t>(), 99u);
  EXPECT_TRUE(j["ok"].get<bool>()) << "what gen took balances";
  EXPECT_FALSE(j["lossless"].get<bool>());
  EXPECT_EQ(j["lost_at_source"].get<std::uint64_t>(), 1u);
  EXPECT_EQ(j["source_losses"]["rx_errors"].get<std::uint64_t>(), 1u);
  EXPECT_TRUE(j["source_losses"]["rx_queue_error_state"].is_null());
  EXPECT_EQ(read_pcap(out_pcap).frames.size(), 99u);

  o = run({"gen", write("lossy-fails.toml", config("[run]\non_loss = \"fail\"\n")).string(), "--source", "mlx0",
           "--port", "out", "--duration", "1"});
  EXPECT_EQ(o.status, 3) << o.out << o.err;
  EXPECT_NE(o.out.find("LOSSY: generated 99"), std::string::npos) << o.out;
}

// A source that receives only steered traffic (the mlx5 model with its default steering =
// "rules" leaves every frame no flow matches to the kernel, as model_rx_to_kernel) gets the config's
// endpoint rules steered to it. Without a rule gen is refused with what to add: before, it took
// none of the model's 100 frames and said OK. A port that cannot take the rule (the socket port
// binds one UDP port per rule, and "any" names none) is refused with the driver's reason.
TEST_F(RawpipeGen, SteersTheEndpointRulesToARuleSteeredSource) {
  const fs::path out_pcap = tmp_ / "steered.pcap";
  auto config = [&](const std::string& source, const std::string& endpoints) {
    return "[[pools]]\nname = \"p\"\ncount = 4096\n" + source +
           "[[ports]]\nname = \"out\"\npmd = \"pcap\"\npool = \"p\"\ntx_file = \"" + out_pcap.string() + "\"\n" +
           endpoints + "[[lcores]]\nrx = [\"src:0\", \"out:0\"]\n";
  };
  const std::string mlx5 = "[[ports]]\nname = \"src\"\npmd = \"mlx5-model\"\npool = \"p\"\ninject_count = 100\ninject_loops = 1\n";
  const std::string any = "[[endpoints]]\nname = \"e\"\naction = \"sink\"\nmatch = [\"any\"]\n";

  ProcessOutput o = run({"gen", write("no-rule.toml", config(mlx5, "")).string(), "--source", "src", "--port", "out",
                         "--duration", "1"});
  EXPECT_EQ(o.status, 1) << o.out << o.err;
  EXPECT_NE(o.err.find("port 'src' (pmd mlx5-model) receives only the traffic steered to it, and "),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("has no endpoint rule to steer there: add an [[endpoints]] table"), std::string::npos) << o.err;

  const fs::path json = tmp_ / "steered.json";
  o = run({"gen", write("rule.toml", config(mlx5, any)).string(), "--source", "src", "--port", "out", "--duration",
           "1", "--json", json.string()});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("port src receives only steered traffic; the config's 1 endpoint rule(s) are steered to it"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("OK: generated 100 == sent 100"), std::string::npos) << o.out;
  auto j = read_json(json);
  EXPECT_EQ(j["generated"].get<std::uint64_t>(), 100u);
  EXPECT_TRUE(j["lossless"].get<bool>());
  EXPECT_EQ(read_pcap(out_pcap).frames.size(), 100u);

  const std::string sock = "[[ports]]\nname = \"src\"\npmd = \"socket\"\npool = \"p\"\n";
  o = run({"gen", write("socket.toml", config(sock, any)).string(), "--source", "src", "--port", "out", "--duration",
           "1"});
  EXPECT_EQ(o.status, 1) << o.out << o.err;
  EXPECT_NE(o.err.find("port 'src' (pmd socket) receives only the traffic steered to it, and gen could not steer the "
                       "endpoints' rules there: "),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("no destination port"), std::string::npos) << o.err;
}

// The same over a veth pair, from an af_xdp source in its default steer mode: the endpoint rule
// reaches the XDP program, which takes the datagrams to UDP port 7000 for gen and leaves those to
// port 7001 to the kernel. Every record gen writes is one of the first; without the rule the
// program passed every datagram to the kernel and gen took none (root only).
TEST_F(RawpipeGen, ReplaysWhatTheEndpointRuleSteersFromAnAfXdpSource) {
  if (auto why = netns_unavailable_reason()) GTEST_SKIP() << *why;
#ifndef RAWPIPE_TEST_HAVE_LIBBPF
  GTEST_SKIP() << "built without libbpf: no af_xdp driver";
#endif
  auto ns_gen = NetNs::create("rpgxg");
  ASSERT_TRUE(ns_gen) << ns_gen.message();
  auto ns_send = NetNs::create("rpgxs");
  ASSERT_TRUE(ns_send) << ns_send.message();
  auto pair = VethPair::create({.ns = &ns_gen.value(), .addrs = {"10.78.0.1/24"}},
                               {.ns = &ns_send.value(), .addrs = {"10.78.0.2/24"}});
  ASSERT_TRUE(pair) << pair.message();
  const fs::path out_pcap = tmp_ / "from-af_xdp.pcap";
  const fs::path cfg = write("xdp-source.toml", "[[pools]]\nname = \"p\"\ncount = 4096\n"
                                                "[[ports]]\nname = \"xdp\"\npmd = \"af_xdp\"\npool = \"p\"\ninterface = \"" +
                                                    pair->a().name +
                                                    "\"\n[[ports]]\nname = \"out\"\npmd = \"pcap\"\npool = \"p\"\ntx_file = \"" +
                                                    out_pcap.string() +
                                                    "\"\n[[endpoints]]\nname = \"e\"\naction = \"sink\"\n"
                                                    "match = [\"udp dst 10.78.0.1:7000\"]\n"
                                                    "[[lcores]]\nrx = [\"xdp:0\", \"out:0\"]\n");
  constexpr std::uint64_t kFrames = 200;
  const fs::path json = tmp_ / "xdp-source.json", out = tmp_ / "xdp-source.out", err = tmp_ / "xdp-source.err";
  const pid_t gen = start_process({"ip", "netns", "exec", ns_gen->name(), bin_.string(), "gen", cfg.string(), "--source",
                                   "xdp", "--port", "out", "--count", std::to_string(kFrames), "--duration", "30",
                                   "--json", json.string()},
                                  out, err);
  ASSERT_GT(gen, 0);
  // Both ports' datagrams, one pair a millisecond, until gen has its count and prints its summary:
  // the ones sent before the program is attached go to the kernel, so no readiness signal is needed.
  std::string send_error;
  ASSERT_TRUE(ns_send->run([&] {
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
      send_error = std::strerror(errno);
      return;
    }
    const char payload[32] = "gen source";
    for (int i = 0; i < 20000 && slurp(out).find("gen summary: ") == std::string::npos; ++i) {
      for (std::uint16_t port : {7000, 7001}) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        inet_pton(AF_INET, "10.78.0.1", &a.sin_addr);
        (void)sendto(s, payload, sizeof payload, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    close(s);
  }));
  ASSERT_TRUE(send_error.empty()) << send_error;
  const int status = wait_process(gen, {.timeout = std::chrono::seconds(30)});
  ASSERT_EQ(status, 0) << slurp(out) << slurp(err);
  EXPECT_NE(slurp(out).find("port xdp receives only steered traffic; the config's 1 endpoint rule(s) are steered to it"),
            std::string::npos)
      << slurp(out);
  auto j = read_json(json);
  EXPECT_EQ(j["generated"].get<std::uint64_t>(), kFrames);
  const PcapRecords rec = read_pcap(out_pcap);
  ASSERT_TRUE(rec.ok);
  EXPECT_EQ(rec.frames.size(), kFrames);
  for (const auto& f : rec.frames) {
    ASSERT_GE(f.size(), 42u);
    EXPECT_EQ(f[12] << 8 | f[13], 0x0800);
    EXPECT_EQ(f[23], 17);
    EXPECT_EQ(f[36] << 8 | f[37], 7000) << "a datagram no rule steers reached gen";
  }
}

// gen claims its ports' queues and its CPU as a run does: while one gen sends pinned to a CPU, a
// run with an lcore there and a second gen on that CPU are refused naming the first, which goes on
// sending; once it stops, the CPU is free again.
TEST_F(RawpipeGen, ClaimsItsCpuAsARunDoes) {
  // Other tests of the suite take CPU 0 too; these locks live in the test's own directory.
  setenv("RAWPIPE_LOCK_DIR", (tmp_ / "locks").c_str(), 1);
  const fs::path cfg = write("held.toml", "[[pools]]\nname = \"p\"\ncount = 4096\n[[ports]]\nname = \"synth0\"\npmd = \"synth\"\n"
                                          "pool = \"p\"\n[[ports]]\nname = \"m\"\npmd = \"mlx5-model\"\npool = \"p\"\n"
                                          "[[lcores]]\ncpu = 0\nrx = [\"synth0:0\", \"m:0\"]\n");
  const fs::path first_out = tmp_ / "first.out", first_err = tmp_ / "first.err";
  // 1000 pps for a million frames: it sends until the test stops it.
  const pid_t first = start_process({bin_.string(), "gen", cfg.string(), "--port", "m", "--rate", "1000", "--count",
                                     "1000000", "--cpu", "0"},
                                    first_out, first_err);
  ASSERT_GT(first, 0);
  for (int i = 0; i < 200 && slurp(first_out).find("gen: ") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_NE(slurp(first_out).find("gen: "), std::string::npos) << slurp(first_out) << slurp(first_err);

  const std::string holder = fmt::format("CPU 0 (lcore 0) is already used by another pipeline: pid {} running {}", first,
                                         cfg.string());
  ProcessOutput second = run({"gen", cfg.string(), "--port", "m", "--count", "10", "--cpu", "0"});
  EXPECT_EQ(second.status, 1) << second.out << second.err;
  EXPECT_NE(second.err.find(holder), std::string::npos) << second.err;
  const fs::path run_cfg = write("run.toml", "[run]\nduration = 1\n[[pools]]\nname = \"p\"\n[[ports]]\nname = \"s\"\n"
                                             "pmd = \"synth\"\npool = \"p\"\npackets = 10\n[[lcores]]\ncpu = 0\nrx = [\"s:0\"]\n");
  ProcessOutput run_refused = run({"run", run_cfg.string()});
  EXPECT_EQ(run_refused.status, 1) << run_refused.out << run_refused.err;
  EXPECT_NE(run_refused.err.find(holder), std::string::npos) << run_refused.err;

  EXPECT_EQ(kill(first, 0), 0) << "the first gen died: " << slurp(first_err);
  kill(first, SIGINT);
  EXPECT_EQ(wait_process(first, {.timeout = std::chrono::seconds(20)}), 0) << slurp(first_out) << slurp(first_err);
  ProcessOutput after = run({"gen", cfg.string(), "--port", "m", "--count", "10", "--cpu", "0"});
  EXPECT_EQ(after.status, 0) << after.out << after.err;
  unsetenv("RAWPIPE_LOCK_DIR");
}

// A stop signal ends gen in order, with its summary, however often it is repeated while gen
// stops and exits (a second Ctrl-C, a service manager's second SIGTERM).
class RawpipeGenSignals : public RawpipeGen, public ::testing::WithParamInterface<int> {};

TEST_P(RawpipeGenSignals, ARepeatedStopSignalEndsItInOrder) {
  const int sig = GetParam();
  const fs::path cfg = write("sig.toml", "[[pools]]\nname = \"p\"\ncount = 4096\n[[ports]]\nname = \"synth0\"\npmd = \"synth\"\n"
                                         "pool = \"p\"\n[[ports]]\nname = \"m\"\npmd = \"mlx5-model\"\npool = \"p\"\n"
                                         "[[lcores]]\nrx = [\"synth0:0\", \"m:0\"]\n");
  const fs::path out = tmp_ / "sig.out", err = tmp_ / "sig.err";
  const pid_t pid = start_process({bin_.string(), "gen", cfg.string(), "--port", "m", "--rate", "1000", "--count", "1000000"},
                                  out, err);
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 200 && slurp(out).find("gen: ") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_NE(slurp(out).find("gen: "), std::string::npos) << slurp(out) << slurp(err);
  kill(pid, sig);
  EXPECT_EQ(wait_process(pid, {.timeout = std::chrono::seconds(20), .repeat_signal = sig}), 0) << slurp(out) << slurp(err);
  EXPECT_NE(slurp(out).find("gen summary: "), std::string::npos) << slurp(out) << slurp(err);
}

INSTANTIATE_TEST_SUITE_P(Signals, RawpipeGenSignals, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

// Over a veth pair: gen's af_packet or af_xdp port in one namespace, a kernel AF_PACKET socket
// counting in the other. The veth pair loses nothing at this rate, so the count and bytes match
// exactly.
class RawpipeGenVeth : public RawpipeGen, public ::testing::WithParamInterface<const char*> {};

TEST_P(RawpipeGenVeth, SendsOverVethToAKernelReader) {
  if (auto why = netns_unavailable_reason()) GTEST_SKIP() << *why;
  const std::string pmd = GetParam();
  auto ns_a = NetNs::create("rpgena");
  ASSERT_TRUE(ns_a) << ns_a.message();
  auto ns_b = NetNs::create("rpgenb");
  ASSERT_TRUE(ns_b) << ns_b.message();
  auto pair = VethPair::create({.ns = &ns_a.value()}, {.ns = &ns_b.value()});
  ASSERT_TRUE(pair) << pair.message();
  const std::string a_if = pair->a().name, b_if = pair->b().name;
  const fs::path cfg = write("veth.toml", std::string("[[pools]]\nname = \"p\"\ncount = 4096\n[[ports]]\nname = \"synth0\"\n"
                                                      "pmd = \"synth\"\npool = \"p\"\nframe_size = 128\nsrc_ports = 8\n"
                                                      "[[ports]]\nname = \"tx\"\npmd = \"") +
                                          pmd + "\"\npool = \"p\"\ninterface = \"" + a_if +
                                          "\"\n[[lcores]]\nrx = [\"synth0:0\", \"tx:0\"]\n");
  // The reader: a raw socket on the far end, opened in its namespace before gen sends.
  int fd = -1;
  std::string err;
  rawpipe::Status opened = ns_b->run([&] {
    fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd < 0) {
      err = std::strerror(errno);
      return;
    }
    int rcvbuf = 64 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(b_if.c_str()));
    if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) err = std::strerror(errno);
  });
  ASSERT_TRUE(opened) << opened.message();
  ASSERT_TRUE(err.empty() && fd >= 0) << err;
  constexpr std::uint64_t kFrames = 3000;
  const fs::path json = tmp_ / "veth.json";
  ProcessOutput o = run_process({"ip", "netns", "exec", ns_a->name(), bin_.string(), "gen", cfg.string(), "--port", "tx",
                                 "--count", std::to_string(kFrames), "--rate", "100000", "--json", json.string()},
                                tmp_, {});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  auto j = read_json(json);
  EXPECT_EQ(j["generated"].get<std::uint64_t>(), kFrames);
  const std::uint64_t sent = j["sent"].get<std::uint64_t>();
  EXPECT_EQ(sent + j["refused"].get<std::uint64_t>(), kFrames);
  std::uint64_t got = 0, bytes = 0;
  std::vector<std::uint8_t> buf(4096);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 500) != 1) break;
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    // Only gen's frames: synth's destination MAC (the kernel may send its own IPv6 chatter).
    if (n >= 14 && buf[0] == 0x02 && buf[5] == 0x02 && buf[6] == 0x02 && buf[11] == 0x01) {
      ++got;
      bytes += static_cast<std::uint64_t>(n);
    }
  }
  close(fd);
  EXPECT_EQ(got, sent);
  EXPECT_EQ(bytes, j["sent_bytes"].get<std::uint64_t>());
  EXPECT_EQ(sent, kFrames) << "the " << pmd << " tx ring refused frames at 100 kpps";
}

INSTANTIATE_TEST_SUITE_P(Ports, RawpipeGenVeth, ::testing::Values("af_packet", "af_xdp"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// The kernel's UDP receive is the reference for what synth writes: it drops a frame whose IPv4
// header checksum, lengths or UDP checksum are wrong (the UDP one is verified in software, since
// a frame sent from a packet socket over veth carries no checksum verdict), and counts the UDP
// ones as InCsumErrors. Every frame gen sent must reach a socket with the payload its size says.
// synth prebuilds each flow's whole frame when the flow set fits its cache budget and otherwise
// patches addresses, ports and both checksums into a template per packet (pmd/synth); the cases
// take each way whatever the machine's cache: 8 flows of 64 bytes are always prebuilt, 8192 flows
// of 1518 bytes (12 MiB) are over the 8 MiB cap and always patched. The VLAN cases tag every frame,
// and the receiving end takes the tag off before its IP stack (attach_vlan_untagger).
struct KernelUdpCase {
  const char* name;
  unsigned frame_size;
  unsigned src_ports;  // the flows: one source and one destination address
  double ipv6_fraction;
  const char* pmd;
  unsigned vlan = 0;  // 0: untagged; else every frame carries this 802.1Q id
};

// Takes the 802.1Q tag off every frame `ifname` receives, so that the IP stack of a kernel without
// VLAN support (no CONFIG_VLAN_8021Q, as on the machines these tests run on) takes tagged frames
// in: a tc ingress program that calls bpf_skb_vlan_pop. The core receive path has already moved
// the tag into the skb's metadata by then; the stack would otherwise drop the frame as meant for
// a VLAN device that does not exist. Call inside the interface's namespace; returns the program's
// descriptor (close it when done; the filter goes with the interface) or why it failed.
std::variant<int, std::string> attach_vlan_untagger(const std::string& ifname) {
#ifndef RAWPIPE_TEST_HAVE_LIBBPF
  (void)ifname;
  return std::string("built without libbpf (it comes with the af_xdp driver)");
#else
  const bpf_insn insns[] = {
      {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_skb_vlan_pop},  // r1 is still the skb
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = TC_ACT_OK},
      {.code = BPF_JMP | BPF_EXIT},
  };
  const int fd = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "vlan_untag", "GPL", insns, std::size(insns), nullptr);
  if (fd < 0) return std::string("bpf_prog_load: ") + std::strerror(errno);
  bpf_tc_hook hook{};
  hook.sz = sizeof hook;
  hook.ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
  hook.attach_point = BPF_TC_INGRESS;
  int err = bpf_tc_hook_create(&hook);
  if (err != 0 && err != -EEXIST) {
    close(fd);
    return std::string("bpf_tc_hook_create: ") + std::strerror(-err);
  }
  bpf_tc_opts opts{};
  opts.sz = sizeof opts;
  opts.prog_fd = fd;
  if ((err = bpf_tc_attach(&hook, &opts)) != 0) {
    close(fd);
    return std::string("bpf_tc_attach: ") + std::strerror(-err);
  }
  return fd;
#endif
}
void PrintTo(const KernelUdpCase& c, std::ostream* os) { *os << c.name; }

class RawpipeGenKernelUdp : public RawpipeGen, public ::testing::WithParamInterface<KernelUdpCase> {};

TEST_P(RawpipeGenKernelUdp, EveryFrameReachesAKernelSocketIntact) {
  if (auto why = netns_unavailable_reason()) GTEST_SKIP() << *why;
  const KernelUdpCase& c = GetParam();
  constexpr std::uint16_t kDstPort = 5000;
  constexpr std::uint16_t kSrcPort = 1024;
  auto ns_a = NetNs::create("rpguda");
  ASSERT_TRUE(ns_a) << ns_a.message();
  auto ns_b = NetNs::create("rpgudb");
  ASSERT_TRUE(ns_b) << ns_b.message();
  // The receiving end answers to synth's default destination MAC and addresses, and routes its
  // sources back the way they came (reverse-path filtering would drop them otherwise). 1518-byte
  // frames need an MTU above 1500; 3000 stays within what native XDP on veth takes.
  auto pair = VethPair::create({.ns = &ns_a.value(), .mtu = 3000},
                               {.ns = &ns_b.value(), .addrs = {"198.18.0.1/24", "fd00:1::1/64"},
                                .mac = "02:00:00:00:00:02", .mtu = 3000});
  ASSERT_TRUE(pair) << pair.message();
  const std::string b_if = pair->b().name;
  ASSERT_TRUE(pair->exec_b({"ip", "route", "add", "10.0.0.0/24", "dev", b_if}));
  ASSERT_TRUE(pair->exec_b({"ip", "-6", "route", "add", "fd00::/64", "dev", b_if}));
  int untagger = -1;
  if (c.vlan != 0) {
    std::string why;
    rawpipe::Status in_ns = ns_b->run([&] {
      auto attached = attach_vlan_untagger(b_if);
      if (auto* fd = std::get_if<int>(&attached))
        untagger = *fd;
      else
        why = std::get<std::string>(attached);
    });
    ASSERT_TRUE(in_ns) << in_ns.message();
#ifndef RAWPIPE_TEST_HAVE_LIBBPF
    GTEST_SKIP() << "tagged frames need an untagger at the receiving end: " << why;
#endif
    ASSERT_GE(untagger, 0) << "the receiving end cannot untag: " << why;
  }

  int fds[2] = {-1, -1};
  std::string err;
  rawpipe::Status opened = ns_b->run([&] {
    const int families[2] = {AF_INET, AF_INET6};
    for (int k = 0; k < 2 && err.empty(); ++k) {
      fds[k] = socket(families[k], SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fds[k] < 0) {
        err = std::strerror(errno);
        break;
      }
      int rcvbuf = 256 << 20;
      setsockopt(fds[k], SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
      int rc;
      if (families[k] == AF_INET) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(kDstPort);
        rc = bind(fds[k], reinterpret_cast<sockaddr*>(&a), sizeof a);
      } else {
        int only = 1;
        setsockopt(fds[k], IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof only);
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(kDstPort);
        rc = bind(fds[k], reinterpret_cast<sockaddr*>(&a), sizeof a);
      }
      if (rc != 0) err = std::strerror(errno);
    }
  });
  ASSERT_TRUE(opened) << opened.message();
  ASSERT_TRUE(err.empty()) << err;
  const auto csum_before = udp_csum_errors(ns_b.value());
  ASSERT_TRUE(csum_before) << csum_before.message();

  // More frames than flows, so that every flow goes out at least once.
  const std::uint64_t frames = c.src_ports + c.src_ports / 4 + 64;
  const fs::path cfg = write("udp.toml", fmt::format("[[pools]]\nname = \"p\"\ncount = 4096\nbuf_size = 4096\n"
                                                     "[[ports]]\nname = \"synth0\"\npmd = \"synth\"\npool = \"p\"\n"
                                                     "frame_size = {}\nsrc_port = {}\nsrc_ports = {}\ndst_port = {}\n"
                                                     "ipv6_fraction = {}\nvlans = [{}]\n"
                                                     "[[ports]]\nname = \"tx\"\npmd = \"{}\"\npool = \"p\"\ninterface = \"{}\"\n"
                                                     "[[lcores]]\nrx = [\"synth0:0\", \"tx:0\"]\n",
                                                     c.frame_size, kSrcPort, c.src_ports, kDstPort, c.ipv6_fraction,
                                                     c.vlan != 0 ? std::to_string(c.vlan) : "", c.pmd, pair->a().name));
  const fs::path json = tmp_ / "udp.json";
  ProcessOutput o = run_process({"ip", "netns", "exec", ns_a->name(), bin_.string(), "gen", cfg.string(), "--port", "tx",
                                 "--count", std::to_string(frames), "--rate", "100000", "--json", json.string()},
                                tmp_, {});
  ASSERT_EQ(o.status, 0) << o.out << o.err;
  auto j = read_json(json);
  const std::uint64_t sent = j["sent"].get<std::uint64_t>();
  EXPECT_EQ(sent, frames) << "the " << c.pmd << " tx ring refused frames at 100 kpps";

  // What arrived: per family, the datagrams, their payload sizes and the flows (source ports).
  const unsigned l2 = c.vlan != 0 ? 18u : 14u;
  const std::size_t want_payload[2] = {c.frame_size - l2 - 20u - 8u, c.frame_size - l2 - 40u - 8u};
  std::uint64_t got[2] = {0, 0};
  std::set<std::uint16_t> flows[2];
  std::vector<std::uint8_t> buf(9216);
  for (;;) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (poll(p, 2, 500) <= 0) break;
    for (int k = 0; k < 2; ++k) {
      if (!(p[k].revents & POLLIN)) continue;
      sockaddr_storage from{};
      socklen_t from_len = sizeof from;
      const ssize_t n = recvfrom(fds[k], buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &from_len);
      ASSERT_GE(n, 0) << std::strerror(errno);
      EXPECT_EQ(static_cast<std::size_t>(n), want_payload[k]) << (k ? "IPv6" : "IPv4") << " datagram of a "
                                                               << c.frame_size << "-byte frame";
      ++got[k];
      flows[k].insert(ntohs(k == 0 ? reinterpret_cast<sockaddr_in*>(&from)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&from)->sin6_port));
    }
  }
  close(fds[0]);
  close(fds[1]);
  if (untagger >= 0) close(untagger);
  const auto csum_after = udp_csum_errors(ns_b.value());
  ASSERT_TRUE(csum_after) << csum_after.message();
  EXPECT_EQ(csum_after.value(), csum_before.value()) << "the kernel dropped gen's datagrams for bad checksums";
  EXPECT_EQ(got[0] + got[1], sent) << "IPv4 " << got[0] << ", IPv6 " << got[1];
  // The families split as the recipe says, and every flow reached the kernel.
  EXPECT_EQ(flows[0].size() + flows[1].size(), c.src_ports);
  EXPECT_EQ(got[0] != 0, c.ipv6_fraction < 1.0) << "IPv4 datagrams: " << got[0];
  EXPECT_EQ(got[1] != 0, c.ipv6_fraction > 0.0) << "IPv6 datagrams: " << got[1];
}

INSTANTIATE_TEST_SUITE_P(Recipes, RawpipeGenKernelUdp,
                         ::testing::Values(KernelUdpCase{"prebuilt_64_mixed_af_packet", 64, 8, 0.5, "af_packet"},
                                           KernelUdpCase{"patched_1518_ipv4_af_packet", 1518, 8192, 0.0, "af_packet"},
                                           KernelUdpCase{"patched_1518_ipv6_af_packet", 1518, 8192, 1.0, "af_packet"},
                                           KernelUdpCase{"patched_1518_mixed_af_xdp", 1518, 8192, 0.5, "af_xdp"},
                                           KernelUdpCase{"prebuilt_128_mixed_vlan_af_packet", 128, 8, 0.5, "af_packet", 100},
                                           KernelUdpCase{"patched_1518_mixed_vlan_af_xdp", 1518, 8192, 0.5, "af_xdp", 100}),
                         [](const ::testing::TestParamInfo<KernelUdpCase>& info) { return std::string(info.param.name); });

}  // namespace
