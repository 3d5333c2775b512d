#include "collectives/calibration.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>

#include "collectives/collective_cost.h"
#include "collectives/link_model.h"
#include "runtime/config_file.h"
#include "runtime/error.h"

namespace nkisim::collectives {
namespace {

// ---------------------------------------------------------------------------------------------
// Parsing

std::vector<std::string> SplitWords(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// The op names nccom-test takes; `modelled` false for the ones the cost model has no row for.
struct NccomOp {
  const char* name;
  bool modelled;
};
constexpr NccomOp kNccomOps[] = {
    {"allr", true},          {"all_reduce", true}, {"allg", true},       {"all_gather", true},
    {"redsct", true},        {"reduce_scatter", true}, {"alltoall", true}, {"all_to_all", true},
    {"sendrecv", false},     {"send_recv", false},  {"permute", false},
};

const NccomOp* FindNccomOp(const std::string& word) {
  for (const NccomOp& op : kNccomOps) {
    if (word == op.name) return &op;
  }
  return nullptr;
}

// A whole-word number; false for anything strtod does not consume entirely.
bool ParseNumber(const std::string& word, double* value) {
  if (word.empty()) return false;
  char* end = nullptr;
  *value = std::strtod(word.c_str(), &end);
  return end == word.c_str() + word.size();
}

bool ParseCount(const std::string& word, int* value) {
  double v = 0;
  if (!ParseNumber(word, &v) || !(v >= 0) || v != std::floor(v) || v > 1e9) return false;
  *value = static_cast<int>(v);
  return true;
}

// What the log's algorithm column names, as a row of the algorithm table; "" when unknown.
std::string NormaliseAlgorithm(const std::string& word) {
  std::string name = Lower(word);
  std::replace(name.begin(), name.end(), '-', '_');
  static const std::map<std::string, std::string> kAliases = {
      {"kanga_ring", "kangaring"}, {"mesh1step", "mesh_1step"}, {"mesh_one_step", "mesh_1step"},
      {"single_step_mesh", "mesh_1step"}, {"recursive_doubling_halving", "rdh"},
  };
  if (auto it = kAliases.find(name); it != kAliases.end()) name = it->second;
  return FindAlgorithm(name) ? name : "";
}

struct Run {
  bool known = false;     // a command line or run comment was seen
  bool modelled = false;  // its op is one the cost model has
  std::string op_word;
  CollectiveOp op = CollectiveOp::kAllReduce;
  int ranks = 0;
  int nodes = 1;
  std::string where;  // "file:line" of the command line
  int skipped_rows = 0;
};

// No collective measured by nccom-test comes near these (1 TiB, 11 days).
constexpr double kMaxLogBytes = 1099511627776.0;
constexpr double kMaxLogMicroseconds = 1e12;

[[noreturn]] void Refuse(const std::string& where, const std::string& what) {
  Raise(ErrorCode::kBadConfig, StrCat(where, ": ", what));
}

// The value of option `word` (-r 16, -r16, --nworkers 16, --nworkers=16); false if `word` is not
// the option.
bool OptionValue(const std::vector<std::string>& words, size_t* i, const std::string& short_name,
                 const std::string& long_name, std::string* value) {
  const std::string& w = words[*i];
  if (w == short_name || w == long_name) {
    if (*i + 1 >= words.size()) {
      *value = "";
      return true;
    }
    *value = words[++*i];
    return true;
  }
  if (StartsWith(w, long_name + "=")) {
    *value = w.substr(long_name.size() + 1);
    return true;
  }
  if (w.size() > short_name.size() && StartsWith(w, short_name) &&
      std::isdigit(static_cast<unsigned char>(w[short_name.size()]))) {
    *value = w.substr(short_name.size());
    return true;
  }
  return false;
}

void SetRunOp(Run* run, const std::string& word, const std::string& where) {
  const NccomOp* op = FindNccomOp(word);
  if (!op) {
    Refuse(where, StrCat("operation '", word,
                         "' is not one of allr / all_reduce, allg / all_gather, redsct / "
                         "reduce_scatter, alltoall / all_to_all"));
  }
  if (!run->op_word.empty() && run->op_word != word) {
    Refuse(where, StrCat("the command names two operations, '", run->op_word, "' and '", word, "'"));
  }
  run->op_word = word;
  run->modelled = op->modelled;
  if (op->modelled) run->op = ParseOp(word);
}

void CheckRunCounts(const Run& run, const std::string& where, const std::string& ranks_text,
                    const std::string& nodes_text) {
  if (run.ranks < 2) {
    Refuse(where, StrCat("rank count '", ranks_text, "' must be an integer >= 2"));
  }
  if (run.ranks > kMaxCalibrationRanks) {
    Refuse(where, StrCat("rank count ", run.ranks, " must be at most ", kMaxCalibrationRanks,
                         " (every row's schedule is planned; calibrate on smaller runs)"));
  }
  if (run.nodes < 1) Refuse(where, StrCat("node count '", nodes_text, "' must be an integer >= 1"));
  if (run.ranks % run.nodes != 0) {
    Refuse(where, StrCat(run.ranks, " ranks do not split evenly over ", run.nodes, " nodes"));
  }
}

// `nccom-test ... -r N [-N M] OP ...`
Run ParseCommand(const std::vector<std::string>& words, size_t tool, const std::string& where) {
  Run run;
  run.known = true;
  run.where = where;
  std::string ranks_text, nodes_text = "1";
  for (size_t i = tool + 1; i < words.size(); ++i) {
    std::string value;
    if (OptionValue(words, &i, "-r", "--nworkers", &value)) {
      ranks_text = value;
    } else if (OptionValue(words, &i, "-N", "--nnodes", &value)) {
      nodes_text = value;
    } else if (FindNccomOp(words[i])) {
      SetRunOp(&run, words[i], where);
    }
  }
  if (ranks_text.empty()) {
    Refuse(where, "nccom-test command without -r N (--nworkers): the rank count is unknown");
  }
  if (run.op_word.empty()) {
    Refuse(where, "nccom-test command names no operation (allr, allg, redsct, alltoall)");
  }
  if (!ParseCount(ranks_text, &run.ranks)) run.ranks = 0;
  if (!ParseCount(nodes_text, &run.nodes)) run.nodes = 0;
  CheckRunCounts(run, where, ranks_text, nodes_text);
  return run;
}

// `# ranks: N op: OP [nodes: M]`; run.known false when the comment is not one.
Run ParseRunComment(const std::vector<std::string>& words, const std::string& where) {
  Run run;
  std::string ranks_text, op_text, nodes_text = "1";
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    const std::string key = Lower(words[i]);
    if (key == "ranks:") ranks_text = words[i + 1];
    if (key == "op:") op_text = words[i + 1];
    if (key == "nodes:") nodes_text = words[i + 1];
  }
  if (ranks_text.empty() || op_text.empty()) return run;
  run.known = true;
  run.where = where;
  SetRunOp(&run, op_text, where);
  if (!ParseCount(ranks_text, &run.ranks)) run.ranks = 0;
  if (!ParseCount(nodes_text, &run.nodes)) run.nodes = 0;
  CheckRunCounts(run, where, ranks_text, nodes_text);
  return run;
}

double Column(const std::vector<std::string>& words, size_t i, const char* name,
              const std::string& where) {
  double v = 0;
  if (!ParseNumber(words[i], &v)) {
    Refuse(where, StrCat(name, " '", words[i], "' (column ", i + 1, ") is not a number"));
  }
  if (!std::isfinite(v)) {
    Refuse(where, StrCat(name, " '", words[i], "' (column ", i + 1, ") is not a finite number"));
  }
  return v;
}

CalibrationRow ParseRow(const std::vector<std::string>& words, const Run& run,
                        const std::string& file, int line) {
  const std::string where = StrCat(file, ":", line);
  if (words.size() != 6 && words.size() != 7) {
    Refuse(where, StrCat("a result row has 6 columns (size(B) count(elems) type time(us) "
                         "algbw(GB/s) busbw(GB/s)) and an optional algorithm; this one has ",
                         words.size()));
  }
  if (!run.known) {
    Refuse(where, "a result row before any nccom-test command line (or '# ranks: N op: OP' "
                  "comment): its op and rank count are unknown");
  }
  CalibrationRow row;
  row.file = file;
  row.line = line;
  row.op = run.op;
  row.ranks = run.ranks;
  row.nodes = run.nodes;
  row.size_bytes = Column(words, 0, "size(B)", where);
  const double count = Column(words, 1, "count(elems)", where);
  double number = 0;
  if (ParseNumber(words[2], &number)) {
    Refuse(where, StrCat("type '", words[2], "' (column 3) is a number, not a data type"));
  }
  row.measured_us = Column(words, 3, "time(us)", where);
  const double algbw = Column(words, 4, "algbw(GB/s)", where);
  const double busbw = Column(words, 5, "busbw(GB/s)", where);
  if (!(row.size_bytes > 0 && row.size_bytes <= kMaxLogBytes)) {
    Refuse(where, StrCat("size(B) ", words[0], " must be in (0, 2^40]"));
  }
  if (!(row.measured_us <= kMaxLogMicroseconds)) {
    Refuse(where, StrCat("time(us) ", words[3], " must be <= 1e12 (11 days)"));
  }
  if (!(count >= 0)) Refuse(where, StrCat("count(elems) ", words[1], " must be >= 0"));
  if (!(row.measured_us > 0)) Refuse(where, StrCat("time(us) ", words[3], " must be > 0"));
  if (!(algbw >= 0)) Refuse(where, StrCat("algbw(GB/s) ", words[4], " must be >= 0"));
  if (!(busbw >= 0)) Refuse(where, StrCat("busbw(GB/s) ", words[5], " must be >= 0"));
  if (words.size() == 7) {
    row.log_algorithm = NormaliseAlgorithm(words[6]);
    if (row.log_algorithm.empty()) {
      Refuse(where, StrCat("algorithm '", words[6], "' (column 7) is not one of ",
                           AlgorithmNames(), " (any case)"));
    }
    // A row its algorithm cannot have produced is the same class of error as an unknown name.
    if (const AlgorithmRow* a = FindAlgorithm(row.log_algorithm); !a->serves(run.op)) {
      Refuse(where, StrCat("algorithm '", words[6], "' (column 7) does not implement ",
                           OpName(run.op), " (", a->name, ": ", a->summary, ")"));
    }
  }
  return row;
}

bool LooksNumeric(const std::string& word) {
  const char c = word[0];
  if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') return true;
  const std::string w = Lower(word);
  return StartsWith(w, "nan") || StartsWith(w, "inf");
}

bool IsTool(const std::string& word) {
  return word == "nccom-test" ||
         (word.size() > 11 && word.compare(word.size() - 11, 11, "/nccom-test") == 0);
}

// ---------------------------------------------------------------------------------------------
// Fitting

enum Param { kFixed = 0, kLatency = 1, kLink = 2, kParams = 3 };
constexpr const char* kParamNames[kParams] = {"fixed_ns", "step_latency_ns", "link_gbps"};

struct Values {
  double fixed_ns = 0, step_latency_ns = 0, link_gbps = 0;
};

struct Sample {
  double measured_ns = 0;
  double column[kParams] = {0, 0, 0};  // coefficients of fixed, latency, 1 / link_gbps
  double rest_ns = 0;
  double total_ns = 0;
};

void RemoveTuning(HardwareProfile* profile, const std::string& op, const std::string& algorithm) {
  auto* entries = profile->mutable_collective_tuning();
  for (int i = entries->size() - 1; i >= 0; --i) {
    if (entries->Get(i).op() == op && entries->Get(i).algorithm() == algorithm) {
      entries->DeleteSubrange(i, 1);
    }
  }
}

proto::CollectiveTuning TuningEntry(const std::string& op, const std::string& algorithm,
                                    const Values& v, const std::string& source) {
  proto::CollectiveTuning t;
  t.set_op(op);
  t.set_algorithm(algorithm);
  t.set_step_latency_ns(v.step_latency_ns);
  t.set_link_gbps(v.link_gbps);
  t.set_fixed_ns(v.fixed_ns);
  t.set_source(source);
  return t;
}

CollectivePlan PlanRow(const CalibrationRow& row, int lnc, const HardwareProfile& profile,
                       const std::string& algorithm) {
  try {
    return PlanCollective(row.op, CalibrationPlacement(row.ranks, row.nodes, lnc, profile),
                          PerRankBufferBytes(row.op, row.size_bytes, row.ranks), profile,
                          algorithm, Launch::kHost);  // nccom-test launches each call from the host
  } catch (const Error& e) {
    Raise(e.code(), StrCat(row.file, ":", row.line, ": ", e.what()));
  }
}

double Norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// Solves the k x k system a x = b (row-major) by Gaussian elimination with partial pivoting;
// false when singular.
bool SolveSmall(std::vector<double> a, std::vector<double> b, int k, std::vector<double>* x) {
  for (int c = 0; c < k; ++c) {
    int pivot = c;
    for (int r = c + 1; r < k; ++r) {
      if (std::fabs(a[r * k + c]) > std::fabs(a[pivot * k + c])) pivot = r;
    }
    if (std::fabs(a[pivot * k + c]) < 1e-14) return false;
    if (pivot != c) {
      for (int j = 0; j < k; ++j) std::swap(a[c * k + j], a[pivot * k + j]);
      std::swap(b[c], b[pivot]);
    }
    for (int r = c + 1; r < k; ++r) {
      const double f = a[r * k + c] / a[c * k + c];
      for (int j = c; j < k; ++j) a[r * k + j] -= f * a[c * k + j];
      b[r] -= f * b[c];
    }
  }
  x->assign(static_cast<size_t>(k), 0.0);
  for (int c = k - 1; c >= 0; --c) {
    double s = b[c];
    for (int j = c + 1; j < k; ++j) s -= a[c * k + j] * (*x)[j];
    (*x)[c] = s / a[c * k + c];
  }
  return true;
}

struct SolveOutcome {
  Values values;
  std::array<bool, kParams> fitted{};
  std::vector<std::string> notes;
};

// One weighted linear least-squares solve for the parameters the samples determine.
SolveOutcome SolveRound(const std::vector<Sample>& samples, const Values& current) {
  const size_t n = samples.size();
  // theta: fixed, latency, 1 / link.
  std::array<double, kParams> theta = {current.fixed_ns, current.step_latency_ns,
                                       1.0 / current.link_gbps};
  std::array<std::vector<double>, kParams> col;  // weighted columns
  for (int j = 0; j < kParams; ++j) {
    col[j].resize(n);
    for (size_t i = 0; i < n; ++i) col[j][i] = samples[i].column[j] / samples[i].measured_ns;
  }
  SolveOutcome out;
  // Choose the free parameters, fixed first, then latency, then link, each only when it adds a
  // direction the chosen ones do not span.
  std::vector<int> free;
  std::vector<std::vector<double>> basis;  // orthonormal, of the chosen weighted columns
  for (int j = 0; j < kParams; ++j) {
    const double norm = Norm(col[j]);
    if (free.size() >= n) {
      out.notes.push_back(StrCat(kParamNames[j], " kept: ", n, " row", n == 1 ? "" : "s",
                                 " fit at most ", n, " parameter", n == 1 ? "" : "s"));
      continue;
    }
    if (norm == 0) {
      out.notes.push_back(
          j == kLink ? "link_gbps kept: no row's slowest transfer is link-bound under these "
                       "parameters (DMA, intra-chip or latency bound)"
                     : StrCat(kParamNames[j], " kept: no row depends on it"));
      continue;
    }
    std::vector<double> r = col[j];
    for (const std::vector<double>& q : basis) {
      double dot = 0;
      for (size_t i = 0; i < n; ++i) dot += q[i] * r[i];
      for (size_t i = 0; i < n; ++i) r[i] -= dot * q[i];
    }
    const double rn = Norm(r);
    if (rn <= 1e-7 * norm) {
      std::vector<std::string> names;
      for (int f : free) names.push_back(kParamNames[f]);
      out.notes.push_back(StrCat(kParamNames[j], " kept: not separable from ", Join(names, " and "),
                                 j == kLatency ? " (every row runs the same number of steps)"
                                               : " on these rows"));
      continue;
    }
    for (double& x : r) x /= rn;
    basis.push_back(r);
    free.push_back(j);
  }
  // Solve; a parameter that comes out negative is held (fixed, latency at 0; link at its current
  // value) and the rest solved again.
  std::array<bool, kParams> held_at_zero{};
  while (!free.empty()) {
    const int k = static_cast<int>(free.size());
    std::vector<double> target(n);
    for (size_t i = 0; i < n; ++i) {
      double y = samples[i].measured_ns - samples[i].rest_ns;
      for (int j = 0; j < kParams; ++j) {
        if (std::find(free.begin(), free.end(), j) == free.end()) {
          y -= theta[j] * samples[i].column[j];
        }
      }
      target[i] = y / samples[i].measured_ns;
    }
    // Normal equations on unit-norm columns.
    std::vector<double> scale(k), ata(static_cast<size_t>(k * k)), atb(k);
    for (int a = 0; a < k; ++a) scale[a] = Norm(col[free[a]]);
    for (int a = 0; a < k; ++a) {
      for (int b = 0; b < k; ++b) {
        double s = 0;
        for (size_t i = 0; i < n; ++i) s += col[free[a]][i] * col[free[b]][i];
        ata[a * k + b] = s / (scale[a] * scale[b]);
      }
      double s = 0;
      for (size_t i = 0; i < n; ++i) s += col[free[a]][i] * target[i];
      atb[a] = s / scale[a];
    }
    std::vector<double> x;
    if (!SolveSmall(ata, atb, k, &x)) {
      out.notes.push_back(StrCat("singular system; kept ", kParamNames[free.back()]));
      free.pop_back();
      continue;
    }
    int negative = -1;
    for (int a = 0; a < k; ++a) {
      const double v = x[a] / scale[a];
      if (v < 0 || (free[a] == kLink && !(v > 0))) {
        negative = a;
        break;
      }
    }
    if (negative < 0) {
      for (int a = 0; a < k; ++a) {
        theta[free[a]] = x[a] / scale[a];
        out.fitted[free[a]] = true;
      }
      break;
    }
    const int j = free[negative];
    if (j == kLink) {
      out.notes.push_back("link_gbps kept: the fit wanted 1 / link_gbps <= 0");
    } else {
      theta[j] = 0;
      held_at_zero[j] = true;
      out.fitted[j] = true;
      out.notes.push_back(StrCat(kParamNames[j], " held at 0: the fit wanted it negative"));
    }
    free.erase(free.begin() + negative);
  }
  out.values.fixed_ns = theta[kFixed];
  out.values.step_latency_ns = theta[kLatency];
  out.values.link_gbps = 1.0 / theta[kLink];
  return out;
}

bool Close(double a, double b, double tol) {
  return std::fabs(a - b) <= tol * std::max({std::fabs(a), std::fabs(b), 1e-9});
}

Values ValuesOf(const CollectiveParams& p) { return {p.fixed_ns, p.step_latency_ns, p.link_gbps}; }

}  // namespace

// ---------------------------------------------------------------------------------------------

NccomTestLog ParseNccomTestLog(const std::string& text, const std::string& source) {
  NccomTestLog log;
  Run run;
  bool in_table = false;
  auto close_run = [&] {
    if (run.known && !run.modelled) {
      log.notes.push_back(StrCat(run.where, ": ", run.op_word, " run skipped (", run.skipped_rows,
                                 " row", run.skipped_rows == 1 ? "" : "s",
                                 "): the cost model has all_gather, reduce_scatter, all_reduce "
                                 "and all_to_all"));
    }
  };
  std::istringstream in(text);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = StrCat(source, ":", line_no);
    const std::vector<std::string> words = SplitWords(line);
    if (words.empty()) continue;
    if (words[0][0] == '#') {
      std::vector<std::string> rest = words;
      rest[0] = rest[0].substr(1);
      if (rest[0].empty()) rest.erase(rest.begin());
      Run comment_run = ParseRunComment(rest, where);
      if (comment_run.known) {
        close_run();
        run = comment_run;
        in_table = false;
      }
      continue;
    }
    const auto tool = std::find_if(words.begin(), words.end(), IsTool);
    if (tool != words.end()) {
      close_run();
      run = ParseCommand(words, static_cast<size_t>(tool - words.begin()), where);
      in_table = false;
      continue;
    }
    const std::string first = Lower(words[0]);
    if (StartsWith(first, "size(")) {
      in_table = true;
      continue;
    }
    if (first == "avg") {
      in_table = false;
      continue;
    }
    if (!in_table && !LooksNumeric(words[0])) continue;  // other text outside a table
    if (run.known && !run.modelled) {
      ++run.skipped_rows;
      continue;
    }
    log.rows.push_back(ParseRow(words, run, source, line_no));
  }
  close_run();
  return log;
}

