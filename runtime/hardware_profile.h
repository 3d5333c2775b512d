// The hardware profile: every figure the cost clock and the allocators use. Defaults are the
// public Trainium2 (NeuronCore-v3) figures; docs/architecture.md ("Hardware profile") lists them.
#pragma once

#include <string>
#include <vector>

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

// The ops a collective_tuning row's algorithm implements (a row of collectives/algorithms.cc),
// or nullptr when no algorithm has that name; and the names, comma-separated.
const std::vector<std::string>* TuningAlgorithmOps(const std::string& algorithm);
std::string TuningAlgorithmNames();

// The one rule tying a rank's LNC to a profile, checked by every command that places ranks on
// chips (topologies, scenarios, `collective`, `calibrate`): "" when lnc is 1 or 2 and divides
// physical_cores_per_chip, else why not ("does not divide the profile's ...").
std::string LncProblem(const HardwareProfile& profile, int64_t lnc);
// physical_cores_per_chip / lnc; throws Error(kBadConfig) "source: lnc 2 <LncProblem>" first.
int RanksPerChip(const HardwareProfile& profile, int64_t lnc, const std::string& source);

// Dense bf16 peak of one physical core in TFLOP/s (2 flops per multiply-accumulate).
double PeakBf16Tflops(const HardwareProfile& profile);
// The MX matmul's peak (nc_matmul_mx): PeakBf16Tflops * pe_mx_speedup; 0 without an MX path.
double PeakMxTflops(const HardwareProfile& profile);

}  // namespace nkisim
