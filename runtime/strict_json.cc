#include "runtime/strict_json.h"

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace nkisim {
namespace {

namespace pb = google::protobuf;
using Json = nlohmann::json;

// Deeper than any config schema nests; only reachable through a well-known type's free content.
constexpr size_t kMaxDepth = 64;

enum class Kind { kNull, kBool, kNumber, kString, kObject, kArray };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kNull: return "null";
    case Kind::kBool: return "a boolean";
    case Kind::kNumber: return "a number";
    case Kind::kString: return "a string";
    case Kind::kObject: return "an object";
    case Kind::kArray: return "an array";
  }
  return "?";
}

// What the mapping takes for one (non-repeated) value of field f, and whether `k` is that.
bool Accepts(const pb::FieldDescriptor* f, Kind k, std::string* expected) {
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      *expected = StrCat("an object (message ", f->message_type()->name(), ")");
      return k == Kind::kObject;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      *expected = "true or false";
      return k == Kind::kBool;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      *expected = "a string";
      return k == Kind::kString;
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      *expected = StrCat("a name of enum ", f->enum_type()->name(), " (a string) or its number");
      return k == Kind::kString || k == Kind::kNumber;
    default:
      *expected = "a number (or a string holding one)";
      return k == Kind::kNumber || k == Kind::kString;
  }
}

bool IsWellKnown(const pb::Descriptor* d) { return d->file()->package() == "google.protobuf"; }

// One open object or array.
struct Frame {
  enum Type { kMessage, kRepeated, kMap, kFree };
  Frame(Type t, std::string p) : type(t), path(std::move(p)) {}
  Type type;
  std::string path;
  const pb::Descriptor* message = nullptr;  // kMessage
  const pb::FieldDescriptor* field = nullptr;  // kRepeated, kMap
  size_t index = 0;                            // kRepeated: the next element
  std::set<int> seen;                          // kMessage: field numbers given
  std::set<std::string> keys;                  // kMap: keys given
  const pb::FieldDescriptor* pending = nullptr;  // kMessage: the field whose value comes next
  std::string pending_path;                      // kMessage, kMap: the path of that value
};

class ShapeChecker : public nlohmann::json_sax<Json> {
 public:
  explicit ShapeChecker(const pb::Descriptor* root) : root_(root) {}
  const std::string& error() const { return error_; }

  bool null() override { return Value(Kind::kNull); }
  bool boolean(bool) override { return Value(Kind::kBool); }
  bool number_integer(number_integer_t) override { return Value(Kind::kNumber); }
  bool number_unsigned(number_unsigned_t) override { return Value(Kind::kNumber); }
  bool number_float(number_float_t, const string_t&) override { return Value(Kind::kNumber); }
  bool string(string_t&) override { return Value(Kind::kString); }
  bool binary(binary_t&) override { return Value(Kind::kString); }
  bool start_object(std::size_t) override { return Value(Kind::kObject); }
  bool start_array(std::size_t) override { return Value(Kind::kArray); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& key) override;
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    return Fail("", bracket == std::string::npos ? what : what.substr(bracket + 2));
  }

 private:
  bool Fail(const std::string& path, const std::string& what) {
    if (error_.empty()) error_ = path.empty() ? what : StrCat(path, ": ", what);
    return false;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }
  bool Open(Frame frame) {
    if (stack_.size() >= kMaxDepth) {
      return Fail(frame.path, StrCat("nested deeper than ", kMaxDepth, " levels"));
    }
    stack_.push_back(std::move(frame));
    return true;
  }
  bool Value(Kind k);
  bool SingleValue(const pb::FieldDescriptor* f, const std::string& path, Kind k, bool element);
  bool MessageKey(Frame& top, const std::string& key);

  const pb::Descriptor* root_;
  std::vector<Frame> stack_;
  bool started_ = false;
  std::string error_;
};

