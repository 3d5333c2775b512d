#include "runtime/config_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "runtime/error.h"

namespace nkisim {
namespace {

class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = StrCat(line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

void ParseConfigText(const std::string& text, const std::string& source,
                     google::protobuf::Message* message) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    std::unique_ptr<google::protobuf::Message> parsed(message->New());
    const auto status = google::protobuf::util::JsonStringToMessage(text, parsed.get());
    if (!status.ok()) {
      Raise(ErrorCode::kBadConfig, StrCat(source, ": JSON: ", status.message().ToString()));
    }
    message->MergeFrom(*parsed);
    return;
  }
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  // Parse (not Merge) into a fresh message first: Parse refuses a non-repeated field or a oneof
  // given twice, where Merge lets the last one win silently. (A proto3 scalar has no presence, so
  // a first occurrence that holds its zero value cannot be told from an absent one.) The merge
  // then keeps explicit zeros over the defaults already in `message`.
  std::unique_ptr<google::protobuf::Message> fresh(message->New());
  if (!parser.ParseFromString(text, fresh.get()) || !parser.MergeFromString(text, message)) {
    Raise(ErrorCode::kBadConfig, StrCat(source, ":", errors.first()));
  }
}

std::string ReadConfigFile(const std::string& path, const std::string& what) {
  // Only a regular file of bounded size: a FIFO would block forever, a device read without end.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    Raise(ErrorCode::kBadConfig, StrCat(path, ": cannot open ", what, ": ", std::strerror(errno)));
  }
  const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                     : !S_ISREG(st.st_mode) ? "not a regular file"
                                            : nullptr;
  if (kind) {
    Raise(ErrorCode::kBadConfig,
          StrCat(path, ": the ", what, " is ", kind, "; it must be a regular file"));
  }
  if (st.st_size > kMaxConfigFileBytes) {
    Raise(ErrorCode::kBadConfig, StrCat(path, ": the ", what, " is ", st.st_size,
                                        " bytes; at most ", kMaxConfigFileBytes, " are read"));
  }
  std::ifstream in(path);
  if (!in) {
    Raise(ErrorCode::kBadConfig, StrCat(path, ": cannot open ", what, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace nkisim
