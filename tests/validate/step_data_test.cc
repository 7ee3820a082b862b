// The whole-step datasets of `moesim validate steps` (validate/step_data.h, step_replay.h): the
// steps.yaml and CSV readers on a tiny made-up dataset (tests/validate/steps/), the simulated
// values and errors against simulate_training_step itself, the goal verdicts, the FLOP count
// against Korthikanti et al.'s own MFU, --only, and bad data named by file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../sim/spec/spec_test_util.h"
#include "sim/core/error.h"
#include "sim/spec/loader.h"
#include "sim/step/step_simulation.h"
#include "validate/step_data.h"
#include "validate/step_replay.h"

namespace moesim::validate {
namespace {

const std::filesystem::path kTiny = std::filesystem::path(MOESIM_SOURCE_DIR) / "tests/validate/steps/tiny-steps";

using moesim::testing::input_error_of;
using moesim::testing::TempFiles;

// A copy of the tiny dataset in a scratch folder, with its CSV replaced.
std::filesystem::path tiny_copy_with_csv(const TempFiles& tmp, const std::string& csv) {
  const std::filesystem::path dir = std::filesystem::path(tmp.write("tiny/steps.csv", csv)).parent_path();
  for (const char* f : {"steps.yaml", "tiny-gpt.yaml"}) std::filesystem::copy_file(kTiny / f, dir / f);
  return dir;
}

const char* kHeader =
    "model,attention_heads,hidden_size,layers,tensor_parallel,pipeline_parallel,data_parallel,gpus,global_batch_size,"
    "micro_batch_size,seq_len,vocab_size,layers_per_virtual_stage,sequence_parallel,recompute,iteration_time_s\n";

TEST(StepData, ReadsTheDatasetAndItsRows) {
  const StepDataset d = read_step_dataset(kTiny);
  EXPECT_EQ(d.name, "tiny-steps");
  EXPECT_EQ(d.measure, StepMeasure::kIterationTime);
  EXPECT_EQ(d.attention, AttentionKernel::kUnfused);
  ASSERT_NE(d.model("TINY-DP"), nullptr);
  EXPECT_TRUE(d.model("TINY-DP")->overlap_grad_reduce);
  EXPECT_FALSE(d.model("TINY")->overlap_grad_reduce);  // the dataset's overlap_grad_reduce
  EXPECT_EQ(d.model("OTHER"), nullptr);
  EXPECT_DOUBLE_EQ(*d.goals.row_error, 0.10);
  EXPECT_DOUBLE_EQ(*d.goals.speedup_points, 3);

  const std::vector<StepRow> rows = read_step_rows(d);
  ASSERT_EQ(rows.size(), 6u);
  const StepRow& sel = rows[1];
  EXPECT_EQ(sel.line, 3);
  EXPECT_EQ(sel.vpp, 2);  // 8 layers / (2 stages x 2 layers a virtual stage)
  EXPECT_EQ(sel.dp, 2);
  EXPECT_TRUE(sel.sequence_parallel);
  EXPECT_EQ(*sel.recompute, Recompute::kSelective);
  EXPECT_DOUBLE_EQ(*sel.measured, 0.008);
  EXPECT_DOUBLE_EQ(*sel.published_speedup_pct, 20.0);
  EXPECT_TRUE(sel.missing.empty());
  EXPECT_FALSE(rows[2].measured);
  ASSERT_EQ(rows[2].missing.size(), 1u);
  EXPECT_EQ(rows[2].missing[0], "no iteration_time_s stated");
}

TEST(StepReplay, SimulatesEachRowAsSimulateTrainingStepDoes) {
  const StepDataset d = read_step_dataset(kTiny);
  const std::vector<StepRow> rows = read_step_rows(d);
  std::vector<StepComparison> done;
  for (const StepRow& row : rows) done.push_back(simulate_step_row(d, prepare_step_row(d, row), NetworkModel::kAlphaBeta));

  // The first row by hand: the preset, the cluster grown to 8 GPUs, and the row's layout.
  StepSpec spec;
  spec.layout = StepLayout{8, 2, 2, 2, 1, 1};
  spec.global_batch = 16;
  spec.micro_batch = 2;
  spec.seq = 256;
  spec.recompute = Recompute::kFull;
  spec.attention = AttentionKernel::kUnfused;
  spec.overlap_grad_reduce = false;
  const ModelSpec model = load_model_spec((kTiny / "tiny-gpt.yaml").string());
  const ClusterSpec cluster = with_gpus(load_hardware_spec(resolve_dataset_hardware(d, d.hardware, "hardware")), 8, {}, "gpus");
  const StepReport direct = simulate_training_step(model, cluster, spec, {NetworkModel::kAlphaBeta}).report;
  ASSERT_TRUE(done[0].compared());
  EXPECT_DOUBLE_EQ(done[0].simulated, static_cast<double>(direct.step_ns) / 1e9);
  EXPECT_DOUBLE_EQ(done[0].error(), (done[0].simulated - 0.010) / 0.010);

  EXPECT_TRUE(done[1].compared());
  EXPECT_EQ(done[2].not_simulated, "no iteration_time_s stated");
  EXPECT_TRUE(done[3].compared());
  EXPECT_EQ(done[4].not_simulated, "no preset for model 'OTHER' in steps.yaml");
  EXPECT_NE(done[5].not_simulated.find("the simulator refuses it: --tp 8 does not divide the 4 attention heads"),
            std::string::npos)
      << done[5].not_simulated;

  const std::vector<SpeedupComparison> pairs = pair_speedups(done);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].full_line, 2);
  EXPECT_EQ(pairs[0].selective_line, 3);
  EXPECT_TRUE(pairs[0].measured_published);
  EXPECT_DOUBLE_EQ(pairs[0].measured_pct, 20.0);
  EXPECT_DOUBLE_EQ(pairs[0].simulated_pct, 100 * (done[0].simulated_step_s / done[1].simulated_step_s - 1));
}

