// read_input_file (sim/core/input_file.h): the text of a regular file within the limit, and an
// InputError naming the path for everything else, devices and FIFOs included, which used to be
// read without end.
#include "sim/core/input_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <sys/stat.h>

#include "tests/sim/spec/spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using testing::input_error_of;
using testing::TempFiles;

TEST(InputFile, ReadsARegularFileUpToTheLimit) {
  TempFiles t;
  const std::string path = t.write("ten.txt", "0123456789");
  EXPECT_EQ(read_input_file(path, 10, "file"), "0123456789");
  EXPECT_EQ(read_input_file(t.write("empty.txt", ""), 10, "file"), "");
  EXPECT_THAT(input_error_of([&] { read_input_file(path, 9, "nccl-tests log"); }),
              HasSubstr(path + ": nccl-tests log larger than 9 bytes"));
}

TEST(InputFile, NamesAMissingFile) {
  TempFiles t;
  const std::string path = t.path("missing.log");
  EXPECT_THAT(input_error_of([&] { read_input_file(path, 10, "nccl-tests log"); }),
              HasSubstr("cannot open nccl-tests log '" + path + "': no such file"));
}

TEST(InputFile, RefusesWhatIsNotARegularFile) {
  TempFiles t;
  EXPECT_THAT(input_error_of([] { read_input_file("/dev/zero", 1 << 20, "file"); }),
              HasSubstr("'/dev/zero' is not a regular file"));
  t.write("sub/a.txt", "a");
  EXPECT_THAT(input_error_of([&] { read_input_file(t.path("sub"), 1 << 20, "file"); }),
              HasSubstr("is not a regular file"));
  const std::string fifo = t.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(input_error_of([&] { read_input_file(fifo, 1 << 20, "graph file"); }),
              HasSubstr("'" + fifo + "' is not a regular file"));
}

}  // namespace
}  // namespace moesim
