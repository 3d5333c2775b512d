#include "runtime/npy.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace nkisim {
namespace {

// Tensor bytes go to and from files unswapped, and '=' descrs are read as '<'.
static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kHeaderAlignment = 64;  // numpy pads magic + lengths + header to this

struct NpyType {
  std::string_view descr;
  DType dtype;
};

constexpr NpyType kNpyTypes[] = {
    {"<f4", DType::kFloat32}, {"<f2", DType::kFloat16}, {"|i1", DType::kInt8},
    {"|u1", DType::kUInt8},   {"<i4", DType::kInt32},   {"<u2", DType::kUInt16},
    {"<u4", DType::kUInt32}, {"<i2", DType::kInt16}};

std::string SupportedDescrs() {
  std::string list;
  for (const NpyType& t : kNpyTypes) list += StrCat(list.empty() ? "" : ", ", "'", t.descr, "'");
  return list;
}

// bf16 and fp8 have no numpy dtype and cross the boundary as NpyExchange says.
bool NeedsExchange(DType dtype) { return dtype == DType::kBFloat16 || IsFp8(dtype); }

// The same-width unsigned dtype that carries a bf16 or fp8 dtype's bits.
DType RawBitsDType(DType dtype) { return IsFp8(dtype) ? DType::kUInt8 : DType::kUInt16; }

std::string_view DescrOf(DType dtype) {
  for (const NpyType& t : kNpyTypes) {
    if (t.dtype == dtype) return t.descr;
  }
  Raise(ErrorCode::kInternal, StrCat("npy: dtype ", DTypeName(dtype), " has no numpy descr"));
}

// A shape as the header spells it: "()", "(3,)", "(3, 4)".
std::string ShapeTuple(const Shape& shape) {
  std::string tuple = "(";
  for (size_t i = 0; i < shape.size(); ++i) tuple += StrCat(i ? ", " : "", shape[i]);
  return tuple + (shape.size() == 1 ? ",)" : ")");
}

// The header as it may appear in a message: printable, escaped, and cut if long.
std::string QuoteHeader(std::string_view text) {
  constexpr size_t kMaxShown = 160;
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += StrCat('\\', static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7F) {
      constexpr char kHex[] = "0123456789abcdef";
      out += StrCat("\\x", kHex[c >> 4], kHex[c & 0xF]);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + (text.size() > kMaxShown ? "\"..." : "\"");
}

// The raw fields of an npy header dict, before their values are checked.
struct HeaderFields {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// Parses the header, a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Accepts what Python's literal syntax allows there: either quote, any whitespace, a trailing
// comma, the keys in any order, "(3,)" and "()" shapes, and Python 2's long suffix ("3L").
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  HeaderFields Parse() {
    SkipSpace();
    if (!Consume('{')) {
      Raise(ErrorCode::kBadConfig,
            StrCat("npy '", path_, "': header is not a dict literal (it must start with '{'): ",
                   QuoteHeader(text_)));
    }
    HeaderFields fields;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      const std::string key = ParseString("a key");
      SkipSpace();
      Expect(':', StrCat("':' after key '", key, "'"));
      SkipSpace();
      if (key == "descr") {
        MarkSeen(seen_descr, key);
        if (Peek() != '\'' && Peek() != '"') {
          Malformed(StrCat("header field 'descr' is not a string; only simple dtypes (",
                           SupportedDescrs(), ") are supported, not structured ones"));
        }
        fields.descr = ParseString("the descr");
      } else if (key == "fortran_order") {
        MarkSeen(seen_fortran, key);
        fields.fortran_order = ParseBool(key);
      } else if (key == "shape") {
        MarkSeen(seen_shape, key);
        fields.shape = ParseShape();
      } else {
        Malformed(StrCat("header dict has unexpected key '", key,
                         "'; an npy header has exactly 'descr', 'fortran_order' and 'shape'"));
      }
      SkipSpace();
      if (Consume('}')) break;
      Expect(',', "',' or '}' after a value");
    }
    SkipSpace();
    if (pos_ != text_.size()) Malformed("unexpected text after the header dict");
    const char* missing = !seen_descr ? "descr" : !seen_fortran ? "fortran_order"
                          : !seen_shape ? "shape" : nullptr;
    if (missing != nullptr) {
      Raise(ErrorCode::kBadConfig,
            StrCat("npy '", path_, "': header dict is missing key '", missing,
                   "'; an npy header needs 'descr', 'fortran_order' and 'shape': ",
                   QuoteHeader(text_)));
    }
    return fields;
  }

 private:
  [[noreturn]] void Malformed(const std::string& problem) const {
    Raise(ErrorCode::kBadConfig, StrCat("npy '", path_, "': ", problem, " (at offset ", pos_,
                                        " of header ", QuoteHeader(text_), ")"));
  }

  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void SkipSpace() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) != nullptr) ++pos_;
  }

  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void Expect(char c, const std::string& what) {
    if (!Consume(c)) Malformed(StrCat("header dict is malformed: expected ", what));
  }

  void MarkSeen(bool& seen, const std::string& key) const {
    if (seen) Malformed(StrCat("header dict repeats key '", key, "'"));
    seen = true;
  }

  // A quoted string without escapes; npy keys and descrs never need them.
  std::string ParseString(const char* what) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') {
      Malformed(StrCat("header dict is malformed: expected ", what, " as a quoted string"));
    }
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) Malformed("header dict has an unterminated string");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return value;
  }

  bool ParseBool(const std::string& key) {
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (text_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        return value;
      }
    }
    Malformed(StrCat("header field '", key, "' must be True or False"));
  }

  Shape ParseShape() {
    if (!Consume('(')) Malformed("header field 'shape' must be a tuple like (3, 4), (3,) or ()");
    Shape shape;
    bool trailing_comma = false;
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      shape.push_back(ParseInt());
      SkipSpace();
      trailing_comma = Consume(',');
      if (!trailing_comma) {
        Expect(')', "',' or ')' in the shape tuple");
        break;
      }
    }
    // In Python "(3)" is the int 3, not a tuple.
    if (shape.size() == 1 && !trailing_comma) {
      Malformed("header field 'shape' is a parenthesised int, not a tuple; write a 1-D shape "
                "as (3,)");
    }
    return shape;
  }

  int64_t ParseInt() {
    const bool negative = Consume('-');
    if (Peek() < '0' || Peek() > '9') Malformed("header field 'shape' holds a non-integer");
    int64_t value = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      const int digit = Peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        Malformed("header field 'shape' holds a dim too large for int64");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    Consume('L');
    return negative ? -value : value;
  }

  std::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