NccomTestLog LoadNccomTestLogs(const std::vector<std::string>& paths) {
  NccomTestLog all;
  for (const std::string& path : paths) {
    // A regular file of bounded size: not a FIFO that never ends, nor /dev/zero.
    NccomTestLog one = ParseNccomTestLog(ReadConfigFile(path, "nccom-test log"), path);
    all.rows.insert(all.rows.end(), one.rows.begin(), one.rows.end());
    all.notes.insert(all.notes.end(), one.notes.begin(), one.notes.end());
  }
  return all;
}

double PerRankBufferBytes(CollectiveOp op, double size_bytes, int ranks) {
  return op == CollectiveOp::kAllGather ? size_bytes / std::max(ranks, 1) : size_bytes;
}

GroupPlacement CalibrationPlacement(int ranks, int nodes, int lnc, const HardwareProfile& profile) {
  if (nodes <= 1) return DefaultPlacement(ranks, lnc, profile);
  if (ranks % nodes != 0) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(ranks, " ranks do not split evenly over ", nodes, " instances"));
  }
  const int per_chip = RanksPerChip(profile, lnc, StrCat("profile ", profile.name()));
  const int cpi = static_cast<int>(std::max<uint32_t>(profile.chips_per_instance(), 1));
  const int per_node = ranks / nodes;
  if (per_node > per_chip * cpi) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(per_node, " ranks per instance do not fit ", cpi, " chips of ", per_chip,
                 " ranks at lnc ", lnc));
  }
  ResolvedTopology t;
  t.world_size = ranks;
  t.lnc = lnc;
  for (int r = 0; r < ranks; ++r) {
    t.chip_of_rank.push_back(r / per_node * cpi + r % per_node / per_chip);
  }
  Group all(static_cast<size_t>(ranks));
  std::iota(all.begin(), all.end(), 0);
  return PlaceGroup(t, profile, all);
}

