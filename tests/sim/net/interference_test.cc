#include "sim/engine/interference.h"

#include <gtest/gtest.h>

namespace moesim {
namespace {

// A table whose every cell is distinct, so each lookup is identified: row r (comm 0, comp 1,
// memcpy 2), column c (comm 0, comp 1, memcpy 2, all 3) holds 0.5 + 0.1 r + 0.01 (c + 1).
InterferenceTable distinct_table() {
  InterferenceTable t;
  for (int r = 0; r < kNumInterferenceClasses; ++r)
    for (int c = 0; c < 4; ++c) t.factors[r][c] = 0.5 + 0.1 * r + 0.01 * (c + 1);
  return t;
}

double cell(const InterferenceTable& t, InterferenceClass r, int c) {
  return t.factors[static_cast<int>(r)][c];
}

// Factor of `self` on rank 0 while `self` and `others` are busy there.
double factor_with(const InterferenceTable& t, StreamClass self, std::initializer_list<StreamClass> others) {
  Concurrency busy(1);
  busy.add(0, self, 1);
  for (StreamClass s : others) busy.add(0, s, 1);
  return interference_factor(t, self, 0, busy);
}

using IC = InterferenceClass;
using SC = StreamClass;

TEST(Interference, StreamClassesMapToInterferenceClasses) {
  EXPECT_EQ(interference_class(SC::kCompute), IC::kComputation);
  EXPECT_EQ(interference_class(SC::kCommDispatch), IC::kCommunication);
  EXPECT_EQ(interference_class(SC::kCommCombine), IC::kCommunication);
  EXPECT_EQ(interference_class(SC::kCopyD2H), IC::kMemcpy);
  EXPECT_EQ(interference_class(SC::kCopyH2D), IC::kMemcpy);
}

TEST(Interference, AloneRunsAtFullSpeed) {
  const InterferenceTable t = distinct_table();
  for (int s = 0; s < kNumStreamClasses; ++s)
    EXPECT_EQ(factor_with(t, static_cast<SC>(s), {}), 1.0);
}

TEST(Interference, CommunicationRow) {
  const InterferenceTable t = distinct_table();
  EXPECT_EQ(factor_with(t, SC::kCommDispatch, {SC::kCommCombine}), cell(t, IC::kCommunication, 0));
  EXPECT_EQ(factor_with(t, SC::kCommDispatch, {SC::kCompute}), cell(t, IC::kCommunication, 1));
  EXPECT_EQ(factor_with(t, SC::kCommCombine, {SC::kCopyH2D}), cell(t, IC::kCommunication, 2));
  EXPECT_EQ(factor_with(t, SC::kCommDispatch, {SC::kCompute, SC::kCopyD2H}),
            cell(t, IC::kCommunication, 3));
  // The same class on another stream does not make the column "all": one foreign class only.
  EXPECT_EQ(factor_with(t, SC::kCommDispatch, {SC::kCommCombine, SC::kCompute}),
            cell(t, IC::kCommunication, 1));
}

TEST(Interference, ComputationRow) {
  const InterferenceTable t = distinct_table();
  EXPECT_EQ(factor_with(t, SC::kCompute, {SC::kCommCombine}), cell(t, IC::kComputation, 0));
  EXPECT_EQ(factor_with(t, SC::kCompute, {SC::kCopyD2H, SC::kCopyH2D}), cell(t, IC::kComputation, 2));
  EXPECT_EQ(factor_with(t, SC::kCompute, {SC::kCommDispatch, SC::kCommCombine, SC::kCopyH2D}),
            cell(t, IC::kComputation, 3));
}

TEST(Interference, MemcpyRow) {
  const InterferenceTable t = distinct_table();
  EXPECT_EQ(factor_with(t, SC::kCopyD2H, {SC::kCommDispatch}), cell(t, IC::kMemcpy, 0));
  EXPECT_EQ(factor_with(t, SC::kCopyD2H, {SC::kCompute}), cell(t, IC::kMemcpy, 1));
  EXPECT_EQ(factor_with(t, SC::kCopyH2D, {SC::kCopyD2H}), cell(t, IC::kMemcpy, 2));
  EXPECT_EQ(factor_with(t, SC::kCopyH2D, {SC::kCompute, SC::kCommCombine}), cell(t, IC::kMemcpy, 3));
}

TEST(Interference, DefaultTableIsMPipeMoEFig3) {
  const InterferenceTable t;
  EXPECT_EQ(factor_with(t, SC::kCompute, {SC::kCommDispatch}), 0.96);
  EXPECT_EQ(factor_with(t, SC::kCommDispatch, {SC::kCompute}), 0.72);
  EXPECT_EQ(factor_with(t, SC::kCommDispatch, {SC::kCompute, SC::kCopyD2H}), 0.71);
  EXPECT_EQ(factor_with(t, SC::kCopyD2H, {SC::kCompute}), 0.98);
  EXPECT_EQ(factor_with(t, SC::kCompute, {SC::kCopyH2D}), 1.0);
}

TEST(Interference, SpanningTaskTakesTheMinimumOverItsRanks) {
  const InterferenceTable t = distinct_table();
  Concurrency busy(3);
  for (int r = 0; r < 3; ++r) busy.add(r, SC::kCommDispatch, 1);
  busy.add(1, SC::kCompute, 1);                               // 0.61 on rank 1
  busy.add(2, SC::kCopyD2H, 1);                               // 0.62 on rank 2
  const int all[] = {0, 1, 2};
  EXPECT_EQ(interference_factor(t, SC::kCommDispatch, all, busy), cell(t, IC::kCommunication, 1));
  const int some[] = {0, 2};
  EXPECT_EQ(interference_factor(t, SC::kCommDispatch, some, busy), cell(t, IC::kCommunication, 2));
}

// Factor of a GEMM writing `outputs_per_sm` on the compute stream of rank 0 while `others` are busy.
double gemm_factor_with(const InterferenceTable& t, double outputs_per_sm, std::initializer_list<StreamClass> others) {
  Concurrency busy(1);
  busy.add(0, SC::kCompute, 1);
  for (StreamClass s : others) busy.add(0, s, 1);
  return gemm_interference_factor(t, SC::kCompute, 0, busy, outputs_per_sm);
}

InterferenceTable table_with_gemm_sizes() {
  InterferenceTable t = distinct_table();
  t.gemm_with_communication = {{1000, 0.5}, {4000, 0.7}, {16000, 0.9}};
  return t;
}

TEST(Interference, GemmSizeTableInterpolatesInLogSizeAndIsFlatBeyondItsEnds) {
  const auto& points = table_with_gemm_sizes().gemm_with_communication;
  EXPECT_DOUBLE_EQ(gemm_with_communication(points, 1000), 0.5);
  EXPECT_DOUBLE_EQ(gemm_with_communication(points, 4000), 0.7);
  EXPECT_DOUBLE_EQ(gemm_with_communication(points, 2000), 0.6);  // halfway between 1000 and 4000 in log
  EXPECT_DOUBLE_EQ(gemm_with_communication(points, 8000), 0.8);
  EXPECT_DOUBLE_EQ(gemm_with_communication(points, 10), 0.5);
  EXPECT_DOUBLE_EQ(gemm_with_communication(points, 1e9), 0.9);
}

TEST(Interference, GemmBesideCommunicationReadsTheSizeTable) {
  const InterferenceTable t = table_with_gemm_sizes();
  EXPECT_DOUBLE_EQ(gemm_factor_with(t, 2000, {SC::kCommDispatch}), 0.6);
  EXPECT_DOUBLE_EQ(gemm_factor_with(t, 16000, {SC::kCommCombine}), 0.9);
  // With every other class busy: the size's value scaled by with_all / with_communication.
  EXPECT_DOUBLE_EQ(gemm_factor_with(t, 2000, {SC::kCommDispatch, SC::kCopyD2H}),
                   0.6 * cell(t, IC::kComputation, 3) / cell(t, IC::kComputation, 0));
}

TEST(Interference, GemmSizeTableLeavesOtherColumnsAndRowsAlone) {
  const InterferenceTable t = table_with_gemm_sizes();
  EXPECT_EQ(gemm_factor_with(t, 2000, {}), 1.0);
  EXPECT_EQ(gemm_factor_with(t, 2000, {SC::kCopyH2D}), cell(t, IC::kComputation, 2));
  // A communication task is not a GEMM: its row's cell, whatever size it is given.
  Concurrency busy(1);
  busy.add(0, SC::kCommDispatch, 1);
  busy.add(0, SC::kCompute, 1);
  EXPECT_EQ(gemm_interference_factor(t, SC::kCommDispatch, 0, busy, 2000), cell(t, IC::kCommunication, 1));
  // A with_all cell above with_communication does not speed the GEMM up.
  InterferenceTable odd = table_with_gemm_sizes();
  odd.factors[1][3] = 1.0;
  odd.factors[1][0] = 0.5;
  EXPECT_EQ(gemm_factor_with(odd, 16000, {SC::kCommDispatch, SC::kCopyD2H}), 1.0);
  // Without a table a GEMM takes the cell.
  EXPECT_EQ(gemm_factor_with(distinct_table(), 2000, {SC::kCommDispatch}), cell(t, IC::kComputation, 0));
}

}  // namespace
}  // namespace moesim
