// Progress of a long command on stderr, never on stdout (which may carry a CSV or JSON): a
// redrawn bar with an ETA on a terminal; otherwise, when `plain_lines`, a line every 10% (logs and
// CI), else nothing (`moesim plan --global-batch`, whose stderr the docs show verbatim).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace moesim::cli {

class Progress {
 public:
  // The plain lines read "<label>: 3/10 <units> (30%), elapsed ..., eta ...".
  Progress(std::size_t total, std::string label, std::string units, bool plain_lines = true);

  void update(std::size_t done);

 private:
  using Clock = std::chrono::steady_clock;
  std::size_t total_;
  std::string label_;
  std::string units_;
  bool tty_;
  bool plain_lines_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  std::size_t last_decile_ = 0;
};

}  // namespace moesim::cli