bool ShapeChecker::MessageKey(Frame& top, const std::string& key) {
  const pb::FieldDescriptor* f = top.message->FindFieldByName(key);
  for (int i = 0; f == nullptr && i < top.message->field_count(); ++i) {
    if (top.message->field(i)->json_name() == key) f = top.message->field(i);
  }
  if (f == nullptr) {
    return Fail(top.path, StrCat("unknown field \"", key, "\" (message ", top.message->name(), ")"));
  }
  const std::string path = top.path.empty() ? f->name() : StrCat(top.path, ".", f->name());
  if (!top.seen.insert(f->number()).second) {
    return Fail(path, "given twice (a key may appear once per object, by either of its names)");
  }
  if (const pb::OneofDescriptor* oneof = f->real_containing_oneof()) {
    for (int i = 0; i < oneof->field_count(); ++i) {
      const pb::FieldDescriptor* other = oneof->field(i);
      if (other != f && top.seen.count(other->number())) {
        return Fail(path, StrCat("set together with ", other->name(), "; at most one field of ",
                                 oneof->name(), " may be set"));
      }
    }
  }
  top.pending = f;
  top.pending_path = path;
  return true;
}

bool ShapeChecker::key(string_t& key) {
  Frame& top = stack_.back();
  if (top.type == Frame::kMessage) return MessageKey(top, key);
  if (top.type == Frame::kMap) {
    top.pending_path = StrCat(top.path, "[\"", key, "\"]");
    if (!top.keys.insert(key).second) return Fail(top.pending_path, "map key given twice");
  }
  return true;
}

bool ShapeChecker::SingleValue(const pb::FieldDescriptor* f, const std::string& path, Kind k,
                               bool element) {
  if (k == Kind::kNull) {
    return element ? Fail(path, "null is not allowed as an element of a list or map") : true;
  }
  if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && IsWellKnown(f->message_type())) {
    // A well-known type has a JSON form of its own; protobuf checks it.
    return k == Kind::kObject || k == Kind::kArray ? Open(Frame{Frame::kFree, path}) : true;
  }
  std::string expected;
  if (!Accepts(f, k, &expected)) {
    return Fail(path, StrCat("expected ", expected, ", got ", KindName(k),
                             element && k == Kind::kArray ? " (lists do not nest)" : ""));
  }
  if (k != Kind::kObject) return true;
  Frame frame{Frame::kMessage, path};
  frame.message = f->message_type();
  return Open(std::move(frame));
}

bool ShapeChecker::Value(Kind k) {
  if (stack_.empty()) {
    if (started_ || k != Kind::kObject) {
      return Fail("", StrCat("a config is one JSON object, not ", KindName(k)));
    }
    started_ = true;
    Frame frame{Frame::kMessage, ""};
    frame.message = root_;
    return Open(std::move(frame));
  }
  Frame& top = stack_.back();
  switch (top.type) {
    case Frame::kFree:
      return k == Kind::kObject || k == Kind::kArray ? Open(Frame{Frame::kFree, top.path}) : true;
    case Frame::kRepeated: {
      const std::string path = StrCat(top.path, "[", top.index++, "]");
      return SingleValue(top.field, path, k, true);
    }
    case Frame::kMap:
      return SingleValue(top.field->message_type()->map_value(), top.pending_path, k, true);
    case Frame::kMessage:
      break;
  }
  const pb::FieldDescriptor* f = top.pending;
  const std::string path = top.pending_path;
  top.pending = nullptr;
  if (!f->is_repeated()) return SingleValue(f, path, k, false);
  if (k == Kind::kNull) return true;
  const Kind want = f->is_map() ? Kind::kObject : Kind::kArray;
  if (k != want) {
    return Fail(path, StrCat("expected ", f->is_map() ? "an object (a map)" : "a list (an array)",
                             ", got ", KindName(k)));
  }
  Frame frame{f->is_map() ? Frame::kMap : Frame::kRepeated, path};
  frame.field = f;
  return Open(std::move(frame));
}

}  // namespace

void CheckJsonShape(const std::string& text, const std::string& source,
                    const pb::Descriptor* type) {
  ShapeChecker checker(type);
  if (!Json::sax_parse(text, &checker) || !checker.error().empty()) {
    Raise(ErrorCode::kBadConfig, StrCat(source, ": JSON: ", checker.error()));
  }
}

}  // namespace nkisim
