#include "sim/graph/graph_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/core/error.h"
#include "sim/graph/graph_algorithms.h"
#include "sim/build/moe_graph.h"
#include "tests/sim/build/test_specs.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;

std::string built_json(OrderPolicy p, bool representative = true) {
  ModelSpec m = testing::small_model();
  m.shared_experts = {1, 32};
  RunSpec r = testing::small_run(3, p, 4);
  r.num_moe_layers = 2;
  return export_graph_json(build_moe_graph(m, testing::small_cluster(), r, BuildOptions{representative}));
}

void expect_import_error(const std::string& text, const std::string& fragment) {
  try {
    import_graph_json(text, "g.json");
    ADD_FAILURE() << "accepted; expected an error containing: " << fragment;
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, "g.json");
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

TEST(GraphJson, RoundTripIsByteIdenticalForEveryPolicy) {
  for (OrderPolicy p : testing::kAllPolicies) {
    for (bool rep : {true, false}) {
      const std::string once = built_json(p, rep);
      const TaskGraph g = import_graph_json(once, "g.json");
      EXPECT_EQ(export_graph_json(g), once) << to_string(p);
    }
  }
}

TEST(GraphJson, ImportRestoresTasksAndEdges) {
  ModelSpec m = testing::small_model();
  const TaskGraph g = build_moe_graph(m, testing::small_cluster(), testing::small_run(2));
  const TaskGraph h = import_graph_json(export_graph_json(g), "g.json");
  ASSERT_EQ(h.num_tasks(), g.num_tasks());
  // Stream edges are re-derived and data edges restored; only the order per source may differ.
  auto sorted = [](std::vector<std::tuple<TaskIndex, TaskIndex, DepKind>> e) {
    std::sort(e.begin(), e.end());
    return e;
  };
  EXPECT_EQ(sorted(h.edges()), sorted(g.edges()));
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    EXPECT_EQ(h.task(i).id, g.task(i).id);
    EXPECT_EQ(h.task(i).kind(), g.task(i).kind());
    EXPECT_EQ(h.task(i).stream, g.task(i).stream);
  }
}

TEST(GraphJson, SchemaShape) {
  const auto j = nlohmann::json::parse(built_json(OrderPolicy::kMPipeMoE));
  EXPECT_EQ(j["schema_version"], 3);
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["simulated_ranks"], nlohmann::json::array({0}));
  EXPECT_EQ(j["groups"], nlohmann::json::parse("[[0,1,2,3]]"));
  const auto& gate = j["tasks"][0];
  EXPECT_EQ(gate["id"], "L0.fwd.gate");
  EXPECT_EQ(gate["kind"], "gemm");
  EXPECT_EQ(gate["op"], "gemm");
  EXPECT_EQ(j["tasks"][1]["id"], "L0.fwd.route");
  EXPECT_EQ(j["tasks"][1]["op"], "top_k");
  EXPECT_EQ(gate["stream"], "compute");
  EXPECT_EQ(gate["pass"], "fwd");
  EXPECT_EQ(gate["dtype"], "bf16");
  EXPECT_EQ(gate["m"], 96);
  for (const auto& e : j["edges"]) EXPECT_NE(e[2], "stream");
  EXPECT_NE(built_json(OrderPolicy::kMPipeMoE).find("\n  \"world_size\""), std::string::npos);
}