double ModelMicroseconds(const CalibrationRow& row, int lnc, const HardwareProfile& profile,
                         const std::string& algorithm) {
  return PlanRow(row, lnc, profile, algorithm).cost.total_ns / 1e3;
}

double GeomeanError(const std::vector<double>& model, const std::vector<double>& measured) {
  if (model.empty()) return 0;
  double sum = 0;
  for (size_t i = 0; i < model.size(); ++i) {
    if (!(model[i] > 0) || !(measured[i] > 0)) return std::numeric_limits<double>::infinity();
    sum += std::fabs(std::log(model[i] / measured[i]));
  }
  return std::exp(sum / static_cast<double>(model.size())) - 1;
}

double GeomeanAbsError(const std::vector<double>& model, const std::vector<double>& measured) {
  if (model.empty()) return 0;
  double sum = 0;
  for (size_t i = 0; i < model.size(); ++i) {
    if (!(model[i] > 0) || !(measured[i] > 0)) return std::numeric_limits<double>::infinity();
    sum += std::log(std::max(std::fabs(model[i] - measured[i]) / measured[i], 1e-4));
  }
  return std::exp(sum / static_cast<double>(model.size()));
}

CalibrationResult Calibrate(const std::vector<CalibrationRow>& rows, const HardwareProfile& base,
                            const CalibrationOptions& options) {
  if (rows.empty()) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("calibrate: no rows to fit in ",
                 options.logs.empty() ? std::string("the logs") : Join(options.logs, " ")));
  }
  RanksPerChip(base, options.lnc, StrCat("calibrate: --lnc ", options.lnc, " on profile ", base.name()));
  const std::string source = StrCat("nkisim calibrate ", Join(options.logs, " "));
  CalibrationResult result;
  result.rows = rows;
  // The algorithm of every row and the base model.
  std::map<std::pair<int, std::string>, std::vector<size_t>> groups;
  for (size_t i = 0; i < result.rows.size(); ++i) {
    CalibrationRow& row = result.rows[i];
    row.algorithm = row.log_algorithm.empty() ? PlanRow(row, options.lnc, base, "auto").algorithm
                                              : row.log_algorithm;
    row.before_us = ModelMicroseconds(row, options.lnc, base, row.algorithm);
    groups[{static_cast<int>(row.op), row.algorithm}].push_back(i);
  }
  HardwareProfile final_profile = base;
  for (const auto& [key, members] : groups) {
    const CollectiveOp op = static_cast<CollectiveOp>(key.first);
    const std::string& algorithm = key.second;
    const std::string op_name = OpName(op);
    CalibrationFit fit;
    fit.op = op;
    fit.algorithm = algorithm;
    fit.rows = static_cast<int>(members.size());
    const Values start = ValuesOf(ResolveParams(base, op, algorithm));
    HardwareProfile without = base;
    RemoveTuning(&without, op_name, algorithm);

    Values current = start;
    SolveOutcome current_info;  // how `current` was obtained (nothing fitted for the start)
    Values best = start;
    SolveOutcome best_info;
    double best_objective = std::numeric_limits<double>::infinity();
    bool converged = false;
    int best_round = 0;
    for (int round = 0;; ++round) {
      HardwareProfile trial = without;
      *trial.add_collective_tuning() = TuningEntry(op_name, algorithm, current, source);
      std::vector<Sample> samples;
      double objective = 0;
      for (size_t i : members) {
        const CalibrationRow& row = result.rows[i];
        const ScheduleCost c = PlanRow(row, options.lnc, trial, algorithm).cost;
        Sample s;
        s.measured_ns = row.measured_us * 1e3;
        s.column[kFixed] = c.steps > 0 ? 1 : 0;
        s.column[kLatency] = c.latency_units;
        s.column[kLink] = c.link_bytes;
        s.rest_ns = c.rest_ns;
        s.total_ns = c.total_ns;
        const double rel = (s.total_ns - s.measured_ns) / s.measured_ns;
        objective += rel * rel;
        samples.push_back(s);
      }
      if (objective < best_objective) {
        best_objective = objective;
        best = current;
        best_info = current_info;
        best_round = round;
      }
      if (converged || round >= options.max_iterations) break;
      SolveOutcome next = SolveRound(samples, current);
      fit.iterations = round + 1;
      converged = Close(next.values.fixed_ns, current.fixed_ns, options.tolerance) &&
                  Close(next.values.step_latency_ns, current.step_latency_ns, options.tolerance) &&
                  Close(next.values.link_gbps, current.link_gbps, options.tolerance);
      current = next.values;
      current_info = std::move(next);
    }
    fit.converged = converged;
    fit.fixed_ns = {start.fixed_ns, best.fixed_ns, best_info.fitted[kFixed]};
    fit.step_latency_ns = {start.step_latency_ns, best.step_latency_ns, best_info.fitted[kLatency]};
    fit.link_gbps = {start.link_gbps, best.link_gbps, best_info.fitted[kLink]};
    fit.notes = best_info.notes;
    if (best_round == 0) fit.notes.push_back("no round improved on the base figures: kept them");
    for (const auto& [name, param] : {std::pair<const char*, const FittedParam*>{
                                          "step_latency_ns", &fit.step_latency_ns},
                                      {"link_gbps", &fit.link_gbps},
                                      {"fixed_ns", &fit.fixed_ns}}) {
      const double ratio = param->before > 0 ? param->after / param->before : 1;
      if (param->fitted && param->after > 0 && (ratio > 10 || ratio < 0.1)) {
        fit.notes.push_back(StrCat(
            name, " moved more than 10x (", param->before, " -> ", param->after,
            "): an effective figure for these rows (what the model does not have, such as "
            "software or DMA setup costs, ends up in it), not a hardware one"));
      }
    }
    fit.notes.push_back(converged ? StrCat("converged in ", fit.iterations, " round",
                                           fit.iterations == 1 ? "" : "s")
                                  : StrCat("not converged after ", fit.iterations,
                                           " rounds; the best round is kept"));
    RemoveTuning(&final_profile, op_name, algorithm);
    *final_profile.add_collective_tuning() = TuningEntry(op_name, algorithm, best, source);
    result.fits.push_back(std::move(fit));
  }
  // The calibrated model of every row.
  std::vector<double> measured, before, after;
  for (CalibrationRow& row : result.rows) {
    row.after_us = ModelMicroseconds(row, options.lnc, final_profile, row.algorithm);
    measured.push_back(row.measured_us);
    before.push_back(row.before_us);
    after.push_back(row.after_us);
  }
  result.geomean_before = GeomeanError(before, measured);
  result.geomean_after = GeomeanError(after, measured);
  result.abs_geomean_before = GeomeanAbsError(before, measured);
  result.abs_geomean_after = GeomeanAbsError(after, measured);
  for (CalibrationFit& fit : result.fits) {
    std::vector<double> m, b, a;
    for (const CalibrationRow& row : result.rows) {
      if (row.op != fit.op || row.algorithm != fit.algorithm) continue;
      m.push_back(row.measured_us);
      b.push_back(row.before_us);
      a.push_back(row.after_us);
    }
    fit.geomean_before = GeomeanError(b, m);
    fit.geomean_after = GeomeanError(a, m);
  }
  const std::string suffix = "-calibrated";
  const std::string& name = final_profile.name();
  if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    final_profile.set_name(name + suffix);
  }
  result.profile = std::move(final_profile);
  return result;
}

