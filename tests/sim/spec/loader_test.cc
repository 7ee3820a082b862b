// Tests of the model and hardware loaders: every preset loads with its published numbers, and each
// class of bad input is rejected with file:line:col and the rule.
#include "sim/spec/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using testing::input_error_of;
using testing::replaced;
using testing::TempFiles;

// Line numbers below are the lines of these texts (1-based).
const std::string kModel =
    "schema_version: 1\n"      // 1
    "kind: model\n"            // 2
    "name: test\n"             // 3
    "d_model: 768\n"           // 4
    "d_ffn: 3072\n"            // 5
    "num_experts: 64\n"        // 6
    "top_k: 1\n"               // 7
    "capacity_factor: 1.0\n"   // 8
    "dtype: fp32\n"            // 9
    "activation: gelu\n"       // 10
    "num_layers: 12\n";        // 11

const std::string kGpu =
    "schema_version: 1\n"                // 1
    "kind: gpu\n"                        // 2
    "name: g\n"                          // 3
    "peak_flops:\n"                      // 4
    "  fp32: 19.5 TFLOP/s\n"             // 5
    "hbm_bandwidth: 1555 GB/s\n"         // 6
    "hbm_capacity: 40 GiB\n"             // 7
    "kernel_launch_overhead: 4 us\n"     // 8
    "sm_count: 108\n";                   // 9

const std::string kNode =
    "schema_version: 1\n"                // 1
    "kind: node\n"                       // 2
    "name: n\n"                          // 3
    "gpu: gpu.yaml\n"                    // 4
    "gpus_per_node: 8\n"                 // 5
    "intra_node:\n"                      // 6
    "  bandwidth: 300 GB/s\n"            // 7
    "  latency: 3 us\n"                  // 8
    "pcie:\n"                            // 9
    "  h2d_bandwidth: 25 GB/s\n"         // 10
    "  d2h_bandwidth: 25 GB/s\n"         // 11
    "  latency: 10 us\n";                // 12

const std::string kCluster =
    "schema_version: 1\n"                // 1
    "kind: cluster\n"                    // 2
    "name: c\n"                          // 3
    "node: node.yaml\n"                  // 4
    "num_nodes: 4\n"                     // 5
    "inter_node:\n"                      // 6
    "  nic_bandwidth: 200 Gb/s\n"        // 7
    "  nics_per_node: 8\n"               // 8
    "  latency: 5 us\n";                 // 9

std::string model_error(const TempFiles& t, const std::string& text) {
  const std::string path = t.write("m.yaml", text);
  return input_error_of([&] { load_model_spec(path); });
}

// Writes gpu.yaml, node.yaml and cluster.yaml and returns the error of loading `top`.
std::string hardware_error(const TempFiles& t, const std::string& gpu, const std::string& node,
                           const std::string& cluster, const std::string& top = "cluster.yaml") {
  t.write("gpu.yaml", gpu);
  t.write("node.yaml", node);
  t.write("cluster.yaml", cluster);
  return input_error_of([&] { load_hardware_spec(t.path(top)); });
}

// ---- presets ----

TEST(ModelLoaderTest, ValidFileLoadsWithDefaults) {
  TempFiles t;
  const std::string path = t.write("m.yaml", replaced(kModel, "kind: model\n", ""));
  const ModelSpec m = load_model_spec(path);
  EXPECT_EQ(m.gemm_dtype, DType::kFp32);  // defaults to dtype
  EXPECT_EQ(m.shared_experts.count, 0);
  EXPECT_EQ(m.origin.line, 1);
}

// A model without capacity_factor is dropless: f = 1 for the balanced layout, no cap on routed rows.
TEST(ModelLoaderTest, NoCapacityFactorMeansDropless) {
  TempFiles t;
  const ModelSpec capped = load_model_spec(t.write("m.yaml", replaced(kModel, "capacity_factor: 1.0", "capacity_factor: 1.25")));
  EXPECT_FALSE(capped.dropless);
  EXPECT_DOUBLE_EQ(capped.capacity_factor, 1.25);
  const ModelSpec dropless = load_model_spec(t.write("d.yaml", replaced(kModel, "capacity_factor: 1.0\n", "")));
  EXPECT_TRUE(dropless.dropless);
  EXPECT_DOUBLE_EQ(dropless.capacity_factor, 1.0);
}

