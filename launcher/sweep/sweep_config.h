// Sweep files of `nkisim sweep` (proto/sweep.proto): parse, expand the axes into points (the
// cartesian product, plans innermost), validate every point with the scenario rules before any
// point runs, and group the points into `nkisim run` jobs. Pure: no processes, no files written.
//
// A point is the base scenario with one value of every axis and one plan. Its shape is every axis
// value but the plan (batch, kv_length or seq_len, lnc, algorithm, profile); the plans of one
// shape that have the same world size run side by side as one job (one scenario with several
// plans, one mpirun), which costs one mpirun start-up instead of one per plan.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/scenario_config.h"
#include "proto/scenario.pb.h"
#include "proto/sweep.pb.h"
#include "runtime/error.h"

namespace nkisim::launcher {

struct SweepPoint {
  int index = 0;            // in the cartesian order
  int shape = 0;            // index into ResolvedSweep::shapes
  // Every axis value, e.g. "plan=tp8xdp8 batch=32 kv_length=1024 lnc=2 algorithm=auto
  // profile=trn2": what --resume matches points by. Unique within a sweep.
  std::string key;
  std::string plan;         // the plan's name (defaults filled: "tp64", "tp8xdp8", ...)
  uint32_t batch = 0;
  uint32_t length = 0;      // kv_length (decode) or seq_len (prefill)
  std::string algorithm;    // of the "tp" set: the axis value, the base's, or "auto"
  std::string profile;      // the axis value as written, the base's path, or "trn2"
  // The resolved plan (valid points only): what the table shows even when the run fails.
  int tp = 0, attention_dp = 1, lnc = 2, instances = 1, replicas = 1;
  int world_size = 0;
  proto::Scenario scenario;  // the point alone: the base with this point's values, one plan
  // A digest of everything the point's result depends on (its scenario with defaults filled and
  // its hardware profile): --resume reuses a recorded point only when it is unchanged.
  std::string fingerprint;
};

struct SweepShape {
  // "B=32 L=8192" (decode) or "B=1 S=2048" (prefill), then the lnc, algorithm and profile when
  // their axes have more than one value: "B=32 L=8192 lnc=1 ring".
  std::string label;
  std::vector<int> points;  // in plan order
};

struct SweepJob {
  int index = 0;
  int shape = 0;
  std::vector<int> points;  // same shape and world size, in plan order
  int world_size = 0;
};

struct ResolvedSweep {
  proto::Sweep spec;
  std::string source;
  std::string title;        // spec.title, else the file name
  std::string output;       // the default output prefix: spec.output, else the file's stem
  proto::Scenario base;     // the base scenario, paths made absolute
  Workload workload = Workload::kDecode;
  std::vector<SweepPoint> points;
  std::vector<SweepShape> shapes;
  std::vector<SweepJob> jobs;

  // "kv_length" (decode) or "seq_len" (prefill): the name of the length axis.
  const char* length_axis() const { return workload == Workload::kDecode ? "kv_length" : "seq_len"; }
};

// The problems a sweep's check finds, in the order first found, each with the points it concerns
// (none: the sweep itself); RaiseIfAny throws Error(kBadConfig) listing them all ("source: N
// problems (no point was run):\n  problem\n    at 2 points: key; key").
class SweepProblems {
 public:
  void Add(const std::string& problem, const std::string& point = "");
  bool empty() const { return order_.empty(); }
  void RaiseIfAny(const std::string& source, size_t total_points) const;

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::vector<std::string>> points_;
};

// The lines of an error "source: N problems:\n  ...", or its one message.
std::vector<std::string> SweepProblemsOf(const Error& e, const std::string& source);

// Reads and resolves a sweep file. Throws Error(kBadConfig): "source:line:column: ..." on syntax
// errors and unknown fields; otherwise one message listing every problem found, each naming the
// field, the value and the rule, and the points it concerns (no point runs):
//   * no base, no plans (neither the plans axis nor base.plans), a value given twice on an axis,
//     plans of the same name, a length axis of the other workload, a hardware profile that cannot
//     be loaded, an lnc other than 1 and 2;
//   * every problem `nkisim validate` finds in a point's scenario (docs/scenarios.md);
//   * an algorithm the "tp" groups of a point cannot run (a forced algorithm that does not
//     implement the TP reduction or does not fit the group's shape).
ResolvedSweep LoadSweep(const std::string& path);
ResolvedSweep ResolveSweep(const std::string& text, const std::string& source);

// The scenario of a job: the points' common scenario with their plans side by side, in order.
// REQUIRES: the points share a shape and a world size (a SweepJob's points).
proto::Scenario JobScenario(const ResolvedSweep& sweep, const std::vector<int>& points);

// Text format of a scenario, as written under <out>.points/.
std::string ScenarioText(const proto::Scenario& scenario);

}  // namespace nkisim::launcher
