#include "runtime/config_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "runtime/error.h"
#include "runtime/strict_json.h"

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

namespace pb = google::protobuf;

// Every proto3 singular scalar of `m` (and of its nested messages) gains presence, as if declared
// `optional`: a synthetic oneof of its own. Map entries keep their fields as they are.
void AddPresence(pb::DescriptorProto* m) {
  if (m->options().map_entry()) return;
  for (pb::FieldDescriptorProto& f : *m->mutable_field()) {
    const bool scalar = f.type() != pb::FieldDescriptorProto::TYPE_MESSAGE &&
                        f.type() != pb::FieldDescriptorProto::TYPE_GROUP;
    if (f.label() != pb::FieldDescriptorProto::LABEL_OPTIONAL || !scalar || f.has_oneof_index()) {
      continue;
    }
    f.set_oneof_index(m->oneof_decl_size());  // synthetic oneofs follow the real ones
    m->add_oneof_decl()->set_name("_" + f.name());
    f.set_proto3_optional(true);
  }
  for (pb::DescriptorProto& nested : *m->mutable_nested_type()) AddPresence(&nested);
}

// The config's message type rebuilt with presence on every proto3 scalar, in a pool of its own
// (built once per type, kept for the process). Parsing into it makes the text parser refuse a
// scalar given twice even when its first value is zero, which proto3's own parse cannot see (a
// zero there is indistinguishable from an absent field).
class PresenceTypes {
 public:
  // A fresh empty message of d's type with presence; never null for a type of a proto3 file.
  std::unique_ptr<pb::Message> New(const pb::Descriptor* d) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = prototypes_.find(d->full_name());
    if (it == prototypes_.end()) {
      Add(d->file());
      const pb::Descriptor* rebuilt = pool_.FindMessageTypeByName(d->full_name());
      if (rebuilt == nullptr) {
        Raise(ErrorCode::kInternal, StrCat("config parser: cannot rebuild ", d->full_name()));
      }
      it = prototypes_.emplace(d->full_name(), factory_.GetPrototype(rebuilt)).first;
    }
    return std::unique_ptr<pb::Message>(it->second->New());
  }

 private:
  void Add(const pb::FileDescriptor* file) {
    if (pool_.FindFileByName(file->name()) != nullptr) return;
    for (int i = 0; i < file->dependency_count(); ++i) Add(file->dependency(i));
    pb::FileDescriptorProto proto;
    file->CopyTo(&proto);
    if (proto.syntax() == "proto3") {
      for (pb::DescriptorProto& m : *proto.mutable_message_type()) AddPresence(&m);
    }
    if (pool_.BuildFile(proto) == nullptr) {
      Raise(ErrorCode::kInternal, StrCat("config parser: cannot rebuild ", file->name()));
    }
  }

  std::mutex mu_;
  pb::DescriptorPool pool_;
  pb::DynamicMessageFactory factory_{&pool_};
  std::map<std::string, const pb::Message*> prototypes_;
};

PresenceTypes& Presence() {
  static PresenceTypes* types = new PresenceTypes;  // never destroyed: used until exit
  return *types;
}

// The path of the first string field (at any depth) that is not UTF-8, or empty. The text
// format takes any bytes in a string ("\\351"); proto3 strings must be UTF-8, and a config's
// strings end up in messages, reports and cache keys.
std::string FirstBadUtf8(const pb::Message& m, const std::string& prefix) {
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (f->type() != pb::FieldDescriptor::TYPE_STRING &&
        f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      continue;  // numbers: nothing to check (and a list of millions of them is not walked)
    }
    const std::string name = prefix.empty() ? f->name() : StrCat(prefix, ".", f->name());
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      const std::string at = f->is_repeated() ? StrCat(name, "[", i, "]") : name;
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        const pb::Message& sub = f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f);
        std::string bad = FirstBadUtf8(sub, at);
        if (!bad.empty()) return bad;
      } else if (f->type() == pb::FieldDescriptor::TYPE_STRING) {
        const std::string v = f->is_repeated() ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
        if (ValidUtf8(v) != v) return StrCat(at, ": '", ValidUtf8(v), "'");
      }
    }
  }
  return "";
}

}  // namespace

void ParseConfigText(const std::string& text, const std::string& source,
                     google::protobuf::Message* message) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    // protobuf's JSON parser takes an object for a list, flattens nested lists and lets the
    // last of two equal keys win; the shape check refuses those first (runtime/strict_json.h).
    CheckJsonShape(text, source, message->GetDescriptor());
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
  // Parse (not Merge) into a fresh message: Parse refuses a non-repeated field or a oneof given
  // twice, where Merge lets the last one win silently. The fresh message is of the same type with
  // presence on every scalar (PresenceTypes), so "batch: 0 batch: 8" is refused too. It is then
  // merged into `message` through the wire format (the two types are wire-compatible), which
  // keeps explicit zeros over the defaults already there: one text parse, not two.
  std::unique_ptr<google::protobuf::Message> fresh = Presence().New(message->GetDescriptor());
  if (!parser.ParseFromString(text, fresh.get())) {
    Raise(ErrorCode::kBadConfig, StrCat(source, ":", errors.first()));
  }
  const std::string bad = FirstBadUtf8(*fresh, "");
  if (!bad.empty()) {
    Raise(ErrorCode::kBadConfig,
          StrCat(source, ": ", bad, " is not valid UTF-8 (every string of a config must be)"));
  }
  if (!message->MergeFromString(fresh->SerializePartialAsString())) {
    Raise(ErrorCode::kInternal, StrCat(source, ": config parser: the parsed message did not merge"));
  }
}

void CheckRegularFile(const std::string& path, const std::string& what) {
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
}

std::string ReadConfigFile(const std::string& path, const std::string& what) {
  CheckRegularFile(path, what);
  std::ifstream in(path);
  if (!in) {
    Raise(ErrorCode::kBadConfig, StrCat(path, ": cannot open ", what, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace nkisim