TEST(ModelLoaderTest, SyntaxError) {
  TempFiles t;
  const std::string msg = model_error(t, replaced(kModel, "d_ffn: 3072", "d_ffn: [3072"));
  EXPECT_THAT(msg, ::testing::ContainsRegex("m\\.yaml:[0-9]+:[0-9]+: YAML syntax error"));
}

TEST(ModelLoaderTest, DuplicateKey) {
  TempFiles t;
  const std::string msg = model_error(t, kModel + "d_model: 1024\n");
  EXPECT_THAT(msg, HasSubstr("m.yaml:12:1: d_model: duplicate key 'd_model' (first defined at line 4:1)"));
}

TEST(ModelLoaderTest, UnknownKeyWithSuggestion) {
  TempFiles t;
  const std::string msg = model_error(t, replaced(kModel, "d_model:", "d_modle:"));
  EXPECT_THAT(msg, HasSubstr("m.yaml:4:1: unknown key 'd_modle' (did you mean 'd_model'?); "
                             "allowed keys: schema_version, kind, name, source, d_model"));
}

TEST(ModelLoaderTest, WrongType) {
  TempFiles t;
  EXPECT_THAT(model_error(t, replaced(kModel, "d_model: 768", "d_model: {a: 1}")),
              HasSubstr("m.yaml:4:10: d_model: expected an integer, found a map"));
  EXPECT_THAT(model_error(t, replaced(kModel, "capacity_factor: 1.0", "capacity_factor: high")),
              HasSubstr("m.yaml:8:18: capacity_factor: expected a number, found 'high'"));
  EXPECT_THAT(model_error(t, replaced(kModel, "activation: gelu", "activation: [gelu]")),
              HasSubstr("m.yaml:10:13: activation: expected a string, found a list"));
}

TEST(ModelLoaderTest, QuotedNumberIsAString) {
  TempFiles t;
  EXPECT_THAT(model_error(t, replaced(kModel, "d_model: 768", "d_model: \"768\"")),
              HasSubstr("m.yaml:4:10: d_model: expected an integer, found quoted string \"768\""));
}

TEST(ModelLoaderTest, NanAndInf) {
  TempFiles t;
  EXPECT_THAT(model_error(t, replaced(kModel, "capacity_factor: 1.0", "capacity_factor: .nan")),
              HasSubstr("m.yaml:8:18: capacity_factor: must be a finite number, found '.nan'"));
  EXPECT_THAT(model_error(t, replaced(kModel, "capacity_factor: 1.0", "capacity_factor: .inf")),
              HasSubstr("m.yaml:8:18: capacity_factor: must be a finite number, found '.inf'"));
}

TEST(ModelLoaderTest, MissingSchemaVersion) {
  TempFiles t;
  const std::string msg = model_error(t, replaced(kModel, "schema_version: 1\n", ""));
  EXPECT_THAT(msg, HasSubstr("m.yaml:1:1: missing required key 'schema_version' (found none; "
                             "supported schema_version: 1)"));
}

TEST(ModelLoaderTest, UnsupportedSchemaVersion) {
  TempFiles t;
  EXPECT_THAT(model_error(t, replaced(kModel, "schema_version: 1", "schema_version: 2")),
              HasSubstr("m.yaml:1:17: schema_version: unsupported schema_version 2; "
                        "supported schema_version: 1"));
}

TEST(ModelLoaderTest, WrongKind) {
  TempFiles t;
  EXPECT_THAT(model_error(t, replaced(kModel, "kind: model", "kind: gpu")),
              HasSubstr("m.yaml:2:7: kind: this is a gpu file (kind: gpu), which goes to --hardware; --model takes a "
                        "model file"));
  EXPECT_THAT(model_error(t, replaced(kModel, "kind: model", "kind: modle")),
              HasSubstr("unknown kind 'modle'; valid kinds: model, gpu, node, cluster"));
}

