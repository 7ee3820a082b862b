// `moesim validate layers` (validate/layer_replay.h): the per-layer times of Korthikanti et al.'s
// Table 4 replayed on the committed dataset; what is measured in the trace is held to what the
// simulated step does (recomputation lengthens the backward alone, by the forward it re-runs or the
// core; the kinds add up to at least the span), not to the published numbers.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "validate/layer_replay.h"
#include "validate/step_data.h"

namespace moesim::validate {
namespace {

const std::filesystem::path kKorthikanti =
    std::filesystem::path(MOESIM_SOURCE_DIR) / "validate/data/korthikanti-2022-step-times";

const LayerComparison& row(const LayerDatasetReport& r, bool sp, Recompute rc) {
  for (const LayerComparison& c : r.rows)
    if (c.row.sequence_parallel == sp && c.row.recompute == rc) return c;
  throw std::runtime_error("no such row");
}

TEST(LayerReplay, MeasuresTheMiddleLayerOfTheStep) {
  const LayerDatasetReport r = replay_layer_times(read_step_dataset(kKorthikanti), NetworkModel::kAlphaBeta);
  ASSERT_EQ(r.rows.size(), 5u);
  for (const LayerComparison& c : r.rows) {
    ASSERT_TRUE(c.not_simulated.empty()) << c.not_simulated;
    EXPECT_EQ(c.layer, 24);
    EXPECT_EQ(c.layers, 48);
    EXPECT_GT(c.measured_backward, 0);
    for (const LayerPassTimes* p : {&c.forward, &c.backward}) {
      EXPECT_GT(p->span, 0);
      EXPECT_GT(p->gemm, 0);
      EXPECT_GT(p->core, 0);
      EXPECT_GT(p->memory, 0);
      EXPECT_GT(p->comm, 0);
      EXPECT_GE(p->busy(), p->span);  // chained tasks cover the span; side tasks overlap it
    }
  }
  const LayerComparison& none = row(r, false, Recompute::kNone);
  const LayerComparison& full = row(r, false, Recompute::kFull);
  const LayerComparison& selective = row(r, false, Recompute::kSelective);
  EXPECT_EQ(full.forward.span, none.forward.span);
  EXPECT_EQ(selective.forward.span, none.forward.span);
  EXPECT_GT(full.backward.span, selective.backward.span);
  EXPECT_GT(selective.backward.span, none.backward.span);
  // Full recomputation re-runs the forward's GEMMs inside the backward (their durations may differ
  // by interference with what runs beside them); selective re-runs no linear layer.
  EXPECT_GT(full.backward.gemm, none.backward.gemm + none.forward.gemm * 9 / 10);
  EXPECT_LT(full.backward.gemm, none.backward.gemm + none.forward.gemm * 11 / 10);
  EXPECT_EQ(selective.backward.gemm, none.backward.gemm);
  EXPECT_GT(selective.backward.core, none.backward.core);
  std::ostringstream out;
  print_layer_report(r, out);
  EXPECT_NE(out.str().find("layer_times_22b.csv"), std::string::npos);
}

TEST(LayerReplay, ADatasetWithoutLayerTimesHasNoRows) {
  StepDataset d = read_step_dataset(kKorthikanti);
  d.layer_times.clear();
  EXPECT_TRUE(replay_layer_times(d, NetworkModel::kAlphaBeta).rows.empty());
}

}  // namespace
}  // namespace moesim::validate
