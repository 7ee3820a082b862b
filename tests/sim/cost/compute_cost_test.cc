#include "sim/cost/compute_cost.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace moesim {
namespace {

// HBM 1e12 B/s at 0.5 efficiency = 500 B/ns; launch 1000 ns; fp32 1e13, bf16 1e14 FLOP/s;
// GEMMs: 4 SMs, 128 x 128 tiles, bf16 efficiency 0.5 (one SM: 1e14 x 0.5 / 4 = 12500 FLOP/ns),
// 100 ns per tile.
// PCIe d2h 2.5e10 x 0.8 = 2e10 B/s, 2000 ns latency; h2d 2e10 x 1.0, 1000 ns latency.
ClusterSpec test_cluster() {
  ClusterSpec c;
  c.name = "test";
  c.node.name = "test-node";
  c.node.gpus_per_node = 8;
  c.node.gpu.name = "TestGPU";
  c.node.gpu.peak_flops = {{DType::kFp32, 1e13}, {DType::kBf16, 1e14}};
  c.node.gpu.hbm_bandwidth = 1e12;
  c.node.gpu.hbm_efficiency = 0.5;
  c.node.gpu.kernel_launch_ns = 1000;
  c.node.gpu.sm_count = 4;
  c.node.gpu.gemm_efficiency = {{DType::kBf16, 0.5}};
  c.node.gpu.gemm_tile_overhead_ns = 100;
  c.node.pcie_d2h = {2.5e10, 0.8, 2000};
  c.node.pcie_h2d = {2e10, 1.0, 1000};
  return c;
}

// The same with HBM 1e13 x 0.5 = 5000 B/ns, so that the GEMMs below are compute-bound.
ClusterSpec fast_hbm_cluster() {
  ClusterSpec c = test_cluster();
  c.node.gpu.hbm_bandwidth = 1e13;
  return c;
}

Task task_with(Work w) {
  Task t;
  t.id = "t";
  t.work = w;
  return t;
}

// One 128 x 128 tile over k = 1000: 2 x 128 x 128 x 1000 / 12500 = 2621.44 ns, + 100 per tile.
constexpr double kTileNs = 2721.44;

TEST(ComputeCost, OneWaveOfTiles) {
  const ClusterSpec c = fast_hbm_cluster();
  const ComputeCostModel m(c);
  // 512 x 128: 4 tiles on 4 SMs, one wave; memory (512k + 128k + 64k) x 2 B / 5000 = 282 ns.
  const GemmWork w{1, 512, 128, 1000, DType::kBf16, 2};
  const GemmWaves waves = m.gemm_waves(w);
  EXPECT_EQ(waves.tiles, 4);
  EXPECT_EQ(waves.waves, 1);
  EXPECT_DOUBLE_EQ(waves.tile_ns, kTileNs);
  EXPECT_EQ(m.gemm_duration(w), 3721);  // 1000 + 2721.44
  EXPECT_EQ(m.isolated_duration(task_with(w)), 3721);
}

TEST(ComputeCost, OneTileMoreThanTheSmsTakesTwoWaves) {
  const ClusterSpec c = fast_hbm_cluster();
  const ComputeCostModel m(c);
  // 640 x 128: 5 tiles on 4 SMs -> 2 waves: 1000 + 2 x 2721.44 = 6442.88.
  const GemmWork five{1, 640, 128, 1000, DType::kBf16, 2};
  EXPECT_EQ(m.gemm_waves(five).waves, 2);
  EXPECT_EQ(m.gemm_duration(five), 6443);
  // 513 rows pad to the same 5 tiles: a ragged edge costs a whole tile.
  EXPECT_EQ(m.gemm_duration(GemmWork{1, 513, 128, 1000, DType::kBf16, 2}), 6443);
  // A batch counts its tiles together: 4 x (2 x 1) = 8 tiles = 2 waves, as one 1024-row GEMM.
  EXPECT_EQ(m.gemm_duration(GemmWork{4, 256, 128, 1000, DType::kBf16, 2}),
            m.gemm_duration(GemmWork{1, 1024, 128, 1000, DType::kBf16, 2}));
}

TEST(ComputeCost, TimeStepsAtWaveBoundaries) {
  const ClusterSpec c = fast_hbm_cluster();
  const ComputeCostModel m(c);
  auto ns = [&](std::int64_t rows) { return m.gemm_duration(GemmWork{1, rows, 128, 1000, DType::kBf16, 2}); };
  // Waves of 4 tiles = 512 rows: flat within a wave, a step of one tile time past its end.
  EXPECT_EQ(ns(1024), ns(640));
  EXPECT_EQ(ns(1025) - ns(1024), 2721);
  EXPECT_EQ(ns(1536), ns(1025));
}

TEST(ComputeCost, MonotoneInEachDimension) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  for (std::int64_t a = 1; a <= 2048; a += 37) {
    const std::int64_t b = a + 37;
    EXPECT_LE(m.gemm_duration({1, a, 300, 300, DType::kBf16, 2}), m.gemm_duration({1, b, 300, 300, DType::kBf16, 2}));
    EXPECT_LE(m.gemm_duration({1, 300, a, 300, DType::kBf16, 2}), m.gemm_duration({1, 300, b, 300, DType::kBf16, 2}));
    EXPECT_LE(m.gemm_duration({1, 300, 300, a, DType::kBf16, 2}), m.gemm_duration({1, 300, 300, b, DType::kBf16, 2}));
  }
}

