// One UDP ping-pong client for both sides of the echo-latency comparison.
//
// sockperf's own client cannot measure a byte-exact echo: it discards replies that still carry
// its "client" flag, which only `sockperf server` clears. This client sends sockperf-format
// requests (sequence, client and pong-request flags, length), so `sockperf server` answers them,
// and accepts any reply with the right sequence number, so rawpipe's echo endpoint (which returns
// the bytes unchanged) is measured by the same code and the same clock.
//
//   udp_pingpong --ip 10.90.0.1 --port 7007 --seconds 5 [--size 64] [--warmup 200] [--rate 0]
// prints one JSON object: {"count", "sent", "lost", "p50_us", "p99_us", "p999_us", "min_us",
// "max_us"}; the percentiles come from an HDR-style log-bucket histogram (within 3%), min and max
// are exact. The warm-up ends after --warmup requests or one second, whichever comes first, and
// the measured window of --seconds starts after it: a server that loses every request would
// otherwise spend the whole window warming up (100 ms per loss) and report nothing sent.
// One request is in flight at a time, as in sockperf ping-pong. --rate R paces the requests at R
// per second (a request waits for its slot; one whose slot went by while the previous round trip
// was under way goes at once, and the schedule restarts from it): the client then costs its CPU the
// same whichever server it measures, where back to back a faster server makes it send, and so
// work, more. 0 (the default) sends each request as soon as the previous one is answered.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

void put_be(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    p[i] = std::uint8_t(v);
    v >>= 8;
  }
}

std::uint64_t get_be64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

// HdrHistogram's layout: a bucket per power of two, each split into kSub linear sub-buckets, so a
// recorded value is known to within 1/kSub (3%) at any magnitude, in fixed memory whatever the run
// length, and percentiles are read by walking the counts. Values are nanoseconds.
class LogHistogram {
 public:
  static constexpr unsigned kSubBits = 5, kSub = 1u << kSubBits;
  void add(std::uint64_t v) {
    ++counts_[index(v)];
    ++total_;
    max_ = std::max(max_, v);
  }
  std::uint64_t total() const { return total_; }
  std::uint64_t max() const { return max_; }
  // The highest value the bucket holding the q-quantile can hold (HdrHistogram's "highest
  // equivalent value"), capped at the largest value recorded.
  double percentile_us(double q) const {
    if (!total_) return 0;
    const std::uint64_t rank = std::max<std::uint64_t>(1, std::uint64_t(q * double(total_) + 0.999999));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) return double(std::min(highest(i), max_)) / 1000.0;
    }
    return double(max_) / 1000.0;
  }

 private:
  static std::size_t index(std::uint64_t v) {
    if (v < kSub) return std::size_t(v);
    const unsigned shift = unsigned(63 - __builtin_clzll(v)) - kSubBits;  // v >> shift is in [kSub, 2 kSub)
    return std::size_t(shift + 1) * kSub + std::size_t((v >> shift) - kSub);
  }
  static std::uint64_t highest(std::size_t i) {
    if (i < kSub) return i;
    const unsigned shift = unsigned(i / kSub) - 1;
    return ((std::uint64_t(i % kSub) + kSub) << shift) + ((std::uint64_t(1) << shift) - 1);
  }
  std::vector<std::uint64_t> counts_ = std::vector<std::uint64_t>((64 - kSubBits + 1) * kSub, 0);
  std::uint64_t total_ = 0, max_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string ip = "127.0.0.1";
  int port = 11111;
  double seconds = 5;
  std::size_t size = 64;
  unsigned warmup = 200;
  double rate = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--ip") ip = argv[i + 1];
    else if (k == "--port") port = std::atoi(argv[i + 1]);
    else if (k == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (k == "--size") size = std::size_t(std::atoi(argv[i + 1]));
    else if (k == "--warmup") warmup = unsigned(std::atoi(argv[i + 1]));
    else if (k == "--rate") rate = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "udp_pingpong: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (size < 14) size = 14;
  if (rate < 0) {
    std::fprintf(stderr, "udp_pingpong: --rate must be 0 (back to back) or requests per second\n");
    return 2;
  }
  const std::uint64_t period_ns = rate > 0 ? std::uint64_t(1e9 / rate) : 0;
  std::uint64_t next_send = 0;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(std::uint16_t(port));
  if (inet_pton(AF_INET, ip.c_str(), &dst.sin_addr) != 1) {
    std::fprintf(stderr, "udp_pingpong: bad address %s\n", ip.c_str());
    return 2;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    std::perror("udp_pingpong: connect");
    return 1;
  }
  timeval tv{0, 100000};  // a reply later than 100 ms counts as lost
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<std::uint8_t> msg(size, 0), reply(size + 64);
  LogHistogram rtt;
  std::uint64_t min_ns = UINT64_MAX;
  std::uint64_t lost = 0, sent = 0, seq = 0;
  const std::uint64_t warm_until = now_ns() + 1'000'000'000ull;
  std::uint64_t end = 0;
  for (unsigned n = 0;; ++n) {
    // Paced: wait for this request's slot before the window's end is checked, so that no request
    // goes out after it.
    if (period_ns) {
      const std::uint64_t t = now_ns();
      if (next_send > t) {
        const timespec at{time_t(next_send / 1000000000ull), long(next_send % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
        }
        next_send += period_ns;
      } else {
        next_send = t + period_ns;
      }
    }
    bool warm = end == 0;
    if (warm && (n >= warmup || now_ns() >= warm_until)) {
      warm = false;
      end = now_ns() + std::uint64_t(seconds * 1e9);
    }
    if (!warm && now_ns() >= end) break;
    if (!warm) ++sent;
    ++seq;
    put_be(msg.data(), seq, 8);
    put_be(msg.data() + 8, 1 /* client */ | 2 /* pong request */, 2);
    put_be(msg.data() + 10, size, 4);
    const std::uint64_t t0 = now_ns();
    if (send(fd, msg.data(), msg.size(), 0) < 0) {
      if (!warm) ++lost;
      continue;
    }
    for (;;) {
      ssize_t r = recv(fd, reply.data(), reply.size(), 0);
      if (r < 0) {
        if (!warm) ++lost;
        break;
      }
      if (r >= 8 && get_be64(reply.data()) == seq) {
        if (!warm) {
          const std::uint64_t d = now_ns() - t0;
          rtt.add(d);
          min_ns = std::min(min_ns, d);
        }
        break;
      }
      // A late reply to an earlier (lost) request: keep waiting for ours.
    }
  }
  std::printf("{\"count\": %llu, \"sent\": %llu, \"lost\": %llu, \"p50_us\": %.2f, \"p99_us\": %.2f, "
              "\"p999_us\": %.2f, \"min_us\": %.2f, \"max_us\": %.2f, \"histogram\": \"log2 x %u sub-buckets\"}\n",
              static_cast<unsigned long long>(rtt.total()), static_cast<unsigned long long>(sent),
              static_cast<unsigned long long>(lost),
              rtt.percentile_us(0.5), rtt.percentile_us(0.99), rtt.percentile_us(0.999),
              rtt.total() ? double(min_ns) / 1000.0 : 0.0, double(rtt.max()) / 1000.0, LogHistogram::kSub);
  close(fd);
  return rtt.total() ? 0 : 1;
}
