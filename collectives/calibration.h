// Calibration of the collective cost model against nccom-test measurements (`nkisim calibrate`).
//
// Input: nccom-test logs. A log holds one or more runs; a run starts with the command line that
// produced it (any line with an `nccom-test` word: its `-r N` / `--nworkers N` gives the rank
// count, `-N M` / `--nnodes M` the instances, and one of allr / all_reduce, allg / all_gather,
// redsct / reduce_scatter, alltoall / all_to_all the op), or with a comment line
// `# ranks: N op: all_reduce [nodes: M]`. Its table rows read
//     size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s) [algorithm]
// (the algorithm column is what --show-algorithm adds: Mesh, RDH, KangaRing, ..., any case).
// Blank lines, `#` comments, table headers (`size(B) ...`) and `Avg bus bandwidth` lines are
// skipped, and so is other text outside a table. Inside a table (after its header) every other
// line is a row, and so is any line starting with a number: a row that does not parse (wrong
// column count, a non-number, a size or time <= 0, NaN or infinity, an unknown algorithm, a row
// before any command line) is refused with Error(kBadConfig) "file:line: what is wrong". Rows of
// ops the model does not have (sendrecv) are skipped with a note.
//
// A run's rank count is 2 to kMaxCalibrationRanks (else refused, file:line): every row's
// schedule is planned, and a schedule's transfers grow with the square of the group.
//
// Sizes are nccom-test's size(B): all_gather the gathered total (each rank contributes
// size / ranks), all_reduce the buffer, reduce_scatter and all_to_all one rank's input.
//
// Fit: per (op, algorithm) with rows (the algorithm from the log's column, else what the runtime
// picks, collectives::PlanCollective with "auto"), three parameters, step_latency_ns, link_gbps
// (one NeuronLink link) and fixed_ns, minimising sum over rows ((model - measured) / measured)^2.
// The model is linear in (fixed_ns, step_latency_ns, 1 / link_gbps) once the slowest transfer of
// every step is known (ScheduleCost's decomposition), so the fit alternates: decompose under the
// current parameters, solve the weighted linear least squares, write the result into a
// collective_tuning entry {op, algorithm}, repeat until nothing moves by 1e-6 (relative) or 50
// rounds; the best round wins. A parameter the rows cannot determine (fewer rows than
// parameters, a column of zeros: no row link-bound, or a column proportional to another: every
// row with the same step count) keeps its current value; one that comes out negative is held at
// 0 (fixed, latency) or at its current value (link) and the rest re-solved. Each fit says which
// parameters it fitted and why any were kept.
//
// Pure functions of their arguments (no MPI); thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/schedule.h"
#include "runtime/hardware_profile.h"

namespace nkisim::collectives {

// The largest rank count a calibration run may have: 1,024 ranks (16 trn2 instances at LNC 2),
// planned in about 0.3 s a row; a 16,384-rank ring takes about 46 s and 3 GiB.
inline constexpr int kMaxCalibrationRanks = 1024;

struct CalibrationRow {
  std::string file;
  int line = 0;
  CollectiveOp op = CollectiveOp::kAllReduce;
  int ranks = 0;
  int nodes = 1;               // instances (-N)
  double size_bytes = 0;       // nccom-test's size(B)
  double measured_us = 0;
  std::string log_algorithm;   // the row's algorithm column, normalised to a row name; "" if none
  // Filled by Calibrate:
  std::string algorithm;       // the algorithm modelled (log_algorithm, or the "auto" choice)
  double before_us = 0;        // the model under the base profile
  double after_us = 0;         // the model under the calibrated profile
};

struct NccomTestLog {
  std::vector<CalibrationRow> rows;
  std::vector<std::string> notes;  // "file:line: ..." for what was skipped
};

// Parses one log's text; `source` names it in rows and messages.
NccomTestLog ParseNccomTestLog(const std::string& text, const std::string& source);
// Reads and parses every file in order; Error(kBadConfig) "path: cannot open nccom-test log".
NccomTestLog LoadNccomTestLogs(const std::vector<std::string>& paths);

// One rank's buffer as PlanCollective takes it, from nccom-test's size(B).
double PerRankBufferBytes(CollectiveOp op, double size_bytes, int ranks);

// Ranks 0 .. ranks - 1 spread evenly over `nodes` instances, each instance's share packed from
// chip 0 at `lnc` (DefaultPlacement when nodes is 1). Error(kInvalidArgument) when the ranks do
// not split evenly or do not fit.
GroupPlacement CalibrationPlacement(int ranks, int nodes, int lnc, const HardwareProfile& profile);

// The model's time of one row in us under `profile`, with the algorithm forced ("auto": the
// runtime's choice). Errors from PlanCollective get the row's "file:line: " in front.
double ModelMicroseconds(const CalibrationRow& row, int lnc, const HardwareProfile& profile,
                         const std::string& algorithm);

struct FittedParam {
  double before = 0;  // what the base profile gives for this (op, algorithm)
  double after = 0;
  bool fitted = false;  // free in the final solve (or held at 0 after coming out negative)
};

struct CalibrationFit {
  CollectiveOp op = CollectiveOp::kAllReduce;
  std::string algorithm;
  int rows = 0;
  FittedParam step_latency_ns, link_gbps, fixed_ns;
  int iterations = 0;
  bool converged = false;
  double geomean_before = 0, geomean_after = 0;  // over this fit's rows
  std::vector<std::string> notes;  // why a parameter was kept, convergence, ...
};

struct CalibrationOptions {
  int lnc = 2;
  // Written into every entry's source: "nkisim calibrate <logs>"; also names the logs in errors.
  std::vector<std::string> logs;
  int max_iterations = 50;
  double tolerance = 1e-6;
};

struct CalibrationResult {
  std::vector<CalibrationRow> rows;
  std::vector<CalibrationFit> fits;  // ordered by op, then algorithm
  double geomean_before = 0, geomean_after = 0;
  // ASTRA-sim's "geomean error": the geometric mean of |model - measured| / measured.
  double abs_geomean_before = 0, abs_geomean_after = 0;
  // The base with a collective_tuning entry per fit (any entry for the same op and algorithm
  // replaced; every entry sets all three figures) and "-calibrated" appended to its name.
  HardwareProfile profile;
};

// Fits every (op, algorithm) with rows. Error(kInvalidArgument) "calibrate: no rows to fit in
// <logs>" when `rows` is empty.
CalibrationResult Calibrate(const std::vector<CalibrationRow>& rows, const HardwareProfile& base,
                            const CalibrationOptions& options);

// exp(mean over pairs of |ln(model / measured)|) - 1; 0 for no pairs. The stricter measure: a
// factor of 2 either way counts as 100%.
double GeomeanError(const std::vector<double>& model, const std::vector<double>& measured);
// The geometric mean of |model - measured| / measured (each floored at 1e-4, so one exact row
// does not zero it), as ASTRA-sim reports its validation; 0 for no pairs.
double GeomeanAbsError(const std::vector<double>& model, const std::vector<double>& measured);

// The profile in protobuf text format such that LoadHardwareProfile / ParseHardwareProfile of it
// gives back `profile`: every field, zeros the trn2 defaults would otherwise replace spelled out,
// and the collective_tuning entries the built-in trn2 profile starts with left out (loading
// merges over trn2, which adds them again). `header` is written first as `#` comment lines.
std::string FormatProfileText(const HardwareProfile& profile, const std::string& header);

}  // namespace nkisim::collectives
