// Unit tests of the commands' output files (sim/cli/output_file.h): paths checked before any work,
// files written whole or not at all.
#include "sim/cli/output_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_fixture.h"
#include "sim/core/error.h"

namespace {

using moesim::InputError;
using moesim::cli::check_outputs;
using moesim::cli::PendingFile;
using moesim::cli::write_output;
using moesim::cli_test::read_file;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moesim_output_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    return names;
  }
  template <typename F>
  static std::string error_of(F f) {
    try {
      f();
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }

  fs::path dir_;
};

TEST_F(OutputFile, WritesTheTextAndLeavesNothingElse) {
  write_output("--json", path("a.json"), "{}\n");
  EXPECT_EQ(read_file(path("a.json")), "{}\n");
  EXPECT_THAT(entries(), ::testing::ElementsAre("a.json"));
}

TEST_F(OutputFile, ReplacesAnExistingFileKeepingItsPermissions) {
  std::ofstream(path("a.csv")) << "old, and longer than the new text\n";
  fs::permissions(path("a.csv"), fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_output("--csv", path("a.csv"), "new\n");
  EXPECT_EQ(read_file(path("a.csv")), "new\n");
  EXPECT_EQ(fs::status(path("a.csv")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_THAT(entries(), ::testing::ElementsAre("a.csv"));
}

TEST_F(OutputFile, WritesThroughASymbolicLinkWhichStaysALink) {
  fs::create_directory(dir_ / "real");
  fs::create_symlink(dir_ / "real" / "r.json", dir_ / "link.json");
  write_output("--json", path("link.json"), "x");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_EQ(read_file(dir_ / "real" / "r.json"), "x");
}

TEST_F(OutputFile, WritesADeviceInPlace) {
  check_outputs({{"--json", "/dev/null"}, {"--trace", "/dev/null"}});  // two reports may both be dropped
  write_output("--json", "/dev/null", "dropped");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(OutputFile, AMissingFolderIsRefusedBeforeAnyWork) {
  EXPECT_EQ(error_of([&] { check_outputs({{"--html", path("nope/r.html")}}); }),
            "--html: cannot write '" + path("nope/r.html") + "': the folder '" + path("nope") + "' does not exist");
}

TEST_F(OutputFile, AFileWhereAFolderShouldBeIsNamed) {
  std::ofstream(path("f.txt")) << "x";
  EXPECT_EQ(error_of([&] { check_outputs({{"--csv", path("f.txt/deeper/r.csv")}}); }),
            "--csv: cannot write '" + path("f.txt/deeper/r.csv") + "': '" + path("f.txt") + "' is not a folder");
}

TEST_F(OutputFile, AFolderAsTheFileIsRefused) {
  fs::create_directory(dir_ / "out");
  EXPECT_EQ(error_of([&] { check_outputs({{"--json", path("out")}}); }),
            "--json: '" + path("out") + "' is a folder; give a file name");
  EXPECT_EQ(error_of([&] { check_outputs({{"--json", path("out") + "/"}}); }),
            "--json: '" + path("out") + "/' is a folder; give a file name");
}

TEST_F(OutputFile, AFolderThatCannotBeWrittenIsRefused) {
  // Root writes into a read-only folder regardless of its permission bits; sysfs refuses new files
  // to everyone.
  fs::path folder = "/sys";
  if (::geteuid() != 0) {
    folder = dir_ / "ro";
    fs::create_directory(folder);
    fs::permissions(folder, fs::perms::owner_read | fs::perms::owner_exec);
  }
  const std::string target = (folder / "r.json").string();
  EXPECT_THAT(error_of([&] { check_outputs({{"--json", target}}); }),
              HasSubstr("--json: cannot write '" + target + "': cannot create a file in '" + folder.string() + "'"));
}

TEST_F(OutputFile, CheckingLeavesNoFileBehind) {
  std::ofstream(path("kept.csv")) << "old";
  check_outputs({{"--csv", path("kept.csv")}, {"--json", path("new.json")}, {"--html", ""}, {"--trace", "-"}});
  EXPECT_THAT(entries(), ::testing::ElementsAre("kept.csv"));
  EXPECT_EQ(read_file(path("kept.csv")), "old");
}

TEST_F(OutputFile, TwoOutputsOnStdoutAreRefusedNamingBoth) {
  EXPECT_EQ(error_of([] { check_outputs({{"--csv", "-"}, {"--json", "-"}, {"--html", ""}}); }),
            "--csv and --json both write to stdout ('-'), where only one output can go; give the other a file name");
  EXPECT_EQ(error_of([] { check_outputs({{"--json", "-"}, {"--trace", "-"}, {"--timeline", "-"}}); }),
            "--json, --trace and --timeline all write to stdout ('-'), where only one output can go; give the others "
            "a file name");
}

TEST_F(OutputFile, TwoOutputsNamingOneFileAreRefused) {
  EXPECT_EQ(error_of([&] { check_outputs({{"--csv", path("r.out")}, {"--json", path("r.out")}}); }),
            "--csv and --json both write '" + path("r.out") + "'; give each output its own file");
  // The same file under another spelling.
  fs::create_directory(dir_ / "sub");
  EXPECT_THAT(error_of([&] { check_outputs({{"--json", path("r.out")}, {"--trace", path("sub/../r.out")}}); }),
              HasSubstr("--json and --trace both write"));
}

TEST_F(OutputFile, AFolderRemovedAfterTheCheckFailsTheWriteAndLeavesNothing) {
  fs::create_directory(dir_ / "gone");
  const std::string target = path("gone/r.json");
  check_outputs({{"--json", target}});
  fs::remove(dir_ / "gone");
  EXPECT_THAT(error_of([&] { write_output("--json", target, "{}"); }),
              HasSubstr("--json: cannot write '" + target + "': No such file or directory"));
  EXPECT_TRUE(entries().empty());
}

TEST_F(OutputFile, AnExceptionBeforeCommitLeavesNoTemporaryAndTheTargetUntouched) {
  std::ofstream(path("c.yaml")) << "old";
  try {
    PendingFile file("--output", path("c.yaml"), "new");
    EXPECT_EQ(read_file(file.temp_path()), "new");
    EXPECT_EQ(fs::path(file.temp_path()).parent_path(), dir_);
    throw InputError("the file does not load back");
  } catch (const InputError&) {
  }
  EXPECT_THAT(entries(), ::testing::ElementsAre("c.yaml"));
  EXPECT_EQ(read_file(path("c.yaml")), "old");
}

TEST_F(OutputFile, AFailedRenameLeavesNoTemporary) {
  // A non-empty folder appearing at the target after the check: rename(2) cannot replace it.
  const std::string target = path("r.json");
  PendingFile file("--json", target, "{}");
  fs::create_directories(dir_ / "r.json" / "inside");
  EXPECT_THAT(error_of([&] { file.commit(); }), HasSubstr("--json: cannot write '" + target + "'"));
  EXPECT_THAT(entries(), ::testing::ElementsAre("r.json"));
  EXPECT_TRUE(fs::is_directory(dir_ / "r.json" / "inside"));
}

TEST_F(OutputFile, KeepAsRenamesTheFileElsewhere) {
  {
    PendingFile file("--output", path("c.yaml"), "rejected text");
    file.keep_as(path("c.yaml.rejected"));
  }
  EXPECT_THAT(entries(), ::testing::ElementsAre("c.yaml.rejected"));
  EXPECT_EQ(read_file(path("c.yaml.rejected")), "rejected text");
}

}  // namespace
