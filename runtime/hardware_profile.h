// The hardware profile: every figure the cost clock and the allocators use. Defaults are the
// public Trainium2 (NeuronCore-v3) figures; docs/architecture.md ("Hardware profile") lists them.
#pragma once

#include <string>

#include "proto/hardware_profile.pb.h"

namespace nkisim {

using HardwareProfile = proto::HardwareProfile;

// The trn2 defaults.
const HardwareProfile& Trn2Profile();

// Parses a text-format profile merged on top of the trn2 defaults, so a file names only what it
// changes. Throws Error(kBadConfig) with "file:line:column: message" on a syntax error or an
// unknown field, and names the field and value when a value is out of range (zero frequencies,
// partitions > 128, ...).
HardwareProfile LoadHardwareProfile(const std::string& path);
HardwareProfile ParseHardwareProfile(const std::string& text, const std::string& source_name);

// Checks ranges; throws Error(kBadConfig) naming the first offending field.
void ValidateHardwareProfile(const HardwareProfile& profile, const std::string& source_name);

// Dense bf16 peak of one physical core in TFLOP/s (2 flops per multiply-accumulate).
double PeakBf16Tflops(const HardwareProfile& profile);
// The MX matmul's peak (nc_matmul_mx): PeakBf16Tflops * pe_mx_speedup; 0 without an MX path.
double PeakMxTflops(const HardwareProfile& profile);

}  // namespace nkisim
