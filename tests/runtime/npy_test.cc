// runtime/npy: round trips through WriteNpy/ReadNpy, files written byte by byte in the test
// (independent of WriteNpy), and every malformed-file rule.
#include "runtime/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace nkisim {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

std::string Bytes(const TensorView& t) {
  std::string out;
  const size_t width = SizeOf(t.dtype());
  const auto* base = reinterpret_cast<const char*>(t.buffer().data());
  t.ForEachOffset([&](int64_t offset) { out.append(base + offset * width, width); });
  return out;
}

std::string LittleEndian(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

// An npy file spelled out by hand: magic, version, header length, header text, data.
std::string NpyBytes(const std::string& header, const std::string& data, int major = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  out += LittleEndian(header.size(), major == 1 ? 2 : 4);
  return out + header + data;
}

std::string Header(const std::string& descr, const std::string& shape,
                   const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape +
         ", }\n";
}

std::string Floats(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(v));
  return out;
}

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device seed;
    dir_ = fs::temp_directory_path() /
           ("nkisim_npy_test_" + std::to_string(seed()) + "_" + std::to_string(seed()));
    ASSERT_TRUE(fs::create_directory(dir_));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::string WriteFile(const std::string& name, const std::string& bytes) const {
    const std::string path = Path(name);
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  std::string ReadFile(const std::string& path) const {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Expects ReadNpy(path) to fail with kBadConfig and a message naming the file and every word.
  void ExpectRejected(const std::string& path, std::initializer_list<std::string> words) const {
    try {
      ReadNpy(path);
      ADD_FAILURE() << "accepted " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      for (const std::string& word : words) {
        EXPECT_NE(message.find(word), std::string::npos) << "'" << word << "' not in: " << message;
      }
    }
  }

  fs::path dir_;
};

// Fills a tensor with varied values: extremes, negatives, fractions (rounded into the dtype).
TensorView Sample(const Shape& shape, DType dtype) {
  TensorView t = TensorView::Create(shape, dtype, "sample");
  std::vector<float> values(static_cast<size_t>(t.numel()));
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-300.0f, 300.0f);
  for (float& v : values) v = dist(gen);
  if (values.size() >= 2) {  // the extremes; FromFloat saturates -max of unsigned dtypes to 0
    values[0] = static_cast<float>(MaxValue(dtype));
    values[1] = -static_cast<float>(MaxValue(dtype));
  }
  t.FromFloats(values);
  return t;
}

