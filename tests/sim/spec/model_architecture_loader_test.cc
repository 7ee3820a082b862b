// Reading a model file's architecture and published_parameters sections: what they give, and every
// rule a bad one breaks, named with its line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/spec/loader.h"
#include "tests/sim/spec/spec_test_util.h"

namespace moesim {
namespace {

using moesim::testing::input_error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kHead =
    "schema_version: 1\nkind: model\nname: T\nd_model: 64\ndtype: bf16\nactivation: swiglu\nnum_layers: 4\n";
const std::string kMoe = "d_ffn: 32\nnum_experts: 4\ntop_k: 2\ncapacity_factor: 1.0\n";
const std::string kGqa = "  attention:\n    type: gqa\n    num_heads: 8\n    num_kv_heads: 2\n";

ModelSpec parse(const std::string& text) { return parse_model_spec(text, "m.yaml"); }

std::string error_of(const std::string& text) {
  return input_error_of([&] { parse(text); });
}

TEST(ModelArchitectureLoader, ReadsTheWholeNetwork) {
  const ModelSpec m = parse(kHead + kMoe +
                            "architecture:\n  dense_layers: 1\n  moe_interval: 2\n  dense_d_ffn: 128\n"
                            "  vocab_size: 1000\n  seq_len: 256\n  tied_embeddings: true\n  mtp_depth: 1\n" +
                            kGqa + "    qk_norm: true\n");
  const ArchitectureSpec& a = m.architecture;
  EXPECT_TRUE(a.present);
  EXPECT_EQ(a.dense_layers, 1);
  EXPECT_EQ(a.moe_interval, 2);
  EXPECT_EQ(a.dense_d_ffn, 128);
  EXPECT_TRUE(a.tied_embeddings);
  EXPECT_EQ(a.mtp_depth, 1);
  EXPECT_EQ(a.attention.kind, AttentionKind::kGqa);
  EXPECT_EQ(a.attention.num_kv_heads, 2);
  EXPECT_EQ(a.attention.head_dim, 8);  // d_model / num_heads
  EXPECT_TRUE(a.attention.qk_norm);
  EXPECT_EQ(a.norm, NormKind::kRmsNorm);
  EXPECT_EQ(a.positions, PositionEmbedding::kRope);
}

TEST(ModelArchitectureLoader, ADenseModelNeedsNoMoeKeysAndRefusesThem) {
  const std::string dense = kHead + "architecture:\n  dense_layers: 4\n  dense_d_ffn: 128\n  vocab_size: 10\n"
                                    "  seq_len: 8\n  attention:\n    type: mha\n    num_heads: 4\n";
  const ModelSpec m = parse(dense);
  EXPECT_FALSE(m.has_moe_layers());
  EXPECT_EQ(m.architecture.attention.num_kv_heads, 4);
  EXPECT_THAT(error_of(dense + "num_experts: 4\n"),
              AllOf(HasSubstr("m.yaml:16:14:"), HasSubstr("'num_experts' does not apply: every layer is dense")));
}

TEST(ModelArchitectureLoader, BadSectionsNameTheLineAndTheRule) {
  const std::string arch = kHead + kMoe + "architecture:\n  vocab_size: 10\n  seq_len: 8\n";
  EXPECT_THAT(error_of(arch + "  attention:\n    type: gqa\n    num_heads: 8\n    num_kv_heads: 3\n"),
              AllOf(HasSubstr("m.yaml:18:"), HasSubstr("must divide num_heads = 8")));
  EXPECT_THAT(error_of(arch + "  attention:\n    type: mha\n    num_heads: 8\n    num_kv_heads: 2\n"),
              HasSubstr("fewer is GQA"));
  EXPECT_THAT(error_of(arch + "  attention:\n    type: mha\n    num_heads: 6\n"),
              HasSubstr("missing required key 'head_dim' (needed when num_heads = 6 does not divide d_model = 64)"));
  EXPECT_THAT(error_of(arch + "  attention:\n    type: mla\n    num_heads: 8\n    head_dim: 8\n"),
              HasSubstr("'head_dim' does not apply: MLA attention"));
  EXPECT_THAT(error_of(arch + kGqa + "    kv_lora_rank: 8\n"), HasSubstr("only MLA attention"));
  EXPECT_THAT(error_of(arch + "  attention:\n    type: sparse\n    num_heads: 8\n"),
              HasSubstr("valid values: mha, gqa, mla"));
  EXPECT_THAT(error_of(arch + "  dense_layers: 1\n" + kGqa),
              HasSubstr("missing required key 'dense_d_ffn' (needed when the model has dense layers)"));
  EXPECT_THAT(error_of(arch + "  dense_d_ffn: 16\n" + kGqa), HasSubstr("dense_d_ffn does not apply"));
  EXPECT_THAT(error_of(arch + "  dense_layers: 5\n  dense_d_ffn: 16\n" + kGqa), HasSubstr("dense_layers"));
  EXPECT_THAT(error_of(kHead + kMoe + "architecture:\n  seq_len: 8\n" + kGqa),
              HasSubstr("missing required key 'vocab_size'"));
  EXPECT_THAT(error_of(kHead + "architecture:\n  vocab_size: 10\n  seq_len: 8\n" + kGqa),
              HasSubstr("missing required key 'd_ffn'"));
}

TEST(ModelArchitectureLoader, DropoutIsAProbabilityBelowOne) {
  const std::string arch = kHead + kMoe + "architecture:\n  vocab_size: 10\n  seq_len: 8\n" + kGqa;
  EXPECT_EQ(parse(arch).architecture.dropout, 0);
  EXPECT_DOUBLE_EQ(parse(arch + "  dropout: 0.1\n").architecture.dropout, 0.1);
  EXPECT_THAT(error_of(arch + "  dropout: 1\n"), AllOf(HasSubstr("m.yaml:19:"), HasSubstr("dropout must be below 1")));
  EXPECT_THAT(error_of(arch + "  dropout: -0.1\n"), HasSubstr("m.yaml:19:"));
}

TEST(ModelArchitectureLoader, PublishedParameters) {
  const std::string arch = kHead + kMoe + "architecture:\n  vocab_size: 10\n  seq_len: 8\n" + kGqa;
  const ModelSpec m = parse(arch + "published_parameters:\n  total: 1.5e9\n  active: 2e8\n"
                                   "  active_counts_embedding: true\n  source: a paper\n");
  ASSERT_TRUE(m.published);
  EXPECT_DOUBLE_EQ(m.published->total, 1.5e9);
  EXPECT_DOUBLE_EQ(m.published->active, 2e8);
  EXPECT_TRUE(m.published->active_counts_embedding);
  EXPECT_THAT(error_of(arch + "published_parameters:\n  total: 1e9\n  active: 2e9\n  source: x\n"),
              HasSubstr("active"));
  EXPECT_THAT(error_of(arch + "published_parameters:\n  total: 1e9\n"), HasSubstr("missing required key 'source'"));
  EXPECT_THAT(error_of(kHead + kMoe + "published_parameters:\n  total: 1e9\n  source: x\n"),
              HasSubstr("need an architecture section"));
}

}  // namespace
}  // namespace moesim