// The fsdp column (Megatron-Bridge: a sharding size, 0 for DDP; the ModelZoo: "On" or "/"): a
// fully sharded row is simulated as ZeRO 3, the others as before; a word other than On is bad data.
TEST(StepReplay, FullyShardedRowsRunAsZeroThree) {
  const TempFiles tmp;
  const std::string header = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",fsdp\n";
  const std::string row = "TINY,4,256,8,2,2,2,8,16,2,256,1024,,no,full,0.010,";
  const std::filesystem::path dir = tiny_copy_with_csv(tmp, header + row + "2\n" + row + "On\n" + row + "0\n" + row + "/\n");
  const StepDataset d = read_step_dataset(dir);
  const std::vector<StepRow> rows = read_step_rows(d);
  ASSERT_EQ(rows.size(), 4u);
  const bool expected[] = {true, true, false, false};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].fsdp, expected[i]) << "line " << rows[i].line;
    EXPECT_EQ(prepare_step_row(d, rows[i]).spec.zero_stage, expected[i] ? 3 : 0) << "line " << rows[i].line;
  }
  const TempFiles other;
  const std::filesystem::path bad = tiny_copy_with_csv(other, header + row + "yes\n");
  const std::string message = input_error_of([&] { read_step_rows(read_step_dataset(bad)); });
  EXPECT_NE(message.find("steps.csv:2"), std::string::npos) << message;
  EXPECT_NE(message.find("fsdp"), std::string::npos) << message;
}

StepComparison compared_row(int line, double measured, double simulated) {
  StepComparison c;
  c.row.line = line;
  c.row.measured = measured;
  c.simulated = simulated;
  return c;
}