TEST(ModelLoaderTest, ZeroAndNegativeSizes) {
  TempFiles t;
  EXPECT_THAT(model_error(t, replaced(kModel, "d_model: 768", "d_model: 0")),
              HasSubstr("m.yaml:4:10: d_model: must be positive (>= 1), found 0"));
  EXPECT_THAT(model_error(t, replaced(kModel, "d_ffn: 3072", "d_ffn: -5")),
              HasSubstr("m.yaml:5:8: d_ffn: must be positive (>= 1), found -5"));
  EXPECT_THAT(model_error(t, replaced(kModel, "num_experts: 64", "num_experts: 0")),
              HasSubstr("num_experts: must be positive (>= 1), found 0"));
  EXPECT_THAT(model_error(t, replaced(kModel, "num_layers: 12", "num_layers: -1")),
              HasSubstr("num_layers: must be positive"));
}

TEST(ModelLoaderTest, TopKOutOfRange) {
  TempFiles t;
  EXPECT_THAT(model_error(t, replaced(kModel, "top_k: 1", "top_k: 65")),
              HasSubstr("m.yaml:7:8: top_k: top_k = 65 must be in [1, num_experts = 64]"));
  EXPECT_THAT(model_error(t, replaced(kModel, "top_k: 1", "top_k: 0")),
              HasSubstr("m.yaml:7:8: top_k: must be positive (>= 1), found 0"));
}

TEST(ModelLoaderTest, CapacityFactorMustBePositive) {
  TempFiles t;
  EXPECT_THAT(model_error(t, replaced(kModel, "capacity_factor: 1.0", "capacity_factor: 0")),
              HasSubstr("m.yaml:8:18: capacity_factor: must be in (0, 1024], found 0"));
  EXPECT_THAT(model_error(t, replaced(kModel, "capacity_factor: 1.0", "capacity_factor: -1")),
              HasSubstr("capacity_factor: must be in (0, 1024], found -1"));
}

TEST(ModelLoaderTest, DTypeAndGemmPrecision) {
  TempFiles t;
  EXPECT_THAT(model_error(t, replaced(kModel, "dtype: fp32", "dtype: tf32")),
              HasSubstr("m.yaml:9:8: dtype: tf32 is a GEMM math mode"));
  EXPECT_THAT(model_error(t, replaced(kModel, "dtype: fp32", "dtype: fp64")),
              HasSubstr("dtype: unknown value 'fp64'; valid values: fp32, bf16, fp16"));
  EXPECT_THAT(model_error(t, kModel + "gemm_precision: bf16\n"),
              HasSubstr("m.yaml:12:17: gemm_precision: gemm_precision bf16 does not fit dtype fp32"));
  EXPECT_THAT(model_error(t, replaced(kModel, "dtype: fp32", "dtype: bf16") + "gemm_precision: tf32\n"),
              HasSubstr("does not fit dtype bf16"));
  EXPECT_THAT(model_error(t, replaced(kModel, "activation: gelu", "activation: silu")),
              HasSubstr("activation: unknown value 'silu'; valid values: relu, gelu, swiglu"));
  // FP8 is a GEMM precision over bf16 or fp16 storage.
  EXPECT_THAT(model_error(t, replaced(kModel, "dtype: fp32", "dtype: fp8")),
              HasSubstr("m.yaml:9:8: dtype: fp8 is a GEMM precision, not a storage type"));
  EXPECT_THAT(model_error(t, kModel + "gemm_precision: fp8\n"),
              HasSubstr("gemm_precision fp8 does not fit dtype fp32 (tf32 needs dtype fp32, fp8 dtype bf16 or fp16"));
  const ModelSpec fp8 = load_model_spec(t.write("f.yaml", replaced(kModel, "dtype: fp32", "dtype: bf16") +
                                                              "gemm_precision: fp8\n"));
  EXPECT_EQ(fp8.dtype, DType::kBf16);
  EXPECT_EQ(fp8.gemm_dtype, DType::kFp8);
}

