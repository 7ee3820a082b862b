// Operand bindings (task.h): what add_task and bind_operand refuse, their JSON form (schema 3) and
// the operand check (operand_check.h) on hand-made graphs, one for each rule it enforces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/graph/graph_json.h"
#include "sim/graph/operand_check.h"

namespace moesim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
constexpr auto kRead = TaskGraph::Access::kRead;
constexpr auto kWrite = TaskGraph::Access::kWrite;

// Rank 0's compute stream (tasks in order) and its d2h copy stream, which add_task does not order
// against it; one 1,024-byte buffer "x" (id 0) on rank 0 and one on rank 1.
struct Fixture {
  TaskGraph g{2, {0, 1}};
  Fixture() {
    g.add_buffer(Buffer{"x", 0, 1024});
    g.add_buffer(Buffer{"y", 1, 1024});
  }
  TaskIndex task(const std::string& id, StreamClass stream = StreamClass::kCompute) {
    Task t;
    t.id = id;
    t.rank = 0;
    t.stream = stream;
    t.work = stream == StreamClass::kCompute ? Work{HostWork{10}} : Work{CopyWork{64, CopyDirection::kDeviceToHost}};
    return g.add_task(t);
  }
};

TEST(Operand, RangesOutsideTheirBufferOrRankAreRefused) {
  Fixture f;
  const TaskIndex t = f.task("t");
  EXPECT_NO_THROW(f.g.bind_operand(t, kRead, Operand{0, 1000, 24, DType::kBf16}));
  EXPECT_THAT(f.g.task(t).reads, ElementsAre(Operand{0, 1000, 24, DType::kBf16}));
  for (const Operand& bad : {Operand{0, 1000, 25, DType::kBf16}, Operand{0, -1, 8, DType::kBf16},
                             Operand{0, 0, 0, DType::kBf16}}) {
    try {
      f.g.bind_operand(t, kWrite, bad);
      ADD_FAILURE() << "accepted [" << bad.offset << ", +" << bad.bytes << ")";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("task 't' writes bytes ["));
      EXPECT_THAT(e.what(), HasSubstr("of buffer 'x', which holds 1024 bytes (an operand is a non-empty range"));
    }
  }
  EXPECT_THROW(f.g.bind_operand(t, kRead, Operand{7, 0, 8, DType::kBf16}), InputError);
  try {
    f.g.bind_operand(t, kRead, Operand{1, 0, 8, DType::kBf16});
    ADD_FAILURE() << "bound rank 1's buffer to a task of rank 0";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("task 't' reads buffer 'y' of rank 1, where it does not run"));
  }
  Task own;
  own.id = "own";
  own.work = HostWork{1};
  own.writes = {Operand{0, 512, 1024, DType::kFp32}};
  EXPECT_THROW(f.g.add_task(own), InputError);
}

TEST(OperandCheck, UnorderedWritersOfTheSameBytesAreAViolation) {
  Fixture f;
  const TaskIndex a = f.task("a");
  const TaskIndex b = f.task("b", StreamClass::kCopyD2H);  // no path from a
  f.g.bind_operand(a, kWrite, Operand{0, 0, 512, DType::kBf16});
  f.g.bind_operand(b, kRead, Operand{0, 256, 512, DType::kBf16});
  EXPECT_THAT(operand_violations(f.g), ElementsAre("a@0 writes 'x' [0, +512) and b@0 reads [256, +512), and no path orders them"));
  f.g.add_dependency(a, b);
  EXPECT_THAT(operand_violations(f.g), IsEmpty());
}

TEST(OperandCheck, DisjointBytesAndTwoReadsNeedNoOrder) {
  Fixture f;
  const TaskIndex a = f.task("a");
  const TaskIndex b = f.task("b", StreamClass::kCopyD2H);
  const TaskIndex c = f.task("c", StreamClass::kCopyH2D);
  f.g.bind_operand(a, kWrite, Operand{0, 0, 512, DType::kBf16});
  f.g.bind_operand(b, kWrite, Operand{0, 512, 512, DType::kBf16});
  f.g.bind_operand(c, kRead, Operand{0, 512, 8, DType::kBf16});
  f.g.bind_operand(a, kRead, Operand{0, 0, 8, DType::kBf16});  // a task may read what it writes
  // b's write and c's read of [512, +8) are unordered: the only violation.
  EXPECT_THAT(operand_violations(f.g), ElementsAre("b@0 writes 'x' [512, +512) and c@0 reads [512, +8), and no path orders them"));
}

