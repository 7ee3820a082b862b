// The published-measurement datasets (validate/published.h): nccl-tests' bus bandwidth factors,
// the XLA table parsers, the source.yaml reader and the statistics the verdicts rest on.
#include "validate/published.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "sim/core/error.h"
#include "sim/driver/nccl_tests_replay.h"
#include "validate/published_replay.h"

namespace moesim::validate {
namespace {

// The InputError's location and rule, or "" when `f` does not throw one.
template <typename F>
std::string input_error(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.where().file + ":" + std::to_string(e.where().line) + ": " + e.rule();
  }
  return "";
}

TEST(NcclTestsBusFactor, AllReduceCountsBothHalvesOfTheRing) {
  EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(CollectiveOp::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(CollectiveOp::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(CollectiveOp::kAllReduce, 16), 2.0 * 15 / 16);
}

TEST(NcclTestsBusFactor, OtherCollectivesCountOneRingPass) {
  for (const CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllToAll}) {
    EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(op, 8), 7.0 / 8);
    EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(op, 16), 15.0 / 16);
    EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(op, 1), 0.0);
  }
  EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(CollectiveOp::kAllReduce, 0), 0.0);
}

TEST(NcclTestsCollective, NamesTheFourModelledPrograms) {
  EXPECT_EQ(collective_of_nccl_test("all_reduce_perf"), CollectiveOp::kAllReduce);
  EXPECT_EQ(collective_of_nccl_test("all_gather_perf"), CollectiveOp::kAllGather);
  EXPECT_EQ(collective_of_nccl_test("reduce_scatter_perf"), CollectiveOp::kReduceScatter);
  EXPECT_EQ(collective_of_nccl_test("alltoall_perf"), CollectiveOp::kAllToAll);
  EXPECT_FALSE(collective_of_nccl_test("broadcast_perf"));
}

const char* kCollectiveHeader =
    "opcode,element_type,dimensions,num_replica_groups,num_devices_per_group,network_throughput_bytes_per_sec\n";

TEST(XlaCollectives, SizeIsTheLargerBufferAndTimeIsSizeOverThroughput) {
  const auto points = parse_xla_collectives(std::string("# provenance\n") + kCollectiveHeader +
                                                "all-reduce,F32,256,1,8,1024000000\n"
                                                "reduce-scatter,F32,32,1,8,2048000000\n"
                                                "all-to-all,F32,256,4,2,512000000\n",
                                            "t.csv");
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].op, CollectiveOp::kAllReduce);
  EXPECT_EQ(points[0].ranks, 8);
  EXPECT_EQ(points[0].size_bytes, 1024);
  EXPECT_DOUBLE_EQ(points[0].time_us, 1.0);
  EXPECT_EQ(points[0].line, 3);
  // The table's reduce-scatter shape is its output: the input is 8 times larger.
  EXPECT_EQ(points[1].size_bytes, 1024);
  EXPECT_DOUBLE_EQ(points[1].time_us, 0.5);
  EXPECT_EQ(points[2].groups, 4);
  EXPECT_EQ(points[2].ranks, 2);
  EXPECT_DOUBLE_EQ(points[2].time_us, 2.0);
}

TEST(XlaCollectives, BadLinesNameTheirLineAndRule) {
  EXPECT_EQ(input_error([] { parse_xla_collectives("opcode,dimensions\nall-reduce,1\n", "t.csv"); }),
            "t.csv:1: the header must be '" + std::string(kCollectiveHeader).substr(0, std::string(kCollectiveHeader).size() - 1) + "'");
  const std::string h = kCollectiveHeader;
  EXPECT_EQ(input_error([&] { parse_xla_collectives(h + "broadcast,F32,256,1,8,1\n", "t.csv"); }),
            "t.csv:2: opcode 'broadcast' is not all-reduce, all-gather, reduce-scatter or all-to-all");
  EXPECT_EQ(input_error([&] { parse_xla_collectives(h + "all-reduce,BF16,256,1,8,1\n", "t.csv"); }),
            "t.csv:2: element_type 'BF16' is not F32");
  EXPECT_EQ(input_error([&] { parse_xla_collectives(h + "all-reduce,F32,256,1,8,0\n", "t.csv"); }),
            "t.csv:2: network_throughput_bytes_per_sec 0 must be positive");
  EXPECT_EQ(input_error([&] { parse_xla_collectives(h + "all-reduce,F32,2x6,1,8,5\n", "t.csv"); }),
            "t.csv:2: dimensions '2x6' is not a whole number");
  EXPECT_EQ(input_error([&] { parse_xla_collectives(h + "all-reduce,F32,256,1,8\n", "t.csv"); }),
            "t.csv:2: 5 cells; a row has 6 (" + h.substr(0, h.size() - 1) + ")");
  EXPECT_EQ(input_error([&] { parse_xla_collectives(h, "t.csv"); }),
            "t.csv:0: no rows under the header '" + h.substr(0, h.size() - 1) + "'");
}

