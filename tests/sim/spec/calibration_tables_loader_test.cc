// The sections of calibration files since schema_version 2: batched GEMM tables and the
// memory-bound kernels' figures. Read and applied to the GPU; a table with holes, axes out of
// order, a bandwidth that is not positive, or these sections in a version-1 file: exit 2 naming
// the file, the line and the rule. Version-1 files keep loading as before.
#include <gtest/gtest.h>

#include <string>

#include "sim/spec/loader.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using testing::calibration_error;
using testing::input_error_of;
using testing::replaced;
using testing::TempFiles;

const std::string kRoot = MOESIM_SOURCE_DIR;

const std::string kTables =
    "schema_version: 2\n"
    "kind: calibration\n"
    "name: a100 tables\n"
    "gpu: A100-SXM4-40GB\n"
    "batched_gemm:\n"
    "  bf16:\n"
    "    batch: [2, 8]\n"
    "    m: [64, 256]\n"
    "    n: [1024]\n"
    "    k: [512, 1024]\n"
    "    time_us:\n"
    "      - [10, 12]   # batch=2 m=64\n"
    "      - [20, 24]   # batch=2 m=256\n"
    "      - [30, 36]   # batch=8 m=64\n"
    "      - [80, 150]  # batch=8 m=256\n"
    "batched_gemm_tn:\n"
    "  bf16:\n"
    "    batch: [2]\n"
    "    m: [64]\n"
    "    n: [1024]\n"
    "    k: [16]\n"
    "    time_us:\n"
    "      - [7]   # batch=2 m=64\n"
    "kernels:\n"
    "  fp32:\n"
    "    route_fwd: {launch: 9.5 us, bandwidth: 120 GB/s}\n"
    "    act_bwd: {launch: 0 us, bandwidth: 2.5 TB/s}\n"
    "  bf16:\n"
    "    decode_fwd: {launch: 4 us, bandwidth: 900 GB/s}\n";

TEST(CalibrationTables, ReadAndAppliedToTheGpu) {
  TempFiles t;
  const std::string path = t.write("cal.yaml", kTables);
  const CalibrationSpec c = load_calibration(path);
  const BatchedGemmTable& b = c.batched_gemm.at(GemmLayout::kNN).at(DType::kBf16);
  EXPECT_DOUBLE_EQ(c.batched_gemm.at(GemmLayout::kTN).at(DType::kBf16).time_ns.at(0), 7000);
  EXPECT_EQ(c.batched_gemm.count(GemmLayout::kNT), 0u);
  EXPECT_EQ(b.batch, (std::vector<std::int64_t>{2, 8}));
  EXPECT_DOUBLE_EQ(b.time_ns[b.index(1, 1, 0, 1)], 150000);  // batch 8, m 256, k 1024
  EXPECT_DOUBLE_EQ(b.time_ns[b.index(1, 0, 0, 0)], 30000);
  const KernelFigure route = c.kernels.at(DType::kFp32).at(MemoryKernel::kRouteFwd);
  EXPECT_EQ(route.launch_ns, 9500);
  EXPECT_DOUBLE_EQ(route.bandwidth, 120e9);
  EXPECT_DOUBLE_EQ(c.kernels.at(DType::kFp32).at(MemoryKernel::kActBwd).bandwidth, 2.5e12);
  EXPECT_EQ(c.kernels.at(DType::kBf16).size(), 1u);
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/nodes/dgx-a100.yaml", path);
  ASSERT_TRUE(cluster.node.gpu.calibration.has_value());
  EXPECT_EQ(cluster.node.gpu.calibration->batched_gemm.size(), 2u);
  EXPECT_EQ(cluster.node.gpu.calibration->kernels.size(), 2u);
}

