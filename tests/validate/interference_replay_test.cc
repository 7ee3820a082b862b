// `moesim validate interference` (validate/interference_replay.h): GEMMs measured beside a
// communication kernel against a node's GEMM-size table and its single cell. A probe file's shapes,
// batched launches and factors are read as printed; each shape is replayed at its output elements
// per SM; malformed files are refused naming the file, line and rule; and on the H200's own
// measurements the table describes the shapes it was not built from better than the cell.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/spec/loader.h"
#include "../sim/spec/spec_test_util.h"
#include "validate/interference_replay.h"

namespace moesim::validate {
namespace {

using testing::input_error_of;
using testing::TempFiles;

const std::string kRoot = MOESIM_SOURCE_DIR;

const std::string kHeader =
    "# NVIDIA H200, 132 SMs\n# launch (batch x MxNxK)  launches  us_per_launch  TFLOP/s  hold1 hold8 hold16 hold32\n";

TEST(InterferenceReplay, ReadsShapesBatchedLaunchesAndFactorsAsPrinted) {
  TempFiles t;
  const std::string path = t.write("probe.txt", kHeader +
                                                    "1056x2048x2048   9   47.0   731.0   0.950  0.500  0.600* 0.700\n"
                                                    "8 x 2048x768x2048   4   90.1   700.0   0.9  0.4  0.5  0.6\nrc=0\n");
  const std::vector<ProbeShape> shapes = read_probe_shapes(path);
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].name, "1056x2048x2048");
  EXPECT_EQ(shapes[0].line, 3);
  EXPECT_EQ(shapes[0].batch, 1);
  EXPECT_EQ(shapes[0].m, 1056);
  EXPECT_EQ(shapes[0].k, 2048);
  EXPECT_EQ(shapes[0].ctas, (std::vector<int>{1, 8, 16, 32}));
  EXPECT_EQ(shapes[0].factors, (std::vector<double>{0.95, 0.5, 0.6, 0.7}));  // "0.600*" kept
  EXPECT_EQ(shapes[1].name, "8 x 2048x768x2048");
  EXPECT_EQ(shapes[1].batch, 8);
  EXPECT_EQ(shapes[1].n, 768);

  // On the H200 node (132 SMs): 1056 x 2048 / 132 = 16,384 outputs per SM; the measurement is
  // the median of the 8-32 CTA columns (0.6), not of the 1-CTA one.
  const ClusterSpec h200 = load_hardware_spec(kRoot + "/hardware/nodes/hgx-h200.yaml");
  const InterferenceReplay r = replay_interference(shapes, h200);
  EXPECT_DOUBLE_EQ(r.points[0].outputs_per_sm, 16384.0);
  EXPECT_DOUBLE_EQ(r.points[0].measured, 0.6);
  EXPECT_DOUBLE_EQ(r.points[0].measured_min, 0.5);
  EXPECT_DOUBLE_EQ(r.points[0].measured_max, 0.7);
  EXPECT_DOUBLE_EQ(r.points[1].outputs_per_sm, 8.0 * 2048 * 768 / 132);  // a batched launch: all its outputs
  EXPECT_DOUBLE_EQ(r.points[0].cell, h200.node.interference.factors[1][0]);
  EXPECT_GT(r.points[0].table, 0.543);  // between the table's rows at 15,888 (0.565) and 31,775 (0.543)
  EXPECT_LT(r.points[0].table, 0.565);
}

TEST(InterferenceReplay, MalformedFilesNameFileLineAndRule) {
  TempFiles t;
  const auto error = [&](const std::string& text) {
    const std::string path = t.write("bad.txt", text);
    return input_error_of([&] { read_probe_shapes(path); });
  };
  std::string msg = error("4096x2048x2048 9 47.0 731.0 0.5\n");
  EXPECT_NE(msg.find("bad.txt:1: a data line before the header"), std::string::npos) << msg;
  msg = error(kHeader + "4096x2048 9 47.0 731.0 0.9 0.5 0.5 0.5\n");
  EXPECT_NE(msg.find("bad.txt:3: expected a GEMM shape MxNxK, got '4096x2048'"), std::string::npos) << msg;
  msg = error(kHeader + "4096x2048x2048 9 47.0 731.0 0.9 0.5 0.5\n");
  EXPECT_NE(msg.find("bad.txt:3: expected the shape, launches, us, TFLOP/s and 4 factors"), std::string::npos) << msg;
  msg = error(kHeader + "4096x2048x2048 9 47.0 731.0 0.9 0.5 fast 0.5\n");
  EXPECT_NE(msg.find("expected a speed factor, got 'fast'"), std::string::npos) << msg;
  msg = error(kHeader + "4096x2048x2048 9 47.0 731.0 0.9 0.5 0 0.5\n");
  EXPECT_NE(msg.find("a speed factor must be in (0, 2], got '0'"), std::string::npos) << msg;
  msg = error(kHeader + "4096x0x2048 9 47.0 731.0 0.9 0.5 0.5 0.5\n");
  EXPECT_NE(msg.find("a GEMM dimension must be a whole number in [1, 1000000], got '0'"), std::string::npos) << msg;
  msg = error(kHeader);
  EXPECT_NE(msg.find("no GEMM shape in the file"), std::string::npos) << msg;
  msg = error(kHeader + "4096x2048x2048 9 47.0 731.0 0.9 0.5 0.5 0.5\nrc=124\n");
  EXPECT_NE(msg.find("bad.txt:4: the probe exited with rc=124"), std::string::npos) << msg;
  msg = error("# shape gemms us TFLOP/s hold1 hold99999999999\n");
  EXPECT_NE(msg.find("bad.txt:1: a hold column names 1 to 1024 CTAs, got 'hold99999999999'"), std::string::npos) << msg;
  msg = input_error_of([&] { read_probe_shapes(t.path("missing.txt")); });
  EXPECT_NE(msg.find("missing.txt: cannot open"), std::string::npos) << msg;
}