TEST(XlaMatmul, MapsTheTableDtypeToAMathDtype) {
  const std::vector<std::pair<std::string, DType>> dtypes = {{"bf16xbf16->bf16", DType::kBf16}, {"f32xf32->f32", DType::kTf32}};
  const auto g = parse_xla_matmul("b,m,n,k,dtype,flops\n2,256,512,1024,f32xf32->f32,123000000000000\n", "m.csv", dtypes);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].b, 2);
  EXPECT_EQ(g[0].m, 256);
  EXPECT_EQ(g[0].n, 512);
  EXPECT_EQ(g[0].k, 1024);
  EXPECT_EQ(g[0].dtype, DType::kTf32);
  EXPECT_DOUBLE_EQ(g[0].flop_per_s, 123e12);
  EXPECT_EQ(input_error([&] { parse_xla_matmul("b,m,n,k,dtype,flops\n1,2,3,4,f8,5\n", "m.csv", dtypes); }),
            "m.csv:2: dtype 'f8' is not one of source.yaml's dtypes");
  EXPECT_EQ(input_error([&] { parse_xla_matmul("b,m,n,k,dtype,flops\n0,2,3,4,f32xf32->f32,5\n", "m.csv", dtypes); }),
            "m.csv:2: b 0 must be at least 1");
}

TEST(Median, OddEvenAndEmpty) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
  const ErrorStats st = error_stats({0.1, -0.3, 0.2});
  EXPECT_EQ(st.count, 3u);
  EXPECT_DOUBLE_EQ(st.median_abs, 0.2);
  EXPECT_DOUBLE_EQ(st.worst, -0.3);
}

class DatasetSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("published_" + std::to_string(::getpid())) / "ds";
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_.parent_path()); }
  void write(const std::string& text) { std::ofstream(dir_ / "source.yaml") << text; }
  std::filesystem::path dir_;
};

const char* kSource =
    "schema_version: 1\nkind: nccl-tests\ntitle: t\nurl: u\ndate: \"2025-01-01\"\ngpu: g\nnodes: 2\n"
    "nccl: \"2.18\"\ncuda: c\nhardware: dgx-a100\nfile: a.log\n";

TEST_F(DatasetSourceTest, ReadsEveryKey) {
  write(std::string(kSource) + "collective: all-gather\n");
  const DatasetSource s = read_dataset_source(dir_);
  EXPECT_EQ(s.name, "ds");
  EXPECT_EQ(s.kind, DatasetKind::kNcclTests);
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.nccl, "2.18");
  EXPECT_EQ(s.collective, CollectiveOp::kAllGather);
  EXPECT_EQ(dataset_dirs(dir_.parent_path()), std::vector<std::filesystem::path>{dir_});
}

TEST_F(DatasetSourceTest, RejectsUnknownKeysKindsAndMissingDtypes) {
  write(std::string(kSource) + "dtypes: {a: bf16}\n");
  EXPECT_NE(input_error([&] { read_dataset_source(dir_); }).find("dtypes"), std::string::npos);
  write("kind: iperf\n");
  EXPECT_NE(input_error([&] { read_dataset_source(dir_); }).find("must be nccl-tests, xla-collectives, xla-matmul or gemm-table"),
            std::string::npos);
  std::string matmul = kSource;
  matmul.replace(matmul.find("nccl-tests"), 10, "xla-matmul");
  write(matmul);
  EXPECT_NE(input_error([&] { read_dataset_source(dir_); }).find("dtypes"), std::string::npos);
  std::filesystem::remove(dir_ / "source.yaml");
  EXPECT_NE(input_error([&] { dataset_dirs(dir_.parent_path()); }).find("no dataset"), std::string::npos);
}

}  // namespace
}  // namespace moesim::validate
