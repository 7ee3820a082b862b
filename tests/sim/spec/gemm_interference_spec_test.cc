// A node's `interference: gemm_with_communication` table (sim/engine/interference.h): read from node
// files in the order given, refused with the file, line and rule when its rows are malformed, out
// of range or out of order, and in calibration files.
#include <gtest/gtest.h>

#include <string>

#include "sim/spec/loader.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using testing::calibration_error;
using testing::input_error_of;
using testing::TempFiles;

const std::string kRoot = MOESIM_SOURCE_DIR;

std::string node_with(const std::string& gpu_file, const std::string& rows) {
  return "schema_version: 1\nkind: node\nname: n\ngpu: " + gpu_file +
         "\ngpus_per_node: 1\n"
         "pcie: {h2d_bandwidth: 25 GB/s, d2h_bandwidth: 25 GB/s, latency: 10 us}\n"
         "interference:\n  computation: {with_communication: 0.6}\n  gemm_with_communication:\n" +
         rows;
}

const std::string kA100 = kRoot + "/hardware/gpus/a100-sxm4-40gb.yaml";

TEST(GemmInterferenceSpecTest, NodeFileGivesRowsInOrder) {
  TempFiles t;
  const auto& rows = load_hardware_spec(t.write("n.yaml", node_with(kA100, "    - [1000, 0.5]\n    - [8000, 0.75]\n")))
                         .node.interference.gemm_with_communication;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].outputs_per_sm, 1000);
  EXPECT_EQ(rows[0].factor, 0.5);
  EXPECT_EQ(rows[1].outputs_per_sm, 8000);
  EXPECT_EQ(rows[1].factor, 0.75);
}

TEST(GemmInterferenceSpecTest, BadRowsNameFileLineAndRule) {
  TempFiles t;
  const auto error = [&](const std::string& rows) {
    const std::string path = t.write("n.yaml", node_with(kA100, rows));
    return input_error_of([&] { load_hardware_spec(path); });
  };
  std::string msg = error("    - [8000, 0.5]\n    - [1000, 0.75]\n");
  EXPECT_NE(msg.find("n.yaml:11:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("outputs_per_sm must increase"), std::string::npos) << msg;
  msg = error("    - [1000, 0.5]\n    - [1000, 0.75]\n");
  EXPECT_NE(msg.find("outputs_per_sm must increase"), std::string::npos) << msg;
  msg = error("    - [1000, 55]\n");
  EXPECT_NE(msg.find("n.yaml:10:"), std::string::npos) << msg;
  msg = error("    - [1000, 0]\n");
  EXPECT_NE(msg.find("gemm_with_communication[0][1]"), std::string::npos) << msg;
  msg = error("    - [-5, 0.5]\n");
  EXPECT_NE(msg.find("gemm_with_communication[0][0]"), std::string::npos) << msg;
  msg = error("    - [1000, 0.5, 3]\n");
  EXPECT_NE(msg.find("expected a row [outputs_per_sm, factor]"), std::string::npos) << msg;
  msg = error("    {outputs: 1000}\n");
  EXPECT_NE(msg.find("non-empty list"), std::string::npos) << msg;
}

TEST(GemmInterferenceSpecTest, CalibrationFileMayNotGiveIt) {
  TempFiles t;
  const std::string msg = calibration_error(
      t, "schema_version: 1\nkind: calibration\nname: c\nsource: test\ngpu: A100-SXM4-40GB\n"
         "interference:\n  gemm_with_communication:\n    - [1000, 0.5]\n");
  EXPECT_NE(msg.find("bad.yaml:7:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gemm_with_communication"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moesim