std::string FormatProfileText(const HardwareProfile& profile, const std::string& header) {
  namespace pb = google::protobuf;
  const HardwareProfile& trn2 = Trn2Profile();
  HardwareProfile body = profile;
  // Loading merges over trn2, whose collective_tuning entries come first again: leave out the
  // prefix this profile shares with them.
  int shared = 0;
  while (shared < trn2.collective_tuning_size() && shared < body.collective_tuning_size() &&
         pb::util::MessageDifferencer::Equals(trn2.collective_tuning(shared),
                                              body.collective_tuning(shared))) {
    ++shared;
  }
  body.mutable_collective_tuning()->DeleteSubrange(0, shared);
  std::string text;
  std::istringstream header_lines(header);
  for (std::string line; std::getline(header_lines, line);) {
    text += line.empty() ? "#\n" : StrCat("# ", line, "\n");
  }
  std::string printed;
  pb::TextFormat::Printer printer;
  if (!printer.PrintToString(body, &printed)) {
    Raise(ErrorCode::kInternal, "calibrate: cannot print the profile in text format");
  }
  text += printed;
  // Proto3 does not print zeros; spell out those the trn2 defaults would put back.
  const pb::Descriptor* d = body.GetDescriptor();
  const pb::Reflection* r = body.GetReflection();
  std::string zeros;
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->is_repeated() || f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (!r->HasField(trn2, f) || r->HasField(body, f)) continue;
    zeros += StrCat(f->name(), f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING ? ": \"\"\n"
                                                                                    : ": 0\n");
  }
  if (!zeros.empty()) text += "# Zero here, though the trn2 defaults are not:\n" + zeros;
  return text;
}

}  // namespace nkisim::collectives
