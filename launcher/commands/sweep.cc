#include "launcher/commands/sweep.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "launcher/job/mpirun.h"
#include "launcher/sweep/plots.h"
#include "launcher/sweep/predict_sweep.h"
#include "launcher/sweep/sweep_config.h"
#include "launcher/sweep/sweep_output.h"
#include "launcher/sweep/sweep_runner.h"
#include "runtime/config_file.h"
#include "runtime/error.h"
#include "runtime/output_file.h"

namespace nkisim::launcher {

namespace {

struct Options {
  std::string path;
  std::string out;
  std::string mpirun = "mpirun";
  std::string gnuplot = "gnuplot";
  bool functional = false;
  bool resume = false;
  bool no_plots = false;
};

std::string OutputPrefix(const Options& o, const std::string& default_output) {
  const std::string out = o.out.empty() ? default_output : o.out;
  if (out.empty() || out.back() == '/') {
    Raise(ErrorCode::kBadConfig, StrCat("--out: '", out, "' must name a file prefix, e.g. results/decode"));
  }
  CheckWritable(out + ".csv", "--out");
  return out;
}

// A sweep with a model axis: every point a `predict` of one plan, run in this process.
int RunPredictSweepCommand(const Options& o, const proto::Sweep& spec) {
  if (o.functional || o.resume) {
    Raise(ErrorCode::kBadConfig, StrCat(o.functional ? "--functional" : "--resume", ": a sweep with a model ",
                                        "axis (a predict sweep) runs predict's timing-only layers in seconds a ",
                                        "point and records no resumable runs; the flag does not apply"));
  }
  const PredictSweep sweep = ResolvePredictSweep(spec, o.path);
  const std::string out = OutputPrefix(o, sweep.output);
  if (!o.no_plots) CheckGnuplot(o.gnuplot);
  const PredictSweepResults results =
      RunPredictSweep(sweep, [&](const PredictSweepResults& r) { WritePredictSweepOutputs(sweep, r, out); });
  WritePredictSweepOutputs(sweep, results, out);
  std::printf("\n%s", PredictSweepVerdict(sweep, results).c_str());
  std::printf("\ntable: %s.csv, %s.json\nverdict: %s.verdict.txt\n", out.c_str(), out.c_str(), out.c_str());
  int failed = 0, drawn = 0;
  for (const auto& r : results) {
    failed += r && !r->ok;
    drawn += r && r->ok && r->prediction.simulated;
  }
  if (!o.no_plots && drawn > 0) {
    std::printf("plots:");
    for (const std::string& image : WritePredictSweepPlots(sweep, results, out, o.gnuplot)) {
      std::printf(" %s", image.c_str());
    }
    std::printf("\n");
  }
  std::fflush(stdout);
  if (failed > 0) {
    std::fprintf(stderr, "nkisim sweep: %d of %zu points failed; their errors are in %s.csv\n", failed,
                 sweep.points.size(), out.c_str());
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace

void AddSweepCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<Options>();
  cmd->add_option("sweep", o->path, "sweep file (text proto or JSON; docs/sweep.md)")->required();
  cmd->add_option("--out", o->out,
                  "output prefix: PREFIX.csv, .json, .verdict.txt, .pareto.png/.svg, .phases.png/.svg "
                  "and PREFIX.points/ (default: the sweep's output field, else its file name)");
  cmd->add_flag("--functional", o->functional,
                "run the points in the functional mode (compute and check every value; much slower, "
                "same simulated times) instead of `nkisim run --timing-only`");
  cmd->add_flag("--resume", o->resume,
                "keep the points PREFIX.json holds that ran ok with the same values and mode; run the "
                "others");
  cmd->add_option("--mpirun", o->mpirun, "mpirun program, passed to nkisim run")->capture_default_str();
  cmd->add_option("--gnuplot", o->gnuplot, "gnuplot program for the plots")->capture_default_str();
  cmd->add_flag("--no-plots", o->no_plots, "write the table and verdict only");
  cmd->callback([o, exit_code] {
    if (RunningUnderMpirun()) {
      Raise(ErrorCode::kBadConfig, "nkisim sweep starts an mpirun job per point group itself; run it "
                                   "without mpirun");
    }
    // Everything that can be checked is checked before the first point runs.
    const std::string text = ReadConfigFile(o->path, "sweep file");
    proto::Sweep spec;
    ParseConfigText(text, o->path, &spec);
    if (IsPredictSweep(spec)) {
      *exit_code = RunPredictSweepCommand(*o, spec);
      return;
    }
    const ResolvedSweep sweep = ResolveSweep(text, o->path);
    const std::string out = OutputPrefix(*o, sweep.output);
    if (!o->no_plots) CheckGnuplot(o->gnuplot);
    std::map<std::string, PointResult> recorded;
    if (o->resume) {
      if (std::filesystem::exists(out + ".json")) {
        recorded = ReadSweepJson(out + ".json");
      } else {
        std::fprintf(stderr, "nkisim sweep: --resume: %s.json does not exist; running every point\n",
                     out.c_str());
      }
    }
    SweepRunOptions run_options;
    run_options.out = out;
    run_options.timing_only = !o->functional;
    run_options.mpirun = o->mpirun;
    const SweepRun run = RunSweep(sweep, run_options, recorded, [&](const SweepResults& results) {
      WriteSweepOutputs(sweep, results, out);
    });
    WriteSweepOutputs(sweep, run.points, out);
    const std::string verdict = SweepVerdict(sweep, run.points);
    std::printf("\n%s", verdict.c_str());
    std::printf("\ntable: %s.csv, %s.json\nverdict: %s.verdict.txt\n", out.c_str(), out.c_str(), out.c_str());
    int failed = 0, ok = 0;
    for (const auto& r : run.points) {
      failed += r && !r->ok;
      ok += r && r->ok;
    }
    if (!o->no_plots && ok > 0) {
      const std::vector<std::string> images = WritePlots(sweep, run.points, out, o->gnuplot);
      std::printf("plots:");
      for (const std::string& image : images) std::printf(" %s", image.c_str());
      std::printf("\n");
    }
    std::fflush(stdout);
    if (run.stop_signal != 0) {
      std::fprintf(stderr, "nkisim sweep: interrupted; %s.json keeps the points run so far, --resume "
                           "runs the rest\n", out.c_str());
      *exit_code = 128 + run.stop_signal;
      return;
    }
    if (failed > 0) {
      std::fprintf(stderr, "nkisim sweep: %d of %zu points failed; their errors are in %s.csv\n", failed,
                   sweep.points.size(), out.c_str());
    }
    *exit_code = failed > 0 ? 1 : 0;
  });
}

}  // namespace nkisim::launcher
