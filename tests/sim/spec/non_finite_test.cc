// NaN and infinity are refused by every kind of file, in plain numbers and in quantities, with the
// file, the position and the key.
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

std::string run_file(const std::string& extra) {
  return "schema_version: 1\nkind: run\nmodel: " + kRoot + "/models/moe-gpt-s-64e.yaml\nhardware: " + kRoot +
         "/hardware/nodes/hgx-h100.yaml\ntokens_per_gpu: 4096\n" + extra;
}

TEST(NonFinite, RunFileNumbersAreFiniteIntegers) {
  TempFiles t;
  for (const char* bad : {".nan", ".inf", "-.inf", "1e400"}) {
    EXPECT_THAT(input_error_of([&] { load_run_spec(t.write("r.yaml", run_file(std::string("seed: ") + bad + "\n"))); }),
                HasSubstr("r.yaml:6:7: seed: expected an integer"))
        << bad;
  }
  EXPECT_THAT(input_error_of([&] { load_run_spec(t.write("r.yaml", run_file("seed: -1\n"))); }),
              HasSubstr("r.yaml:6:7: seed: must be in [0, 9223372036854775807], found -1"));
  EXPECT_THAT(input_error_of([&] { load_run_spec(t.write("r.yaml", run_file("routing: zipf:nan\n"))); }),
              HasSubstr("the Zipf exponent 'nan' is not a number"));
}

TEST(NonFinite, SweepStepTargetIsAFiniteTime) {
  TempFiles t;
  const std::string sweep = "schema_version: 1\nkind: sweep\nmodels: [" + kRoot + "/models/moe-gpt-s-64e.yaml]\n" +
                            "hardware: [" + kRoot + "/hardware/nodes/hgx-h100.yaml]\ntokens: [4096]\nchunks: [1]\n" +
                            "strategies: [none]\n";
  for (const char* bad : {".nan ms", "inf ms", "-.inf ms"}) {
    EXPECT_THAT(input_error_of([&] { load_sweep_spec(t.write("s.yaml", sweep + "step_target: " + bad + "\n")); }),
                HasSubstr("step_target: must be a finite number"))
        << bad;
  }
  EXPECT_THAT(input_error_of([&] { load_sweep_spec(t.write("s.yaml", sweep + "step_target: -5 ms\n")); }),
              HasSubstr("step_target: must not be negative"));
}

TEST(NonFinite, HardwareNumbersAreFinite) {
  TempFiles t;
  const std::string gpu = "schema_version: 1\nkind: gpu\nname: g\npeak_flops:\n  fp32: 19.5 TFLOP/s\n"
                          "hbm_bandwidth: 1555 GB/s\nhbm_capacity: 40 GiB\nkernel_launch_overhead: 4 us\nsm_count: 108\n";
  EXPECT_THAT(input_error_of([&] { load_hardware_spec(t.write("g.yaml", gpu + "hbm_efficiency: .nan\n")); }),
              HasSubstr("g.yaml:10:17: hbm_efficiency: must be a finite number, found '.nan'"));
  EXPECT_THAT(input_error_of([&] {
                load_hardware_spec(t.write("g.yaml", testing::replaced(gpu, "1555 GB/s", ".inf GB/s")));
              }),
              HasSubstr("hbm_bandwidth: must be a finite number, found '.inf GB/s'"));
}

}  // namespace
}  // namespace moesim
