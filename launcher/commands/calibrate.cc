#include "launcher/commands/calibrate.h"

#include <google/protobuf/util/message_differencer.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/calibration.h"
#include "collectives/link_model.h"
#include "launcher/commands/common_options.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/output_file.h"

namespace nkisim::launcher {
namespace {

struct Options {
  std::vector<std::string> logs;
  std::string out;
  CommonOptions common;  // --profile --lnc
};

std::string Joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : " ") + p;
  return s;
}

std::string Percent(double fraction) { return StrCat(std::round(fraction * 1000) / 10, "%"); }

std::string SignedError(double model, double measured) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", (model - measured) / measured * 100);
  return buf;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

void PrintParam(const char* name, const collectives::FittedParam& p) {
  std::printf(" %s %s -> %s (%s);", name, Number(p.before).c_str(), Number(p.after).c_str(),
              p.fitted ? "fitted" : "kept");
}

// Every tuning-visible figure of `a` and `b` agrees, for every op and algorithm.
bool SameCollectiveParams(const HardwareProfile& a, const HardwareProfile& b) {
  using collectives::CollectiveOp;
  std::vector<std::string> algorithms = {""};
  for (const collectives::AlgorithmRow& row : collectives::AlgorithmTable()) {
    algorithms.push_back(row.name);
  }
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                          CollectiveOp::kAllReduce, CollectiveOp::kAllToAll}) {
    for (const std::string& algorithm : algorithms) {
      const collectives::CollectiveParams x = collectives::ResolveParams(a, op, algorithm);
      const collectives::CollectiveParams y = collectives::ResolveParams(b, op, algorithm);
      if (x.step_latency_ns != y.step_latency_ns || x.link_gbps != y.link_gbps ||
          x.fixed_ns != y.fixed_ns) {
        return false;
      }
    }
  }
  HardwareProfile a_rest = a, b_rest = b;
  a_rest.clear_collective_tuning();
  b_rest.clear_collective_tuning();
  return google::protobuf::util::MessageDifferencer::Equals(a_rest, b_rest);
}

void RunCalibrate(const Options& o) {
  CheckWritable(o.out, "calibrate: --out");  // before anything slow: an unwritable --out fails first
  const HardwareProfile base = LoadProfile(o.common);
  const collectives::NccomTestLog log = collectives::LoadNccomTestLogs(o.logs);
  for (const std::string& note : log.notes) std::printf("# note: %s\n", note.c_str());
  collectives::CalibrationOptions options;
  options.lnc = o.common.lnc;
  options.logs = o.logs;
  const collectives::CalibrationResult r = collectives::Calibrate(log.rows, base, options);

  std::printf("# nkisim calibrate: %zu rows from %s; lnc %d; base profile %s\n", r.rows.size(),
              Joined(o.logs).c_str(), o.common.lnc,
              o.common.profile_path.empty() ? "trn2 (built-in)" : o.common.profile_path.c_str());
  std::printf("# size = nccom-test size(B); model = nkisim's link model; err = (model - measured) "
              "/ measured\n");
  size_t where_width = 9;
  std::vector<std::string> wheres;
  for (const collectives::CalibrationRow& row : r.rows) {
    wheres.push_back(StrCat(row.file, ":", row.line));
    where_width = std::max(where_width, wheres.back().size());
  }
  const int w = static_cast<int>(where_width);
  std::printf("%-*s  %-14s %5s %12s  %-12s %12s %12s %8s %12s %8s\n", w, "file:line", "op",
              "ranks", "size(B)", "algorithm", "measured(us)", "before(us)", "err", "after(us)",
              "err");
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const collectives::CalibrationRow& row = r.rows[i];
    std::printf("%-*s  %-14s %5d %12.0f  %-12s %12.3f %12.3f %8s %12.3f %8s\n", w,
                wheres[i].c_str(), collectives::OpName(row.op), row.ranks, row.size_bytes,
                row.algorithm.c_str(), row.measured_us, row.before_us,
                SignedError(row.before_us, row.measured_us).c_str(), row.after_us,
                SignedError(row.after_us, row.measured_us).c_str());
  }
  std::printf("\nfitted collective_tuning (parameter: before -> after):\n");
  for (const collectives::CalibrationFit& fit : r.fits) {
    std::printf("  %s / %s: %d row%s;", collectives::OpName(fit.op), fit.algorithm.c_str(),
                fit.rows, fit.rows == 1 ? "" : "s");
    PrintParam("step_latency_ns", fit.step_latency_ns);
    PrintParam("link_gbps", fit.link_gbps);
    PrintParam("fixed_ns", fit.fixed_ns);
    std::printf(" geomean error %s -> %s\n", Percent(fit.geomean_before).c_str(),
                Percent(fit.geomean_after).c_str());
    for (const std::string& note : fit.notes) std::printf("      %s\n", note.c_str());
  }
  std::printf("\ngeomean error: %s before, %s after (%zu rows)\n",
              Percent(r.geomean_before).c_str(), Percent(r.geomean_after).c_str(), r.rows.size());
  std::printf("geomean |error| (ASTRA-sim's measure): %s before, %s after\n",
              Percent(r.abs_geomean_before).c_str(), Percent(r.abs_geomean_after).c_str());

  const std::string header = StrCat(
      "Hardware profile written by `nkisim calibrate ", Joined(o.logs), " --lnc ", o.common.lnc,
      o.common.profile_path.empty() ? "" : " --profile " + o.common.profile_path, "`.\n",
      "Base: ", o.common.profile_path.empty() ? "the built-in trn2 profile" : o.common.profile_path,
      ", with one collective_tuning entry per fitted (op, algorithm).\n", "Geomean error over ",
      r.rows.size(), " rows: ", Percent(r.geomean_before), " before, ",
      Percent(r.geomean_after), " after.\n",
      "Like every profile it is merged over the built-in trn2 defaults when loaded, so the\n",
      "collective_tuning entries the built-in profile starts with are not repeated here.\n");
  const std::string text = collectives::FormatProfileText(r.profile, header);
  // The file must give back the calibrated profile.
  const HardwareProfile reloaded = ParseHardwareProfile(text, o.out);
  if (!SameCollectiveParams(reloaded, r.profile)) {
    Raise(ErrorCode::kInternal, StrCat("calibrate: the text written for ", o.out,
                                       " does not load back as the calibrated profile"));
  }
  WriteFileAtomically(o.out, text, "calibrate: --out");
  std::printf("wrote %s\n", o.out.c_str());
}

}  // namespace

void AddCalibrateCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<Options>();
  cmd->add_option("logs", o->logs, "nccom-test output files (one or more runs each)")
      ->required();
  cmd->add_option("--out", o->out, "calibrated hardware profile to write (text format)")
      ->required();
  const CommonOptionHandles common =
      AddCommonOptions(cmd, &o->common, kProfileFlag | kLncFlag, {});
  common.profile->description("base hardware profile (merged over trn2); default: built-in trn2");
  common.lnc->description("physical cores per rank in the measured runs");
  cmd->callback([o, exit_code] {
    RunCalibrate(*o);
    *exit_code = 0;
  });
}

}  // namespace nkisim::launcher
