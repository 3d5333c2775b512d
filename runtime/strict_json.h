// The shape check of a JSON config against its message type, before protobuf converts it.
// protobuf's JSON parser (3.21) is lenient where the documented proto3 JSON mapping is not: it
// takes an object where a list belongs, flattens arrays nested in a repeated field and lets the
// last of two equal keys win. CheckJsonShape refuses all of these, with the field path.
#pragma once

#include <string>

#include <google/protobuf/descriptor.h>

namespace nkisim {

// Throws Error(kBadConfig) "source: JSON: <path>: <what is wrong>" unless `text` is one JSON
// object whose every key is a field of `type` (proto name or lowerCamel JSON name, each at most
// once, at most one member of a oneof) and whose every value has the JSON type the mapping gives
// that field: an object for a message or a map, an array of non-arrays for a repeated field, a
// number or numeric string for a number, a string or integer for an enum, true/false for a bool,
// a string for a string or bytes (null is the field's default, as in the mapping). The parse is
// one pass that stops at the first problem, so its time and memory are bounded by the text.
void CheckJsonShape(const std::string& text, const std::string& source,
                    const google::protobuf::Descriptor* type);

}  // namespace nkisim