TEST(ComputeCost, SmallMGemmIsMemoryBound) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // 1 x 4096 x 4096: a narrow 16-row tile, 32 tiles = 8 waves of 2 x 16 x 128 x 4096 / 12500 + 100
  // = 1442.2 ns (11537 ns); streaming B dominates: (4096 + 4096^2 + 4096) x 2 B / 500 B/ns
  // = 67141.6 ns. 1000 + 67141.6 -> 68142 ns.
  const GemmWork w{1, 1, 4096, 4096, DType::kBf16, 2};
  EXPECT_EQ(m.gemm_waves(w).tile.m, 16);
  EXPECT_EQ(m.gemm_duration(w), 68142);
}

// A GEMM that accumulates into C (beta = 1) reads C as well: a weight gradient over 16 rows,
// 4096 x 4096 x 16 bf16, moves (2 x 4096 x 16 + 2 x 4096^2) x 2 B = 67,371,008 B, 134,742.0 ns
// at 500 B/ns; writing C only, (2 x 4096 x 16 + 4096^2) x 2 B = 33,816,576 B, 67,633.2 ns. Both
// far above its arithmetic (256 tiles = 64 waves of 2 x 128 x 128 x 16 / 12500 + 100 = 141.9 ns).
TEST(ComputeCost, AccumulatingGemmReadsC) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  GemmWork w{1, 4096, 4096, 16, DType::kBf16, 2, GemmLayout::kTN};
  EXPECT_EQ(w.bytes_moved(), 33816576);
  EXPECT_EQ(m.gemm_duration(w), 1000 + 67633);
  w.accumulate = true;
  EXPECT_EQ(w.bytes_moved(), 67371008);
  EXPECT_EQ(w.c_bytes(), 33554432);
  EXPECT_EQ(m.gemm_duration(w), 1000 + 134742);
}

TEST(ComputeCost, SmallKPaysTheTileOverhead) {
  const ClusterSpec c = fast_hbm_cluster();
  const ComputeCostModel m(c);
  // Per tile: 2 x 128 x 128 x k / 12500 + 100 ns; the fixed 100 ns weighs more at small K, so the
  // FLOP rate grows with K.
  EXPECT_DOUBLE_EQ(m.gemm_waves(GemmWork{1, 512, 128, 16, DType::kBf16, 2}).tile_ns, 41.94304 + 100);
  EXPECT_LT(m.gemm_flop_rate({1, 512, 128, 64, DType::kBf16, 2}), m.gemm_flop_rate({1, 512, 128, 4096, DType::kBf16, 2}));
}