TEST(OperandCheck, AccessesOutsideTheBuffersLifeAreViolations) {
  Fixture f;
  const TaskIndex early = f.task("early", StreamClass::kCopyD2H);
  const TaskIndex alloc = f.task("alloc");
  const TaskIndex freeing = f.task("free");
  const TaskIndex late = f.task("late", StreamClass::kCopyH2D);
  f.g.allocate_at(alloc, 0);
  f.g.free_at(freeing, 0);
  f.g.bind_operand(early, kRead, Operand{0, 0, 8, DType::kBf16});
  f.g.bind_operand(late, kRead, Operand{0, 0, 8, DType::kBf16});
  EXPECT_THAT(operand_violations(f.g),
              ElementsAre("early@0 reads 'x' [0, +8), which no path orders after its allocation by alloc@0",
                          "early@0 reads 'x' [0, +8), which no path orders before its release by free@0",
                          "late@0 reads 'x' [0, +8), which no path orders after its allocation by alloc@0",
                          "late@0 reads 'x' [0, +8), which no path orders before its release by free@0"));
  f.g.add_dependency(alloc, early);
  f.g.add_dependency(early, freeing);
  f.g.add_dependency(alloc, late);
  f.g.add_dependency(late, freeing);
  EXPECT_THAT(operand_violations(f.g), IsEmpty());
  EXPECT_THROW(operand_violations(f.g, 0), InternalError);
}

TEST(OperandCheck, ReportsAtMostTheLimit) {
  Fixture f;
  const TaskIndex a = f.task("a");
  const TaskIndex b = f.task("b", StreamClass::kCopyD2H);
  const TaskIndex c = f.task("c", StreamClass::kCopyH2D);
  for (TaskIndex t : {a, b, c}) f.g.bind_operand(t, kWrite, Operand{0, 0, 8, DType::kBf16});
  EXPECT_EQ(operand_violations(f.g).size(), 3U);  // a-b, a-c, b-c
  EXPECT_THAT(operand_violations(f.g, 1),
              ElementsAre("a@0 writes 'x' [0, +8) and b@0 writes [0, +8), and no path orders them"));
}

TEST(OperandJson, OperandsRoundTripAndBadOnesAreRefused) {
  Fixture f;
  const TaskIndex t = f.task("t");
  f.g.bind_operand(t, kRead, Operand{0, 0, 64, DType::kBf16});
  f.g.bind_operand(t, kWrite, Operand{0, 64, 128, DType::kFp32});
  const std::string text = export_graph_json(f.g);
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["tasks"][0]["reads"], nlohmann::json::parse(R"([[0, 0, 64, "bf16"]])"));
  EXPECT_EQ(j["tasks"][0]["writes"], nlohmann::json::parse(R"([[0, 64, 128, "fp32"]])"));
  const TaskGraph back = import_graph_json(text, "g.json");
  EXPECT_EQ(back.task(0).reads, f.g.task(t).reads);
  EXPECT_EQ(back.task(0).writes, f.g.task(t).writes);
  EXPECT_EQ(export_graph_json(back), text);
  const auto refused = [&](const nlohmann::json& doc, const std::string& fragment) {
    try {
      import_graph_json(doc.dump(), "g.json");
      ADD_FAILURE() << "accepted " << doc["tasks"][0].dump();
    } catch (const InputError& e) {
      EXPECT_EQ(e.where().file, "g.json");
      EXPECT_THAT(e.what(), HasSubstr(fragment));
    }
  };
  auto bad = j;
  bad["tasks"][0]["reads"] = nlohmann::json::parse(R"([[0, 1000, 64, "bf16"]])");
  refused(bad, "task 't' reads bytes [1000, +64) of buffer 'x', which holds 1024 bytes");
  bad["tasks"][0]["reads"] = nlohmann::json::parse(R"([[0, 0, 64, "fp64"]])");
  refused(bad, "field 'reads' holds [0,0,64,\"fp64\"]: unknown dtype");
  bad["tasks"][0]["reads"] = nlohmann::json::parse(R"([[0, -1, 64, "bf16"]])");
  refused(bad, "its element 1 must be an integer in [0,");
  bad["tasks"][0]["reads"] = nlohmann::json::parse(R"([[0, 0, 64]])");
  refused(bad, "not [buffer, offset, bytes, dtype]");
  bad["tasks"][0]["reads"] = 3;
  refused(bad, "field 'reads' must be an array of [buffer, offset, bytes, dtype]");
  // Schema 2 had no operands: the key is unknown there.
  bad = j;
  bad["schema_version"] = 2;
  refused(bad, "operand bindings ('reads', 'writes') need schema_version 3");
  bad["tasks"][0].erase("reads");
  bad["tasks"][0].erase("writes");
  EXPECT_THAT(import_graph_json(bad.dump(), "g.json").task(0).reads, IsEmpty());
}

}  // namespace
}  // namespace moesim
