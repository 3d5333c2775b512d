// HbmWriteOrder (runtime/hbm_write_order.h): the two programs' HBM writes land in simulated-time
// order whatever order the host runs them in. Each "instruction" here writes its values into a
// view and marks the buffer written at a chosen simulated end, as an issued instruction does.
#include "runtime/hbm_write_order.h"

#include <gtest/gtest.h>

#include <vector>

#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim {
namespace {

// Writes `value` into every element of dst and marks dst's buffer written at end_ns, as one
// instruction; `order.Write` wraps it for program prg.
void WriteAt(HbmWriteOrder& order, const TensorView& dst, int prg, float value, double end_ns) {
  order.Write(dst, prg, [&] {
    dst.FromFloats(std::vector<float>(static_cast<size_t>(dst.numel()), value));
    dst.buffer().MarkWritten(end_ns);
  });
}

std::vector<float> Values(const TensorView& t) { return t.ToFloats(); }

TEST(HbmWriteOrderTest, LaterLandingWinsWhateverTheHostOrder) {
  // Host order: program 1 (lands at 500) first, program 0 (lands at 900) second -> 0's value;
  // then the other way round -> 1's value. Host order alone would give the second write both times.
  for (bool zero_lands_last : {true, false}) {
    HbmWriteOrder order;
    TensorView out = TensorView::Create({4, 8}, DType::kFloat32, "out");
    const double t0 = zero_lands_last ? 900 : 500, t1 = zero_lands_last ? 500 : 900;
    WriteAt(order, out, 1, 1.0f, t1);
    WriteAt(order, out, 0, 7.0f, t0);
    const float want = zero_lands_last ? 7.0f : 1.0f;
    for (float v : Values(out)) EXPECT_EQ(v, want) << "zero_lands_last " << zero_lands_last;
    // Reversed host order: the same result.
    HbmWriteOrder order2;
    TensorView out2 = TensorView::Create({4, 8}, DType::kFloat32, "out2");
    WriteAt(order2, out2, 0, 7.0f, t0);
    WriteAt(order2, out2, 1, 1.0f, t1);
    for (float v : Values(out2)) EXPECT_EQ(v, want) << "reversed, zero_lands_last " << zero_lands_last;
  }
}

TEST(HbmWriteOrderTest, EqualLandingTimesGoToProgramOne) {
  for (bool one_first : {true, false}) {
    HbmWriteOrder order;
    TensorView out = TensorView::Create({16}, DType::kBFloat16, "out");
    if (one_first) {
      WriteAt(order, out, 1, 2.0f, 300);
      WriteAt(order, out, 0, 3.0f, 300);
    } else {
      WriteAt(order, out, 0, 3.0f, 300);
      WriteAt(order, out, 1, 2.0f, 300);
    }
    for (float v : Values(out)) EXPECT_EQ(v, 2.0f) << "one_first " << one_first;
    const auto landing = order.LandingOf(out, 0);
    EXPECT_EQ(landing.prg, 1);
    EXPECT_EQ(landing.ns, 300);
  }
}

TEST(HbmWriteOrderTest, OnlyTheOverlappingElementsAreDecided) {
  // Both programs zero the whole [2, 8] tensor early, then each stores its own row late; the
  // host runs program 1's zeroing last (as a host-thread order could), after program 0's store.
  HbmWriteOrder order;
  TensorView out = TensorView::Create({2, 8}, DType::kFloat32, "out");
  WriteAt(order, out, 0, 0.0f, 100);
  WriteAt(order, out.select(0, 0), 0, 5.0f, 400);
  WriteAt(order, out, 1, 0.0f, 120);
  WriteAt(order, out.select(0, 1), 1, 6.0f, 420);
  const std::vector<float> got = Values(out);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], 5.0f) << i;
  for (int i = 8; i < 16; ++i) EXPECT_EQ(got[i], 6.0f) << i;
  // A strided view: program 0 writes columns 0, 2, 4, 6 of both rows later still.
  WriteAt(order, out.slice(1, 0, 8, 2), 0, 9.0f, 1000);
  const std::vector<float> got2 = Values(out);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got2[i], i % 2 == 0 ? 9.0f : (i < 8 ? 5.0f : 6.0f)) << i;
}