TEST(ComputeCost, FewTilesSplitKAcrossIdleSms) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // 128 x 128 x 4096: one output tile on 4 SMs. Unsplit: 2 x 128 x 128 x 4096 / 12500 + 100 =
  // 10837.4 ns. In 4 slices of 1024: 2784.4 ns in one wave, plus the reduction: 1000 + 4 x 2 x
  // 128 x 128 x 4 B / 500 B/ns = 2048.6 ns; 4833.0 in all (2 slices: 5468.7 + 1524.3 = 6993.0;
  // 3: 3680.9 + 1786.4 = 5467.3).
  const GemmWork w{1, 128, 128, 4096, DType::kBf16, 2};
  const GemmWaves g = m.gemm_waves(w);
  EXPECT_EQ(g.split_k, 4);
  EXPECT_EQ(g.tiles, 4);
  EXPECT_EQ(g.waves, 1);
  EXPECT_NEAR(g.compute_ns(), 4833.0, 0.1);
  // The memory bound, (128 x 4096 x 2 + 128 x 128) x 2 B / 500 = 4260.3 ns, stays below it.
  EXPECT_EQ(m.gemm_duration(w), 5833);
  // No split once the output tiles fill the SMs, nor for a K of one slice.
  EXPECT_EQ(m.gemm_waves(GemmWork{1, 512, 128, 4096, DType::kBf16, 2}).split_k, 1);
  EXPECT_EQ(m.gemm_waves(GemmWork{1, 128, 128, 16, DType::kBf16, 2}).split_k, 1);
  // Costly partials keep it whole: with HBM 100x slower the reduction outweighs the idle SMs.
  ClusterSpec slow = test_cluster();
  slow.node.gpu.hbm_bandwidth = 1e10;
  EXPECT_EQ(ComputeCostModel(slow).gemm_waves(w).split_k, 1);
}

TEST(ComputeCost, AHalfTileIsTakenWhereItFillsTheLastWave) {
  ClusterSpec c = fast_hbm_cluster();
  // 640 x 128: five 128 x 128 tiles on 4 SMs, two waves: 2 x 2721.44 = 5442.88 ns.
  const GemmWork w{1, 640, 128, 1000, DType::kBf16, 2};
  EXPECT_EQ(ComputeCostModel(c).gemm_waves(w).tile.m, 128);  // no half-tile rate: the one tile
  // At 0.9 of the rate per halving: a 64 x 128 tile takes 2 x 64 x 128 x 1000 / 11250 + 100 =
  // 1556.4 ns, ten of them in three waves 4669.3 ns; a 64 x 64 tile at 0.81 takes
  // 2 x 64 x 64 x 1000 / 10125 + 100 = 909.09 ns, twenty in five waves 4545.4 ns: the fastest.
  c.node.gpu.gemm_half_tile_efficiency = {{DType::kBf16, 0.9}};
  const ComputeCostModel m(c);
  const GemmWaves g = m.gemm_waves(w);
  EXPECT_EQ(g.tile.m, 64);
  EXPECT_EQ(g.tile.n, 64);
  EXPECT_EQ(g.waves, 5);
  EXPECT_NEAR(g.compute_ns(), 4545.4, 0.1);
  // Whole waves already: 512 x 128 keeps its four tiles (2721.44 < 2 x 1556.4).
  EXPECT_EQ(m.gemm_waves(GemmWork{1, 512, 128, 1000, DType::kBf16, 2}).tile.m, 128);
  // At half the rate the smaller tiles never pay.
  c.node.gpu.gemm_half_tile_efficiency = {{DType::kBf16, 0.5}};
  EXPECT_EQ(ComputeCostModel(c).gemm_waves(w).tile.m, 128);
}

// FP8 tensor cores at twice the bf16 peak: a compute-bound GEMM's main loop takes half as long.
// A GPU without an fp8 peak (A100) refuses FP8 GEMMs by name.
TEST(ComputeCost, Fp8GemmsRunAtTheFp8Peak) {
  ClusterSpec c = fast_hbm_cluster();
  c.node.gpu.peak_flops[DType::kFp8] = 2e14;
  c.node.gpu.gemm_efficiency[DType::kFp8] = 0.5;
  const ComputeCostModel m(c);
  const GemmWaves bf16 = m.gemm_waves(GemmWork{1, 512, 128, 1000, DType::kBf16, 2});
  const GemmWaves fp8 = m.gemm_waves(GemmWork{1, 512, 128, 1000, DType::kFp8, 2});
  EXPECT_DOUBLE_EQ(fp8.tile_ns - 100, (bf16.tile_ns - 100) / 2);  // less the per-tile overhead
  const ClusterSpec without = fast_hbm_cluster();  // the model keeps a reference to its cluster
  const ComputeCostModel no_fp8(without);
  try {
    no_fp8.gemm_duration(GemmWork{1, 512, 128, 1000, DType::kFp8, 2});
    ADD_FAILURE() << "an fp8 GEMM on a GPU without an fp8 peak";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no fp8 peak; supported: fp32, bf16"), std::string::npos) << e.what();
  }
}

