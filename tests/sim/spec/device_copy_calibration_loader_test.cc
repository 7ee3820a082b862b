// A calibration file's device_copy_collectives (schema_version 2): the loopback all-to-all's
// launch and bandwidth per measured rank count and the with_computation probe, read and applied to
// the GPU; bad values, ranks out of order, a missing key or the section in a version-1 file: exit
// 2 naming the file, the line and the rule. A file without the section leaves device copies alone.
#include <gtest/gtest.h>

#include <string>

#include "sim/spec/loader.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using testing::calibration_error;
using testing::replaced;
using testing::TempFiles;

const std::string kRoot = MOESIM_SOURCE_DIR;

const std::string kDeviceCopies =
    "schema_version: 2\n"
    "kind: calibration\n"
    "name: a100 device copies\n"
    "gpu: A100-SXM4-40GB\n"
    "device_copy_collectives:\n"
    "  fits:\n"
    "    - {ranks: 1, launch: 6.5 us, bandwidth: 1400 GB/s}\n"
    "    - {ranks: 2, launch: 21 us, bandwidth: 1.5 TB/s}\n"
    "    - {ranks: 8, launch: 310.25 us, bandwidth: 1300 GB/s}\n"
    "  with_computation: {factor: 0.0625, ranks: 1, bytes_per_peer: 16777216}\n";

TEST(DeviceCopyCalibration, ReadAndAppliedToTheGpu) {
  TempFiles t;
  const std::string path = t.write("cal.yaml", kDeviceCopies);
  const DeviceCopyFigures f = load_calibration(path).device_copies;
  ASSERT_EQ(f.by_ranks.size(), 3u);
  EXPECT_EQ(f.by_ranks.at(1).launch_ns, 6500);
  EXPECT_DOUBLE_EQ(f.by_ranks.at(1).bandwidth, 1400e9);
  EXPECT_DOUBLE_EQ(f.by_ranks.at(2).bandwidth, 1.5e12);
  EXPECT_EQ(f.by_ranks.at(8).launch_ns, 310250);
  ASSERT_TRUE(f.with_computation.has_value());
  EXPECT_DOUBLE_EQ(f.with_computation->factor, 0.0625);
  EXPECT_EQ(f.with_computation->ranks, 1);
  EXPECT_EQ(f.with_computation->bytes_per_peer, 16777216);
  const ClusterSpec cluster = load_hardware_spec(kRoot + "/hardware/nodes/dgx-a100.yaml", path);
  ASSERT_TRUE(cluster.node.gpu.calibration.has_value());
  EXPECT_EQ(cluster.node.gpu.calibration->device_copies.by_ranks.size(), 3u);
  // The probe is optional; without the section there are no figures.
  EXPECT_FALSE(load_calibration(t.write("no-probe.yaml", replaced(kDeviceCopies, "  with_computation: {factor: 0.0625, ranks: 1, bytes_per_peer: 16777216}\n", "")))
                   .device_copies.with_computation.has_value());
  const std::string v2 = "schema_version: 2\nkind: calibration\nname: old\ngpu: A100-SXM4-40GB\nkernel_launch_overhead: 2.5 us\n";
  EXPECT_TRUE(load_calibration(t.write("v2.yaml", v2)).device_copies.by_ranks.empty());
}

TEST(DeviceCopyCalibration, BadValuesNameTheLineAndTheRule) {
  TempFiles t;
  std::string msg = calibration_error(t, replaced(kDeviceCopies, "bandwidth: 1400 GB/s", "bandwidth: 0 GB/s"));
  EXPECT_NE(msg.find("bad.yaml:7:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("must be positive"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kDeviceCopies, "launch: 6.5 us", "launch: -1 us"));
  EXPECT_NE(msg.find("bad.yaml:7:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("must not be negative"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kDeviceCopies, "{ranks: 2,", "{ranks: 9,"));
  EXPECT_NE(msg.find("bad.yaml:9:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the fits' ranks must be strictly increasing; 8 follows 9"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kDeviceCopies, "{ranks: 1,", "{ranks: 0,"));
  EXPECT_NE(msg.find("bad.yaml:7:"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kDeviceCopies, "{ranks: 1, launch: 6.5 us, ", "{ranks: 1, "));
  EXPECT_NE(msg.find("launch"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kDeviceCopies, "factor: 0.0625", "factor: 1.5"));
  EXPECT_NE(msg.find("bad.yaml:10:"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kDeviceCopies, "factor: 0.0625", "factor: 0"));
  EXPECT_NE(msg.find("bad.yaml:10:"), std::string::npos) << msg;
  msg = calibration_error(t, replaced(kDeviceCopies, "  fits:", "  fit:"));
  EXPECT_NE(msg.find("fits"), std::string::npos) << msg;
}

TEST(DeviceCopyCalibration, NeedsSchemaVersionTwo) {
  TempFiles t;
  const std::string msg = calibration_error(t, replaced(kDeviceCopies, "schema_version: 2", "schema_version: 1"));
  EXPECT_NE(msg.find("bad.yaml:6:"), std::string::npos) << msg;  // the section's first line
  EXPECT_NE(msg.find("device_copy_collectives needs schema_version 2 (this file says 1)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moesim
