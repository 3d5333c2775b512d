// The one error vocabulary of nkisim. Inside a rank, contract violations (a bad operand to an ISA
// instruction, a tile that does not fit, a malformed file) are thrown as nkisim::Error carrying a
// code; the CLI maps codes to distinct exit codes. Messages read "what: context" and name the
// field or operand, the value seen and the rule broken.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace nkisim {

enum class ErrorCode {
  kInvalidArgument = 1,  // shape, dtype or operand breaks a documented rule
  kNotSupported = 2,     // valid request the simulator does not model (yet)
  kOutOfResources = 3,   // SBUF / PSUM / queue capacity exhausted
  kBadConfig = 4,        // configuration or input file is malformed
  kCommError = 5,        // core-to-core or rank-to-rank communication failed
  kTimeout = 6,          // a wait passed its deadline
  kInternal = 7,         // a broken invariant of the simulator itself
};

const char* ErrorCodeName(ErrorCode code);

// Process exit code the CLI uses for an error of this code (10 + code, so 0/1/2 stay free for
// success, verification failure and usage errors).
int ExitCodeFor(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Concatenates anything streamable into one message string.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// `text` with every byte that does not belong to a well-formed UTF-8 sequence replaced by '?'.
// proto3 strings must be UTF-8: a rank's error message that is not cannot be parsed by the
// launcher, and a profile string that is not makes every serialisation of it log an error.
std::string ValidUtf8(const std::string& text);

// printf into a string (report lines and table cells); any length.
std::string StrPrintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] inline void Raise(ErrorCode code, const std::string& message) {
  throw Error(code, message);
}

}  // namespace nkisim