TEST(CalibrationTables, HolesAndUnorderedAxesNameTheLine) {
  TempFiles t;
  // A missing (batch, m, n) row.
  std::string msg = calibration_error(t, replaced(kTables, "      - [80, 150]  # batch=8 m=256\n", ""));
  EXPECT_NE(msg.find("bad.yaml:12:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 3 rows; it needs one per (batch, m, n), batch-major then m: 2 x 2 x 1 = 4"), std::string::npos) << msg;
  // A missing time in a row.
  msg = calibration_error(t, replaced(kTables, "[30, 36]", "[30]"));
  EXPECT_NE(msg.find("bad.yaml:14:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 1 times; it needs one per k (2)"), std::string::npos) << msg;
  // Sizes out of order.
  msg = calibration_error(t, replaced(kTables, "batch: [2, 8]", "batch: [8, 2]"));
  EXPECT_NE(msg.find("bad.yaml:7:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the batch axis must be strictly increasing; 2 follows 8"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kTables, "k: [512, 1024]", "k: [1024, 1024]"));
  EXPECT_NE(msg.find("the k axis must be strictly increasing; 1024 follows 1024"), std::string::npos) << msg;
  // A batch of 1 belongs to the gemm table.
  msg = calibration_error(t, replaced(kTables, "batch: [2, 8]", "batch: [1, 8]"));
  EXPECT_NE(msg.find("the batch axis starts at 2"), std::string::npos) << msg;
  // A time that is not positive.
  msg = calibration_error(t, replaced(kTables, "[10, 12]", "[0, 12]"));
  EXPECT_NE(msg.find("bad.yaml:12:"), std::string::npos) << msg;
}

TEST(CalibrationTables, KernelFiguresMustBePlausible) {
  TempFiles t;
  std::string msg = calibration_error(t, replaced(kTables, "bandwidth: 120 GB/s", "bandwidth: 0 GB/s"));
  EXPECT_NE(msg.find("bad.yaml:26:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("must be positive"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kTables, "bandwidth: 120 GB/s", "bandwidth: -5 GB/s"));
  EXPECT_NE(msg.find("bad.yaml:26:"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kTables, "route_fwd:", "softmax:"));
  EXPECT_NE(msg.find("softmax"), std::string::npos) << msg;
  EXPECT_NE(msg.find("route_fwd"), std::string::npos) << msg;  // the valid names
  msg = calibration_error(t, replaced(kTables, "  fp32:\n    route_fwd", "  tf32:\n    route_fwd"));
  EXPECT_NE(msg.find("tf32"), std::string::npos) << msg;  // kernels are keyed by storage
  msg = calibration_error(t, replaced(kTables, "{launch: 9.5 us, bandwidth: 120 GB/s}", "{bandwidth: 120 GB/s}"));
  EXPECT_NE(msg.find("launch"), std::string::npos) << msg;
}

TEST(CalibrationTables, NeedSchemaVersionTwo) {
  TempFiles t;
  std::string msg = calibration_error(t, replaced(kTables, "schema_version: 2", "schema_version: 1"));
  EXPECT_NE(msg.find("bad.yaml:6:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("batched_gemm needs schema_version 2 (this file says 1)"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kTables, "schema_version: 2", "schema_version: 3"));
  EXPECT_NE(msg.find("unsupported schema_version 3; supported schema_version: 1 to 2"), std::string::npos) << msg;
  // A version-1 file without them loads as it always did; so does a version-2 file of the old sections.
  const std::string v1 = "schema_version: 1\nkind: calibration\nname: old\ngpu: A100-SXM4-40GB\n"
                         "kernel_launch_overhead: 2.5 us\n";
  EXPECT_EQ(load_calibration(t.write("v1.yaml", v1)).kernel_launch_ns, 2500);
  EXPECT_EQ(load_calibration(t.write("v2.yaml", replaced(v1, "schema_version: 1", "schema_version: 2"))).kernel_launch_ns,
            2500);
}

TEST(CalibrationTables, ABatchedTableForADtypeTheGpuLacksIsRejected) {
  TempFiles t;
  const std::string cal = t.write("cal.yaml", replaced(kTables, "A100-SXM4-40GB\n", "V100-SXM2-16GB\n"));
  const std::string msg =
      input_error_of([&] { load_hardware_spec(kRoot + "/hardware/clusters/valor-4x-v100.yaml", cal); });
  EXPECT_NE(msg.find("batched_gemm.bf16: GPU 'V100-SXM2-16GB' has no peak_flops for bf16"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moesim