TEST(StepGoals, EveryRowWithinTheGoalOrNot) {
  StepDatasetReport r;
  r.dataset.goals.row_error = 0.10;
  r.rows = {compared_row(2, 1.0, 0.95), compared_row(3, 2.0, 2.19)};
  StepComparison skipped = compared_row(4, 1.0, 0);
  skipped.not_simulated = "no preset";
  r.rows.push_back(skipped);
  auto g = row_goal(r);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->judged, 2u);
  EXPECT_EQ(g->within, 2u);
  EXPECT_EQ(g->not_judged, 1u);
  EXPECT_NEAR(g->worst, 0.095, 1e-12);
  EXPECT_TRUE(g->met());

  r.rows.push_back(compared_row(5, 1.0, 0.88));  // -12%
  g = row_goal(r);
  EXPECT_FALSE(g->met());
  EXPECT_NEAR(g->worst, -0.12, 1e-12);
  EXPECT_FALSE(speedup_goal(r));  // no speed-up goal stated

  r.dataset.goals.speedup_points = 3;
  SpeedupComparison s;
  s.measured_pct = 29.0;
  s.simulated_pct = 24.9;
  r.speedups = {s};
  g = speedup_goal(r);
  EXPECT_EQ(g->within, 0u);
  EXPECT_NEAR(g->worst, -4.1, 1e-9);
  EXPECT_FALSE(g->met());
  r.speedups[0].simulated_pct = 31.5;
  EXPECT_TRUE(speedup_goal(r)->met());
}

TEST(StepGoals, NoGoalStatedIsReportOnly) {
  StepDatasetReport r;
  r.rows = {compared_row(2, 1.0, 2.0)};
  EXPECT_FALSE(row_goal(r));
  std::ostringstream out;
  print_step_summary({r}, out);
  EXPECT_NE(out.str().find("no goal stated (report only): 1 of 1 rows compared"), std::string::npos) << out.str();
}

TEST(StepFlops, GiveBackKorthikantisMfuAndHfu) {
  // Korthikanti et al. Table 5, 22B with selective recomputation: 1.10 s per iteration on 8 A100s
  // (312 TFLOP/s each); their README computes MFU 41.7% and HFU 43.8% from these (Table 5: 41.5, 43.7).
  const ModelSpec m = load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/gpt-22b.yaml");
  const double peak = 1.10 * 8 * 312e12;
  EXPECT_NEAR(published_iteration_flops(m, 4, 2048, Recompute::kNone) / peak, 0.417, 0.0005);
  EXPECT_NEAR(published_iteration_flops(m, 4, 2048, Recompute::kSelective) / peak, 0.438, 0.0005);
  // Full recomputation: every layer's forward once more, the logits not.
  const double layers_none = published_iteration_flops(m, 4, 2048, Recompute::kNone) - 6.0 * 4 * 2048 * 6144 * 51200;
  EXPECT_NEAR(published_iteration_flops(m, 4, 2048, Recompute::kFull) - 6.0 * 4 * 2048 * 6144 * 51200,
              layers_none * 4 / 3, 1e3);
}

TEST(StepSelection, PicksDatasetsLinesAndModels) {
  const StepSelection all = StepSelection::parse("");
  StepRow row;
  row.line = 3;
  row.model = "TINY";
  EXPECT_TRUE(all.selects("any", row));
  const StepSelection some = StepSelection::parse("a,b:3,c:TINY");
  EXPECT_TRUE(some.selects("a", row));
  EXPECT_TRUE(some.selects("b", row));
  EXPECT_TRUE(some.selects("c", row));
  EXPECT_FALSE(some.selects("d", row));
  row.line = 4;
  EXPECT_FALSE(some.selects("b", row));
  EXPECT_FALSE(some.selects_dataset("d"));
  EXPECT_NE(input_error_of([] { StepSelection::parse("a:"); }).find("--only 'a:'"), std::string::npos);
  EXPECT_NE(input_error_of([] { StepSelection::parse("a,"); }).find("an empty item"), std::string::npos);

  const StepDataset d = read_step_dataset(kTiny);
  const std::vector<std::vector<StepRow>> rows{read_step_rows(d)};
  StepSelection::parse("tiny-steps:2,tiny-steps:TINY-DP").check_matched({d}, rows);  // matches: no error
  EXPECT_NE(input_error_of([&] { StepSelection::parse("nope").check_matched({d}, rows); }).find("no dataset 'nope'; datasets: tiny-steps"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { StepSelection::parse("tiny-steps:99").check_matched({d}, rows); }).find("no row at line 99"),
            std::string::npos);
}