TEST_F(NpyTest, RoundTripsEveryNumpyDType) {
  const struct { DType dtype; const char* descr; } kCases[] = {
      {DType::kFloat32, "<f4"}, {DType::kFloat16, "<f2"}, {DType::kInt8, "|i1"},
      {DType::kUInt8, "|u1"},   {DType::kInt32, "<i4"},   {DType::kUInt16, "<u2"},
      {DType::kUInt32, "<u4"}};
  for (const auto& c : kCases) {
    const TensorView t = Sample({3, 5, 2}, c.dtype);
    const std::string path = Path(StrCat(DTypeName(c.dtype), ".npy"));
    WriteNpy(path, t);

    // The file is numpy's layout: version 1.0, the descr, data 64-byte aligned after a '\n'.
    const std::string file = ReadFile(path);
    ASSERT_GT(file.size(), 10u);
    EXPECT_EQ(file.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t header_length = static_cast<unsigned char>(file[8]) |
                                 static_cast<size_t>(static_cast<unsigned char>(file[9])) << 8;
    EXPECT_EQ((10 + header_length) % 64, 0u);
    EXPECT_EQ(file[10 + header_length - 1], '\n');
    EXPECT_NE(file.find(StrCat("'", c.descr, "'")), std::string::npos) << file.substr(0, 80);
    EXPECT_NE(file.find("(3, 5, 2)"), std::string::npos);
    EXPECT_EQ(file.substr(10 + header_length), Bytes(t));

    const TensorView back = ReadNpy(path);
    EXPECT_EQ(back.dtype(), c.dtype);
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_TRUE(back.is_contiguous());
    EXPECT_EQ(Bytes(back), Bytes(t)) << DTypeName(c.dtype);
    EXPECT_EQ(Bytes(ReadNpyAs(path, c.dtype)), Bytes(t)) << DTypeName(c.dtype);
  }
}

TEST_F(NpyTest, RoundTripsRankZeroOneAndEmpty) {
  for (const Shape& shape : {Shape{}, Shape{7}, Shape{0, 3}, Shape{1, 1, 1, 1, 1}}) {
    const TensorView t = Sample(shape, DType::kFloat32);
    const std::string path = Path("shape.npy");
    WriteNpy(path, t);
    const TensorView back = ReadNpy(path);
    EXPECT_EQ(back.shape(), shape) << ShapeString(shape);
    EXPECT_EQ(Bytes(back), Bytes(t)) << ShapeString(shape);
  }
  WriteNpy(Path("r1.npy"), Sample({7}, DType::kFloat32));
  EXPECT_NE(ReadFile(Path("r1.npy")).find("(7,)"), std::string::npos);
  WriteNpy(Path("r0.npy"), Sample({}, DType::kFloat32));
  EXPECT_NE(ReadFile(Path("r0.npy")).find("()"), std::string::npos);
}

TEST_F(NpyTest, Bf16AndFp8AsFloat32) {
  for (DType t : {DType::kBFloat16, DType::kFp8E4M3, DType::kFp8E4M3FN, DType::kFp8E5M2}) {
    const TensorView tensor = Sample({4, 6}, t);
    const std::string path = Path("special.npy");
    WriteNpy(path, tensor);  // kAsFloat32 is the default
    const TensorView as_f32 = ReadNpy(path);
    ASSERT_EQ(as_f32.dtype(), DType::kFloat32) << DTypeName(t);
    EXPECT_EQ(as_f32.ToFloats(), tensor.ToFloats()) << "exact widening of " << DTypeName(t);
    const TensorView back = ReadNpyAs(path, t);
    EXPECT_EQ(back.dtype(), t);
    EXPECT_EQ(back.shape(), tensor.shape());
    EXPECT_EQ(Bytes(back), Bytes(tensor)) << DTypeName(t);
  }
}

TEST_F(NpyTest, Bf16AndFp8AsRawBits) {
  for (DType t : {DType::kBFloat16, DType::kFp8E4M3, DType::kFp8E4M3FN, DType::kFp8E5M2}) {
    const TensorView tensor = Sample({4, 6}, t);
    // A NaN with a payload survives only as raw bits.
    if (t == DType::kBFloat16) {
      const uint16_t nan = 0x7FC5;
      std::memcpy(tensor.element_ptr({2, 2}), &nan, sizeof(nan));
    }
    const std::string path = Path("raw.npy");
    WriteNpy(path, tensor, NpyExchange::kRawBits);
    const TensorView raw = ReadNpy(path);
    EXPECT_EQ(raw.dtype(), IsFp8(t) ? DType::kUInt8 : DType::kUInt16) << DTypeName(t);
    EXPECT_EQ(Bytes(raw), Bytes(tensor)) << DTypeName(t);
    const TensorView back = ReadNpyAs(path, t, NpyExchange::kRawBits);
    EXPECT_EQ(back.dtype(), t);
    EXPECT_EQ(Bytes(back), Bytes(tensor)) << DTypeName(t);
  }
}

TEST_F(NpyTest, ReadAsRoundsFloat32ToNearestEven) {
  // bf16 keeps 7 fraction bits: 1 + 2^-8 ties 1 | 1 + 2^-7 and goes to 1 (even); 1 + 3 * 2^-8
  // ties 1 + 2^-7 | 1 + 2^-6 and goes to 1 + 2^-6 (even).
  const float tie_down = 1.0f + std::ldexp(1.0f, -8);
  const float tie_up = 1.0f + 3 * std::ldexp(1.0f, -8);
  const std::string path =
      WriteFile("f32.npy", NpyBytes(Header("<f4", "(4,)"), Floats({tie_down, tie_up, 1e6f, 0.3f})));
  const TensorView bf16 = ReadNpyAs(path, DType::kBFloat16);
  EXPECT_EQ(bf16.get({0}), 1.0f);
  EXPECT_EQ(bf16.get({1}), 1.0f + std::ldexp(1.0f, -6));
  const TensorView e4m3 = ReadNpyAs(path, DType::kFp8E4M3);
  EXPECT_EQ(e4m3.get({2}), 240.0f);  // fp8 saturates
  const TensorView fp16 = ReadNpyAs(path, DType::kFloat16);
  EXPECT_EQ(fp16.dtype(), DType::kFloat16);
  EXPECT_TRUE(std::isinf(fp16.get({2})));  // fp16 overflows to inf
  EXPECT_EQ(fp16.get({3}), RoundTo(DType::kFloat16, 0.3f));
  EXPECT_NE(fp16.get({3}), 0.3f);
}

TEST_F(NpyTest, ReadAsRejectsOtherDescrs) {
  const std::string f32 = WriteFile("f32.npy", NpyBytes(Header("<f4", "(1,)"), Floats({1.0f})));
  const std::string u2 = WriteFile("u2.npy", NpyBytes(Header("<u2", "(1,)"), "\x80\x3F"));
  const std::string i4 = WriteFile("i4.npy", NpyBytes(Header("<i4", "(1,)"), "\1\0\0\0"s));
  const std::string f2 = WriteFile("f2.npy", NpyBytes(Header("<f2", "(1,)"), "\0\x3C"s));
  struct Case {
    std::string path;
    DType want;
    NpyExchange exchange;
    std::vector<std::string> words;
  };
  const Case kCases[] = {
      {i4, DType::kInt8, NpyExchange::kAsFloat32, {"'<i4'", "int8", "'|i1'"}},
      {f32, DType::kInt32, NpyExchange::kAsFloat32, {"'<f4'", "int32", "'<i4'"}},
      {f2, DType::kFloat32, NpyExchange::kAsFloat32, {"'<f2'", "fp32"}},
      {u2, DType::kBFloat16, NpyExchange::kAsFloat32, {"'<u2'", "bf16", "kAsFloat32", "'<f4'"}},
      {f32, DType::kBFloat16, NpyExchange::kRawBits, {"'<f4'", "bf16", "kRawBits", "'<u2'"}},
      {u2, DType::kFp8E5M2, NpyExchange::kRawBits, {"fp8_e5m2", "'|u1'"}},
  };
  for (const Case& c : kCases) {
    try {
      ReadNpyAs(c.path, c.want, c.exchange);
      ADD_FAILURE() << c.path << " read as " << DTypeName(c.want);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      const std::string message = e.what();
      for (const std::string& word : c.words) {
        EXPECT_NE(message.find(word), std::string::npos) << "'" << word << "' not in " << message;
      }
    }
  }
  // The exchange mode does not matter for dtypes numpy has.
  EXPECT_EQ(ReadNpyAs(u2, DType::kUInt16, NpyExchange::kRawBits).get({0}), 0x3F80);
}

TEST_F(NpyTest, WritesNonContiguousViewsRowMajor) {
  const TensorView base = Sample({4, 6}, DType::kInt32);
  const TensorView views[] = {base.permute({1, 0}), base.slice(1, 1, 6, 2),
                              base.select(1, 3), base.permute({1, 0}).slice(0, 2, 5)};
  for (const TensorView& view : views) {
    const std::string path = Path("view.npy");
    WriteNpy(path, view);
    const TensorView back = ReadNpy(path);
    EXPECT_EQ(back.shape(), view.shape());
    EXPECT_EQ(back.ToFloats(), view.ToFloats()) << ShapeString(view.shape());
  }
  // Element [i, j] of the transposed file is base[j, i].
  WriteNpy(Path("t.npy"), base.permute({1, 0}));
  const TensorView t = ReadNpy(Path("t.npy"));
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(t.get({i, j}), base.get({j, i}));
  }
}

