// The cycle clock of the latency histograms: the time-stamp counter, read with rdtsc (about 20
// cycles, no system call, no serialisation: a sampled stage is hundreds of cycles long, so the
// few cycles rdtsc may drift across neighbouring instructions do not matter).
//
// Histograms record cycles on the lcores; readers convert to nanoseconds with the ratio measured
// once per process against CLOCK_MONOTONIC (tsc_ns_per_cycle). The ratio assumes an invariant
// TSC (constant_tsc, nonstop_tsc), which every x86-64 server of the last decade has.
#pragma once

#include <x86intrin.h>

#include <cstdint>

namespace rawpipe {

inline std::uint64_t tsc_now() noexcept { return __rdtsc(); }

// Nanoseconds per TSC cycle. The first call measures it over ~20 ms against CLOCK_MONOTONIC
// (and so sleeps); later calls return the stored value. MT-safe. Control path only.
double tsc_ns_per_cycle();

inline double tsc_to_ns(std::uint64_t cycles) { return static_cast<double>(cycles) * tsc_ns_per_cycle(); }

}  // namespace rawpipe