TEST(ComputeCost, LaunchOverheadIsTheFloor) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // 1 x 1 x 1: one 16 x 16 tile of 512 FLOP (0.04 ns) + 100 ns over the 1000 ns launch.
  EXPECT_EQ(m.gemm_duration({1, 1, 1, 1, DType::kBf16, 2}), 1100);
  for (std::int64_t d : {1, 7, 64, 300}) EXPECT_GE(m.gemm_duration({1, d, d, d, DType::kBf16, 2}), 1000);
}

TEST(ComputeCost, GemmWithoutSmCountIsInputError) {
  ClusterSpec c = test_cluster();
  c.node.gpu.sm_count = 0;
  const ComputeCostModel m(c);
  EXPECT_THROW(m.gemm_duration({1, 64, 64, 64, DType::kBf16, 2}), InputError);
}

TEST(ComputeCost, TinyWorkTakesAtLeastOneNs) {
  ClusterSpec c = test_cluster();
  c.node.gpu.kernel_launch_ns = 0;
  const ComputeCostModel m(c);
  // 100 B / 500 B/ns = 0.2 ns rounds to 0, raised to 1 ns.
  EXPECT_EQ(m.elementwise_duration(ElementwiseWork{100, 0, 0}), 1);
  // A zero-work kernel pays no launch here (launch 0): 0 ns.
  EXPECT_EQ(m.elementwise_duration(ElementwiseWork{0, 0, 0}), 0);
  EXPECT_EQ(m.copy_duration(CopyWork{1, CopyDirection::kDeviceToDevice}), 1);
}

TEST(ComputeCost, MissingGemmDtypeIsInputError) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  try {
    m.gemm_duration(GemmWork{1, 64, 64, 64, DType::kFp16, 2});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.rule(), "GPU TestGPU has no fp16 peak; supported: fp32, bf16");
  }
}

TEST(ComputeCost, Elementwise) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // 1e6 FLOP / 1e13 = 100 ns; (1e6 + 1e6) B / 500 B/ns = 4000 ns -> 1000 + 4000 = 5000.
  EXPECT_EQ(m.elementwise_duration(ElementwiseWork{1000000, 1000000, 1000000}), 5000);
  // Compute-bound: 1e9 FLOP / 1e13 = 100000 ns -> 101000.
  EXPECT_EQ(m.elementwise_duration(ElementwiseWork{1000, 1000, 1000000000}), 101000);
}

TEST(ComputeCost, Copies) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  // d2h: 2000 + 1e6 B / 20 B/ns = 52000 (no launch overhead: copy engine).
  EXPECT_EQ(m.copy_duration(CopyWork{1000000, CopyDirection::kDeviceToHost}), 52000);
  // h2d: 1000 + 1e6 B / 20 B/ns = 51000.
  EXPECT_EQ(m.copy_duration(CopyWork{1000000, CopyDirection::kHostToDevice}), 51000);
  // d2d: launch 1000 + 2e6 B / 500 B/ns = 5000.
  EXPECT_EQ(m.isolated_duration(task_with(CopyWork{1000000, CopyDirection::kDeviceToDevice})), 5000);
}

TEST(ComputeCost, HostWorkTakesItsDuration) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  EXPECT_EQ(m.isolated_duration(task_with(HostWork{1234})), 1234);
  EXPECT_THROW(m.isolated_duration(task_with(HostWork{-1})), InputError);
}

TEST(ComputeCost, MissingPcieOrHbmIsInputError) {
  ClusterSpec c = test_cluster();
  c.node.pcie_h2d.bandwidth = 0;
  const ComputeCostModel m(c);
  EXPECT_THROW(m.copy_duration(CopyWork{10, CopyDirection::kHostToDevice}), InputError);
  c.node.gpu.hbm_bandwidth = 0;
  EXPECT_THROW(ComputeCostModel{c}, InputError);
}

TEST(ComputeCost, CollectiveIsNotAComputeTask) {
  const ClusterSpec c = test_cluster();
  const ComputeCostModel m(c);
  EXPECT_THROW(m.isolated_duration(task_with(CollectiveWork{})), InternalError);
}

}  // namespace
}  // namespace moesim