// A parsed and validated header: where the data starts and what it holds.
struct NpyHeader {
  std::string descr;  // as spelled in the file
  DType dtype = DType::kFloat32;
  Shape shape;
  uint64_t data_offset = 0;
};

[[noreturn]] void BadFile(const std::string& path, const std::string& problem) {
  Raise(ErrorCode::kBadConfig, StrCat("npy '", path, "': ", problem));
}

uint64_t LittleEndian(const unsigned char* bytes, int count) {
  uint64_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

DType DTypeOfDescr(const std::string& path, const std::string& descr) {
  if (!descr.empty() && descr[0] == '>') {
    BadFile(path, StrCat("header field 'descr' is '", descr,
                         "', big-endian data; only little-endian data is supported (convert "
                         "with arr.astype(arr.dtype.newbyteorder('<')))"));
  }
  for (const NpyType& t : kNpyTypes) {
    const bool native_spelling = descr.size() == 3 && descr[0] == '=' && t.descr[0] == '<' &&
                                 descr.substr(1) == t.descr.substr(1);
    if (descr == t.descr || native_spelling) return t.dtype;
  }
  BadFile(path, StrCat("header field 'descr' is '", descr, "', an unsupported dtype; supported: ",
                       SupportedDescrs()));
}

// Reads and checks everything before the data, including that the data has the right length.
NpyHeader ReadHeader(std::ifstream& in, const std::string& path, uint64_t file_size) {
  unsigned char preamble[12] = {};
  in.read(reinterpret_cast<char*>(preamble), sizeof(preamble));
  const size_t got = static_cast<size_t>(in.gcount());
  in.clear();  // a file shorter than the 2.0 preamble sets eof; sizes are checked below
  if (std::memcmp(preamble, kMagic, std::min(got, kMagicSize)) != 0) {
    BadFile(path, "bad magic: the file does not start with \"\\x93NUMPY\"; it is not an npy file");
  }
  if (got < kMagicSize + 2) {
    BadFile(path, StrCat("truncated header: the file has only ", file_size,
                         " bytes, fewer than the magic string and version need"));
  }
  const int major = preamble[6], minor = preamble[7];
  if (major < 1 || major > 3 || minor != 0) {
    BadFile(path, StrCat("unsupported format version ", major, ".", minor,
                         "; supported: 1.0, 2.0, 3.0"));
  }
  const int length_bytes = major == 1 ? 2 : 4;
  const size_t preamble_size = kMagicSize + 2 + length_bytes;
  if (got < preamble_size) {
    BadFile(path, StrCat("truncated header: the file has only ", file_size,
                         " bytes, fewer than the ", preamble_size, "-byte preamble of version ",
                         major, ".0"));
  }
  const uint64_t header_length = LittleEndian(preamble + kMagicSize + 2, length_bytes);
  const uint64_t data_offset = preamble_size + header_length;
  if (data_offset > file_size) {
    BadFile(path, StrCat("truncated header: the header length field says ", header_length,
                         " bytes but only ", file_size - preamble_size, " follow the preamble"));
  }
  std::string text(header_length, '\0');
  in.seekg(static_cast<std::streamoff>(preamble_size));
  in.read(text.data(), static_cast<std::streamsize>(header_length));
  if (!in) BadFile(path, "read error in the header");

  HeaderFields fields = HeaderParser(text, path).Parse();
  NpyHeader header{fields.descr, DTypeOfDescr(path, fields.descr), std::move(fields.shape),
                   data_offset};
  if (fields.fortran_order) {
    BadFile(path, "header field 'fortran_order' is True; only C-order arrays are supported");
  }
  if (header.shape.size() > static_cast<size_t>(kMaxRank)) {
    BadFile(path, StrCat("header field 'shape' is ", ShapeTuple(header.shape), ", rank ",
                         header.shape.size(), "; at most ", kMaxRank, " dims are supported"));
  }
  bool empty = false;
  for (int64_t d : header.shape) {
    if (d < 0) {
      BadFile(path, StrCat("header field 'shape' is ", ShapeTuple(header.shape),
                           ", which has a negative dim"));
    }
    empty = empty || d == 0;
  }
  uint64_t needed = empty ? 0 : SizeOf(header.dtype);
  bool overflow = false;
  for (int64_t d : header.shape) {
    if (empty) break;
    const uint64_t dim = static_cast<uint64_t>(d);
    overflow = overflow || needed > std::numeric_limits<uint64_t>::max() / dim;
    needed *= dim;
  }
  const uint64_t present = file_size - data_offset;
  if (overflow || needed != present) {
    BadFile(path, StrCat("data is ", present, " bytes, ",
                         overflow || present < needed ? "shorter" : "longer", " than shape ",
                         ShapeTuple(header.shape), " of '", header.descr, "' needs (",
                         overflow ? std::string("over 2^64") : std::to_string(needed),
                         " bytes)"));
  }
  return header;
}

class NpyReader {
 public:
  explicit NpyReader(std::string path) : path_(std::move(path)) {
    std::error_code error;
    if (!std::filesystem::exists(path_, error)) BadFile(path_, "the file does not exist");
    const uint64_t size = std::filesystem::file_size(path_, error);
    if (error) BadFile(path_, StrCat("cannot read the file: ", error.message()));
    in_.open(path_, std::ios::binary);
    if (!in_) BadFile(path_, "cannot open the file for reading");
    header_ = ReadHeader(in_, path_, size);
  }

  const NpyHeader& header() const { return header_; }

  // Reads the data into a new tensor of dtype storage, which must be as wide as the file's.
  TensorView ReadAs(DType storage) {
    TensorView tensor = TensorView::Create(
        header_.shape, storage, std::filesystem::path(path_).stem().string());
    in_.seekg(static_cast<std::streamoff>(header_.data_offset));
    in_.read(reinterpret_cast<char*>(tensor.buffer().data()),
             static_cast<std::streamsize>(tensor.size_bytes()));
    if (!in_) BadFile(path_, "read error in the data");
    return tensor;
  }

 private:
  std::string path_;
  std::ifstream in_;
  NpyHeader header_;
};

}  // namespace

