// The plots of `nkisim sweep`, drawn by gnuplot (Debian package gnuplot-nox) from a script and
// data files written next to the outputs, each as PNG (pngcairo) and SVG:
//   <out>.pareto.{png,svg}  step time against KV cache per rank, one point series per plan, and
//                           each shape's Pareto front (the least step time for a KV budget) as a
//                           staircase line labelled with the shape;
//   <out>.phases.{png,svg}  one stacked bar per point (plan, grouped by shape): the simulated
//                           time of each phase.
// Files: <out>.plots.gp (the script: rerun it with `gnuplot <out>.plots.gp` in <out>'s directory
// after editing), <out>.pareto.dat, <out>.front.dat, <out>.phases.dat, <out>.plots.log (gnuplot's
// output). Only points that ran ok are drawn.
#pragma once

#include <string>
#include <vector>

#include "launcher/sweep/sweep_output.h"

namespace nkisim::launcher {

// Image sizes in pixels (PNG and SVG alike).
inline constexpr int kParetoWidth = 1200;
inline constexpr int kParetoHeight = 800;
inline constexpr int kPhasesHeight = 800;
// The phases plot widens with its bars: 300 + 36 per bar and shape gap, in [1200, 4800].
int PhasesPlotWidth(int bars, int shapes);

// Throws Error(kBadConfig) when `gnuplot` is not found on PATH (naming the package to install) or
// lacks the pngcairo or svg terminal. Called before any point runs.
void CheckGnuplot(const std::string& gnuplot = "gnuplot");

// Writes the script and data files and runs gnuplot in <out>'s directory; returns the images
// written. Throws Error(kInternal) with the end of gnuplot's output when gnuplot fails, and
// Error(kInvalidArgument) when no point has a result to draw.
std::vector<std::string> WritePlots(const ResolvedSweep& sweep, const SweepResults& results,
                                    const std::string& out, const std::string& gnuplot = "gnuplot");

// Runs gnuplot on <at>.plots.gp in <at>'s directory, its output in <at>.plots.log; throws
// Error(kInternal) with the end of that output when it fails or an image is missing or empty.
void RunGnuplotScript(const std::string& at, const std::vector<std::string>& images,
                      const std::string& gnuplot = "gnuplot");
// A gnuplot single-quoted string ('it''s').
std::string GnuplotQuote(const std::string& s);

}  // namespace nkisim::launcher