// The CSV quotes a text cell that holds a comma (a file name), so every row keeps its columns.
TEST(InterferenceReplay, CsvQuotesTextCells) {
  TempFiles t;
  const std::string path = t.write("a,b.txt", kHeader + "4096x2048x2048 9 47 731 0.9 0.5 0.5 0.5\n");
  const InterferenceReplay r =
      replay_interference(read_probe_shapes(path), load_hardware_spec(kRoot + "/hardware/nodes/hgx-h200.yaml"));
  std::ostringstream csv;
  write_interference_replay_csv(r, csv);
  const std::string text = csv.str();
  EXPECT_NE(text.find(",\"" + path + "\",3,4096x2048x2048,1,4096,2048,2048,63550.1,0.5000,"), std::string::npos) << text;
}

TEST(InterferenceReplay, NodeWithoutATableAndShapesWithoutTheRangeAreRefused) {
  TempFiles t;
  const std::vector<ProbeShape> shapes = read_probe_shapes(t.write("p.txt", kHeader + "4096x2048x2048 9 47 731 0.9 0.5 0.5 0.5\n"));
  const ClusterSpec a100 = load_hardware_spec(kRoot + "/hardware/nodes/dgx-a100.yaml");
  std::string msg = input_error_of([&] { replay_interference(shapes, a100); });
  EXPECT_NE(msg.find("has no interference.gemm_with_communication table"), std::string::npos) << msg;
  const std::vector<ProbeShape> one_cta = read_probe_shapes(
      t.write("q.txt", "# shape gemms us TFLOP/s hold1 hold64\n4096x2048x2048 9 47 731 0.9 0.5\n"));
  const ClusterSpec h200 = load_hardware_spec(kRoot + "/hardware/nodes/hgx-h200.yaml");
  msg = input_error_of([&] { replay_interference(one_cta, h200); });
  EXPECT_NE(msg.find("q.txt:2: no factor at 8 to 32 held CTAs"), std::string::npos) << msg;
}

// The H200's `--shapes` sweeps (calls 1 and 2 of validate/results/h200-2026-11-28): shapes the
// node's table was not built from (it took the M x 2048 x 2048 `--waves` series) among others.
// On the shapes off that family the table is closer to the measurement than the cell, by median.
TEST(InterferenceReplay, OnTheH200sOwnSweepsTheTableBeatsTheCellOffItsOwnFamily) {
  const std::string dir = kRoot + "/validate/results/h200-2026-11-28/";
  std::vector<ProbeShape> held_out;
  for (const char* f : {"call1/bench-sm-share-shapes.txt", "call2/shapes2.txt"})
    for (const ProbeShape& s : read_probe_shapes(dir + f))
      if (s.n != 2048 || s.k != 2048) held_out.push_back(s);
  ASSERT_EQ(held_out.size(), 22u);  // 11 shapes, two calls
  const InterferenceReplay r = replay_interference(held_out, load_hardware_spec(kRoot + "/hardware/nodes/hgx-h200.yaml"));
  std::vector<double> table, cell;
  for (const InterferencePoint& p : r.points) {
    table.push_back(std::fabs(p.table - p.measured));
    cell.push_back(std::fabs(p.cell - p.measured));
  }
  std::sort(table.begin(), table.end());
  std::sort(cell.begin(), cell.end());
  EXPECT_LT(table[table.size() / 2], cell[cell.size() / 2]);
  EXPECT_LT(table.back(), cell.back());
}

}  // namespace
}  // namespace moesim::validate