void WriteNpy(const std::string& path, const TensorView& tensor, NpyExchange exchange) {
  if (!tensor.valid()) {
    Raise(ErrorCode::kInvalidArgument, StrCat("WriteNpy '", path, "': the tensor view is null"));
  }
  const DType dtype = tensor.dtype();
  const bool special = NeedsExchange(dtype);
  const bool as_float32 = special && exchange == NpyExchange::kAsFloat32;
  const DType file_dtype = !special ? dtype : as_float32 ? DType::kFloat32 : RawBitsDType(dtype);

  // numpy's own layout: the dict, spaces, then '\n', so that the data starts 64-byte aligned.
  const std::string dict = StrCat("{'descr': '", DescrOf(file_dtype),
                                  "', 'fortran_order': False, 'shape': ",
                                  ShapeTuple(tensor.shape()), ", }");
  auto padded_length = [&](size_t preamble) {
    const size_t total = preamble + dict.size() + 1;
    return (total + kHeaderAlignment - 1) / kHeaderAlignment * kHeaderAlignment - preamble;
  };
  const bool version1 = padded_length(10) <= 0xFFFF;
  const size_t header_length = padded_length(version1 ? 10 : 12);
  std::string file_start(kMagic, kMagicSize);
  file_start += static_cast<char>(version1 ? 1 : 2);
  file_start += '\0';
  for (int i = 0; i < (version1 ? 2 : 4); ++i) {
    file_start += static_cast<char>((header_length >> (8 * i)) & 0xFF);
  }
  file_start += dict;
  file_start.append(header_length - dict.size() - 1, ' ');
  file_start += '\n';

  const size_t width = SizeOf(dtype);
  const size_t file_width = SizeOf(file_dtype);
  std::vector<char> data(static_cast<size_t>(tensor.numel()) * file_width);
  const std::byte* base = tensor.buffer().data();
  char* out = data.data();
  tensor.ForEachOffset([&](int64_t offset) {
    const std::byte* element = base + offset * static_cast<int64_t>(width);
    if (as_float32) {
      const float value = ToFloat(dtype, element);
      std::memcpy(out, &value, sizeof(value));
    } else {
      std::memcpy(out, element, width);
    }
    out += file_width;
  });

  errno = 0;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    BadFile(path, StrCat("cannot open the file for writing",
                         errno != 0 ? StrCat(": ", std::strerror(errno)) : std::string()));
  }
  file.write(file_start.data(), static_cast<std::streamsize>(file_start.size()));
  file.write(data.data(), static_cast<std::streamsize>(data.size()));
  file.close();
  if (!file) BadFile(path, "write error");
}

