#include "sim/spec/model_sections.h"

#include <string>

#include "sim/spec/file_kind.h"
#include "sim/spec/hardware_sections.h"

namespace moesim::detail {
namespace {

constexpr std::int64_t kMaxWidth = std::int64_t{1} << 22;  // any hidden size or rank
constexpr std::int64_t kMaxVocab = std::int64_t{1} << 24;
constexpr std::int64_t kMaxSeq = std::int64_t{1} << 24;
constexpr int kMaxHeads = 1 << 16;
constexpr int kMaxMtpDepth = 16;

const std::vector<std::string> kArchitectureKeys = {
    "dense_layers", "moe_interval", "dense_d_ffn", "vocab_size", "tied_embeddings", "seq_len",
    "positions",    "norm",         "linear_bias", "mtp_depth",  "dropout",  "attention"};
const std::vector<std::string> kAttentionKeys = {"type",          "num_heads",        "num_kv_heads",
                                                 "head_dim",      "qk_norm",          "sinks",
                                                 "q_lora_rank",   "kv_lora_rank",     "qk_nope_head_dim",
                                                 "qk_rope_head_dim", "v_head_dim"};

bool flag(const YamlMap& m, std::string_view key) {
  const auto v = m.get(key);
  return v && v->as_bool();
}

void forbid(const YamlMap& m, std::initializer_list<std::string_view> keys, const std::string& why) {
  for (std::string_view k : keys)
    if (auto v = m.get(k)) v->fail("'" + std::string(k) + "' does not apply: " + why);
}

void read_mla(const YamlMap& m, AttentionSpec& a) {
  forbid(m, {"num_kv_heads", "head_dim", "qk_norm", "sinks"}, "MLA attention has latent ranks and per-part head sizes");
  if (auto q = m.get("q_lora_rank")) a.q_lora_rank = q->as_int(1, kMaxWidth);
  a.kv_lora_rank = m.require("kv_lora_rank").as_int(1, kMaxWidth);
  a.qk_nope_head_dim = m.require("qk_nope_head_dim").as_int(1, kMaxWidth);
  a.qk_rope_head_dim = m.require("qk_rope_head_dim").as_int(1, kMaxWidth);
  a.v_head_dim = m.require("v_head_dim").as_int(1, kMaxWidth);
}

void read_grouped(const YamlMap& m, AttentionSpec& a, std::int64_t d_model) {
  forbid(m, {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"},
         "only MLA attention (type: mla) has latent ranks");
  if (a.kind == AttentionKind::kMha) {
    a.num_kv_heads = a.num_heads;
    if (auto kv = m.get("num_kv_heads"); kv && kv->as_int(1, kMaxHeads) != a.num_heads)
      kv->fail("MHA has as many key/value heads as query heads (" + std::to_string(a.num_heads) +
               "); fewer is GQA (type: gqa)");
  } else {
    const YamlValue kv = m.require("num_kv_heads");
    a.num_kv_heads = static_cast<int>(kv.as_int(1, kMaxHeads));
    if (a.num_heads % a.num_kv_heads != 0)
      kv.fail("num_kv_heads = " + std::to_string(a.num_kv_heads) + " must divide num_heads = " +
              std::to_string(a.num_heads) + " (each key/value head serves a whole group of query heads)");
  }
  if (auto hd = m.get("head_dim")) {
    a.head_dim = hd->as_int(1, kMaxWidth);
  } else if (d_model % a.num_heads != 0) {
    m.fail("missing required key 'head_dim' (needed when num_heads = " + std::to_string(a.num_heads) +
           " does not divide d_model = " + std::to_string(d_model) + ")");
  } else {
    a.head_dim = d_model / a.num_heads;
  }
  a.qk_norm = flag(m, "qk_norm");
  a.sinks = flag(m, "sinks");
}

AttentionSpec read_attention(const YamlValue& v, std::int64_t d_model) {
  const YamlMap m = v.as_map(kAttentionKeys);
  AttentionSpec a;
  a.kind = m.require("type").as_enum(parse_attention_kind, attention_kind_names());
  a.num_heads = static_cast<int>(m.require("num_heads").as_int(1, kMaxHeads));
  if (a.kind == AttentionKind::kMla) {
    read_mla(m, a);
  } else {
    read_grouped(m, a, d_model);
  }
  return a;
}

// dense_d_ffn is needed exactly when some layer is dense.
void read_dense_mlp(const YamlMap& m, const ModelSpec& model, ArchitectureSpec& a) {
  const bool has_dense = a.dense_layers > 0 || (a.moe_interval > 1 && a.dense_layers + 1 < model.num_layers);
  if (auto ff = m.get("dense_d_ffn")) {
    if (!has_dense) ff->fail("dense_d_ffn does not apply: every layer is an MoE layer (dense_layers = 0, moe_interval = 1)");
    a.dense_d_ffn = ff->as_int(1, kMaxWidth);
  } else if (has_dense) {
    m.fail("missing required key 'dense_d_ffn' (needed when the model has dense layers)");
  }
}

}  // namespace

ArchitectureSpec read_architecture(const YamlValue& v, const ModelSpec& model) {
  const YamlMap m = v.as_map(kArchitectureKeys);
  ArchitectureSpec a;
  a.present = true;
  if (auto d = m.get("dense_layers")) a.dense_layers = static_cast<int>(d->as_int(0, model.num_layers));
  if (auto i = m.get("moe_interval")) a.moe_interval = static_cast<int>(i->as_int(1, model.num_layers));
  read_dense_mlp(m, model, a);
  a.vocab_size = m.require("vocab_size").as_int(1, kMaxVocab);
  a.tied_embeddings = flag(m, "tied_embeddings");
  a.seq_len = m.require("seq_len").as_int(1, kMaxSeq);
  if (auto p = m.get("positions")) a.positions = p->as_enum(parse_position_embedding, position_embedding_names());
  if (auto n = m.get("norm")) a.norm = n->as_enum(parse_norm_kind, norm_kind_names());
  a.linear_bias = flag(m, "linear_bias");
  if (auto t = m.get("mtp_depth")) a.mtp_depth = static_cast<int>(t->as_int(0, kMaxMtpDepth));
  if (auto d = m.get("dropout")) {
    a.dropout = d->as_double(0, 1);
    if (a.dropout >= 1) d->fail("dropout must be below 1 (a probability of dropping an element; 0 for none)");
  }
  a.attention = read_attention(m.require("attention"), model.d_model);
  if (a.linear_bias && a.attention.kind == AttentionKind::kMla)
    m.require("linear_bias").fail("linear_bias with MLA attention: which MLA projections carry biases is not defined");
  return a;
}

PublishedParameters read_published_parameters(const YamlValue& v) {
  const YamlMap m = v.as_map({"total", "active", "active_counts_embedding", "source"});
  PublishedParameters p;
  p.total = m.require("total").as_double(0, 1e15, true);
  if (auto a = m.get("active")) {
    p.active = a->as_double(0, p.total);
    if (p.active <= 0) a->fail("active must be > 0 (leave the key out when it is not published)");
  }
  p.active_counts_embedding = flag(m, "active_counts_embedding");
  p.source = m.require("source").as_name();
  return p;
}

namespace {


// The keys of the MoE layer: required when the model has MoE layers, refused when every layer is dense.
const std::vector<std::string_view> kMoeLayerKeys = {"d_ffn", "num_experts", "top_k", "capacity_factor",
                                                     "shared_experts", "router_groups"};

// router_groups: {num_groups, group_topk}: the groups divide the experts, at most top_k groups are
// chosen, and the chosen groups hold at least top_k experts.
ModelSpec::RouterGroups read_router_groups(const YamlValue& v, const ModelSpec& model) {
  const YamlMap g = v.as_map({"num_groups", "group_topk"});
  const YamlValue groups = g.require("num_groups");
  ModelSpec::RouterGroups out;
  out.num_groups = static_cast<int>(groups.as_int(1, model.num_experts));
  if (model.num_experts % out.num_groups != 0)
    groups.fail("num_groups = " + std::to_string(out.num_groups) + " must divide num_experts = " +
                std::to_string(model.num_experts));
  const YamlValue topk = g.require("group_topk");
  out.group_topk = static_cast<int>(topk.as_int(1, out.num_groups));
  if (out.group_topk > model.top_k)
    topk.fail("group_topk = " + std::to_string(out.group_topk) + " must be at most top_k = " +
              std::to_string(model.top_k) + ": a token's experts fill at most top_k groups");
  const int per_group = model.num_experts / out.num_groups;
  if (static_cast<std::int64_t>(out.group_topk) * per_group < model.top_k)
    topk.fail("group_topk = " + std::to_string(out.group_topk) + " groups of " + std::to_string(per_group) +
              " experts hold fewer than top_k = " + std::to_string(model.top_k) + " experts");
  return out;
}

void read_moe_layer(const YamlMap& m, ModelSpec& model) {
  model.d_ffn = m.require("d_ffn").as_int(1, 1 << 22);
  model.num_experts = static_cast<int>(m.require("num_experts").as_int(1, 1 << 20));
  const YamlValue top_k = m.require("top_k");
  model.top_k = static_cast<int>(top_k.as_int(1, 1 << 20));
  if (model.top_k > model.num_experts) {
    top_k.fail("top_k = " + std::to_string(model.top_k) + " must be in [1, num_experts = " +
               std::to_string(model.num_experts) + "]");
  }
  // Absent: a dropless model (ModelSpec::dropless), whose balanced layout is f = 1.
  if (auto f = m.get("capacity_factor"))
    model.capacity_factor = f->as_double(0, 1024, true);
  else
    model.dropless = true;
  if (auto s = m.get("shared_experts")) {
    const YamlMap se = s->as_map({"count", "d_ffn"});
    model.shared_experts.count = static_cast<int>(se.require("count").as_int(0, 1024));
    if (auto d = se.get("d_ffn")) {
      model.shared_experts.d_ffn = d->as_int(1, 1 << 22);
    } else if (model.shared_experts.count > 0) {
      se.fail("missing required key 'd_ffn' (needed when count > 0)");
    }
  }
  if (auto g = m.get("router_groups")) model.router_groups = read_router_groups(*g, model);
}

void read_model_dtypes(const YamlMap& m, ModelSpec& model) {
  const YamlValue dtype = m.require("dtype");
  model.dtype = dtype.as_enum(parse_dtype, {"fp32", "bf16", "fp16"});
  if (model.dtype == DType::kTf32) {
    dtype.fail("tf32 is a GEMM math mode, not a storage type; use dtype: fp32 with "
               "gemm_precision: tf32 (valid dtypes: fp32, bf16, fp16)");
  }
  if (model.dtype == DType::kFp8) {
    dtype.fail("fp8 is a GEMM precision, not a storage type; use dtype: bf16 (or fp16) with "
               "gemm_precision: fp8 (valid dtypes: fp32, bf16, fp16)");
  }
  model.gemm_dtype = model.dtype;
  if (auto g = m.get("gemm_precision")) {
    model.gemm_dtype = g->as_enum(parse_dtype, dtype_names());
    const bool ok = model.gemm_dtype == model.dtype ||
                    (model.dtype == DType::kFp32 && model.gemm_dtype == DType::kTf32) ||
                    ((model.dtype == DType::kBf16 || model.dtype == DType::kFp16) && model.gemm_dtype == DType::kFp8);
    if (!ok) {
      g->fail("gemm_precision " + std::string(to_string(model.gemm_dtype)) +
              " does not fit dtype " + std::string(to_string(model.dtype)) +
              " (tf32 needs dtype fp32, fp8 dtype bf16 or fp16; otherwise it must equal dtype)");
    }
  }
}

}  // namespace

const std::vector<std::string>& model_keys() {
  static const std::vector<std::string> keys =
      with_header({"d_model", "d_ffn", "num_experts", "top_k", "capacity_factor", "dtype", "gemm_precision",
                   "activation", "num_layers", "shared_experts", "router_groups", "architecture",
                   "published_parameters"});
  return keys;
}

ModelSpec read_model_file(const YamlValue& root) {
  check_file_kind(root, {"model"}, "--model");
  const YamlMap m = root.as_map(model_keys());
  check_header(m, "model", true, false);
  ModelSpec model;
  model.name = m.require("name").as_name();
  model.origin = origin_of(m);
  model.d_model = m.require("d_model").as_int(1, 1 << 20);
  read_model_dtypes(m, model);
  model.activation = m.require("activation").as_enum(parse_activation, activation_names());
  model.num_layers = static_cast<int>(m.require("num_layers").as_int(1, 100000));
  if (auto a = m.get("architecture")) model.architecture = read_architecture(*a, model);
  if (model.architecture.present && model.architecture.dense_layers == model.num_layers) {
    for (std::string_view key : kMoeLayerKeys)
      if (auto v = m.get(key))
        v->fail("'" + std::string(key) + "' does not apply: every layer is dense (architecture.dense_layers = "
                "num_layers = " + std::to_string(model.num_layers) + "), so the model has no MoE layer");
  } else {
    read_moe_layer(m, model);
  }
  if (auto p = m.get("published_parameters")) {
    if (!model.architecture.present)
      p->fail("published_parameters need an architecture section to be compared with (docs/models.md)");
    model.published = read_published_parameters(*p);
  }
  return model;
}

}  // namespace moesim::detail