// Each GEMM carries the operand layout the runtime issues it in: the forward nn, the backward's data
// gradients nt (dY W^T) and weight gradients tn (X^T dY); a file without "layout" reads as nn.
TEST(GraphJson, GemmsCarryTheirLayout) {
  const auto j = nlohmann::json::parse(built_json(OrderPolicy::kMPipeMoE));
  std::map<std::string, std::string> layouts;
  for (const auto& t : j["tasks"])
    if (t["kind"] == "gemm") layouts[t["id"].get<std::string>()] = t["layout"].get<std::string>();
  EXPECT_EQ(layouts.at("L0.fwd.gate"), "nn");
  EXPECT_EQ(layouts.at("L0.fwd.fc1.c0"), "nn");
  EXPECT_EQ(layouts.at("L0.bwd.fc2.dgrad.c0"), "nt");
  EXPECT_EQ(layouts.at("L0.bwd.fc2.wgrad.c0"), "tn");
  EXPECT_EQ(layouts.at("L0.bwd.fc1.wgrad.c0"), "tn");
  EXPECT_EQ(layouts.at("L0.bwd.fc1.dgrad.c0"), "nt");
  EXPECT_EQ(layouts.at("L0.bwd.gate.dgrad"), "nt");
  EXPECT_EQ(layouts.at("L0.bwd.gate.wgrad"), "tn");
  // The weight gradients sum the chunks in C: the first chunk in backward order writes, the later
  // ones add (beta = 1); the gate's input gradient adds to the encode backward's.
  std::map<std::string, bool> accumulates;
  for (const auto& t : j["tasks"])
    if (t["kind"] == "gemm") accumulates[t["id"].get<std::string>()] = t["accumulate"].get<bool>();
  std::vector<std::string> wgrads;
  for (const auto& t : j["tasks"])
    if (t["kind"] == "gemm" && t["id"].get<std::string>().rfind("L0.bwd.fc1.wgrad", 0) == 0)
      wgrads.push_back(t["id"].get<std::string>());
  ASSERT_GE(wgrads.size(), 2u);
  EXPECT_FALSE(accumulates.at(wgrads.front()));
  for (std::size_t i = 1; i < wgrads.size(); ++i) EXPECT_TRUE(accumulates.at(wgrads[i])) << wgrads[i];
  EXPECT_TRUE(accumulates.at("L0.bwd.gate.dgrad"));
  EXPECT_FALSE(accumulates.at("L0.bwd.gate.wgrad"));
  EXPECT_FALSE(accumulates.at("L0.fwd.fc1.c0"));
  nlohmann::json old = j;
  for (auto& t : old["tasks"]) {
    t.erase("layout");
    t.erase("accumulate");
  }
  const TaskGraph g = import_graph_json(old.dump(), "old.json");
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    if (const auto* w = std::get_if<GemmWork>(&g.task(i).work)) {
      EXPECT_EQ(w->layout, GemmLayout::kNN);
      EXPECT_FALSE(w->accumulate);
    }
  }
  nlohmann::json bad = j;
  bad["tasks"][0]["layout"] = "tt";
  EXPECT_THROW(import_graph_json(bad.dump(), "bad.json"), InputError);
}

TEST(GraphJson, AllWorkKindsRoundTrip) {
  TaskGraph g(2, {0, 1});
  const GroupId grp = g.add_group({0, 1});
  Task t;
  t.id = "copy";
  t.stream = StreamClass::kCopyD2H;
  t.work = CopyWork{4096, CopyDirection::kDeviceToHost};
  g.add_task(t);
  t.id = "sync";
  t.rank = 1;
  t.stream = StreamClass::kCompute;
  t.work = HostWork{250};
  g.add_task(t);
  t.id = "ar";
  t.stream = StreamClass::kCommCombine;
  t.work = CollectiveWork{CollectiveOp::kAllReduce, grp, 1 << 20};
  g.add_task(t);
  g.add_dependency(0, 2, DepKind::kReuse);
  const std::string once = export_graph_json(g);
  EXPECT_EQ(export_graph_json(import_graph_json(once, "g.json")), once);
  EXPECT_THAT(once, HasSubstr("\"direction\": \"d2h\""));
  EXPECT_THAT(once, HasSubstr("\"duration_ns\": 250"));
  EXPECT_THAT(once, HasSubstr("\"op\": \"all_reduce\""));
  EXPECT_THAT(once, HasSubstr("\"op\": \"copy_d2h\""));
  EXPECT_THAT(once, HasSubstr("\"op\": \"host\""));
  EXPECT_THAT(once, HasSubstr("\"reuse\""));
}

nlohmann::json base_doc() { return nlohmann::json::parse(built_json(OrderPolicy::kFasterMoE)); }

