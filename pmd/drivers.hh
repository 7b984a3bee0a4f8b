// Driver descriptors, one per folder under pmd/. Each is defined in its folder's device.cc.
#pragma once

#include "pipeline/port/driver.hh"

namespace rawpipe {

extern const PmdDriver kSynthDriver;
extern const PmdDriver kPcapDriver;
extern const PmdDriver kAfPacketDriver;
extern const PmdDriver kAfXdpDriver;
extern const PmdDriver kSocketDriver;
extern const PmdDriver kMlx5Driver;
extern const PmdDriver kMlx5ModelDriver;
extern const PmdDriver kManaDriver;
extern const PmdDriver kManaModelDriver;
extern const PmdDriver kDpdkDriver;
extern const PmdDriver kAutoDriver;

}  // namespace rawpipe