TensorView ReadNpy(const std::string& path) {
  NpyReader reader(path);
  return reader.ReadAs(reader.header().dtype);
}

TensorView ReadNpyAs(const std::string& path, DType want, NpyExchange exchange) {
  NpyReader reader(path);
  const DType have = reader.header().dtype;
  if (have == want) return reader.ReadAs(want);

  const bool special = NeedsExchange(want);
  const bool raw = special && exchange == NpyExchange::kRawBits;
  const DType accepted = raw                                   ? RawBitsDType(want)
                         : special || want == DType::kFloat16 ? DType::kFloat32
                                                              : want;
  if (have != accepted) {
    const char* mode = !special ? ""
                       : raw    ? " with NpyExchange::kRawBits"
                                : " with NpyExchange::kAsFloat32";
    const std::string accepted_list =
        special            ? StrCat("'", DescrOf(accepted), "'")
        : accepted == want ? StrCat("'", DescrOf(want), "'")
                           : StrCat("'", DescrOf(want), "' or '", DescrOf(accepted), "'");
    BadFile(path, StrCat("header field 'descr' is '", reader.header().descr, "' (",
                         DTypeName(have), "), which cannot be read as ", DTypeName(want), mode,
                         "; accepted: ", accepted_list));
  }
  if (raw) return reader.ReadAs(want);  // same width: the bits are the values

  const TensorView wide = reader.ReadAs(have);
  const TensorView narrow = TensorView::Create(wide.shape(), want, wide.name());
  FromFloat(want, reinterpret_cast<const float*>(wide.buffer().data()), narrow.buffer().data(),
            static_cast<size_t>(wide.numel()));
  return narrow;
}

}  // namespace nkisim
