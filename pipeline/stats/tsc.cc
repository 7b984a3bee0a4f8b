#include "pipeline/stats/tsc.hh"

#include <time.h>

namespace rawpipe {
namespace {

std::uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

double calibrate() {
  // Bracket each clock read with two TSC reads and keep the midpoint, so the clock_gettime call's
  // own cost does not skew the ratio; 20 ms makes a few hundred ns of jitter a 1e-5 error.
  auto sample = [](std::uint64_t& ns, std::uint64_t& tsc) {
    const std::uint64_t a = tsc_now();
    ns = mono_ns();
    const std::uint64_t b = tsc_now();
    tsc = a + (b - a) / 2;
  };
  std::uint64_t ns0, tsc0, ns1, tsc1;
  sample(ns0, tsc0);
  const timespec pause{0, 20'000'000};
  nanosleep(&pause, nullptr);
  sample(ns1, tsc1);
  if (tsc1 <= tsc0 || ns1 <= ns0) return 1.0;  // no usable TSC: report cycles as ns rather than divide by 0
  return double(ns1 - ns0) / double(tsc1 - tsc0);
}

}  // namespace

double tsc_ns_per_cycle() {
  static const double ratio = calibrate();  // thread-safe one-time initialisation
  return ratio;
}

}  // namespace rawpipe