TEST_F(NpyTest, ReadsHandWrittenFile) {
  // int32 [[1, -2, 3], [256, 65536, -2147483648]] written byte by byte.
  const std::string data = std::string("\x01\x00\x00\x00" "\xFE\xFF\xFF\xFF" "\x03\x00\x00\x00"
                                       "\x00\x01\x00\x00" "\x00\x00\x01\x00" "\x00\x00\x00\x80",
                                       24);
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  header += std::string(128 - 10 - header.size() - 1, ' ') + "\n";  // numpy's alignment
  const std::string path = WriteFile("hand.npy", NpyBytes(header, data));
  const TensorView t = ReadNpy(path);
  EXPECT_EQ(t.dtype(), DType::kInt32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  const int32_t expected[2][3] = {{1, -2, 3}, {256, 65536, std::numeric_limits<int32_t>::min()}};
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      int32_t value;
      std::memcpy(&value, t.element_ptr({i, j}), sizeof(value));
      EXPECT_EQ(value, expected[i][j]) << i << "," << j;
    }
  }
  EXPECT_EQ(t.name(), "hand");
}

TEST_F(NpyTest, ParsesHeaderSpellingsRobustly) {
  const std::string two_floats = Floats({1.5f, -2.0f});
  const std::string kHeaders[] = {
      "{'descr':'<f4','fortran_order':False,'shape':(2,)}",
      "{ \"shape\" : ( 2 , ) , \"descr\" : \"<f4\" , \"fortran_order\" : False }\n",
      "{'fortran_order': False, 'shape': (1, 2), 'descr': '=f4',}          \n",
      "\t{'descr': '<f4',\n 'fortran_order': False,\n 'shape': (2L,)}\r\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,2,),}",
  };
  for (const std::string& header : kHeaders) {
    const TensorView t = ReadNpy(WriteFile("spelling.npy", NpyBytes(header, two_floats)));
    EXPECT_EQ(t.numel(), 2) << header;
    EXPECT_EQ(t.ToFloats(), (std::vector<float>{1.5f, -2.0f})) << header;
  }
  const TensorView scalar =
      ReadNpy(WriteFile("scalar.npy", NpyBytes(Header("<f4", "()"), Floats({4.0f}))));
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.ToFloats(), std::vector<float>{4.0f});
}