TEST(StepData, BadRowsAreNamedByFileAndLine) {
  const std::string good = "TINY,4,256,8,2,2,2,8,16,2,256,1024,2,no,full,0.010\n";
  const struct {
    const char* name;
    std::string row;
    const char* error;
  } cases[] = {
      {"cells", "TINY,4,256,8,2,2,2,8,16\n", "9 cells; the header has 16"},
      {"time", "TINY,4,256,8,2,2,2,8,16,2,256,1024,2,no,full,fast\n", "iteration_time_s 'fast' is not a number"},
      {"negative", "TINY,4,256,8,2,2,2,8,16,2,256,1024,2,no,full,-1\n", "iteration_time_s -1 must be positive"},
      {"dp", "TINY,4,256,8,2,2,4,8,16,2,256,1024,2,no,full,0.01\n", "data_parallel 4 x tensor_parallel"},
      {"recompute", "TINY,4,256,8,2,2,2,8,16,2,256,1024,2,no,most,0.01\n", "recompute 'most' is not none"},
      {"sp", "TINY,4,256,8,2,2,2,8,16,2,256,1024,2,maybe,full,0.01\n", "sequence_parallel 'maybe' is not yes or no"},
      {"vpp", "TINY,4,256,8,2,2,2,8,16,2,256,1024,3,no,full,0.01\n", "layers 8 are not whole virtual stages"},
  };
  for (const auto& c : cases) {
    const TempFiles tmp;
    const auto dir = tiny_copy_with_csv(tmp, std::string(kHeader) + good + c.row);
    const StepDataset d = read_step_dataset(dir);
    const std::string err = input_error_of([&] { read_step_rows(d); });
    EXPECT_EQ(err.rfind((dir / "steps.csv").string() + ":3:", 0), 0u) << c.name << ": " << err;
    EXPECT_NE(err.find(c.error), std::string::npos) << c.name << ": " << err;
  }
  {
    // The ep_overlap column (--overlap-moe-expert-parallel-comm): yes or no, nothing else.
    std::string header = kHeader;
    header.insert(header.size() - 1, ",ep_overlap");
    const TempFiles tmp;
    const auto dir = tiny_copy_with_csv(tmp, header + "TINY,4,256,8,2,2,2,8,16,2,256,1024,2,no,full,0.010,yes\n" +
                                                  "TINY,4,256,8,2,2,2,8,16,2,256,1024,2,no,full,0.010,sometimes\n");
    const std::string err = input_error_of([&] { read_step_rows(read_step_dataset(dir)); });
    EXPECT_EQ(err.rfind((dir / "steps.csv").string() + ":3:", 0), 0u) << err;
    EXPECT_NE(err.find("ep_overlap 'sometimes' is not yes or no"), std::string::npos) << err;
  }
  // A row whose architecture is not its preset's: steps.yaml maps it to the wrong model.
  const TempFiles tmp;
  const auto dir = tiny_copy_with_csv(tmp, std::string(kHeader) + good + "TINY,4,512,8,2,2,2,8,16,2,256,1024,2,no,full,0.01\n");
  const StepDataset d = read_step_dataset(dir);
  const std::vector<StepRow> rows = read_step_rows(d);
  EXPECT_NE(input_error_of([&] { prepare_step_row(d, rows[1]); }).find("steps.csv:3:1: hidden_size 512 is not preset tiny-gpt.yaml's 256"),
            std::string::npos)
      << input_error_of([&] { prepare_step_row(d, rows[1]); });
}

}  // namespace
}  // namespace moesim::validate
