// The driver of a fuzz target in a build without libFuzzer (g++): runs every file under the paths
// given (files, or folders read recursively) through LLVMFuzzerTestOneInput once, so the seed
// corpus and the inputs the fuzzer kept are regression-tested in every build. A finding aborts
// with the file that caused it named on stderr.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <typeinfo>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

std::string g_current;  // the input being run, for the terminate handler

std::vector<fs::path> inputs_under(const std::vector<std::string>& paths) {
  std::vector<fs::path> out;
  for (const std::string& p : paths) {
    if (fs::is_directory(p)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) found.push_back(e.path());
      std::sort(found.begin(), found.end());  // a stable order, for reproducible output
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(p)) {
      out.emplace_back(p);
    } else {
      std::cerr << "replay: no such file or folder: " << p << "\n";
      std::exit(2);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " FILE|FOLDER...\n";
    return 2;
  }
  std::set_terminate([] {
    std::cerr << "replay: finding on input " << g_current << ": ";
    try {
      if (auto e = std::current_exception()) std::rethrow_exception(e);
      std::cerr << "terminate without an exception\n";
    } catch (const std::exception& e) {
      std::cerr << "uncaught " << typeid(e).name() << ": " << e.what() << "\n";
    } catch (...) {
      std::cerr << "uncaught exception of unknown type\n";
    }
    std::abort();
  });
  const std::vector<fs::path> inputs = inputs_under(std::vector<std::string>(argv + 1, argv + argc));
  if (inputs.empty()) {
    std::cerr << "replay: no inputs under the paths given\n";
    return 1;
  }
  std::uintmax_t bytes = 0;
  for (const fs::path& input : inputs) {
    g_current = input.string();
    std::ifstream in(input, std::ios::binary);
    const std::string data{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (!in.good() && !in.eof()) {
      std::cerr << "replay: cannot read " << g_current << "\n";
      return 2;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    bytes += data.size();
  }
  std::cout << "replayed " << inputs.size() << " inputs (" << bytes << " bytes) without a finding\n";
  return 0;
}
