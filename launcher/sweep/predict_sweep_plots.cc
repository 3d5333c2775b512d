// The plots of a predict sweep (launcher/sweep/predict_sweep.h): TPOT against batch and TTFT
// against input length, a gnuplot multiplot each (a panel per model and the other axes' values,
// rows by model), a line per plan; drawn as PNG and SVG by the gnuplot runner of the layer sweep.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "launcher/sweep/plots.h"
#include "launcher/sweep/predict_sweep.h"
#include "runtime/error.h"
#include "runtime/output_file.h"

namespace nkisim::launcher {
namespace {

constexpr int kPanelWidth = 560, kPanelHeight = 400;
constexpr int kPointTypes[] = {7, 5, 9, 11, 13, 15, 4, 8, 10, 12};

std::string Number(double v) { return StrPrintf("%.6g", v); }

struct Figure {
  const char* name;     // "tpot": the file's infix
  const char* y_label;  // "TPOT (ms)"
  const char* x_label;
  double target = 0;    // the dashed line; 0: none
  bool x_is_batch = true;
};

// The panel a point is drawn in: its shape's label without the x axis's value (every axis value
// but the plan and x).
std::string PanelOf(const PredictSweep& sweep, const PredictSweepPoint& p, bool x_is_batch) {
  std::string label = sweep.shapes[p.shape].label;
  const std::string token = x_is_batch ? StrCat(" B=", p.request.batch) : StrCat(" S=", p.request.input_tokens);
  const size_t at = label.find(token + " ");
  return at == std::string::npos ? label : label.erase(at, token.size());
}

// Writes <at>.<name>.dat (a data block per panel and plan: x, y, fits 1/0) and returns the
// script of the multiplot for one terminal.
std::string Multiplot(const PredictSweep& sweep, const PredictSweepResults& results, const Figure& f,
                      const std::string& base, std::string* data, int* width, int* height) {
  std::vector<std::string> panels, models, plans;
  for (const PredictSweepPoint& p : sweep.points) {
    const std::string panel = PanelOf(sweep, p, f.x_is_batch);
    if (std::find(panels.begin(), panels.end(), panel) == panels.end()) panels.push_back(panel);
    if (std::find(models.begin(), models.end(), p.model) == models.end()) models.push_back(p.model);
    const std::string& plan = p.request.plans.front().name;
    if (std::find(plans.begin(), plans.end(), plan) == plans.end()) plans.push_back(plan);
  }
  const int rows = static_cast<int>(models.size());
  const int cols = static_cast<int>((panels.size() + rows - 1) / rows);
  *width = std::min(4800, kPanelWidth * cols);
  *height = std::min(4800, kPanelHeight * rows + 60);
  std::string script = StrCat("set multiplot layout ", rows, ",", cols, " title ",
                              GnuplotQuote(StrCat(sweep.title, ": ", f.y_label, " against ", f.x_label,
                                                  " (predicted; hollow red: does not fit HBM)")),
                              "\n");
  int block = 0;
  for (const std::string& panel : panels) {
    std::string plot;
    for (size_t pi = 0; pi < plans.size(); ++pi) {
      std::vector<std::pair<double, std::string>> rows_of;
      for (const PredictSweepPoint& p : sweep.points) {
        const std::optional<PredictPointResult>& r = results[p.index];
        if (PanelOf(sweep, p, f.x_is_batch) != panel || p.request.plans.front().name != plans[pi]) continue;
        if (!r || !r->ok || !r->prediction.simulated) continue;
        const double x = f.x_is_batch ? p.request.batch : p.request.input_tokens;
        const double y = f.x_is_batch ? r->prediction.tpot_ms : r->prediction.ttft_ms;
        rows_of.emplace_back(x, StrCat(Number(x), " ", Number(y), " ", r->prediction.fits ? 1 : 0, "\n"));
      }
      if (rows_of.empty()) continue;
      std::sort(rows_of.begin(), rows_of.end());
      *data += StrCat("# ", panel, " plan ", plans[pi], "\n");
      for (const auto& row : rows_of) *data += row.second;
      *data += "\n\n";
      const std::string file = GnuplotQuote(StrCat(base, ".", f.name, ".dat"));
      plot += StrCat(plot.empty() ? "plot " : ", \\\n     ", file, " index ", block,
                     " using 1:2 with linespoints lw 2 ps 1.3 pt ", kPointTypes[pi % std::size(kPointTypes)], " lc ",
                     pi + 1, " title ", GnuplotQuote(plans[pi]), ", \\\n     ", file, " index ", block,
                     " using 1:($3 > 0 ? 1/0 : $2) with points pt 6 ps 2.6 lw 2 lc rgb '#d00000' notitle");
      ++block;
    }
    if (plot.empty()) continue;
    if (f.target > 0) {
      plot += StrCat(", \\\n     ", Number(f.target), " with lines dt 2 lw 2 lc rgb '#d00000' title ",
                     GnuplotQuote(StrCat("target ", Number(f.target), " ms")));
    }
    script += StrCat("set title ", GnuplotQuote(panel), "\nset xlabel ", GnuplotQuote(f.x_label), "\nset ylabel ",
                     GnuplotQuote(f.y_label), "\n", plot, "\n");
  }
  return script + "unset multiplot\n";
}

std::string Terminal(const char* kind, const std::string& file, int width, int height) {
  return StrCat("set terminal ", kind, " size ", width, ",", height, " noenhanced font 'sans,10'",
                std::string(kind) == "svg" ? " background '#ffffff'" : "", "\nset output ", GnuplotQuote(file), "\n");
}

}  // namespace

std::vector<std::string> WritePredictSweepPlots(const PredictSweep& sweep, const PredictSweepResults& results,
                                                const std::string& out, const std::string& gnuplot) {
  int drawn = 0;
  for (const auto& r : results) drawn += r && r->ok && r->prediction.simulated;
  if (drawn == 0) Raise(ErrorCode::kInvalidArgument, "plots: no point has a prediction to draw");
  const std::string base = std::filesystem::path(out).filename().string();
  const std::string at = out;
  const Figure figures[] = {{"tpot", "TPOT (ms)", "batch", sweep.tpot_ms_max, true},
                            {"ttft", "TTFT (ms)", "input tokens", sweep.ttft_ms_max, false}};
  std::string script = StrCat("# nkisim sweep ", sweep.source, ": the plots of a predict sweep. Run in this ",
                              "directory: gnuplot ", base, ".plots.gp\n");
  std::vector<std::string> images;
  for (const Figure& f : figures) {
    std::string data = StrCat("# nkisim sweep: ", f.x_label, ", ", f.y_label, ", fits HBM (1/0); a block per ",
                              "panel and plan\n");
    int width = 0, height = 0;
    const std::string plot = Multiplot(sweep, results, f, base, &data, &width, &height);
    WriteFileAtomically(StrCat(at, ".", f.name, ".dat"), data, "plot data");
    script += StrCat("\nreset\nset grid lc rgb '#dddddd'\nset logscale x 2\nset key outside bottom center horizontal font ',9'\n",
                     "set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.05\nset yrange [0:*]\n");
    for (const char* kind : {"pngcairo", "svg"}) {
      const std::string file = StrCat(base, ".", f.name, std::string(kind) == "svg" ? ".svg" : ".png");
      script += Terminal(kind, file, width, height) + plot + "set output\n";
      images.push_back(StrCat(at, ".", f.name, std::string(kind) == "svg" ? ".svg" : ".png"));
    }
  }
  WriteFileAtomically(at + ".plots.gp", script, "gnuplot script");
  RunGnuplotScript(at, images, gnuplot);
  return images;
}

}  // namespace nkisim::launcher
