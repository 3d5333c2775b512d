// Output paths (runtime/output_file.h): directories made ready before any work, creating only
// the last component, and the one class (kInvalidArgument, exit 11) of every unwritable output.
#include "runtime/output_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/error.h"
#include "tests/testing/error_helpers.h"

namespace nkisim {
namespace {

namespace fs = std::filesystem;
using ::nkisim::testing::ErrorMessageOf;
using ::testing::HasSubstr;

class OutputDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/nkisim_output_dir_" + std::to_string(::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

TEST_F(OutputDirTest, MakesOnlyTheLastComponent) {
  PrepareOutputDir(root_, "--out-dir");  // exists: fine
  PrepareOutputDir(root_ + "/new", "--out-dir");
  EXPECT_TRUE(fs::is_directory(root_ + "/new"));
  PrepareOutputDir(root_ + "/slash/", "--out-dir");
  EXPECT_TRUE(fs::is_directory(root_ + "/slash"));
  PrepareOutputDir(root_ + "/new", "--out-dir");  // twice (every rank of a job): fine
}

TEST_F(OutputDirTest, NeverCreatesParents) {
  const std::string deep = root_ + "/nonexistent/x/y";
  EXPECT_THAT(ErrorMessageOf(ErrorCode::kInvalidArgument,
                             [&] { PrepareOutputDir(deep, "kernel oproj: --out-dir"); }),
              HasSubstr("kernel oproj: --out-dir '" + deep + "': its parent " + root_ +
                        "/nonexistent/x is not an existing directory; only the last component"));
  EXPECT_FALSE(fs::exists(root_ + "/nonexistent"));  // nothing was created on the way
}

TEST_F(OutputDirTest, RefusesAFileAndAnEmptyName) {
  std::ofstream(root_ + "/f") << "x";
  EXPECT_THAT(ErrorMessageOf(ErrorCode::kInvalidArgument, [&] { PrepareOutputDir(root_ + "/f", "--out-dir"); }),
              HasSubstr("'" + root_ + "/f': exists and is not a directory"));
  EXPECT_THAT(ErrorMessageOf(ErrorCode::kInvalidArgument, [&] { PrepareOutputDir(root_ + "/f/sub", "--out-dir"); }),
              HasSubstr("its parent " + root_ + "/f is not an existing directory"));
  EXPECT_THAT(ErrorMessageOf(ErrorCode::kInvalidArgument, [] { PrepareOutputDir("", "--out-dir"); }),
              HasSubstr("--out-dir: empty"));
}

// An output file that cannot be written is the same class as an output directory.
TEST_F(OutputDirTest, UnwritableFileIsTheSameClass) {
  EXPECT_THAT(ErrorMessageOf(ErrorCode::kInvalidArgument,
                             [&] { CheckWritable(root_ + "/nodir/t.json", "--trace"); }),
              HasSubstr("--trace '" + root_ + "/nodir/t.json': cannot be written"));
}

}  // namespace
}  // namespace nkisim
