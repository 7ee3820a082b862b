// Helpers for the spec tests: a private temporary directory for bad inputs, and capturing the
// message of the InputError a loader raises.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <unistd.h>

#include "sim/core/error.h"
#include "sim/spec/loader.h"

namespace moesim::testing {

// MLA of 2 heads: q LoRA rank 4, kv LoRA rank 3, 2 no-rope and 1 rope dims, values of 2.
inline AttentionSpec tiny_mla() {
  return {.kind = AttentionKind::kMla,
          .num_heads = 2,
          .q_lora_rank = 4,
          .kv_lora_rank = 3,
          .qk_nope_head_dim = 2,
          .qk_rope_head_dim = 1,
          .v_head_dim = 2};
}

class TempFiles {
 public:
  TempFiles() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("moesim_spec_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TempFiles() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;

  // Writes `text` to dir/name (creating subdirectories) and returns the path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path p = dir_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << text;
    return p.string();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

// The message of the InputError `f` raises; a test failure when it raises none.
inline std::string input_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return {};
}

// The message of the InputError raised when `text` is loaded as a calibration file (bad.yaml).
inline std::string calibration_error(TempFiles& t, const std::string& text) {
  const std::string path = t.write("bad.yaml", text);
  return input_error_of([&] { load_calibration(path); });
}

// Replaces the first occurrence of `from` (which must occur) in `text`.
inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

}  // namespace moesim::testing
