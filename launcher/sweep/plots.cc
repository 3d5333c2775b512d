#include "launcher/sweep/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <boost/process.hpp>

#include "runtime/error.h"
#include "runtime/output_file.h"

namespace nkisim::launcher {
namespace {

namespace bp = boost::process;

// A gnuplot single-quoted string: a quote inside is doubled.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A data-file string field: double-quoted, without quotes inside.
std::string Field(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? '\'' : c;
  return out + "\"";
}

std::string Number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

constexpr int kPointTypes[] = {7, 5, 9, 11, 13, 15, 4, 6, 8, 10};

// The terminal lines of both formats, and the lines that write one image of each.
std::string Terminals(const std::string& base, int width, int height) {
  return StrCat("set terminal pngcairo size ", width, ",", height, " noenhanced font 'sans,10'\n",
                "set output ", Quote(base + ".png"), "\n");
}
std::string SvgReplot(const std::string& base, int width, int height) {
  return StrCat("set terminal svg size ", width, ",", height, " noenhanced font 'sans,10' background '#ffffff'\n",
                "set output ", Quote(base + ".svg"), "\nreplot\nset output\n");
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Tics of a log axis over [lo, hi]: 1, 2, 3, 5 x 10^k when it spans at most 2.5 decades (gnuplot
// would label the decades only, often one or two), else the decades.
std::string LogTics(const char* axis, double lo, double hi) {
  if (std::log10(hi / lo) > 2.5) return "";
  std::string tics;
  for (int k = static_cast<int>(std::floor(std::log10(lo))) - 1; k <= static_cast<int>(std::ceil(std::log10(hi))); ++k) {
    for (double m : {1.0, 2.0, 3.0, 5.0}) {
      const double v = m * std::pow(10.0, k);
      if (v >= lo / 2.5 && v <= hi * 2.5) tics += StrCat(tics.empty() ? "" : ", ", Number(v));
    }
  }
  return StrCat("set ", axis, "tics (", tics, ")\n");
}

}  // namespace

int PhasesPlotWidth(int bars, int shapes) {
  return std::clamp(300 + 36 * (bars + shapes), 1200, 4800);
}

void CheckGnuplot(const std::string& gnuplot) {
  const boost::filesystem::path program = gnuplot.find('/') != std::string::npos
                                              ? boost::filesystem::path(gnuplot)
                                              : bp::search_path(gnuplot);
  if (program.empty() || !boost::filesystem::exists(program)) {
    Raise(ErrorCode::kBadConfig,
          StrCat("gnuplot: '", gnuplot, "' not found on PATH; the plots need it: install the Debian ",
                 "package gnuplot-nox (scripts/setup.sh does), or pass --no-plots"));
  }
  int code = -1;
  try {
    code = bp::system(bp::exe = program, bp::args = std::vector<std::string>{"-e", "set terminal pngcairo; set terminal svg"},
                      bp::std_out > bp::null, bp::std_err > bp::null, bp::std_in < bp::null);
  } catch (const std::exception& e) {
    Raise(ErrorCode::kBadConfig, StrCat("gnuplot: cannot start '", program.string(), "': ", e.what()));
  }
  if (code != 0) {
    Raise(ErrorCode::kBadConfig,
          StrCat("gnuplot: '", program.string(), "' lacks the pngcairo or svg terminal (exit ", code,
                 "); install the Debian package gnuplot-nox, or pass --no-plots"));
  }
}

void RunGnuplotScript(const std::string& at, const std::vector<std::string>& images, const std::string& gnuplot) {
  const std::filesystem::path prefix(at);
  const std::filesystem::path dir = prefix.has_parent_path() ? prefix.parent_path() : ".";
  const std::string base = prefix.filename().string();
  for (const std::string& image : images) {
    std::error_code ec;
    std::filesystem::remove(image, ec);
  }
  const std::string log = at + ".plots.log";
  const boost::filesystem::path program =
      gnuplot.find('/') != std::string::npos ? boost::filesystem::path(gnuplot) : bp::search_path(gnuplot);
  int code = -1;
  try {
    code = bp::system(bp::exe = program, bp::args = std::vector<std::string>{base + ".plots.gp"},
                      bp::start_dir = dir.string(),
                      (bp::std_out & bp::std_err) > boost::filesystem::path(std::filesystem::absolute(log).string()),
                      bp::std_in < bp::null);
  } catch (const std::exception& e) {
    Raise(ErrorCode::kBadConfig, StrCat("gnuplot: cannot start '", gnuplot, "': ", e.what()));
  }
  std::vector<std::string> missing;
  for (const std::string& image : images) {
    if (!std::filesystem::exists(image) || std::filesystem::file_size(image) == 0) missing.push_back(image);
  }
  if (code != 0 || !missing.empty()) {
    std::string text = ReadText(log);
    if (text.size() > 1500) text = StrCat("...", text.substr(text.size() - 1500));
    Raise(ErrorCode::kInternal, StrCat("gnuplot failed on ", at, ".plots.gp (exit ", code, ", ", missing.size(),
                                       " of ", images.size(), " images missing); its output (", log, "):\n", text));
  }
}

std::string GnuplotQuote(const std::string& s) { return Quote(s); }

std::vector<std::string> WritePlots(const ResolvedSweep& sweep, const SweepResults& results,
                                    const std::string& out, const std::string& gnuplot) {
  const std::filesystem::path prefix(out);
  const std::filesystem::path dir = prefix.has_parent_path() ? prefix.parent_path() : ".";
  const std::string base = prefix.filename().string();
  const bool decode = sweep.workload == Workload::kDecode;
  const std::vector<std::string> phases = ResultPhases(results);
  // The bars: every point that ran ok; the Pareto plot: those with a KV cache (log axes).
  const auto ran_ok = [&](const SweepPoint& p) {
    const std::optional<PointResult>& r = results[p.index];
    return r && r->ok && r->has_times && r->step_us > 0;
  };
  const auto drawn = [&](const SweepPoint& p) { return ran_ok(p) && results[p.index]->kv_cache_mib > 0; };
  int bars = 0;
  for (const SweepPoint& p : sweep.points) bars += ran_ok(p);
  if (bars == 0) {
    Raise(ErrorCode::kInvalidArgument, "plots: no point has a result to draw (every point failed)");
  }

  // Pareto: a block per plan (gnuplot index), the fronts per shape, the shape labels.
  std::vector<std::string> plans;
  for (const SweepPoint& p : sweep.points) {
    if (drawn(p) && std::find(plans.begin(), plans.end(), p.plan) == plans.end()) plans.push_back(p.plan);
  }
  double kv_min = 1e300, kv_max = 0, us_min = 1e300, us_max = 0;
  for (const SweepPoint& p : sweep.points) {
    if (!drawn(p)) continue;
    kv_min = std::min(kv_min, results[p.index]->kv_cache_mib);
    kv_max = std::max(kv_max, results[p.index]->kv_cache_mib);
    us_min = std::min(us_min, results[p.index]->step_us);
    us_max = std::max(us_max, results[p.index]->step_us);
  }
  std::string pareto = "# nkisim sweep: KV cache per rank (MiB), step time (us), shape; a block per plan\n";
  for (const std::string& plan : plans) {
    pareto += StrCat("# plan ", plan, "\n");
    for (const SweepPoint& p : sweep.points) {
      if (p.plan != plan || !drawn(p)) continue;
      const PointResult& r = *results[p.index];
      pareto += StrCat(Number(r.kv_cache_mib), " ", Number(r.step_us), " ",
                       Field(sweep.shapes[p.shape].label), "\n");
    }
    pareto += "\n\n";
  }
  // Index 0: the Pareto front of each shape (a staircase: the least step time for a KV budget);
  // index 1: the plans of each shape in plan order, joined by a faint line.
  std::string front = "# Pareto front of each shape: KV cache per rank (MiB), least step time (us)\n";
  std::string joined = "\n\n# The plans of each shape, in plan order\n";
  std::string labels;
  for (const SweepShape& shape : sweep.shapes) {
    std::vector<std::pair<double, double>> pts;
    for (int pi : shape.points) {
      if (drawn(sweep.points[pi])) pts.emplace_back(results[pi]->kv_cache_mib, results[pi]->step_us);
    }
    if (pts.empty()) continue;
    joined += StrCat("# ", shape.label, "\n");
    for (const auto& [kv, us] : pts) joined += StrCat(Number(kv), " ", Number(us), "\n");
    joined += "\n";
    std::sort(pts.begin(), pts.end());
    double best = pts.front().second * 2 + 1;
    std::vector<std::pair<double, double>> kept;
    for (const auto& [kv, us] : pts) {
      if (us < best) {
        kept.emplace_back(kv, us);
        best = us;
      }
    }
    front += StrCat("# ", shape.label, "\n");
    for (const auto& [kv, us] : kept) front += StrCat(Number(kv), " ", Number(us), "\n");
    front += "\n";
    labels += StrCat("set label ", Quote(shape.label), " at first ", Number(kept.front().first), ", first ",
                     Number(kept.front().second), " offset -1,1.2 right font ',8' textcolor rgb '#555555'\n");
  }

  // Phases: one bar per drawn point, a gap between shapes; cumulative sums in phase order.
  std::string bars_data = "# x, plan, then the cumulative simulated time (us) after each phase:";
  for (const std::string& p : phases) bars_data += StrCat(" ", p);
  bars_data += "\n";
  std::string group_labels;
  double x = 0, top = 0;
  int shapes_drawn = 0;
  for (const SweepShape& shape : sweep.shapes) {
    double first = -1, last = -1;
    for (int pi : shape.points) {
      const SweepPoint& p = sweep.points[pi];
      if (!ran_ok(p)) continue;
      const PointResult& r = *results[pi];
      bars_data += StrCat(Number(x), " ", Field(p.plan));
      double sum = 0;
      for (const std::string& phase : phases) {
        for (const auto& [name, us] : r.phase_us) {
          if (name == phase) sum += us;
        }
        bars_data += StrCat(" ", Number(sum));
      }
      bars_data += "\n";
      top = std::max(top, sum);
      if (first < 0) first = x;
      last = x;
      x += 1;
    }
    if (first < 0) continue;
    ++shapes_drawn;
    group_labels += StrCat("set label ", Quote(shape.label), " at first ", Number((first + last) / 2),
                           ", graph 0.97 center font ',9'\n");
    x += 1;  // the gap
  }
  const int phases_width = PhasesPlotWidth(bars, shapes_drawn);

  const std::string step = decode ? "decode step" : "prefill";
  std::string script = StrCat("# nkisim sweep ", sweep.source, ": the plots. Run in this directory: gnuplot ",
                              base, ".plots.gp\n\n");
  script += "# (a) step time against KV cache per rank, per plan; each shape's Pareto front\n";
  script += Terminals(base + ".pareto", kParetoWidth, kParetoHeight);
  script += StrCat("set title ", Quote(StrCat(sweep.title, ": ", step, " time against KV cache per rank (",
                                             "simulated); lines: each shape's Pareto front, the least time ",
                                             "for a KV budget")),
                   "\n");
  script += StrCat("set xlabel 'KV cache per rank (MiB)'\nset ylabel ", Quote(step + ", simulated (us)"), "\n");
  // Log axes when the values span more than a factor of 4 (memory and time grow with B and L);
  // the ranges fit the points, with a margin.
  script += StrCat(kv_max > 4 * kv_min ? StrCat("set logscale x\n", LogTics("x", kv_min, kv_max)) : "",
                   us_max > 4 * us_min ? StrCat("set logscale y\n", LogTics("y", us_min, us_max)) : "",
                   "set autoscale xfix\nset autoscale yfix\n");
  script += "set grid xtics ytics mxtics mytics lc rgb '#dddddd'\n";
  script += "set key outside right top box\nset offsets graph 0.08, graph 0.04, graph 0.1, graph 0.06\n";
  script += labels;
  script += "plot ";
  for (size_t i = 0; i < plans.size(); ++i) {
    script += StrCat(Quote(base + ".pareto.dat"), " index ", i, " using 1:2 with points pt ",
                     kPointTypes[i % std::size(kPointTypes)], " ps 1.6 lc ", i + 1, " title ", Quote(plans[i]),
                     ", \\\n     ");
  }
  script += StrCat(Quote(base + ".front.dat"), " index 1 using 1:2 with lines dt 3 lw 1 lc rgb '#aaaaaa' title ",
                   Quote("the plans of a shape"), ", \\\n     ");
  script += StrCat(Quote(base + ".front.dat"), " index 0 using 1:2 with steps lw 2 lc rgb '#555555' title ",
                   Quote("Pareto front of a shape"), "\n");
  script += SvgReplot(base + ".pareto", kParetoWidth, kParetoHeight);
  script += "\nreset\nunset label\n\n# (b) simulated time per phase, one stacked bar per point\n";
  script += Terminals(base + ".phases", phases_width, kPhasesHeight);
  script += StrCat("set title ", Quote(StrCat(sweep.title, ": simulated time per phase (us), one bar per point, ",
                                             "grouped by shape")),
                   "\n");
  script += "set ylabel 'simulated time (us)'\nset xtics rotate by 45 right scale 0 font ',9'\n";
  script += StrCat("set xrange [-1:", Number(x - 1), "]\nset yrange [0:", Number(top * 1.12 + 1e-9), "]\n");
  script += "set style fill solid 0.9 border rgb '#333333'\nset boxwidth 0.8\n";
  script += "set grid ytics lc rgb '#dddddd'\nset key outside right top box title 'phase'\n";
  script += group_labels;
  script += "plot ";
  for (size_t k = phases.size(); k-- > 0;) {
    script += StrCat(k + 1 == phases.size() ? Quote(base + ".phases.dat") : std::string("''"), " using 1:",
                     k + 3, k + 1 == phases.size() ? ":xtic(2)" : "", " with boxes lc ", k + 1, " title ",
                     Quote(phases[k]), k == 0 ? "\n" : ", \\\n     ");
  }
  script += SvgReplot(base + ".phases", phases_width, kPhasesHeight);

  const std::string at = (dir / base).string();
  WriteFileAtomically(at + ".pareto.dat", pareto, "plot data");
  WriteFileAtomically(at + ".front.dat", front + joined, "plot data");
  WriteFileAtomically(at + ".phases.dat", bars_data, "plot data");
  WriteFileAtomically(at + ".plots.gp", script, "gnuplot script");
  const std::vector<std::string> images = {at + ".pareto.png", at + ".pareto.svg", at + ".phases.png",
                                           at + ".phases.svg"};
  RunGnuplotScript(at, images, gnuplot);
  return images;
}

}  // namespace nkisim::launcher