TEST(GraphJson, RejectsBadJson) {
  expect_import_error("{\"schema_version\": 1,", "invalid JSON");
  expect_import_error("[]", "must be a JSON object");
}

// The JSON library reports a number beyond a double with another exception type than a syntax
// error; it used to escape as an internal error (found by tests/fuzz/fuzz_graph_json).
TEST(GraphJson, RejectsANumberBeyondADouble) {
  expect_import_error("{\"schema_version\": 1e400}", "invalid JSON");
  expect_import_error("{\"world_size\": [0, -1e3216]}", "number overflow parsing '-1e3216'");
}

// An edge nested 100,000 levels deep used to overflow the stack while its error message was
// written (found by probing the reader beside tests/fuzz/fuzz_graph_json).
TEST(GraphJson, RejectsDeepNesting) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string head = R"({"schema_version": 1, "world_size": 1, "simulated_ranks": [0], "groups": [], "tasks": [], )";
  expect_import_error(head + "\"edges\": [" + deep + "]}", "nesting deeper than 32 levels of [ and {");
  expect_import_error(deep, "nesting deeper than 32 levels");
  EXPECT_NO_THROW(import_graph_json(head + R"("edges": [], "traffic": [{"size": 1, "row_bytes": 1, "rows": [3]}]})", "g.json"));
}

TEST(GraphJson, RejectsSchemaProblems) {
  auto j = base_doc();
  j["schema_version"] = 4;
  expect_import_error(j.dump(), "unsupported schema_version 4 (supported: 1 to 3)");
  j["schema_version"] = 0;
  expect_import_error(j.dump(), "unsupported schema_version 0 (supported: 1 to 3)");
  j = base_doc();
  j.erase("world_size");
  expect_import_error(j.dump(), "missing field 'world_size'");
  j = base_doc();
  j["extra"] = 1;
  expect_import_error(j.dump(), "unknown field 'extra'");
}

TEST(GraphJson, RejectsBadTasks) {
  auto j = base_doc();
  j["tasks"][0].erase("m");
  expect_import_error(j.dump(), "task #0 'L0.fwd.gate': missing field 'm'");
  j = base_doc();
  j["tasks"][0]["m"] = "96";
  expect_import_error(j.dump(), "task #0 'L0.fwd.gate': field 'm' must be an integer");
  j = base_doc();
  j["tasks"][0]["m"] = 0;
  expect_import_error(j.dump(), "field 'm' = 0 must be in [1,");
  j = base_doc();
  j["tasks"][1]["kind"] = "kernel";
  expect_import_error(j.dump(), "task #1 'L0.fwd.route': unknown kind 'kernel' (valid: gemm,");
  j = base_doc();
  j["tasks"][0]["stream"] = "comm.other";
  expect_import_error(j.dump(), "unknown stream 'comm.other'");
  j = base_doc();
  j["tasks"][0]["dtype"] = "fp64";
  expect_import_error(j.dump(), "unknown dtype 'fp64'");
  j = base_doc();
  j["tasks"][0]["rank"] = 2;
  expect_import_error(j.dump(), "task 'L0.fwd.gate' is on rank 2, which this graph does not simulate");
  j = base_doc();
  j["tasks"][0]["flops"] = 1;
  expect_import_error(j.dump(), "task #0 'L0.fwd.gate': unknown field 'flops'");
  j = base_doc();
  j["tasks"][1]["id"] = "L0.fwd.gate";
  expect_import_error(j.dump(), "duplicate task id 'L0.fwd.gate'");
}