TEST(ModelLoaderTest, SharedExperts) {
  TempFiles t;
  EXPECT_THAT(model_error(t, kModel + "shared_experts:\n  count: 1\n"),
              HasSubstr("m.yaml:13:3: shared_experts: missing required key 'd_ffn'"));
  EXPECT_THAT(model_error(t, kModel + "shared_experts:\n  count: 1\n  dffn: 4\n"),
              HasSubstr("m.yaml:14:3: shared_experts: unknown key 'dffn' (did you mean 'd_ffn'?)"));
}

TEST(ModelLoaderTest, DeepNesting) {
  TempFiles t;
  const std::string msg =
      model_error(t, kModel + "source: " + std::string(10000, '[') + std::string(10000, ']') + "\n");
  EXPECT_THAT(msg, HasSubstr("m.yaml:12:41: nesting deeper than 32"));
}

TEST(ModelLoaderTest, MissingFile) {
  EXPECT_THAT(input_error_of([] { load_model_spec("/nonexistent/model.yaml"); }),
              HasSubstr("/nonexistent/model.yaml: cannot open file '/nonexistent/model.yaml'"));
}

// ---- hardware files ----

TEST(HardwareLoaderTest, ReferencedFilesAndDefaults) {
  TempFiles t;
  t.write("gpu.yaml", kGpu);
  t.write("node.yaml", kNode);
  const ClusterSpec c = load_hardware_spec(t.write("cluster.yaml", kCluster));
  EXPECT_EQ(c.num_gpus(), 32);
  EXPECT_DOUBLE_EQ(c.inter_node.bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(c.inter_node.efficiency, 1.0);
  EXPECT_DOUBLE_EQ(c.node.intra_node.efficiency, 1.0);
  EXPECT_DOUBLE_EQ(c.node.gpu.hbm_efficiency, 0.85);
  EXPECT_DOUBLE_EQ(c.node.interference.factors[2][3], 0.71);
  EXPECT_EQ(c.node.gpu.peak_flops.size(), 1u);
}

TEST(HardwareLoaderTest, InlineMaps) {
  TempFiles t;
  std::string gpu_inline = "gpu:\n  name: g\n  peak_flops: {fp32: 10 TFLOP/s, bf16: 100 TFLOP/s}\n"
                           "  hbm_bandwidth: 2 TB/s\n  hbm_capacity: 80 GiB\n"
                           "  kernel_launch_overhead: 3 us\n  sm_count: 108\n";
  std::string node = replaced(kNode, "gpu: gpu.yaml\n", gpu_inline);
  node += "interference:\n  memcpy: {with_all: 0.5}\n";
  std::string cluster = "schema_version: 1\nkind: cluster\nname: c\nnum_nodes: 2\n"
                        "inter_node: {bandwidth_per_gpu: 50 GB/s, efficiency: 0.9, latency: 2 us}\n"
                        "node:\n";
  // Indent the node file under `node:` (without its header keys, which inline maps may omit).
  std::string body = replaced(replaced(node, "schema_version: 1\n", ""), "kind: node\n", "");
  std::string indented;
  std::size_t start = 0;
  while (start < body.size()) {
    const std::size_t end = body.find('\n', start);
    indented += "  " + body.substr(start, end - start + 1);
    start = end + 1;
  }
  const ClusterSpec c = load_hardware_spec(t.write("c.yaml", cluster + indented));
  EXPECT_EQ(c.num_gpus(), 16);
  EXPECT_DOUBLE_EQ(c.inter_node.effective_bandwidth(), 45e9);
  EXPECT_DOUBLE_EQ(c.node.gpu.peak_flops.at(DType::kBf16), 100e12);
  EXPECT_DOUBLE_EQ(c.node.interference.factors[2][3], 0.5);
  EXPECT_DOUBLE_EQ(c.node.interference.factors[2][0], 0.8);
}

TEST(HardwareLoaderTest, MissingUnit) {
  TempFiles t;
  const std::string msg = hardware_error(
      t, replaced(kGpu, "hbm_bandwidth: 1555 GB/s", "hbm_bandwidth: 1555"), kNode, kCluster);
  EXPECT_THAT(msg, HasSubstr("gpu.yaml:6:16: hbm_bandwidth: needs a unit, e.g. '25 GB/s'; "
                             "accepted units:"));
}

TEST(HardwareLoaderTest, UnknownUnit) {
  TempFiles t;
  const std::string msg = hardware_error(
      t, replaced(kGpu, "hbm_capacity: 40 GiB", "hbm_capacity: 40 GiGs"), kNode, kCluster);
  EXPECT_THAT(msg, HasSubstr("gpu.yaml:7:15: hbm_capacity: unknown unit 'GiGs'"));
  EXPECT_THAT(msg, HasSubstr("accepted units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"));
}

TEST(HardwareLoaderTest, BitsBytesHint) {
  TempFiles t;
  const std::string msg = hardware_error(
      t, kGpu, kNode, replaced(kCluster, "nic_bandwidth: 200 Gb/s", "nic_bandwidth: 200 GB/s"));
  EXPECT_THAT(msg, HasSubstr("cluster.yaml:7:18: inter_node.nic_bandwidth: '200 GB/s' is "
                             "implausible"));
  EXPECT_THAT(msg, HasSubstr("did you mean Gb/s instead of GB/s?"));
}

TEST(HardwareLoaderTest, ZeroSizeAndBadEfficiency) {
  TempFiles t;
  EXPECT_THAT(hardware_error(t, replaced(kGpu, "40 GiB", "0 GiB"), kNode, kCluster),
              HasSubstr("gpu.yaml:7:15: hbm_capacity: must be at least 1 B"));
  EXPECT_THAT(hardware_error(t, kGpu, replaced(kNode, "gpus_per_node: 8", "gpus_per_node: 0"),
                             kCluster),
              HasSubstr("node.yaml:5:16: gpus_per_node: must be positive"));
  EXPECT_THAT(hardware_error(t, kGpu, kNode, replaced(kCluster, "  latency: 5 us", "  efficiency: 1.5\n  latency: 5 us")),
              HasSubstr("cluster.yaml:9:15: inter_node.efficiency: must be in (0, 1], found 1.5"));
  EXPECT_THAT(hardware_error(t, kGpu, kNode + "interference:\n  computation: {with_all: 0}\n",
                             kCluster),
              HasSubstr("interference.computation.with_all: must be in (0, 1], found 0"));
}

// pcie.copy_engines and host_memory (docs/concepts.md, "Host copies"): documented defaults when
// absent; a count below 1, a bandwidth of 0 and an efficiency outside (0, 1] are refused at their line.
TEST(HardwareLoaderTest, HostCopyKeys) {
  TempFiles t;
  t.write("gpu.yaml", kGpu);
  t.write("node.yaml", kNode);
  const ClusterSpec d = load_hardware_spec(t.write("cluster.yaml", kCluster));
  EXPECT_EQ(d.node.copy_engines, 1);
  EXPECT_DOUBLE_EQ(d.node.host_memory.bandwidth, 409.6e9);
  EXPECT_DOUBLE_EQ(d.node.host_memory.efficiency, 0.75);
  t.write("node.yaml", kNode + "  copy_engines: 2\nhost_memory: {bandwidth: 200 GB/s}\n");
  const ClusterSpec c = load_hardware_spec(t.path("cluster.yaml"));
  EXPECT_EQ(c.node.copy_engines, 2);
  EXPECT_DOUBLE_EQ(c.node.host_memory.effective_bandwidth(), 200e9);
  EXPECT_THAT(hardware_error(t, kGpu, kNode + "  copy_engines: 0\n", kCluster),
              HasSubstr("node.yaml:13:17: pcie.copy_engines: must be positive (>= 1), found 0"));
  EXPECT_THAT(hardware_error(t, kGpu, kNode + "host_memory: {bandwidth: 0 GB/s}\n", kCluster),
              HasSubstr("node.yaml:13:26: host_memory.bandwidth: must be positive"));
  EXPECT_THAT(hardware_error(t, kGpu, kNode + "host_memory:\n  bandwidth: 400 GB/s\n  efficiency: 75\n", kCluster),
              HasSubstr("node.yaml:15:15: host_memory.efficiency: must be in (0, 1], found 75"));
}

TEST(HardwareLoaderTest, MissingReferencedFile) {
  TempFiles t;
  t.write("node.yaml", replaced(kNode, "gpu: gpu.yaml", "gpu: ../gpus/nope.yaml"));
  const std::string msg = input_error_of([&] { load_hardware_spec(t.path("node.yaml")); });
  EXPECT_THAT(msg, HasSubstr("node.yaml:4:6: gpu: cannot open referenced gpu file"));
  EXPECT_THAT(msg, HasSubstr("nope.yaml"));
}

TEST(HardwareLoaderTest, ReferenceCycle) {
  TempFiles t;
  t.write("node.yaml", replaced(kNode, "gpu: gpu.yaml", "gpu: node.yaml"));
  EXPECT_THAT(input_error_of([&] { load_hardware_spec(t.path("node.yaml")); }),
              HasSubstr("node.yaml:4:6: gpu: reference cycle:"));
  t.write("cluster.yaml", replaced(kCluster, "node: node.yaml", "node: ./cluster.yaml"));
  EXPECT_THAT(input_error_of([&] { load_hardware_spec(t.path("cluster.yaml")); }),
              HasSubstr("cluster.yaml:4:7: node: reference cycle:"));
}

TEST(HardwareLoaderTest, ErrorInReferencedFileNamesThatFile) {
  TempFiles t;
  const std::string msg = hardware_error(
      t, replaced(kGpu, "  fp32: 19.5 TFLOP/s", "  fp32: 19.5 TFLOP/s\n  fp64: 9.7 TFLOP/s"), kNode,
      kCluster);
  EXPECT_THAT(msg, HasSubstr(t.path("gpu.yaml") + ":6:3: peak_flops: unknown key 'fp64'"));
}

TEST(HardwareLoaderTest, ReferencedFileMissingHeader) {
  TempFiles t;
  EXPECT_THAT(hardware_error(t, replaced(kGpu, "kind: gpu", "kind: node"), kNode, kCluster),
              HasSubstr("gpu.yaml:2:7: kind: this is a node file (kind: node), which goes to --hardware; the gpu: key "
                        "of node.yaml takes a gpu file"));
  EXPECT_THAT(hardware_error(t, replaced(kGpu, "schema_version: 1\n", ""), kNode, kCluster),
              HasSubstr("gpu.yaml:1:1: missing required key 'schema_version'"));
}

TEST(HardwareLoaderTest, TopLevelKindRequired) {
  TempFiles t;
  EXPECT_THAT(hardware_error(t, kGpu, kNode, replaced(kCluster, "kind: cluster\n", "")),
              HasSubstr("cluster.yaml:1:1: missing required key 'kind'; valid kinds:"));
  const std::string model = t.write("m.yaml", kModel);
  EXPECT_THAT(input_error_of([&] { load_hardware_spec(model); }),
              HasSubstr("this is a model file"));
}

TEST(HardwareLoaderTest, LinksRequiredForMultiGpu) {
  TempFiles t;
  const std::string no_intra =
      replaced(kNode, "intra_node:\n  bandwidth: 300 GB/s\n  latency: 3 us\n", "");
  EXPECT_THAT(hardware_error(t, kGpu, no_intra, kCluster),
              HasSubstr("node.yaml:1:1: missing required key 'intra_node' (needed when "
                        "gpus_per_node = 8 > 1)"));
  const std::string no_inter =
      replaced(kCluster, "inter_node:\n  nic_bandwidth: 200 Gb/s\n  nics_per_node: 8\n  latency: 5 us\n", "");
  EXPECT_THAT(hardware_error(t, kGpu, kNode, no_inter),
              HasSubstr("missing required key 'inter_node' (needed when num_nodes = 4 > 1)"));
  // One node of one GPU needs neither.
  t.write("gpu.yaml", kGpu);
  t.write("node.yaml", replaced(no_intra, "gpus_per_node: 8", "gpus_per_node: 1"));
  const std::string single = t.write("cluster.yaml", replaced(no_inter, "num_nodes: 4", "num_nodes: 1"));
  EXPECT_NO_THROW({
    const ClusterSpec c = load_hardware_spec(single);
    EXPECT_EQ(c.num_gpus(), 1);
  });
}

TEST(HardwareLoaderTest, InterNodeBandwidthForms) {
  TempFiles t;
  EXPECT_THAT(hardware_error(t, kGpu, kNode,
                             replaced(kCluster, "  nics_per_node: 8\n",
                                      "  nics_per_node: 8\n  bandwidth_per_gpu: 25 GB/s\n")),
              HasSubstr("give either bandwidth_per_gpu or nic_bandwidth + nics_per_node, not both"));
  EXPECT_THAT(hardware_error(t, kGpu, kNode, replaced(kCluster, "  nics_per_node: 8\n", "")),
              HasSubstr("cluster.yaml:7:3: inter_node: missing required key 'nics_per_node'"));
  EXPECT_THAT(hardware_error(t, kGpu, kNode, replaced(kCluster, "  nic_bandwidth: 200 Gb/s\n  nics_per_node: 8\n", "")),
              HasSubstr("inter_node: missing bandwidth"));
}

TEST(HardwareLoaderTest, GpuNeedsFp32) {
  TempFiles t;
  EXPECT_THAT(hardware_error(t, replaced(kGpu, "  fp32: 19.5 TFLOP/s", "  bf16: 312 TFLOP/s"),
                             kNode, kCluster),
              HasSubstr("gpu.yaml:5:3: peak_flops: missing required key 'fp32'"));
}

TEST(HardwareLoaderTest, DeepNestingInReferencedFile) {
  TempFiles t;
  const std::string msg =
      hardware_error(t, kGpu + "source: " + std::string(10000, '{'), kNode, kCluster);
  EXPECT_THAT(msg, HasSubstr("gpu.yaml:10:41: nesting deeper than 32"));
}

}  // namespace
}  // namespace moesim