TEST_F(NpyTest, ReadsVersion2And3Headers) {
  for (int major : {2, 3}) {
    std::string header = Header("<u2", "(3,)");
    header.insert(header.size() - 1, std::string(100, ' '));  // unaligned on purpose
    const std::string path = WriteFile("v.npy", NpyBytes(header, "\x01\x00\x02\x00\xFF\xFF"s,
                                                         major));
    const TensorView t = ReadNpy(path);
    EXPECT_EQ(t.dtype(), DType::kUInt16);
    EXPECT_EQ(t.ToFloats(), (std::vector<float>{1.0f, 2.0f, 65535.0f})) << "version " << major;
  }
}

TEST_F(NpyTest, RejectsMissingFile) { ExpectRejected(Path("absent.npy"), {"does not exist"}); }

TEST_F(NpyTest, RejectsBadMagic) {
  std::string bytes = NpyBytes(Header("<f4", "(1,)"), Floats({1.0f}));
  bytes[1] = 'n';
  ExpectRejected(WriteFile("magic.npy", bytes), {"bad magic"});
  ExpectRejected(WriteFile("text.npy", "hello, world"), {"bad magic"});
}

TEST_F(NpyTest, RejectsUnsupportedVersion) {
  std::string bytes = NpyBytes(Header("<f4", "(1,)"), Floats({1.0f}), 4);
  ExpectRejected(WriteFile("v4.npy", bytes), {"version 4.0", "1.0, 2.0, 3.0"});
  bytes = NpyBytes(Header("<f4", "(1,)"), Floats({1.0f}));
  bytes[7] = 1;
  ExpectRejected(WriteFile("v11.npy", bytes), {"version 1.1"});
}

TEST_F(NpyTest, RejectsTruncatedHeader) {
  ExpectRejected(WriteFile("empty.npy", ""), {"truncated header"});
  ExpectRejected(WriteFile("magic_only.npy", "\x93NUMPY\x01"), {"truncated header"});
  ExpectRejected(WriteFile("no_length.npy", "\x93NUMPY\x02\x00\x10\x00"s), {"truncated header"});
  const std::string full = NpyBytes(Header("<f4", "(1,)"), "");
  ExpectRejected(WriteFile("cut.npy", full.substr(0, full.size() - 5)), {"truncated header"});
}

TEST_F(NpyTest, RejectsHeaderThatIsNotADict) {
  ExpectRejected(WriteFile("list.npy", NpyBytes("['<f4', False, (1,)]\n", Floats({1.0f}))),
                 {"not a dict"});
  ExpectRejected(WriteFile("blank.npy", NpyBytes("          \n", "")), {"not a dict"});
}