TEST(GraphJson, RejectsBadCollectives) {
  auto j = base_doc();
  std::size_t i = 0;
  while (j["tasks"][i]["kind"] != "collective") ++i;
  const std::string id = j["tasks"][i]["id"];
  j["tasks"][i]["group"] = 5;
  expect_import_error(j.dump(), "'" + id + "': unknown group 5");
  j = base_doc();
  j["tasks"][i]["op"] = "broadcast";
  expect_import_error(j.dump(), "unknown op 'broadcast' (valid: gemm, batched_gemm,");
  j = base_doc();
  j["tasks"][i]["op"] = "all-to-all";  // schema 1's spelling of the collective's op
  expect_import_error(j.dump(), "unknown op 'all-to-all'");
  j = base_doc();
  j["tasks"][i]["op"] = "all_to_allv";  // without a traffic matrix
  expect_import_error(j.dump(), "'" + id + "': op 'all_to_allv' disagrees with its collective work (its op would be "
                                "'all_to_all')");
  j = base_doc();
  j["tasks"][i]["op"] = "gemm";
  expect_import_error(j.dump(), "'" + id + "': op 'gemm' disagrees with its collective work");
}

TEST(GraphJson, RejectsAMissingOrDisagreeingOp) {
  auto j = base_doc();
  j["tasks"][0].erase("op");
  expect_import_error(j.dump(), "task #0 'L0.fwd.gate': missing field 'op'");
  j = base_doc();
  j["tasks"][0]["op"] = "top_k";
  expect_import_error(j.dump(), "task #0 'L0.fwd.gate': op 'top_k' disagrees with its gemm work (its op would be "
                                "'gemm')");
  j = base_doc();
  j["tasks"][1]["op"] = "batched_gemm";
  expect_import_error(j.dump(), "task #1 'L0.fwd.route': op 'batched_gemm' disagrees with its elementwise work (its "
                                "op would be 'elementwise' or another memory-bound kernel)");
}

// A schema 1 file (before tasks had ops; a collective's "op" was its CollectiveOp, "all-to-all")
// is migrated: each task gets the op its work gives, memory-bound kernels `elementwise`.
TEST(GraphJson, MigratesSchemaOne) {
  auto j = base_doc();
  j["schema_version"] = 1;
  for (auto& t : j["tasks"]) {
    const std::string op = t["op"];
    t.erase("op");
    t.erase("reads");  // schema 3's operands
    t.erase("writes");
    if (t["kind"] == "collective") t["op"] = op == "all_reduce" ? "all-reduce" : "all-to-all";
  }
  const TaskGraph g = import_graph_json(j.dump(), "old.json");
  const TaskGraph now = import_graph_json(base_doc().dump(), "g.json");
  ASSERT_EQ(g.num_tasks(), now.num_tasks());
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Task& t = now.task(i);
    EXPECT_EQ(*g.task(i).op, t.kind() == TaskKind::kElementwise ? Op::kElementwise : *t.op) << t.id;
  }
  // Every other field, the work included, is read as before.
  auto migrated = nlohmann::json::parse(export_graph_json(g));
  auto current = nlohmann::json::parse(export_graph_json(now));
  for (auto* doc : {&migrated, &current})
    for (auto& t : (*doc)["tasks"])
      for (const char* key : {"op", "reads", "writes"}) t.erase(key);
  EXPECT_EQ(migrated, current);
  // An op on a schema 1 task that is not a collective is an unknown field.
  j["tasks"][0]["op"] = "gemm";
  expect_import_error(j.dump(), "task #0 'L0.fwd.gate': unknown field 'op'");
}

TEST(GraphJson, RejectsBadEdges) {
  auto j = base_doc();
  const auto n = j["tasks"].size();
  j["edges"].push_back({0, n, "data"});
  expect_import_error(j.dump(), "refers to task index " + std::to_string(n));
  j = base_doc();
  j["edges"].push_back({0, 1, "stream"});
  expect_import_error(j.dump(), "kind must be \"data\" or \"reuse\"");
  j = base_doc();
  j["edges"].push_back({0, "1"});
  expect_import_error(j.dump(), "must be [from, to,");
}

TEST(GraphJson, RejectsCycleWithWholePath) {
  auto j = base_doc();
  // gate -> route -> encode on the compute stream; encode -> gate closes a cycle.
  j["edges"].push_back({2, 0, "data"});
  expect_import_error(j.dump(), "dependency cycle: L0.fwd.gate -> L0.fwd.route -> L0.fwd.encode -> L0.fwd.gate");
}

}  // namespace
}  // namespace moesim
