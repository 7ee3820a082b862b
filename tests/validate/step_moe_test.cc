// `moesim validate steps` on MoE rows (validate/step_data.h, step_replay.h): the columns
// expert_parallel, expert_tensor_parallel, context_parallel, precision, part_layers and dispatcher reach the simulated StepSpec, the
// tokens-per-s-per-gpu measure is global batch x sequence / (step time x GPUs), bad cells are named
// by file and line, and an MoE row cannot be judged by the dense TFLOP/s count.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../sim/spec/spec_test_util.h"
#include "sim/core/error.h"
#include "sim/spec/loader.h"
#include "sim/spec/presets.h"
#include "sim/step/step_simulation.h"
#include "validate/step_data.h"
#include "validate/step_replay.h"

namespace moesim::validate {
namespace {

const std::filesystem::path kTinyMoe =
    std::filesystem::path(MOESIM_SOURCE_DIR) / "tests/validate/steps/tiny-steps/tiny-moe.yaml";

using moesim::testing::input_error_of;
using moesim::testing::TempFiles;

const char* kHeader =
    "model,gpus,tensor_parallel,pipeline_parallel,context_parallel,expert_parallel,data_parallel,virtual_stages,"
    "part_layers,global_batch_size,micro_batch_size,seq_len,precision,sequence_parallel,recompute,tokens_per_s_per_gpu\n";
// 16 GPUs: tp 2, pp 2, cp 2, dp 2 (ep 4 over cp x dp), 2 virtual stages split 1,2,2,1.
const char* kRow = "MOE,16,2,2,2,4,2,2,1 2 2 1,16,2,256,FP8-CS,yes,none,1000\n";

// A dataset of the tiny MoE model in a scratch folder, with `measure` and the CSV given.
std::filesystem::path moe_dataset(const TempFiles& tmp, const std::string& measure, const std::string& csv) {
  const std::string yaml = "schema_version: 1\nkind: training-steps\ntitle: made-up MoE rows\nsource: the tests\n"
                           "file: steps.csv\nmeasure: " + measure +
                           "\nhardware: dgx-h100-ndr\nattention: flash\noverlap_grad_reduce: true\nmodels:\n  MOE: tiny-moe.yaml\n";
  const std::filesystem::path dir = std::filesystem::path(tmp.write("moe/steps.yaml", yaml)).parent_path();
  tmp.write("moe/steps.csv", csv);
  std::filesystem::copy_file(kTinyMoe, dir / "tiny-moe.yaml");
  return dir;
}

TEST(StepMoe, ExpertTensorParallelFromTheColumnElseTheModelsMappingElseTp) {
  // 16 GPUs, tp 2, pp 2, dp 4: the row with ETP 1 and EP 8 (etp x ep = 8 ranks of a stage of 8),
  // the row without a cell taking the mapping's ETP 1, and with neither Megatron's default (tp).
  const TempFiles tmp;
  const std::string csv =
      "model,gpus,tensor_parallel,pipeline_parallel,expert_parallel,expert_tensor_parallel,global_batch_size,"
      "micro_batch_size,seq_len,sequence_parallel,recompute,tokens_per_s_per_gpu\n"
      "MOE,16,2,2,8,1,8,1,256,yes,none,9\n";
  const std::filesystem::path dir = moe_dataset(tmp, "tokens-per-s-per-gpu", csv);
  const StepDataset d = read_step_dataset(dir);
  const StepRow row = read_step_rows(d)[0];
  EXPECT_EQ(row.etp, 1);
  EXPECT_EQ(prepare_step_row(d, row).spec.layout.expert_tp(), 1);
  StepDataset mapped = d;
  mapped.models[0].etp = 1;
  StepRow unstated = row;
  unstated.etp = 0;
  EXPECT_EQ(prepare_step_row(mapped, unstated).spec.layout.expert_tp(), 1);
  EXPECT_EQ(prepare_step_row(d, unstated).spec.layout.expert_tp(), 2);
}

TEST(StepMoe, ReadsExpertContextPrecisionAndPartColumns) {
  const TempFiles tmp;
  const StepDataset d = read_step_dataset(moe_dataset(tmp, "tokens-per-s-per-gpu", std::string(kHeader) + kRow));
  EXPECT_EQ(d.measure, StepMeasure::kTokensPerSPerGpu);
  const std::vector<StepRow> rows = read_step_rows(d);
  ASSERT_EQ(rows.size(), 1u);
  const StepRow& r = rows[0];
  EXPECT_EQ(r.ep, 4);
  EXPECT_EQ(r.cp, 2);
  EXPECT_EQ(r.dp, 2);
  EXPECT_EQ(r.vpp, 2);
  EXPECT_TRUE(r.fp8);
  EXPECT_TRUE(r.precision_stated);
  EXPECT_EQ(r.part_layers, (std::vector<int>{1, 2, 2, 1}));
  EXPECT_DOUBLE_EQ(*r.measured, 1000);
}

TEST(StepMoe, AnEmptyPrecisionIsUnstatedAndNoColumnIs16Bit) {
  const TempFiles tmp;
  const StepDataset d = read_step_dataset(
      moe_dataset(tmp, "tokens-per-s-per-gpu", std::string(kHeader) + "MOE,16,2,2,2,4,2,2,1 2 2 1,16,2,256,,yes,none,1000\n"));
  const std::vector<StepRow> rows = read_step_rows(d);
  ASSERT_EQ(rows[0].missing.size(), 1u);
  EXPECT_EQ(rows[0].missing[0], "no precision stated");
  EXPECT_NE(prepare_step_row(d, rows[0]).comparison.not_simulated.find("no precision stated"), std::string::npos);

  const TempFiles tmp2;
  const StepDataset plain = read_step_dataset(
      moe_dataset(tmp2, "tokens-per-s-per-gpu", "model,gpus,tensor_parallel,pipeline_parallel,expert_parallel,global_batch_size,"
                                                "micro_batch_size,seq_len,recompute,tokens_per_s_per_gpu\nMOE,8,1,1,8,8,1,256,none,9\n"));
  const StepRow r = read_step_rows(plain)[0];
  EXPECT_TRUE(r.missing.empty());
  EXPECT_FALSE(r.fp8);
  EXPECT_FALSE(r.precision_stated);
  EXPECT_EQ(r.ep, 8);
  EXPECT_EQ(r.cp, 1);
}

TEST(StepMoe, SimulatesTheRowsLayoutAndCountsTokens) {
  const TempFiles tmp;
  const StepDataset d = read_step_dataset(moe_dataset(tmp, "tokens-per-s-per-gpu", std::string(kHeader) + kRow));
  const PreparedStepRow p = prepare_step_row(d, read_step_rows(d)[0]);
  EXPECT_EQ(p.spec.layout.ep, 4);
  EXPECT_EQ(p.spec.layout.cp, 2);
  EXPECT_EQ(p.spec.gemm_precision, DType::kFp8);
  EXPECT_EQ(p.spec.part_layers, (std::vector<int>{1, 2, 2, 1}));
  const StepComparison c = simulate_step_row(d, p, NetworkModel::kAlphaBeta);
  ASSERT_TRUE(c.not_simulated.empty()) << c.not_simulated;

  // The same step by hand, and the tokens per second per GPU it gives.
  StepSpec spec;
  spec.layout = StepLayout{16, 2, 2, 2, 4, 2};
  spec.global_batch = 16;
  spec.micro_batch = 2;
  spec.seq = 256;
  spec.part_layers = {1, 2, 2, 1};
  spec.sequence_parallel = true;
  spec.gemm_precision = DType::kFp8;
  const ModelSpec model = load_model_spec(kTinyMoe.string());
  const ClusterSpec cluster = with_gpus(load_hardware_spec(resolve_hardware_arg("dgx-h100-ndr", "test")), 16, SourceLocation{}, "gpus");
  const StepReport want =
      simulate_training_step(model, cluster, spec, NetworkChoice{NetworkModel::kAlphaBeta, AllToAllAlgorithm::kPairwise}).report;
  EXPECT_DOUBLE_EQ(c.simulated_step_s, static_cast<double>(want.step_ns) / 1e9);
  EXPECT_DOUBLE_EQ(c.simulated, 16.0 * 256 / (c.simulated_step_s * 16));
  EXPECT_DOUBLE_EQ(c.error(), c.simulated / 1000 - 1);
}

TEST(StepMoe, BadMoeCellsAreNamedByFileAndLine) {
  const struct {
    const char* name;
    std::string row;
    const char* error;
  } cases[] = {
      {"precision", "MOE,16,2,2,2,4,2,2,1 2 2 1,16,2,256,fp4,yes,none,1000\n", "precision 'fp4' is not bf16, fp8"},
      {"parts", "MOE,16,2,2,2,4,2,2,3 3,16,2,256,bf16,yes,none,1000\n", "part_layers lists 2 parts; pipeline_parallel x virtual stages = 4"},
      {"part", "MOE,16,2,2,2,4,2,2,1 x 2 1,16,2,256,bf16,yes,none,1000\n", "part_layers 'x' is not"},
      {"dp", "MOE,16,2,2,2,4,4,2,1 2 2 1,16,2,256,bf16,yes,none,1000\n",
       "data_parallel 4 x tensor_parallel x context_parallel x pipeline_parallel is not gpus 16"},
      {"cp", "MOE,16,2,2,3,4,,2,1 2 2 1,16,2,256,bf16,yes,none,1000\n", "is not a multiple of tensor_parallel x context_parallel"},
  };
  for (const auto& c : cases) {
    const TempFiles tmp;
    const auto dir = moe_dataset(tmp, "tokens-per-s-per-gpu", std::string(kHeader) + kRow + c.row);
    const StepDataset d = read_step_dataset(dir);
    const std::string err = input_error_of([&] { read_step_rows(d); });
    EXPECT_EQ(err.rfind((dir / "steps.csv").string() + ":3:", 0), 0u) << c.name << ": " << err;
    EXPECT_NE(err.find(c.error), std::string::npos) << c.name << ": " << err;
  }
}

TEST(StepMoe, TheDispatcherColumnNamesDeepEpOrTheAllToAll) {
  const char* header = "model,gpus,tensor_parallel,pipeline_parallel,expert_parallel,global_batch_size,"
                       "micro_batch_size,seq_len,recompute,dispatcher,tokens_per_s_per_gpu\n";
  const TempFiles tmp;
  const StepDataset d = read_step_dataset(moe_dataset(
      tmp, "tokens-per-s-per-gpu",
      std::string(header) + "MOE,8,1,1,8,8,1,256,none,DeepEP,9\nMOE,8,1,1,8,8,1,256,none,hybridep,9\n"
                            "MOE,8,1,1,8,8,1,256,none,A2A,9\nMOE,8,1,1,8,8,1,256,none,,9\n"));
  const std::vector<StepRow> rows = read_step_rows(d);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].dispatcher, TokenDispatcher::kDeepEp);
  EXPECT_EQ(rows[1].dispatcher, TokenDispatcher::kDeepEp);
  EXPECT_EQ(rows[2].dispatcher, TokenDispatcher::kAllToAll);
  EXPECT_EQ(rows[3].dispatcher, TokenDispatcher::kAllToAll);
  EXPECT_EQ(prepare_step_row(d, rows[0]).spec.dispatcher, TokenDispatcher::kDeepEp);