TEST(HbmWriteOrderTest, AScatterOwnsOnlyTheElementsItWrites) {
  // Program 1 writes rows 0 and 2 of [4, 2]; program 0 writes rows 1 and 3, both at 300 (a tie
  // program 1 would win). Each scatter names its offsets, so neither undoes the other's rows.
  HbmWriteOrder order;
  TensorView out = TensorView::Create({4, 2}, DType::kFloat32, "out");
  auto scatter = [&](int prg, std::vector<int64_t> offsets, float value) {
    order.Write(out, offsets, prg, [&] {
      for (int64_t o : offsets) out.set({o / 2, o % 2}, value);
      out.buffer().MarkWritten(300);
    });
  };
  scatter(1, {0, 1, 4, 5}, 1.0f);
  scatter(0, {2, 3, 6, 7}, 2.0f);
  EXPECT_EQ(Values(out), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2}));
  // A plain write of the whole tensor by program 0 at 300 loses every element to the tie rule
  // where program 1 holds it, and keeps its own elsewhere.
  WriteAt(order, out, 0, 9.0f, 300);
  EXPECT_EQ(Values(out), (std::vector<float>{1, 1, 9, 9, 1, 1, 9, 9}));
}

TEST(HbmWriteOrderTest, AProgramsOwnWritesLandInProgramOrder) {
  // Program 0 writes 4 landing at 800, then 5 landing at 200 (an earlier end on another queue):
  // its later write's value wins and lands with the earlier one (800), so program 1's write at
  // 500 stays under it.
  HbmWriteOrder order;
  TensorView out = TensorView::Create({8}, DType::kFloat32, "out");
  WriteAt(order, out, 0, 4.0f, 800);
  WriteAt(order, out, 0, 5.0f, 200);
  EXPECT_EQ(order.LandingOf(out, 0).ns, 800);
  WriteAt(order, out, 1, 6.0f, 500);
  for (float v : Values(out)) EXPECT_EQ(v, 5.0f);
  // Program 1 landing after 800 wins.
  WriteAt(order, out, 1, 7.0f, 801);
  for (float v : Values(out)) EXPECT_EQ(v, 7.0f);
}

TEST(HbmWriteOrderTest, ByteGranularityAcrossDtypes) {
  // Program 1 writes the whole fp32 buffer late; program 0's bf16 view of the same bytes (the
  // low halves and high halves alike) lands earlier and is undone byte for byte.
  HbmWriteOrder order;
  TensorView out = TensorView::Create({4}, DType::kFloat32, "out");
  WriteAt(order, out, 1, 1.5f, 700);
  WriteAt(order, out.reshape({4}).bitcast(DType::kBFloat16), 0, 3.0f, 600);
  for (float v : Values(out)) EXPECT_EQ(v, 1.5f);
}

TEST(HbmWriteOrderTest, AFailedWriteLeavesStampsAndAnInstructionWithoutHbmWriteIsNotStamped) {
  HbmWriteOrder order;
  TensorView out = TensorView::Create({4}, DType::kFloat32, "out");
  EXPECT_THROW(order.Write(out, 0, [] { Raise(ErrorCode::kInvalidArgument, "bad operand"); }),
               Error);
  EXPECT_EQ(order.LandingOf(out, 0).prg, -1);
  order.Write(out, 1, [] {});  // marks nothing
  EXPECT_EQ(order.LandingOf(out, 0).prg, -1);
  WriteAt(order, out, 0, 2.0f, 50);
  EXPECT_EQ(order.LandingOf(out, 4).prg, 0);
  EXPECT_THROW(order.LandingOf(out, 16), Error);
}

TEST(HbmWriteOrderTest, TimingOnlyIsLeftAlone) {
  SetSimMode(SimMode::kTimingOnly);
  HbmWriteOrder order;
  TensorView out = TensorView::Create({4}, DType::kFloat32, "out");
  int calls = 0;
  order.Write(out, 0, [&] {
    ++calls;
    out.buffer().MarkWritten(10);
  });
  SetSimMode(SimMode::kFunctional);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(order.LandingOf(out, 0).prg, -1);
}

}  // namespace
}  // namespace nkisim
