// `moesim validate calibration` (validate/calibration_replay.h): a calibration's GEMM times next to
// the datasheet shape model. A calibration built from the model's own times replays with no error;
// one that took twice as long, at -50%; each point keeps its table, dtype and shape; a node of
// another GPU, an already calibrated node and a file without GEMM tables are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "sim/core/error.h"
#include "sim/cost/compute_cost.h"
#include "sim/spec/loader.h"
#include "validate/calibration_replay.h"

namespace moesim::validate {
namespace {

const std::string kRoot = MOESIM_SOURCE_DIR;

ClusterSpec h200() { return load_hardware_spec(kRoot + "/hardware/nodes/hgx-h200.yaml"); }

// A calibration of h200's GPU: bf16 single GEMMs 64 x {128, 4096} x 1024 at `scale` times the
// model's time, and tf32 tn batched GEMMs of 8 x 32 x 256 x 512 at the model's time.
CalibrationSpec scaled_calibration(const ClusterSpec& node, double scale) {
  const ComputeCostModel cost(node);
  CalibrationSpec c;
  c.file = "scaled.yaml";
  c.gpu = node.node.gpu.name;
  c.device = "a modelled H200";
  GemmTimeTable single{{64}, {128, 4096}, {1024}, {}};
  for (std::int64_t n : single.n)
    single.time_ns.push_back(scale * static_cast<double>(cost.gemm_duration(GemmWork{1, 64, n, 1024, DType::kBf16, 2})));
  c.gemm[DType::kBf16] = single;
  GemmWork tn{8, 32, 256, 512, DType::kTf32, 4};
  tn.layout = GemmLayout::kTN;
  c.batched_gemm[GemmLayout::kTN][DType::kTf32] =
      BatchedGemmTable{{8}, {32}, {256}, {512}, {static_cast<double>(cost.gemm_duration(tn))}};
  return c;
}

TEST(CalibrationReplay, TheModelsOwnTimesReplayExactly) {
  const CalibrationReplay r = replay_calibration_gemms(scaled_calibration(h200(), 1.0), h200());
  ASSERT_EQ(r.points.size(), 3u);
  for (const CalibrationGemmPoint& p : r.points) EXPECT_NEAR(p.error(), 0.0, 1e-12) << p.table;
  EXPECT_EQ(r.points[0].table, "gemm");
  EXPECT_EQ(r.points[1].n, 4096);
  EXPECT_EQ(r.points[2].table, "batched_gemm_tn");
  EXPECT_EQ(r.points[2].dtype, DType::kTf32);
  EXPECT_EQ(r.points[2].batch, 8);
  EXPECT_EQ(r.device, "a modelled H200");
}

TEST(CalibrationReplay, AGpuTwiceAsSlowIsMinusFiftyPercentAndPrinted) {
  const CalibrationReplay r = replay_calibration_gemms(scaled_calibration(h200(), 2.0), h200());
  EXPECT_NEAR(r.points[0].error(), -0.5, 1e-12);
  EXPECT_NEAR(r.points[1].error(), -0.5, 1e-12);
  EXPECT_NEAR(r.points[2].error(), 0.0, 1e-12);
  std::ostringstream text, csv;
  print_calibration_replay(r, text);
  write_calibration_replay_csv(r, csv);
  EXPECT_NE(text.str().find("gemm             bf16       2     50.0%    -50.0%    -50.0%"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("batched_gemm_tn  tf32       1"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("all 3 points: median |error| 50.0%"), std::string::npos) << text.str();
  EXPECT_NE(csv.str().find("batched_gemm_tn,tf32,8,32,256,512,"), std::string::npos) << csv.str();
  const std::string rows = csv.str();
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 4);
}

TEST(CalibrationReplay, RefusesAnotherGpuACalibratedNodeAndNoTables) {
  const CalibrationSpec c = scaled_calibration(h200(), 1.0);
  const ClusterSpec h100 = load_hardware_spec(kRoot + "/hardware/nodes/hgx-h100.yaml");
  EXPECT_THROW(replay_calibration_gemms(c, h100), InputError);
  ClusterSpec calibrated = h200();
  apply_calibration(calibrated, c);
  EXPECT_THROW(replay_calibration_gemms(c, calibrated), InputError);
  CalibrationSpec empty = c;
  empty.gemm.clear();
  empty.batched_gemm.clear();
  try {
    replay_calibration_gemms(empty, h200());
    FAIL() << "no tables accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no GEMM table to replay"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moesim::validate
