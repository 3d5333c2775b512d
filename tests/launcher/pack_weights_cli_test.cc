// `nkisim pack-weights` as a user runs it: pack then unpack through .npy files gives the golden
// MX dequantization (kernels/reference/mx_ref.h, column by column), for both layouts, the three x4
// dtypes and fp32 / fp16 / bf16-bits inputs; the files have the documented dtypes and shapes; every
// error exits with its code and a message naming the flag, the value and the rule, and writes
// nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "kernels/reference/mx_ref.h"
#include "runtime/error.h"
#include "runtime/npy.h"
#include "runtime/tensor_view.h"
#include "tests/testing/run_command.h"

namespace nkisim {
namespace {

using ::nkisim::reference::MxFormatRef;
using ::nkisim::testing::CommandResult;
using ::testing::HasSubstr;
using ::testing::Not;

CommandResult RunNkisim(const std::string& args) {
  return nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " pack-weights " + args, 60);
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/pack_weights_cli_" + std::to_string(getpid()) + "_" + name;
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

struct Format {
  const char* dtype;
  MxFormatRef ref;
  DType container;  // of the packed file
};

constexpr Format kFormats[] = {{"fp8_e4m3fn_x4", MxFormatRef::kE4M3FN, DType::kUInt32},
                               {"fp8_e5m2_x4", MxFormatRef::kE5M2, DType::kUInt32},
                               {"fp4_e2m1fn_x4", MxFormatRef::kE2M1, DType::kUInt16}};

// Gaussian weights [k, n] with columns of different magnitudes, as fp32 values.
std::vector<float> Gaussian(int64_t k, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < k * n; ++i) v[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(i % n) - 8);
  return v;
}

void WriteFp32(const std::string& path, const std::vector<float>& v, const Shape& shape) {
  TensorView t = TensorView::Create(shape, DType::kFloat32, "w");
  t.FromFloats(v);
  WriteNpy(path, t);
}

// The golden: each column quantized and dequantized by the reference, [k, n] row-major.
std::vector<double> Golden(MxFormatRef format, bool interleaved, const std::vector<double>& w,
                           int64_t k, int64_t n) {
  std::vector<double> out(w.size());
  for (int64_t c = 0; c < n; ++c) {
    std::vector<double> column(static_cast<size_t>(k));
    for (int64_t r = 0; r < k; ++r) column[r] = w[r * n + c];
    const std::vector<double> q = reference::MxQuantizeDequantizeRef(format, interleaved, column);
    for (int64_t r = 0; r < k; ++r) out[r * n + c] = q[r];
  }
  return out;
}

// The number after "max |dequantized - original| = " in the summary; -1 when absent.
double PrintedMaxError(const std::string& output) {
  static const std::regex kLine(R"(max \|dequantized - original\| = ([0-9.eE+-]+) at \[)");
  std::smatch m;
  return std::regex_search(output, m, kLine) ? std::stod(m[1]) : -1;
}

const uint8_t* Bytes(const TensorView& t) { return reinterpret_cast<const uint8_t*>(t.buffer().data()); }

// Packs `in` (holding the values `w`), checks the files and the summary, unpacks and checks the
// result against the golden.
void RoundTrip(const std::string& in, const std::vector<double>& w, int64_t k, int64_t n,
               const Format& f, const char* layout, const std::string& tag) {
  SCOPED_TRACE(std::string(f.dtype) + " " + layout + " " + tag);
  const bool interleaved = std::string(layout) == "MX_INTERLEAVED";
  const std::string p = TempPath(tag + "_p.npy"), s = TempPath(tag + "_s.npy"),
                    back = TempPath(tag + "_back.npy");
  const CommandResult packed = RunNkisim("--in " + in + " --out-weights " + p + " --out-scales " + s +
                                         " --dtype " + f.dtype + " --layout " + layout);
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  EXPECT_THAT(packed.output, HasSubstr(f.dtype));
  EXPECT_THAT(packed.output, HasSubstr(std::string("layout ") + layout));
  EXPECT_THAT(packed.output, HasSubstr(StrCat("[", k, ", ", n, "]")));

  const TensorView data = ReadNpy(p);
  const TensorView scales = ReadNpy(s);
  ASSERT_EQ(data.dtype(), f.container);
  ASSERT_EQ(data.shape(), (Shape{k / 4, n}));
  ASSERT_EQ(scales.dtype(), DType::kUInt8);
  ASSERT_EQ(scales.shape(), (Shape{k / 32, n}));
  const std::vector<double> golden = Golden(f.ref, interleaved, w, k, n);
  const std::vector<double> from_files =
      reference::MxUnpackWeightsRef(f.ref, interleaved, Bytes(data), Bytes(scales), k, n);
  double max_error = 0;
  for (size_t i = 0; i < golden.size(); ++i) {
    ASSERT_EQ(from_files[i], golden[i]) << "element " << i;
    max_error = std::max(max_error, std::fabs(golden[i] - w[i]));
  }
  EXPECT_GT(max_error, 0);  // Gaussian data is not MX-exact: the check below means something
  EXPECT_NEAR(PrintedMaxError(packed.output), max_error, 1e-8 * max_error) << packed.output;

  const CommandResult unpacked = RunNkisim("--unpack --weights " + p + " --scales " + s +
                                           " --dtype " + f.dtype + " --layout " + layout + " --out " + back);
  ASSERT_EQ(unpacked.exit_code, 0) << unpacked.output;
  EXPECT_THAT(unpacked.output, HasSubstr(back));
  const TensorView w2 = ReadNpy(back);
  ASSERT_EQ(w2.dtype(), DType::kFloat32);
  ASSERT_EQ(w2.shape(), (Shape{k, n}));
  const std::vector<float> got = w2.ToFloats();
  for (size_t i = 0; i < golden.size(); ++i) ASSERT_EQ(got[i], golden[i]) << "element " << i;
  for (const std::string& path : {p, s, back}) std::remove(path.c_str());
}

TEST(PackWeightsCliTest, RoundTripThroughFilesIsTheGoldenDequantization) {
  const int64_t k = 128, n = 24;
  const std::vector<float> v = Gaussian(k, n, 1);
  const std::string in = TempPath("w.npy");
  WriteFp32(in, v, {k, n});
  const std::vector<double> w(v.begin(), v.end());
  for (const Format& f : kFormats) {
    for (const char* layout : {"MX_CONTIGUOUS", "MX_INTERLEAVED"}) RoundTrip(in, w, k, n, f, layout, "fp32");
  }
  std::remove(in.c_str());
}

TEST(PackWeightsCliTest, Fp16AndBf16BitsInputs) {
  const int64_t k = 64, n = 8;
  const std::vector<float> v = Gaussian(k, n, 2);
  // fp16: '<f2', values as stored.
  TensorView h = TensorView::Create({k, n}, DType::kFloat16, "h");
  h.FromFloats(v);
  const std::string in16 = TempPath("w16.npy");
  WriteNpy(in16, h);
  const std::vector<float> stored16 = h.ToFloats();
  RoundTrip(in16, std::vector<double>(stored16.begin(), stored16.end()), k, n, kFormats[0],
            "MX_INTERLEAVED", "fp16");
  // bf16 as '<u2' bits: the value is the bits in the top half of an fp32.
  TensorView bits = TensorView::Create({k, n}, DType::kUInt16, "b");
  std::vector<double> stored_bf16(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t f32;
    std::memcpy(&f32, &v[i], 4);
    const uint16_t b = static_cast<uint16_t>(f32 >> 16);  // truncated: any bf16 will do
    std::memcpy(bits.buffer().data() + 2 * i, &b, 2);
    const uint32_t widened = static_cast<uint32_t>(b) << 16;
    float value;
    std::memcpy(&value, &widened, 4);
    stored_bf16[i] = value;
  }
  const std::string in_bf16 = TempPath("wbf16.npy");
  WriteNpy(in_bf16, bits);
  RoundTrip(in_bf16, stored_bf16, k, n, kFormats[2], "MX_CONTIGUOUS", "bf16");
  std::remove(in16.c_str());
  std::remove(in_bf16.c_str());
}

TEST(PackWeightsCliTest, PackErrorsExitWithTheirCodeAndWriteNothing) {
  const std::string p = TempPath("err_p.npy"), s = TempPath("err_s.npy");
  const std::string outs = " --out-weights " + p + " --out-scales " + s;
  const std::string good = TempPath("good.npy");
  WriteFp32(good, Gaussian(64, 4, 3), {64, 4});

  struct Case {
    std::string args;
    int exit_code;
    std::string message;
  };
  const std::string garbage = TempPath("garbage.npy");
  std::ofstream(garbage) << "not an npy file";
  const std::string rank1 = TempPath("rank1.npy");
  WriteFp32(rank1, std::vector<float>(64, 1.0f), {64});
  const std::string ints = TempPath("ints.npy");
  WriteNpy(ints, TensorView::Create({64, 4}, DType::kInt32, "i"));
  const std::string k48 = TempPath("k48.npy");
  WriteFp32(k48, std::vector<float>(48 * 4, 1.0f), {48, 4});
  const std::vector<Case> cases = {
      {"--in /nonexistent/w.npy" + outs, 14, "/nonexistent/w.npy"},
      {"--in " + garbage + outs, 14, garbage},
      {"--in " + rank1 + outs, 14,
       "pack-weights: --in '" + rank1 + "' holds fp32 [64]; needs a [K, N] float matrix"},
      {"--in " + ints + outs, 14, "pack-weights: --in '" + ints + "' holds int32 [64, 4]"},
      {"--in " + k48 + outs, 11,
       "pack-weights: --in '" + k48 + "': K = 48 rows (of [48, 4]) must be a multiple of 32"},
      {"--in " + good + outs + " --dtype fp8_e4m3fn", 11,
       "pack-weights: --dtype 'fp8_e4m3fn' is not an MX x4 container: must be fp8_e4m3fn_x4, "
       "fp8_e5m2_x4 or fp4_e2m1fn_x4"},
      {"--in " + good + outs + " --dtype mxfp9", 11, "pack-weights: --dtype 'mxfp9': must be"},
      {"--in " + good + outs + " --layout MX_STRIPED", 11,
       "pack-weights: --layout: weight layout 'MX_STRIPED': must be MX_CONTIGUOUS or MX_INTERLEAVED"},
      {"--in " + good + " --out-weights /nonexistent/dir/p.npy --out-scales " + s, 11,
       "pack-weights: --out-weights '/nonexistent/dir/p.npy'"},
      {"--in " + good + " --out-weights " + p, 2, "--out-scales is required when packing"},
      {"--out-weights " + p + " --out-scales " + s, 2, "--in is required when packing"},
      {"--in " + good + outs + " --unpack", 2, "excludes"},
      {"--in " + good + outs + " --weights " + good, 2, "requires --unpack"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CommandResult r = RunNkisim(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message));
    EXPECT_THAT(r.output, Not(HasSubstr("max |dequantized")));
    EXPECT_FALSE(Exists(p));
    EXPECT_FALSE(Exists(s));
  }
  for (const std::string& path : {good, garbage, rank1, ints, k48}) std::remove(path.c_str());
}

TEST(PackWeightsCliTest, UnpackErrorsExitWithTheirCodeAndWriteNothing) {
  const std::string w = TempPath("u_w.npy"), p = TempPath("u_p.npy"), s = TempPath("u_s.npy");
  WriteFp32(w, Gaussian(64, 4, 4), {64, 4});
  ASSERT_EQ(RunNkisim("--in " + w + " --out-weights " + p + " --out-scales " + s).exit_code, 0);
  const std::string out = TempPath("u_out.npy");
  const std::string bytes = TempPath("u_bytes.npy");
  WriteNpy(bytes, TensorView::Create({16, 16}, DType::kUInt8, "b"));
  const std::string wide_scales = TempPath("u_wide.npy");
  WriteNpy(wide_scales, TensorView::Create({2, 5}, DType::kUInt8, "s"));
  struct Case {
    std::string args;
    int exit_code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"--unpack --weights /nonexistent/p.npy --scales " + s + " --out " + out, 14, "/nonexistent/p.npy"},
      {"--unpack --weights " + bytes + " --scales " + s + " --out " + out, 14,
       "pack-weights: --weights '" + bytes + "' holds uint8 [16, 16]; fp8_e4m3fn_x4 weights are a "
       "[K/4, N] uint32 matrix ('<u4')"},
      {"--unpack --weights " + p + " --scales " + s + " --out " + out + " --dtype fp4_e2m1fn_x4", 14,
       "holds uint32 [16, 4]; fp4_e2m1fn_x4 weights are a [K/4, N] uint16 matrix ('<u2')"},
      {"--unpack --weights " + p + " --scales " + wide_scales + " --out " + out, 14,
       "pack-weights: --scales '" + wide_scales + "' holds uint8 [2, 5]; the scales of --weights "
       "[16, 4] are a uint8 ('|u1') [K/32, N] = [2, 4] matrix"},
      {"--unpack --weights " + p + " --scales " + p + " --out " + out, 14, "holds uint32 [16, 4]"},
      {"--unpack --weights " + p + " --scales " + s, 2, "--out is required with --unpack"},
      {"--unpack --weights " + p + " --scales " + s + " --out /nonexistent/dir/w.npy", 11,
       "pack-weights: --out '/nonexistent/dir/w.npy'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const CommandResult r = RunNkisim(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message));
    EXPECT_FALSE(Exists(out));
  }
  for (const std::string& path : {w, p, s, bytes, wide_scales}) std::remove(path.c_str());
}

}  // namespace
}  // namespace nkisim
