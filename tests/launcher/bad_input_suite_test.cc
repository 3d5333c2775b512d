// One table of bad inputs to the `nkisim` binary, run as a user runs it: flags of every
// subcommand (zero, negative, huge, NaN), hardware profiles, topologies, scenarios, sweeps,
// nccom-test logs, .npy files (through --in-dir, --weight, pack-weights) and paths (directory,
// FIFO, device, missing file, unwritable output). Every case must end with its documented typed
// exit code (README "Exit codes") and a message naming the problem, in under 5 s and 200 MiB of
// peak RSS (measured per case with wait4), never with 0, a signal or a hang (each case runs under
// `timeout -s KILL 20`). docs/reliability.md describes the suite.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/testing/files.h"
#include "tests/testing/time_scale.h"

namespace nkisim {
namespace {

namespace fs = std::filesystem;

constexpr double kMaxSeconds = 5.0;
constexpr long kMaxRssKib = 200 * 1024;
constexpr int kHardTimeoutSeconds = 20;

// A file a case creates in its own directory before it runs.
struct File {
  enum Kind { kText, kDir, kFifo } kind;
  std::string name;     // relative to the case directory
  std::string content;  // kText: the bytes
};
File Text(const std::string& name, const std::string& content) { return {File::kText, name, content}; }
File Dir(const std::string& name) { return {File::kDir, name, ""}; }
File Fifo(const std::string& name) { return {File::kFifo, name, ""}; }

// The bytes of a version 1.0 .npy file: magic, header dict padded to 64 bytes, `data_bytes`
// bytes of 0x01; `truncate_to` cuts the whole file.
std::string Npy(const std::string& descr, const std::string& shape, size_t data_bytes,
                bool fortran = false, const std::string& magic = "\x93NUMPY",
                size_t truncate_to = SIZE_MAX) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " +
                       (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = magic + std::string("\x01\x00", 2);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header + std::string(data_bytes, '\x01');
  if (truncate_to < bytes.size()) bytes.resize(truncate_to);
  return bytes;
}

struct Case {
  std::string group;  // the class, for the summary
  std::string name;
  std::string args;   // after the binary; $T: the case's directory, $C: the configs/ directory
  std::vector<File> files;
  int exit_code;
  std::string message;  // must appear in the output
};

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

struct Outcome {
  bool exited;
  int exit_code;  // or the signal
  double seconds;
  long max_rss_kib;
  std::string output;
};

// fork + exec `timeout -s KILL 20 sh -c 'exec nkisim ARGS'` in `dir`; wait4 gives this child's
// own rusage, whose ru_maxrss is the largest RSS of it and its descendants (nkisim).
Outcome RunNkisim(const std::string& dir, const std::string& args) {
  const std::string log = dir + "/.output";
  const std::string command = "exec " + std::string(NKISIM_BINARY) + " " + args;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(126);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = open("/dev/null", O_RDONLY);
    if (fd < 0 || null < 0) _exit(126);
    dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    const std::string seconds = std::to_string(nkisim::testing::ScaledSeconds(kHardTimeoutSeconds));
    execl("/usr/bin/timeout", "timeout", "-s", "KILL", seconds.c_str(), "/bin/sh", "-c",
          command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {WIFEXITED(status), WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), seconds,
          usage.ru_maxrss, nkisim::testing::ReadFile(log)};
}

// Valid bodies (from configs/) that the cases break one field at a time.
const std::string kModel = "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 64 rms_eps: 1e-6 intermediate: 1024 } ";
const std::string kPlan = "plans { name: \"tp8\" tp: 8 } ";
const std::string kRows = "batch: 8 kv_length: 64 ";
const std::string kScenario = "workload: \"decode\" " + kPlan + kModel + kRows;
const std::string kTopo = "lnc: 2 world_size: 8 ";
const std::string kTp8 = "replica_groups { name: \"tp\" contiguous { group_size: 8 } } ";
const std::string kSweepBase =
    "base { workload: \"decode\" model { hidden: 1024 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 } "
    "seed: 11 } ";
const std::string kLogHeader =
    "nccom-test -r 8 allg\n"
    "       size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)\n";
const std::string kLogRow = "          1024            1024   uint8        ";

using Add = std::function<void(const std::string&, const std::string&, const std::string&,
                               std::vector<File>, int, const std::string&)>;

// The classes of issue 34: JSON outside the protobuf mapping, values beyond their bounds, problem
// lists without a cap, names that are not UTF-8, one exit code per class, paths handed to other
// programs, and the usage of nested commands.
void SecondRound(const Add& add) {
  const std::string tp1 = "world_size: 1 lnc: 2 replica_groups { name: \"tp\" contiguous { group_size: 1 } } ";
  auto json = [&](const std::string& name, const std::string& args, const std::string& file,
                  const std::string& body, const std::string& message) {
    add("strict json", name, args, {Text(file, body)}, 14, message);
  };
  json("json_groups_object", "validate $T/t.json", "t.json", "{\"world_size\": 8, \"lnc\": 2, \"replica_groups\": {\"name\": \"tp\"}}",
       "t.json: JSON: replica_groups: expected a list (an array), got an object");
  json("json_nested_arrays", "validate $T/t.json", "t.json",
       "{\"world_size\": 8, \"lnc\": 2, \"replica_groups\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
       "JSON: replica_groups[0]: expected an object (message ReplicaGroupSet), got an array (lists do not nest)");
  json("json_duplicate_key", "validate $T/t.json", "t.json", "{\"world_size\": 8, \"lnc\": 2, \"world_size\": 4}",
       "JSON: world_size: given twice");
  json("json_both_names", "validate $T/t.json", "t.json", "{\"world_size\": 8, \"worldSize\": 8}", "JSON: world_size: given twice");
  json("json_scenario_type", "validate $T/s.json", "s.json", "{\"workload\": \"decode\", \"batch\": [8]}",
       "as a scenario: $T/s.json: JSON: batch: expected a number (or a string holding one), got an array");
  json("json_scenario_map_twice", "validate $T/s.json", "s.json",
       "{\"tolerances\": {\"qkv\": {\"atol\": 1}, \"qkv\": {\"atol\": 2}}}", "JSON: tolerances[\"qkv\"]: map key given twice");
  json("json_profile_type", "kernel qkv --trace '' --out-dir $T/out --profile $T/p.json", "p.json", "{\"pe_freq_ghz\": [1.4]}",
       "p.json: JSON: pe_freq_ghz: expected a number");
  json("json_profile_tuning_object", "kernel qkv --trace '' --out-dir $T/out --profile $T/p.json", "p.json",
       "{\"collective_tuning\": {\"op\": \"all_reduce\"}}", "JSON: collective_tuning: expected a list (an array), got an object");
  json("json_sweep_type", "sweep $T/w.json --out $T/sw --no-plots", "w.json", "{\"batch\": {\"b\": 4}}",
       "w.json: JSON: batch: expected a list (an array), got an object");

  // Bounds and the rules between fields, the same in every command.
  const std::string huge_batch = tp1 + "batch_shard { replica_group: \"tp\" batch: 4294967295 }";
  add("bounds", "topo_batch_huge", "validate $T/t.textproto", {Text("t.textproto", huge_batch)}, 14,
      "batch_shard.batch: 4294967295 must be at most 1048576 (sequences in one batch)");
  add("bounds", "batch_shard_topology_batch_huge", "collective batch_shard --topology $T/t.textproto",
      {Text("t.textproto", huge_batch)}, 14, "batch_shard.batch: 4294967295 must be at most 1048576");
  add("bounds", "batch_shard_topology_batch_memory", "collective batch_shard --topology $T/t.textproto --s 4096 --d 128",
      {Text("t.textproto", tp1 + "batch_shard { replica_group: \"tp\" batch: 1048576 }")}, 13, "of host memory");
  const std::string qkv = "kernel qkv --trace '' --out-dir $T/out --h 1024 --profile $T/p.textproto";
  auto bound = [&](const std::string& name, const std::string& body, const std::string& message) {
    add("bounds", "profile_" + name, qkv, {Text("p.textproto", body)}, 14, message);
  };
  bound("tuning_fixed_huge", "collective_tuning { op: \"all_reduce\" fixed_ns: 1e300 }", "collective_tuning[1].fixed_ns: 1e+300 must be in [0, 1e12]");
  bound("tuning_link_tiny", "collective_tuning { op: \"all_reduce\" link_gbps: 1e-300 }", "collective_tuning[1].link_gbps: 1e-300 must be in [1e-6, 1e12]");
  bound("tuning_ring_all_to_all", "collective_tuning { op: \"all_to_all\" algorithm: \"ring\" fixed_ns: 1 }",
        "algorithm 'ring' does not implement all_to_all, so the row could never apply");
  bound("figure_tiny", "neuronlink_gbps_per_chip: 1e-300", "field 'neuronlink_gbps_per_chip' is 1e-300; it must be in [1e-6, 1e12]");
  bound("cores_huge", "physical_cores_per_chip: 4294967295", "field 'physical_cores_per_chip' is 4294967295; it must be in [1, 256]");
  bound("hbm_huge", "hbm_bytes_per_chip: 18446744073709551615", "field 'hbm_bytes_per_chip' is 18446744073709551615");
  const File odd = Text("p.textproto", "physical_cores_per_chip: 3");
  const std::string lnc_rule = "lnc 2 does not divide the profile's physical_cores_per_chip (3)";
  add("bounds", "odd_cores_collective", "collective all_gather --model-only --ranks 8 --lnc 2 --profile $T/p.textproto", {odd}, 14, lnc_rule);
  add("bounds", "odd_cores_calibrate", "calibrate $C/calibration/nccom-test-published.log --out $T/o.textproto --lnc 2 --profile $T/p.textproto", {odd}, 14, lnc_rule);
  add("bounds", "odd_cores_validate", "validate $C/topologies/tp64_tp8dp8.textproto --profile $T/p.textproto", {odd}, 14,
      "lnc: 2: does not divide the profile's physical_cores_per_chip (3)");
  add("bounds", "odd_cores_scenario", "validate $T/s.textproto", {odd, Text("s.textproto", kScenario + "hardware_profile: \"$T/p.textproto\"")}, 14,
      "topology: lnc: 2: does not divide the profile's physical_cores_per_chip (3)");
  add("bounds", "cal_pairwise_all_gather", "calibrate --out $T/cal.textproto $T/l.log", {Text("l.log", kLogHeader + kLogRow + "10.0 0.10 0.09 Pairwise\n")}, 14,
      "l.log:3: algorithm 'Pairwise' (column 7) does not implement all_gather");

  // A problem list is capped: 2.6 million out-of-range ranks in a 5 MB file.
  std::string ranks = "0, 1, 2, 3";
  for (int i = 0; i < 2600000; ++i) ranks += ", 9";
  add("problem cap", "topo_millions_of_bad_ranks", "validate $T/t.textproto",
      {Text("t.textproto", "world_size: 4 lnc: 2 replica_groups { name: \"x\" explicit { groups { ranks: [" + ranks + "] } } }")}, 14,
      "... and 2599960 more (2600000 problems in all; the first 40 are listed)");

  add("bounds", "scen_hidden_huge", "validate $T/s.textproto", {Text("s.textproto", kPlan + "model { hidden: 4294967168 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 } " + kRows)}, 14,
      "model.hidden: 4294967168 must be a positive multiple of 128, at most 131072");
  add("bounds", "scen_tolerance_huge", "validate $T/s.textproto", {Text("s.textproto", kScenario + "tolerances { key: \"qkv\" value { rtol: 1e300 } }")}, 14,
      "tolerances['qkv']: atol 0 and rtol 1e+300 must be in [0, 1e6]");
  add("names", "topo_set_name_not_utf8", "validate $T/t.textproto",
      {Text("t.textproto", "world_size: 8 lnc: 2 replica_groups { name: \"tp\xff\" contiguous { group_size: 8 } }")}, 14,
      "replica_groups[0].name: 'tp?' is not valid UTF-8");

  // Paths handed to another program, and output folders: checked first, with the rule.
  add("paths", "run_hostfile_directory", "run $T/s.textproto --report $T/r.json --trace ''",
      {Dir("hosts"), Text("s.textproto", kScenario + "hostfile: \"$T/hosts\"")}, 14,
      "$T/hosts: the scenario's hostfile (hostfile:, for mpirun --hostfile) is a directory; it must be a regular file");
  add("paths", "run_hostfile_missing", "run $T/s.textproto --report $T/r.json --trace ''",
      {Text("s.textproto", kScenario + "hostfile: \"$T/nope\"")}, 14, "$T/nope: cannot open scenario's hostfile");
  add("paths", "run_mpirun_missing", "run $T/s.textproto --report $T/r.json --trace '' --mpirun $T/no-mpirun",
      {Text("s.textproto", kScenario)}, 14, "cannot start '$T/no-mpirun'");
  add("paths", "oproj_out_dir_parents", "kernel oproj --trace '' --out-dir $T/nodir/x/y", {}, 11,
      "--out-dir '$T/nodir/x/y': its parent $T/nodir/x is not an existing directory; only the last component");
  add("paths", "oproj_out_dir_is_file", "kernel oproj --trace '' --out-dir $T/f", {Text("f", "x")}, 11,
      "--out-dir '$T/f': exists and is not a directory");
  add("paths", "oproj_trace_unwritable", "kernel oproj --out-dir $T/out --trace $T/nodir/t.json", {}, 11,
      "kernel oproj: --trace '$T/nodir/t.json': cannot be written: directory $T/nodir does not exist");
  add("paths", "sweep_out_parents", "sweep $C/sweeps/small_example.textproto --no-plots --out $T/nodir/x", {}, 11,
      "--out '$T/nodir/x.csv': cannot be written");

  // Nested command groups name the unknown word and list their commands.
  add("usage", "kernel_unknown", "kernel softmax", {}, 2,
      "'softmax' is not a command of 'nkisim kernel'; its commands are qkv, oproj, attention, mlp");
  add("usage", "example_unknown", "example gemm", {}, 2,
      "'gemm' is not a command of 'nkisim example'; its commands are softmax, matmul");
  add("usage", "kernel_alone", "kernel", {}, 2, "'nkisim kernel' needs a command: qkv, oproj, attention, mlp");
  add("usage", "kernel_unknown_flag_first", "kernel --bogus", {}, 2, "'nkisim kernel' needs a command before '--bogus': qkv, oproj");
}

std::vector<Case> Cases() {
  std::vector<Case> c;
  auto add = [&](const std::string& group, const std::string& name, const std::string& args,
                 std::vector<File> files, int code, const std::string& message) {
    c.push_back({group, name, args, std::move(files), code, message});
  };
  const std::string qkv = "kernel qkv --trace '' --out-dir $T/out ";
  const std::string oproj = "kernel oproj --trace '' --out-dir $T/out ";
  const std::string attn = "kernel attention --trace '' --out-dir $T/out ";
  const std::string trn3 = "--profile $C/hardware/trn3.textproto ";

  // --- kernel qkv: every size flag at 0, negative and huge; floats NaN / inf / negative; rules.
  for (const std::string flag : {"b", "s", "h", "nq", "nkv", "d"}) {
    add("qkv flags", "qkv_" + flag + "_zero", qkv + "--" + flag + " 0", {}, 11, "--" + flag + " 0 must be in [1, 16777216]");
    add("qkv flags", "qkv_" + flag + "_negative", qkv + "--" + flag + " -3", {}, 11, "--" + flag + " -3 must be in [1, 16777216]");
    add("qkv flags", "qkv_" + flag + "_huge", qkv + "--" + flag + " 99999999999", {}, 11, "--" + flag + " 99999999999 must be in [1, 16777216]");
  }
  add("qkv flags", "qkv_b_not_a_number", qkv + "--b abc", {}, 2, "Could not convert: --b = abc");
  add("qkv flags", "qkv_eps_nan", qkv + "--eps nan", {}, 11, "--eps nan must be finite and >= 0");
  add("qkv flags", "qkv_eps_inf", qkv + "--eps inf", {}, 11, "--eps inf must be finite and >= 0");
  add("qkv flags", "qkv_eps_negative", qkv + "--eps -1", {}, 11, "--eps -1 must be finite and >= 0");
  add("qkv flags", "qkv_hidden_actual_negative", qkv + "--hidden-actual -5", {}, 11, "--hidden-actual -5 must be >= 0");
  add("qkv flags", "qkv_lnc_3", qkv + "--lnc 3", {}, 2, "--lnc: 3 not in {1,2}");
  add("qkv flags", "qkv_lnc_0", qkv + "--lnc 0", {}, 2, "--lnc: 0 not in {1,2}");
  add("qkv flags", "qkv_h_not_multiple_of_128", qkv + "--h 100", {}, 11, "H = 100: must be a multiple of 128");
  add("qkv flags", "qkv_dtype_unknown", qkv + "--dtype fp64", {}, 11, "unknown name 'fp64'");
  add("qkv flags", "qkv_norm_unknown", qkv + "--norm foo", {}, 2, "--norm: foo not in");
  add("qkv flags", "qkv_quant_unknown", qkv + "--quant int3", {}, 2, "--quant: int3 not in");
  add("qkv flags", "qkv_variant_unknown", qkv + "--variant xyz", {}, 2, "--variant: xyz not in");
  add("qkv flags", "qkv_tkg_too_many_tokens", qkv + "--variant tkg --s 4096", {}, 11, "B * S = 16384: the TKG variant");
  add("qkv flags", "qkv_tkg_rope", qkv + "--variant tkg --rope", {}, 11, "fused_rope = true: the TKG variant cannot fuse RoPE");
  add("qkv flags", "qkv_layout_nbds", qkv + "--layout nbds", {}, 11, "output_layout = NBdS");
  add("qkv flags", "qkv_norm_bias_with_rms", qkv + "--norm-bias", {}, 11, "layer_norm_bias: given with fused_norm_type RMS_NORM");
  add("qkv flags", "qkv_in_dir_missing", qkv + "--in-dir $T/nope", {}, 11, "--in-dir $T/nope: not a directory");
  add("qkv flags", "qkv_host_memory", qkv + "--variant cte --b 4096 --s 4096 --h 16384", {}, 13, "of host memory");
  add("qkv flags", "qkv_unknown_flag", qkv + "--bogus 1", {}, 2, "--bogus");

  // --- MX modes: the profile without an MX path, the modes of the other kernel, the MX rules.
  add("mx", "qkv_mx_on_trn2", qkv + "--quant mx --h 2048 --h-transposed", {}, 12, "hardware profile 'trn2' has no MX path");
  add("mx", "qkv_static_mx", qkv + trn3 + "--quant static_mx --h 2048", {}, 12, "STATIC_MX and ROW_MX are output-projection modes");
  add("mx", "qkv_row_mx", qkv + trn3 + "--quant row_mx --h 2048", {}, 12, "STATIC_MX and ROW_MX are output-projection modes");
  add("mx", "qkv_mx_not_transposed", qkv + trn3 + "--quant mx --h 2048", {}, 11, "(is_h_dim_4h_transposed = true)");
  add("mx", "oproj_tkg_mx", oproj + "--variant tkg --quant mx", {}, 11, "the TKG kernel has no MX path");
  add("mx", "oproj_tkg_static_mx", oproj + "--variant tkg --quant static_mx", {}, 11, "quantization_type = STATIC_MX");
  add("mx", "oproj_cte_mx_on_trn2", oproj + "--variant cte --b 1 --s 256 --n 16 --h 4096 --quant mx", {}, 12, "hardware profile 'trn2' has no MX path");
  add("mx", "oproj_cte_row", oproj + "--variant cte --b 1 --s 256 --n 16 --h 4096 --quant row", {}, 11, "the CTE kernel has no per-row dequantization");
  add("mx", "pack_weights_dtype_not_x4", "pack-weights --in $T/w.npy --out-weights $T/pw.npy --out-scales $T/ps.npy --dtype fp16",
      {Text("w.npy", Npy("<f4", "(64, 8)", 64 * 8 * 4))}, 11, "--dtype 'fp16' is not an MX x4 container");

  // --- kernel oproj flags.
  for (const std::string flag : {"b", "n", "d", "s", "h"}) {
    add("oproj flags", "oproj_" + flag + "_zero", oproj + "--" + flag + " 0", {}, 11, "--" + flag + " 0 must be in [1, 16777216]");
    add("oproj flags", "oproj_" + flag + "_negative", oproj + "--" + flag + " -1", {}, 11, "--" + flag + " -1 must be in [1, 16777216]");
    add("oproj flags", "oproj_" + flag + "_huge", oproj + "--" + flag + " 99999999999", {}, 11, "--" + flag + " 99999999999 must be in [1, 16777216]");
  }
  add("oproj flags", "oproj_quant_unknown", oproj + "--quant bogus", {}, 11, "quantization type 'bogus': must be one of");
  add("oproj flags", "oproj_dtype_unknown", oproj + "--dtype int4", {}, 11, "unknown name 'int4'");
  add("oproj flags", "oproj_output_dtype_unknown", oproj + "--variant cte --output-dtype fp64", {}, 11, "unknown name 'fp64'");
  add("oproj flags", "oproj_variant_unknown", oproj + "--variant foo", {}, 2, "--variant: foo not in {cte,tkg}");
  add("oproj flags", "oproj_lnc_4", oproj + "--lnc 4", {}, 2, "--lnc: 4 not in {1,2}");
  add("oproj flags", "oproj_weight_missing", oproj + "--weight $T/nope.npy", {}, 14, "$T/nope.npy': the file does not exist");

  // --- kernel attention flags.
  for (const std::string flag : {"b", "g", "t", "d"}) {
    add("attention flags", "attn_tkg_" + flag + "_zero", attn + "--variant tkg --" + flag + " 0", {}, 11, "--" + flag + " 0 must be in [1, 16777216]");
    add("attention flags", "attn_tkg_" + flag + "_negative", attn + "--variant tkg --" + flag + " -3", {}, 11, "--" + flag + " -3 must be in [1, 16777216]");
    add("attention flags", "attn_tkg_" + flag + "_huge", attn + "--variant tkg --" + flag + " 99999999999", {}, 11, "--" + flag + " 99999999999 must be in [1, 16777216]");
  }
  for (const std::string flag : {"s", "nq", "nkv"}) {
    add("attention flags", "attn_cte_" + flag + "_zero", attn + "--variant cte --" + flag + " 0", {}, 11, "--" + flag + " 0 must be in [1, 16777216]");
    add("attention flags", "attn_cte_" + flag + "_huge", attn + "--variant cte --" + flag + " 99999999999", {}, 11, "--" + flag + " 99999999999 must be in [1, 16777216]");
  }
  add("attention flags", "attn_gqa_not_divisible", attn + "--variant cte --nq 5 --nkv 2", {}, 11, "n_q = 5 must be divisible by n_kv = 2");
  add("attention flags", "attn_host_memory", attn + "--variant tkg --d 100000", {}, 13, "GiB of host memory");
  add("attention flags", "attn_dtype_unknown", attn + "--dtype fp64", {}, 11, "unknown name 'fp64'");
  add("attention flags", "attn_variant_unknown", attn + "--variant xyz", {}, 2, "--variant: xyz not in");
  add("attention flags", "attn_q_missing", attn + "--q $T/nope.npy", {}, 14, "$T/nope.npy': the file does not exist");

  // --- collective (model-only, so no MPI): sizes, factors, groups, ops, algorithms.
  const std::string coll = "collective all_gather --model-only --ranks 8 ";
  add("collective flags", "coll_b_zero", coll + "-b 0", {}, 11, "-b: '0' is not a size");
  add("collective flags", "coll_b_negative", coll + "-b -4", {}, 11, "-b: '-4' is not a size");
  add("collective flags", "coll_b_bad_suffix", coll + "-b 4X", {}, 11, "-b: '4X' is not a size");
  add("collective flags", "coll_e_huge", coll + "-e 99999999G", {}, 11, "the limit is 64G per rank");
  add("collective flags", "coll_e_below_b", coll + "-b 8 -e 4", {}, 11, "-e (4) >= -b (8)");
  add("collective flags", "coll_f_zero", coll + "-f 0", {}, 11, "-f 0 must be >= 2");
  add("collective flags", "coll_f_one", coll + "-f 1", {}, 11, "-f 1 must be >= 2");
  add("collective flags", "coll_f_negative", coll + "-f -2", {}, 11, "-f -2 must be >= 2");
  add("collective flags", "coll_g_not_divisor", coll + "-g 3", {}, 11, "-g 3 must be >= 1 and divide the world size 8");
  add("collective flags", "coll_g_negative", coll + "-g -2", {}, 11, "-g -2 must be >= 1");
  add("collective flags", "coll_g_huge", coll + "-g 99999999999", {}, 2, "--group-size = 99999999999");
  add("collective flags", "coll_n_zero", coll + "-n 0", {}, 11, "-n 0 must be >= 1");
  add("collective flags", "coll_n_negative", coll + "-n -1", {}, 11, "-n -1 must be >= 1");
  add("collective flags", "coll_w_negative", coll + "-w -1", {}, 11, "-w -1 >= 0");
  add("collective flags", "coll_op_unknown", "collective bogus_op --model-only --ranks 8", {}, 11, "'bogus_op' is not one of all_gather");
  add("collective flags", "coll_op_missing", "collective --model-only --ranks 8", {}, 2, "op is required");
  add("collective flags", "coll_algorithm_unknown", coll + "--algorithm foo", {}, 11, "algorithm 'foo' is not one of");
  add("collective flags", "coll_algorithm_wrong_op", "collective all_reduce --model-only --ranks 8 --algorithm pairwise", {}, 11, "algorithm 'pairwise' does not implement all_reduce");
  add("collective flags", "coll_ranks_zero", "collective all_gather --model-only --ranks 0", {}, 11, "--ranks 0 must be in [1, 16384]");
  add("collective flags", "coll_ranks_negative", "collective all_gather --model-only --ranks -1", {}, 11, "--ranks -1 must be in [1, 16384]");
  add("collective flags", "coll_ranks_over_limit", "collective all_gather --model-only --ranks 20000", {}, 11, "--ranks 20000 must be in [1, 16384]");
  add("collective flags", "coll_ranks_huge", "collective all_gather --model-only --ranks 99999999999", {}, 2, "--ranks = 99999999999");
  add("collective flags", "coll_ranks_without_model_only", "collective all_gather --ranks 64", {}, 11, "--ranks 64 applies to --model-only only");
  add("collective flags", "coll_steps_without_model_only", "collective all_reduce --steps", {}, 11, "--steps applies to --model-only only");
  add("collective flags", "coll_ranks_missing", "collective all_gather --model-only", {}, 11, "--ranks 0 must be in [1, 16384]");
  add("collective flags", "coll_dtype_unknown", coll + "-d fp64", {}, 11, "unknown name 'fp64'");
  add("collective flags", "coll_reduction_unknown", coll + "--reduction foo", {}, 2, "--reduction: foo not in");
  add("collective flags", "coll_lnc_0", coll + "--lnc 0", {}, 2, "--lnc: 0 not in {1,2}");
  add("collective flags", "coll_json_unwritable", coll + "--json $T/nodir/x.json", {}, 11, "--json '$T/nodir/x.json': cannot be written");
  add("collective flags", "coll_profile_missing", coll + "--profile $T/nope.textproto", {}, 14, "$T/nope.textproto: cannot open hardware profile");
  add("collective flags", "coll_batch_shard_model_only", "collective batch_shard --model-only --ranks 8", {}, 11, "batch_shard moves real tensors");

  // --- calibrate: malformed nccom-test logs (file:line) and paths.
  const std::string cal = "calibrate --out $T/cal.textproto ";
  add("calibrate", "cal_time_not_number", cal + "$T/l.log", {Text("l.log", kLogHeader + kLogRow + "abc 0.10 0.09\n")}, 14, "l.log:3: time(us) 'abc' (column 4) is not a number");
  add("calibrate", "cal_time_negative", cal + "$T/l.log", {Text("l.log", kLogHeader + kLogRow + "-5 0.10 0.09\n")}, 14, "l.log:3: time(us) -5 must be > 0");
  add("calibrate", "cal_time_nan", cal + "$T/l.log", {Text("l.log", kLogHeader + kLogRow + "nan 0.10 0.09\n")}, 14, "l.log:3: time(us) 'nan' (column 4) is not a finite number");
  add("calibrate", "cal_row_before_command", cal + "$T/l.log", {Text("l.log", kLogRow + "10 0.10 0.09\n")}, 14, "l.log:1: a result row before any nccom-test command line");
  add("calibrate", "cal_ranks_zero", cal + "$T/l.log", {Text("l.log", "nccom-test -r 0 allg\n")}, 14, "l.log:1: rank count '0' must be an integer >= 2");
  add("calibrate", "cal_ranks_huge", cal + "$T/l.log", {Text("l.log", "nccom-test -r 99999999999 allg\n")}, 14, "l.log:1: rank count '99999999999'");
  add("calibrate", "cal_ranks_over_limit", cal + "$T/l.log", {Text("l.log", "nccom-test -r 655554 allr\n")}, 14, "l.log:1: rank count 655554 must be at most 1024");
  add("calibrate", "cal_no_operation", cal + "$T/l.log", {Text("l.log", "nccom-test -r 8 foo\n")}, 14, "l.log:1: nccom-test command names no operation");
  add("calibrate", "cal_short_row", cal + "$T/l.log", {Text("l.log", kLogHeader + "          1024            1024\n")}, 14, "l.log:3: a result row has 6 columns");
  add("calibrate", "cal_empty_log", cal + "$T/l.log", {Text("l.log", "")}, 11, "no rows to fit in");
  add("calibrate", "cal_log_missing", cal + "$T/nope.log", {}, 14, "$T/nope.log: cannot open nccom-test log");
  add("calibrate", "cal_log_directory", cal + "$T/d", {Dir("d")}, 14, "the nccom-test log is a directory");
  add("calibrate", "cal_log_fifo", cal + "$T/f", {Fifo("f")}, 14, "the nccom-test log is a FIFO");
  add("calibrate", "cal_log_device", cal + "/dev/zero", {}, 14, "/dev/zero: the nccom-test log is a device");
  add("calibrate", "cal_out_unwritable", "calibrate $C/calibration/nccom-test-published.log --out $T/nodir/p.textproto", {}, 11, "--out '$T/nodir/p.textproto': cannot be written");
  add("calibrate", "cal_out_missing", "calibrate $C/calibration/nccom-test-published.log", {}, 2, "--out is required");
  add("calibrate", "cal_lnc_3", cal + "--lnc 3 $C/calibration/nccom-test-published.log", {}, 2, "--lnc: 3 not in {1,2}");

  // --- pack-weights: the .npy it packs or unpacks, --dtype, --layout.
  const std::string pack = "pack-weights --out-weights $T/pw.npy --out-scales $T/ps.npy --in $T/w.npy ";
  auto packs = [&](const std::string& name, const std::string& npy, int code, const std::string& message) {
    add("pack-weights", "pack_" + name, pack, {Text("w.npy", npy)}, code, message);
  };
  packs("fp64", Npy("<f8", "(64, 8)", 64 * 8 * 8), 14, "'descr' is '<f8', an unsupported dtype");
  packs("int32", Npy("<i4", "(64, 8)", 64 * 8 * 4), 14, "holds int32 [64, 8]; needs a [K, N] float matrix");
  packs("k_not_multiple_of_32", Npy("<f4", "(33, 8)", 33 * 8 * 4), 11, "K = 33 rows (of [33, 8]) must be a multiple of 32");
  packs("rank3", Npy("<f4", "(64, 8, 2)", 64 * 8 * 2 * 4), 14, "holds fp32 [64, 8, 2]; needs a [K, N] float matrix");
  packs("rank1", Npy("<f4", "(64,)", 64 * 4), 14, "holds fp32 [64]; needs a [K, N] float matrix");
  packs("zero_rows", Npy("<f4", "(0, 8)", 0), 14, "holds fp32 [0, 8]");
  packs("fortran", Npy("<f4", "(64, 8)", 64 * 8 * 4, true), 14, "'fortran_order' is True");
  packs("big_endian", Npy(">f4", "(64, 8)", 64 * 8 * 4), 14, "'descr' is '>f4', big-endian data");
  packs("bad_magic", Npy("<f4", "(64, 8)", 64 * 8 * 4, false, "\x93NUMPX"), 14, "bad magic");
  packs("truncated_header", Npy("<f4", "(64, 8)", 64 * 8 * 4, false, "\x93NUMPY", 100), 14, "truncated header");
  packs("short_data", Npy("<f4", "(64, 8)", 100), 14, "data is 100 bytes, shorter than shape (64, 8)");
  packs("long_data", Npy("<f4", "(64, 8)", 64 * 8 * 4 + 10), 14, "data is 2058 bytes, longer than shape (64, 8)");
  packs("shape_overflows", Npy("<f4", "(99999999999, 99999999999)", 16), 14, "(over 2^64 bytes)");
  packs("empty_file", "", 14, "the file has only 0 bytes");
  add("pack-weights", "pack_layout_unknown", pack + "--layout foo", {Text("w.npy", Npy("<f4", "(64, 8)", 64 * 8 * 4))}, 11, "weight layout 'foo': must be MX_CONTIGUOUS or MX_INTERLEAVED");
  add("pack-weights", "pack_dtype_unknown", pack + "--dtype fp8_x4", {Text("w.npy", Npy("<f4", "(64, 8)", 64 * 8 * 4))}, 11, "--dtype 'fp8_x4'");
  add("pack-weights", "pack_in_missing", pack, {}, 14, "$T/w.npy': the file does not exist");
  add("pack-weights", "pack_out_weights_missing", "pack-weights --in $T/w.npy", {Text("w.npy", Npy("<f4", "(64, 8)", 64 * 8 * 4))}, 2, "--out-weights is required");
  add("pack-weights", "unpack_weights_not_packed", "pack-weights --unpack --weights $T/w.npy --scales $T/w.npy --out $T/x.npy",
      {Text("w.npy", Npy("<f4", "(64, 8)", 64 * 8 * 4))}, 14, "--weights '$T/w.npy' holds fp32 [64, 8]; fp8_e4m3fn_x4 weights are a [K/4, N] uint32");

  // --- .npy inputs of the kernels: --in-dir (qkv) and the oproj / attention input flags.
  const std::string qkv_in = qkv + "--h 1024 --b 2 --in-dir $T/in";
  auto in_dir = [&](const std::string& name, const std::string& npy, const std::string& message) {
    add("npy inputs", "qkv_in_dir_" + name, qkv_in, {Dir("in"), Text("in/input.npy", npy)}, 14, message);
  };
  in_dir("wrong_shape", Npy("<f4", "(64, 8)", 64 * 8 * 4), "input 'input' from $T/in/input.npy has shape [64, 8]; expected [2, 1, 1024]");
  in_dir("wrong_dtype", Npy("<f8", "(2, 1, 1024)", 2 * 1024 * 8), "'descr' is '<f8', an unsupported dtype");
  in_dir("fortran", Npy("<f4", "(2, 1, 1024)", 2 * 1024 * 4, true), "'fortran_order' is True");
  in_dir("truncated", Npy("<f4", "(2, 1, 1024)", 2 * 1024 * 4, false, "\x93NUMPY", 40), "truncated header");
  in_dir("truncated_data", Npy("<f4", "(2, 1, 1024)", 1000), "shorter than shape (2, 1, 1024)");
  in_dir("bad_magic", Npy("<f4", "(2, 1, 1024)", 2 * 1024 * 4, false, "PK\x03\x04xx"), "bad magic");
  in_dir("bad_header", std::string("\x93NUMPY\x01\x00\x20\x00", 10) + "{'descr': '<f4', 'fortran_ord\n", "truncated header");
  in_dir("garbage_header", std::string("\x93NUMPY\x01\x00\x10\x00", 10) + "not a dict at a\n", "npy '$T/in/input.npy'");
  add("npy inputs", "qkv_in_dir_weights_shape", qkv_in, {Dir("in"), Text("in/fused_qkv_weights.npy", Npy("<f4", "(1024, 8)", 1024 * 8 * 4))}, 14, "fused_qkv_weights");
  add("npy inputs", "qkv_in_dir_is_file", qkv + "--in-dir $T/f", {Text("f", "x")}, 11, "--in-dir $T/f: not a directory");
  add("npy inputs", "oproj_weight_wrong_shape", oproj + "--weight $T/w.npy", {Text("w.npy", Npy("<f4", "(64, 8)", 64 * 8 * 4))}, 14, "$T/w.npy");
  add("npy inputs", "oproj_weight_bad_magic", oproj + "--weight $T/w.npy", {Text("w.npy", "hello, not an npy file at all")}, 14, "bad magic");
  add("npy inputs", "attn_q_wrong_dtype", attn + "--q $T/q.npy", {Text("q.npy", Npy("<c8", "(8, 4, 128)", 8 * 4 * 128 * 8))}, 14, "'descr' is '<c8'");
  add("npy inputs", "attn_k_directory", attn + "--k $T/k.npy", {Dir("k.npy")}, 14, "$T/k.npy");

  // --- validate: topology files (every problem named as field: value: rule).
  auto topo = [&](const std::string& name, const std::string& body, const std::string& message) {
    add("topology", "topo_" + name, "validate $T/t.textproto", {Text("t.textproto", body)}, 14, message);
  };
  topo("unknown_field", kTopo + kTp8 + "bogus_field: 1", "no field named \"bogus_field\"");
  topo("syntax_error", kTopo + "replica_groups { name: \"tp\" contiguous { group_size: 8 } ", "Expected identifier, got:");
  topo("world_size_zero", "lnc: 2 world_size: 0 " + kTp8, "world_size: 0: must be >= 1");
  topo("world_size_huge", "lnc: 2 world_size: 99999999 " + kTp8, "world_size: 99999999: must be at most 16384");
  topo("world_size_negative", "lnc: 2 world_size: -1 " + kTp8, "Expected integer, got: -");
  topo("lnc_3", "lnc: 3 world_size: 8 " + kTp8, "lnc: 3: must be 1 or 2");
  topo("lnc_missing", "world_size: 8 " + kTp8, "lnc: 0: must be 1 or 2");
  topo("group_size_not_divisor", kTopo + "replica_groups { name: \"tp\" contiguous { group_size: 3 } }", "contiguous.group_size: 3 must be >= 1 and divide world_size 8");
  topo("group_size_zero", kTopo + "replica_groups { name: \"tp\" contiguous { group_size: 0 } }", "contiguous.group_size: 0 must be >= 1");
  topo("group_size_huge", kTopo + "replica_groups { name: \"tp\" contiguous { group_size: 99999999 } }", "contiguous.group_size: 99999999 must be >= 1");
  topo("strided_group_size", kTopo + "replica_groups { name: \"tp\" strided { group_size: 3 } }", "strided.group_size: 3 must be >= 1");
  topo("duplicate_names", kTopo + kTp8 + "replica_groups { name: \"tp\" contiguous { group_size: 4 } }", "replica_groups[1].name: 'tp' is already used by replica_groups[0]");
  topo("missing_name", kTopo + "replica_groups { contiguous { group_size: 8 } }", "replica_groups[0].name: empty");
  topo("explicit_no_groups", "lnc: 2 world_size: 4 replica_groups { name: \"x\" explicit { } }", "('x').explicit: no groups");
  topo("explicit_empty_group", "lnc: 2 world_size: 4 replica_groups { name: \"x\" explicit { groups { ranks: [0, 1] } groups { } } }", "explicit.groups[1]: empty: a group needs at least one rank");
  topo("explicit_rank_2_32", "lnc: 2 world_size: 4 replica_groups { name: \"x\" explicit { groups { ranks: [0, 1] } groups { ranks: [2, 4294967295] } } }", "explicit.groups[1].ranks[1]: 4294967295 is outside [0, 4)");
  topo("explicit_rank_2_31", "lnc: 2 world_size: 4 replica_groups { name: \"x\" explicit { groups { ranks: [0, 1] } groups { ranks: [2, 2147483648] } } }", "2147483648 is outside [0, 4)");
  topo("explicit_rank_too_big_for_uint32", "lnc: 2 world_size: 4 replica_groups { name: \"x\" explicit { groups { ranks: [0, 4294967296] } } }", "Integer out of range");
  topo("explicit_duplicate_rank", "lnc: 2 world_size: 4 replica_groups { name: \"x\" explicit { groups { ranks: [0, 1] } groups { ranks: [1, 2] } } }", "rank 1 appears in groups 0 and 1");
  topo("explicit_uncovered", "lnc: 2 world_size: 4 replica_groups { name: \"x\" explicit { groups { ranks: [0, 1] } } }", "ranks [2, 3] are in no group");
  topo("algorithm_unknown", kTopo + "replica_groups { name: \"tp\" contiguous { group_size: 8 } algorithm: \"foo\" }", "('tp').algorithm: 'foo' is not one of");
  topo("reduction_unknown", kTopo + "replica_groups { name: \"tp\" contiguous { group_size: 8 } reduction: \"foo\" }", "('tp').reduction: 'foo' is not one of algorithm, exact");
  topo("batch_shard_unknown_group", kTopo + kTp8 + "batch_shard { replica_group: \"nope\" batch: 8 }", "batch_shard.replica_group: 'nope' names no replica group set");
  topo("batch_shard_batch", kTopo + "replica_groups { name: \"gqa\" contiguous { group_size: 4 } } batch_shard { replica_group: \"gqa\" batch: 6 }", "batch_shard.batch: 6 must be >= 1 and divisible by the group size G = 4");
  topo("batch_shard_iota_size", kTopo + "replica_groups { name: \"gqa\" contiguous { group_size: 4 } } batch_shard { replica_group: \"gqa\" batch: 8 iota_workers: [0, 1] }", "batch_shard.iota_workers: 2 entries");
  topo("placement_size", "lnc: 2 world_size: 4 placement { chip_of_rank: [0, 1] } replica_groups { name: \"tp\" contiguous { group_size: 4 } }", "placement.chip_of_rank: 2 entries; needs one per rank");
  topo("placement_chip_huge", "lnc: 2 world_size: 4 placement { chip_of_rank: [0, 1, 2, 99999999] } replica_groups { name: \"tp\" contiguous { group_size: 4 } }", "chip 99999999 must be below 65536");
  topo("field_twice", "lnc: 2 world_size: 8 world_size: 16 " + kTp8, "Non-repeated field \"world_size\" is specified multiple times");
  // A proto3 scalar has no presence of its own: a first value of zero used to go unnoticed.
  topo("field_twice_zero_first", "lnc: 2 world_size: 0 world_size: 8 " + kTp8, "Non-repeated field \"world_size\" is specified multiple times");
  topo("nested_field_twice_zero_first", kTopo + "replica_groups { name: \"tp\" contiguous { group_size: 0 group_size: 8 } }", "Non-repeated field \"group_size\" is specified multiple times");
  topo("oneof_twice", kTopo + "replica_groups { name: \"tp\" contiguous { group_size: 8 } strided { group_size: 8 } }", "another member of oneof");
  add("topology", "topo_json_unknown_field", "validate $T/t.json", {Text("t.json", "{\"world_size\": 8, \"lnc\": 2, \"nope\": 1}")}, 14, "JSON: unknown field \"nope\" (message Topology)");
  add("topology", "topo_json_truncated", "validate $T/t.json", {Text("t.json", "{\"world_size\": 8, ")}, 14, "JSON: parse error at line 1, column 19: syntax error");
  add("topology", "topo_empty_file", "validate $T/t.textproto", {Text("t.textproto", "")}, 14, "plans: none given");

  // --- validate: scenario files.
  auto scen = [&](const std::string& name, const std::string& body, const std::string& message) {
    add("scenario", "scen_" + name, "validate $T/s.textproto", {Text("s.textproto", body)}, 14, message);
  };
  scen("field_twice", "workload: \"decode\" workload: \"prefill\" " + kPlan + kModel + kRows, "Non-repeated field \"workload\" is specified multiple times");
  scen("field_twice_zero_first", "batch: 0 " + kPlan + kModel + kRows, "Non-repeated field \"batch\" is specified multiple times");
  scen("string_twice_empty_first", "workload: \"\" workload: \"prefill\" " + kPlan + kModel + kRows, "Non-repeated field \"workload\" is specified multiple times");
  scen("bool_twice_false_first", "sequence_parallel: false sequence_parallel: true " + kPlan + kModel + kRows, "Non-repeated field \"sequence_parallel\" is specified multiple times");
  scen("workload_unknown", "workload: \"bogus\" " + kPlan + kModel + kRows, "workload: 'bogus' is not one of decode, prefill");
  scen("hidden_not_128", kPlan + "model { hidden: 500 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 } " + kRows, "model.hidden: 500 must be a positive multiple of 128");
  scen("kv_heads_not_divisor", kPlan + "model { hidden: 512 n_q_heads: 8 n_kv_heads: 3 d_head: 64 intermediate: 1024 } " + kRows, "model.n_kv_heads: 3 must be positive and divide n_q_heads (8)");
  scen("d_head_zero", kPlan + "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 0 intermediate: 1024 } " + kRows, "model.d_head: 0 must be in [1, 128]");
  scen("d_head_huge", kPlan + "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 4096 intermediate: 1024 } " + kRows, "model.d_head: 4096 must be in [1, 128]");
  scen("rms_eps_nan", kPlan + "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 64 rms_eps: nan } " + kRows, "model.rms_eps: nan must be in [0, 1]");
  scen("rms_eps_negative", kPlan + "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 64 rms_eps: -1 intermediate: 1024 } " + kRows, "model.rms_eps: -1 must be in [0, 1]");
  scen("batch_zero", kPlan + kModel + "batch: 0 kv_length: 64", "batch: 0: must be positive");
  scen("batch_huge", kPlan + kModel + "batch: 4294967295 kv_length: 64", "batch: 4294967295 must be <= 128 for decode");
  scen("kv_length_zero", kPlan + kModel + "batch: 8 kv_length: 0", "kv_length: 0: the KV cache needs at least one token");
  scen("kv_length_huge", kPlan + kModel + "batch: 8 kv_length: 99999999", "kv_length: 99999999 must be <= 1048576");
  scen("steps_huge", kScenario + "steps: 99999999", "steps: 99999999 must be in [1, 1024]");
  scen("dtype_unknown", kScenario + "dtype: \"fp64\"", "dtype: 'fp64' is not one of bf16, fp16, fp32");
  scen("stall_timeout_negative", kScenario + "control { stall_timeout_s: -1 }", "control.stall_timeout_s: -1 must be in [0.1, 86400]");
  scen("heartbeat_nan", kScenario + "control { heartbeat_s: nan }", "control.heartbeat_s: nan must be in [0.01, 60]");
  scen("startup_timeout_inf", kScenario + "control { startup_timeout_s: inf }", "control.startup_timeout_s: inf must be in [1, 86400]");
  scen("fault_rank_outside", kScenario + "fault { kind: THROW rank: 99 phase: \"qkv\" }", "fault.rank: 99 is outside the job's 8 ranks");
  scen("fault_phase_unknown", kScenario + "fault { kind: THROW rank: 0 phase: \"nope\" }", "fault.phase: 'nope' is not a phase of the decode workload");
  scen("chain_tolerance_negative", kScenario + "chain_tolerance { rtol: -1 }", "chain_tolerance: atol 0 and rtol -1 must be in [0, 1e6]");
  scen("fault_layer_not_run", kScenario + "fault { kind: THROW rank: 0 phase: \"qkv.L2\" }", "fault.phase: 'qkv.L2' is not a phase this job runs (layers: 1, steps: 1");
  scen("fault_corrupt_not_qkv", kScenario + "fault { kind: CORRUPT_INPUT rank: 0 phase: \"mlp\" }", "fault.phase: 'mlp': CORRUPT_INPUT corrupts the layer input a qkv phase reads");
  scen("plan_tp_zero", "plans { name: \"tp8\" tp: 0 } " + kModel + kRows, "plan 'tp8': tp: 0 must be in [1, 16384]");
  scen("plan_tp_huge", "plans { name: \"tp8\" tp: 99999999 } " + kModel + kRows, "plan 'tp8': tp: 99999999 must be in [1, 16384]");
  scen("plan_lnc_3", "plans { name: \"tp8\" tp: 8 lnc: 3 } " + kModel + kRows, "plan 'tp8': lnc: 3 must be 1 or 2");
  scen("plan_attention_dp", "plans { name: \"tp8\" tp: 8 attention_dp: 3 } " + kModel + kRows, "attention_dp: 3 must divide tp (8)");
  scen("plan_replicas_huge", "plans { name: \"tp8\" tp: 8 replicas: 99999999 } " + kModel + kRows, "replicas: 99999999: tp x replicas must be <= 16384 ranks");
  scen("plans_duplicate", kPlan + kPlan + kModel + kRows, "plans: name 'tp8' is used twice");
  scen("plans_missing", kModel + kRows, "plans: none given");
  scen("tolerance_negative", kScenario + "tolerances { key: \"qkv\" value { atol: -1 } }", "tolerances['qkv']: atol -1 and rtol 0 must be in [0, 1e6]");
  scen("tolerance_unknown_phase", kScenario + "tolerances { key: \"nope\" value { atol: 1 } }", "tolerances: 'nope' is not a phase");
  scen("prefill_seq_len_zero", "workload: \"prefill\" " + kPlan + kModel + "batch: 1 seq_len: 0", "seq_len: 0: prefill needs the prompt length S >= 1");
  scen("old_scenarios_list", kScenario + "scenarios: \"x\"", "scenarios: 'x': the scenario list is replaced by plans");
  scen("seed_negative", kScenario + "seed: -1", "Expected integer, got: -");
  scen("profile_missing", kScenario + "hardware_profile: \"$T/nope.textproto\"", "$T/nope.textproto: cannot open hardware profile");
  scen("per_rank_memory", kPlan + kModel + "batch: 128 kv_length: 1048576", "does not fit HBM");
  scen("per_rank_host_memory", kPlan + kModel + "batch: 128 kv_length: 196608", "this machine simulates at most 4 GiB per rank");

  // --- run: scenario and output paths (nothing may block or read without end).
  const std::string ok = "$C/small_8ranks.textproto";
  add("run paths", "run_config_missing", "run $T/nope.textproto --timing-only --trace ''", {}, 14, "$T/nope.textproto: cannot open scenario file");
  add("run paths", "run_config_directory", "run $T/d --timing-only --trace ''", {Dir("d")}, 14, "$T/d: the scenario file is a directory");
  add("run paths", "run_config_fifo", "run $T/f --timing-only --trace ''", {Fifo("f")}, 14, "$T/f: the scenario file is a FIFO");
  add("run paths", "run_config_dev_zero", "run /dev/zero --timing-only --trace ''", {}, 14, "/dev/zero: the scenario file is a device");
  add("run paths", "run_config_invalid", "run $T/s.textproto --timing-only --trace ''", {Text("s.textproto", kPlan + kModel + "batch: 0 kv_length: 64")}, 14, "batch: 0: must be positive");
  add("run paths", "run_report_no_dir", "run " + ok + " --timing-only --trace '' --report $T/nodir/r.json", {}, 11, "--report '$T/nodir/r.json': cannot be written: directory $T/nodir does not exist");
  add("run paths", "run_report_is_directory", "run " + ok + " --timing-only --trace '' --report $T/d", {Dir("d")}, 11, "--report '$T/d': is a directory");
  add("run paths", "run_report_under_a_file", "run " + ok + " --timing-only --trace '' --report $T/f/r.json", {Text("f", "x")}, 11, "--report '$T/f/r.json'");
  add("run paths", "run_trace_no_dir", "run " + ok + " --timing-only --report $T/r.json --trace $T/nodir/t.json", {}, 11, "--trace '$T/nodir/t.json': cannot be written");
  add("run paths", "run_config_missing_arg", "run --timing-only", {}, 2, "config is required");
  add("run paths", "validate_fifo", "validate $T/f", {Fifo("f")}, 14, "$T/f: the scenario or topology file is a FIFO");
  add("run paths", "validate_dev_zero", "validate /dev/zero", {}, 14, "/dev/zero: the scenario or topology file is a device");
  add("run paths", "validate_directory", "validate $T", {}, 14, "the scenario or topology file is a directory");
  add("run paths", "validate_missing", "validate $T/nope", {}, 14, "$T/nope: cannot open scenario or topology file");
  add("run paths", "unknown_subcommand", "frobnicate", {}, 2, "'frobnicate' is not a command");

  // --- sweep files and flags.
  auto sweep = [&](const std::string& name, const std::string& body, const std::string& message) {
    add("sweep", "sweep_" + name, "sweep $T/w.textproto --out $T/sw --no-plots", {Text("w.textproto", body)}, 14, message);
  };
  sweep("batch_zero", kSweepBase + "plans { tp: 8 } batch: [0] kv_length: [128]", "batch: 0: must be positive");
  sweep("no_plans", kSweepBase + "batch: [4] kv_length: [128]", "plans: none given");
  sweep("lnc_3", kSweepBase + "plans { tp: 8 } batch: [4] kv_length: [128] lnc: [3]", "lnc: 3 must be 1 or 2");
  sweep("algorithm_unknown", kSweepBase + "plans { tp: 8 } batch: [4] kv_length: [128] algorithm: [\"foo\"]", "algorithm: 'foo' is not one of");
  sweep("base_file_missing", "base_file: \"$T/nope.textproto\" plans { tp: 8 } batch: [4] kv_length: [128]", "base_file: '$T/nope.textproto'");
  sweep("profile_missing", kSweepBase + "plans { tp: 8 } batch: [4] kv_length: [128] hardware_profile: [\"$T/nope.textproto\"]", "hardware_profile: '$T/nope.textproto'");
  sweep("unknown_field", kSweepBase + "plans { tp: 8 } batch: [4] kv_length: [128] bogus: 1", "no field named \"bogus\"");
  sweep("seq_len_on_decode", kSweepBase + "plans { tp: 8 } batch: [4] kv_length: [128] seq_len: [64]", "seq_len: [64]: the base's workload is decode");
  // Predict sweeps (a model axis): refused before any point runs.
  const std::string kPredictSweep = "model: [\"$C/models/Llama-3.1-8B.config.json\"] plans { tp: 8 } batch: [1] "
                                    "output_tokens: [4] ";
  sweep("predict_input_zero", kPredictSweep + "input_tokens: [0]", "input_tokens: 0: must be in [1, 16777216]");
  sweep("predict_kv_length", kPredictSweep + "input_tokens: [64] kv_length: [128]",
        "kv_length: [128]: a sweep with a model axis predicts whole models");
  sweep("predict_target_negative", kPredictSweep + "input_tokens: [64] tpot_ms_max: -2",
        "tpot_ms_max: -2: must be a finite number of ms > 0");
  sweep("predict_model_missing", "model: [\"$T/nope.json\"] plans { tp: 8 } batch: [1] input_tokens: [64] output_tokens: [4]",
        "model: '$T/nope.json'");
  sweep("predict_no_input_axis", kPredictSweep, "input_tokens: empty: a predict sweep needs at least one value");
  sweep("predict_axis_on_layer_sweep", kSweepBase + "plans { tp: 8 } batch: [4] kv_length: [128] input_tokens: [64]",
        "input_tokens: [64]: an axis of a predict sweep");
  add("sweep", "sweep_predict_functional", "sweep $T/w.textproto --out $T/sw --no-plots --functional",
      {Text("w.textproto", kPredictSweep + "input_tokens: [64]")}, 14, "--functional: a sweep with a model axis");
  add("sweep", "sweep_fifo", "sweep $T/f --no-plots", {Fifo("f")}, 14, "$T/f: the sweep file is a FIFO");
  add("sweep", "sweep_dev_zero", "sweep /dev/zero --no-plots", {}, 14, "/dev/zero: the sweep file is a device");
  add("sweep", "sweep_missing", "sweep $T/nope.textproto --no-plots", {}, 14, "cannot open sweep file");
  add("sweep", "sweep_out_unwritable", "sweep $C/sweeps/small_example.textproto --no-plots --out $T/nodir/x", {}, 11, "--out '$T/nodir/x.csv': cannot be written");

  // --- hardware profiles (through kernel qkv --profile): every class of field.
  auto profile = [&](const std::string& name, const std::string& body, const std::string& message) {
    add("profile", "profile_" + name, qkv + "--h 1024 --profile $T/p.textproto", {Text("p.textproto", body)}, 14, message);
  };
  profile("field_twice", "pe_freq_ghz: 2.4 pe_freq_ghz: 1.2", "Non-repeated field \"pe_freq_ghz\" is specified multiple times");
  profile("field_twice_zero_first", "pe_freq_ghz: 0 pe_freq_ghz: 1.2", "Non-repeated field \"pe_freq_ghz\" is specified multiple times");
  profile("freq_zero", "pe_freq_ghz: 0", "field 'pe_freq_ghz' is 0; it must be in [1e-6, 1e12]");
  profile("freq_negative", "pe_freq_ghz: -1", "field 'pe_freq_ghz' is -1");
  profile("freq_nan", "pe_freq_ghz: nan", "field 'pe_freq_ghz' is nan");
  profile("freq_huge", "vector_freq_ghz: 1e300", "field 'vector_freq_ghz' is 1e+300");
  profile("hbm_inf", "hbm_gbps_per_core: inf", "field 'hbm_gbps_per_core' is inf");
  profile("dma_engine_gbps_zero", "dma_engine_gbps: 0", "field 'dma_engine_gbps' is 0");
  profile("dma_queue_gbps_removed", "dma_queue_gbps: 27", "field 'dma_queue_gbps' was removed with the one-queue DMA model; use dma_engines x dma_engine_gbps");
  profile("mx_speedup_negative", "pe_mx_speedup: -1", "field 'pe_mx_speedup' is -1; it must be in [0, 1e12]");
  profile("mx_speedup_nan", "pe_mx_speedup: nan", "field 'pe_mx_speedup' is nan");
  profile("name_not_utf8", "name: \"tr\xff\xfe\"", "p.textproto: name: 'tr?\?' is not valid UTF-8");
  profile("tuning_source_not_utf8", "collective_tuning { op: \"all_reduce\" fixed_ns: 1 source: \"\xc3\x28\" }", "p.textproto: collective_tuning[0].source: '?(' is not valid UTF-8");
  profile("torus_x_mismatch", "torus_x: 3", "torus_x x torus_y (3 x 4) must equal chips_per_instance (16)");
  profile("torus_y_mismatch", "torus_y: 5", "torus_x x torus_y (4 x 5) must equal chips_per_instance (16)");
  profile("chips_zero", "chips_per_instance: 0", "field 'chips_per_instance' is 0");
  profile("tuning_op_unknown", "collective_tuning { op: \"bogus\" fixed_ns: 1 }", "collective_tuning[1].op: 'bogus' is not one of");
  profile("tuning_algorithm_unknown", "collective_tuning { op: \"all_reduce\" algorithm: \"bogus\" fixed_ns: 1 }", "collective_tuning[1].algorithm: 'bogus' is not one of");
  profile("tuning_fixed_negative", "collective_tuning { op: \"all_reduce\" fixed_ns: -1 }", "collective_tuning[1].fixed_ns: -1 must be in [0, 1e12]");
  profile("tuning_link_zero", "collective_tuning { op: \"all_reduce\" link_gbps: 0 }", "collective_tuning[1].link_gbps: 0 must be in [1e-6, 1e12]");
  profile("tuning_latency_nan", "collective_tuning { op: \"all_reduce\" step_latency_ns: nan }", "collective_tuning[1].step_latency_ns: nan must be in [0, 1e12]");
  profile("partitions_zero", "partitions: 0", "field 'partitions' is 0; it must be in [1, 128]");
  profile("partitions_not_pe_rows", "partitions: 64", "field 'partitions' is 64; it must be in [1, 128] and equal pe_rows (128)");
  profile("dma_queues_zero", "dma_queues: 0", "field 'dma_queues' is 0");
  profile("dma_queues_over_16", "dma_queues: 64", "field 'dma_queues' is 64; it must be in [1, 16] (the simulator models at most 16)");
  profile("psum_banks_split", "psum_banks: 3", "psum_bytes_per_partition (16384) must split into psum_banks (3)");
  profile("mesh_above_rdh", "mesh_max_bytes_per_rank: 99999999", "mesh_max_bytes_per_rank (99999999) must not exceed rdh_max_bytes_per_rank");
  profile("integer_negative", "psum_banks: -3", "p.textproto:1:13: Expected integer, got: -");
  profile("integer_out_of_range", "pe_rows: 99999999999", "Integer out of range (99999999999)");
  profile("integer_given_float", "sbuf_bytes_per_partition: 1e300", "Expected integer, got: 1e300");
  profile("unknown_field", "bogus_field: 1", "no field named \"bogus_field\"");
  profile("syntax_error", "pe_freq_ghz: {", "p.textproto:1:");
  add("profile", "profile_directory", qkv + "--profile $T/d", {Dir("d")}, 14, "$T/d: the hardware profile is a directory");
  add("profile", "profile_fifo", qkv + "--profile $T/f", {Fifo("f")}, 14, "$T/f: the hardware profile is a FIFO");
  add("profile", "profile_dev_zero", qkv + "--profile /dev/zero", {}, 14, "/dev/zero: the hardware profile is a device");
  add("profile", "profile_missing", qkv + "--profile $T/nope", {}, 14, "$T/nope: cannot open hardware profile");
  add("profile", "profile_in_validate", "validate $C/topologies/tp64_tp8dp8.textproto --profile $T/p.textproto", {Text("p.textproto", "hbm_gbps_per_core: -5")}, 14, "field 'hbm_gbps_per_core' is -5");
  add("profile", "profile_in_calibrate", "calibrate $C/calibration/nccom-test-published.log --out $T/o.textproto --profile $T/p.textproto",
      {Text("p.textproto", "torus_x: 2")}, 14, "torus_x x torus_y (2 x 4)");
  SecondRound(add);
  return c;
}

TEST(BadInputSuite, EveryCaseEndsWithItsTypedExitCodeAndNamesTheProblem) {
  const std::vector<Case> cases = Cases();
  ASSERT_GE(cases.size(), 150u);
  const std::string root = ::testing::TempDir() + "/nkisim_bad_input_" + std::to_string(getpid());
  fs::remove_all(root);
  const std::string configs = std::string(NKISIM_SOURCE_DIR) + "/configs";
  std::set<std::string> names;
  std::map<std::string, int> per_group;
  double max_seconds = 0;
  long max_rss = 0;
  std::string slowest, largest;
  int failed = 0;
  for (const Case& k : cases) {
    ASSERT_TRUE(names.insert(k.name).second) << "duplicate case name " << k.name;
    ++per_group[k.group];
    const std::string dir = root + "/" + k.name;
    fs::create_directories(dir);
    for (const File& f : k.files) {
      const std::string path = dir + "/" + f.name;
      if (f.kind == File::kDir) {
        fs::create_directories(path);
      } else if (f.kind == File::kFifo) {
        ASSERT_EQ(mkfifo(path.c_str(), 0644), 0) << path;
      } else {
        std::ofstream(path, std::ios::binary) << Replace(Replace(f.content, "$T", dir), "$C", configs);
      }
    }
    const std::string args = Replace(Replace(k.args, "$T", dir), "$C", configs);
    const std::string message = Replace(Replace(k.message, "$T", dir), "$C", configs);
    const Outcome r = RunNkisim(dir, args);
    const int before = ::testing::Test::HasFailure() ? 1 : 0;
    SCOPED_TRACE(k.name + ": nkisim " + args + "\n" + r.output);
    EXPECT_TRUE(r.exited) << "killed by signal " << r.exit_code;
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.exit_code, k.exit_code);
    EXPECT_THAT(r.output, ::testing::HasSubstr(message));
    EXPECT_LT(r.seconds, nkisim::testing::Scaled(kMaxSeconds));
    EXPECT_LT(r.max_rss_kib, kMaxRssKib * nkisim::testing::MemoryScale());
    if (::testing::Test::HasFailure() && !before) ++failed;
    if (r.seconds > max_seconds) max_seconds = r.seconds, slowest = k.name;
    if (r.max_rss_kib > max_rss) max_rss = r.max_rss_kib, largest = k.name;
  }
  std::string groups;
  for (const auto& [group, n] : per_group) groups += " " + group + " " + std::to_string(n) + ";";
  std::printf("bad-input suite: %zu cases,%s max time %.2f s (%s), max RSS %.1f MiB (%s)\n",
              cases.size(), groups.c_str(), max_seconds, slowest.c_str(), max_rss / 1024.0,
              largest.c_str());
  if (!::testing::Test::HasFailure()) fs::remove_all(root);
}

}  // namespace
}  // namespace nkisim
