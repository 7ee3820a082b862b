// The parse_* twins of the loaders (sim/spec/loader.h, sweep_spec.h): text already read is loaded
// as the file it came from would be, errors name the file given, and the paths the text refers to
// are resolved from that file's folder.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "sim/spec/loader.h"
#include "sim/spec/sweep_spec.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using testing::input_error_of;

const std::string kRoot = MOESIM_SOURCE_DIR;

std::string text_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(ParseText, ModelTextLoadsAsItsFile) {
  const std::string path = kRoot + "/models/mixtral-8x7b.yaml";
  const ModelSpec from_file = load_model_spec(path);
  const ModelSpec from_text = parse_model_spec(text_of(path), path);
  EXPECT_EQ(from_text.name, from_file.name);
  EXPECT_EQ(from_text.d_ffn, from_file.d_ffn);
  EXPECT_EQ(from_text.num_experts, from_file.num_experts);
  EXPECT_EQ(from_text.origin.to_string(), from_file.origin.to_string());
}

TEST(ParseText, HardwareReferencesResolveFromTheFilesFolder) {
  const std::string path = kRoot + "/hardware/clusters/dgx-a100-2node.yaml";
  const ClusterSpec from_file = load_hardware_spec(path);
  // The cluster's node: ../nodes/dgx-a100.yaml is found from hardware/clusters/.
  const ClusterSpec from_text = parse_hardware_spec(text_of(path), path);
  EXPECT_EQ(from_text.num_nodes, from_file.num_nodes);
  EXPECT_EQ(from_text.node.name, from_file.node.name);
  EXPECT_EQ(from_text.node.gpu.name, from_file.node.gpu.name);
  EXPECT_DOUBLE_EQ(from_text.inter_node.bandwidth, from_file.inter_node.bandwidth);
  // From another folder the same text names the reference it cannot find.
  EXPECT_THAT(input_error_of([&] { parse_hardware_spec(text_of(path), kRoot + "/models/c.yaml"); }),
              HasSubstr("cannot open referenced node file '" + kRoot + "/models/../nodes/dgx-a100.yaml'"));
}

TEST(ParseText, RunAndSweepPathsAreRelativeToTheFile) {
  const std::string run_path = kRoot + "/examples/quickstart.yaml";
  const RunFile run = parse_run_spec(text_of(run_path), run_path);
  EXPECT_EQ(run.model_path, kRoot + "/models/moe-gpt-s-64e.yaml");
  EXPECT_EQ(run.run.num_chunks, 4);
  const std::string sweep_path = kRoot + "/examples/sweep-1000.yaml";
  const SweepSpec sweep = parse_sweep_spec(text_of(sweep_path), sweep_path);
  ASSERT_EQ(sweep.models.values.size(), 2u);
  EXPECT_EQ(sweep.models.values[0], kRoot + "/models/moe-gpt-s-64e.yaml");
  EXPECT_EQ(sweep.models.where.file, sweep_path);
}

TEST(ParseText, CalibrationAndErrorsNameTheFileGiven) {
  const std::string calibration =
      "schema_version: 1\nkind: calibration\nname: c\ngpu: A100-SXM4-40GB\nkernel_launch_overhead: 3 us\n";
  EXPECT_EQ(parse_calibration(calibration, "piped.yaml").kernel_launch_ns, 3000);
  const std::string model = "schema_version: 1\nkind: model\nname: m\nd_model: x\n";
  EXPECT_THAT(input_error_of([&] { parse_model_spec(model, "piped.yaml"); }),
              HasSubstr("piped.yaml:4:10: d_model: expected an integer"));
  EXPECT_THAT(input_error_of([&] { parse_calibration(model, "piped.yaml", "--base"); }),
              HasSubstr("piped.yaml:2:7: kind: this is a model file (kind: model), which goes to --model; "
                        "--base takes a calibration file"));
}

}  // namespace
}  // namespace moesim