  const TempFiles bad;
  const auto dir =
      moe_dataset(bad, "tokens-per-s-per-gpu", std::string(header) + "MOE,8,1,1,8,8,1,256,none,NCCL,9\n");
  const StepDataset db = read_step_dataset(dir);
  const std::string err = input_error_of([&] { read_step_rows(db); });
  EXPECT_EQ(err.rfind((dir / "steps.csv").string() + ":2:", 0), 0u) << err;
  EXPECT_NE(err.find("dispatcher 'NCCL' is not DeepEP, HybridEP or all-to-all"), std::string::npos) << err;
}

TEST(StepMoe, TflopsOfAnMoeRowIsRefused) {
  const TempFiles tmp;
  std::string csv = kHeader;
  csv.replace(csv.find("tokens_per_s_per_gpu"), 20, "tflops_per_gpu");
  const auto dir = moe_dataset(tmp, "tflops-per-gpu", csv + kRow);
  const StepDataset d = read_step_dataset(dir);
  const std::vector<StepRow> rows = read_step_rows(d);
  const std::string err = input_error_of([&] { prepare_step_row(d, rows[0]); });
  EXPECT_NE(err.find("steps.csv:2:1: model MOE is an MoE model (tiny-moe.yaml): tflops-per-gpu counts a dense model's FLOPs"),
            std::string::npos)
      << err;
}

TEST(StepMoe, UnknownMeasureNamesTheChoices) {
  const TempFiles tmp;
  const auto dir = moe_dataset(tmp, "samples-per-s", std::string(kHeader) + kRow);
  EXPECT_NE(input_error_of([&] { read_step_dataset(dir); }).find("iteration-time, tflops-per-gpu or tokens-per-s-per-gpu"),
            std::string::npos);
}

}  // namespace
}  // namespace moesim::validate
