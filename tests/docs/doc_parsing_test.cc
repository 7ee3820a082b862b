// Unit tests of the docs checker itself: console blocks, the rule for concrete commands, and the
// comparison of printed output with a doc's (elisions, the diff of a difference).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "doc_examples.h"
#include "output_diff.h"

namespace {

using namespace moesim::docs_test;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<DocLine> doc_lines(std::initializer_list<const char*> texts) {
  std::vector<DocLine> lines;
  int number = 10;
  for (const char* t : texts) lines.push_back({number++, t});
  return lines;
}

TEST(DocExamples, AConsoleBlockGivesEachCommandAndTheOutputAfterIt) {
  const DocExamples doc = read_examples(
      "Intro\n"
      "\n"
      "```console\n"
      "$ moesim plan --model m.yaml \\\n"
      "    --tokens 4096\n"
      "line one\n"
      "...\n"
      "$ moesim presets\n"
      "```\n");
  EXPECT_THAT(doc.problems, IsEmpty());
  ASSERT_EQ(doc.blocks.size(), 1u);
  ASSERT_EQ(doc.blocks[0].examples.size(), 2u);
  const Example& first = doc.blocks[0].examples[0];
  EXPECT_EQ(first.line, 4);
  EXPECT_EQ(first.command, "moesim plan --model m.yaml \\\n    --tokens 4096");
  ASSERT_EQ(first.expected.size(), 2u);
  EXPECT_EQ(first.expected[0].number, 6);
  EXPECT_EQ(first.expected[1].text, "...");
  EXPECT_THAT(doc.blocks[0].examples[1].expected, IsEmpty());
  EXPECT_EQ(doc.blocks[0].skip_reason, "");
}

TEST(DocExamples, IndentedBlocksInListItemsAreRead) {
  const DocExamples doc = read_examples("- item\n\n  ```console\n  $ moesim presets gpus\n  ...\n  ```\n");
  ASSERT_EQ(doc.blocks.size(), 1u);
  EXPECT_EQ(doc.blocks[0].examples[0].command, "moesim presets gpus");
  EXPECT_EQ(doc.blocks[0].examples[0].expected[0].text, "...");
}

TEST(DocExamples, ATaggedBlockSaysWhyItDoesNotRun) {
  const DocExamples doc = read_examples("```console gpu\n$ moesim run --model m.yaml\n```\n");
  ASSERT_EQ(doc.blocks.size(), 1u);
  EXPECT_THAT(doc.blocks[0].skip_reason, HasSubstr("needs a GPU"));
  EXPECT_THAT(doc.problems, IsEmpty());
}

TEST(DocExamples, MistakesInConsoleBlocksAreReportedWithTheirLine) {
  const DocExamples doc = read_examples("```console fast\nno command yet\n```\n\n```console\n");
  EXPECT_THAT(doc.problems, ElementsAre("5: the fenced block is not closed",
                                        "1: unknown console tag 'fast'; known: gpu, cluster",
                                        "2: output before the console block's first `$ ` command",
                                        "1: a console block without a `$ ` command",
                                        "5: a console block without a `$ ` command"));
}

TEST(DocExamples, AConcreteMoesimCommandOutsideAConsoleBlockIsReported) {
  const DocExamples doc = read_examples(
      "```\n"
      "moesim simulate --model a.yaml [--json FILE]\n"    // synopsis
      "cmake --build build\n"                             // not moesim
      "build/sim/cli/moesim simulate --model a.yaml \\\n"  // concrete, by path
      "  --tokens 4096\n"
      "```\n"
      "```sh\n"
      "mpirun -np 2 moesim run --model a.yaml\n"  // concrete, under a launcher
      "```\n");
  ASSERT_EQ(doc.problems.size(), 2u);
  EXPECT_THAT(doc.problems[0], HasSubstr("4: `build/sim/cli/moesim simulate --model a.yaml \\` is a concrete"));
  EXPECT_THAT(doc.problems[1], HasSubstr("8: `mpirun -np 2 moesim run --model a.yaml` is a concrete"));
}

TEST(DocExamples, PlaceholdersMakeASynopsis) {
  for (const char* synopsis :
       {"moesim plan --objective time|memory", "moesim run --model M --hardware H", "moesim compare a b [--csv x]",
        "moesim simulate --routing matrix:<csv file>", "moesim run ... --loopback", "moesim graph check FILE"})
    EXPECT_TRUE(is_synopsis(synopsis)) << synopsis;
  for (const char* concrete :
       {"moesim simulate --model models/x.yaml --tokens 4096 | head -3", "moesim collective -b 1M -e 1G",
        "mpirun -np 16 -N 8 moesim run --model x.yaml", "moesim simulate --json - 2>&1"})
    EXPECT_FALSE(is_synopsis(concrete)) << concrete;
}

TEST(DocExamples, CommandsThatRunMoesim) {
  EXPECT_TRUE(runs_moesim("moesim presets"));
  EXPECT_TRUE(runs_moesim("dist/bin/moesim run --check"));
  EXPECT_TRUE(runs_moesim("MOESIM_DATA_DIR=. moesim presets"));
  EXPECT_TRUE(runs_moesim("mpiexec -n 2 moesim sweep --grid g.yaml"));
  EXPECT_FALSE(runs_moesim("ldd dist/bin/moesim | grep nccl"));
  EXPECT_FALSE(runs_moesim("# moesim simulate in a comment"));
  EXPECT_FALSE(runs_moesim("tests/golden/regenerate.sh build"));
}

TEST(DocExamples, APathToTheBinaryRunsTheOneUnderTest) {
  EXPECT_EQ(command_to_run("build/sim/cli/moesim simulate --tokens 4096"), "moesim simulate --tokens 4096");
  EXPECT_EQ(command_to_run("X=1 dist/bin/moesim presets"), "X=1 moesim presets");
  EXPECT_EQ(command_to_run("moesim presets"), "moesim presets");
  EXPECT_EQ(command_to_run("ldd dist/bin/moesim"), "ldd dist/bin/moesim");
}

TEST(OutputDiff, LinesMatchExactlyButForTrailingBlanks) {
  EXPECT_TRUE(compare_output(doc_lines({"a  1.000", "b"}), "a  1.000   \nb\n").same);
  EXPECT_FALSE(compare_output(doc_lines({"a  1.000", "b"}), "a  1.001\nb\n").same);
  EXPECT_FALSE(compare_output(doc_lines({"a"}), "a\nb\n").same);
  EXPECT_FALSE(compare_output(doc_lines({"a", "b"}), "a\n").same);
  EXPECT_TRUE(compare_output(doc_lines({}), "").same);
}

TEST(OutputDiff, AnElisionStandsForAnyNumberOfLines) {
  EXPECT_TRUE(compare_output(doc_lines({"...", "total 5"}), "x\ny\nz\ntotal 5\n").same);
  EXPECT_TRUE(compare_output(doc_lines({"head", "...", "total 5", "..."}), "head\ntotal 5\n").same);
  EXPECT_TRUE(compare_output(doc_lines({"..."}), "anything\n").same);
  EXPECT_TRUE(compare_output(doc_lines({"..."}), "").same);
  EXPECT_FALSE(compare_output(doc_lines({"...", "total 5"}), "x\ntotal 6\n").same);
}

TEST(OutputDiff, ADifferenceShowsTheDocLineAndWhatWasPrinted) {
  const OutputComparison c = compare_output(doc_lines({"head", "...", "step 1.984 ms", "tail"}),
                                            "head\nskip 1\nskip 2\nstep 2.043 ms\ntail\n");
  ASSERT_FALSE(c.same);
  EXPECT_EQ(c.diff,
            "  head\n"
            "  ...  (2 printed line(s))\n"
            "  . skip 1\n"
            "  . skip 2\n"
            "- step 1.984 ms    <- doc line 12\n"
            "+ step 2.043 ms\n"
            "  tail\n");
}

TEST(OutputDiff, LongRunsOfAlikeLinesAreCounted) {
  const OutputComparison c = compare_output(doc_lines({"1", "2", "3", "4", "5", "6", "x", "8"}), "1\n2\n3\n4\n5\n6\n7\n8\n");
  ASSERT_FALSE(c.same);
  EXPECT_EQ(c.diff, "  (3 line(s) alike)\n  4\n  5\n  6\n- x    <- doc line 16\n+ 7\n  8\n");
}

TEST(OutputDiff, LinesMissingAndExtraAreMarked) {
  const OutputComparison c = compare_output(doc_lines({"a", "b", "c"}), "a\nc\nd\n");
  ASSERT_FALSE(c.same);
  EXPECT_EQ(c.diff, "  a\n- b    <- doc line 11\n  c\n+ d\n");
}

}  // namespace