namespace moesim {
namespace {

TEST(RunFile, LoadsTheBundledExample) {
  const RunFile f = load_run_spec(std::string(MOESIM_SOURCE_DIR) + "/examples/quickstart.yaml");
  EXPECT_EQ(f.run.tokens_per_gpu, 4096);
  EXPECT_EQ(f.run.num_chunks, 4);
  EXPECT_EQ(f.run.order, OrderPolicy::kMPipeMoE);
  ASSERT_TRUE(f.model_path.has_value());
  EXPECT_NE(f.model_path->find("models/moe-gpt-s-64e.yaml"), std::string::npos);
  // The referenced files load.
  EXPECT_EQ(load_model_spec(*f.model_path).d_model, 768);
  EXPECT_EQ(load_hardware_spec(*f.hardware_path).num_gpus(), 64);
}

TEST(RunFile, RejectsBadValuesWithTheirPosition) {
  const auto dir = std::filesystem::temp_directory_path() / ("moesim_run_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    const auto p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  };
  const std::string head = "schema_version: 1\nkind: run\n";
  const auto expect_error = [&](const std::string& path, const std::string& where, const std::string& what) {
    try {
      load_run_spec(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path + where), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error(write("order.yaml", head + "tokens_per_gpu: 8\norder: zigzag\n"), ":4:8:", "mpipemoe");
  expect_error(write("chunks.yaml", head + "tokens_per_gpu: 8\nnum_chunks: 0\n"), ":4:13:", "num_chunks");
  expect_error(write("tokens.yaml", head + "tokens_per_gpu: -1\n"), ":3:17:", "tokens_per_gpu");
  expect_error(write("missing.yaml", head + "num_chunks: 2\n"), ":", "tokens_per_gpu");
  expect_error(write("kind.yaml", "schema_version: 1\nkind: model\ntokens_per_gpu: 8\n"), ":2:7:", "run");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moesim
