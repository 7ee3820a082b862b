#include "sim/cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace moesim::cli {

Progress::Progress(std::size_t total, std::string label, std::string units, bool plain_lines)
    : total_(total), label_(std::move(label)), units_(std::move(units)), tty_(::isatty(STDERR_FILENO) == 1), plain_lines_(plain_lines),
      start_(Clock::now()) {}

void Progress::update(std::size_t done) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double eta = done == 0 ? 0.0 : elapsed / static_cast<double>(done) * static_cast<double>(total_ - done);
  const int percent = static_cast<int>(100 * done / std::max<std::size_t>(total_, 1));
  if (tty_) {
    const auto now = Clock::now();
    if (done != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int filled = total_ == 0 ? kWidth : static_cast<int>(kWidth * done / total_);
    std::fprintf(stderr, "\r[%s%s] %3d%% %zu/%zu  elapsed %.1f s  ETA %.1f s ", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), percent, done, total_, elapsed, eta);
    if (done == total_) std::fputc('\n', stderr);
    std::fflush(stderr);
    return;
  }
  if (!plain_lines_) return;
  const std::size_t decile = total_ == 0 ? 10 : 10 * done / total_;
  if (decile > last_decile_ || done == total_) {
    last_decile_ = decile;
    std::fprintf(stderr, "%s: %zu/%zu %s (%d%%), elapsed %.1f s, eta %.1f s\n", label_.c_str(), done, total_,
                 units_.c_str(), percent, elapsed, eta);
  }
}

}  // namespace moesim::cli