TEST_F(NpyTest, RejectsMissingKey) {
  ExpectRejected(WriteFile("no_shape.npy",
                           NpyBytes("{'descr': '<f4', 'fortran_order': False}\n", Floats({1.0f}))),
                 {"missing key 'shape'"});
  ExpectRejected(WriteFile("no_descr.npy",
                           NpyBytes("{'fortran_order': False, 'shape': (1,)}\n", Floats({1.0f}))),
                 {"missing key 'descr'"});
  ExpectRejected(WriteFile("no_fortran.npy",
                           NpyBytes("{'descr': '<f4', 'shape': (1,)}\n", Floats({1.0f}))),
                 {"missing key 'fortran_order'"});
}

TEST_F(NpyTest, RejectsMalformedDicts) {
  struct Case {
    std::string header;
    std::string words;
  };
  const Case kCases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unexpected key"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "repeats"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", "expected ':'"},
      {"{'descr': '<f4 'fortran_order': False, 'shape': (1,)}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ", "expected a key"},
      {"{'descr': \"<f4}", "unterminated"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (x,)}", "non-integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "too large"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "structured"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", "after the header dict"},
  };
  for (const Case& c : kCases) {
    ExpectRejected(WriteFile("malformed.npy", NpyBytes(c.header + "\n", Floats({1.0f}))),
                   {c.words});
  }
}

TEST_F(NpyTest, RejectsUnsupportedDescr) {
  for (const char* descr : {"<f8", "<i8", "|b1", "<i1", "<u1", "=i1", "<c8", "O", ""}) {
    ExpectRejected(WriteFile("descr.npy", NpyBytes(Header(descr, "(1,)"), std::string(8, '\0'))),
                   {StrCat("'", descr, "'"), "unsupported",
                    "'<f4', '<f2', '|i1', '|u1', '<i4', '<u2', '<u4'"});
  }
}

TEST_F(NpyTest, RejectsBigEndianData) {
  for (const char* descr : {">f4", ">i4", ">u2"}) {
    ExpectRejected(WriteFile("be.npy", NpyBytes(Header(descr, "(1,)"), "\0\0\0\0"s)),
                   {"big-endian", descr});
  }
}

TEST_F(NpyTest, RejectsFortranOrder) {
  ExpectRejected(WriteFile("f.npy", NpyBytes(Header("<f4", "(1, 2)", "True"), Floats({1, 2}))),
                 {"'fortran_order' is True", "C-order"});
}

TEST_F(NpyTest, RejectsNegativeDims) {
  ExpectRejected(WriteFile("neg.npy", NpyBytes(Header("<f4", "(2, -1)"), Floats({1}))),
                 {"negative", "(2, -1)"});
}

TEST_F(NpyTest, RejectsRankAboveMax) {
  ExpectRejected(WriteFile("rank6.npy", NpyBytes(Header("<f4", "(1, 1, 1, 1, 1, 1)"), Floats({1}))),
                 {"rank 6", "at most 5"});
}

TEST_F(NpyTest, RejectsDataOfWrongLength) {
  ExpectRejected(WriteFile("short.npy", NpyBytes(Header("<f4", "(2, 2)"), Floats({1, 2, 3}))),
                 {"data is 12 bytes", "shorter", "(2, 2)", "16 bytes"});
  ExpectRejected(WriteFile("long.npy", NpyBytes(Header("<u2", "(3,)"), std::string(7, '\0'))),
                 {"data is 7 bytes", "longer", "6 bytes"});
  ExpectRejected(WriteFile("huge.npy", NpyBytes(Header("<f4", "(4294967296, 4294967296)"), "")),
                 {"shorter", "2^64"});
  // A zero dim makes the array empty whatever the other dims are.
  const TensorView empty = ReadNpy(
      WriteFile("zero.npy", NpyBytes(Header("<f4", "(4294967296, 0, 4294967296)"), "")));
  EXPECT_EQ(empty.numel(), 0);
}

TEST_F(NpyTest, WriteErrors) {
  try {
    WriteNpy(Path("no_such_dir/x.npy"), Sample({2}, DType::kFloat32));
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("cannot open the file for writing"), std::string::npos);
  }
  EXPECT_THROW(WriteNpy(Path("null.npy"), TensorView()), Error);
}

}  // namespace
}  // namespace nkisim
