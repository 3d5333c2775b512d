// `nkisim --version` as a user runs it: it names the host BLAS, and the process runs that BLAS on
// one thread unless the user chose otherwise (launcher/main.cc starts the process again with
// OPENBLAS_NUM_THREADS=1, so the library starts no thread pool whose threads spin for work).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

nkisim::testing::CommandResult Version(const std::string& env) {
  return nkisim::testing::RunCommand(env + " " + std::string(NKISIM_BINARY) + " --version", 10);
}

TEST(VersionCliTest, OneBlasThreadUnlessTheUserSetsIt) {
  // Without the variable (a fresh shell), one thread; OpenBLAS's own default is one per core.
  const auto unset = Version("env -u OPENBLAS_NUM_THREADS");
  EXPECT_EQ(unset.exit_code, 0) << unset.output;
  EXPECT_THAT(unset.output, StartsWith("nkisim 0.1.0 (host BLAS: OpenBLAS "));
  EXPECT_THAT(unset.output, HasSubstr(", 1 thread)"));
  // The user's choice stands.
  const auto two = Version("env OPENBLAS_NUM_THREADS=2");
  EXPECT_EQ(two.exit_code, 0) << two.output;
  EXPECT_THAT(two.output, HasSubstr(", 2 threads)"));
}

TEST(VersionCliTest, ACpuWithAvx2GetsItsOwnKernelsNotTheGenericOnes) {
  if (!__builtin_cpu_supports("avx2")) {
    // Nothing to choose on such a CPU: the library's own detection stands, which the first test
    // covers; assert that here too rather than skip.
    EXPECT_EQ(Version("env -u OPENBLAS_CORETYPE").exit_code, 0);
    return;
  }
  const auto r = Version("env -u OPENBLAS_CORETYPE");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::AnyOf(HasSubstr("OpenBLAS SkylakeX,"), HasSubstr("OpenBLAS Haswell,")));
  // A user's core type is kept as given.
  EXPECT_THAT(Version("env OPENBLAS_CORETYPE=Haswell").output, HasSubstr("OpenBLAS Haswell,"));
}

}  // namespace
