// The outputs of `nkisim sweep`, one row per point: <out>.csv (a flat table), <out>.json (the same
// with the per-phase times and algorithms as objects; what --resume reads back) and the verdict
// per shape (<out>.verdict.txt, also printed). Columns and how to read them: docs/sweep.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/sweep/sweep_config.h"
#include "launcher/sweep/sweep_runner.h"

namespace nkisim::launcher {

using SweepResults = std::vector<std::optional<PointResult>>;  // per point index; empty: not run

// The phase names of the results, in the order the reports give them (the workload's phases, for
// several decode steps "qkv[1]", ..., "all_reduce[N]"); a phase only some plans run (batch_shard)
// sits where those plans have it.
std::vector<std::string> ResultPhases(const SweepResults& results);

// Tokens per second of simulated time: decode B x replicas / step; prefill B x replicas x S /
// prefill time. 0 without a step time.
double TokensPerSecond(const ResolvedSweep& sweep, const SweepPoint& point, const PointResult& result);

// The CSV, header first: point, plan, tp, attention_dp, lnc, instances, replicas, workload, batch,
// kv_length (or seq_len), algorithm, profile, <phase>_us per phase, step_us, tokens_per_s,
// kv_cache_mib_per_rank, weights_mib_per_rank, <phase>_algorithm per phase that ran a collective,
// status (ok, failed, pending), error, mode, host_s, job_wall_s, log.
std::string SweepCsv(const ResolvedSweep& sweep, const SweepResults& results);

// The JSON: the sweep's file, title, workload and phases, and "points", one object per point
// with the CSV's fields (phase times and algorithms as objects) and the point's fingerprint.
std::string SweepJson(const ResolvedSweep& sweep, const SweepResults& results);

// The results recorded in a JSON written by SweepJson, by point key (failed points included).
// Throws Error(kBadConfig) naming the path when it is not such a file.
std::map<std::string, PointResult> ReadSweepJson(const std::string& path);

// Per shape, the plans from fastest to slowest with their ratio to the fastest and their KV cache
// per rank, the failed points with their errors, then which plan is fastest how often:
//   B=32 L=8192: tp8xdp8 is fastest, 412.300 us (620.9 tok/s), 2.00 MiB KV/rank; tp16xdp4
//   1.05x, 4.00 MiB; tp64 1.90x, 16.02 MiB
std::string SweepVerdict(const ResolvedSweep& sweep, const SweepResults& results);

// Writes <out>.csv, <out>.json and <out>.verdict.txt (each atomically).
void WriteSweepOutputs(const ResolvedSweep& sweep, const SweepResults& results, const std::string& out);

}  // namespace nkisim::launcher
