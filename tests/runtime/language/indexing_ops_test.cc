// expand_dims, where and gather_flattened of nl (indexing_ops.h): shapes, values against plain
// loops (gather_flattened with NKI's documented example) and their errors.
#include "runtime/language/indexing_ops.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/error.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nl::testing {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

TEST_F(NlTest, ExpandDimsAppendsASizeOneDim) {
  const Tile x = Input({8, 6}, DType::kFloat32, 0, 1);
  const size_t mark = Mark();
  const Tile e = expand_dims(x, 2);
  EXPECT_TRUE(Since(mark).empty());
  EXPECT_EQ(e.shape(), (Shape{8, 6, 1}));
  EXPECT_EQ(e.ToFloats(), x.ToFloats());
  EXPECT_EQ(InvalidArgumentMessage([&] { expand_dims(x, 1); }),
            "expand_dims: axis 1 of data 'input' [8, 6] fp32 SBUF: only expanding after the last "
            "index (axis = 2) is supported");
}

TEST_F(NlTest, WhereSelectsElementWiseWithBroadcasting) {
  const Tile cond = FromValues({2, 3}, DType::kUInt8, {1, 0, 1, 0, 0, 1});
  const Tile x = FromValues({2, 3}, DType::kFloat32, {1, 2, 3, 4, 5, 6});
  const Tile y = FromValues({2, 1}, DType::kBFloat16, {-1, -2});
  const Tile w = where(cond, x, y);
  EXPECT_EQ(w.dtype(), DType::kFloat32);
  EXPECT_EQ(w.ToFloats(), (std::vector<float>{1, -1, 3, -2, -2, 6}));
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         where(FromValues({2, 2}, DType::kUInt8, {1, 0, 1, 0}), x, y);
                       }),
                       "where: condition 'input' [2, 2] uint8 SBUF and x and y"));
}

TEST_F(NlTest, GatherFlattenedFollowsNkisExample) {
  const Tile data = FromValues({2, 2, 2}, DType::kFloat32, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tile indices = FromValues({2, 2, 2}, DType::kUInt32, {0, 1, 1, 3, 3, 3, 1, 0});
  const Tile g = gather_flattened(data, indices);
  EXPECT_EQ(g.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(g.ToFloats(), (std::vector<float>{1, 2, 2, 4, 8, 8, 6, 5}));
  EXPECT_EQ(gather_flattened(data, indices, DType::kBFloat16).dtype(), DType::kBFloat16);
  const Tile out_of_range = FromValues({2, 1}, DType::kUInt32, {1, 4});
  EXPECT_EQ(InvalidArgumentMessage([&] { gather_flattened(data, out_of_range); }),
            "gather_flattened: operand 'indices' 'input' [2, 1] uint32 SBUF: partition 1 element "
            "0 holds index 4, outside data's flattened free size 4");
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         gather_flattened(data, FromValues({2, 1}, DType::kFloat32, {0, 1}));
                       }),
                       "must have an integer dtype"));
}

}  // namespace
}  // namespace nkisim::nl::testing
