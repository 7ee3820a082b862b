// A file of one kind given where another kind belongs is named as what it is and where it goes,
// by every load function, before its keys are checked (sim/spec/file_kind.h).
#include "sim/spec/file_kind.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/spec/loader.h"
#include "sim/spec/sweep_spec.h"
#include "spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using testing::input_error_of;
using testing::TempFiles;

const std::string kRoot = MOESIM_SOURCE_DIR;
const std::string kModel = kRoot + "/models/moe-gpt-s-64e.yaml";
const std::string kGpu = kRoot + "/hardware/gpus/h100-sxm5.yaml";
const std::string kNode = kRoot + "/hardware/nodes/hgx-h100.yaml";
const std::string kRun = kRoot + "/examples/quickstart.yaml";
const std::string kSweep = kRoot + "/examples/sweep-1000.yaml";

TEST(FileKind, AHardwareFileGivenAsAModelSaysWhatItIs) {
  EXPECT_THAT(input_error_of([] { load_model_spec(kNode); }),
              HasSubstr("hgx-h100.yaml:6:7: kind: this is a node file (kind: node), which goes to --hardware; --model "
                        "takes a model file"));
}

TEST(FileKind, AModelFileGivenAsHardwareSaysWhatItIs) {
  EXPECT_THAT(input_error_of([] { load_hardware_spec(kModel); }),
              HasSubstr("moe-gpt-s-64e.yaml:7:7: kind: this is a model file (kind: model), which goes to --model; "
                        "--hardware takes a gpu, node or cluster file"));
  EXPECT_THAT(input_error_of([] { load_hardware_spec(kRun); }),
              HasSubstr("this is a run file (kind: run), which goes to --run; --hardware takes a gpu, node or cluster "
                        "file"));
}

TEST(FileKind, EveryLoadFunctionNamesTheKindItTakes) {
  EXPECT_THAT(input_error_of([] { load_run_spec(kSweep); }),
              HasSubstr("this is a sweep file (kind: sweep), which goes to --grid; --run takes a run file"));
  EXPECT_THAT(input_error_of([] { load_sweep_spec(kRun); }),
              HasSubstr("this is a run file (kind: run), which goes to --run; --grid takes a sweep file"));
  EXPECT_THAT(input_error_of([] { load_calibration(kGpu); }),
              HasSubstr("this is a gpu file (kind: gpu), which goes to --hardware; --calibration takes a calibration "
                        "file"));
  EXPECT_THAT(input_error_of([] { load_hardware_spec(kNode, kModel); }),
              HasSubstr("this is a model file (kind: model), which goes to --model; --calibration takes a "
                        "calibration file"));
}

TEST(FileKind, ACalibrationGivenAsHardwareSaysWhereItGoes) {
  TempFiles t;
  const std::string cal = t.write("c.yaml", "schema_version: 1\nkind: calibration\nname: c\ngpu: H100-SXM5\n");
  EXPECT_THAT(input_error_of([&] { load_hardware_spec(cal); }),
              HasSubstr("c.yaml:2:7: kind: this is a calibration file (kind: calibration), which goes to "
                        "--calibration (or a node's calibration: key); --hardware takes a gpu, node or cluster file"));
}

TEST(FileKind, AReferencedFileOfTheWrongKindNamesTheKeyThatReferencesIt) {
  TempFiles t;
  t.write("m.yaml", "schema_version: 1\nkind: model\nname: m\n");
  const std::string node = t.write(
      "node.yaml", "schema_version: 1\nkind: node\nname: n\ngpu: m.yaml\ngpus_per_node: 1\n");
  EXPECT_THAT(input_error_of([&] { load_hardware_spec(node); }),
              HasSubstr("m.yaml:2:7: kind: this is a model file (kind: model), which goes to --model; the gpu: key "
                        "of node.yaml takes a gpu file"));
}

TEST(FileKind, AMissingOrUnknownKindIsLeftToTheHeaderCheck) {
  TempFiles t;
  EXPECT_THAT(input_error_of([&] { load_hardware_spec(t.write("h.yaml", "schema_version: 1\nname: x\n")); }),
              HasSubstr("missing required key 'kind'"));
  EXPECT_THAT(input_error_of([&] { load_hardware_spec(t.write("h.yaml", "schema_version: 1\nkind: nod\n")); }),
              HasSubstr("unknown kind 'nod'"));
}

}  // namespace
}  // namespace moesim
